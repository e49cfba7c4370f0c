-- signed Stripe delivery, half of them duplicates: the endpoint of
-- doc/webhooks.md that verifies without a source, two statements in the
-- handler's transaction.  The first verifies with the secret the
-- application passes; the second records the event id the application read
-- from the body (given, not parsed, as in receive_app.sql).  The same
-- deliveries as receive_idem.sql; the default tolerance, 5 minutes, as the
-- source's.  An unverified delivery returns no row, so pgbench fails.
\set n :n + 1
\set e CASE WHEN random(0, 1) = 1 THEN random(1, :events) ELSE random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n END
BEGIN;
SELECT true AS genuine
FROM bench.stripe_delivery(:e) d
WHERE idem_webhook_verify('stripe', 'whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH', d.payload, d.headers) \gset
SELECT idem_webhook('recv_app2', 'evt_' || :e) AS fresh \gset
\if :fresh
INSERT INTO bench.ledger (variant, payment_key, amount) VALUES ('receive_app2', :e, 100);
\endif
COMMIT;
