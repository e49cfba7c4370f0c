# The purge worker: a launcher connected to no database starts one worker
# per pass in idem.database; it waits for the extension, purges on its own,
# leaves rows that a live transaction holds, survives failing passes and
# workers that die, follows reloads, comes back after a crash.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('purge_worker');
$node->init;
$node->append_conf(
	'postgresql.conf', q(
shared_preload_libraries = 'idem'
idem.database = 'postgres'
idem.purge_interval = '1s'
restart_after_crash = on
));
$node->start;

my $launcher_pid_sql =
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'";

# Wait until the launcher has ended a pass that started after this call.  It
# shows a pass as its query: query_start is the start of its last pass, state
# goes back to idle when the pass's worker has exited.
sub wait_for_pass
{
	my $since = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	return $node->poll_query_until('postgres',
		"SELECT state = 'idle' AND query_start > '$since' FROM pg_stat_activity"
		  . " WHERE backend_type = 'idem purge launcher'");
}

# The pid of a pass's worker, other than $gone (which must have exited),
# once it waits for a lock in database $db
sub wait_for_blocked_worker
{
	my ($db, $gone) = @_;
	$gone //= 0;
	$node->poll_query_until('postgres',
		"SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $gone)")
	  or return '';
	my $sql = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem purge worker'"
	  . " AND datname = '$db' AND wait_event_type = 'Lock'";
	$node->poll_query_until('postgres', "SELECT EXISTS ($sql)")
	  or return '';
	return $node->safe_psql('postgres', $sql);
}

# Number of rows, expired or not, left in both tables
sub rows_left
{
	return $node->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM idem.keys) + (SELECT count(*) FROM idem.webhooks)');
}

# Completed keys and webhook ids that have expired.  A key cannot be
# completed once it has expired, so the test ages it by hand.
sub make_expired
{
	my ($prefix, $n) = @_;
	$node->safe_psql(
		'postgres', qq(
		BEGIN;
		SELECT count(idem_claim('$prefix-' || i)) FROM generate_series(1, $n) i;
		SELECT count(idem_complete('$prefix-' || i, '{"ok": true}')) FROM generate_series(1, $n) i;
		UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key LIKE '$prefix-%';
		SELECT count(idem_webhook('$prefix', 'evt-' || i, ttl => '1 ms')) FROM generate_series(1, $n) i;
		COMMIT;
	));
	return;
}

# --- Before CREATE EXTENSION: the worker waits and says so once ---

$node->poll_query_until('postgres', "SELECT EXISTS ($launcher_pid_sql)");
my $pid = $node->safe_psql('postgres', $launcher_pid_sql);
like($pid, qr/^\d+$/, 'one launcher is running');
is( $node->safe_psql('postgres',
		"SELECT datname IS NULL FROM pg_stat_activity WHERE pid = $pid"),
	't', 'it shows in pg_stat_activity, connected to no database');

$node->wait_for_log(qr/waiting for extension "idem" to be created in database "postgres"/);
# Each pass is a worker of its own; two more passes must log nothing more.
ok(wait_for_pass() && wait_for_pass(),
	'the launcher keeps running passes while the extension is missing');
my $waits = () = slurp_file($node->logfile) =~ /waiting for extension "idem"/g;
is($waits, 1, 'the missing extension is logged once, not every pass');

# --- Purging on its own ---

$node->safe_psql('postgres', 'CREATE EXTENSION idem');
make_expired('own', 50);
$node->safe_psql('postgres',
	"SELECT idem_claim('fresh', ttl => '1 h'); SELECT idem_webhook('own', 'fresh');");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM idem.keys WHERE expires_at < now()"
		  . " AND NOT EXISTS (SELECT FROM idem.webhooks WHERE expires_at < now())"),
	'the worker purges expired keys and webhook ids');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM idem.keys WHERE key = 'fresh'"),
	'1', 'a key that has not expired stays');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM idem.webhooks WHERE event_id = 'fresh'"),
	'1', 'a webhook id that has not expired stays');

# --- A live transaction holds an expired key ---

# A pass may purge the expired key between its commit and the claim that
# takes it; the claim then writes a row of its own that no other session
# sees.  Such a try is rolled back and made again with another key.
my $held = $node->background_psql('postgres');
my $held_key;
for my $try (1 .. 5)
{
	make_expired("held$try", 1);
	$held_key = "held$try-1";
	$held->query_safe(
		qq(BEGIN;
		SELECT status FROM idem_claim('$held_key');
		SELECT idem_complete('$held_key', '{"second": true}');
		UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key = '$held_key';));
	last
	  if $node->safe_psql('postgres',
		"SELECT count(*) FROM idem.keys WHERE key = '$held_key'") eq '1';
	$held->query_safe('ROLLBACK');
}
make_expired('around', 20);
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) FROM idem.keys WHERE key LIKE 'around-%'", '0'),
	'other expired keys are purged while one is held');
