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
--  * idem's calls with the merchant first (shard.sql's schema routed), run
--    on its worker, for the two-phase mode, bare deliveries and operators.
--    Each is its own transaction on the worker when called alone.
--  * what spans every node: idem_node_of(merchant), idem_stats_nodes(),
--    idem_webhook_source_set_nodes(...).
--  * idem_move_shard and idem_rebalance, to use instead of Citus's own
--    moves: they carry the merchants' keys to the new node.

SELECT create_distributed_table('ledger', 'merchant');
SELECT create_distributed_table('merchant_balances', 'merchant', colocate_with => 'ledger');

-- The shard groups that idem_move_shard is moving, by the ledger's shard:
-- their merchants' calls answer in_progress, or fail to be retried, on
-- every node until the move ends.  A reference table: every node reads its
-- own copy.
CREATE TABLE idem_moving (
    shardid     bigint PRIMARY KEY,
    source_name text NOT NULL,      -- where the keys are until they are moved
    source_port integer NOT NULL,
    since       timestamptz NOT NULL DEFAULT now()
);
SELECT create_reference_table('idem_moving');

-- The advisory lock (this number, the ledger's shard id) that each call
-- holds shared while it checks idem_moving and runs, and that
-- idem_move_shard takes exclusively on the shard's node once the group is
-- marked: the calls that did not see the mark have ended then.
CREATE FUNCTION idem_moving_lock() RETURNS integer LANGUAGE sql IMMUTABLE
RETURN 1684366701;

-- May this node serve merchant's call now?  False while its shard group
-- moves; an error if this node does not hold the merchant's shard of the
-- ledger.  It reads Citus's metadata, which every node has (metadata
-- sync), and which a shard move changes when the shard has moved.
CREATE OR REPLACE FUNCTION check_home(merchant text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    shard bigint := get_shard_id_for_distribution_column('ledger', check_home.merchant);
BEGIN
    PERFORM pg_advisory_xact_lock_shared(idem_moving_lock(), shard::integer);
    IF EXISTS (SELECT FROM idem_moving m WHERE m.shardid = shard) THEN
        RETURN false;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_dist_placement p
                   WHERE p.shardid = shard
                     AND p.groupid = (SELECT groupid FROM pg_dist_local_group)) THEN
        RAISE EXCEPTION 'merchant % is not on this node', check_home.merchant
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'Citus ran the call here instead of on the node that holds the merchant''s rows and keys.',
                  HINT = 'Call the function alone, with the merchant as a constant or a parameter, so that Citus delegates it.';
    END IF;
    RETURN true;
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
    'routed.idem_lookup(text, text, text)',
    'routed.idem_webhook(text, text, text, interval)',
    'routed.idem_webhook_receive(text, text, text, jsonb, inet)']::regprocedure[]) f;
