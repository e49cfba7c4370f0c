-- contrib/citus/coordinator.sql: idem on a Citus cluster
--
-- Run as a superuser on the coordinator, in the database of the payments,
-- once the workers are added (citus_add_node) and after, in this order:
--   CREATE EXTENSION idem;            -- Citus creates it on every node
--   \i contrib/plproxy/shard.sql      -- the example business schema
--   \i contrib/citus/coordinator.sql
-- (doc/scaling.md, "Citus").
--
-- idem's tables stay local to each node: the keys of a merchant live on the
-- worker that holds the merchant's shard of the ledger, so that the claim,
-- the booking and the completion commit in one transaction there.  This
-- file distributes the ledger by merchant, has Citus run each payment
-- function on the merchant's worker (create_distributed_function, the
-- merchant as distribution argument, colocated with the ledger,
-- force_delegation), and adds:
--  * check_home(merchant), which replaces shard.sql's: a call that Citus
--    did not delegate (the merchant not a constant or a parameter, several
--    merchants in one statement) would run on the coordinator, where a retry
--    would not find the first attempt's key.  It raises there instead.
--  * idem's calls with the merchant first, run on its worker, for the
--    two-phase mode and operators: routed.idem_claim, idem_checkpoint,
--    idem_complete, idem_fail and idem_lookup (contrib/plproxy/router.sql
--    has the same for PL/Proxy).  Each is its own transaction on the worker
--    when called alone.
--  * what spans every node: idem_node_of(merchant), idem_stats_nodes(),
--    idem_webhook_source_set_nodes(...).

SELECT create_distributed_table('ledger', 'merchant');
SELECT create_distributed_table('merchant_balances', 'merchant', colocate_with => 'ledger');

-- Does this node hold merchant's shard of the ledger?  Raise if not.  It
-- reads Citus's metadata, which every node has (metadata sync), and which a
-- shard move changes when the shard has moved.
CREATE OR REPLACE FUNCTION check_home(merchant text)
RETURNS void LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_dist_placement p
                   WHERE p.shardid = get_shard_id_for_distribution_column('ledger', check_home.merchant)
                     AND p.groupid = (SELECT groupid FROM pg_dist_local_group)) THEN
        RAISE EXCEPTION 'merchant % is not on this node', check_home.merchant
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Citus ran the call here instead of on the node that holds the merchant''s rows and keys.',
                  HINT = 'Call the function alone, with the merchant as a constant or a parameter, so that Citus delegates it.';
    END IF;
END
$$;

-- ---------------------------------------------------------------------
-- idem's calls, run on the merchant's worker: idem's own arguments after
-- it, with idem's defaults (the same twins as contrib/plproxy/router.sql).
-- In a schema of their own, routed: idem's functions are on every node
-- too, and routed.idem_lookup(merchant, key) beside idem_lookup(key,
-- scope) in one schema would make either call ambiguous.  Keep routed out
-- of search_path: the twins call idem's functions unqualified.

CREATE SCHEMA routed;

CREATE FUNCTION routed.idem_claim(merchant text, key text, fingerprint bytea DEFAULT NULL,
                           scope text DEFAULT '', lease interval DEFAULT NULL,
                           ttl interval DEFAULT NULL, nowait boolean DEFAULT false,
                           OUT status text, OUT token bigint, OUT attempt integer,
                           OUT response jsonb, OUT checkpoint text,
                           OUT checkpoint_data jsonb, OUT retry_after interval)
RETURNS record LANGUAGE plpgsql AS $$
BEGIN
    PERFORM check_home(idem_claim.merchant);
    SELECT * INTO status, token, attempt, response, checkpoint, checkpoint_data, retry_after
    FROM idem_claim(idem_claim.key, idem_claim.fingerprint, idem_claim.scope,
                    idem_claim.lease, idem_claim.ttl, idem_claim.nowait);
END
$$;

