-- The key and webhook functions under a caller's search_path full of
-- decoys: a schema put before pg_catalog, and pg_temp, holding functions,
-- operators and types named as PostgreSQL's, each of which raises when it
-- is used.  idem's answers are the same as under the default path, and no
-- decoy runs.  (The SQL edition runs the fast paths of these functions
-- with the caller's search_path, naming everything it uses by schema; the
-- C edition's are C.)
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
DROP SCHEMA IF EXISTS decoy CASCADE;
RESET client_min_messages;

CREATE SCHEMA decoy;
CREATE FUNCTION decoy.fired(what text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'decoy % was used', what;
END
$$;
-- functions
CREATE FUNCTION decoy.octet_length(text) RETURNS integer
LANGUAGE sql AS $$ SELECT decoy.fired('octet_length(text)')::integer $$;
CREATE FUNCTION decoy.octet_length(bytea) RETURNS integer
LANGUAGE sql AS $$ SELECT decoy.fired('octet_length(bytea)')::integer $$;
CREATE FUNCTION decoy.current_setting(text) RETURNS text
LANGUAGE sql AS $$ SELECT decoy.fired('current_setting(text)')::text $$;
CREATE FUNCTION decoy.current_setting(text, boolean) RETURNS text
LANGUAGE sql AS $$ SELECT decoy.fired('current_setting(text, boolean)')::text $$;
CREATE FUNCTION decoy.clock_timestamp() RETURNS timestamptz
LANGUAGE sql AS $$ SELECT CASE WHEN decoy.fired('clock_timestamp()') THEN now() END $$;
CREATE FUNCTION decoy.now() RETURNS timestamptz
LANGUAGE sql AS $$ SELECT CASE WHEN decoy.fired('now()') THEN now() END $$;
CREATE FUNCTION decoy.pg_current_xact_id_if_assigned() RETURNS xid8
LANGUAGE sql AS $$ SELECT CASE WHEN decoy.fired('pg_current_xact_id_if_assigned()') THEN NULL::xid8 END $$;
CREATE FUNCTION decoy.nextval(regclass) RETURNS bigint
LANGUAGE sql AS $$ SELECT decoy.fired('nextval(regclass)')::integer::bigint $$;
CREATE FUNCTION decoy.pg_try_advisory_xact_lock(bigint) RETURNS boolean
LANGUAGE sql AS $$ SELECT decoy.fired('pg_try_advisory_xact_lock(bigint)') $$;
CREATE FUNCTION decoy.pg_column_size(jsonb) RETURNS integer
LANGUAGE sql AS $$ SELECT decoy.fired('pg_column_size(jsonb)')::integer $$;
CREATE FUNCTION decoy.hashtextextended(text, bigint) RETURNS bigint
LANGUAGE sql AS $$ SELECT decoy.fired('hashtextextended(text, bigint)')::integer::bigint $$;
-- operators, on each pair of types the functions compare or add
CREATE FUNCTION decoy.op(text, text) RETURNS boolean
LANGUAGE sql AS $$ SELECT decoy.fired('an operator on text') $$;
CREATE FUNCTION decoy.op(integer, integer) RETURNS boolean
LANGUAGE sql AS $$ SELECT decoy.fired('an operator on integer') $$;
CREATE FUNCTION decoy.op(bytea, bytea) RETURNS boolean
LANGUAGE sql AS $$ SELECT decoy.fired('an operator on bytea') $$;
CREATE FUNCTION decoy.op(xid, xid) RETURNS boolean
LANGUAGE sql AS $$ SELECT decoy.fired('an operator on xid') $$;
CREATE FUNCTION decoy.op(timestamptz, timestamptz) RETURNS boolean
LANGUAGE sql AS $$ SELECT decoy.fired('an operator on timestamptz') $$;
CREATE FUNCTION decoy.op(tid, tid) RETURNS boolean
LANGUAGE sql AS $$ SELECT decoy.fired('an operator on tid') $$;
CREATE FUNCTION decoy.plus(timestamptz, interval) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT CASE WHEN decoy.fired('timestamptz + interval') THEN $1 END $$;
CREATE FUNCTION decoy.minus(timestamptz, timestamptz) RETURNS interval
LANGUAGE sql AS $$ SELECT CASE WHEN decoy.fired('timestamptz - timestamptz') THEN interval '0' END $$;
DO $$
DECLARE
    op text;
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['text', 'integer', 'bytea', 'xid', 'timestamptz', 'tid'] LOOP
        FOREACH op IN ARRAY ARRAY['=', '<>', '<', '<=', '>', '>='] LOOP
            EXECUTE format('CREATE OPERATOR decoy.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = decoy.op)',
                           op, t, t);
        END LOOP;
    END LOOP;
END
$$;
CREATE OPERATOR decoy.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = decoy.plus);
CREATE OPERATOR decoy.- (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = decoy.minus);
-- types, in the decoy schema and in pg_temp (searched first for types
-- unless the path names it)
CREATE TYPE decoy.text AS (decoy integer);
CREATE TYPE decoy.timestamptz AS (decoy integer);
CREATE TYPE decoy.xid AS (decoy integer);
CREATE TYPE decoy.jsonb AS (decoy integer);
CREATE TYPE pg_temp.text AS (decoy integer);
CREATE TYPE pg_temp.timestamptz AS (decoy integer);
CREATE TYPE pg_temp.xid AS (decoy integer);
CREATE TYPE pg_temp.bytea AS (decoy integer);

-- The decoys are reached by unqualified names under this path.
SET search_path = decoy, pg_catalog, public;
SELECT octet_length('x') AS decoy_used;
SELECT 'a' = 'a' AS decoy_used;
RESET search_path;

SET search_path = decoy, pg_catalog, public;
-- a new key claimed and completed in one transaction
BEGIN;
SELECT status, attempt FROM idem_claim('hostile-1', '\x01'::pg_catalog.bytea);
SELECT idem_complete('hostile-1', '{"charge": "ch_1"}');
COMMIT;
-- its replay, and a mismatch
SELECT status, attempt, response FROM idem_claim('hostile-1', '\x01'::pg_catalog.bytea);
SELECT status FROM idem_claim('hostile-1', '\x02'::pg_catalog.bytea);
-- a committed claim: in_progress for another transaction
SELECT status, attempt FROM idem_claim('hostile-2');
SELECT status, attempt, retry_after > interval '0' AS waits FROM idem_claim('hostile-2');
-- a claim with a lease of its own, completed with its token
BEGIN;
SELECT token AS t3 FROM idem_claim('hostile-3', lease => interval '30 seconds') \gset
SELECT idem_complete('hostile-3', '{"n": 3}', token => :t3);
COMMIT;
-- nowait, and a scope
SELECT status FROM idem_claim('hostile-4', scope => 'shop', nowait => true);
-- bad input raises as under the default path
\set VERBOSITY sqlstate
SELECT status FROM idem_claim('');
SELECT idem_complete('hostile-9');
\set VERBOSITY default
-- a webhook event, then its duplicate
SELECT idem_webhook('stripe', 'evt_hostile_1') AS first;
SELECT idem_webhook('stripe', 'evt_hostile_1') AS first;
-- in order: an event, then an older one
SELECT idem_webhook_order('stripe', 'pi_hostile', '2026-01-01 10:00Z', 'evt_hostile_2') AS newest,
       idem_webhook_order('stripe', 'pi_hostile', '2026-01-01 09:00Z', 'evt_hostile_3') AS older;
RESET search_path;
-- the purge of what expired, the object's newest event among it
UPDATE idem.webhook_order SET expires_at = now() - interval '1 second' WHERE object_id = 'pi_hostile';
SET search_path = decoy, pg_catalog, public;
SELECT idem_purge() >= 1 AS purged;
RESET search_path;
SELECT count(*) AS newest_left FROM idem.webhook_order WHERE object_id = 'pi_hostile';

-- what was written
SELECT scope, key, state, attempt, response
FROM idem.keys WHERE key LIKE 'hostile-%' ORDER BY key;
SELECT source, event_id, expires_at - received_at AS ttl
FROM idem.webhooks WHERE event_id LIKE 'evt_hostile%';

SET client_min_messages = warning;
DROP SCHEMA decoy CASCADE;
DROP EXTENSION idem CASCADE;
