/* idem--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem UPDATE TO '1.3'" to load this file. \quit

-- WeChat Pay notifications carry their content encrypted (AES-256-GCM under
-- the merchant's APIv3 key): the plaintext of the resource, NULL when it
-- does not authenticate.  It depends on its arguments alone.  The
-- "wechatpay" scheme of idem_webhook_verify needs no SQL change.
CREATE FUNCTION idem_wechatpay_decrypt(api_v3_key text, resource jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'idem_wechatpay_decrypt' LANGUAGE C IMMUTABLE PARALLEL SAFE;

REVOKE ALL ON FUNCTION idem_wechatpay_decrypt(text, jsonb) FROM PUBLIC;

-- More counters: claims that took over an attempt, finishing calls
-- refused for a stale token (ID001), webhook deliveries rejected by
-- idem_webhook_receive.  A new function under a new name, as
-- pg_stat_statements does: the 1.2 view, on idem.stats_1_0(), keeps working
-- with this library until ALTER EXTENSION UPDATE replaces it; the view keeps
-- its grants (CREATE OR REPLACE VIEW adds the columns at its end).
CREATE FUNCTION idem.stats_1_3(OUT dbid oid, OUT claimed bigint, OUT completed bigint,
                               OUT failed bigint, OUT replayed bigint,
                               OUT in_progress bigint, OUT mismatched bigint,
                               OUT webhooks_new bigint, OUT webhooks_duplicate bigint,
                               OUT purged bigint, OUT last_purge_at timestamptz,
                               OUT taken_over bigint, OUT stale_tokens bigint,
                               OUT webhooks_rejected bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_stats_1_3' LANGUAGE C VOLATILE PARALLEL SAFE;
REVOKE ALL ON FUNCTION idem.stats_1_3() FROM PUBLIC;

CREATE OR REPLACE VIEW idem_stats AS
    SELECT d.datname, s.claimed, s.completed, s.failed, s.replayed, s.in_progress,
           s.mismatched, s.webhooks_new, s.webhooks_duplicate, s.purged,
           s.last_purge_at, s.taken_over, s.stale_tokens, s.webhooks_rejected
    FROM idem.stats_1_3() s
    LEFT JOIN pg_catalog.pg_database d ON d.oid = s.dbid;

-- A view's user needs EXECUTE on the functions the view calls: whoever was
-- granted idem.stats_1_0() for the 1.2 view (doc/operations.md, "A monitoring
-- role") is granted idem.stats_1_3() too, so monitoring goes on unchanged.
DO $$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT a.grantee::regrole AS grantee, a.is_grantable
        FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
        WHERE p.oid = 'idem.stats_1_0()'::pg_catalog.regprocedure
          AND a.privilege_type = 'EXECUTE'
          AND a.grantee <> 0 AND a.grantee <> p.proowner
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION idem.stats_1_3() TO %s%s',
                                  g.grantee,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;

-- Webhook sources: each source's scheme, secrets (several during a
-- rotation), timestamp tolerance, the addresses deliveries may come from
-- (NULL: any) and how long delivery ids are kept (NULL: idem.webhook_ttl).
-- Only the extension's owner reads the table: idem's C functions read and
-- write it directly, as they do idem.keys, so a role needs only EXECUTE on
-- them.  The view shows everything but the secrets.  pg_dump keeps the
-- rows, secrets included (doc/operations.md says how to leave them out).
CREATE TABLE idem.webhook_sources (
    source      text COLLATE "C" NOT NULL,
    scheme      text NOT NULL,
    secrets     text[] NOT NULL,
    tolerance   interval NOT NULL,
    allowed_ips cidr[],
    ttl         interval,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT webhook_sources_pkey PRIMARY KEY (source)
);
REVOKE ALL ON idem.webhook_sources FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('idem.webhook_sources', '');

CREATE FUNCTION idem_webhook_source_set(source text, scheme text, secrets text[],
                                        tolerance interval DEFAULT '5 minutes',
                                        allowed_ips cidr[] DEFAULT NULL,
                                        ttl interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_webhook_source_set' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idem_webhook_source_drop(source text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook_source_drop' LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW idem_webhook_sources AS
    SELECT source, scheme, pg_catalog.cardinality(secrets) AS secret_count,
           tolerance, allowed_ips, ttl, updated_at
    FROM idem.webhook_sources;

REVOKE ALL ON FUNCTION idem_webhook_source_set(text, text, text[], interval, cidr[], interval),
                       idem_webhook_source_drop(text) FROM PUBLIC;
REVOKE ALL ON idem_webhook_sources FROM PUBLIC;

-- One call for a webhook handler: the source is known, the client address
-- is allowed, the signature verifies with one of the source's secrets, the
-- event id is found, and the delivery is recorded as idem_webhook records
-- it.  status: new, duplicate or rejected (reason: unknown_source, ip,
-- timestamp, signature or malformed; nothing written).
CREATE FUNCTION idem_webhook_receive(source text, payload text, headers jsonb,
                                     client_ip inet DEFAULT NULL,
                                     OUT status text, OUT event_id text, OUT reason text)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_webhook_receive' LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION idem_webhook_receive(text, text, jsonb, inet) FROM PUBLIC;