CREATE FUNCTION routed.idem_checkpoint(merchant text, key text, phase text, data jsonb DEFAULT NULL,
                                scope text DEFAULT '', token bigint DEFAULT NULL,
                                lease interval DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM check_home(idem_checkpoint.merchant);
    PERFORM idem_checkpoint(idem_checkpoint.key, idem_checkpoint.phase, idem_checkpoint.data,
                            idem_checkpoint.scope, idem_checkpoint.token, idem_checkpoint.lease);
END
$$;

CREATE FUNCTION routed.idem_complete(merchant text, key text, response jsonb DEFAULT NULL,
                              scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM check_home(idem_complete.merchant);
    PERFORM idem_complete(idem_complete.key, idem_complete.response, idem_complete.scope,
                          idem_complete.token);
END
$$;

CREATE FUNCTION routed.idem_fail(merchant text, key text, error jsonb DEFAULT NULL,
                          retryable boolean DEFAULT true, scope text DEFAULT '',
                          token bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM check_home(idem_fail.merchant);
    PERFORM idem_fail(idem_fail.key, idem_fail.error, idem_fail.retryable, idem_fail.scope,
                      idem_fail.token);
END
$$;

CREATE FUNCTION routed.idem_lookup(merchant text, key text, scope text DEFAULT '')
RETURNS TABLE (state text, attempt integer, fingerprint bytea,
               lease_until timestamptz, checkpoint text, created_at timestamptz,
               completed_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM check_home(idem_lookup.merchant);
    RETURN QUERY SELECT * FROM idem_lookup(idem_lookup.key, idem_lookup.scope);
END
$$;

-- Each runs on the worker of its merchant argument, colocated with the
-- ledger, also inside a transaction block (force_delegation).
SELECT create_distributed_function(f, distribution_arg_name => 'merchant',
                                   colocate_with => 'ledger', force_delegation => true)
FROM unnest(ARRAY[
    'pay(text, text, numeric, text)',
    'pay_settle(text, text, bigint, text, numeric, text)',
    'receive_refund(text, text, text, jsonb, inet)',
    'routed.idem_claim(text, text, bytea, text, interval, interval, boolean)',
    'routed.idem_checkpoint(text, text, text, jsonb, text, bigint, interval)',
    'routed.idem_complete(text, text, jsonb, text, bigint)',
    'routed.idem_fail(text, text, jsonb, boolean, text, bigint)',
    'routed.idem_lookup(text, text, text)']::regprocedure[]) f;
-- ... and these are called there, so they must exist on every node
SELECT create_distributed_function(f)
FROM unnest(ARRAY['shard_name()', 'check_home(text)', 'charge_id_for(text, text)',
                  'book_charge(text, text, numeric, text, text)']::regprocedure[]) f;

-- ---------------------------------------------------------------------
-- Every node.

-- The node that holds merchant's rows and keys: host:port as Citus knows it.
CREATE FUNCTION idem_node_of(merchant text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT n.nodename || ':' || n.nodeport
    FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
    WHERE p.shardid = get_shard_id_for_distribution_column('ledger', idem_node_of.merchant)
$$;

-- Run command on every node (coordinator included), in parallel, each in
-- a transaction of its own; the result of each, or an error naming the
-- first node that failed.
CREATE FUNCTION idem_on_nodes(command text, OUT node text, OUT result text)
RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT n.nodename || ':' || n.nodeport AS node, c.success, c.result
             FROM run_command_on_all_nodes(idem_on_nodes.command) c
             JOIN pg_dist_node n USING (nodeid)
             ORDER BY n.nodeid
    LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION 'node % failed: %', r.node, r.result;
        END IF;
        node := r.node;
        result := r.result;
        RETURN NEXT;
    END LOOP;
END
$$;

-- Each node's counters (its idem_stats row for this database).
CREATE FUNCTION idem_stats_nodes()
RETURNS TABLE (node text, datname name, claimed bigint, completed bigint,
               failed bigint, replayed bigint, in_progress bigint,
               mismatched bigint, webhooks_new bigint, webhooks_duplicate bigint,
               purged bigint, last_purge_at timestamptz, taken_over bigint,
               stale_tokens bigint, webhooks_rejected bigint)
LANGUAGE sql AS $$
    SELECT o.node, s.*
    FROM idem_on_nodes(format('SELECT row_to_json(s) FROM idem_stats s WHERE datname = %L',
                              current_database())) o,
         json_populate_record(NULL::idem_stats, o.result::json) s
$$;

-- A webhook source set on every node (each worker receives the deliveries
-- of its merchants); run it again if a node was down.
CREATE FUNCTION idem_webhook_source_set_nodes(source text, scheme text, secrets text[],
                                              tolerance interval DEFAULT '5 minutes',
                                              allowed_ips cidr[] DEFAULT NULL,
                                              ttl interval DEFAULT NULL)
RETURNS SETOF text LANGUAGE sql AS $$
    SELECT node
    FROM idem_on_nodes(format('SELECT idem_webhook_source_set(%L, %L, %L, %L, %L, %L)',
                              source, scheme, secrets, tolerance, allowed_ips, ttl))
$$;

REVOKE ALL ON SCHEMA routed FROM PUBLIC;
REVOKE ALL ON FUNCTION
    routed.idem_claim(text, text, bytea, text, interval, interval, boolean),
    routed.idem_checkpoint(text, text, text, jsonb, text, bigint, interval),
    routed.idem_complete(text, text, jsonb, text, bigint),
    routed.idem_fail(text, text, jsonb, boolean, text, bigint),
    routed.idem_lookup(text, text, text),
    idem_node_of(text),
    idem_on_nodes(text),
    idem_stats_nodes(),
    idem_webhook_source_set_nodes(text, text, text[], interval, cidr[], interval)
FROM PUBLIC;
