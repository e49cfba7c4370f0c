SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;
-- Webhooks in the order they happened: idem_webhook_order, and
-- idem_webhook_receive_ordered, which reads the object and the time from
-- a verified delivery.  The Stripe events are signed with the openssl CLI:
--   printf '%s.%s' 1700000000 "$body" | openssl dgst -sha256 -hmac "$secret"
-- the other deliveries are webhook_sources.sql's vectors (copied).
\set stripe_secret 'whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH'
\set stripe_t '1700000000'
\set s1_body '{"id":"evt_ord_created","object":"event","type":"payment_intent.created","created":1700000100,"data":{"object":{"id":"pi_ord_1","object":"payment_intent"}}}'
\set s1_sig 'b2fcf424f6db5410e60e94430ed853f618706adbf1845b3b6ea9cb2699199e9d'
\set s2_body '{"id":"evt_ord_processing","object":"event","type":"payment_intent.processing","created":1700000200,"data":{"object":{"id":"pi_ord_1","object":"payment_intent"}}}'
\set s2_sig '531b3ec08bafec871b1afef0ce03017a53aae702f88fe018dad4e2c8252154cb'
\set s3_body '{"id":"evt_ord_succeeded","object":"event","type":"payment_intent.succeeded","created":1700000300,"data":{"object":{"id":"pi_ord_1","object":"payment_intent"}}}'
\set s3_sig 'a3254ae79576f738f23e0e285b5e65377eb46d8af7e630fad8875a1b5e55a9be'
\set s4_body '{"id":"evt_ord_nocreated","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_ord_1"}}}'
\set s4_sig '91f4a1d26846efe9cd9013d53fffe156aa365735443f80baa49a4d47a90b566d'
\set s5_body '{"id":"evt_ord_future","object":"event","type":"payment_intent.succeeded","created":4102444800,"data":{"object":{"id":"pi_ord_1","object":"payment_intent"}}}'
\set s5_sig 'c18ea3545f214cb103593e2c8c99d6ae0e718e7f95ddbd4eb43787af2779a3d5'
\set gh_secret 'It''s a Secret to Everybody'
\set gh_secret_b 'gh-webhook-secret-2'
\set gh_payload 'Hello, World!'
\set gh_sig '757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17'
\set gh_sig_b '5d472512027957372725ea73bd032136eec380e4a49b3d0366b49081e7060f60'
\set rzp_secret 'rzp-webhook-secret-7Gq2'
\set rzp_payload '{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":"payment.captured","contains":["payment"],"payload":{"payment":{"entity":{"id":"pay_DESlfW9H8K9uqM","amount":100,"currency":"INR","status":"captured"}}},"created_at":1567674606}'
\set rzp_sig 'ffef5b82c07cf328b6a3113c3653de5e393f139d6505eb6eb537379ed594f9dc'
\set cko_secret '0b5ec7f5-2b2e-4b71-9d64-0d5a2c4e6a3f'
\set cko_payload '{"id":"evt_az5sblvku4ge3dwpztvyizgcau","type":"payment_captured","created_on":"2019-08-23T14:11:23Z","data":{"id":"pay_waji5hpbdevunjifb3uwpl6x2u","amount":6540,"currency":"USD"}}'
\set cko_sig '8df5eba9d24c699712cbd4975a5c91b06df7d3fa62ed6360bdc1fb6be4920f28'
\set pdl_secret 'pdl_ntfset_01hv8wpt2bm0xc3a4smqqq8ns7_4Zx0dNfPCM1c3OLXxz8GqUYX9RqGYpXo'
\set pdl_ts '1671552777'
\set pdl_payload '{"event_id":"evt_01hv8x2a6ssgd0xq9yjc5bn9vq","event_type":"transaction.completed","occurred_at":"2022-12-20T16:12:57.000000Z","notification_id":"ntf_01hv8x2a8c1pq0mw5m5vq3y3y1","data":{"id":"txn_01hv8wptq8987qeep44cyrewp9","status":"completed","currency_code":"USD"}}'
\set pdl_sig 'bbf2a6095ab2a252ce6234677af2a4b63270590992cd9fd89faebd2be33565e1'
\set sq_secret 'https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9 Ibxx_5AKakO-3qeNVR61Dw'
\set sq_body '{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}'
\set sq_sig 'GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4='
\set awx_secret 'whsec_awx_5f3c9e1d7b2a4c6e8f0a1b3d5c7e9f2a'
\set awx_ts '1764410400123'
\set awx_payload '{"id":"evt_hkdf7zbpkg3uhqgrxqu","name":"payment_intent.succeeded","account_id":"acct_8yTcQmZ9Ta6Lk1Zr6Wb2cQ","data":{"object":{"id":"int_hkdmr2jxpgbm1kdq2te","amount":100.5,"currency":"AUD","status":"SUCCEEDED"}},"created_at":"2026-11-29T10:00:00+0000"}'
\set awx_sig 'd3c5782a6dbc40065ce8065bcfe9a6db2e6b168c737fbbd8b96bdf3493470135'
\set mp_secret '9f1c2e7a4b6d8f0a3c5e7b9d1f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a'
\set mp_ts '1764410400'
\set mp_request_id 'bb56a2f1-6aae-46ac-982e-9dcd3581d08e'
\set mp_payload '{"action":"payment.updated","api_version":"v1","data":{"id":"123456789"},"date_created":"2025-11-29T10:00:00Z","id":118765432101,"live_mode":true,"type":"payment","user_id":2647542}'
\set mp_sig '9f0ada98e313098ee7969e5a1c459db531f09a82023faa34b4679645289c3a2c'

