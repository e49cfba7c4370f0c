-- Leases and ttls at the end of timestamptz's range, 294276-12-31
-- 23:59:59.999999 UTC.  One that would end after it is refused with 22008
-- and writes nothing: a row holding such a time could not be restored from
-- a dump (COPY refuses the value, and with it every row of the table) nor
-- replicated.  One that ends just before it works.  The same holds for a
-- claim's lease and ttl, a checkpoint's lease and a webhook's ttl, whether
-- the interval is a plain duration or counts days or months.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;

-- Run a statement; show its SQLSTATE and message instead of failing
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- a key to checkpoint, claimed before the counts
SELECT token AS t FROM idem_claim('range-own') \gset
SELECT lease_until AS own_lease, expires_at AS own_expiry FROM idem_lookup('range-own') \gset

SELECT count(*) AS rows_before FROM idem.keys \gset
SELECT count(*) AS webhooks_before FROM idem.webhooks \gset
SELECT last_value AS seq_before, is_called AS seq_called_before FROM idem.token_seq \gset

-- The intervals, as text: each statement below computes its interval from
-- the start of its own transaction, so that the end it reaches does not
-- depend on when this file runs.
-- (a) the case of the report: 50 hours past the end.  The end is
-- 2562047592 hours after 2000-01-01 UTC.
\set past_50h 'format(''%s hours'', 2562047592 + 50 - floor(extract(epoch FROM now() - timestamptz ''2000-01-01 00:00+00'') / 3600)::bigint)::interval'
-- (b) a duration from the start of the transaction to one microsecond past
-- the last valid time, which the call, running later, overshoots a little
-- more (in microseconds: the difference of two timestamps would count days)
\set past_1us 'format(''%s microseconds'', ((extract(epoch FROM timestamptz ''294276-12-31 23:59:59.999999+00'') - extract(epoch FROM now())) * 1000000)::bigint + 1)::interval'
-- (c) in days, and (d) in years, past the end whatever the time zone
\set past_days 'make_interval(days => date ''294277-01-02'' - current_date)'
\set past_years 'make_interval(years => 294278 - extract(year FROM now())::integer)'
-- (e) days that stay inside the range, then hours that leave it
\set past_mixed 'make_interval(days => date ''294276-12-30'' - current_date, hours => 72)'
-- (f) inside the range: the time of day it is now, on 294276-12-30, and
-- (g) a duration that ends a day before the last valid time
\set inside 'make_interval(days => date ''294276-12-30'' - current_date)'
\set inside_us 'format(''%s microseconds'', ((extract(epoch FROM timestamptz ''294276-12-31 23:59:59.999999+00'') - extract(epoch FROM now())) * 1000000)::bigint - 86400000000)::interval'

-- (a), (b) and (g) are plain durations (no days, no months) of about 292
-- thousand years
SELECT extract(month FROM i) = 0 AND extract(year FROM i) = 0 AND extract(day FROM i) = 0
           AS plain_duration,
       i > interval '290000 years' AS beyond_290000_years
FROM (VALUES (:past_50h), (:past_1us), (:inside_us)) v(i);

-- a claim's lease and ttl
SELECT pg_temp.err(format('SELECT idem_claim(''range-1'', lease => %s)', :'past_50h'));
SELECT pg_temp.err(format('SELECT idem_claim(''range-1'', ttl => %s)', :'past_50h'));
SELECT pg_temp.err(format('SELECT idem_claim(''range-1'', lease => %s)', :'past_1us'));
SELECT pg_temp.err(format('SELECT idem_claim(''range-1'', ttl => %s)', :'past_1us'));
SELECT pg_temp.err(format('SELECT idem_claim(''range-1'', lease => %s)', :'past_days'));
SELECT pg_temp.err(format('SELECT idem_claim(''range-1'', ttl => %s)', :'past_years'));
SELECT pg_temp.err(format('SELECT idem_claim(''range-1'', ttl => %s)', :'past_mixed'));
-- a checkpoint's lease
SELECT pg_temp.err(format('SELECT idem_checkpoint(''range-own'', ''p'', token => %s, lease => %s)', :t, :'past_50h'));
SELECT pg_temp.err(format('SELECT idem_checkpoint(''range-own'', ''p'', token => %s, lease => %s)', :t, :'past_1us'));
SELECT pg_temp.err(format('SELECT idem_checkpoint(''range-own'', ''p'', token => %s, lease => %s)', :t, :'past_mixed'));
-- a webhook's ttl
SELECT pg_temp.err(format('SELECT idem_webhook(''range'', ''evt-1'', ttl => %s)', :'past_50h'));
SELECT pg_temp.err(format('SELECT idem_webhook(''range'', ''evt-1'', ttl => %s)', :'past_1us'));
SELECT pg_temp.err(format('SELECT idem_webhook(''range'', ''evt-1'', ttl => %s)', :'past_days'));

-- none of them wrote a row, took a token or touched the checkpointed key
SELECT count(*) - :rows_before AS new_rows FROM idem.keys;
SELECT count(*) - :webhooks_before AS new_webhooks FROM idem.webhooks;
SELECT last_value = :seq_before AND is_called = :'seq_called_before' AS no_token_taken
FROM idem.token_seq;
SELECT checkpoint, lease_until = :'own_lease' AS same_lease,
       expires_at = :'own_expiry' AS same_expiry
FROM idem_lookup('range-own');
SELECT count(*) AS keys_past_the_end FROM idem.keys
WHERE lease_until >= '294276-12-31 23:59:59.999999+00' OR expires_at >= '294276-12-31 23:59:59.999999+00';

-- an end inside the range works, and is stored as asked
SELECT pg_temp.err(format('SELECT idem_claim(''range-2'', lease => %1$s, ttl => %1$s)', :'inside'));
SELECT pg_temp.err(format('SELECT idem_checkpoint(''range-own'', ''p'', token => %s, lease => %s)', :t, :'inside'));
SELECT pg_temp.err(format('SELECT idem_webhook(''range'', ''evt-2'', ttl => %s)', :'inside'));
SELECT pg_temp.err(format('SELECT idem_claim(''range-3'', lease => %1$s, ttl => %1$s)', :'inside_us'));
SELECT pg_temp.err(format('SELECT idem_webhook(''range'', ''evt-3'', ttl => %s)', :'inside_us'));
SELECT key, state, lease_until::date AS lease_until, expires_at::date AS expires_at, checkpoint
FROM idem.keys WHERE key IN ('range-2', 'range-3', 'range-own') ORDER BY key;
SELECT event_id, expires_at::date AS expires_at FROM idem.webhooks WHERE source = 'range' ORDER BY 1;
-- every row reads back from its text form, as a restore reads a dump
SELECT count(r) = (SELECT count(*) FROM idem.keys) AS keys_read_back
FROM (SELECT k::text::idem.keys AS r FROM idem.keys k) s;
SELECT count(r) = (SELECT count(*) FROM idem.webhooks) AS webhooks_read_back
FROM (SELECT w::text::idem.webhooks AS r FROM idem.webhooks w) s;
