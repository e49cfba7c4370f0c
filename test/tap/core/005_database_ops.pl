# The purge worker holds idem.database only during a pass: between passes
# ALTER DATABASE ... RENAME, CREATE DATABASE ... TEMPLATE and DROP DATABASE
# of idem.database succeed, whether the worker only waits for the extension
# or has purged; during a pass, DROP DATABASE ... WITH (FORCE) ends it.  A
# missing idem.database ends each pass's worker with a FATAL, once per
# interval, and never the launcher.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('database_ops');
$node->init;
$node->append_conf(
	'postgresql.conf', q(
shared_preload_libraries = 'idem'
idem.database = 'shop'
idem.purge_interval = '1s'
));
$node->start;

my $launcher_pid_sql =
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'";

# Set idem.purge_interval and reload
sub set_interval
{
	my ($interval) = @_;
	$node->append_conf('postgresql.conf', "idem.purge_interval = '$interval'");
	$node->reload;
	return;
}

# After a reload from 1s to a long interval: wait until the launcher is
# between passes for good.  It is idle between passes (its worker has exited
# by then); idle for longer than the old interval, it follows the new one.
sub wait_between_passes
{
	return $node->poll_query_until('postgres',
		"SELECT state = 'idle' AND state_change < clock_timestamp() - interval '1.5 s'"
		  . " FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'");
}

# Run $sql in database postgres; its error, or '' (shows what failed)
sub error_of
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql);
	return $err;
}

# The statements that need idem.database to themselves, and their checks
sub database_ops
{
	my ($when) = @_;
	is(error_of('ALTER DATABASE shop RENAME TO shop_renamed'),
		'', "$when: ALTER DATABASE RENAME of idem.database succeeds");
	is(error_of('ALTER DATABASE shop_renamed RENAME TO shop'),
		'', "$when: and renaming it back");
	is(error_of('CREATE DATABASE shop_copy TEMPLATE shop'),
		'', "$when: CREATE DATABASE ... TEMPLATE idem.database succeeds");
	is(error_of('DROP DATABASE shop'),
		'', "$when: DROP DATABASE of idem.database succeeds");
	return;
}

# --- idem.database does not exist: each pass's worker ends, FATAL ---

$node->poll_query_until('postgres', "SELECT EXISTS ($launcher_pid_sql)");
my $launcher = $node->safe_psql('postgres', $launcher_pid_sql);
like($launcher, qr/^\d+$/, 'the launcher runs');
$node->wait_for_log(
	qr/FATAL:  database "shop" does not exist(.*\n)*.*FATAL:  database "shop" does not exist/);
ok(1, 'a missing idem.database is a FATAL error of each pass\'s worker');
is($node->safe_psql('postgres', $launcher_pid_sql),
	$launcher, 'which does not end the launcher');
unlike(slurp_file($node->logfile), qr/background worker "idem purge launcher"/,
	'the launcher never exited');

# --- The worker only waits for the extension ---

$node->safe_psql('postgres', 'CREATE DATABASE shop');
$node->wait_for_log(qr/waiting for extension "idem" to be created in database "shop"/);
set_interval('1h');
ok(wait_between_passes(), 'the launcher is between passes');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE datname = 'shop'"),
	'0', 'and nothing is connected to idem.database');
database_ops('waiting for the extension');
is($node->safe_psql('postgres', $launcher_pid_sql),
	$launcher, 'the launcher goes on');

# --- The worker has purged ---

$node->safe_psql('postgres', 'ALTER DATABASE shop_copy RENAME TO shop');
$node->safe_psql(
	'shop', q(
	CREATE EXTENSION idem;
	BEGIN;
	SELECT count(idem_claim('old-' || i)) FROM generate_series(1, 20) i;
	SELECT count(idem_complete('old-' || i)) FROM generate_series(1, 20) i;
	UPDATE idem.keys SET expires_at = now() - interval '1 s';
	COMMIT;
));
my $log_offset = -s $node->logfile;
set_interval('1s');
ok($node->poll_query_until('shop', 'SELECT count(*) FROM idem.keys', '0'),
	'the worker purges idem.database');
set_interval('1h');
ok(wait_between_passes(), 'the launcher is between passes again');
database_ops('after a pass');

# The worker of the next pass finds no database, and says so itself
set_interval('1s');
$node->wait_for_log(qr/FATAL:  database "shop" does not exist/, $log_offset);
is($node->safe_psql('postgres', $launcher_pid_sql),
	$launcher, 'a dropped idem.database does not end the launcher either');

# The copy is the database it was made from, extension and all
$node->safe_psql('postgres', 'ALTER DATABASE shop_copy RENAME TO shop');
$node->safe_psql(
	'shop', q(
	BEGIN;
	SELECT idem_claim('copied');
	SELECT idem_complete('copied');
	UPDATE idem.keys SET expires_at = now() - interval '1 s';
	COMMIT;
));
ok($node->poll_query_until('shop', 'SELECT count(*) FROM idem.keys', '0'),
	'a copy made with TEMPLATE and renamed to idem.database is purged');

# --- During a pass: DROP DATABASE ... WITH (FORCE) ends it ---

# A lock on idem.keys holds the worker of the next pass in idem.database
my $locker = $node->background_psql('shop');
$locker->query_safe('BEGIN; LOCK TABLE idem.keys IN ACCESS EXCLUSIVE MODE;');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge worker'"
		  . " AND datname = 'shop' AND wait_event_type = 'Lock'"),
	'a pass under way is connected to idem.database');
is(error_of('DROP DATABASE shop WITH (FORCE)'),
	'', 'DROP DATABASE ... WITH (FORCE) ends it and drops idem.database');
$locker->quit;
is($node->safe_psql('postgres', $launcher_pid_sql),
	$launcher, 'the launcher goes on');

$node->stop;
done_testing();
