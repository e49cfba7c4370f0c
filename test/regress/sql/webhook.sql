-- A webhook handler that updates an order, delivered five times: the order
-- is paid once and the delivery recorded once.  The handler is the one of
-- doc/webhooks.md ("The handler pattern"), verbatim (test 121 checks); the
-- deliveries are signed here with pgcrypto's hmac(), independent of idem.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;
-- pgcrypto may be there already from another test: install it quietly, and
-- at the end remove it only if this test installed it
SELECT NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pgcrypto') AS drop_pgcrypto \gset
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
RESET client_min_messages;
-- the application's objects live in a schema of their own, dropped at the end
CREATE SCHEMA regress_webhook;
SET search_path = regress_webhook, public;

-- the handler of doc/webhooks.md ("The handler pattern"), verbatim
CREATE TABLE orders (
    id     bigint PRIMARY KEY,
    amount numeric NOT NULL, currency text NOT NULL,
    status text NOT NULL DEFAULT 'pending'
           CHECK (status IN ('pending', 'paid', 'failed', 'refunded'))
);

-- Move an order only from the states the step expects (WH409: too early)
CREATE FUNCTION apply_order_event(order_id bigint, step text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE orders SET status = step
    WHERE id = order_id
      AND status = ANY (CASE step WHEN 'paid' THEN ARRAY['pending', 'failed']
                                  WHEN 'failed' THEN ARRAY['pending']
                                  ELSE ARRAY['paid'] END);
    IF FOUND THEN
        RETURN 'applied';
    ELSIF NOT EXISTS (SELECT FROM orders WHERE id = order_id) THEN
        RETURN 'unknown_order';
    ELSIF step = 'refunded' THEN
        RAISE EXCEPTION 'order % is not paid', order_id USING ERRCODE = 'WH409';
    END IF;
    RETURN 'stale';
END
$$;

-- For another gateway: its source and the two lines marked "gateway".
CREATE FUNCTION handle_stripe_webhook(payload text, headers jsonb, client_ip inet,
                                      OUT http_status int, OUT outcome text)
LANGUAGE plpgsql AS $$
DECLARE
    delivery record;
    event    jsonb;
    step     text;
    order_id bigint;
BEGIN
    BEGIN  -- a savepoint: WH409 takes the delivery back with its record
        delivery := idem_webhook_receive('stripe', payload, headers, client_ip);
        http_status := CASE delivery.status WHEN 'rejected' THEN 400 ELSE 200 END;
        outcome := concat_ws(': ', delivery.status, delivery.reason);
        IF delivery.status <> 'new' THEN
            RETURN;
        END IF;
        event := payload::jsonb;
        step := CASE event->>'type'                                    -- gateway
                WHEN 'payment_intent.succeeded' THEN 'paid'
                WHEN 'payment_intent.payment_failed' THEN 'failed'
                WHEN 'charge.refunded' THEN 'refunded' END;
        IF step IS NULL THEN
            outcome := 'ignored';
        ELSE
            order_id := event #>> '{data,object,metadata,order_id}';   -- gateway
            outcome := apply_order_event(order_id, step);
        END IF;
    EXCEPTION WHEN SQLSTATE 'WH409' THEN
        http_status := 409; outcome := 'too_early';
    END;
END
$$;

-- the source of doc/webhooks/stripe.md; its addresses are documentation ranges
SELECT idem_webhook_source_set(
    'stripe', 'stripe', ARRAY['whsec_regress_webhook_secret'],
    tolerance   => '5 minutes',
    allowed_ips => ARRAY['192.0.2.0/24', '198.51.100.0/24']::cidr[],
    ttl         => '30 days');

CREATE TABLE order_log (order_id bigint, status text);
CREATE FUNCTION log_order_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        INSERT INTO order_log VALUES (NEW.id, NEW.status);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER order_status_log AFTER UPDATE ON orders
    FOR EACH ROW EXECUTE FUNCTION log_order_status();

INSERT INTO orders (id, amount, currency) VALUES
    (42, 100, 'USD'), (43, 25, 'EUR'), (44, 10, 'USD'), (45, 70, 'GBP');

-- Stripe-Signature headers for a payload, signed now (as Stripe signs every
-- retry anew)
CREATE FUNCTION pg_temp.sign(payload text, secret text DEFAULT 'whsec_regress_webhook_secret')
RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('Stripe-Signature',
         't=' || t || ',v1=' || encode(hmac(t || '.' || payload, secret, 'sha256'), 'hex'))
  FROM (SELECT floor(extract(epoch FROM clock_timestamp()))::bigint::text AS t) AS n
$$;
-- a Stripe event about an order
CREATE FUNCTION pg_temp.event(id text, type text, order_id bigint) RETURNS text LANGUAGE sql AS $$
  SELECT jsonb_build_object('id', id, 'object', 'event', 'type', type,
                            'data', jsonb_build_object('object',
                                    jsonb_build_object('id', 'pi_' || order_id,
                                                       'metadata', jsonb_build_object('order_id', order_id::text))))::text
$$;
-- one delivery: the app's transaction around the handler (autocommit here)
CREATE FUNCTION pg_temp.deliver(payload text) RETURNS text LANGUAGE sql AS $$
  SELECT http_status || ' ' || outcome FROM handle_stripe_webhook(payload, pg_temp.sign(payload), '192.0.2.10')
$$;

--
-- Five deliveries of one event, each in its own transaction (as the provider
-- retries): applied once, then duplicates
--
SELECT pg_temp.event('evt_regress_paid_42', 'payment_intent.succeeded', 42) AS paid_42 \gset
SELECT format('SELECT %s AS delivery, pg_temp.deliver(%L) AS answer', n, :'paid_42')
FROM generate_series(1, 5) AS n \gexec
SELECT id, status FROM orders WHERE id = 42;
-- the order became paid once
SELECT status, count(*) AS changes FROM order_log WHERE order_id = 42 GROUP BY status;
-- and the delivery is recorded once
SELECT source, event_id FROM idem.webhooks WHERE event_id = 'evt_regress_paid_42';

-- The recipe's conditional UPDATE would by itself stop a second payment of
-- order 42.  A handler that books money has no such guard: each time it
-- runs it adds a payment.  Five deliveries of its event, each in its own
-- transaction, book one payment, because idem_webhook lets only the first
-- through.
CREATE TABLE order_payments (order_id bigint NOT NULL, amount numeric NOT NULL, event_id text NOT NULL);
CREATE FUNCTION pg_temp.book_payment(payload text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    event jsonb := payload::jsonb;
BEGIN
    IF NOT idem_webhook('stripe', event->>'id') THEN
        RETURN 'duplicate';
    END IF;
    INSERT INTO order_payments
    SELECT id, amount, event->>'id' FROM orders
    WHERE id = (event #>> '{data,object,metadata,order_id}')::bigint;
    RETURN 'booked';
END $$;
SELECT pg_temp.event('evt_regress_booked_43', 'payment_intent.succeeded', 43) AS booked_43 \gset
SELECT format('SELECT %s AS delivery, pg_temp.book_payment(%L) AS answer', n, :'booked_43')
FROM generate_series(1, 5) AS n \gexec
SELECT order_id, count(*) AS payments, sum(amount) AS booked FROM order_payments GROUP BY order_id;

-- a forged delivery (wrong secret) is refused and records nothing
SELECT pg_temp.event('evt_regress_forged', 'charge.refunded', 42) AS forged \gset
SELECT http_status, outcome
FROM handle_stripe_webhook(:'forged', pg_temp.sign(:'forged', 'whsec_not_the_secret'), '192.0.2.10');
-- so is a tampered body with a genuine signature
SELECT http_status, outcome
FROM handle_stripe_webhook(replace(:'paid_42', '42', '43'), pg_temp.sign(:'paid_42'), '192.0.2.10');
-- so is a genuine delivery from an address the source does not allow
-- (written as IPv4, or IPv4-mapped IPv6 as dual-stack servers report it),
-- or whose address the handler lost
SELECT http_status, outcome
FROM handle_stripe_webhook(:'forged', pg_temp.sign(:'forged'), '203.0.113.7');
SELECT http_status, outcome
FROM handle_stripe_webhook(:'forged', pg_temp.sign(:'forged'), '::ffff:203.0.113.7');
SELECT http_status, outcome
FROM handle_stripe_webhook(:'forged', pg_temp.sign(:'forged'), NULL);
SELECT count(*) AS forged_records FROM idem.webhooks WHERE event_id = 'evt_regress_forged';
SELECT status FROM orders WHERE id = 42;

--
-- A delivery whose transaction rolls back leaves nothing: it is delivered again
--
SELECT pg_temp.event('evt_regress_paid_43', 'payment_intent.succeeded', 43) AS paid_43 \gset
BEGIN;
SELECT pg_temp.deliver(:'paid_43') AS answer;
SELECT status FROM orders WHERE id = 43;
ROLLBACK;
SELECT status FROM orders WHERE id = 43;
SELECT count(*) AS records FROM idem.webhooks WHERE event_id = 'evt_regress_paid_43';
SELECT pg_temp.deliver(:'paid_43') AS redelivery;
SELECT pg_temp.deliver(:'paid_43') AS again;
SELECT status, count(*) AS changes FROM order_log WHERE order_id = 43 GROUP BY status;

--
-- Moving an order forward only from the expected state
--
-- a late "payment failed" for a paid order is stale: recorded, order unchanged
SELECT pg_temp.deliver(pg_temp.event('evt_regress_failed_42', 'payment_intent.payment_failed', 42)) AS late_failure;
SELECT status FROM orders WHERE id = 42;
-- a refund that overtakes the payment is too early: 409, nothing recorded,
-- so the provider's next delivery of it is processed
SELECT pg_temp.event('evt_regress_refund_44', 'charge.refunded', 44) AS refund_44 \gset
SELECT pg_temp.deliver(:'refund_44') AS refund_first;
SELECT status FROM orders WHERE id = 44;
SELECT count(*) AS records FROM idem.webhooks WHERE event_id = 'evt_regress_refund_44';
SELECT pg_temp.deliver(pg_temp.event('evt_regress_paid_44', 'payment_intent.succeeded', 44)) AS payment;
SELECT pg_temp.deliver(:'refund_44') AS refund_redelivered;
SELECT pg_temp.deliver(:'refund_44') AS refund_again;
SELECT status FROM orders WHERE id = 44;
-- a success that arrives after the refund (another event id) cannot move the
-- order backwards
SELECT pg_temp.deliver(pg_temp.event('evt_regress_paid_44b', 'payment_intent.succeeded', 44)) AS late_success;
SELECT status FROM orders WHERE id = 44;
SELECT status, count(*) AS changes FROM order_log WHERE order_id = 44 GROUP BY status ORDER BY status;
-- the bare pattern: the conditional UPDATE changes no row when the state is wrong
WITH moved AS (
    UPDATE orders SET status = 'paid'
    WHERE id = 44 AND status IN ('pending', 'failed')
    RETURNING id)
SELECT count(*) AS moved_backwards FROM moved;
WITH moved AS (
    UPDATE orders SET status = 'failed'
    WHERE id = 45 AND status = 'pending'
    RETURNING id)
SELECT count(*) AS moved_forward FROM moved;
-- a failed order may still be paid (the customer retried with another card)
SELECT pg_temp.deliver(pg_temp.event('evt_regress_paid_45', 'payment_intent.succeeded', 45)) AS paid_after_failure;
SELECT status FROM orders WHERE id = 45;
-- an unknown order, and an event type the handler does not apply
SELECT pg_temp.deliver(pg_temp.event('evt_regress_unknown', 'payment_intent.succeeded', 999)) AS unknown_order;
SELECT pg_temp.deliver(pg_temp.event('evt_regress_other', 'customer.created', 42)) AS other_type;
SELECT pg_temp.deliver(pg_temp.event('evt_regress_other', 'customer.created', 42)) AS other_type_again;

--
-- Expiry: a record past its ttl is a new delivery
--
SELECT idem_webhook('regress-expiry', 'evt-1', ttl => '1 ms') AS first;
SELECT pg_sleep(0.01);
SELECT idem_webhook('regress-expiry', 'evt-1') AS after_expiry;
SELECT idem_webhook('regress-expiry', 'evt-1') AS duplicate;
-- the record was renewed in place, with the default ttl (7 days)
SELECT count(*) AS records,
       bool_and(expires_at - received_at BETWEEN '6 days 23 hours' AND '7 days') AS kept_7_days
FROM idem.webhooks WHERE source = 'regress-expiry';

--
-- Scoping: (source, event_id) is the identity
--
SELECT idem_webhook('regress-a', 'evt-1') AS a_1,
       idem_webhook('regress-b', 'evt-1') AS b_1,
       idem_webhook('regress-a', 'evt-2') AS a_2,
       idem_webhook('regress-a', 'evt-1') AS a_1_again,
       idem_webhook('', 'evt-1') AS empty_source;
SELECT source, event_id FROM idem.webhooks
WHERE source IN ('regress-a', 'regress-b', '') ORDER BY source, event_id;

--
-- A queue consumer: source = queue, event_id = message id; the message is
-- acknowledged after COMMIT, so a crash before the ack redelivers it
--
CREATE TABLE shipments (order_id bigint PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now());
CREATE FUNCTION consume(queue text, message_id text, order_id bigint) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT idem_webhook(queue, message_id) THEN
        RETURN 'duplicate: ack';
    END IF;
    INSERT INTO shipments (order_id) VALUES (consume.order_id);
    RETURN 'applied: ack after commit';
END $$;
-- the first delivery fails after the insert (the consumer crashes): rolled back
BEGIN;
SELECT consume('regress.orders.ship', 'msg-1', 42) AS first_try;
ROLLBACK;
SELECT count(*) AS shipments FROM shipments;
-- redelivered: applied and committed; the ack is lost, so it comes twice more
SELECT consume('regress.orders.ship', 'msg-1', 42) AS redelivery;
SELECT consume('regress.orders.ship', 'msg-1', 42) AS after_lost_ack;
SELECT consume('regress.orders.ship', 'msg-1', 42) AS again;
-- another message, and the same message id on another queue
SELECT consume('regress.orders.ship', 'msg-2', 43) AS other_message;
SELECT consume('regress.orders.ship.eu', 'msg-1', 44) AS other_queue;
SELECT order_id FROM shipments ORDER BY order_id;

-- clean up, so that the test can run again in the same database
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA regress_webhook CASCADE;
RESET client_min_messages;
SELECT idem_webhook_source_drop('stripe');
DELETE FROM idem.webhooks
WHERE event_id LIKE 'evt\_regress\_%' OR source LIKE 'regress%'
   OR (source = '' AND event_id = 'evt-1');
\if :drop_pgcrypto
DROP EXTENSION pgcrypto;
\endif
