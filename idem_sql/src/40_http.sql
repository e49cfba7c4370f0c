-- idem_http_claim and idem_http_respond: a claim answered in the terms of
-- the IETF Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header),
-- and the attempt finished with the HTTP response exactly as sent:
--
--   claimed      no answer: do the work, then idem_http_respond
--   completed    the stored status and body, byte for byte
--   failed       the same (a final failure, such as a declined card)
--   in_progress  409, Retry-After
--   mismatch     422
--   bad_key      400: no Idempotency-Key, an empty one or one too long
--
-- 409, 422 and 400 come with an RFC 9457 problem body.  A key finished by
-- idem_complete or idem_fail replays as 200 or 400 with its jsonb's text.
--
-- A duplicate of a request still in flight (an uncommitted claim) is waited
-- for at most `wait`, in the lock manager as idem_claim waits: the claim is
-- tried again in a subtransaction with lock_timeout set to what is left of
-- the wait (and of statement_timeout, so that it ends first); when it fires,
-- the subtransaction is rolled back, the answer is in_progress and the
-- caller's transaction goes on.  The session's lock_timeout is restored.
--
-- A claim made without a lease outside a transaction block must be finished
-- by the statement that made it: it is noted in idem.http_unfinished, whose
-- deferred constraint trigger refuses the commit if the claim is still in
-- progress then (and otherwise removes the note).  The note is a table of
-- its own so that idem.keys has no trigger: every claim would pay for it.

-- The problem body (RFC 9457) of an answer that is not a replay.
CREATE OR REPLACE FUNCTION idem.http_problem(title text, http_status integer, detail text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '{"type":"about:blank","title":"' || title || '","status":' || http_status
       || ',"detail":"' || detail || '"}';

-- The claims idem_http_claim made outside a transaction block without a
-- lease, in transactions not yet committed (each transaction removes its
-- own notes before it commits).
CREATE UNLOGGED TABLE IF NOT EXISTS idem.http_unfinished (
    scope text COLLATE "C" NOT NULL,
    key   text COLLATE "C" NOT NULL,
    token bigint NOT NULL
);
REVOKE ALL ON idem.http_unfinished FROM PUBLIC;

-- Refuse the commit of a claim noted in idem.http_unfinished that is still
-- in progress; otherwise remove the note (the deferred constraint trigger
-- below runs it at commit).
CREATE OR REPLACE FUNCTION idem.http_must_finish() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM idem.keys k
                WHERE k.key = NEW.key AND k.scope = NEW.scope AND k.token = NEW.token
                  AND k.state = 'processing') THEN
        RAISE EXCEPTION USING ERRCODE = '25P01',
            MESSAGE = format('key "%s" was claimed outside a transaction block and not finished', NEW.key),
            DETAIL = 'The claim would commit as processing, without the work of its request.',
            HINT = 'Run idem_http_claim, the work and idem_http_respond in one transaction, or pass a lease for a two-phase claim.  Behind pgbouncer, see the driver settings in doc/operations.md.';
    END IF;
    DELETE FROM idem.http_unfinished u WHERE u.token = NEW.token;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem.http_problem(text, integer, text), idem.http_must_finish() FROM PUBLIC;

DROP TRIGGER IF EXISTS http_unfinished_check ON idem.http_unfinished;
CREATE CONSTRAINT TRIGGER http_unfinished_check
    AFTER INSERT ON idem.http_unfinished
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION idem.http_must_finish();

-- Claim the key of an HTTP request and say what to answer if it is not this
-- request's to do; a duplicate of a request in flight waits for it at most
-- `wait` (NULL: as long as it takes).
CREATE OR REPLACE FUNCTION idem_http_claim(
    key text, fingerprint bytea DEFAULT NULL, scope text DEFAULT '',
    wait interval DEFAULT '0 s', lease interval DEFAULT NULL, ttl interval DEFAULT NULL,
    OUT status text, OUT http_status integer, OUT body text, OUT content_type text,
    OUT retry_after integer, OUT token bigint, OUT attempt integer,
    OUT checkpoint text, OUT checkpoint_data jsonb)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    e text[];
    v_lease interval := coalesce(lease, idem.setting_lease());
    v_ttl interval := coalesce(ttl, idem.setting_ttl());
    deadline timestamptz;
    left_ms numeric;
    saved_lock_timeout text;
    c record;
