-- replay: claim a key completed before, get its response back: PL/pgSQL
-- Keys 1 to :keys were completed before the run.
\set r random(1, :keys)
SELECT status, response FROM plpgsql_idem.plpgsql_claim(:r, '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea);