-- Run a statement; show its SQLSTATE, message and detail instead of failing
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m text;
    d text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || m || coalesce(' / ' || nullif(d, ''), '');
END $$;

--
-- idem_webhook_order: the caller names the object and the time
--
-- the first event of an object is new; an older one is stale; the same
-- event again is a duplicate, even when older than the newest; a newer one
-- is new; one at the same time as the newest, another event, is new
SELECT idem_webhook_order('src', 'pi_1', '2026-01-01 10:00Z', 'evt_b') AS b;
SELECT idem_webhook_order('src', 'pi_1', '2026-01-01 09:00Z', 'evt_a') AS a_older;
SELECT idem_webhook_order('src', 'pi_1', '2026-01-01 10:00Z', 'evt_b') AS b_again;
SELECT idem_webhook_order('src', 'pi_1', '2026-01-01 11:00Z', 'evt_c') AS c;
SELECT idem_webhook_order('src', 'pi_1', '2026-01-01 10:00Z', 'evt_b') AS b_after_c;
SELECT idem_webhook_order('src', 'pi_1', '2026-01-01 11:00Z', 'evt_c2') AS c2_same_time;
-- a stale event is not recorded: it is stale again, not a duplicate
SELECT idem_webhook_order('src', 'pi_1', '2026-01-01 09:00Z', 'evt_a') AS a_again;
SELECT count(*) AS evt_a_recorded FROM idem.webhooks WHERE event_id = 'evt_a';
-- another object, another source: their own newest events
SELECT idem_webhook_order('src', 'pi_2', '2026-01-01 09:00Z', 'evt_d') AS other_object;
SELECT idem_webhook_order('src2', 'pi_1', '2026-01-01 09:00Z', 'evt_a') AS other_source;
SELECT source, object_id, event_time, event_id, expires_at - applied_at AS kept
FROM idem.webhook_order ORDER BY 1, 2;
-- without an event id: the newest time again is a duplicate; the newest
-- is kept for the longest ttl it was applied with
SELECT idem_webhook_order('seq', 'acct_1', '2026-01-01 10:00Z') AS first,
       idem_webhook_order('seq', 'acct_1', '2026-01-01 10:00Z') AS same_time,
       idem_webhook_order('seq', 'acct_1', '2026-01-01 09:59Z') AS older,
       idem_webhook_order('seq', 'acct_1', '2026-01-01 10:01Z', ttl => '1 hour') AS newer;
SELECT event_time, event_id, expires_at - applied_at > interval '6 days' AS kept_7_days
FROM idem.webhook_order WHERE source = 'seq';
-- a newer event kept for less does not shorten what the newest is kept for
SELECT idem_webhook_order('seq', 'acct_2', '2026-01-01 10:00Z', ttl => '7 days') AS kept_7_days,
       idem_webhook_order('seq', 'acct_2', '2026-01-01 10:01Z', ttl => '1 second') AS kept_1_second;
SELECT event_time, expires_at - applied_at > interval '6 days' AS kept_longest
FROM idem.webhook_order WHERE source = 'seq' AND object_id = 'acct_2';
-- a newest event kept past its ttl is forgotten: an older event is new again
UPDATE idem.webhook_order SET expires_at = now() - interval '1 second' WHERE source = 'seq';
SELECT idem_webhook_order('seq', 'acct_1', '2026-01-01 09:00Z') AS after_expiry;
-- the purge deletes an expired newest event
UPDATE idem.webhook_order SET expires_at = now() - interval '1 second' WHERE source = 'seq';
SELECT idem_purge() >= 1 AS purged;
SELECT count(*) AS seq_left FROM idem.webhook_order WHERE source = 'seq';
-- a rolled-back delivery leaves nothing
BEGIN;
SELECT idem_webhook_order('src', 'pi_9', '2026-01-01 10:00Z', 'evt_rb') AS in_tx;
ROLLBACK;
SELECT count(*) AS rolled_back FROM idem.webhook_order WHERE object_id = 'pi_9';
SELECT idem_webhook_order('src', 'pi_9', '2026-01-01 09:00Z', 'evt_rb0') AS older_after_rollback;

