-- The one-statement payment (doc/usage.md): the claim, the business writes
-- and the completion in one statement, so that an autocommit call is one
-- round trip and one transaction.  What each status returns, and that a
-- failure anywhere inside leaves nothing behind.  one_statement_race.spec
-- has the concurrent retries.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;

CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0));
INSERT INTO accounts VALUES (7, 1000), (9, 50);
CREATE TABLE ledger (
    id      bigserial PRIMARY KEY,
    k       text NOT NULL,
    account int NOT NULL,
    amount  bigint NOT NULL CHECK (amount > 0)
);

-- $1 key, $2 fingerprint, $3 account, $4 amount; idem_complete runs in the
-- RETURNING of the insert that books the charge
PREPARE pay(text, bytea, int, bigint) AS
WITH c AS (SELECT * FROM idem_claim($1, $2)),
     pay AS (INSERT INTO ledger (k, account, amount)
             SELECT $1, $3, $4 FROM c WHERE c.status = 'claimed'
             RETURNING id, idem_complete($1, jsonb_build_object('charge', id))),
     bal AS (UPDATE accounts SET balance = balance - $4
             WHERE id = $3 AND EXISTS (SELECT FROM pay))
SELECT c.status,
       coalesce(c.response, (SELECT jsonb_build_object('charge', id) FROM pay)) AS response
FROM c;

-- What changed: ledger rows, balances, and the key's state
CREATE FUNCTION book(key text) RETURNS TABLE (charges bigint, balance_7 bigint, balance_9 bigint, state text)
LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM ledger WHERE k = key),
           (SELECT balance FROM accounts WHERE id = 7),
           (SELECT balance FROM accounts WHERE id = 9),
           (SELECT state FROM idem_lookup(key))
$$;

-- claimed: the charge is booked, the balance moved and the key completed,
-- all in the statement's own transaction
EXECUTE pay('pay-1', '\x01', 7, 100);
SELECT * FROM book('pay-1');
-- completed: the retry replays the stored response and books nothing
EXECUTE pay('pay-1', '\x01', 7, 100);
SELECT * FROM book('pay-1');
-- mismatch: the same key for another request books nothing
EXECUTE pay('pay-1', '\x02', 7, 300);
SELECT * FROM book('pay-1');

-- A failure in the business write (the balance would go below zero) rolls
-- back the whole statement: no ledger row, no balance change, and no key,
-- so a retry (here with funds) is claimed afresh as attempt 1
EXECUTE pay('pay-2', '\x01', 9, 80);
SELECT * FROM book('pay-2');
UPDATE accounts SET balance = 100 WHERE id = 9;
EXECUTE pay('pay-2', '\x01', 9, 80);
SELECT * FROM book('pay-2');
SELECT attempt FROM idem_lookup('pay-2');

-- A failure in the completion (a response larger than allowed) rolls back
-- the charge and the balance change too
SET idem.max_response_size = '1kB';
WITH c AS (SELECT * FROM idem_claim('pay-3', '\x01')),
     pay AS (INSERT INTO ledger (k, account, amount)
             SELECT 'pay-3', 7, 5 FROM c WHERE c.status = 'claimed'
             RETURNING id, idem_complete('pay-3', jsonb_build_object('charge', id, 'receipt', repeat('x', 2000)))),
     bal AS (UPDATE accounts SET balance = balance - 5
             WHERE id = 7 AND EXISTS (SELECT FROM pay))
SELECT c.status FROM c;
RESET idem.max_response_size;
SELECT * FROM book('pay-3');

-- Inside an explicit transaction the statement commits or rolls back with
-- it: a rollback after it takes the charge and the key back
BEGIN;
EXECUTE pay('pay-4', '\x01', 7, 5);
ROLLBACK;
SELECT * FROM book('pay-4');

-- failed: a key finished with a final failure replays the stored error
BEGIN;
SELECT status FROM idem_claim('pay-5');
SELECT idem_fail('pay-5', '{"error": "card_declined"}', retryable => false);
COMMIT;
EXECUTE pay('pay-5', '\x01', 7, 5);
SELECT * FROM book('pay-5');

-- in_progress: a two-phase attempt holds the key (its claim committed as
-- processing, with a lease); nothing is booked
SELECT status FROM idem_claim('pay-6', lease => '1 hour');
EXECUTE pay('pay-6', '\x01', 7, 5);
SELECT * FROM book('pay-6');

-- Why the completion is in the insert's RETURNING: an INSERT in WITH runs
-- to the end, RETURNING included, whatever the statement reads.  Here
-- nothing reads pay (no balance update either), and still the charge is
-- booked and the key completed.
WITH c AS (SELECT * FROM idem_claim('pay-8', '\x01')),
     pay AS (INSERT INTO ledger (k, account, amount)
             SELECT 'pay-8', 7, 5 FROM c WHERE c.status = 'claimed'
             RETURNING id, idem_complete('pay-8', jsonb_build_object('charge', id)))
SELECT c.status FROM c;
SELECT * FROM book('pay-8');
SELECT status, response FROM idem_claim('pay-8', '\x01');

-- The form of 1.6 and before, still working: the completion a SELECT in
-- WITH, which runs only if the statement reads it, hence the completed
-- column
PREPARE pay_16(text, bytea, int, bigint) AS
WITH c AS (SELECT * FROM idem_claim($1, $2)),
     pay AS (INSERT INTO ledger (k, account, amount)
             SELECT $1, $3, $4 FROM c WHERE c.status = 'claimed'
             RETURNING id),
     bal AS (UPDATE accounts SET balance = balance - $4
             WHERE id = $3 AND EXISTS (SELECT FROM pay)),
     done AS (SELECT idem_complete($1, jsonb_build_object('charge', pay.id)) FROM pay)
SELECT c.status,
       coalesce(c.response, (SELECT jsonb_build_object('charge', id) FROM pay)) AS response,
       (SELECT count(*) FROM done) AS completed
FROM c;
EXECUTE pay_16('pay-9', '\x01', 7, 5);
EXECUTE pay_16('pay-9', '\x01', 7, 5);
SELECT * FROM book('pay-9');
-- Left out, idem_complete never runs: the charge is booked, but the claim
-- commits as processing, and retries answer in_progress until its lease
-- runs out, then claim it again.
WITH c AS (SELECT * FROM idem_claim('pay-7', '\x01')),
     pay AS (INSERT INTO ledger (k, account, amount)
             SELECT 'pay-7', 7, 5 FROM c WHERE c.status = 'claimed' RETURNING id),
     done AS (SELECT idem_complete('pay-7', jsonb_build_object('charge', pay.id)) FROM pay)
SELECT c.status FROM c;
SELECT * FROM book('pay-7');
SELECT status FROM idem_claim('pay-7', '\x01');

DEALLOCATE pay;
DEALLOCATE pay_16;
DROP FUNCTION book(text);
DROP TABLE ledger, accounts;
DROP EXTENSION idem;