-- ... and these are called there, so they must exist on every node
SELECT create_distributed_function(f)
FROM unnest(ARRAY['shard_name()', 'idem_moving_lock()', 'check_home(text)', 'moving_error(text)',
                  'charge_id_for(text, text)',
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

-- Run command on one node (host and port as Citus knows them), in a
-- transaction of its own there; its result, or an error with the node's.
CREATE FUNCTION idem_on_node(node_name text, node_port integer, command text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT * INTO r FROM master_run_on_worker(ARRAY[node_name], ARRAY[node_port],
                                              ARRAY[command], false);
    IF NOT r.success THEN
        RAISE EXCEPTION 'node %:% failed: %', node_name, node_port, r.result;
    END IF;
    RETURN r.result;
END
$$;

-- ---------------------------------------------------------------------
-- Moving shards with their keys.  Citus moves a shard group's business
-- rows; idem's keys are local to each node, so these move them too.  Use
-- them instead of citus_move_shard_placement and citus_rebalance_start.

-- Move the shard group of the ledger's shard to target_name:target_port,
-- with the keys of its merchants (the scope of their keys is the merchant)
-- and the deliveries their refunds were booked from:
--   1. mark the group moving: its merchants' calls answer in_progress on
--      every node (pay), or fail to be retried;
--   2. wait, on the shard's node, for the calls that did not see the mark;
--   3. move the shard group (block_writes: nothing writes it now);
--   4. copy the keys and deliveries to the target (idem_keys_import), then
--      forget them on the source;
--   5. unmark.
-- Each step commits.  If it stops half way, the merchants stay marked
-- (they answer in_progress, none is charged twice): call it again, with
-- the same target.  The mark keeps the node the group left, where the
-- keys are until they are copied.
CREATE PROCEDURE idem_move_shard(shard bigint, target_name text, target_port integer)
LANGUAGE plpgsql AS $$
DECLARE
    placed record;
    source record;
    scopes text[];
    events text[];
    keys text;
    deliveries text;
BEGIN
    SELECT n.nodename, n.nodeport INTO placed
    FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
    WHERE p.shardid = shard;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'shard % has no placement', shard;
    END IF;
    INSERT INTO idem_moving (shardid, source_name, source_port)
    VALUES (shard, placed.nodename, placed.nodeport) ON CONFLICT DO NOTHING;
    COMMIT;
    SELECT m.source_name AS nodename, m.source_port AS nodeport INTO source
    FROM idem_moving m WHERE m.shardid = shard;
    PERFORM idem_on_node(placed.nodename, placed.nodeport,
                         format('SELECT pg_advisory_unlock(%1$s, %2$s) FROM (SELECT pg_advisory_lock(%1$s, %2$s)) l',
                                idem_moving_lock(), shard::integer));
    IF (placed.nodename, placed.nodeport) IS DISTINCT FROM (target_name, target_port) THEN
        -- a node added since has no copy of the reference tables yet, of
        -- idem_moving among them, which Citus requires before a move
        PERFORM replicate_reference_tables('block_writes');
        COMMIT;
        PERFORM citus_move_shard_placement(shard, placed.nodename, placed.nodeport,
                                           target_name, target_port, 'block_writes');
        COMMIT;
    END IF;
    IF (source.nodename, source.nodeport) IS DISTINCT FROM (target_name, target_port) THEN
        scopes := idem_on_node(source.nodename, source.nodeport,
                               format('SELECT coalesce(array_agg(DISTINCT scope), %L) FROM idem.keys
                                       WHERE get_shard_id_for_distribution_column(%L, scope) = %s',
                                      '{}', 'ledger', shard))::text[];
        SELECT array_agg(l.key) INTO events
        FROM ledger l
        WHERE l.kind = 'refund' AND get_shard_id_for_distribution_column('ledger', l.merchant) = shard;
        keys := idem_on_node(source.nodename, source.nodeport,
                             format('SELECT coalesce(jsonb_agg(e), %L) FROM idem_keys_export(%L) e',
                                    '[]', coalesce(scopes, '{}')));
        deliveries := idem_on_node(source.nodename, source.nodeport,
                                   format('SELECT coalesce(jsonb_agg(e), %L)
                                           FROM (SELECT DISTINCT source FROM idem.webhooks
                                                 WHERE event_id = ANY (%L)) s,
                                                idem_webhooks_export(s.source, %L) e',
                                          '[]', coalesce(events, '{}'), coalesce(events, '{}')));
        PERFORM idem_on_node(target_name, target_port,
                             format('SELECT idem_keys_import(%L) + idem_webhooks_import(%L)',
                                    keys, deliveries));
        PERFORM idem_on_node(source.nodename, source.nodeport,
                             format('WITH k AS (DELETE FROM idem.keys WHERE scope = ANY (%L) RETURNING 1),
                                          w AS (DELETE FROM idem.webhooks w
                                                USING jsonb_to_recordset(%L) d(source text, event_id text)
                                                WHERE w.source = d.source AND w.event_id = d.event_id
                                                RETURNING 1)
                                     SELECT (SELECT count(*) FROM k) + (SELECT count(*) FROM w)',
                                    coalesce(scopes, '{}'), deliveries));
    END IF;
    DELETE FROM idem_moving WHERE shardid = shard;
    COMMIT;
END
$$;

-- Rebalance the ledger's shard groups as citus_rebalance_start would, one
-- idem_move_shard at a time, after a node is added or before one is
-- removed; how many it moved.
CREATE PROCEDURE idem_rebalance(INOUT moved integer DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE
    m record;
BEGIN
    moved := 0;
    LOOP
        SELECT p.shardid, p.targetname, p.targetport INTO m
        FROM get_rebalance_table_shards_plan('ledger') p
        LIMIT 1;
        EXIT WHEN NOT FOUND;
        CALL idem_move_shard(m.shardid, m.targetname, m.targetport);
        moved := moved + 1;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION
    idem_node_of(text),
    idem_on_nodes(text),
    idem_stats_nodes(),
    idem_webhook_source_set_nodes(text, text, text[], interval, cidr[], interval),
    idem_on_node(text, integer, text)
FROM PUBLIC;
REVOKE ALL ON PROCEDURE idem_move_shard(bigint, text, integer), idem_rebalance(integer) FROM PUBLIC;
