-- contrib/plproxy/shard.sql: the shard side of a PL/Proxy deployment of idem
--
-- Run on every shard database, after CREATE EXTENSION idem, in the same
-- schema as the router's functions of router.sql (public by default):
-- PL/Proxy calls pay() on the shard as <router's schema>.pay(...).
--
-- A merchant's payments, its ledger and its idempotency keys live on one
-- shard, the one the router picks by hashtext(merchant).  Each function here
-- runs as one transaction on that shard (PL/Proxy sends every call on its
-- own, in autocommit), so the claim, the business writes and the completion
-- commit or roll back together, exactly as on a single server.
--
-- The tables are an example of a business schema; the pattern is what to
-- copy: claim with the merchant as scope, branch on the status, write,
-- complete, all in one function.  See doc/scaling.md.

-- How this shard names itself in the router's results: host:port/database
-- (host 'local' over a Unix socket), as PL/Proxy reaches it.
CREATE FUNCTION shard_name()
RETURNS text LANGUAGE sql STABLE
RETURN pg_catalog.format('%s:%s/%s',
                         coalesce(pg_catalog.host(pg_catalog.inet_server_addr()), 'local'),
                         pg_catalog.current_setting('port'),
                         pg_catalog.current_database());

-- May this database serve the merchant's call now?  False while the
-- merchant's rows and keys are moving to another database (the call then
-- answers in_progress, or fails to be retried); an error if this is not the
-- merchant's home.  Under PL/Proxy the router sends every call to the
-- merchant's shard, so this one says yes; contrib/citus/coordinator.sql
-- replaces it with Citus's placement check and its shard moves.
CREATE FUNCTION check_home(merchant text)
RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;

-- The error of a call that cannot run while the merchant moves: to be
-- retried in a moment.
CREATE FUNCTION moving_error(merchant text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'merchant % is moving to another database', moving_error.merchant
        USING ERRCODE = 'object_in_use', HINT = 'Retry in a moment.';
END
$$;

CREATE TABLE merchant_balances (
    merchant text PRIMARY KEY,
    balance  numeric NOT NULL
);

-- One row per charge or refund.  The primary key is the backstop of the
-- idempotency key: should a key's row ever be missing (a merchant moved to
-- another shard without its keys, see doc/scaling.md), a second charge of
-- the same key fails on it instead of booking twice.
CREATE TABLE ledger (
    merchant   text        NOT NULL,
    key        text        NOT NULL,   -- the idempotency key, or the webhook's event id
    kind       text        NOT NULL CHECK (kind IN ('charge', 'refund')),
    amount     numeric     NOT NULL,
    currency   text        NOT NULL,
    charge_id  text        NOT NULL,
    booked_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant, key)
);

-- The charge id a gateway would return; here made up from the key.
CREATE FUNCTION charge_id_for(merchant text, key text)
RETURNS text LANGUAGE sql IMMUTABLE
RETURN 'ch_' || left(md5(merchant || '/' || key), 16);

-- Book one charge and credit the merchant: the business writes.  A body in
-- a string, not BEGIN ATOMIC: Citus cannot send a function to its workers
-- when its body depends on a table's constraint.
CREATE FUNCTION book_charge(merchant text, key text, amount numeric,
                            currency text, charge_id text)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO ledger (merchant, key, kind, amount, currency, charge_id)
    VALUES (book_charge.merchant, book_charge.key, 'charge', book_charge.amount,
            book_charge.currency, book_charge.charge_id);
    INSERT INTO merchant_balances AS b (merchant, balance)
    VALUES (book_charge.merchant, book_charge.amount)
    ON CONFLICT (merchant) DO UPDATE SET balance = b.balance + excluded.balance;
$$;

-- A payment in the in-transaction mode: claim, charge, complete, one
-- transaction.  status is idem_claim's: 'claimed' when this call charged
-- (response is its answer), 'completed' or 'failed' for a replay of the
-- stored answer, 'in_progress' (retry after retry_after) or 'mismatch'
-- (same key, another amount or currency: answer 422).
CREATE FUNCTION pay(merchant text, key text, amount numeric, currency text,
                    OUT status text, OUT response jsonb, OUT retry_after interval)
RETURNS record LANGUAGE plpgsql AS $$
DECLARE
    c record;
    charge text;
