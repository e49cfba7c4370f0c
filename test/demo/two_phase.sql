-- make demo: a two-phase payment.  The gateway call sits between claim and
-- completion, so the claim commits as processing with a lease; the first
-- worker dies after the gateway answered, the second takes over.
\pset footer off
\pset tuples_only on
\pset format unaligned
\set fp 'idem_fingerprint(''{"amount": 4200, "currency": "EUR"}'')'

\echo 'Worker 1 claims order-77 with a 2 second lease (the claim commits):'
SELECT status, token, attempt FROM idem_claim('order-77', :fp, lease => '2 s') \gset w1_
\echo '  status' :w1_status ' token' :w1_token ' attempt' :w1_attempt
SELECT demo_check(:'w1_status' = 'claimed' AND :w1_attempt = 1, 'worker 1: claimed, attempt 1');

\echo 'Worker 1 calls the gateway (order-77 as the gateway''s own idempotency key); it answers'
\echo 'with charge ch_demo_77, and worker 1 records that as a checkpoint:'
SELECT idem_checkpoint('order-77', 'gateway_called', '{"charge_id": "ch_demo_77"}',
                       token => :w1_token, lease => '2 s') AS done \gset
\echo 'Worker 1 dies here, before idem_complete.'

\echo 'Worker 2 retries at once:'
SELECT status, coalesce(round(extract(epoch FROM retry_after), 1) || ' s', 'none') AS retry_after
FROM idem_claim('order-77', :fp) \gset w2a_
\echo '  status' :w2a_status ' retry_after' :w2a_retry_after
SELECT demo_check(:'w2a_status' = 'in_progress', 'while the lease holds, a retry is told in_progress');

\echo 'Worker 2 waits until the lease runs out, then claims again:'
SELECT pg_sleep(greatest(0, extract(epoch FROM lease_until - clock_timestamp())) + 0.3)
FROM idem_lookup('order-77') \gset
SELECT status, token, attempt, coalesce(checkpoint, '') AS checkpoint,
       coalesce(checkpoint_data ->> 'charge_id', '') AS charge_id
FROM idem_claim('order-77', :fp, lease => '30 s') \gset w2_
\echo '  status' :w2_status ' token' :w2_token ' attempt' :w2_attempt ' checkpoint' :w2_checkpoint ' charge_id' :w2_charge_id
SELECT demo_check(:'w2_status' = 'claimed' AND :w2_attempt = 2
                  AND :'w2_checkpoint' = 'gateway_called' AND :'w2_charge_id' = 'ch_demo_77',
       'after the lease: claimed, attempt 2, with worker 1''s checkpoint and charge id');

\echo 'Worker 1 comes back while attempt 2 is under way and tries to complete with its stale token:'
SELECT demo_rejected(format('SELECT idem_complete(%L, %L, token => %s)',
                            'order-77', '{"charge": "ch_demo_77"}', :w1_token)) \gset stale_
\echo '  rejected:' :stale_demo_rejected
\echo 'and to record a checkpoint with it:'
SELECT demo_rejected(format('SELECT idem_checkpoint(%L, %L, token => %s)',
                            'order-77', 'gateway_called', :w1_token)) \gset stalecp_
\echo '  rejected:' :stalecp_demo_rejected

\echo 'Worker 2 asks the gateway about ch_demo_77 instead of charging again (it went through),'
\echo 'and completes with its own token:'
SELECT idem_complete('order-77', '{"charge": "ch_demo_77", "amount": 4200, "currency": "EUR"}',
                     token => :w2_token) AS done \gset

SELECT state, attempt, checkpoint FROM idem_lookup('order-77') \gset final_
SELECT status FROM idem_claim('order-77', :fp) \gset after_
\echo 'order-77 now:' :final_state ' attempt' :final_attempt '; a further retry gets' :after_status
SELECT demo_check(:'final_state' = 'completed' AND :final_attempt = 2 AND :'after_status' = 'completed',
       'order-77 completed once, by attempt 2; retries replay it');

INSERT INTO demo_facts VALUES
    ('two_phase_in_progress', :'w2a_status'),
    ('two_phase_retry_after', :'w2a_retry_after'),
    ('two_phase_attempt', :'w2_attempt'),
    ('two_phase_checkpoint', :'w2_checkpoint'),
    ('two_phase_charge', :'w2_charge_id'),
    ('two_phase_stale', :'stale_demo_rejected');
