-- soak: a webhook delivery (bench/soak.sh); one in four is a redelivery of
-- this client's previous event (e starts at 0), the others are new.  The
-- TTL is idem.webhook_ttl, which soak.sh sets for the session.
\set n :n + 1
\set e CASE WHEN random(1, 4) = 1 THEN :e ELSE random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n END
BEGIN;
SELECT idem_webhook('stripe', 'evt_' || :e) AS fresh \gset
\if :fresh
INSERT INTO soak.ledger (payment_key, amount) VALUES ('evt_' || :e, 0);
\endif
COMMIT;
