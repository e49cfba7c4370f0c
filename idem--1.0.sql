/* idem--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION idem" to load this file. \quit

-- The tables live in a schema of their own that applications never touch;
-- the functions go to the schema CREATE EXTENSION names (public by default).
CREATE SCHEMA idem;
REVOKE ALL ON SCHEMA idem FROM PUBLIC;
COMMENT ON SCHEMA idem IS 'storage of the idem extension: use the idem_* functions, not these tables';

-- Fencing tokens: unique across every claim ever made in the database.
CREATE SEQUENCE idem.token_seq AS bigint;

-- One row per (scope, key).  state is processing, completed, failed or
-- released (a retryable failure: the next claim takes the key at once).
-- Keys are opaque bytes: the C collation compares them as such, which is
-- also what makes the primary key cheap to search.  fillfactor leaves room
-- on the page so that completing a claim is a HOT update (no indexed column
-- changes then).
CREATE TABLE idem.keys (
    scope           text        COLLATE "C" NOT NULL,
    key             text        COLLATE "C" NOT NULL,
    state           text        NOT NULL,
    token           bigint      NOT NULL,
    attempt         integer     NOT NULL,
    fingerprint     bytea,
    lease_until     timestamptz,
    checkpoint      text,
    checkpoint_data jsonb,
    response        jsonb,
    created_at      timestamptz NOT NULL,
    completed_at    timestamptz,
    expires_at      timestamptz NOT NULL,
    -- key first: scope is often the same for every row, and each step
    -- down the index would compare it before the key
    CONSTRAINT keys_pkey PRIMARY KEY (key, scope)
) WITH (fillfactor = 80);
CREATE INDEX keys_expires_at_idx ON idem.keys (expires_at);

-- One row per webhook delivery or queue message seen.
CREATE TABLE idem.webhooks (
    source      text        COLLATE "C" NOT NULL,
    event_id    text        COLLATE "C" NOT NULL,
    received_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    CONSTRAINT webhooks_pkey PRIMARY KEY (event_id, source)
);
CREATE INDEX webhooks_expires_at_idx ON idem.webhooks (expires_at);

REVOKE ALL ON idem.keys, idem.webhooks, idem.token_seq FROM PUBLIC;

-- pg_dump keeps the rows and the token sequence.
SELECT pg_catalog.pg_extension_config_dump('idem.keys', '');
SELECT pg_catalog.pg_extension_config_dump('idem.webhooks', '');
SELECT pg_catalog.pg_extension_config_dump('idem.token_seq', '');

-- Idempotency keys

CREATE FUNCTION idem_claim(key text, fingerprint bytea DEFAULT NULL,
                           scope text DEFAULT '', lease interval DEFAULT NULL,
                           ttl interval DEFAULT NULL, nowait boolean DEFAULT false,
                           OUT status text, OUT token bigint, OUT attempt integer,
                           OUT response jsonb, OUT checkpoint text,
                           OUT checkpoint_data jsonb, OUT retry_after interval)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_claim' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idem_complete(key text, response jsonb DEFAULT NULL,
                              scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_complete' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idem_fail(key text, error jsonb DEFAULT NULL,
                          retryable boolean DEFAULT true, scope text DEFAULT '',
                          token bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idem_checkpoint(key text, phase text, data jsonb DEFAULT NULL,
                                scope text DEFAULT '', token bigint DEFAULT NULL,
                                lease interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_checkpoint' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idem_lookup(key text, scope text DEFAULT '')
RETURNS TABLE (state text, attempt integer, fingerprint bytea,
               lease_until timestamptz, checkpoint text, created_at timestamptz,
               completed_at timestamptz, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'idem_lookup' LANGUAGE C STABLE PARALLEL SAFE ROWS 1;

-- Fingerprints and deterministic keys

CREATE FUNCTION idem_canonical(request jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_canonical' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION idem_fingerprint(request jsonb)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_fingerprint' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION idem_key(VARIADIC parts text[])
RETURNS text
AS 'MODULE_PATHNAME', 'idem_key' LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION idem_payment_key(merchant_id text, merchant_order_id text,
                                 amount numeric, currency text,
                                 request_date date DEFAULT current_date)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_payment_key' LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Webhooks and queue messages

CREATE FUNCTION idem_webhook(source text, event_id text, ttl interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idem_webhook_verify(scheme text, secret text, payload text,
                                    headers jsonb,
                                    tolerance interval DEFAULT '5 minutes')
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_verify' LANGUAGE C VOLATILE PARALLEL SAFE;

-- Expiry and counters

CREATE FUNCTION idem_purge(batch_size integer DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_purge' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idem.stats_1_0(OUT dbid oid, OUT claimed bigint, OUT completed bigint,
                               OUT failed bigint, OUT replayed bigint,
                               OUT in_progress bigint, OUT mismatched bigint,
                               OUT webhooks_new bigint, OUT webhooks_duplicate bigint,
                               OUT purged bigint, OUT last_purge_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_stats_1_0' LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW idem_stats AS
    SELECT d.datname, s.claimed, s.completed, s.failed, s.replayed, s.in_progress,
           s.mismatched, s.webhooks_new, s.webhooks_duplicate, s.purged,
           s.last_purge_at
    FROM idem.stats_1_0() s
    LEFT JOIN pg_catalog.pg_database d ON d.oid = s.dbid;

CREATE FUNCTION idem_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'idem_stats_reset' LANGUAGE C VOLATILE PARALLEL SAFE;

-- Nothing is executable by PUBLIC: doc/api.md shows the GRANT for an
-- application role.  The C functions reach the tables themselves, so a role
-- needs EXECUTE only, never rights on the tables.
REVOKE ALL ON FUNCTION
    idem_claim(text, bytea, text, interval, interval, boolean),
    idem_complete(text, jsonb, text, bigint),
    idem_fail(text, jsonb, boolean, text, bigint),
    idem_checkpoint(text, text, jsonb, text, bigint, interval),
    idem_lookup(text, text),
    idem_canonical(jsonb),
    idem_fingerprint(jsonb),
    idem_key(text[]),
    idem_payment_key(text, text, numeric, text, date),
    idem_webhook(text, text, interval),
    idem_webhook_verify(text, text, text, jsonb, interval),
    idem_purge(integer),
    idem.stats_1_0(),
    idem_stats_reset()
FROM PUBLIC;
REVOKE ALL ON idem_stats FROM PUBLIC;
