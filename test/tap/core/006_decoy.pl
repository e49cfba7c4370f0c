# A role with CREATE on the extension's schema cannot capture or break the
# purge worker: a decoy idem_purge(integer, integer DEFAULT 0) makes the SQL
# call idem_purge(n) ambiguous (42725), but the worker calls no SQL, so it
# still purges, and idem_stats shows it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $node = PostgreSQL::Test::Cluster->new('decoy');
$node->init;
# Verbose errors put the SQLSTATE in the log.
$node->append_conf(
	'postgresql.conf', q(
shared_preload_libraries = 'idem'
idem.database = 'postgres'
idem.purge_interval = '1s'
log_error_verbosity = verbose
));
$node->start;

$node->safe_psql(
	'postgres', qq(
	CREATE EXTENSION idem;
	$SQLSTATE_OF
	CREATE ROLE mallory LOGIN;
	GRANT CREATE ON SCHEMA public TO mallory;
));

# The decoy, in the schema of the extension's functions, records its calls
$node->safe_psql(
	'postgres', q(
	CREATE TABLE public.decoy_calls (at timestamptz DEFAULT now());
	GRANT INSERT ON public.decoy_calls TO PUBLIC;
	CREATE FUNCTION public.idem_purge(integer, integer DEFAULT 0) RETURNS bigint
	LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO public.decoy_calls DEFAULT VALUES;
		RETURN 0;
	END $$;
),
	extra_params => [ '-U', 'mallory' ]);
is( $node->safe_psql('postgres', q(SELECT sqlstate_of('SELECT public.idem_purge(5)'))),
	'42725', 'the decoy makes a call of idem_purge(integer) ambiguous');

my $log_offset = -s $node->logfile;
$node->safe_psql(
	'postgres', q(
	BEGIN;
	SELECT count(idem_claim('old-' || i)) FROM generate_series(1, 30) i;
	SELECT count(idem_complete('old-' || i)) FROM generate_series(1, 30) i;
	UPDATE idem.keys SET expires_at = now() - interval '1 s';
	SELECT count(idem_webhook('stripe', 'evt-' || i, ttl => '1 ms')) FROM generate_series(1, 10) i;
	COMMIT;
));
ok( $node->poll_query_until(
		'postgres',
		'SELECT (SELECT count(*) FROM idem.keys) + (SELECT count(*) FROM idem.webhooks)', '0'),
	'the worker still purges expired keys and webhook ids');
is( $node->safe_psql(
		'postgres',
		"SELECT purged, last_purge_at IS NOT NULL FROM idem_stats WHERE datname = 'postgres'"),
	'40|t', 'idem_stats counts the rows it purged and its last purge');
is($node->safe_psql('postgres', 'SELECT count(*) FROM public.decoy_calls'),
	'0', 'the decoy was never called');
unlike(slurp_file($node->logfile, $log_offset), qr/ERROR:  42725/,
	'and no pass failed on an ambiguous function');

$node->stop;
done_testing();