-- bad arguments: the error, and nothing written
CREATE TEMP TABLE before AS SELECT (SELECT count(*) FROM idem.webhook_order) AS o,
                                   (SELECT count(*) FROM idem.webhooks) AS w;
SELECT pg_temp.err($$SELECT idem_webhook_order(NULL, 'pi_x', now(), 'e')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order(repeat('s', 256), 'pi_x', now(), 'e')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', NULL, now(), 'e')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', '', now(), 'e')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', repeat('o', 256), now(), 'e')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', 'pi_x', NULL, 'e')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', 'pi_x', 'infinity', 'e')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', 'pi_x', now(), '')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', 'pi_x', now(), repeat('e', 256))$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', 'pi_x', now(), 'e', '0')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', 'pi_x', now(), 'e', '-1 day')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', 'pi_x', now(), 'e', '-12 months +360 days')$$);
SELECT pg_temp.err($$SELECT idem_webhook_order('src', 'pi_x', now(), NULL, '-12 months +360 days')$$);
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT idem_webhook_order('src', 'pi_x', now(), 'e')$$);
COMMIT;
SELECT (SELECT count(*) FROM idem.webhook_order) = o AND (SELECT count(*) FROM idem.webhooks) = w
       AS nothing_written
FROM before;

--
-- idem_webhook_receive_ordered: verified, then in order, with the object
-- and the time where the scheme writes them
--
SELECT idem_webhook_source_set('o-stripe', 'stripe', ARRAY[:'stripe_secret'], '100 years', ttl => '3 days');
SELECT idem_webhook_source_set('o-github', 'github', ARRAY[:'gh_secret']);
SELECT idem_webhook_source_set('o-razorpay', 'razorpay', ARRAY[:'rzp_secret']);
SELECT idem_webhook_source_set('o-checkout', 'checkout', ARRAY[:'cko_secret']);
SELECT idem_webhook_source_set('o-paddle', 'paddle', ARRAY[:'pdl_secret'], '100 years');
SELECT idem_webhook_source_set('o-square', 'square', ARRAY[:'sq_secret']);
SELECT idem_webhook_source_set('o-airwallex', 'airwallex', ARRAY[:'awx_secret'], '100 years');
SELECT idem_webhook_source_set('o-mercadopago', 'mercadopago', ARRAY[:'mp_secret'], '100 years');
CREATE TEMP TABLE stripe_events AS
SELECT * FROM (VALUES
  ('created', :'s1_body', :'s1_sig'),
  ('processing', :'s2_body', :'s2_sig'),
  ('succeeded', :'s3_body', :'s3_sig'),
  ('no_created', :'s4_body', :'s4_sig'),
  ('in_2100', :'s5_body', :'s5_sig')
) AS e(name, body, sig);
CREATE FUNCTION pg_temp.deliver(n text) RETURNS SETOF record LANGUAGE sql AS $$
    SELECT r.* FROM pg_temp.stripe_events e,
        idem_webhook_receive_ordered('o-stripe', e.body,
            jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' || e.sig)) r
    WHERE e.name = n
$$;
-- succeeded arrives first, then processing (older: stale), then created
-- (older still), then succeeded again (a duplicate)
SELECT * FROM pg_temp.deliver('succeeded') AS r(status text, event_id text, reason text, object_id text, event_time timestamptz);
SELECT * FROM pg_temp.deliver('processing') AS r(status text, event_id text, reason text, object_id text, event_time timestamptz);
SELECT * FROM pg_temp.deliver('created') AS r(status text, event_id text, reason text, object_id text, event_time timestamptz);
SELECT * FROM pg_temp.deliver('succeeded') AS r(status text, event_id text, reason text, object_id text, event_time timestamptz);
-- the event carries no time: malformed, nothing written
SELECT * FROM pg_temp.deliver('no_created') AS r(status text, event_id text, reason text, object_id text, event_time timestamptz);
-- kept as the source's deliveries are (its ttl, 3 days)
SELECT object_id, event_time, event_id, expires_at - applied_at AS kept
FROM idem.webhook_order WHERE source = 'o-stripe';
SELECT event_id, expires_at - received_at AS kept FROM idem.webhooks WHERE source = 'o-stripe';
-- a forged one is rejected before anything is read
SELECT * FROM idem_webhook_receive_ordered('o-stripe', :'s2_body',
    jsonb_build_object('Stripe-Signature', 't=1700000000,v1=' || :'s1_sig'));
SELECT * FROM idem_webhook_receive_ordered('o-nobody', :'s2_body', '{}');
-- the other schemes with a reader: the object and the time of each
SELECT * FROM idem_webhook_receive_ordered('o-razorpay', :'rzp_payload',
    jsonb_build_object('X-Razorpay-Signature', :'rzp_sig', 'X-Razorpay-Event-Id', 'KXrhRlGwC2Pv2B'));
SELECT * FROM idem_webhook_receive_ordered('o-checkout', :'cko_payload', jsonb_build_object('Cko-Signature', :'cko_sig'));
SELECT * FROM idem_webhook_receive_ordered('o-paddle', :'pdl_payload',
    jsonb_build_object('Paddle-Signature', 'ts=' || :'pdl_ts' || ';h1=' || :'pdl_sig'));
SELECT * FROM idem_webhook_receive_ordered('o-square', :'sq_body',
    jsonb_build_object('x-square-hmacsha256-signature', :'sq_sig'));
SELECT * FROM idem_webhook_receive_ordered('o-airwallex', :'awx_payload',
    jsonb_build_object('x-timestamp', :'awx_ts', 'x-signature', :'awx_sig'));
-- a scheme without one (GitHub): malformed, unless the handler names them
SELECT * FROM idem_webhook_receive_ordered('o-github', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig',
                       'X-GitHub-Delivery', 'gh-ord-1'));