BEGIN
    IF NOT check_home(pay.merchant) THEN
        status := 'in_progress';
        retry_after := interval '1 second';
        RETURN;
    END IF;
    SELECT * INTO c
    FROM idem_claim(pay.key,
                    idem_fingerprint(jsonb_build_object('amount', pay.amount,
                                                        'currency', pay.currency)),
                    scope => pay.merchant);
    status := c.status;
    IF c.status <> 'claimed' THEN
        response := c.response;
        retry_after := c.retry_after;
        RETURN;
    END IF;
    charge := charge_id_for(pay.merchant, pay.key);
    PERFORM book_charge(pay.merchant, pay.key, pay.amount, pay.currency, charge);
    response := jsonb_build_object('status', 201,
                                   'body', jsonb_build_object('charge', charge,
                                                              'amount', pay.amount,
                                                              'currency', pay.currency));
    PERFORM idem_complete(pay.key, response, scope => pay.merchant);
END
$$;

-- The last step of a two-phase payment: the gateway has charged, the
-- worker books the charge and completes the key with its claim's token, in
-- one transaction.  A stale token (ID001: another attempt took the key
-- over) or a finished key (ID003) books nothing.  Returns the stored answer.
CREATE FUNCTION pay_settle(merchant text, key text, token bigint, charge_id text,
                           amount numeric, currency text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    answer jsonb;
BEGIN
    IF NOT check_home(pay_settle.merchant) THEN
        PERFORM moving_error(pay_settle.merchant);
    END IF;
    answer := jsonb_build_object('status', 201,
                                 'body', jsonb_build_object('charge', pay_settle.charge_id,
                                                            'amount', pay_settle.amount,
                                                            'currency', pay_settle.currency));
    -- the token is checked first: a stale or finished attempt books nothing
    PERFORM idem_complete(pay_settle.key, answer, scope => pay_settle.merchant,
                          token => pay_settle.token);
    PERFORM book_charge(pay_settle.merchant, pay_settle.key, pay_settle.amount,
                        pay_settle.currency, pay_settle.charge_id);
    RETURN answer;
END
$$;

-- A gateway's refund notification for one of the merchant's charges:
-- verified, deduplicated and applied in one transaction.  The event's
-- data.object is the refunded charge (amount_refunded in minor units,
-- currency, id), as in a Stripe charge.refunded event.  status, event_id
-- and reason are idem_webhook_receive's; the refund is booked only when
-- status is 'new'.
CREATE FUNCTION receive_refund(merchant text, source text, payload text, headers jsonb,
                               client_ip inet DEFAULT NULL,
                               OUT status text, OUT event_id text, OUT reason text)
RETURNS record LANGUAGE plpgsql AS $$
DECLARE
    r record;
    obj jsonb;
    amount numeric;
BEGIN
    IF NOT check_home(receive_refund.merchant) THEN
        PERFORM moving_error(receive_refund.merchant);
    END IF;
    SELECT * INTO r
    FROM idem_webhook_receive(receive_refund.source, receive_refund.payload,
                              receive_refund.headers, receive_refund.client_ip);
    status := r.status;
    event_id := r.event_id;
    reason := r.reason;
    IF r.status <> 'new' THEN
        RETURN;
    END IF;
    obj := receive_refund.payload::jsonb -> 'data' -> 'object';
    amount := round((obj ->> 'amount_refunded')::numeric / 100, 2);
    INSERT INTO ledger (merchant, key, kind, amount, currency, charge_id)
    VALUES (receive_refund.merchant, r.event_id, 'refund', -amount,
            upper(obj ->> 'currency'), obj ->> 'id');
    UPDATE merchant_balances b SET balance = b.balance - amount
    WHERE b.merchant = receive_refund.merchant;
END
$$;

-- idem's calls for one merchant, as the PL/Proxy router (router.sql) or a
-- Citus coordinator (contrib/citus/coordinator.sql) sends them: the
-- merchant first, then idem's own arguments with idem's defaults.  Each
-- checks first that the merchant is served here, so that no key of a
-- merchant whose keys are moving is written where they are leaving.  In
-- a schema of their own, routed: beside idem's functions in one schema,
-- routed.idem_lookup(merchant, key) and idem_lookup(key, scope) would make
-- either call ambiguous.  Keep routed out of search_path: they call idem's
-- functions unqualified.

CREATE SCHEMA routed;

CREATE FUNCTION routed.idem_claim(merchant text, key text, fingerprint bytea DEFAULT NULL,
                           scope text DEFAULT '', lease interval DEFAULT NULL,
                           ttl interval DEFAULT NULL, nowait boolean DEFAULT false,
                           OUT status text, OUT token bigint, OUT attempt integer,
                           OUT response jsonb, OUT checkpoint text,
                           OUT checkpoint_data jsonb, OUT retry_after interval)
RETURNS record LANGUAGE plpgsql AS $$
BEGIN
    IF NOT check_home(idem_claim.merchant) THEN
        status := 'in_progress';
        retry_after := interval '1 second';
        RETURN;
    END IF;
    SELECT * INTO status, token, attempt, response, checkpoint, checkpoint_data, retry_after
    FROM idem_claim(idem_claim.key, idem_claim.fingerprint, idem_claim.scope,
                    idem_claim.lease, idem_claim.ttl, idem_claim.nowait);
END
$$;

CREATE FUNCTION routed.idem_checkpoint(merchant text, key text, phase text, data jsonb DEFAULT NULL,
                                scope text DEFAULT '', token bigint DEFAULT NULL,
                                lease interval DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT check_home(idem_checkpoint.merchant) THEN
        PERFORM moving_error(idem_checkpoint.merchant);
    END IF;
    PERFORM idem_checkpoint(idem_checkpoint.key, idem_checkpoint.phase, idem_checkpoint.data,
                            idem_checkpoint.scope, idem_checkpoint.token, idem_checkpoint.lease);
END
$$;

CREATE FUNCTION routed.idem_complete(merchant text, key text, response jsonb DEFAULT NULL,
                              scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT check_home(idem_complete.merchant) THEN
        PERFORM moving_error(idem_complete.merchant);
    END IF;
    PERFORM idem_complete(idem_complete.key, idem_complete.response, idem_complete.scope,
                          idem_complete.token);
END
$$;

CREATE FUNCTION routed.idem_fail(merchant text, key text, error jsonb DEFAULT NULL,
                          retryable boolean DEFAULT true, scope text DEFAULT '',
                          token bigint DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT check_home(idem_fail.merchant) THEN
        PERFORM moving_error(idem_fail.merchant);
    END IF;
    PERFORM idem_fail(idem_fail.key, idem_fail.error, idem_fail.retryable, idem_fail.scope,
                      idem_fail.token);
END
$$;

CREATE FUNCTION routed.idem_lookup(merchant text, key text, scope text DEFAULT '')
RETURNS TABLE (state text, attempt integer, fingerprint bytea,
               lease_until timestamptz, checkpoint text, created_at timestamptz,
               completed_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT check_home(idem_lookup.merchant) THEN
        PERFORM moving_error(idem_lookup.merchant);
    END IF;
    RETURN QUERY SELECT * FROM idem_lookup(idem_lookup.key, idem_lookup.scope);
END
$$;

CREATE FUNCTION routed.idem_webhook(merchant text, source text, event_id text,
                                    ttl interval DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT check_home(idem_webhook.merchant) THEN
        PERFORM moving_error(idem_webhook.merchant);
    END IF;
    RETURN idem_webhook(idem_webhook.source, idem_webhook.event_id, idem_webhook.ttl);
END
$$;

CREATE FUNCTION routed.idem_webhook_receive(merchant text, source text, payload text,
                                            headers jsonb, client_ip inet DEFAULT NULL,
                                            OUT status text, OUT event_id text, OUT reason text)
RETURNS record LANGUAGE plpgsql AS $$
BEGIN
    IF NOT check_home(idem_webhook_receive.merchant) THEN
        PERFORM moving_error(idem_webhook_receive.merchant);
    END IF;
    SELECT * INTO status, event_id, reason
    FROM idem_webhook_receive(idem_webhook_receive.source, idem_webhook_receive.payload,
                              idem_webhook_receive.headers, idem_webhook_receive.client_ip);
END
$$;

REVOKE ALL ON SCHEMA routed FROM PUBLIC;
REVOKE ALL ON FUNCTION
    routed.idem_claim(text, text, bytea, text, interval, interval, boolean),
    routed.idem_checkpoint(text, text, text, jsonb, text, bigint, interval),
    routed.idem_complete(text, text, jsonb, text, bigint),
    routed.idem_fail(text, text, jsonb, boolean, text, bigint),
    routed.idem_lookup(text, text, text),
    routed.idem_webhook(text, text, text, interval),
    routed.idem_webhook_receive(text, text, text, jsonb, inet),
    shard_name(),
    check_home(text),
    moving_error(text),
    charge_id_for(text, text),
    book_charge(text, text, numeric, text, text),
    pay(text, text, numeric, text),
    pay_settle(text, text, bigint, text, numeric, text),
    receive_refund(text, text, text, jsonb, inet)
FROM PUBLIC;
