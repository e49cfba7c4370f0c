# pg_cron instead of the worker: the documented schedule is accepted and
# its job purges.  pg_cron before 1.5 fires at minute boundaries only, so the
# last check waits for the next one (at most a minute); from 1.5 the job is
# moved to a schedule of one second (cron.alter_job), which runs it at once.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

require_extension('pg_cron', 'postgresql-NN-cron');

my $node = PostgreSQL::Test::Cluster->new('pg_cron');
$node->init;

# The worker is paused: whatever is purged here, pg_cron's job purged it.
# Jobs run in background workers, so no connection settings are needed.
$node->append_conf(
	'postgresql.conf', q(
shared_preload_libraries = 'idem,pg_cron'
idem.database = 'postgres'
idem.purge_interval = 0
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 16
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem; CREATE EXTENSION pg_cron;');

# Completed keys that have expired (aged by hand: an expired key cannot
# be completed)
sub make_expired
{
	my ($prefix, $n) = @_;
	$node->safe_psql(
		'postgres', qq(
		BEGIN;
		SELECT count(idem_claim('$prefix-' || i)) FROM generate_series(1, $n) i;
		SELECT count(idem_complete('$prefix-' || i)) FROM generate_series(1, $n) i;
		UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key LIKE '$prefix-%';
		COMMIT;
	));
	return;
}

make_expired('direct', 5);
is($node->safe_psql('postgres', 'SELECT idem_purge()'),
	'5', 'SELECT idem_purge(), as a job runs it, purges');

like(
	$node->safe_psql(
		'postgres',
		"SELECT cron.schedule('idem-purge', '* * * * *', 'SELECT idem_purge()')"),
	qr/^\d+$/,
	'the schedule from the documentation is accepted');

make_expired('cron', 5);
cron_jobs_every_second($node, 'idem-purge');
# A minute and some, whatever a short test timeout says
$PostgreSQL::Test::Utils::timeout_default = 90
  if $PostgreSQL::Test::Utils::timeout_default < 90;
ok( $node->poll_query_until(
		'postgres', q(
		SELECT count(*) > 0 FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		WHERE j.jobname = 'idem-purge' AND d.status = 'succeeded')),
	'the job runs (at the next minute before pg_cron 1.5)');
is($node->safe_psql('postgres', "SELECT count(*) FROM idem.keys WHERE key LIKE 'cron-%'"),
	'0', 'and purges the expired keys');

$node->stop;
done_testing();
