-- make demo: what the concurrent retries left behind.
\pset footer off
\echo 'What idem_claim answered the attempts:'
SELECT count(*) AS attempts,
       count(DISTINCT idem_key) AS payment_keys,
       count(*) FILTER (WHERE status = 'claimed') AS claimed,
       count(*) FILTER (WHERE status = 'completed') AS replayed,
       count(*) FILTER (WHERE status NOT IN ('claimed', 'completed')) AS other
FROM attempts;

\echo 'The ledger:'
SELECT count(*) AS charges,
       count(DISTINCT idem_key) AS keys_charged,
       coalesce(max(n), 0) AS most_charges_for_one_key,
       coalesce(sum(total), 0) AS amount_charged
FROM (SELECT idem_key, count(*) AS n, sum(amount) AS total
      FROM charges GROUP BY idem_key) per_key;

\pset tuples_only on
\pset format unaligned
SELECT demo_check(NOT EXISTS (
           SELECT FROM (SELECT DISTINCT idem_key FROM attempts) a
           LEFT JOIN charges c USING (idem_key)
           GROUP BY a.idem_key HAVING count(c.id) <> 1),
       'every payment key attempted was charged exactly once');
SELECT demo_check((SELECT count(*) FROM attempts WHERE status = 'claimed')
                  = (SELECT count(DISTINCT idem_key) FROM attempts),
       'exactly one attempt per key was told to do the work');
SELECT demo_check(NOT EXISTS (SELECT FROM attempts WHERE status NOT IN ('claimed', 'completed')),
       'every other attempt got completed and the stored response (waiting first if the claimer had not committed)');
SELECT demo_check((SELECT sum(100000 - balance) FROM accounts)
                  = (SELECT coalesce(sum(amount), 0) FROM charges),
       'the balances moved by exactly the charges in the ledger');

INSERT INTO demo_facts
SELECT 'attempts', count(*) FROM attempts
UNION ALL SELECT 'keys', count(DISTINCT idem_key) FROM attempts
UNION ALL SELECT 'charges', count(*) FROM charges
UNION ALL SELECT 'replayed', count(*) FROM attempts WHERE status = 'completed';
