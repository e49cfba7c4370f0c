-- Privileges: after CREATE EXTENSION, PUBLIC can use nothing of idem; the
-- GRANT that doc/api.md documents lets an application role claim, complete,
-- replay and record webhooks, and still not touch idem's tables; no function
-- is SECURITY DEFINER without a pinned search_path; the scope is no
-- permission, and the wrappers doc/api.md gives make it one; the tables and
-- the sequence are dumped by pg_dump.  Roles are cluster-wide: they are named
-- regress_idem_* and dropped at the end, so the test can run again.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;

-- leftovers of an interrupted earlier run
DO $$
DECLARE
    r name;
BEGIN
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname IN
             ('regress_idem_nobody', 'regress_idem_app', 'regress_idem_monitor',
              'regress_idem_m7', 'regress_idem_m8', 'regress_idem_admin')
    LOOP
        EXECUTE format('DROP OWNED BY %I', r);
        EXECUTE format('DROP ROLE %I', r);
    END LOOP;
END $$;

CREATE ROLE regress_idem_nobody;
CREATE ROLE regress_idem_app;
CREATE ROLE regress_idem_monitor;
CREATE ROLE regress_idem_m7;
CREATE ROLE regress_idem_m8;
CREATE ROLE regress_idem_admin;
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS regress_idem_tenant CASCADE;
RESET client_min_messages;

-- Run a statement; show its SQLSTATE and message instead of failing
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- Every right a role has on the extension's objects: functions it may
-- execute, and any privilege on its tables, sequence, view and schema
CREATE FUNCTION pg_temp.idem_rights(r name) RETURNS TABLE (object text, privilege text)
LANGUAGE sql AS $$
  SELECT p.oid::regprocedure::text, 'EXECUTE'
  FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
  WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
    AND d.refclassid = 'pg_extension'::regclass
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
    AND has_function_privilege(r, p.oid, 'EXECUTE')
  UNION ALL
  SELECT c.oid::regclass::text, priv
  FROM pg_depend d JOIN pg_class c ON c.oid = d.objid,
       unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS priv
  WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
    AND d.refclassid = 'pg_extension'::regclass
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
    AND c.relkind IN ('r', 'v') AND has_table_privilege(r, c.oid, priv)
  UNION ALL
  SELECT c.oid::regclass::text, priv
  FROM pg_depend d JOIN pg_class c ON c.oid = d.objid,
       unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) AS priv
  WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
    AND d.refclassid = 'pg_extension'::regclass
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
    AND c.relkind = 'S' AND has_sequence_privilege(r, c.oid, priv)
  UNION ALL
  SELECT 'schema idem', priv
  FROM unnest(ARRAY['USAGE', 'CREATE']) AS priv
  WHERE has_schema_privilege(r, 'idem', priv)
  ORDER BY 1, 2
$$;

-- what the extension consists of
SELECT count(*) FILTER (WHERE d.classid = 'pg_proc'::regclass) AS functions,
       count(*) FILTER (WHERE c.relkind = 'r') AS tables,
       count(*) FILTER (WHERE c.relkind = 'S') AS sequences,
       count(*) FILTER (WHERE c.relkind = 'v') AS views
FROM pg_depend d LEFT JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
WHERE d.deptype = 'e' AND d.refclassid = 'pg_extension'::regclass
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem');

