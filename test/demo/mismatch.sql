-- make demo: retries of a finished payment, one of them with another amount.
\pset footer off
\echo 'A late retry of pay-1 with the same request (101 USD) replays the stored answer:'
SELECT status, response
FROM idem_claim('pay-1', idem_fingerprint('{"amount": 101, "currency": "USD"}')) \gset same_
\echo '  status' :same_status ' response' :same_response
\echo 'A retry of pay-1 with a different amount (999 USD), same key:'
SELECT status FROM idem_claim('pay-1', idem_fingerprint('{"amount": 999, "currency": "USD"}')) \gset other_
\echo '  status' :other_status
\pset tuples_only on
\pset format unaligned
SELECT demo_check(:'same_status' = 'completed', 'the same request replays: completed, with the stored response');
SELECT demo_check(:'other_status' = 'mismatch', 'a different request under the same key is rejected: mismatch');
SELECT demo_check((SELECT count(*) FROM charges WHERE idem_key = 'pay-1') = 1,
       'pay-1 still has one charge');
INSERT INTO demo_facts VALUES ('mismatch', :'other_status');
