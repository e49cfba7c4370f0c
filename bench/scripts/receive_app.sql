-- signed Stripe delivery, half of them duplicates: what an application does
-- without a source: it passes the secret, verifies, and records the event
-- id it read from the body (here given, not parsed, as the application
-- would parse it in its own process).  The same deliveries as
-- receive_idem.sql; the default tolerance, 5 minutes, as the source's.
-- An unverified delivery returns no row, so pgbench fails.
\set n :n + 1
\set e CASE WHEN random(0, 1) = 1 THEN random(1, :events) ELSE random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n END
BEGIN;
SELECT idem_webhook('recv_app', 'evt_' || :e) AS fresh
FROM (SELECT p AS payload,
             jsonb_build_object('Stripe-Signature', 't=' || t || ',v1=' ||
                 encode(hmac(t || '.' || p, 'whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH', 'sha256'), 'hex')) AS headers
      FROM (SELECT '{"id":"evt_' || :e || '","object":"event","type":"payment_intent.succeeded",'
                   '"data":{"object":{"id":"pi_3OE2sL","amount":2000,"currency":"usd"}}}' AS p,
                   extract(epoch FROM now())::bigint::text AS t) s) d
WHERE idem_webhook_verify('stripe', 'whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH', d.payload, d.headers) \gset
\if :fresh
INSERT INTO bench.ledger (variant, payment_key, amount) VALUES ('receive_app', :e, 100);
\endif
COMMIT;
