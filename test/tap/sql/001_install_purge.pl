# The SQL edition (idem_sql), on a server that has none of idem's files
# (make test on a -sql flavour installs idem_sql alone into its tree), with
# nothing preloaded: installed by the database's owner, not a superuser;
# idem_purge deletes expired rows, at most batch_size, skips a processing
# key whose lease is live and a row that a transaction holds (a prepared
# one here) without waiting for it; the counters raise 55000 naming the C
# edition.  For the SQL edition's runs only (test/run.sh).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('sql_edition');
$node->init;
$node->append_conf('postgresql.conf', 'max_prepared_transactions = 2');
$node->start;

my ($rc, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION idem');
isnt($rc, 0, 'the C edition is not installed on this server');

$node->safe_psql('postgres', 'CREATE ROLE owner LOGIN; CREATE DATABASE shop OWNER owner');
$node->safe_psql('shop', 'CREATE EXTENSION idem_sql CASCADE', extra_params => [ '-U', 'owner' ]);
is($node->safe_psql('shop', "SELECT extversion FROM pg_extension WHERE extname = 'idem_sql'"),
	'1.7', "the database's owner installs idem_sql");

# expired: 3 completed keys and 2 webhook records; to keep: a live key, a
# processing key with a live lease, a live webhook record
my $rows = q{
	INSERT INTO idem.keys (scope, key, state, token, attempt, lease_until, created_at, expires_at)
	SELECT '', 'old-' || i, 'completed', i, 1, NULL, now() - interval '2 days', now() - interval '1 day'
	  FROM generate_series(1, 3) i;
	INSERT INTO idem.keys (scope, key, state, token, attempt, lease_until, created_at, expires_at)
	VALUES ('', 'live', 'completed', 10, 1, NULL, now(), now() + interval '1 day'),
	       ('', 'leased', 'processing', 11, 1, now() + interval '1 hour', now(), now() - interval '1 s');
	INSERT INTO idem.webhooks (source, event_id, received_at, expires_at)
	VALUES ('s', 'old-1', now(), now() - interval '1 s'), ('s', 'old-2', now(), now() - interval '1 s'),
	       ('s', 'live', now(), now() + interval '1 day');
};
$node->safe_psql('shop', $rows, extra_params => [ '-U', 'owner' ]);
is($node->safe_psql('shop', 'SELECT * FROM idem.purge_backlog() ORDER BY 1', extra_params => [ '-U', 'owner' ]) =~ s/\|[^|\n]*$//mgr,
	"keys|3\nwebhooks|2", 'idem.purge_backlog counts what a purge could delete');

# a transaction (prepared, so it outlives its session) holds one expired key
$node->safe_psql('shop', q{
	BEGIN;
	SELECT 1 FROM idem.keys WHERE key = 'old-1' FOR UPDATE;
	PREPARE TRANSACTION 'holds_old_1';
});
is($node->safe_psql('shop', 'SET lock_timeout = 5000; SELECT idem_purge(1), idem_purge(3), idem_purge()',
		extra_params => [ '-U', 'owner' ]),
	'1|3|0', 'batches: keys first, then webhooks; the held row is skipped, not waited for');
is($node->safe_psql('shop', q{SELECT string_agg(key, ',' ORDER BY key) FROM idem.keys}),
	'leased,live,old-1', 'the held key and the leased one stay');
$node->safe_psql('shop', "ROLLBACK PREPARED 'holds_old_1'");
is($node->safe_psql('shop', 'SELECT idem_purge()', extra_params => [ '-U', 'owner' ]),
	'1', 'once released, the next purge deletes it');
is($node->safe_psql('shop', q{SELECT string_agg(event_id, ',') FROM idem.webhooks}), 'live', 'live webhook record kept');

($rc, $out, $err) = $node->psql('shop', '\set VERBOSITY verbose
SELECT * FROM idem_stats', extra_params => [ '-U', 'owner' ]);
like($err, qr/ERROR:  55000: idem counters are not available/, 'idem_stats raises 55000');
like($err, qr/HINT:  .*C edition.*shared_preload_libraries/, 'its hint names the C edition and preload');
($rc, $out, $err) = $node->psql('shop', 'SELECT idem_purge(0)', extra_params => [ '-U', 'owner' ]);
like($err, qr/batch_size must be positive/, 'a batch size of 0 is refused');

# The time settings are seconds, as in the C edition: across the change to
# daylight saving time of 2027-03-14 in New York, '1d' is 86400 seconds
# (13:00 EDT the next day), not a calendar day (12:00 EDT); idem_claim's
# default ttl and idem_webhook's likewise.
is($node->safe_psql('shop', q{SET timezone = 'America/New_York'; SET idem.ttl = '1d';
SET idem.webhook_ttl = '7d'; SET idem.lease = '2h';
SELECT '2027-03-13 12:00-05'::timestamptz + idem.setting_ttl(),
       '2027-03-13 12:00-05'::timestamptz + idem.setting_interval('idem.webhook_ttl', interval '168 hours'),
       idem.setting_lease()}),
	'2027-03-14 13:00:00-04|2027-03-20 13:00:00-04|02:00:00', 'time settings are whole seconds');
$node->safe_psql('shop', q{SET timezone = 'America/New_York'; SET idem.ttl = '1d'; SET idem.webhook_ttl = '7d';
SELECT idem_claim('dst-1'); SELECT idem_webhook('dst', 'evt-1')});
is($node->safe_psql('shop', q{SELECT extract(epoch FROM expires_at) - extract(epoch FROM created_at) FROM idem.keys WHERE key = 'dst-1'
UNION ALL SELECT extract(epoch FROM expires_at) - extract(epoch FROM received_at) FROM idem.webhooks WHERE event_id = 'evt-1'}),
	"86400.000000\n604800.000000", 'a claim and a webhook record at the defaults shown by the C library keep 86400 and 604800 seconds');

$node->stop;
done_testing();
