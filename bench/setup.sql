-- setup.sql: the benchmark database's own tables (bench/run.sh installs it).
--
-- bench.ledger is the business write every variant makes; bare.keys is the
-- table of the bare-SQL variant, and doselect.keys that of the ON CONFLICT
-- DO SELECT one (PostgreSQL 19), both shaped like idem.keys so that the
-- variants write the same rows.

CREATE EXTENSION idem;

\ir ledger.sql

CREATE SCHEMA bare;

CREATE SEQUENCE bare.token_seq AS bigint;

-- As idem.keys
CREATE TABLE bare.keys (
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
CREATE INDEX ON bare.keys (expires_at);

-- As bare.keys, for bench/scripts/claim_doselect.sql
CREATE SCHEMA doselect;

CREATE SEQUENCE doselect.token_seq AS bigint;

CREATE TABLE doselect.keys (LIKE bare.keys INCLUDING ALL) WITH (fillfactor = 80);
