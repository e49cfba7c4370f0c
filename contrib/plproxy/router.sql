-- contrib/plproxy/router.sql: the router side of a PL/Proxy deployment of idem
--
-- Run as a superuser in the router database, after CREATE EXTENSION plproxy
-- and the definition of the cluster 'payments' (doc/scaling.md shows the
-- CREATE SERVER ... FOREIGN DATA WRAPPER plproxy with one partition per
-- line).  The router holds no data and does not need idem: every function
-- here runs on one shard, picked by hashtext(merchant), or on all of them.
--
-- The routing key is the merchant, passed as the first argument: a
-- payment's idempotency key must live on the shard of the payment's own
-- rows, and those are placed by merchant.  Every call is one transaction
-- on its shard, committed when the call returns (PL/Proxy runs remote
-- calls in autocommit): a BEGIN ... ROLLBACK on the router does not undo
-- it.  So:
--
--  * the in-transaction mode is a business function on the shard (pay(),
--    contrib/plproxy/shard.sql) called through its twin here;
--  * idem_claim through the router is the two-phase mode: its claim
--    commits at once as 'processing' with a lease, and idem_checkpoint,
--    idem_complete and idem_fail must show its token.
--
-- Errors of the shard come back with their SQLSTATE (ID001 stale token,
-- 22023, ...).  A shard that cannot be reached is an error of PL/Proxy's
-- own, SQLSTATE XX000, whose message names the function and the shard's
-- connection: "PL/Proxy function pay(4): [payments] PQconnectPoll:
-- connection to server ... failed: ...".

-- ---------------------------------------------------------------------
-- Business calls: twins of the functions of shard.sql, same name, same
-- arguments (PL/Proxy calls <this schema>.<name>(...) on the shard).

CREATE FUNCTION pay(merchant text, key text, amount numeric, currency text,
                    OUT status text, OUT response jsonb, OUT retry_after interval)
RETURNS record LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
$$;

CREATE FUNCTION pay_settle(merchant text, key text, token bigint, charge_id text,
                           amount numeric, currency text)
RETURNS jsonb LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
$$;

CREATE FUNCTION receive_refund(merchant text, source text, payload text, headers jsonb,
                               client_ip inet DEFAULT NULL,
                               OUT status text, OUT event_id text, OUT reason text)
RETURNS record LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
$$;

-- ---------------------------------------------------------------------
-- idem's calls, routed by merchant: idem's own arguments after it, with
-- idem's defaults.  On the shard they call the twins of shard.sql's schema
-- routed, which check that the shard serves the merchant (move.sql).

CREATE FUNCTION idem_claim(merchant text, key text, fingerprint bytea DEFAULT NULL,
                           scope text DEFAULT '', lease interval DEFAULT NULL,
                           ttl interval DEFAULT NULL, nowait boolean DEFAULT false,
                           OUT status text, OUT token bigint, OUT attempt integer,
                           OUT response jsonb, OUT checkpoint text,
                           OUT checkpoint_data jsonb, OUT retry_after interval)
RETURNS record LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT * FROM routed.idem_claim(merchant, key, fingerprint, scope, lease, ttl, nowait);
$$;

CREATE FUNCTION idem_checkpoint(merchant text, key text, phase text, data jsonb DEFAULT NULL,
                                scope text DEFAULT '', token bigint DEFAULT NULL,
                                lease interval DEFAULT NULL)
RETURNS void LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT routed.idem_checkpoint(merchant, key, phase, data, scope, token, lease);
$$;

