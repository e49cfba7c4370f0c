-- make demo: a tiny payment service.  Accounts are debited, each charge is a
-- row in the ledger.  The ledger has no unique constraint on the key on
-- purpose: idem alone keeps retries from charging twice.
CREATE EXTENSION idem;

CREATE TABLE accounts (
    id      int PRIMARY KEY,
    balance numeric NOT NULL
);
INSERT INTO accounts SELECT g, 100000 FROM generate_series(1, 4) g;

CREATE TABLE charges (
    id         bigserial PRIMARY KEY,
    idem_key   text NOT NULL,
    account    int NOT NULL REFERENCES accounts,
    amount     numeric NOT NULL,
    charged_at timestamptz NOT NULL DEFAULT now()
);

-- What idem_claim answered each attempt: the demo's own count of replays.
CREATE TABLE attempts (
    idem_key text NOT NULL,
    status   text NOT NULL
);

-- What the demo saw, for the summary at the end.
CREATE TABLE demo_facts (
    name  text PRIMARY KEY,
    value text
);

-- Stop the demo (psql runs with ON_ERROR_STOP) when an outcome is not the
-- one idem promises; otherwise say what was checked.
CREATE FUNCTION demo_check(ok boolean, claim text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION 'demo check failed: %', claim;
    END IF;
    RETURN '  ok: ' || claim;
END $$;

-- Run a statement that must fail; say how it was rejected.  The statement
-- runs in a subtransaction, so nothing it might have written stays.
CREATE FUNCTION demo_rejected(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        EXECUTE stmt;
    EXCEPTION WHEN others THEN
        RETURN format('SQLSTATE %s: %s', SQLSTATE, SQLERRM);
    END;
    RAISE EXCEPTION 'demo check failed: this was accepted: %', stmt;
END $$;
