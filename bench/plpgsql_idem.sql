-- plpgsql_idem.sql: the design that payment teams write by hand, for the
-- benchmark to hold idem against.
--
-- It mirrors idem's contract (doc/api.md) for the calls the benchmark makes:
--   plpgsql_idem.plpgsql_claim    mirrors idem_claim    (same statuses and OUT columns)
--   plpgsql_idem.plpgsql_complete mirrors idem_complete (token and state checks)
--   plpgsql_idem.plpgsql_webhook  mirrors idem_webhook  (true the first time)
-- on tables shaped like idem's own (same columns, expires_at indexes and
-- fillfactor).  Two choices of idem's schema are not copied, as a table
-- written by hand rarely makes them, and so are part of what is measured:
-- idem's key columns use the C collation, and its primary keys put the key
-- before the scope (doc/performance.md gives their effect).
--
-- It is written the way a careful team would: one INSERT ... ON CONFLICT DO
-- NOTHING for the common case, SELECT ... FOR UPDATE only when the key
-- exists, argument checks, constants instead of settings.  Where it is
-- simpler than the contract the simplification makes it cheaper, never
-- dearer:
--   * plpgsql_complete without a token completes the processing attempt; it
--     does not check that the claim was made in the same transaction.
--   * plpgsql_webhook does not treat an expired, not yet purged row as
--     absent (the purge is left to a job).
--   * the functions are not SECURITY DEFINER: the application role is
--     granted the tables directly.
--
-- Installed by bench/run.sh into the benchmark database: psql -f plpgsql_idem.sql

CREATE SCHEMA plpgsql_idem;

CREATE SEQUENCE plpgsql_idem.token_seq AS bigint;

-- As idem.keys: state is processing, completed, failed or released.
CREATE TABLE plpgsql_idem.keys (
    scope           text        NOT NULL,
    key             text        NOT NULL,
    state           text        NOT NULL,
    token           bigint      NOT NULL,
    attempt         integer     NOT NULL,
    fingerprint     bytea,
    lease_until     timestamptz,
    checkpoint      text,
    checkpoint_data jsonb,
    response        jsonb,
    created_at      timestamptz NOT NULL,
    completed_at    timestamptz,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
) WITH (fillfactor = 80);
CREATE INDEX ON plpgsql_idem.keys (expires_at);

-- As idem.webhooks
CREATE TABLE plpgsql_idem.webhooks (
    source      text        NOT NULL,
    event_id    text        NOT NULL,
    received_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (source, event_id)
);
CREATE INDEX ON plpgsql_idem.webhooks (expires_at);

-- Mirrors idem_claim: claim (scope, key) for this transaction, or say why not.
CREATE FUNCTION plpgsql_idem.plpgsql_claim(
    p_key text, p_fingerprint bytea DEFAULT NULL, p_scope text DEFAULT '',
    p_lease interval DEFAULT NULL, p_ttl interval DEFAULT NULL,
    OUT status text, OUT token bigint, OUT attempt integer, OUT response jsonb,
    OUT checkpoint text, OUT checkpoint_data jsonb, OUT retry_after interval)
LANGUAGE plpgsql AS $$
DECLARE
    v_lease_until timestamptz;
    v_expires_at  timestamptz;
    r             plpgsql_idem.keys;
