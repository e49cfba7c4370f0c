-- replay: read the stored response by primary key, no claim logic at all
-- Keys 1 to :keys were completed before the run.
\set r random(1, :keys)
SELECT state, response FROM bare.keys WHERE scope = '' AND key = :r;
