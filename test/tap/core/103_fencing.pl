# Fencing: a worker whose lease was taken over can neither complete, fail
# nor checkpoint the new attempt (ID001), also when it calls at the very
# moment the new owner's takeover is still uncommitted; and a race of stale
# and fresh workers on many keys ends with every key finished once.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $node = idem_node('fencing', q(
max_connections = 30
log_statement = none
));

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION idem;
} . $SQLSTATE_OF . q{
});

sub sql { return $node->safe_psql('postgres', $_[0]); }

# SQLSTATE of a statement run in its own session ('ok' if it worked)
sub state_of
{
	my $q = shift;
	$q =~ s/'/''/g;
	return sql("SELECT sqlstate_of('$q')");
}

# A committed two-phase claim whose lease has already run out; its token.
sub expired_claim
{
	my $key = shift;
	my $t = sql("SELECT token FROM idem_claim('$key', lease => '100 ms')");
	$node->poll_query_until('postgres',
		"SELECT lease_until < clock_timestamp() FROM idem_lookup('$key')")
	  or die "the lease of $key did not run out";
	return $t;
}

# Wait until the backend $pid waits for a lock.
sub wait_for_lock_wait
{
	my $pid = shift;
	return $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid");
}

# Start a statement in session $s that will wait; returns at once.
sub start_waiting
{
	my ($s, $q) = @_;
	$s->query_until(qr/started\n/, "\\echo started\n$q;\n");
	return;
}

# The result of the statement started with start_waiting, once it ends.
sub finish_waiting
{
	my $s = shift;
	my $out = $s->query('');
	$out =~ s/^\s+|\s+$//g;
	return $out;
}

# --- After a committed takeover ---

{
	my $t1 = expired_claim('fence-1');
	my ($status, $t2) = split /\|/,
	  sql("SELECT status || '|' || token FROM idem_claim('fence-1')");
	is($status, 'claimed', 'a claim takes over the expired attempt');

	is(state_of("SELECT idem_complete('fence-1', '{}', token => $t1)"),
		'ID001', 'the stale worker cannot complete');
	is(state_of("SELECT idem_fail('fence-1', '{}', retryable => true, token => $t1)"),
		'ID001', 'nor release the key');
	is(state_of("SELECT idem_fail('fence-1', '{}', retryable => false, token => $t1)"),
		'ID001', 'nor fail it');
	is(state_of("SELECT idem_checkpoint('fence-1', 'p', token => $t1)"),
		'ID001', 'nor checkpoint it');
	is(state_of("SELECT idem_complete('fence-1', '{}')"),
		'ID004', 'without a token, outside the claiming transaction: ID004');
	is(sql("SELECT state, attempt, checkpoint IS NULL FROM idem_lookup('fence-1')"),
		'processing|2|t', 'the new attempt is untouched');
	is(state_of("SELECT idem_complete('fence-1', '{\"ok\": 2}', token => $t2)"),
		'ok', 'the new owner completes it');
	is(state_of("SELECT idem_complete('fence-1', '{}', token => $t1)"),
		'ID003', 'after that the stale worker is told the key is finished');
}

# --- The stale worker calls while the takeover is uncommitted ---

my $owner = $node->background_psql('postgres', on_error_stop => 0);
my $stale = $node->background_psql('postgres', on_error_stop => 0);
my $stale_pid = $stale->query_safe('SELECT pg_backend_pid()');

# the owner commits its takeover: the stale completion waits, then ID001
{
	my $t1 = expired_claim('fence-2');
	$owner->query_safe('BEGIN');
	is($owner->query_safe("SELECT status, attempt FROM idem_claim('fence-2')"),
		'claimed|2', 'the new owner takes over, uncommitted');
	start_waiting($stale,
		"SELECT sqlstate_of(\$\$SELECT idem_complete('fence-2', '{\"by\": \"stale\"}', token => $t1)\$\$)"
	);
	ok(wait_for_lock_wait($stale_pid), 'the stale completion waits for the owner');
	$owner->query_safe('COMMIT');
	is(finish_waiting($stale), 'ID001', 'after the owner commits it fails with ID001');
	is(sql("SELECT state, attempt FROM idem_lookup('fence-2')"),
		'processing|2', 'the new attempt goes on');
}

# the owner completes in the same transaction: the stale worker gets ID003
{
	my $t1 = expired_claim('fence-3');
	$owner->query_safe('BEGIN');
	$owner->query_safe("SELECT idem_claim('fence-3')");
	$owner->query_safe("SELECT idem_complete('fence-3', '{\"by\": \"owner\"}')");
	start_waiting($stale,
		"SELECT sqlstate_of(\$\$SELECT idem_checkpoint('fence-3', 'late', token => $t1)\$\$)");
	ok(wait_for_lock_wait($stale_pid), 'a stale checkpoint waits for the owner');
	$owner->query_safe('COMMIT');
	is(finish_waiting($stale), 'ID003', 'and is refused as already finished');
	is(sql("SELECT status || ' ' || response::text FROM idem_claim('fence-3')"),
		'completed {"by": "owner"}', 'the owner\'s completion stands');
}

