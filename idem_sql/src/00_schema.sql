-- The tables, as the C edition's (idem--1.0.sql and the updates after it):
-- the same schema, names, columns and keys, so that idem_keys_export and
-- idem_webhooks_export write the same JSON from either edition.  Two
-- differences, each for want of what the C edition keeps in shared memory:
-- the tables keep their indexes on expires_at (the purge finds expired rows
-- through them: the C edition's expiry map is shared memory), and there is
-- no outside-write trigger (it only tells that map to forget a table).
--
-- Every statement here may run again over an earlier version's objects (the
-- plain script idem_sql.sql is also how a database without pg_tle updates):
-- CREATE ... IF NOT EXISTS, CREATE OR REPLACE.

CREATE SCHEMA IF NOT EXISTS idem;
REVOKE ALL ON SCHEMA idem FROM PUBLIC;
COMMENT ON SCHEMA idem IS 'storage of the idem extension (SQL edition): use the idem_* functions, not these tables';

-- Fencing tokens: unique across every claim ever made in the database.
CREATE SEQUENCE IF NOT EXISTS idem.token_seq AS bigint;

-- One row per (scope, key); state is processing, completed, failed or
-- released (idem--1.0.sql says more).
CREATE TABLE IF NOT EXISTS idem.keys (
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
    http_status     smallint,
    body            text,
    CONSTRAINT keys_pkey PRIMARY KEY (key, scope)
) WITH (fillfactor = 80);
CREATE INDEX IF NOT EXISTS keys_expires_at_idx ON idem.keys (expires_at);

-- One row per webhook delivery or queue message seen.
CREATE TABLE IF NOT EXISTS idem.webhooks (
    source      text        COLLATE "C" NOT NULL,
    event_id    text        COLLATE "C" NOT NULL,
    received_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    CONSTRAINT webhooks_pkey PRIMARY KEY (event_id, source)
);
CREATE INDEX IF NOT EXISTS webhooks_expires_at_idx ON idem.webhooks (expires_at);

-- Webhook sources (idem--1.2--1.3.sql says more).  Only the extension's
-- owner reads it: the SECURITY DEFINER functions of the edition do.
CREATE TABLE IF NOT EXISTS idem.webhook_sources (
    source      text COLLATE "C" NOT NULL,
    scheme      text NOT NULL,
    secrets     text[] NOT NULL,
    tolerance   interval NOT NULL,
    allowed_ips cidr[],
    ttl         interval,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT webhook_sources_pkey PRIMARY KEY (source)
);

REVOKE ALL ON idem.keys, idem.webhooks, idem.webhook_sources, idem.token_seq FROM PUBLIC;

-- pg_dump keeps the rows and the token sequence.
SELECT pg_catalog.pg_extension_config_dump('idem.keys', ''); -- extension only
SELECT pg_catalog.pg_extension_config_dump('idem.webhooks', ''); -- extension only
SELECT pg_catalog.pg_extension_config_dump('idem.webhook_sources', ''); -- extension only
SELECT pg_catalog.pg_extension_config_dump('idem.token_seq', ''); -- extension only

-- HMAC-SHA256 through pgcrypto, wherever its schema is (found now; the
-- extension requires pgcrypto, and a plain install needs it created first).
-- Every other function calls this one, never hmac() by name, so their
-- search_path can stay pinned to idem and pg_catalog.  Its body names
-- pgcrypto's schema, so it needs no search_path of its own, and without one
-- it is inlined into its callers (about 20 us less a signature).
DO $do$
DECLARE
    s name;
BEGIN
    SELECT n.nspname INTO s
      FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'pgcrypto';
    IF s IS NULL THEN
        RAISE EXCEPTION 'idem_sql needs pgcrypto'
            USING ERRCODE = 'undefined_object',
                  HINT = 'Run CREATE EXTENSION pgcrypto first (it is a trusted extension: the database''s owner may create it).';
    END IF;
    EXECUTE pg_catalog.format($f$
        CREATE OR REPLACE FUNCTION idem.hmac_sha256(data bytea, key bytea) RETURNS bytea
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS 'SELECT %I.hmac(data, key, ''sha256'')'$f$, s);
    EXECUTE pg_catalog.format($f$
        CREATE OR REPLACE FUNCTION idem.hmac_sha512(data bytea, key bytea) RETURNS bytea
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS 'SELECT %I.hmac(data, key, ''sha512'')'$f$, s);
END
$do$;
REVOKE ALL ON FUNCTION idem.hmac_sha256(bytea, bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem.hmac_sha512(bytea, bytea) FROM PUBLIC;
