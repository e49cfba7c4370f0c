/* idem--1.5--1.6.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem UPDATE TO '1.6'" to load this file. \quit

-- 1.6 drops the indexes on expires_at.  Each cost every claim and every
-- webhook delivery a B-tree insert (66 bytes of WAL, 23 bytes a key on
-- disk) for the purge alone, which now reads the tables in physical order
-- and skips what an expiry map in shared memory knows holds nothing to
-- delete (doc/architecture.md, "The purge").  Each DROP INDEX holds its
-- table's ACCESS EXCLUSIVE lock for a moment: run the update with a
-- lock_timeout (doc/install.md, "Upgrading").

-- idem writes its tables without the executor, so this trigger fires only
-- for a statement that writes them without idem (SQL, COPY, a restore): the
-- map then forgets the table, whose rows may expire anywhere.  ALWAYS: also
-- under session_replication_role = replica.
CREATE FUNCTION idem.expiry_outside_write() RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_expiry_outside_write' LANGUAGE C;
REVOKE ALL ON FUNCTION idem.expiry_outside_write() FROM PUBLIC;

CREATE TRIGGER keys_outside_write AFTER INSERT OR UPDATE ON idem.keys
    FOR EACH STATEMENT EXECUTE FUNCTION idem.expiry_outside_write();
ALTER TABLE idem.keys ENABLE ALWAYS TRIGGER keys_outside_write;
CREATE TRIGGER webhooks_outside_write AFTER INSERT OR UPDATE ON idem.webhooks
    FOR EACH STATEMENT EXECUTE FUNCTION idem.expiry_outside_write();
ALTER TABLE idem.webhooks ENABLE ALWAYS TRIGGER webhooks_outside_write;

-- What the purge has left to do, for monitoring: without the indexes a
-- count of expired rows would read the tables whole; this reads where the
-- expiry map does not know there is nothing.  Counts and times only, so
-- monitoring/idem_monitor.sql grants it to the exporter's role.
CREATE FUNCTION idem.purge_backlog(OUT "table" text, OUT expired bigint,
                                   OUT oldest timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_purge_backlog' LANGUAGE C STABLE;
REVOKE ALL ON FUNCTION idem.purge_backlog() FROM PUBLIC;

DROP INDEX idem.keys_expires_at_idx;
DROP INDEX idem.webhooks_expires_at_idx;