--
-- PUBLIC: a role with no grants can execute no function and read nothing
--
SELECT * FROM pg_temp.idem_rights('regress_idem_nobody');
-- nor does any ACL of the extension's objects name PUBLIC (grantee 0)
SELECT p.oid::regprocedure AS public_function
FROM pg_proc p, aclexplode(p.proacl) a
WHERE a.grantee = 0 AND p.oid IN (SELECT objid FROM pg_depend WHERE deptype = 'e'
      AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem'));
SELECT c.oid::regclass AS public_relation
FROM pg_class c, aclexplode(c.relacl) a
WHERE a.grantee = 0 AND c.oid IN (SELECT objid FROM pg_depend WHERE deptype = 'e'
      AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem'));

SET ROLE regress_idem_nobody;
SELECT pg_temp.err($q$SELECT idem_claim('priv-0', scope => 'regress-priv')$q$);
SELECT pg_temp.err($q$SELECT idem_http_claim('priv-0', scope => 'regress-priv')$q$);
SELECT pg_temp.err($q$SELECT idem_webhook('regress-priv', 'evt-0')$q$);
SELECT pg_temp.err($q$SELECT idem_fingerprint('{}')$q$);
SELECT pg_temp.err($q$SELECT idem_wechatpay_decrypt(repeat('k', 32), '{}')$q$);
SELECT pg_temp.err($q$SELECT idem_webhook_source_set('regress-priv', 'github', '{s}')$q$);
SELECT pg_temp.err($q$SELECT idem_webhook_source_drop('regress-priv')$q$);
SELECT pg_temp.err($q$SELECT * FROM idem_webhook_receive('regress-priv', 'p', '{}')$q$);
SELECT pg_temp.err($q$SELECT idem_webhook_order('regress-priv', 'pi_1', now())$q$);
SELECT pg_temp.err($q$SELECT * FROM idem_webhook_receive_ordered('regress-priv', 'p', '{}')$q$);
SELECT pg_temp.err($q$SELECT * FROM idem_webhook_sources$q$);
SELECT pg_temp.err($q$SELECT * FROM idem.webhook_sources$q$);
SELECT pg_temp.err($q$SELECT * FROM idem.keys$q$);
SELECT pg_temp.err($q$SELECT * FROM idem_stats$q$);
RESET ROLE;
-- nothing was written by the refused calls
SELECT count(*) AS rows FROM idem.keys WHERE scope = 'regress-priv';
SELECT count(*) AS sources FROM idem.webhook_sources WHERE source = 'regress-priv';

--
-- The application role, with the GRANT of doc/api.md (copied verbatim,
-- with the role's name)
--
GRANT EXECUTE ON FUNCTION
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
    idem_webhook_receive(text, text, jsonb, inet),
    idem_webhook_order(text, text, timestamptz, text, interval),
    idem_webhook_receive_ordered(text, text, jsonb, inet, text, timestamptz),
    idem_wechatpay_decrypt(text, jsonb),
    idem_http_claim(text, bytea, text, interval, interval, interval),
    idem_http_respond(text, integer, text, text, bigint),
    idem_http_respond_retryable(text, integer, text, text, bigint)
TO regress_idem_app;
SELECT * FROM pg_temp.idem_rights('regress_idem_app');

SET ROLE regress_idem_app;
-- two-phase: claim, then complete with the token in a later transaction
SELECT status, attempt, token AS t1
FROM idem_claim('priv-1', idem_fingerprint('{"amount": 100}'), scope => 'regress-priv', lease => '30 s') \gset
SELECT :'status' AS status, :attempt AS attempt;
SELECT idem_checkpoint('priv-1', 'charged', '{"charge": "ch_1"}', scope => 'regress-priv', token => :t1);
SELECT idem_complete('priv-1', '{"charge": "ch_1"}', scope => 'regress-priv', token => :t1);
-- replay
SELECT status, attempt, response
FROM idem_claim('priv-1', idem_fingerprint('{"amount": 100.00}'), scope => 'regress-priv');
SELECT status FROM idem_claim('priv-1', idem_fingerprint('{"amount": 200}'), scope => 'regress-priv');
-- in-transaction, with a final failure
BEGIN;
SELECT status FROM idem_claim('priv-2', scope => 'regress-priv');
SELECT idem_fail('priv-2', '{"code": "card_declined"}', retryable => false, scope => 'regress-priv');
COMMIT;
SELECT status, response FROM idem_claim('priv-2', scope => 'regress-priv');
-- an HTTP request, and its replay
BEGIN;
SELECT status FROM idem_http_claim('priv-3', scope => 'regress-priv');
SELECT idem_http_respond('priv-3', 201, '{"id": 1}', scope => 'regress-priv');
COMMIT;
SELECT status, http_status, body FROM idem_http_claim('priv-3', scope => 'regress-priv');
-- an HTTP request that fails for now: released, and its retry runs again
BEGIN;
SELECT status FROM idem_http_claim('priv-4', scope => 'regress-priv');
SELECT idem_http_respond_retryable('priv-4', 503, '{"error": "gateway"}', scope => 'regress-priv');
COMMIT;
BEGIN;
SELECT status, attempt FROM idem_http_claim('priv-4', scope => 'regress-priv');
ROLLBACK;
SELECT state, attempt, checkpoint FROM idem_lookup('priv-1', 'regress-priv');
-- webhooks
SELECT idem_webhook('regress-priv', 'evt-1') AS first, idem_webhook('regress-priv', 'evt-1') AS duplicate;
SELECT idem_webhook_verify('standard', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    '{"test": 2432232314}',
    '{"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
      "webhook-timestamp": "1614265330",
      "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}',
    NULL) AS genuine;
SELECT idem_wechatpay_decrypt(repeat('k', 32), '{}') AS not_a_resource;
-- in order: the newest event of an object, written without a right on the table
SELECT idem_webhook_order('regress-priv', 'pi_1', '2026-01-01 10:00Z', 'evt-2') AS newest,
       idem_webhook_order('regress-priv', 'pi_1', '2026-01-01 09:00Z', 'evt-3') AS older;
SELECT status, reason FROM idem_webhook_receive_ordered('regress-priv', 'p', '{}');
-- keys
SELECT idem_canonical('{"b": 1.50, "a": 2}') AS canonical,
       length(idem_key('a', 'b')) AS key_length,
       idem_payment_key('m1', 'o1', 100, 'usd', '2026-01-02') AS payment_key;
-- still no access to the tables, the sequence or the operators' functions
SELECT pg_temp.err($q$SELECT * FROM idem.keys$q$);
SELECT pg_temp.err($q$UPDATE idem.keys SET state = 'completed'$q$);
SELECT pg_temp.err($q$SELECT * FROM idem.webhooks$q$);
SELECT pg_temp.err($q$SELECT * FROM idem.webhook_order$q$);
SELECT pg_temp.err($q$SELECT nextval('idem.token_seq')$q$);
SELECT pg_temp.err($q$SELECT idem_stats_reset()$q$);
SELECT pg_temp.err($q$SELECT idem_purge()$q$);
SELECT pg_temp.err($q$SELECT * FROM idem_stats$q$);
-- nor to the webhook sources: their secrets cannot be read, and only the
-- admin role below configures them
SELECT pg_temp.err($q$SELECT idem_webhook_source_set('regress-priv', 'github', '{s}')$q$);
SELECT pg_temp.err($q$SELECT idem_webhook_source_drop('regress-priv')$q$);
SELECT pg_temp.err($q$SELECT * FROM idem_webhook_sources$q$);
SELECT pg_temp.err($q$SELECT * FROM idem.webhook_sources$q$);
RESET ROLE;

--
-- The admin role of webhook sources, with the GRANT of doc/api.md (copied
-- verbatim, with the role's name): it sets and drops sources and reads the
-- view, through functions that write idem.webhook_sources directly; it can
-- read no secret back
--
GRANT EXECUTE ON FUNCTION
    idem_webhook_source_set(text, text, text[], interval, cidr[], interval),
    idem_webhook_source_drop(text)
TO regress_idem_admin;
GRANT SELECT ON idem_webhook_sources TO regress_idem_admin;
SELECT * FROM pg_temp.idem_rights('regress_idem_admin');
SET ROLE regress_idem_admin;
SELECT idem_webhook_source_set('regress-priv', 'github', '{regress-secret-1}');
SELECT idem_webhook_source_set('regress-priv-2', 'github', '{regress-secret-2}');
SELECT idem_webhook_source_drop('regress-priv-2') AS dropped;
SELECT source, scheme, secret_count FROM idem_webhook_sources WHERE source LIKE 'regress-priv%';
SELECT pg_temp.err($q$SELECT * FROM idem.webhook_sources$q$);
SELECT pg_temp.err($q$SELECT idem_claim('priv-admin', scope => 'regress-priv')$q$);
RESET ROLE;
SELECT source, secrets FROM idem.webhook_sources WHERE source LIKE 'regress-priv%';

-- The application role receives deliveries of the source the admin set: a
-- C function that reads the table directly, with EXECUTE alone (the
-- signature: openssl dgst -sha256 -hmac regress-secret-1)
SET ROLE regress_idem_app;
SELECT * FROM idem_webhook_receive('regress-priv', 'Hello, World!',
    '{"X-Hub-Signature-256": "sha256=06f3f04e8756c4e0d500d2152fd04c4a1f5557bcaf9c9d47e81ffba1f24f0341",
      "X-GitHub-Delivery": "gh-priv-1"}');
RESET ROLE;

--
-- The scope is a namespace, not a permission: a role that may call the
-- functions acts on every scope.  Tokens are sequential, so a role that
-- sees its own token can guess the one handed out just before it, to a
-- claim of another scope, and complete that claim.
--
GRANT EXECUTE ON FUNCTION
    idem_claim(text, bytea, text, interval, interval, boolean),
    idem_complete(text, jsonb, text, bigint)
TO regress_idem_m8;
SET ROLE regress_idem_m8;
SELECT token AS victim FROM idem_claim('priv-m8', scope => 'regress-priv-m8', lease => '1 hour') \gset
RESET ROLE;
SET ROLE regress_idem_app;
SELECT token AS own FROM idem_claim('priv-app', scope => 'regress-priv', lease => '1 hour') \gset
SELECT :own - 1 = :victim AS guessable;
SELECT pg_temp.err(format($q$SELECT idem_complete('priv-m8', '"not yours"', scope => 'regress-priv-m8', token => %s)$q$, :own - 1));
RESET ROLE;
SET ROLE regress_idem_m8;
SELECT status, response FROM idem_claim('priv-m8', scope => 'regress-priv-m8');
RESET ROLE;
REVOKE ALL ON FUNCTION
    idem_claim(text, bytea, text, interval, interval, boolean),
    idem_complete(text, jsonb, text, bigint)
FROM regress_idem_m8;

-- The remedy of doc/api.md: each tenant logs in as its own role and may
-- call only wrappers that fix the scope to that role's name (copied
-- verbatim, with the schema's and the roles' names).  SET SESSION
-- AUTHORIZATION stands for the tenants' logins.
CREATE SCHEMA regress_idem_tenant;
CREATE FUNCTION regress_idem_tenant.claim(key text, fingerprint bytea DEFAULT NULL,
                             lease interval DEFAULT NULL, ttl interval DEFAULT NULL,
                             OUT status text, OUT token bigint, OUT attempt integer,
                             OUT response jsonb, OUT checkpoint text,
                             OUT checkpoint_data jsonb, OUT retry_after interval)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM public.idem_claim(key, fingerprint, session_user::text, lease, ttl) $$;
CREATE FUNCTION regress_idem_tenant.complete(key text, response jsonb DEFAULT NULL,
                                token bigint DEFAULT NULL)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT public.idem_complete(key, response, session_user::text, token) $$;
REVOKE ALL ON FUNCTION regress_idem_tenant.claim(text, bytea, interval, interval),
                       regress_idem_tenant.complete(text, jsonb, bigint) FROM PUBLIC;
GRANT USAGE ON SCHEMA regress_idem_tenant TO regress_idem_m7, regress_idem_m8;
GRANT EXECUTE ON FUNCTION regress_idem_tenant.claim(text, bytea, interval, interval),
                          regress_idem_tenant.complete(text, jsonb, bigint)
TO regress_idem_m7, regress_idem_m8;

SET SESSION AUTHORIZATION regress_idem_m8;
SELECT token AS victim FROM regress_idem_tenant.claim('priv-w', lease => '1 hour') \gset
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_idem_m7;
SELECT token AS own FROM regress_idem_tenant.claim('priv-w', lease => '1 hour') \gset
SELECT :own - 1 = :victim AS guessable;
-- the guessed token, through the wrapper: its scope holds no claim of that
-- token; and idem's own functions are out of reach
SELECT regexp_replace(pg_temp.err(format($q$SELECT regress_idem_tenant.complete('priv-w', '"not yours"', token => %s)$q$, :own - 1)),
                      'token \d+', 'token N');
SELECT pg_temp.err(format($q$SELECT idem_complete('priv-w', '"not yours"', scope => 'regress_idem_m8', token => %s)$q$, :own - 1));
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_idem_m8;
SELECT regress_idem_tenant.complete('priv-w', '"mine"', token => :victim);
SELECT status, response FROM regress_idem_tenant.claim('priv-w');
RESET SESSION AUTHORIZATION;
-- one key per tenant, each in its own login role's scope
SELECT scope, key, state FROM idem.keys WHERE key = 'priv-w' ORDER BY scope;

--
-- The monitoring role, with the GRANT of doc/api.md: the counters only
--
GRANT SELECT ON idem_stats TO regress_idem_monitor;
GRANT EXECUTE ON FUNCTION idem.stats_1_0() TO regress_idem_monitor;
SELECT * FROM pg_temp.idem_rights('regress_idem_monitor');
-- and what it reads, as that role: the counters and the purge's backlog
GRANT SELECT ON idem_keys_in_progress TO regress_idem_monitor;
GRANT EXECUTE ON FUNCTION idem.stats_1_3(), idem.purge_backlog() TO regress_idem_monitor;
GRANT USAGE ON SCHEMA idem TO regress_idem_monitor;
SET ROLE regress_idem_monitor;
SELECT count(*) AS stats_rows FROM idem_stats;
SELECT count(*) AS in_progress_rows FROM idem_keys_in_progress WHERE false;
SELECT "table" FROM idem.purge_backlog() ORDER BY 1;
RESET ROLE;
REVOKE USAGE ON SCHEMA idem FROM regress_idem_monitor;
REVOKE SELECT ON idem_keys_in_progress FROM regress_idem_monitor;
REVOKE EXECUTE ON FUNCTION idem.stats_1_3(), idem.purge_backlog() FROM regress_idem_monitor;

-- A maintenance role, with the GRANT of doc/api.md (the admin role here):
-- it purges expired keys, deliveries and objects' newest events without a
-- right on the tables or schema idem
GRANT EXECUTE ON FUNCTION idem_purge(integer), idem_stats_reset() TO regress_idem_admin;
SELECT idem_webhook_order('regress-priv', 'pi_purged', '2026-01-01 10:00Z', 'evt-purged') AS newest;
UPDATE idem.webhook_order SET expires_at = now() - interval '1 second' WHERE object_id = 'pi_purged';
UPDATE idem.webhooks SET expires_at = now() - interval '1 second' WHERE event_id = 'evt-purged';
SET ROLE regress_idem_admin;
SELECT idem_purge() >= 2 AS purged;
RESET ROLE;
SELECT count(*) AS left_behind FROM idem.webhook_order WHERE object_id = 'pi_purged';
REVOKE EXECUTE ON FUNCTION idem_purge(integer), idem_stats_reset() FROM regress_idem_admin;

--
-- SECURITY DEFINER functions must pin search_path
--
SELECT count(*) AS security_definer_functions
FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
WHERE d.deptype = 'e' AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
  AND p.prosecdef;
SELECT p.oid::regprocedure AS definer_without_search_path
FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
WHERE d.deptype = 'e' AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
  AND p.prosecdef
  AND NOT EXISTS (SELECT FROM unnest(p.proconfig) AS c WHERE c LIKE 'search\_path=%');

--
-- The functions with a fast path keep their catalog rows under 2 kB: pg_proc
-- compresses a longer row's argument arrays too, and every call would
-- decompress them (the SQL edition's idem_claim keeps its body short)
--
SELECT p.oid::regprocedure AS compressed_arguments
FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
WHERE d.deptype = 'e' AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
  AND p.proname IN ('idem_claim', 'idem_complete', 'idem_webhook')
  AND coalesce(pg_column_compression(p.proallargtypes), pg_column_compression(p.proargmodes),
               pg_column_compression(p.proargnames)) IS NOT NULL;

--
-- pg_dump keeps the rows: the tables and the sequence are configuration
-- relations of the extension, dumped whole (no filter condition)
--
SELECT cfg::regclass AS dumped, cond AS filter
FROM pg_extension, unnest(extconfig, extcondition) AS u(cfg, cond)
WHERE extname = 'idem'
ORDER BY cfg::regclass::text;

-- clean up: the rows, the grants and the roles
DELETE FROM idem.keys
WHERE scope IN ('regress-priv', 'regress-priv-m8', 'regress_idem_m7', 'regress_idem_m8');
DELETE FROM idem.webhooks WHERE source = 'regress-priv';
DELETE FROM idem.webhook_order WHERE source = 'regress-priv';
DELETE FROM idem.webhook_sources WHERE source LIKE 'regress-priv%';
DROP FUNCTION regress_idem_tenant.claim(text, bytea, interval, interval),
              regress_idem_tenant.complete(text, jsonb, bigint);
DROP SCHEMA regress_idem_tenant;
DROP OWNED BY regress_idem_nobody, regress_idem_app, regress_idem_monitor,
    regress_idem_m7, regress_idem_m8, regress_idem_admin;
DROP ROLE regress_idem_nobody, regress_idem_app, regress_idem_monitor,
    regress_idem_m7, regress_idem_m8, regress_idem_admin;