BEGIN
    IF p_key IS NULL OR p_scope IS NULL THEN
        RAISE EXCEPTION 'key and scope must not be null' USING ERRCODE = '22004';
    END IF;
    IF octet_length(p_key) = 0 THEN
        RAISE EXCEPTION 'key must not be empty' USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_key) > 255 OR octet_length(p_scope) > 255 THEN
        RAISE EXCEPTION 'key or scope is too long' USING ERRCODE = '22001';
    END IF;
    IF p_lease <= interval '0' OR p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'lease and ttl must be positive' USING ERRCODE = '22023';
    END IF;
    v_lease_until := now() + coalesce(p_lease, interval '60 seconds');
    v_expires_at := now() + coalesce(p_ttl, interval '24 hours');

    LOOP
        -- The common case: a new key.  A concurrent uncommitted claim of the
        -- same key makes this wait, then do nothing if that one committed.
        INSERT INTO plpgsql_idem.keys AS k
            (scope, key, state, token, attempt, fingerprint, lease_until,
             created_at, expires_at)
        VALUES (p_scope, p_key, 'processing', nextval('plpgsql_idem.token_seq'), 1,
                p_fingerprint, v_lease_until, now(), v_expires_at)
        ON CONFLICT (scope, key) DO NOTHING
        RETURNING k.token INTO token;
        IF FOUND THEN
            status := 'claimed';
            attempt := 1;
            RETURN;
        END IF;

        SELECT * INTO r FROM plpgsql_idem.keys k
        WHERE k.scope = p_scope AND k.key = p_key
        FOR UPDATE;
        -- purged between the two statements: try the insert again
        EXIT WHEN FOUND;
    END LOOP;

    IF r.expires_at <= now() THEN
        -- expired and not yet purged: counts as absent, a first attempt
        UPDATE plpgsql_idem.keys k
        SET state = 'processing', token = nextval('plpgsql_idem.token_seq'),
            attempt = 1, fingerprint = p_fingerprint, lease_until = v_lease_until,
            checkpoint = NULL, checkpoint_data = NULL, response = NULL,
            created_at = now(), completed_at = NULL, expires_at = v_expires_at
        WHERE k.scope = p_scope AND k.key = p_key
        RETURNING k.token, k.attempt INTO token, attempt;
        status := 'claimed';
    ELSIF r.fingerprint IS NOT NULL AND p_fingerprint IS NOT NULL
          AND r.fingerprint <> p_fingerprint THEN
        status := 'mismatch';
    ELSIF r.state IN ('completed', 'failed') THEN
        status := r.state;
        response := r.response;
    ELSIF r.state = 'processing' AND r.lease_until > now() THEN
        status := 'in_progress';
        retry_after := r.lease_until - now();
    ELSE
        -- released, or the lease ran out: take over as the next attempt
        UPDATE plpgsql_idem.keys k
        SET state = 'processing', token = nextval('plpgsql_idem.token_seq'),
            attempt = r.attempt + 1,
            fingerprint = coalesce(r.fingerprint, p_fingerprint),
            lease_until = v_lease_until
        WHERE k.scope = p_scope AND k.key = p_key
        RETURNING k.token, k.attempt INTO token, attempt;
        status := 'claimed';
        checkpoint := r.checkpoint;
        checkpoint_data := r.checkpoint_data;
    END IF;
END
$$;

-- Mirrors idem_complete: finish the current attempt and keep the response.
CREATE FUNCTION plpgsql_idem.plpgsql_complete(
    p_key text, p_response jsonb DEFAULT NULL, p_scope text DEFAULT '',
    p_token bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r plpgsql_idem.keys;
BEGIN
    IF p_key IS NULL OR p_scope IS NULL THEN
        RAISE EXCEPTION 'key and scope must not be null' USING ERRCODE = '22004';
    END IF;
    IF pg_column_size(p_response) > 1024 * 1024 THEN
        RAISE EXCEPTION 'response is too large' USING ERRCODE = '54000';
    END IF;

    UPDATE plpgsql_idem.keys k
    SET state = 'completed', response = p_response, completed_at = now(),
        lease_until = NULL
    WHERE k.scope = p_scope AND k.key = p_key AND k.state = 'processing'
      AND k.expires_at > now()
      AND (p_token IS NULL OR k.token = p_token);
    IF FOUND THEN
        RETURN;
    END IF;

    -- Nothing completed: say why, with the SQLSTATEs idem uses.
    SELECT * INTO r FROM plpgsql_idem.keys k
    WHERE k.scope = p_scope AND k.key = p_key;
    IF NOT FOUND OR r.expires_at <= now() THEN
        RAISE EXCEPTION 'no claim for key "%"', p_key USING ERRCODE = 'ID002';
    ELSIF r.state IN ('completed', 'failed') THEN
        RAISE EXCEPTION 'key "%" is already finished', p_key USING ERRCODE = 'ID003';
    ELSE
        RAISE EXCEPTION 'stale token for key "%"', p_key USING ERRCODE = 'ID001';
    END IF;
END
$$;

-- Mirrors idem_webhook: true the first time (source, event_id) is seen.
CREATE FUNCTION plpgsql_idem.plpgsql_webhook(
    p_source text, p_event_id text, p_ttl interval DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF p_source IS NULL OR p_event_id IS NULL THEN
        RAISE EXCEPTION 'source and event_id must not be null' USING ERRCODE = '22004';
    END IF;
    IF octet_length(p_event_id) = 0 THEN
        RAISE EXCEPTION 'event_id must not be empty' USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_event_id) > 255 OR octet_length(p_source) > 255 THEN
        RAISE EXCEPTION 'source or event_id is too long' USING ERRCODE = '22001';
    END IF;
    IF p_ttl <= interval '0' THEN
        RAISE EXCEPTION 'ttl must be positive' USING ERRCODE = '22023';
    END IF;

    INSERT INTO plpgsql_idem.webhooks (source, event_id, received_at, expires_at)
    VALUES (p_source, p_event_id, now(), now() + coalesce(p_ttl, interval '7 days'))
    ON CONFLICT (source, event_id) DO NOTHING;
    RETURN FOUND;
END
$$;