BEGIN
    IF NOT idem.input_key_valid(key) THEN
        status := 'bad_key';
        http_status := 400;
        body := idem.http_problem('Idempotency-Key is missing or invalid', 400,
            'This operation is idempotent: send an Idempotency-Key header of 1 to 255 bytes.');
        content_type := 'application/problem+json';
        RETURN;
    END IF;
    e := coalesce(idem.input_fingerprint_error(fingerprint), idem.input_scope_error(scope, 'scope'),
                  idem.input_interval_error(v_lease, 'lease'), idem.input_interval_error(v_ttl, 'ttl'),
                  CASE WHEN date_part('year', wait) < 0 OR date_part('month', wait) < 0
                            OR date_part('day', wait) < 0 OR wait - date_trunc('day', wait) < interval '0'
                       THEN ARRAY['22023', 'wait must not be negative'] END);
    IF e IS NULL AND wait IS NOT NULL THEN
        deadline := clock_timestamp();
        IF wait <> interval '0' THEN
            e := idem.input_after_error(deadline, wait, 'wait');
            deadline := CASE WHEN e IS NULL THEN idem.input_end(deadline, wait) END;
        END IF;
    END IF;
    e := coalesce(e, idem.input_writable_error('idem_claim()'));
    IF e IS NOT NULL THEN
        IF e[3] IS NULL AND e[4] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2];
        ELSIF e[4] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], DETAIL = e[3];
        ELSIF e[3] IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], HINT = e[4];
        END IF;
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], DETAIL = e[3], HINT = e[4];
    END IF;

    IF wait IS NULL THEN
        SELECT * INTO c FROM idem.claim_key(key, fingerprint, scope, v_lease, v_ttl, true);
    ELSE
        -- a bounded wait tries first without waiting: most claims are answered so
        IF NOT pg_try_advisory_xact_lock_shared(idem.claim_lock_key(key, scope)) THEN
            SELECT * INTO c FROM idem.claim_key_busy();
        ELSE
        BEGIN
            SELECT * INTO c FROM idem.claim_key_nowait(key, fingerprint, scope, v_lease, v_ttl);
        EXCEPTION WHEN lock_not_available THEN
            SELECT * INTO c FROM idem.claim_key_busy();
        END;
        END IF;
        -- only a request in flight, which has no attempt to tell yet, is
        -- waited for (a committed attempt's lease is not)
        left_ms := extract(epoch FROM deadline - clock_timestamp()) * 1000;
        IF current_setting('statement_timeout') <> '0' THEN
            -- end before statement_timeout would, so the answer is 409, not an abort
            left_ms := least(left_ms, extract(epoch FROM statement_timestamp()
                + current_setting('statement_timeout')::interval - clock_timestamp()) * 1000 - 20);
        END IF;
        IF c.status = 'in_progress' AND c.attempt IS NULL AND left_ms >= 1 THEN
            BEGIN
                saved_lock_timeout := current_setting('lock_timeout');
                PERFORM set_config('lock_timeout', ceil(left_ms) || 'ms', true);
                SELECT * INTO c FROM idem.claim_key(key, fingerprint, scope, v_lease, v_ttl, true);
                PERFORM set_config('lock_timeout', saved_lock_timeout, true);
            EXCEPTION WHEN lock_not_available THEN
                NULL;       -- the time ran out: nothing of the try is left
            END;
        END IF;
    END IF;

    status := c.status;
    attempt := c.attempt;
    CASE c.status
    WHEN 'claimed' THEN
        token := c.token;
        checkpoint := c.checkpoint;
        checkpoint_data := c.checkpoint_data;
        -- without a lease, the request is to be finished in this transaction:
        -- outside a transaction block that is the statement's own
        IF lease IS NULL AND transaction_timestamp() = statement_timestamp() THEN
            INSERT INTO idem.http_unfinished (scope, key, token) VALUES (scope, key, c.token);
        END IF;
    WHEN 'completed', 'failed' THEN
        http_status := coalesce(c.http_status, CASE c.status WHEN 'completed' THEN 200 ELSE 400 END);
        body := coalesce(c.body, c.response::text);
        content_type := 'application/json';
    WHEN 'in_progress' THEN
        http_status := 409;
        body := idem.http_problem('A request is outstanding for this Idempotency-Key', 409,
                                  'Retry after the time in Retry-After.');
        content_type := 'application/problem+json';
        -- whole seconds, rounded up, at least 1
        retry_after := least(greatest(ceil(extract(epoch FROM justify_hours(
                           c.retry_after - date_trunc('month', c.retry_after)))), 1), 2147483647);
    ELSE
        http_status := 422;
        body := idem.http_problem('Idempotency-Key is already used', 422,
            'This Idempotency-Key was used with another request; send a new key for a new request.');
        content_type := 'application/problem+json';
    END CASE;
END
$$;

-- The work of idem_http_respond and idem_http_respond_retryable (fname):
-- check the arguments, the status from lowest to 599 (why: why not lower),
-- and finish the attempt as kind (complete, fail or release, as
-- idem.claim_finish).  Returns the error to raise, or NULL once written.
CREATE OR REPLACE FUNCTION idem.http_respond_error(
    kind text, fname text, lowest integer, why text,
    p_key text, p_http_status integer, p_body text, p_scope text, p_token bigint)
RETURNS text[]
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    e text[];
BEGIN
    e := coalesce(idem.input_key_error(p_key, 'key'), idem.input_scope_error(p_scope, 'scope'),
                  idem.input_size_error(octet_length(p_body), 'body'),
                  CASE WHEN p_http_status IS NULL THEN ARRAY['22004', 'http_status must not be null']
                       WHEN p_http_status NOT BETWEEN lowest AND 599 THEN
                           ARRAY['22023', format('http_status must be between %s and 599', lowest),
                                 format('It is %s; %s.', p_http_status, why)]
                  END);
    IF e IS NULL THEN
        -- idem_claim replays the body as jsonb: refuse one jsonb refuses, with its error
        e := idem.input_jsonb_prints_error(p_body::jsonb, 'body');
    END IF;
    RETURN coalesce(e, idem.input_writable_error(fname),
                    idem.claim_finish(kind, fname, p_key, p_scope, p_token, NULL, NULL, NULL,
                                      p_http_status::smallint, p_body));
END
$$;
REVOKE ALL ON FUNCTION idem.http_respond_error(text, text, integer, text, text, integer, text, text, bigint)
    FROM PUBLIC;

-- Finish the attempt with the HTTP response exactly as the application
-- sends it, to be replayed byte for byte: completed below 400, failed
-- (final) from 400.
CREATE OR REPLACE FUNCTION idem_http_respond(
    key text, http_status integer, body text, scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    e text[];
BEGIN
    e := idem.http_respond_error(CASE WHEN http_status < 400 THEN 'complete' ELSE 'fail' END,
                                 'idem_http_respond', 200,
                                 'an interim (1xx) answer is not a response to replay',
                                 key, http_status, body, scope, token);
    IF e IS NULL THEN
        RETURN;
    END IF;
    IF e[3] IS NULL AND e[4] IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2];
    ELSIF e[4] IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], DETAIL = e[3];
    ELSIF e[3] IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], HINT = e[4];
    END IF;
    RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], DETAIL = e[3], HINT = e[4];
END
$$;

-- End the attempt with a transient failure the application answers now
-- (400 to 599: a gateway down, say), released as idem_fail(retryable =>
-- true) releases it, so that the next request with the key runs again.
-- The status and body are kept for operators until then, never replayed.
CREATE OR REPLACE FUNCTION idem_http_respond_retryable(
    key text, http_status integer, body text, scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    e text[];
BEGIN
    e := idem.http_respond_error('release', 'idem_http_respond_retryable', 400,
                                 'only a failure can be retried',
                                 key, http_status, body, scope, token);
    IF e IS NULL THEN
        RETURN;
    END IF;
    IF e[3] IS NULL AND e[4] IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2];
    ELSIF e[4] IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], DETAIL = e[3];
    ELSIF e[3] IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], HINT = e[4];
    END IF;
    RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], DETAIL = e[3], HINT = e[4];
END
$$;

REVOKE ALL ON FUNCTION idem_http_claim(text, bytea, text, interval, interval, interval),
    idem_http_respond(text, integer, text, text, bigint),
    idem_http_respond_retryable(text, integer, text, text, bigint) FROM PUBLIC;
