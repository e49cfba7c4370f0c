-- soak: a two-phase payment (bench/soak.sh).  The claim commits on its own
-- with a lease (idem.lease, which soak.sh sets), as before a call to a gateway; the completion, with the
-- claim's fencing token, comes in a transaction of its own with the business
-- write.  One in ten is then retried, as a client that lost the answer
-- does, and gets the stored response.
\set n :n + 1
\set k random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n
SELECT token FROM idem_claim('p' || :k, '\x2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae'::bytea) \gset
BEGIN;
INSERT INTO soak.ledger (payment_key, amount) VALUES ('p' || :k, 250);
SELECT idem_complete('p' || :k, '{"charge": "ch_2", "amount": 250}', token => :token);
COMMIT;
\if random(1, 10) = 1
SELECT status FROM idem_claim('p' || :k, '\x2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae'::bytea);
\endif
