-- signed Stripe delivery, half of them duplicates: idem_webhook_receive
-- The source 'recv' (run.sh) holds the secret, the tolerance (5 minutes)
-- and two allowed networks; the client's address is in the second.
-- bench.stripe_delivery (run.sh) is the delivery of event evt_<e> as it
-- arrives, signed now.  Half the events are one of the pre-loaded ids (a
-- duplicate delivery), the others unique, built as in webhook_idem.sql.
-- A rejection returns no row, so pgbench fails.
\set n :n + 1
\set e CASE WHEN random(0, 1) = 1 THEN random(1, :events) ELSE random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n END
BEGIN;
SELECT r.status = 'new' AS fresh
FROM bench.stripe_delivery(:e) d,
     idem_webhook_receive('recv', d.payload, d.headers, '198.51.100.7') r
WHERE r.status <> 'rejected' \gset
\if :fresh
INSERT INTO bench.ledger (variant, payment_key, amount) VALUES ('receive_idem', :e, 100);
\endif
COMMIT;
