# Crashes: a backend killed between claim and completion, an immediate
# shutdown in the middle of a storm of payments, a prepared transaction
# across a crash, and a storm of retries with rollbacks.  Nothing that was
# acknowledged as committed is lost, and no key is ever charged twice.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $node = idem_node('crash', q(
restart_after_crash = on
max_prepared_transactions = 5
max_connections = 40
log_statement = none
));

# A payment in the in-transaction mode: claim, charge (a ledger row) and
# completion commit together.  Returns the charge id, or 0 for a replay.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION idem;
CREATE TABLE ledger (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
CREATE INDEX ON ledger (key);
CREATE FUNCTION pay(k text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    c record;
    charge bigint;
BEGIN
    SELECT * INTO c FROM idem_claim(k, idem_fingerprint('{"amount": 100}'));
    IF c.status = 'claimed' THEN
        INSERT INTO ledger (key, amount) VALUES (k, 100) RETURNING id INTO charge;
        PERFORM idem_complete(k, jsonb_build_object('charge', charge));
        RETURN charge;
    END IF;
    IF c.status <> 'completed' THEN
        RAISE EXCEPTION 'unexpected claim status % for %', c.status, k;
    END IF;
    RETURN 0;
END $$;
-- SQLSTATE of a statement, or ok
} . $SQLSTATE_OF . q{
});

# Everything that breaks the promises for the keys starting with $prefix:
# a charge whose key is not completed with that charge as its response, a
# key charged twice, a completed key without exactly one charge, and (in the
# in-transaction mode, where claim and completion commit together) a row
# left in any other state.  Empty when all is well.
sub violations
{
	my ($n, $prefix) = @_;
	return $n->safe_psql(
		'postgres', qq{
SELECT 'charge ' || l.id || ' of ' || l.key || ' but the key is '
       || coalesce(k.state || ' ' || coalesce(k.response::text, 'null'), 'absent')
FROM ledger l LEFT JOIN idem.keys k ON k.scope = '' AND k.key = l.key
WHERE l.key LIKE '$prefix%'
  AND (k.state IS DISTINCT FROM 'completed'
       OR (k.response->>'charge')::bigint IS DISTINCT FROM l.id)
UNION ALL
SELECT 'charged ' || count(*) || ' times: ' || key
FROM ledger WHERE key LIKE '$prefix%' GROUP BY key HAVING count(*) > 1
UNION ALL
SELECT 'completed with ' || (SELECT count(*) FROM ledger l WHERE l.key = k.key)
       || ' charges: ' || k.key
FROM idem.keys k
WHERE k.key LIKE '$prefix%' AND k.state = 'completed'
  AND (SELECT count(*) FROM ledger l WHERE l.key = k.key) <> 1
UNION ALL
SELECT 'left ' || state || ': ' || key
FROM idem.keys WHERE key LIKE '$prefix%' AND state <> 'completed'
ORDER BY 1});
}

# Kill a backend with SIGKILL and wait until the server has restarted.
sub kill_backend
{
	my ($session, $pid) = @_;
	my $offset = -s $node->logfile;
	kill 'KILL', $pid;
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
	eval { $session->quit };
	ok($node->poll_query_until('postgres', 'SELECT true'),
		'the server accepts connections again after the crash');
	return;
}

# Start pgbench in the background: $clients clients run $script for $secs.
# Returns the harness and references to its output.
sub start_pgbench
{
	my ($name, $script, $clients, $secs) = @_;
	my $file = $node->basedir . "/$name.sql";
	unlink $file;
	append_to_file($file, $script);
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'pgbench', '-n', '-c', $clients, '-j', 2, '-T', $secs,
			'-f', $file, '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

# --- SIGKILL in the in-transaction mode ---

{
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->query_safe('BEGIN');
	is( $s->query_safe("SELECT status, attempt FROM idem_claim('kill-tx', '\\x01')"),
		'claimed|1', 'in-transaction claim before the kill');
	$s->query_safe("INSERT INTO ledger (key, amount) VALUES ('kill-tx', 100)");
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	kill_backend($s, $pid);

	is($node->safe_psql('postgres', "SELECT count(*) FROM idem_lookup('kill-tx')"),
		'0', 'the killed transaction left no row for its key');
	is($node->safe_psql('postgres', "SELECT count(*) FROM ledger WHERE key = 'kill-tx'"),
		'0', 'nor a charge');
	is( $node->safe_psql(
			'postgres', "SELECT status, attempt FROM idem_claim('kill-tx', '\\x01')"),
		'claimed|1',
		'the key is claimable again as attempt 1');
}

# --- SIGKILL in the two-phase mode, after a committed checkpoint ---

{
	my $t1 = $node->safe_psql('postgres',
		"SELECT token FROM idem_claim('kill-2p', '\\x02', lease => '5 s')");
	$node->safe_psql('postgres',
		"SELECT idem_checkpoint('kill-2p', 'charged', '{\"charge\": \"ch_9\"}', token => $t1, lease => '5 s')"
	);

	# the worker is killed while recording a later checkpoint
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->query_safe('BEGIN');
	$s->query_safe(
		"SELECT idem_checkpoint('kill-2p', 'refunding', '{\"refund\": 1}', token => $t1)");
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	kill_backend($s, $pid);

	is( $node->safe_psql(
			'postgres', "SELECT state, attempt, checkpoint FROM idem_lookup('kill-2p')"),
		'processing|1|charged',
		'the killed attempt is still processing at its last committed checkpoint');

	# while the lease lasts, a retry is told to wait (unless the restart
	# itself took the lease's whole length)
	my $lease_left = $node->safe_psql('postgres',
		"SELECT lease_until > clock_timestamp() + interval '1 s' FROM idem_lookup('kill-2p')");
  SKIP:
	{
		skip 'the restart outlasted the lease', 1 if $lease_left ne 't';
		is( $node->safe_psql(
				'postgres', "SELECT status, attempt FROM idem_claim('kill-2p', '\\x02')"),
			'in_progress|1',
			'a retry during the lease is in_progress');
	}

	ok( $node->poll_query_until(
			'postgres',
			"SELECT lease_until < clock_timestamp() FROM idem_lookup('kill-2p')"),
		'the lease runs out');
	my $claim = $node->safe_psql('postgres',
		"SELECT status, attempt, checkpoint, checkpoint_data, token > $t1 FROM idem_claim('kill-2p', '\\x02')"
	);
	is( $claim,
		'claimed|2|charged|{"charge": "ch_9"}|t',
		'the next claim is attempt 2 with the last checkpoint and a newer token');
	is( $node->safe_psql(
			'postgres',
			"SELECT sqlstate_of(\$\$SELECT idem_complete('kill-2p', '{}', token => $t1)\$\$)"
		),
		'ID001',
		'the killed attempt\'s token can no longer complete the key');
}

# --- Immediate shutdown in the middle of a storm of payments ---

# A prepared transaction holding a completed payment rides through the crash.
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT pay('prepared-1');
PREPARE TRANSACTION 'pay_prepared_1';
});

