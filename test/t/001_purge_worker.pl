# The purge worker: waits for the extension, purges on its own, leaves rows
# that a live transaction holds, follows reloads, comes back after a crash.
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

my $worker_pid_sql =
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem purge worker'";

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

my $pid = $node->safe_psql('postgres', $worker_pid_sql);
like($pid, qr/^\d+$/, 'one worker is running');
is($node->safe_psql('postgres', "SELECT datname FROM pg_stat_activity WHERE pid = $pid"),
	'postgres', 'it shows in pg_stat_activity, connected to idem.database');

$node->wait_for_log(qr/waiting for extension "idem" to be created in database "postgres"/);
# Each pass shows in query_start; two more passes must log nothing more.
my $seen_at = $node->safe_psql('postgres', 'SELECT now()');
ok( $node->poll_query_until(
		'postgres',
		"SELECT query_start > '$seen_at'::timestamptz + interval '2 s' FROM pg_stat_activity WHERE pid = $pid"
	),
	'the worker keeps passing while the extension is missing');
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

make_expired('held', 1);
my $held = $node->background_psql('postgres');
$held->query_safe(
	q(BEGIN;
	SELECT status FROM idem_claim('held-1');
	SELECT idem_complete('held-1', '{"second": true}');
	UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key = 'held-1';));
make_expired('around', 20);
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) FROM idem.keys WHERE key LIKE 'around-%'", '0'),
	'other expired keys are purged while one is held');
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid AND wait_event_type = 'Lock'"),
	'0',
	'the worker does not wait for the held key');
is($node->safe_psql('postgres', "SELECT count(*) FROM idem.keys WHERE key = 'held-1'"),
	'1', 'the held key is left alone');
$held->query_safe('COMMIT');
$held->quit;
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key = 'held-1'", '0'),
	'the key is purged once its transaction ends');

# --- A failing pass is logged and the worker carries on ---

make_expired('readonly', 5);
my $log_offset = -s $node->logfile;
$node->append_conf('postgresql.conf', 'default_transaction_read_only = on');
$node->reload;
$node->wait_for_log(
	qr/ERROR:  cannot execute idem_purge\(\) in a read-only transaction.*\n(.*\n)*.*ERROR:  cannot execute idem_purge\(\)/,
	$log_offset);
is($node->safe_psql('postgres', $worker_pid_sql),
	$pid, 'a pass that fails does not end the worker');
like(slurp_file($node->logfile, $log_offset),
	qr/CONTEXT:  .*\n.*idem purge worker purging database "postgres"/,
	'the error says what the worker was doing');
$node->append_conf('postgresql.conf', 'default_transaction_read_only = off');
$node->reload;
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'readonly-%'", '0'),
	'the next pass after the cause is gone purges');

# --- A reload changes the settings; interval 0 pauses ---

$node->append_conf('postgresql.conf', "idem.purge_interval = 0\nidem.purge_batch_size = 7");
$node->restart;
$pid = $node->safe_psql('postgres', $worker_pid_sql);
make_expired('paused', 40);
# Nothing can be polled for here: absence of passes needs some time to pass.
sleep(2);
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'paused-%'"),
	'40', 'with idem.purge_interval = 0 expired keys stay');
is( $node->safe_psql(
		'postgres', "SELECT query_start IS NULL FROM pg_stat_activity WHERE pid = $pid"),
	't', 'and the paused worker has not run a pass');

# An hour's interval: the pass that ends the pause is the only one in
# sight, so it must go on batch after batch (7 rows each) until none is left.
$node->append_conf('postgresql.conf', "idem.purge_interval = '1h'");
$node->reload;
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'paused-%'", '0'),
	'after a reload that ends the pause one pass purges them all, batch by batch');
is($node->safe_psql('postgres', $worker_pid_sql), $pid, 'without restarting');
$node->append_conf('postgresql.conf', "idem.purge_interval = '1s'\nidem.purge_batch_size = 10000");
$node->reload;

# --- SIGTERM ends it, the postmaster starts it again ---

$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge worker' AND pid <> $pid"),
	'a terminated worker is started again');
$pid = $node->safe_psql('postgres', $worker_pid_sql);

# --- kill -9: the postmaster reinitialises, the worker comes back ---

kill 'KILL', $pid;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge worker' AND pid <> $pid"),
	'a killed worker is started again');
make_expired('after-crash', 10);
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'after-crash-%'", '0'),
	'and purging goes on');

$node->stop;
done_testing();