# The owner's takeover rolls back: nobody took the key over after all, so
# the worker of attempt 1 still holds it, and its completion (which waited)
# goes through.  A lease that ran out is an offer to take over, not a fence;
# only a committed takeover fences the earlier attempt.
{
	my $t1 = expired_claim('fence-4');
	$owner->query_safe('BEGIN');
	$owner->query_safe("SELECT idem_claim('fence-4')");
	start_waiting($stale,
		"SELECT sqlstate_of(\$\$SELECT idem_complete('fence-4', '{\"by\": \"attempt 1\"}', token => $t1)\$\$)"
	);
	ok(wait_for_lock_wait($stale_pid), 'the late completion waits for the takeover');
	$owner->query_safe('ROLLBACK');
	is(finish_waiting($stale), 'ok',
		'after the takeover rolls back, attempt 1 completes the key');
	is(sql("SELECT status, attempt, response FROM idem_claim('fence-4')"),
		'completed|1|{"by": "attempt 1"}', 'as attempt 1, with its response');
}

# The other way round: the late worker of attempt 1 is completing (its
# transaction open) when a retry claims.  The retry waits and replays the
# completion; or takes over if that completion rolls back.
{
	my $t1 = expired_claim('fence-5');
	my $t1b = expired_claim('fence-6');
	my $retry = $node->background_psql('postgres', on_error_stop => 0);
	my $retry_pid = $retry->query_safe('SELECT pg_backend_pid()');

	$stale->query_safe('BEGIN');
	$stale->query_safe("SELECT idem_complete('fence-5', '{\"by\": \"attempt 1\"}', token => $t1)");
	start_waiting($retry, "SELECT status, attempt, response FROM idem_claim('fence-5')");
	ok(wait_for_lock_wait($retry_pid), 'a retry waits for the late completion');
	$stale->query_safe('COMMIT');
	is(finish_waiting($retry), 'completed|1|{"by": "attempt 1"}',
		'and replays it once it commits');

	$stale->query_safe('BEGIN');
	$stale->query_safe("SELECT idem_complete('fence-6', '{\"by\": \"attempt 1\"}', token => $t1b)");
	start_waiting($retry, "SELECT status, attempt FROM idem_claim('fence-6')");
	ok(wait_for_lock_wait($retry_pid), 'a retry waits for another late completion');
	$stale->query_safe('ROLLBACK');
	is(finish_waiting($retry), 'claimed|2', 'and takes the key over when it rolls back');
	$retry->quit;
}
$owner->quit;
$stale->quit;

# --- A race of stale and fresh workers on many keys ---

