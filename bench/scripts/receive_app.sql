-- signed Stripe delivery, half of them duplicates: the two calls an
-- application makes without a source, folded by hand into one statement (the
-- least it can spend on them).  It passes the secret, verifies, and records
-- the event id it read from the body (here given, not parsed, as the
-- application would parse it in its own process).  The same deliveries as
-- receive_idem.sql; the default tolerance, 5 minutes, as the source's.  An
-- unverified delivery returns no row, so pgbench fails.
\set n :n + 1
\set e CASE WHEN random(0, 1) = 1 THEN random(1, :events) ELSE random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n END
BEGIN;
SELECT idem_webhook('recv_app', 'evt_' || :e) AS fresh
FROM bench.stripe_delivery(:e) d
WHERE idem_webhook_verify('stripe', 'whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH', d.payload, d.headers) \gset
\if :fresh
INSERT INTO bench.ledger (variant, payment_key, amount) VALUES ('receive_app', :e, 100);
\endif
COMMIT;
