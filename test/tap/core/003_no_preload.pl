# Without shared_preload_libraries: every SQL function works, there is no
# worker, and the counters say how to get them.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('no_preload');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION idem');

is( $node->safe_psql(
		'postgres', q(
	BEGIN;
	SELECT status FROM idem_claim('np-1', '\x01'::bytea);
	SELECT idem_complete('np-1', '{"charge": "ch_1"}');
	COMMIT;
	SELECT status, response FROM idem_claim('np-1', '\x01'::bytea);
	SELECT status FROM idem_claim('np-1', '\x02'::bytea);
	SELECT idem_webhook('stripe', 'evt_1');
	SELECT idem_webhook('stripe', 'evt_1');)),
	qq(claimed\n\ncompleted|{"charge": "ch_1"}\nmismatch\nt\nf),
	'claims, completion, replay, mismatch and webhooks work');

is( $node->safe_psql(
		'postgres', q(
	SELECT idem_fingerprint('{"amount": 100}') = idem_fingerprint('{"amount": 100.00}'),
	       length(idem_key('a', 'b')), idem_payment_key('m1', 'o1', 10, 'USD') LIKE 'PAY_IDEM_%';)),
	't|64|t', 'fingerprints and keys work');

is( $node->safe_psql(
		'postgres', q(
	BEGIN;
	SELECT count(idem_claim('np-old-' || i)) FROM generate_series(1, 3) i;
	SELECT count(idem_complete('np-old-' || i)) FROM generate_series(1, 3) i;
	UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key LIKE 'np-old-%';
	COMMIT;
	SELECT idem_purge();)),
	"3\n3\n3", 'idem_purge() works by hand');

is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem purge %'"),
	'0', 'no purge launcher or worker runs');

my ($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM idem_stats',
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
isnt($ret, 0, 'idem_stats fails');
like($err, qr/ERROR:  55000: idem counters are not available/,
	'with object_not_in_prerequisite_state');
like($err, qr/HINT:  Add idem to shared_preload_libraries and restart the server\./,
	'and a hint that says what to do');

($ret, $out, $err) = $node->psql('postgres', 'SELECT idem_stats_reset()');
like($err, qr/HINT:  Add idem to shared_preload_libraries/, 'so does idem_stats_reset()');

$node->stop;
done_testing();