# A worker that waited for the key would never end its pass.
ok(wait_for_pass(), 'passes go on ending while the key is held');
is($node->safe_psql('postgres', "SELECT count(*) FROM idem.keys WHERE key = '$held_key'"),
	'1', 'the held key is left alone');
$held->query_safe('COMMIT');
$held->quit;
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key = '$held_key'", '0'),
	'the key is purged once its transaction ends');

# --- A failing pass is logged and the worker carries on ---

make_expired('readonly', 5);
my $log_offset = -s $node->logfile;
$node->append_conf('postgresql.conf', 'default_transaction_read_only = on');
$node->reload;
$node->wait_for_log(
	qr/ERROR:  cannot execute idem_purge\(\) in a read-only transaction.*\n(.*\n)*.*ERROR:  cannot execute idem_purge\(\)/,
	$log_offset);
is($node->safe_psql('postgres', $launcher_pid_sql),
	$pid, 'a pass that fails does not end the launcher');
like(slurp_file($node->logfile, $log_offset),
	qr/ERROR:  cannot execute idem_purge\(\).*\n.*CONTEXT:  idem purge worker purging database "postgres"/,
	'the error says what the worker was doing');
$node->append_conf('postgresql.conf', 'default_transaction_read_only = off');
$node->reload;
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'readonly-%'", '0'),
	'the next pass after the cause is gone purges');

# --- A reload changes the settings; interval 0 pauses ---

$node->append_conf('postgresql.conf', "idem.purge_interval = 0\nidem.purge_batch_size = 7");
$node->restart;
$node->poll_query_until('postgres', "SELECT EXISTS ($launcher_pid_sql)");
$pid = $node->safe_psql('postgres', $launcher_pid_sql);
make_expired('paused', 40);
# Nothing can be polled for here: absence of passes needs some time to pass.
sleep(2);
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'paused-%'"),
	'40', 'with idem.purge_interval = 0 expired keys stay');
is( $node->safe_psql(
		'postgres', "SELECT query_start IS NULL FROM pg_stat_activity WHERE pid = $pid"),
	't', 'and the paused launcher has not started a pass');
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem purge worker'"),
	'0', 'so nothing is connected to idem.database');

# An hour's interval: the pass that ends the pause is the only one in
# sight, so it must go on batch after batch (7 rows each) until none is left.
$node->append_conf('postgresql.conf', "idem.purge_interval = '1h'");
$node->reload;
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'paused-%'", '0'),
	'after a reload that ends the pause one pass purges them all, batch by batch');
is($node->safe_psql('postgres', $launcher_pid_sql), $pid, 'without restarting');
$node->append_conf('postgresql.conf', "idem.purge_interval = '1s'\nidem.purge_batch_size = 10000");
$node->reload;

# --- A worker that dies; SIGTERM ends the launcher and its pass ---

# A lock on idem.keys holds the next pass's worker, in idem.database.
make_expired('locked', 10);
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE idem.keys IN ACCESS EXCLUSIVE MODE;');
my $worker = wait_for_blocked_worker('postgres');
like($worker, qr/^\d+$/,
	'a pass runs in a worker of its own, connected to idem.database');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($worker)");
$worker = wait_for_blocked_worker('postgres', $worker);
like($worker, qr/^\d+$/, 'a terminated worker is replaced at the next interval');
is($node->safe_psql('postgres', $launcher_pid_sql),
	$pid, 'by the same launcher');

$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid IN ($pid, $worker)", '0'),
	'a terminated launcher ends the pass it started');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge launcher' AND pid <> $pid"),
	'and is started again');
$pid = $node->safe_psql('postgres', $launcher_pid_sql);
$locker->query_safe('COMMIT');
$locker->quit;
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'locked-%'", '0'),
	'once the lock is gone, purging goes on');

# --- kill -9: the postmaster reinitialises, the launcher comes back ---

kill 'KILL', $pid;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge launcher' AND pid <> $pid"),
	'a killed launcher is started again');
make_expired('after-crash', 10);
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'after-crash-%'", '0'),
	'and purging goes on');

$node->stop;
done_testing();
