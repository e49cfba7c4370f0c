-- signed Stripe delivery, half of them duplicates: idem_webhook_receive
-- The source 'recv' (run.sh) holds the secret, the tolerance (5 minutes)
-- and two allowed networks; the client's address is in the second.
-- d is the delivery as it arrives: the body with id evt_<e> and its
-- Stripe-Signature, signed now with pgcrypto (in the statement: a SQL
-- function would be parsed again at every call, a third of the CPU).  Half the events are one
-- of the pre-loaded ids (a duplicate delivery), the others unique, built
-- as in webhook_idem.sql.  A rejection returns no row, so pgbench fails.
\set n :n + 1
\set e CASE WHEN random(0, 1) = 1 THEN random(1, :events) ELSE random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n END
BEGIN;
SELECT r.status = 'new' AS fresh
FROM (SELECT p AS payload,
             jsonb_build_object('Stripe-Signature', 't=' || t || ',v1=' ||
                 encode(hmac(t || '.' || p, 'whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH', 'sha256'), 'hex')) AS headers
      FROM (SELECT '{"id":"evt_' || :e || '","object":"event","type":"payment_intent.succeeded",'
                   '"data":{"object":{"id":"pi_3OE2sL","amount":2000,"currency":"usd"}}}' AS p,
                   extract(epoch FROM now())::bigint::text AS t) s) d,
     idem_webhook_receive('recv', d.payload, d.headers, '198.51.100.7') r
WHERE r.status <> 'rejected' \gset
\if :fresh
INSERT INTO bench.ledger (variant, payment_key, amount) VALUES ('receive_idem', :e, 100);
\endif
COMMIT;
