-- bench/seeds/schema.sql: the tables of the seeds' payment, for run.sh and
-- bench/profile.sh, in the database that server.conf names idem.database
CREATE EXTENSION idem;
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT i, 0 FROM generate_series(1, 1000) i;
-- no unique key on k: a double charge must be possible to be counted
CREATE TABLE ledger (id bigserial PRIMARY KEY, k text NOT NULL, account int NOT NULL, amount bigint NOT NULL);
CREATE TABLE dedupe (k text PRIMARY KEY, status text NOT NULL, response jsonb);
-- the hand-written record: idem.keys's columns, primary key and fillfactor
CREATE TABLE dedupe1 (
    scope text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL, state text NOT NULL,
    token bigint NOT NULL, attempt integer NOT NULL, fingerprint bytea, lease_until timestamptz,
    checkpoint text, checkpoint_data jsonb, response jsonb, created_at timestamptz NOT NULL,
    completed_at timestamptz, expires_at timestamptz NOT NULL, http_status smallint, body text,
    CONSTRAINT dedupe1_pkey PRIMARY KEY (key, scope)
) WITH (fillfactor = 80);
