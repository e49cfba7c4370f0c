-- ledger.sql: the business write of every variant, in the database of the
-- C edition's (setup.sql) and of the SQL edition's (bench/run.sh).
--
-- One row per payment booked (or webhook acted on); variant tells which
-- implementation wrote it, so the run can check its keys against it.
CREATE SCHEMA bench;

CREATE TABLE bench.ledger (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    variant     text        NOT NULL,
    payment_key text        NOT NULL,
    amount      bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