CREATE FUNCTION idem_complete(merchant text, key text, response jsonb DEFAULT NULL,
                              scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT routed.idem_complete(merchant, key, response, scope, token);
$$;

CREATE FUNCTION idem_fail(merchant text, key text, error jsonb DEFAULT NULL,
                          retryable boolean DEFAULT true, scope text DEFAULT '',
                          token bigint DEFAULT NULL)
RETURNS void LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT routed.idem_fail(merchant, key, error, retryable, scope, token);
$$;

CREATE FUNCTION idem_lookup(merchant text, key text, scope text DEFAULT '')
RETURNS TABLE (state text, attempt integer, fingerprint bytea,
               lease_until timestamptz, checkpoint text, created_at timestamptz,
               completed_at timestamptz, expires_at timestamptz)
LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT * FROM routed.idem_lookup(merchant, key, scope);
$$;

-- Webhooks and queue messages of the merchant's payments.  Alone, each
-- records the delivery in a transaction of its own: to apply the event in
-- the same transaction, call a business function of the shard instead
-- (receive_refund above).

CREATE FUNCTION idem_webhook(merchant text, source text, event_id text,
                             ttl interval DEFAULT NULL)
RETURNS boolean LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT routed.idem_webhook(merchant, source, event_id, ttl);
$$;

CREATE FUNCTION idem_webhook_receive(merchant text, source text, payload text,
                                     headers jsonb, client_ip inet DEFAULT NULL,
                                     OUT status text, OUT event_id text, OUT reason text)
RETURNS record LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT * FROM routed.idem_webhook_receive(merchant, source, payload, headers, client_ip);
$$;

-- A merchant's own webhook source (its own signing secret), on its shard.
CREATE FUNCTION idem_webhook_source_set(merchant text, source text, scheme text,
                                        secrets text[],
                                        tolerance interval DEFAULT '5 minutes',
                                        allowed_ips cidr[] DEFAULT NULL,
                                        ttl interval DEFAULT NULL)
RETURNS void LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT idem_webhook_source_set(source, scheme, secrets, tolerance, allowed_ips, ttl);
$$;

CREATE FUNCTION idem_webhook_source_drop(merchant text, source text)
RETURNS boolean LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT idem_webhook_source_drop(source);
$$;

-- Where a merchant's payments live: its shard's shard_name() (shard.sql),
-- host:port/database.
CREATE FUNCTION idem_shard_of(merchant text)
RETURNS text LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON hashtext(merchant);
    SELECT shard_name();
$$;

-- ---------------------------------------------------------------------
-- Every shard at once (RUN ON ALL: one call per shard, in parallel, each
-- its own transaction; a shard that cannot be reached fails the whole
-- call).  shard is the shard's shard_name().

-- A platform-wide webhook source (one endpoint secret for every merchant),
-- set or dropped on every shard; run it again if a shard was down.
CREATE FUNCTION idem_webhook_source_set_shards(source text, scheme text, secrets text[],
                                               tolerance interval DEFAULT '5 minutes',
                                               allowed_ips cidr[] DEFAULT NULL,
                                               ttl interval DEFAULT NULL)
RETURNS SETOF text LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON ALL;
    SELECT shard_name()
    FROM idem_webhook_source_set(source, scheme, secrets, tolerance, allowed_ips, ttl);
$$;

CREATE FUNCTION idem_webhook_source_drop_shards(source text,
                                                OUT shard text, OUT dropped boolean)
RETURNS SETOF record LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON ALL;
    SELECT shard_name() AS shard,
           idem_webhook_source_drop(source) AS dropped;
$$;

-- Each shard's counters (its idem_stats row).
CREATE FUNCTION idem_stats_shards(
    OUT shard text, OUT datname name, OUT claimed bigint, OUT completed bigint,
    OUT failed bigint, OUT replayed bigint, OUT in_progress bigint,
    OUT mismatched bigint, OUT webhooks_new bigint, OUT webhooks_duplicate bigint,
    OUT purged bigint, OUT last_purge_at timestamptz, OUT taken_over bigint,
    OUT stale_tokens bigint, OUT webhooks_rejected bigint)
RETURNS SETOF record LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON ALL;
    SELECT shard_name() AS shard,
           s.*
    FROM idem_stats s;
$$;

-- Each shard's attempts in flight (its idem_keys_in_progress).
CREATE FUNCTION idem_keys_in_progress_shards(
    OUT shard text, OUT scope text, OUT key text, OUT attempt integer,
    OUT lease_until timestamptz, OUT lease_expired boolean, OUT checkpoint text,
    OUT checkpoint_data jsonb, OUT created_at timestamptz, OUT expires_at timestamptz)
RETURNS SETOF record LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON ALL;
    SELECT shard_name() AS shard,
           p.*
    FROM idem_keys_in_progress p;
$$;

-- A purge on every shard now, besides each shard's own purge worker.
CREATE FUNCTION idem_purge_shards(batch_size integer DEFAULT NULL,
                                  OUT shard text, OUT purged bigint)
RETURNS SETOF record LANGUAGE plproxy AS $$
    CLUSTER 'payments';
    RUN ON ALL;
    SELECT shard_name() AS shard,
           idem_purge(batch_size) AS purged;
$$;

-- The operators' views: one row per shard, one row per attempt in flight
-- on any shard.
CREATE VIEW idem_stats AS SELECT * FROM idem_stats_shards();
CREATE VIEW idem_keys_in_progress AS SELECT * FROM idem_keys_in_progress_shards();

-- As with idem itself, PUBLIC can call nothing: doc/scaling.md shows the
-- GRANTs for an application role and an operators' role.
REVOKE ALL ON FUNCTION
    pay(text, text, numeric, text),
    pay_settle(text, text, bigint, text, numeric, text),
    receive_refund(text, text, text, jsonb, inet),
    idem_claim(text, text, bytea, text, interval, interval, boolean),
    idem_checkpoint(text, text, text, jsonb, text, bigint, interval),
    idem_complete(text, text, jsonb, text, bigint),
    idem_fail(text, text, jsonb, boolean, text, bigint),
    idem_lookup(text, text, text),
    idem_webhook(text, text, text, interval),
    idem_webhook_receive(text, text, text, jsonb, inet),
    idem_webhook_source_set(text, text, text, text[], interval, cidr[], interval),
    idem_webhook_source_drop(text, text),
    idem_shard_of(text),
    idem_webhook_source_set_shards(text, text, text[], interval, cidr[], interval),
    idem_webhook_source_drop_shards(text),
    idem_stats_shards(),
    idem_keys_in_progress_shards(),
    idem_purge_shards(integer)
FROM PUBLIC;
REVOKE ALL ON idem_stats, idem_keys_in_progress FROM PUBLIC;
