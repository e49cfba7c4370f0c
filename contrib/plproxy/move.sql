-- contrib/plproxy/move.sql: moving a PL/Proxy partition to another shard,
-- with its merchants' keys
--
-- Run on every shard database after shard.sql, and on a new shard before
-- the router sends it a partition.  It replaces shard.sql's check_home:
-- a shard answers in_progress for the merchants of the partitions it does
-- not serve (moved away, or moving).  The move, as doc/scaling.md says:
--
--   old shard:  SELECT partition_move_begin(5, 16);   -- partition 5 of 16
--   old shard:  SELECT partition_export(5, 16);       -- JSON
--   new shard:  SELECT partition_import(5, 16, '<that JSON>');
--   router:     ALTER SERVER payments OPTIONS (SET p5 'host=... dbname=...');
--   old shard:  SELECT partition_move_end(5, 16);
--
-- Between the first and the last step the partition's merchants' calls
-- answer in_progress (pay) or fail to be retried; the keys move with the
-- rows, so a retry of a finished payment replays on the new shard.  The
-- scope of a merchant's keys must be the merchant, as in pay().

-- The partitions whose merchants this database does not serve: part of
-- parts, as the router numbers them (hashtext(merchant) & (parts - 1)).
CREATE TABLE partitions_away (
    part  integer NOT NULL,
    parts integer NOT NULL,
    PRIMARY KEY (part, parts)
);

-- Is merchant in partition part of parts?
CREATE FUNCTION in_partition(merchant text, part integer, parts integer)
RETURNS boolean LANGUAGE sql IMMUTABLE
RETURN (hashtext(merchant) & (parts - 1)) = part;

-- May this database serve the merchant's call now?  Not when its
-- partition is away.  Each call reads partitions_away, and so holds its
-- lock until it ends: partition_move_begin waits for them.
CREATE OR REPLACE FUNCTION check_home(merchant text)
RETURNS boolean LANGUAGE sql AS $$
    SELECT NOT EXISTS (SELECT FROM partitions_away a
                       WHERE in_partition(check_home.merchant, a.part, a.parts))
$$;

-- Stop serving partition part here: wait for the calls in flight, then
-- mark it away.
CREATE FUNCTION partition_move_begin(part integer, parts integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE partitions_away IN ACCESS EXCLUSIVE MODE;
    INSERT INTO partitions_away VALUES (part, parts) ON CONFLICT DO NOTHING;
END
$$;

-- The deliveries that the refunds of partition part's merchants here were
-- booked from (their event ids are the ledger's keys), as
-- idem_webhooks_export gives them.
CREATE FUNCTION partition_deliveries(part integer, parts integer)
RETURNS SETOF jsonb LANGUAGE sql STABLE AS $$
    SELECT e
    FROM (SELECT array_agg(l.key) AS ids FROM ledger l
          WHERE l.kind = 'refund' AND in_partition(l.merchant, part, parts)) r,
         (SELECT DISTINCT source FROM idem.webhooks) s,
         idem_webhooks_export(s.source, r.ids) e
$$;

-- The merchants of partition part here, with their ledger, balances,
-- keys and the deliveries their refunds were booked from, as JSON for
-- partition_import.
CREATE FUNCTION partition_export(part integer, parts integer)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    WITH m AS (SELECT merchant FROM ledger WHERE in_partition(merchant, part, parts)
               UNION SELECT merchant FROM merchant_balances WHERE in_partition(merchant, part, parts)
               UNION SELECT scope FROM idem.keys WHERE in_partition(scope, part, parts))
    SELECT jsonb_build_object(
        'ledger', coalesce((SELECT jsonb_agg(l) FROM ledger l
                            WHERE l.merchant IN (SELECT merchant FROM m)), '[]'),
        'balances', coalesce((SELECT jsonb_agg(b) FROM merchant_balances b
                              WHERE b.merchant IN (SELECT merchant FROM m)), '[]'),
        'keys', coalesce((SELECT jsonb_agg(e)
                          FROM idem_keys_export(ARRAY(SELECT merchant FROM m)) e), '[]'),
        'deliveries', coalesce((SELECT jsonb_agg(e) FROM partition_deliveries(part, parts) e), '[]'))
$$;

-- Write what partition_export returned, and serve partition part here.
CREATE FUNCTION partition_import(part integer, parts integer, rows jsonb)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger
    SELECT * FROM jsonb_populate_recordset(NULL::ledger, rows -> 'ledger');
    INSERT INTO merchant_balances
    SELECT * FROM jsonb_populate_recordset(NULL::merchant_balances, rows -> 'balances');
    PERFORM idem_keys_import(rows -> 'keys');
    PERFORM idem_webhooks_import(rows -> 'deliveries');
    DELETE FROM partitions_away a WHERE a.part = partition_import.part AND a.parts = partition_import.parts;
END
$$;

-- Once the router sends partition part elsewhere: forget its merchants'
-- rows, keys and deliveries here.  It stays away.
CREATE FUNCTION partition_move_end(part integer, parts integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM partitions_away a
                   WHERE a.part = partition_move_end.part AND a.parts = partition_move_end.parts) THEN
        RAISE EXCEPTION 'partition % of % is not away from this shard', part, parts
            USING HINT = 'Call partition_move_begin first.';
    END IF;
    DELETE FROM idem.webhooks w
    USING partition_deliveries(part, parts) d
    WHERE w.source = d ->> 'source' AND w.event_id = d ->> 'event_id';
    DELETE FROM idem.keys k WHERE in_partition(k.scope, part, parts);
    DELETE FROM ledger l WHERE in_partition(l.merchant, part, parts);
    DELETE FROM merchant_balances b WHERE in_partition(b.merchant, part, parts);
END
$$;

REVOKE ALL ON FUNCTION
    partition_move_begin(integer, integer),
    partition_deliveries(integer, integer),
    partition_export(integer, integer),
    partition_import(integer, integer, jsonb),
    partition_move_end(integer, integer)
FROM PUBLIC;
