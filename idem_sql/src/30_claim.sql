-- The key functions: idem_claim, idem_complete, idem_fail, idem_checkpoint
-- and idem_lookup (the HTTP ones are in 40_http.sql).
--
-- A key's row moves through these states:
--
--   (none) --claim--> processing --complete--> completed
--                         |     \---fail(final)--> failed
--                         |---fail(retryable)--> released --claim--> processing
--                         \---lease runs out, claim--> processing (attempt + 1)
--
-- A row past its expires_at counts as absent.  Every attempt gets a new
-- fencing token from idem.token_seq.
--
-- Concurrency rests on the row itself, as the C edition's claims whose row
-- is written at once: a claim of a new key inserts its row (INSERT ... ON
-- CONFLICT DO NOTHING waits for another transaction's uncommitted row of the
-- key, and under REPEATABLE READ raises 40001 for one committed after the
-- snapshot); a claim that takes over a row updates it only if it is still
-- as read (the UPDATE waits for a concurrent writer, then reads again).
-- Replays, mismatches and live attempts are answered from a plain read,
-- which takes no lock, so a storm of retries of a finished payment is
-- answered in parallel.  nowait (and idem_http_claim's bounded wait) bound
-- those waits with lock_timeout inside a subtransaction.
--
-- idem_complete, idem_fail and idem_checkpoint without a token are allowed
-- only for a claim of this transaction: a row whose current version the
-- top-level transaction wrote (its xmin), or a token claimed in a
-- subtransaction, kept in the transaction-local setting idem_sql.claims
-- (",7,9,"): set_config(..., true) is undone by ROLLBACK TO SAVEPOINT and
-- forgotten at transaction end, as the row version is.

-- The key lock of (scope, key): a transaction-level advisory lock on a
-- 64-bit hash of both.  A claim takes it (without waiting) as a marker that
-- it is deciding the key; idem_claim with nowait tries it to see an
-- uncommitted claim without waiting for it.
CREATE OR REPLACE FUNCTION idem.claim_lock_key(p_key text, p_scope text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN pg_catalog.hashtextextended(p_key, pg_catalog.hashtextextended(p_scope, 7649));

-- Remember that this transaction claimed token t in a subtransaction (the
-- row of a claim the top-level transaction wrote itself is known by its
-- xmin): in the transaction-local setting idem_sql.claims.
CREATE OR REPLACE FUNCTION idem.claim_remember(t bigint) RETURNS void
LANGUAGE sql VOLATILE
BEGIN ATOMIC
    SELECT pg_catalog.set_config('idem_sql.claims',
               coalesce(nullif(pg_catalog.current_setting('idem_sql.claims', true), ''), ',')
               OPERATOR(pg_catalog.||) t OPERATOR(pg_catalog.||) ',', true);
END;

-- Note a claim of token t whose row version has xmin x: the marker lock
-- for the first claim of a transaction (first: no transaction id was
-- assigned before it; later claims are not marked, so that the markers
-- never fill the shared lock table), and the setting for a claim made in a
-- subtransaction.
CREATE OR REPLACE FUNCTION idem.claim_note(t bigint, x xid, p_key text, p_scope text, first boolean)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF first THEN
        PERFORM pg_catalog.pg_try_advisory_xact_lock(idem.claim_lock_key(p_key, p_scope));
    END IF;
    IF x OPERATOR(pg_catalog.<>) pg_catalog.pg_current_xact_id_if_assigned()::xid THEN
        PERFORM idem.claim_remember(t);
    END IF;
END
$$;

-- Did this transaction claim token t, whose row version has xmin x, and not
-- roll the claim back?  Its top-level transaction wrote that version, or a
-- subtransaction of it claimed the token.
CREATE OR REPLACE FUNCTION idem.claim_is_mine(t bigint, x xid) RETURNS boolean
LANGUAGE sql STABLE
RETURN x OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id_if_assigned()::xid
    OR pg_catalog.strpos(pg_catalog.current_setting('idem_sql.claims', true),
                         ',' OPERATOR(pg_catalog.||) t OPERATOR(pg_catalog.||) ',') OPERATOR(pg_catalog.>) 0;

-- Start the lease and ttl of the new row of a claim from now (one reading
-- of the clock, as the C edition's): its insert waited for another
-- transaction's claim of the key, which rolled back.
CREATE OR REPLACE FUNCTION idem.claim_restamp(
    p_key text, p_scope text, p_token bigint, p_lease interval, p_ttl interval)
RETURNS void
LANGUAGE sql VOLATILE
BEGIN ATOMIC
    UPDATE idem.keys k
       SET created_at = n.t, lease_until = n.t + p_lease,
           expires_at = greatest(n.t + p_ttl, n.t + p_lease)
      FROM (SELECT clock_timestamp() AS t) n
     WHERE k.key = p_key AND k.scope = p_scope AND k.token = p_token;
END;

-- The claim's work past the first insert: read the key's row and answer
-- from it, or take it (a new attempt, or a fresh one over an expired row),
-- looping when another transaction changed it meanwhile.  try_insert: try
-- the insert of a new key first (the callers that have not).  The
-- arguments are checked; lease and ttl are the intervals to use.  Called
-- only by the public functions, whose search_path is pinned: it has no SET
-- clause of its own, which would cost every call a GUC save and restore.
CREATE OR REPLACE FUNCTION idem.claim_key(
    p_key text, p_fp bytea, p_scope text, p_lease interval, p_ttl interval,
    try_insert boolean,
    OUT status text, OUT token bigint, OUT attempt integer, OUT response jsonb,
    OUT checkpoint text, OUT checkpoint_data jsonb, OUT retry_after interval,
    OUT http_status smallint, OUT body text)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_variable
DECLARE
    r record;
    now_ts timestamptz;
    v_lease_until timestamptz;
    v_xmin xid;
    first boolean;
BEGIN
    LOOP
        IF try_insert THEN
            now_ts := clock_timestamp();
            v_lease_until := idem.input_after(now_ts, p_lease, 'lease');
            first := pg_current_xact_id_if_assigned() IS NULL;
            INSERT INTO idem.keys AS k
                (scope, key, state, token, attempt, fingerprint, lease_until,
                 created_at, expires_at)
            VALUES (p_scope, p_key, 'processing', nextval('idem.token_seq'), 1, p_fp,
                    v_lease_until, now_ts,
                    greatest(idem.input_after(now_ts, p_ttl, 'ttl'), v_lease_until))
            ON CONFLICT ON CONSTRAINT keys_pkey DO NOTHING
            RETURNING k.token, k.xmin INTO token, v_xmin;
            IF FOUND THEN
                IF clock_timestamp() > now_ts + interval '10 ms' THEN
                    PERFORM idem.claim_restamp(p_key, p_scope, token, p_lease, p_ttl);
                END IF;
                PERFORM idem.claim_note(token, v_xmin, p_key, p_scope, first);
                status := 'claimed';
                attempt := 1;
                RETURN;
            END IF;
        END IF;
        try_insert := true;

        SELECT k.*, k.xmin AS row_xmin INTO r
          FROM idem.keys k WHERE k.key = p_key AND k.scope = p_scope;
        CONTINUE WHEN NOT FOUND;        -- purged meanwhile: insert again
        now_ts := clock_timestamp();
        first := pg_current_xact_id_if_assigned() IS NULL;

        -- this transaction's own row does not expire under it
        IF r.expires_at > now_ts OR idem.claim_is_mine(r.token, r.row_xmin) THEN
            IF p_fp IS NOT NULL AND r.fingerprint IS NOT NULL AND r.fingerprint <> p_fp THEN
                status := 'mismatch';
                RETURN;
            END IF;
            IF r.state IN ('completed', 'failed') THEN
                status := r.state;
                attempt := r.attempt;
                response := r.response;
                http_status := r.http_status;
                body := r.body;
                RETURN;
            END IF;
            -- a live attempt; also one of this very transaction, which must not run twice
            IF r.state = 'processing' AND (r.lease_until > now_ts OR idem.claim_is_mine(r.token, r.row_xmin)) THEN
                status := 'in_progress';
                attempt := r.attempt;
                retry_after := greatest(r.lease_until - now_ts, interval '0');
                RETURN;
            END IF;
            -- the lease ran out, or the attempt was released: the next attempt,
            -- keeping the fingerprint, creation time and last checkpoint
            v_lease_until := idem.input_after(now_ts, p_lease, 'lease');
            UPDATE idem.keys k
               SET state = 'processing', token = nextval('idem.token_seq'),
                   attempt = k.attempt + 1, lease_until = v_lease_until,
                   expires_at = greatest(k.expires_at, v_lease_until),
                   fingerprint = coalesce(k.fingerprint, p_fp),
                   response = NULL, completed_at = NULL, http_status = NULL, body = NULL
             WHERE k.key = p_key AND k.scope = p_scope
               AND k.token = r.token AND k.state = r.state
               AND k.lease_until IS NOT DISTINCT FROM r.lease_until
            RETURNING k.token, k.attempt, k.checkpoint, k.checkpoint_data, k.xmin
                 INTO token, attempt, checkpoint, checkpoint_data, v_xmin;
        ELSE
            -- expired, not yet purged: absent, so a first attempt in its place
            v_lease_until := idem.input_after(now_ts, p_lease, 'lease');
            UPDATE idem.keys k
               SET state = 'processing', token = nextval('idem.token_seq'), attempt = 1,
                   fingerprint = p_fp, lease_until = v_lease_until,
                   checkpoint = NULL, checkpoint_data = NULL, response = NULL,
                   created_at = now_ts, completed_at = NULL,
                   expires_at = greatest(idem.input_after(now_ts, p_ttl, 'ttl'), v_lease_until),
                   http_status = NULL, body = NULL
             WHERE k.key = p_key AND k.scope = p_scope
               AND k.token = r.token AND k.expires_at = r.expires_at
            RETURNING k.token, k.attempt, k.xmin INTO token, attempt, v_xmin;
        END IF;
        IF FOUND THEN
            PERFORM idem.claim_note(token, v_xmin, p_key, p_scope, first);
            status := 'claimed';
            RETURN;
        END IF;
        -- another transaction changed the row since it was read: read again
        try_insert := false;
    END LOOP;
END
$$;

-- idem.claim_key that never waits for another transaction (nowait): a
-- lock wait ends at once (lock_timeout's least, 1 ms) with 55P03, which the
-- caller turns into in_progress.
CREATE OR REPLACE FUNCTION idem.claim_key_nowait(
    p_key text, p_fp bytea, p_scope text, p_lease interval, p_ttl interval,
    OUT status text, OUT token bigint, OUT attempt integer, OUT response jsonb,
    OUT checkpoint text, OUT checkpoint_data jsonb, OUT retry_after interval,
    OUT http_status smallint, OUT body text)
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, idem, pg_temp
SET lock_timeout = '1ms'
AS $$
SELECT * FROM idem.claim_key(p_key, p_fp, p_scope, p_lease, p_ttl, true);
$$;

-- The answer of a claim that found another transaction deciding the key
-- (nowait): in_progress, with no attempt to tell yet.
CREATE OR REPLACE FUNCTION idem.claim_key_busy(
    OUT status text, OUT token bigint, OUT attempt integer, OUT response jsonb,
    OUT checkpoint text, OUT checkpoint_data jsonb, OUT retry_after interval,
    OUT http_status smallint, OUT body text)
LANGUAGE sql IMMUTABLE
BEGIN ATOMIC
    SELECT 'in_progress'::text, NULL::bigint, NULL::integer, NULL::jsonb, NULL::text,
           NULL::jsonb, interval '1 s', NULL::smallint, NULL::text;
END;

-- A replayed body (idem_http_respond's) as jsonb; a body jsonb refuses (stored
-- before 1.7, or imported) replays as a JSON string of its text.
CREATE OR REPLACE FUNCTION idem.claim_body_jsonb(b text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN b::jsonb;
EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
    RETURN to_jsonb(b);
END
$$;

-- The first error of idem_claim's and idem_http_claim's arguments (key,
-- fingerprint, scope, lease, ttl, in the C edition's order) and of the
-- transaction (fname: 'idem_claim()'); NULL when all are good.
CREATE OR REPLACE FUNCTION idem.claim_args_error(
    p_key text, p_fp bytea, p_scope text, p_lease interval, p_ttl interval, fname text)
RETURNS text[]
LANGUAGE sql STABLE
RETURN coalesce(idem.input_key_error(p_key, 'key'), idem.input_fingerprint_error(p_fp),
                idem.input_scope_error(p_scope, 'scope'),
                idem.input_interval_error(p_lease, 'lease'),
                idem.input_interval_error(p_ttl, 'ttl'), idem.input_writable_error(fname));

-- idem_claim past its fast path, and its whole work on any call: take the
-- key for a new attempt, or say why not (completed, failed, in_progress,
-- mismatch); with nowait, never wait for another transaction.  The common
-- case, a new key, is one INSERT.
CREATE OR REPLACE FUNCTION idem.claim_full(
    key text, fingerprint bytea, scope text, lease interval, ttl interval, nowait boolean,
    OUT status text, OUT token bigint, OUT attempt integer, OUT response jsonb,
    OUT checkpoint text, OUT checkpoint_data jsonb, OUT retry_after interval)
RETURNS record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    v_lease interval;
    v_ttl interval;
    e text[];
    now_ts timestamptz;
    c record;
    v_xmin xid;
    first boolean;
    marked boolean;
BEGIN
    -- The common call (good arguments, lease and ttl from settings at their
    -- defaults, a writable transaction) is told by one cheap expression;
    -- the settings are parsed and the arguments checked only past it.  At
    -- their defaults the settings read '' (unset, or NULL) or as a server
    -- with the C library shows them ('1min', '1d'); v_lease and v_ttl then
    -- stay NULL, and the insert takes the defaults' intervals, 60 seconds
    -- and 24 hours.
    IF key IS NULL OR scope IS NULL OR octet_length(key) NOT BETWEEN 1 AND 255
       OR octet_length(scope) > 255 OR octet_length(fingerprint) > 255
       OR lease IS NOT NULL OR ttl IS NOT NULL
       OR coalesce(current_setting('idem.lease', true), '') NOT IN ('', '1min')
       OR coalesce(current_setting('idem.ttl', true), '') NOT IN ('', '1d')
       OR current_setting('transaction_read_only') = 'on' THEN
        v_lease := coalesce(lease, idem.setting_lease());
        v_ttl := coalesce(ttl, idem.setting_ttl());
        e := idem.claim_args_error(key, fingerprint, scope, v_lease, v_ttl, 'idem_claim()');
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
    END IF;

    IF nowait AND NOT pg_try_advisory_xact_lock_shared(idem.claim_lock_key(key, scope)) THEN
        -- another transaction is deciding this key right now
        SELECT * INTO c FROM idem.claim_key_busy();
    ELSIF nowait THEN
        BEGIN
            SELECT * INTO c FROM idem.claim_key_nowait(key, fingerprint, scope,
                                                       coalesce(v_lease, idem.setting_lease()),
                                                       coalesce(v_ttl, idem.setting_ttl()));
        EXCEPTION WHEN lock_not_available THEN
            -- another transaction is deciding this key right now
            SELECT * INTO c FROM idem.claim_key_busy();
        END;
    ELSE
        -- a new key: one statement, which also takes the marker of the
        -- transaction's first claim (in RETURNING: only for a row written)
        now_ts := clock_timestamp();
        first := pg_current_xact_id_if_assigned() IS NULL;
        INSERT INTO idem.keys AS k
            (scope, key, state, token, attempt, fingerprint, lease_until, created_at, expires_at)
        VALUES (scope, key, 'processing', nextval('idem.token_seq'), 1, fingerprint,
                now_ts + coalesce(v_lease, interval '60 seconds'), now_ts,
                greatest(now_ts + coalesce(v_ttl, interval '24 hours'),
                         now_ts + coalesce(v_lease, interval '60 seconds')))
        ON CONFLICT ON CONSTRAINT keys_pkey DO NOTHING
        RETURNING 'claimed', 1, k.token, k.xmin,
                  first AND pg_try_advisory_xact_lock(idem.claim_lock_key(k.key, k.scope))
             INTO status, attempt, token, v_xmin, marked;
        IF FOUND THEN
            IF clock_timestamp() > now_ts + interval '10 ms'
               OR v_xmin <> pg_current_xact_id_if_assigned()::xid THEN
                IF clock_timestamp() > now_ts + interval '10 ms' THEN
                    -- it waited for another transaction's claim: the lease and
                    -- ttl run from now, as the C edition's
                    PERFORM idem.claim_restamp(key, scope, token,
                                               coalesce(v_lease, idem.setting_lease()),
                                               coalesce(v_ttl, idem.setting_ttl()));
                END IF;
                -- a subtransaction's claim is remembered (idem.claim_note, inline)
                IF v_xmin <> pg_current_xact_id_if_assigned()::xid THEN
                    PERFORM idem.claim_remember(token);
                END IF;
            END IF;
            RETURN;
        END IF;
        -- the key's row: a replay, a mismatch or a live attempt is answered
        -- from a plain read, so a storm of retries is answered in parallel;
        -- a row to take over is taken under its lock
        SELECT * INTO c FROM idem.claim_key(key, fingerprint, scope,
                                            coalesce(v_lease, idem.setting_lease()),
                                            coalesce(v_ttl, idem.setting_ttl()), false);
    END IF;

    status := c.status;
    token := c.token;
    attempt := c.attempt;
    response := c.response;
    checkpoint := c.checkpoint;
    checkpoint_data := c.checkpoint_data;
    retry_after := c.retry_after;
    -- a key finished by idem_http_respond replays its body as jsonb
    IF c.body IS NOT NULL AND c.response IS NULL THEN
        response := idem.claim_body_jsonb(c.body);
    END IF;
END
$$;

-- The fast paths of idem_claim, idem_complete and idem_webhook (and of
-- idem_webhook's in 50_webhook.sql) run with the caller's search_path: a
-- SET clause would cost each call a save and restore of the setting, about
-- a tenth of a claim's CPU.  So that no object of the caller's can stand in
-- for one of PostgreSQL's, everything they name is qualified: functions
-- and types by pg_catalog, operators as OPERATOR(pg_catalog.op), and they
-- use no construct that looks an operator up by name (IN, BETWEEN, IS
-- DISTINCT FROM, CASE x WHEN).  Every other call goes to the full function
-- (idem.claim_full, idem.complete_full, idem.webhook_full), which pins the
-- search_path.  sql/search_path_hostile.sql calls them under a search_path
-- of decoys.

-- Take the key for a new attempt, or say why not (completed, failed,
-- in_progress, mismatch); with nowait, never wait for another transaction.
-- Fast path: good arguments, lease and ttl from settings at their defaults
-- (they read '' when unset, or as a server with the C library shows them:
-- '1min', '1d'; 60 seconds and 24 hours), a writable transaction, no
-- nowait.  Then a new key is one INSERT, whose RETURNING also tells
--   * whether the insert waited for another transaction's claim of the key
--     (which rolled back: the lease and ttl must run from now) or ran in a
--     subtransaction (to be remembered): idem.claim_inserted finishes it;
--   * whether it is the transaction's first write (cmin 0: no earlier
--     command wrote), whose claim takes the marker, as idem.claim_note's
--     test of an unassigned transaction id does;
-- and a replay one read (a mismatch, a live attempt and a key finished by
-- idem_http_respond, whose body replays as jsonb, go on).  The rest is
-- idem.claim_full's.  The body has no comments: pg_proc keeps the row of a
-- function whose row passes 2 kB compressed, its argument arrays too, and
-- each call would decompress them (sql/privileges.sql checks).
CREATE OR REPLACE FUNCTION idem_claim(
    key text, fingerprint bytea DEFAULT NULL, scope text DEFAULT '',
    lease interval DEFAULT NULL, ttl interval DEFAULT NULL, nowait boolean DEFAULT false,
    OUT status text, OUT token bigint, OUT attempt integer, OUT response jsonb,
    OUT checkpoint text, OUT checkpoint_data jsonb, OUT retry_after interval)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
AS $$
#variable_conflict use_variable
DECLARE
    now_ts pg_catalog.timestamptz;
    r idem.keys;
    v_xmin pg_catalog.xid;
    later boolean;
    marked boolean;
BEGIN
    IF key IS NOT NULL AND scope IS NOT NULL AND lease IS NULL AND ttl IS NULL
       AND NOT nowait
       AND pg_catalog.octet_length(key) OPERATOR(pg_catalog.>) 0
       AND pg_catalog.octet_length(key) OPERATOR(pg_catalog.<=) 255
       AND pg_catalog.octet_length(scope) OPERATOR(pg_catalog.<=) 255
       AND coalesce(pg_catalog.octet_length(fingerprint), 0) OPERATOR(pg_catalog.<=) 255
       AND coalesce(pg_catalog.current_setting('idem.lease', true), '')
           OPERATOR(pg_catalog.=) ANY ('{"",1min}'::pg_catalog.text[])
       AND coalesce(pg_catalog.current_setting('idem.ttl', true), '')
           OPERATOR(pg_catalog.=) ANY ('{"",1d}'::pg_catalog.text[])
       AND pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off' THEN
        now_ts := pg_catalog.clock_timestamp();
        INSERT INTO idem.keys AS k
            (scope, key, state, token, attempt, fingerprint, lease_until, created_at, expires_at)
        VALUES (scope, key, 'processing', pg_catalog.nextval('idem.token_seq'), 1, fingerprint,
                now_ts OPERATOR(pg_catalog.+) interval '60 seconds', now_ts,
                now_ts OPERATOR(pg_catalog.+) interval '24 hours')
        ON CONFLICT ON CONSTRAINT keys_pkey DO NOTHING
        RETURNING 'claimed', 1, k.token, k.xmin,
                  pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) (now_ts OPERATOR(pg_catalog.+) interval '10 ms')
                  OR k.xmin OPERATOR(pg_catalog.<>) pg_catalog.pg_current_xact_id_if_assigned()::pg_catalog.xid,
                  k.cmin OPERATOR(pg_catalog.=) '0'::pg_catalog.cid
                  AND pg_catalog.pg_try_advisory_xact_lock(idem.claim_lock_key(k.key, k.scope))
             INTO status, attempt, token, v_xmin, later, marked;
        IF FOUND THEN
            IF later THEN
                PERFORM idem.claim_inserted(key, scope, token, v_xmin, now_ts);
            END IF;
            RETURN;
        END IF;
        SELECT * INTO r FROM idem.keys k
         WHERE k.key OPERATOR(pg_catalog.=) idem_claim.key
           AND k.scope OPERATOR(pg_catalog.=) idem_claim.scope;
        now_ts := pg_catalog.clock_timestamp();
        IF FOUND AND r.expires_at OPERATOR(pg_catalog.>) now_ts
           AND (fingerprint IS NULL OR r.fingerprint IS NULL OR r.fingerprint OPERATOR(pg_catalog.=) fingerprint)
           AND (r.state OPERATOR(pg_catalog.=) 'completed' OR r.state OPERATOR(pg_catalog.=) 'failed')
           AND (r.body IS NULL OR r.response IS NOT NULL) THEN
            status := r.state;
            attempt := r.attempt;
            response := r.response;
            RETURN;
        END IF;
    END IF;
    SELECT * INTO status, token, attempt, response, checkpoint, checkpoint_data, retry_after
      FROM idem.claim_full(key, fingerprint, scope, lease, ttl, nowait);
END
$$;

-- The end of a claim whose new row idem_claim's fast path inserted at
-- started, when its insert waited (for another transaction's claim of the
-- key, which rolled back: the lease and ttl run from now, as the C
-- edition's) or a subtransaction made it (remembered, as idem.claim_note).
CREATE OR REPLACE FUNCTION idem.claim_inserted(
    p_key text, p_scope text, p_token bigint, x xid, started timestamptz)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    IF clock_timestamp() > started + interval '10 ms' THEN
        PERFORM idem.claim_restamp(p_key, p_scope, p_token, idem.setting_lease(), idem.setting_ttl());
    END IF;
    IF x <> pg_current_xact_id_if_assigned()::xid THEN
        PERFORM idem.claim_remember(p_token);
    END IF;
END
$$;

-- Shared body of idem_complete, idem_fail, idem_checkpoint and
-- idem_http_respond: check that the caller owns the key's current attempt
-- (by its token, or as the transaction that claimed it) and write the row's
-- new state.  kind: complete, fail (final), release or checkpoint.  The
-- arguments are checked.  Returns the error to raise (ID001 to ID004), or
-- NULL once the row is written.
CREATE OR REPLACE FUNCTION idem.claim_finish(
    kind text, fname text, p_key text, p_scope text, p_token bigint, payload jsonb,
    p_phase text, p_lease interval, p_http_status smallint, p_body text)
RETURNS text[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    r record;
    now_ts timestamptz;
    v_lease_until timestamptz;
BEGIN
    -- the row, locked: a concurrent writer is waited for
    SELECT k.*, k.xmin AS row_xmin INTO r
      FROM idem.keys k WHERE k.key = p_key AND k.scope = p_scope FOR UPDATE;
    now_ts := clock_timestamp();
    IF NOT FOUND OR (r.expires_at <= now_ts AND NOT coalesce(idem.claim_is_mine(r.token, r.row_xmin), false)) THEN
        RETURN ARRAY['ID002', format('%s: key "%s" has no claim', fname, p_key),
                     format('No live row exists for this key in scope "%s".', p_scope),
                     'Call idem_claim first.'];
    END IF;
    IF r.state IN ('completed', 'failed') THEN
        RETURN ARRAY['ID003', format('%s: key "%s" is already finished', fname, p_key),
                     format('Its state is %s.', r.state), NULL];
    END IF;
    IF p_token IS NULL THEN
        IF NOT coalesce(idem.claim_is_mine(r.token, r.row_xmin), false) THEN
            RETURN ARRAY['ID004', format('%s: key "%s" was not claimed in this transaction', fname, p_key),
                         NULL, 'Pass the token that idem_claim returned.'];
        END IF;
        p_token := r.token;
    END IF;
    IF r.state = 'released' OR p_token <> r.token THEN
        RETURN ARRAY['ID001', format('%s: token %s does not hold key "%s"', fname, p_token, p_key),
                     format('The attempt of this token was released or taken over; the key is at attempt %s.', r.attempt),
                     NULL];
    END IF;

    IF kind = 'checkpoint' THEN
        -- a checkpoint extends the lease, never shortens it
        v_lease_until := greatest(idem.input_after(now_ts, p_lease, 'lease'), r.lease_until);
        UPDATE idem.keys k
           SET checkpoint = p_phase, checkpoint_data = payload, lease_until = v_lease_until,
               expires_at = greatest(k.expires_at, v_lease_until)
         WHERE k.key = p_key AND k.scope = p_scope;
    ELSIF kind = 'release' THEN
        -- the error is kept for operators; the next claim clears it
        UPDATE idem.keys k
           SET state = 'released', lease_until = NULL, response = payload,
               http_status = p_http_status, body = p_body
         WHERE k.key = p_key AND k.scope = p_scope;
    ELSE
        UPDATE idem.keys k
           SET state = CASE kind WHEN 'complete' THEN 'completed' ELSE 'failed' END,
               completed_at = now_ts, lease_until = NULL, response = payload,
               http_status = p_http_status, body = p_body
         WHERE k.key = p_key AND k.scope = p_scope;
    END IF;
    RETURN NULL;
END
$$;

-- idem_complete past its fast path, and its whole work on any call.
CREATE OR REPLACE FUNCTION idem.complete_full(
    key text, response jsonb, scope text, token bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    e text[];
BEGIN
    IF key IS NULL OR scope IS NULL OR octet_length(key) NOT BETWEEN 1 AND 255
       OR octet_length(scope) > 255 OR pg_column_size(response) > 1024
       OR current_setting('transaction_read_only') = 'on' THEN
        e := coalesce(idem.input_key_error(key, 'key'), idem.input_scope_error(scope, 'scope'),
                      idem.input_jsonb_error(response, 'response'),
                      idem.input_writable_error('idem_complete'));
    END IF;
    IF e IS NULL THEN
        -- the in-transaction way: this transaction's claim, still processing
        UPDATE idem.keys k
           SET state = 'completed', completed_at = clock_timestamp(), lease_until = NULL,
               response = complete_full.response
         WHERE k.key = complete_full.key AND k.scope = complete_full.scope
           AND k.state = 'processing'
           AND CASE WHEN complete_full.token IS NULL
                    THEN idem.claim_is_mine(k.token, k.xmin)
                    ELSE k.token = complete_full.token
                         AND (k.expires_at > clock_timestamp() OR idem.claim_is_mine(k.token, k.xmin))
               END;
        IF FOUND THEN
            RETURN;
        END IF;
        -- say why not
        e := idem.claim_finish('complete', 'idem_complete', key, scope, token, response,
                               NULL, NULL, NULL, NULL);
        IF e IS NULL THEN
            RETURN;
        END IF;
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

-- Mark the current attempt completed and keep its response for replays.
-- Fast path (qualified, as idem_claim's): no token, a small response, a
-- writable transaction, and a row this transaction's top level claimed,
-- still processing; its row proves the key and scope good.  The rest is
-- idem.complete_full's.
CREATE OR REPLACE FUNCTION idem_complete(
    key text, response jsonb DEFAULT NULL, scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
AS $$
#variable_conflict use_variable
BEGIN
    IF token IS NULL
       AND (response IS NULL OR pg_catalog.pg_column_size(response) OPERATOR(pg_catalog.<=) 1024)
       AND pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off' THEN
        UPDATE idem.keys k
           SET state = 'completed', completed_at = pg_catalog.clock_timestamp(), lease_until = NULL,
               response = idem_complete.response
         WHERE k.key OPERATOR(pg_catalog.=) idem_complete.key
           AND k.scope OPERATOR(pg_catalog.=) idem_complete.scope
           AND k.state OPERATOR(pg_catalog.=) 'processing'
           AND k.xmin OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id_if_assigned()::pg_catalog.xid;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    PERFORM idem.complete_full(key, response, scope, token);
END
$$;

-- Release the attempt for a retry (retryable), or finish the key as failed
-- with error kept for replay.
CREATE OR REPLACE FUNCTION idem_fail(
    key text, error jsonb DEFAULT NULL, retryable boolean DEFAULT true,
    scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    e text[];
BEGIN
    e := coalesce(idem.input_key_error(key, 'key'), idem.input_scope_error(scope, 'scope'),
                  idem.input_jsonb_error(error, 'error'),
                  CASE WHEN retryable IS NULL THEN ARRAY['22004', 'retryable must not be null'] END,
                  idem.input_writable_error('idem_fail'));
    IF e IS NULL THEN
        e := idem.claim_finish(CASE WHEN retryable THEN 'release' ELSE 'fail' END, 'idem_fail',
                               key, scope, token, error, NULL, NULL, NULL, NULL);
    END IF;
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

-- Record a recovery point (phase, data) of the current attempt and extend
-- its lease.
CREATE OR REPLACE FUNCTION idem_checkpoint(
    key text, phase text, data jsonb DEFAULT NULL, scope text DEFAULT '',
    token bigint DEFAULT NULL, lease interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    e text[];
BEGIN
    e := coalesce(idem.input_key_error(key, 'key'), idem.input_scope_error(scope, 'scope'),
                  idem.input_jsonb_error(data, 'data'), idem.input_key_error(phase, 'phase'),
                  idem.input_interval_error(lease, 'lease'),
                  idem.input_writable_error('idem_checkpoint'));
    IF e IS NULL THEN
        e := idem.claim_finish('checkpoint', 'idem_checkpoint', key, scope, token, data, phase,
                               coalesce(lease, idem.setting_lease()), NULL, NULL);
    END IF;
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

-- The key's row as this snapshot sees it, for operators (no live row: no row).
CREATE OR REPLACE FUNCTION idem_lookup(key text, scope text DEFAULT '')
RETURNS TABLE (state text, attempt integer, fingerprint bytea,
               lease_until timestamptz, checkpoint text, created_at timestamptz,
               completed_at timestamptz, expires_at timestamptz)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SECURITY DEFINER ROWS 1
SET search_path = pg_catalog, idem, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    e text[] := coalesce(idem.input_key_error(key, 'key'), idem.input_scope_error(scope, 'scope'));
BEGIN
    IF e IS NULL THEN
        RETURN QUERY
            SELECT k.state, k.attempt, k.fingerprint, k.lease_until, k.checkpoint,
                   k.created_at, k.completed_at, k.expires_at
              FROM idem.keys k
             WHERE k.key = idem_lookup.key AND k.scope = idem_lookup.scope
               AND (k.expires_at > clock_timestamp() OR idem.claim_is_mine(k.token, k.xmin));
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

-- The keys held by an attempt in flight (committed processing claims), with
-- their lease and last checkpoint, for operators.  Claims not yet committed
-- are not shown (nobody else can see them either).  Owned by the
-- extension's owner, it reads the table with that role's rights, so an
-- operator needs only SELECT on it.
CREATE OR REPLACE VIEW idem_keys_in_progress AS
    SELECT k.scope, k.key, k.attempt, k.lease_until,
           k.lease_until <= now() AS lease_expired,
           k.checkpoint, k.checkpoint_data, k.created_at, k.expires_at
    FROM idem.keys k
    WHERE k.state = 'processing' AND k.expires_at > now();
COMMENT ON VIEW idem_keys_in_progress IS
    'idempotency keys held by an attempt in flight (committed processing claims), with their lease and last checkpoint';
REVOKE ALL ON idem_keys_in_progress FROM PUBLIC;

REVOKE ALL ON FUNCTION idem.claim_remember(bigint), idem.claim_is_mine(bigint, xid),
    idem.claim_note(bigint, xid, text, text, boolean),
    idem.claim_lock_key(text, text),
    idem.claim_key(text, bytea, text, interval, interval, boolean),
    idem.claim_key_nowait(text, bytea, text, interval, interval), idem.claim_key_busy(),
    idem.claim_restamp(text, text, bigint, interval, interval),
    idem.claim_body_jsonb(text),
    idem.claim_args_error(text, bytea, text, interval, interval, text),
    idem.claim_finish(text, text, text, text, bigint, jsonb, text, interval, smallint, text),
    idem.claim_full(text, bytea, text, interval, interval, boolean),
    idem.claim_inserted(text, text, bigint, xid, timestamptz),
    idem.complete_full(text, jsonb, text, bigint)
    FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_claim(text, bytea, text, interval, interval, boolean),
    idem_complete(text, jsonb, text, bigint),
    idem_fail(text, jsonb, boolean, text, bigint),
    idem_checkpoint(text, text, jsonb, text, bigint, interval),
    idem_lookup(text, text) FROM PUBLIC;