SELECT * FROM idem_webhook_receive_ordered('o-github', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig',
                       'X-GitHub-Delivery', 'gh-ord-1'),
    object => 'repo/1', object_time => '2026-01-01 10:00Z');
-- nor Mercado Pago (its body has no event time): the handler names them
SELECT * FROM idem_webhook_receive_ordered('o-mercadopago', :'mp_payload',
    jsonb_build_object('x-signature', 'ts=' || :'mp_ts' || ',v1=' || :'mp_sig', 'x-request-id', :'mp_request_id'));
SELECT * FROM idem_webhook_receive_ordered('o-mercadopago', :'mp_payload',
    jsonb_build_object('x-signature', 'ts=' || :'mp_ts' || ',v1=' || :'mp_sig', 'x-request-id', :'mp_request_id'),
    object => 'payment/123456789', object_time => '2025-11-29 10:00Z');
SELECT pg_temp.err($$SELECT idem_webhook_receive_ordered('o-github', 'x', '{}', object => '')$$);
SELECT pg_temp.err($$SELECT idem_webhook_receive_ordered('o-github', 'x', '{}', object_time => '-infinity')$$);

-- an event dated more than an hour ahead (Adyen does not sign eventDate):
-- rejected, nothing written; a time the handler gives is its own
SELECT * FROM pg_temp.deliver('in_2100') AS r(status text, event_id text, reason text, object_id text, event_time timestamptz);
SELECT count(*) AS in_2100_recorded FROM idem.webhooks WHERE event_id = 'evt_ord_future';
SELECT status, event_id, reason, object_id
FROM idem_webhook_receive_ordered('o-github', :'gh_payload',
    jsonb_build_object('X-Hub-Signature-256', 'sha256=' || :'gh_sig', 'X-GitHub-Delivery', 'gh-ord-2'),
    object => 'repo/2', object_time => now() + interval '2 hours');
SELECT count(*) AS future_recorded FROM idem.webhooks WHERE event_id = 'gh-ord-2';

-- the readers never raise: bodies that are not JSON, or lack the fields
SELECT s, b, o.* FROM
  (VALUES ('stripe'), ('adyen'), ('airwallex'), ('razorpay'), ('checkout'), ('paddle'), ('square'), ('github')) AS s(s),
  (VALUES ('{"data":{"object":{"id":"x"}},"created":1.5}'), ('{"data":{"id":7},"created_on":"2026-13-01T00:00:00Z"}'),
          ('{"data":{"id":"y"},"created_at":"2026-01-01T00:00:00"}'), ('[1,2]'), ('"x"'), ('{"created":-1}'),
          ('{"pspReference":"P1","originalReference":"","eventDate":"2026-01-01T10:00:00+01:00"}'),
          ('{"NotificationRequestItem":{"pspReference":"R1","originalReference":"P1","eventDate":"2026-01-01T11:00:00+01:00"}}')) AS b(b),
  idem.webhook_object(s, b::jsonb) o
WHERE o.object_id IS NOT NULL OR o.event_time IS NOT NULL
ORDER BY 1, 2;
SELECT idem.webhook_json('not json') IS NULL AS not_json,
       idem.webhook_json('{"a":"\u0000"}') IS NULL AS nul,
       idem.webhook_json(repeat('[', 10000) || repeat(']', 10000)) IS NOT NULL AS deep;

SELECT idem_webhook_source_drop(source) FROM idem_webhook_sources;
