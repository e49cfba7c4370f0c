# Counters: what moves them, one row per database, reset and who may do
# what with them.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stats');
$node->init;
# The worker is paused so that only this test moves the counters.
$node->append_conf(
	'postgresql.conf', q(
shared_preload_libraries = 'idem'
idem.database = 'postgres'
idem.purge_interval = 0
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

my $cols =
  'claimed, completed, failed, replayed, in_progress, mismatched, '
  . 'webhooks_new, webhooks_duplicate, purged, last_purge_at IS NOT NULL';

# The counters of one database, as "claimed|completed|...|t"
sub counters
{
	my ($db) = @_;
	return $node->safe_psql('postgres',
		"SELECT $cols FROM idem_stats WHERE datname = '$db'");
}

is($node->safe_psql('postgres', 'SELECT count(*) FROM idem_stats'),
	'0', 'no row before anything was counted');

# Each line moves one counter; the comments say which.
$node->safe_psql(
	'postgres', q(
	-- claimed, completed
	BEGIN;
	SELECT idem_claim('k1', '\x01'::bytea);
	SELECT idem_complete('k1', '{"charge": "ch_1"}');
	COMMIT;
	-- replayed
	SELECT idem_claim('k1', '\x01'::bytea);
	-- mismatched
	SELECT idem_claim('k1', '\x02'::bytea);
	-- claimed (committed processing), then in_progress
	SELECT idem_claim('k2', lease => '1 h');
	SELECT idem_claim('k2');
	-- claimed, failed; then replayed
	BEGIN;
	SELECT idem_claim('k3');
	SELECT idem_fail('k3', '{"code": "card_declined"}', retryable => false);
	COMMIT;
	SELECT idem_claim('k3');
	-- claimed, although rolled back: counters are not transactional
	BEGIN;
	SELECT idem_claim('k4');
	ROLLBACK;
	-- webhooks_new, webhooks_duplicate
	SELECT idem_webhook('stripe', 'evt_1');
	SELECT idem_webhook('stripe', 'evt_1');
));
is(counters('postgres'), '4|1|1|2|1|1|1|1|0|f',
	'claims, finishes, replays, in-progress, mismatches and webhooks are counted');

$node->safe_psql(
	'postgres', q(
	UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key IN ('k1', 'k3');
	SELECT idem_purge();
));
is(counters('postgres'), '4|1|1|2|1|1|1|1|2|t',
	'a purge counts the rows it deleted and sets last_purge_at');
is( $node->safe_psql(
		'postgres',
		"SELECT last_purge_at BETWEEN now() - interval '1 min' AND now() FROM idem_stats WHERE datname = 'postgres'"
	),
	't',
	'last_purge_at is the time of the purge');

# --- One row per database ---

$node->safe_psql('postgres', 'CREATE DATABASE shop2');
$node->safe_psql(
	'shop2', q(
	CREATE EXTENSION idem;
	SELECT idem_claim('k1');
	SELECT idem_webhook('stripe', 'evt_1');
));
is(counters('shop2'), '1|0|0|0|0|0|1|0|0|f', 'another database has counters of its own');
is(counters('postgres'), '4|1|1|2|1|1|1|1|2|t', 'which do not touch the first one');
is( $node->safe_psql(
		'shop2',
		"SELECT array_agg(datname ORDER BY datname) FROM idem_stats"),
	'{postgres,shop2}',
	'every database shows from any database');

# --- Who may read and reset ---

$node->safe_psql(
	'postgres', q(
	CREATE ROLE app LOGIN;
	CREATE ROLE monitor LOGIN;
	GRANT SELECT ON idem_stats TO monitor;
	GRANT EXECUTE ON FUNCTION idem.stats_1_3() TO monitor;
	GRANT USAGE ON SCHEMA idem TO monitor;
	GRANT SELECT (state, lease_until, created_at, completed_at, expires_at) ON idem.keys TO monitor;
	GRANT SELECT (received_at, expires_at) ON idem.webhooks TO monitor;
));

my ($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM idem_stats',
	extra_params => [ '-U', 'app' ]);
like($err, qr/permission denied for view idem_stats/, 'PUBLIC cannot read the counters');

is( $node->safe_psql(
		'postgres', "SELECT claimed FROM idem_stats WHERE datname = 'postgres'",
		extra_params => [ '-U', 'monitor' ]),
	'4',
	'a monitoring role with the documented grants reads them');
is( $node->safe_psql(
		'postgres', q(
	SELECT count(*) FILTER (WHERE lease_until >  now()) AS in_flight,
	       count(*) FILTER (WHERE lease_until <= now()) AS abandoned
	FROM idem.keys WHERE state = 'processing';
	SELECT (SELECT now() - min(expires_at) FROM idem.keys     WHERE expires_at < now()) IS NULL,
	       (SELECT now() - min(expires_at) FROM idem.webhooks WHERE expires_at < now()) IS NULL;),
		extra_params => [ '-U', 'monitor' ]),
	"1|0\nt|t",
	'and runs the monitoring queries on the tables');
# 1.4 keeps the response of idem_http_respond as sent, in body
for my $column ('response', 'body')
{
	($ret, $out, $err) = $node->psql('postgres', "SELECT $column FROM idem.keys",
		extra_params => [ '-U', 'monitor' ]);
	like($err, qr/permission denied for table keys/, "but cannot read the stored responses ($column)");
}

($ret, $out, $err) = $node->psql('postgres', 'SELECT idem_stats_reset()',
	extra_params => [ '-U', 'monitor' ]);
like($err, qr/permission denied for function idem_stats_reset/,
	'a role without EXECUTE cannot reset');
is(counters('postgres'), '4|1|1|2|1|1|1|1|2|t', 'and nothing was reset');

# --- 1.3: takeovers and stale tokens ---

$node->safe_psql('postgres', q(
	-- taken over: a released attempt, then one whose lease ran out
	BEGIN;
	SELECT idem_claim('t1');
	SELECT idem_fail('t1', '{"error": "timeout"}');
	COMMIT;
	SELECT idem_claim('t1');
));
my $t2_first = $node->safe_psql('postgres',
	q(SELECT token FROM idem_claim('t2', lease => '1 ms')));
$node->safe_psql('postgres', q(SELECT pg_sleep(0.01); SELECT idem_claim('t2')));
# a stale token is refused, and counted although the error rolls back
($ret, $out, $err) = $node->psql('postgres',
	"SELECT idem_complete('t2', '{}', token => $t2_first)");
like($err, qr/does not hold key "t2"/, 'the first attempt\'s token is stale');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT idem_checkpoint('t2', 'late', token => $t2_first)");
is( $node->safe_psql('postgres',
		"SELECT claimed, taken_over, stale_tokens, webhooks_rejected FROM idem_stats WHERE datname = 'postgres'"),
	'8|2|2|0', 'takeovers and finishing calls refused for a stale token are counted');

# --- Reset ---

$node->safe_psql('postgres', 'DROP DATABASE shop2');
is( $node->safe_psql('postgres',
		'SELECT count(*) FROM idem_stats WHERE datname IS NULL'),
	'1', 'a dropped database keeps its row until the next reset');

$node->safe_psql('postgres', 'SELECT idem_stats_reset()');
is(counters('postgres'), '0|0|0|0|0|0|0|0|0|f',
	'a superuser resets the counters');
is($node->safe_psql('postgres', 'SELECT count(*) FROM idem_stats'),
	'1', 'the reset drops the row of the dropped database');

$node->safe_psql('postgres', 'GRANT EXECUTE ON FUNCTION idem_stats_reset() TO monitor');
$node->safe_psql('postgres', q(SELECT idem_claim('k5')));
$node->safe_psql('postgres', 'SELECT idem_stats_reset()',
	extra_params => [ '-U', 'monitor' ]);
is(counters('postgres'), '0|0|0|0|0|0|0|0|0|f', 'so does a role granted EXECUTE');

# --- The worker's passes show ---

$node->append_conf('postgresql.conf', "idem.purge_interval = '1s'");
$node->reload;
ok( $node->poll_query_until(
		'postgres',
		"SELECT last_purge_at IS NOT NULL FROM idem_stats WHERE datname = 'postgres'"),
	'the worker sets last_purge_at at each pass');

# --- After a restart the counters start again from zero ---

$node->safe_psql('postgres', q(SELECT idem_claim('k6')));
$node->restart;
is($node->safe_psql('postgres', "SELECT count(*) FROM idem_stats WHERE claimed > 0"),
	'0', 'counters live in shared memory only');

$node->stop;
done_testing();