my $acklog = $node->basedir . '/storm_acknowledged.log';
unlink $acklog;
# Each client pays keys of a set of 3000; after COMMIT returns, a charge is
# written to a log on the client's side: those commits were acknowledged.
my ($h, $out, $err) = start_pgbench(
	'crash_storm', qq{\\set k random(1, 3000)
BEGIN;
SELECT pay('s-' || :k) AS charge \\gset
COMMIT;
\\if :charge > 0
\\shell echo :k :charge >> $acklog
\\endif
}, 8, 20);

ok( $node->poll_query_until(
		'postgres', "SELECT count(*) >= 150 FROM ledger WHERE key LIKE 's-%'"),
	'the storm is charging');
$node->stop('immediate');
$h->finish;    # the clients lost their server and gave up
note "pgbench: $$err";
$node->start;

my @acked = grep { /^\d+ \d+$/ } split /\n/, slurp_file($acklog);
cmp_ok(scalar @acked, '>', 0, 'the client saw charges acknowledged before the crash');
my $values = join ',', map { my ($k, $c) = split / /; "('s-$k', $c)" } @acked;
# a retry of each acknowledged payment, asked the way an application asks
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM (VALUES $values) a(key, charge),
LATERAL idem_claim(a.key, idem_fingerprint('{"amount": 100}')) c
WHERE c.status <> 'completed' OR (c.response->>'charge')::bigint <> a.charge
   OR (SELECT count(*) FROM ledger l WHERE l.key = a.key) <> 1}),
	'0',
	'every acknowledged charge answers completed with its response after the crash: '
	  . scalar(@acked) . ' charges');
is(violations($node, 's-'), '',
	'after the crash every charged key is completed once, and nothing else is left');

# the token sequence did not go back: tokens lost with the crash are never
# reused for a key that committed
my $max_stored = $node->safe_psql('postgres', 'SELECT max(token) FROM idem.keys');
cmp_ok($node->safe_psql('postgres', "SELECT token FROM idem_claim('after-crash')"),
	'>', $max_stored, 'a claim after the crash gets a token above every stored one');

# Keys the crash interrupted are claimable; retrying every key of the set
# charges each missing one once and replays the rest.
$node->safe_psql('postgres', "SELECT sum(pay('s-' || i)) FROM generate_series(1, 3000) i");
is($node->safe_psql('postgres', "SELECT count(DISTINCT key), count(*) FROM ledger WHERE key LIKE 's-%'"),
	'3000|3000', 'after retrying all 3000 keys, each is charged exactly once');
is(violations($node, 's-'), '', 'and each is completed with its charge');

# the prepared transaction survived: its key waits for it, then replays
is($node->safe_psql('postgres', 'SELECT gid FROM pg_prepared_xacts'),
	'pay_prepared_1', 'the prepared transaction survived the crash');
is( $node->safe_psql(
		'postgres', "SELECT status FROM idem_claim('prepared-1', idem_fingerprint('{\"amount\": 100}'), nowait => true)"),
	'in_progress',
	'its key is in progress while it is prepared');
$node->safe_psql('postgres', "COMMIT PREPARED 'pay_prepared_1'");
is($node->safe_psql('postgres', "SELECT pay('prepared-1')"),
	'0', 'after COMMIT PREPARED a retry replays it');
is(violations($node, 'prepared-'), '', 'and it was charged once');

# --- A storm of retries of a few keys, with rollbacks ---

# Eight clients pay the same 3 keys (a new set every 200 ms); each holds its
# transaction a moment, and half of them roll back, so several waiters race
# for each rolled-back claim.
($h, $out, $err) = start_pgbench(
	'retry_storm', q{\set k random(1, 3)
\set rollback random(0, 1)
BEGIN;
SELECT pay('r-' || floor(extract(epoch FROM clock_timestamp()) * 5)::bigint || '-' || :k) AS charge \gset
SELECT pg_sleep(0.002);
\if :rollback
ROLLBACK;
\else
COMMIT;
\endif
}, 8, 3);
ok($h->finish, 'the retry storm ran without an error') or diag $$err;
like($$out, qr/number of transactions actually processed: \d+/, 'pgbench reported its transactions');
note $$out;
is(violations($node, 'r-'), '',
	'with rollbacks and racing waiters, every completed key has exactly one charge');
cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'r-%'"),
	'>', 5, 'and the storm completed many keys');

ok(!$node->log_contains('PANIC|TRAP:'), 'no PANIC or assertion failure in the log');
$node->stop;
done_testing();