# 1000 keys, each with a committed attempt whose lease ran out.  Fresh workers
# claim (taking over), charge and complete: in one transaction, a quarter of
# which roll back, or in two phases (the takeover commits, then a call to
# the gateway takes 50 ms).  Stale
# workers keep calling complete, fail or checkpoint with the tokens of the
# first attempts (of random keys, and of keys a fresh worker holds at that
# moment), and log what they were told.
sql(q{
CREATE TABLE old_tokens (key text PRIMARY KEY, token bigint NOT NULL);
CREATE TABLE ledger (key text NOT NULL, token bigint NOT NULL);
CREATE TABLE stale_log (key text NOT NULL, op int NOT NULL, outcome text NOT NULL);
INSERT INTO old_tokens
SELECT 'p-' || i, (idem_claim('p-' || i, lease => '1 ms')).token FROM generate_series(1, 1000) i;
CREATE FUNCTION fresh(k text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idem_claim(k);
    IF c.status = 'claimed' THEN
        INSERT INTO ledger VALUES (k, c.token);
        PERFORM idem_complete(k, jsonb_build_object('by', 'fresh', 'token', c.token));
    END IF;
END $$;
CREATE FUNCTION fresh_claim(k text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idem_claim(k, lease => '1 min');
    RETURN CASE WHEN c.status = 'claimed' THEN c.token ELSE 0 END;
END $$;
CREATE FUNCTION fresh_finish(k text, t bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger VALUES (k, t);
    PERFORM idem_complete(k, jsonb_build_object('by', 'fresh', 'token', t), token => t);
END $$;
CREATE FUNCTION stale(k text, op int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t bigint := (SELECT token FROM old_tokens WHERE key = k);
    outcome text := 'ok';
BEGIN
    BEGIN
        IF op = 1 THEN
            PERFORM idem_complete(k, '{"by": "stale"}', token => t);
        ELSIF op = 2 THEN
            PERFORM idem_fail(k, '{"by": "stale"}', retryable => false, token => t);
        ELSE
            PERFORM idem_checkpoint(k, 'stale', token => t, lease => '1 ms');
        END IF;
    EXCEPTION WHEN OTHERS THEN
        outcome := SQLSTATE;
    END;
    INSERT INTO stale_log VALUES (k, op, outcome);
END $$;
});
ok($node->poll_query_until('postgres',
		"SELECT bool_and(lease_until < clock_timestamp()) FROM idem.keys WHERE key LIKE 'p-%'"),
	'the first attempts\' leases ran out');

my $fresh = $node->basedir . '/fresh.sql';
my $fresh2 = $node->basedir . '/fresh_two_phase.sql';
my $stale_script = $node->basedir . '/stale.sql';
my $stale_inflight = $node->basedir . '/stale_inflight.sql';
unlink $fresh, $fresh2, $stale_script, $stale_inflight;
append_to_file(
	$fresh, q{\set k random(1, 1000)
\set rollback random(0, 3)
BEGIN;
SELECT fresh('p-' || :k);
\if :rollback = 0
ROLLBACK;
\else
COMMIT;
\endif
});
append_to_file(
	$fresh2, q{\set k random(1, 1000)
SELECT fresh_claim('p-' || :k) AS token \gset
\if :token > 0
SELECT pg_sleep(0.05);
BEGIN;
SELECT fresh_finish('p-' || :k, :token);
COMMIT;
\endif
});
append_to_file(
	$stale_script, q{\set k random(1, 1000)
\set op random(1, 3)
SELECT stale('p-' || :k, :op);
});
# stale workers of keys that a fresh worker holds right now (two-phase)
append_to_file(
	$stale_inflight, q{\set op random(1, 3)
SELECT stale(key, :op) FROM idem.keys
WHERE key LIKE 'p-%' AND state = 'processing' AND attempt = 2 LIMIT 1;
});
my ($out, $err) = ('', '');
my $h = IPC::Run::run(
	[
		'pgbench', '-n', '-c', 6, '-j', 2, '-T', 3,
		'-f', $fresh, '-f', $fresh2, '-f', "$stale_script\@2", '-f', $stale_inflight,
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err);
ok($h, 'the race ran without an error') or diag $err;
note $out;

is(sql("SELECT count(*) FROM stale_log WHERE outcome NOT IN ('ok', 'ID001', 'ID003')"),
	'0', 'stale workers were told ok, ID001 (taken over) or ID003 (finished), nothing else');
note sql("SELECT outcome, count(*) FROM stale_log GROUP BY 1 ORDER BY 1");
cmp_ok(sql("SELECT count(*) FROM stale_log WHERE outcome = 'ID001'"), '>', 0,
	'some stale calls met a takeover');
cmp_ok(sql("SELECT count(*) FROM stale_log WHERE outcome = 'ok'"), '>', 0,
	'some stale calls came before any takeover');

# Every key ended in exactly one of these ways.
is( sql(q{
WITH s AS (
    SELECT o.key, o.token AS old_token,
           (SELECT count(*) FROM stale_log l WHERE l.key = o.key AND l.outcome = 'ok' AND l.op = 1) AS stale_completes,
           (SELECT count(*) FROM stale_log l WHERE l.key = o.key AND l.outcome = 'ok' AND l.op = 2) AS stale_fails,
           (SELECT count(*) FROM ledger l WHERE l.key = o.key) AS charges,
           (SELECT min(token) FROM ledger l WHERE l.key = o.key) AS charge_token,
           k.state, k.attempt, k.token, k.response
    FROM old_tokens o JOIN idem.keys k ON k.scope = '' AND k.key = o.key
)
SELECT count(*) FROM s WHERE NOT (
    -- a fresh worker took over, charged once and completed
    (state = 'completed' AND response->>'by' = 'fresh' AND attempt = 2
     AND charges = 1 AND charge_token = token AND (response->>'token')::bigint = token
     AND stale_completes = 0 AND stale_fails = 0)
    -- the first attempt's worker finished it, nobody having taken over
    OR (state = 'completed' AND response->>'by' = 'stale' AND attempt = 1
        AND token = old_token AND charges = 0 AND stale_completes = 1 AND stale_fails = 0)
    OR (state = 'failed' AND response->>'by' = 'stale' AND attempt = 1
        AND token = old_token AND charges = 0 AND stale_completes = 0 AND stale_fails = 1)
    -- nobody finished it (every takeover rolled back)
    OR (state = 'processing' AND attempt = 1 AND token = old_token
        AND charges = 0 AND stale_completes = 0 AND stale_fails = 0)
)}),
	'0',
	'every key was finished once: by a fresh worker with one charge, or by its first attempt, never both');
note sql("SELECT state, response->>'by', attempt, count(*) FROM idem.keys WHERE key LIKE 'p-%' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3");
cmp_ok(sql("SELECT count(*) FROM idem.keys WHERE key LIKE 'p-%' AND attempt = 2"),
	'>', 0, 'fresh workers took keys over');

$node->stop;
done_testing();
