# When the purge worker does not run: in binary-upgrade mode (pg_upgrade's
# servers, postgres -b) nothing of idem's is started; when no background
# worker slot is free, the launcher says so and tries again at the next
# interval.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('worker_start');
$node->init;
# pg_prewarm's autoprewarm leader is a background worker that runs in
# binary-upgrade mode too: registered before idem's, it is started after
# them (from 17 on the logical replication launcher no longer runs there).
# DEBUG1 logs each background worker the postmaster starts.
$node->append_conf(
	'postgresql.conf', q(
shared_preload_libraries = 'pg_prewarm,idem'
idem.database = 'postgres'
idem.purge_interval = '1s'
log_min_messages = debug1
));

my $idem_procs_sql =
  "SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem purge %'";

# --- Binary-upgrade mode ---

# As pg_upgrade starts its servers; the node's own start() takes no options.
system_or_bail('pg_ctl', '-w', '-D', $node->data_dir, '-l', $node->logfile,
	'-o', '-b', 'start');
$node->_update_pid(1);

# Background workers registered at start are started together: once the
# autoprewarm leader is started, idem's would be too, and a pass of theirs
# would come within the second.
$node->wait_for_log(qr/starting background worker process "autoprewarm leader"/);
ok(1, 'the server runs in binary-upgrade mode, and has started its background workers');
sleep(1);
is($node->safe_psql('postgres', $idem_procs_sql),
	'0', 'in binary-upgrade mode no idem purge launcher or worker runs');
unlike(slurp_file($node->logfile), qr/:  idem purge|background worker "idem purge/,
	'and the log shows none started');
$node->stop;

# The same settings without -b start the launcher
$node->start;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'"),
	'without -b the launcher runs');

# --- No free background worker slot ---

# The launcher takes the only slot; a pass's worker finds none.
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nmax_worker_processes = 1\nmax_logical_replication_workers = 0");
my $log_offset = -s $node->logfile;
$node->restart;
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'");
my $launcher = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'");
like($launcher, qr/^\d+$/, 'the launcher runs in the only worker slot');
$node->wait_for_log(
	qr/WARNING:  idem purge launcher found no free background worker slot to purge database "postgres"\n.*DETAIL:  The purge is tried again after idem.purge_interval.\n.*HINT:  You might need to increase max_worker_processes.\n(.*\n)*.*WARNING:  idem purge launcher found no free/,
	$log_offset);
ok(1, 'without a free slot the launcher says so at each interval');
is( $node->safe_psql(
		'postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'"),
	$launcher, 'and goes on');

$node->stop;
done_testing();
