-- signed Stripe delivery, half of them duplicates: idem_webhook_receive
-- called in a select list instead of FROM, as doc/webhooks.md shows for
-- the highest rate: OFFSET 0 keeps the subquery whole, so the function runs
-- once and its row is read field by field, with no function scan.  The
-- same deliveries as receive_idem.sql, to a source 'recv_list' set up as
-- 'recv'.  A rejection returns no row, so pgbench fails.
\set n :n + 1
\set e CASE WHEN random(0, 1) = 1 THEN random(1, :events) ELSE random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n END
BEGIN;
SELECT (r).status = 'new' AS fresh
FROM (SELECT idem_webhook_receive('recv_list', d.payload, d.headers, '198.51.100.7') AS r
      FROM bench.stripe_delivery(:e) d OFFSET 0) s
WHERE (r).status <> 'rejected' \gset
\if :fresh
INSERT INTO bench.ledger (variant, payment_key, amount) VALUES ('receive_idem_list', :e, 100);
\endif
COMMIT;
