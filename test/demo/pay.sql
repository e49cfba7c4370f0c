-- make demo: one client's attempt at one of :keys payments, with the
-- in-transaction pattern.  A payment's request is the same on every retry
-- (its amount follows from its key), so the fingerprint matches; whoever
-- gets 'claimed' does the work, every other attempt is a replay.
\set k random(1, :keys)
\set account 1 + :k % 4
\set amount 100 + :k
BEGIN;
INSERT INTO attempts (idem_key, status)
SELECT 'pay-' || :k, c.status
FROM idem_claim('pay-' || :k,
                idem_fingerprint(jsonb_build_object('amount', :amount, 'currency', 'USD'))) c
RETURNING (status = 'claimed')::int AS do_work \gset
\if :do_work
INSERT INTO charges (idem_key, account, amount) VALUES ('pay-' || :k, :account, :amount);
UPDATE accounts SET balance = balance - :amount WHERE id = :account;
SELECT idem_complete('pay-' || :k,
                     jsonb_build_object('charge', currval('charges_id_seq'), 'amount', :amount));
\endif
COMMIT;
