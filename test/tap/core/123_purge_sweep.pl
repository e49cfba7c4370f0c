# The purge without an index on expires_at (1.6): it sweeps the tables in
# physical order and skips the ranges that its expiry map in shared memory
# knows hold nothing purgeable.  Each promise of the map's protocol
# (src/store_expiry.c) is shown by a case that would leave an expired row
# behind if it were broken:
#   - a purge with nothing to delete reads no page, once a first one has
#     read the table; after a restart the map is empty and it reads all;
#   - a key idem writes into a range the map knows is noted;
#   - a row written by a transaction still in progress while its range is
#     swept counts, and is purged once it expires; so does a row written
#     after the sweep read its page, before it set the range's bound (a
#     pause that assert builds offer, idem.sweep_pause);
#   - a purge that rolls back (whole, or to a savepoint) forgets what it
#     learnt: the rows it deleted come back and the next purge deletes them;
#   - a write without idem (UPDATE, COPY) fires the tables' trigger, and a
#     trigger disabled then enabled again makes the map forget the table;
#   - purges running among claims that expire within a second leave no
#     expired row behind.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $node = IdemTest::idem_node('sweep', "autovacuum = off\n");
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

sub sql { return $node->safe_psql('postgres', shift) }

# Pages of idem.keys read (from disk or shared buffers) so far, as the
# statistics have them once the sessions that read have ended
sub keys_pages_read
{
	return sql(q{SELECT heap_blks_read + heap_blks_hit FROM pg_statio_all_tables
	             WHERE relid = 'idem.keys'::regclass});
}

# The pages a purge reads of idem.keys, and what it returns
sub purge_reading
{
	my $before = keys_pages_read();
	my $purged = sql('SELECT idem_purge()');
	return ($purged, keys_pages_read() - $before);
}

# A key expires when both its ttl and its lease have run out: the short
# keys below set both.
# Thirty thousand completed keys: about 900 pages, four ranges of the map
sql(q{SELECT count(idem_claim('k-' || i)), count(idem_complete('k-' || i, '{"charge": "ch"}'))
      FROM generate_series(1, 30000) i});
my $pages = sql(q{SELECT pg_relation_size('idem.keys') / 8192});
cmp_ok($pages, '>', 512, "idem.keys spans several ranges of the map ($pages pages)");

my ($purged, $read) = purge_reading();
is($purged, 0, 'nothing has expired');
cmp_ok($read, '>=', $pages, 'the first purge reads every page of idem.keys');
($purged, $read) = purge_reading();
is("$purged $read", '0 0', 'the second reads none: the map knows nothing expires before tomorrow');

# idem.purge_backlog(), for the exporter, reads what the purge would
my $backlog_q = q{SELECT string_agg(concat_ws(' ', "table", expired, oldest IS NULL), ', ' ORDER BY 1)
                  FROM idem.purge_backlog()};
my $before = keys_pages_read();
is(sql($backlog_q), 'keys 0 t, webhooks 0 t', 'the backlog is empty');
is(keys_pages_read() - $before, 0, 'and reading it read no page of idem.keys');

# --- a key idem writes is noted ---

sql(q{SELECT idem_claim('short-1', lease => '1 s', ttl => '1 s'), idem_complete('short-1')});
usleep(1_200_000);
$before = keys_pages_read();
is(sql($backlog_q), 'keys 1 f, webhooks 0 t', 'once expired, the key is the backlog');
cmp_ok(keys_pages_read() - $before, '<=', 256, 'read from its range only');
($purged, $read) = purge_reading();
is($purged, 1, 'a key written into a known range expires and is purged');
cmp_ok($read, '<=', 256, "reading its range only ($read pages)");
is(sql(q{SELECT count(*) FROM idem.keys WHERE key = 'short-1'}), 0, 'it is gone');

# --- a write without idem makes the map forget the table ---

sql(q{UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key IN ('k-5', 'k-29000')});
($purged, $read) = purge_reading();
is($purged, 2, 'keys expired by an UPDATE, which idem does not see, are purged');
cmp_ok($read, '>=', $pages, 'the UPDATE fired the trigger: the purge read the whole table again');
is((purge_reading())[1], 0, 'and the next one reads nothing');

sql(q{SELECT idem_webhook('stripe', 'evt-' || i) FROM generate_series(1, 50) i});
sql('SELECT idem_purge()');
sql(q{COPY idem.webhooks FROM PROGRAM 'echo "stripe	evt-copied	2026-01-01 00:00:00+00	2026-01-01 00:00:01+00"'});
is(sql('SELECT idem_purge()'), 1, 'a delivery loaded by COPY, expired, is purged from idem.webhooks');

# --- a row being written while its range is swept ---

my $writer = $node->background_psql('postgres');
$writer->query_safe(q{BEGIN;
SELECT idem_claim('inflight', lease => '2 s', ttl => '2 s'), idem_complete('inflight');});
# the UPDATE makes the purge sweep every range, the in-flight row's too
sql(q{UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key = 'k-7'});
is(sql('SELECT idem_purge()'), 1, 'a purge sweeps while a transaction writes a key');
$writer->query_safe('COMMIT');
$writer->quit;
usleep(2_200_000);
is(sql('SELECT idem_purge()'), 1,
	'the key it saw being written is purged once committed and expired');

# --- a row written into a range while a sweep holds it ---

# The sweep pauses (idem.sweep_pause, assert builds) between reading the
# range and setting what it learnt; a key written then is on a page the
# sweep has passed, and only its note tells the range's bound about it.
SKIP:
{
	skip 'idem.sweep_pause exists only in builds of idem with assertions', 4
	  unless sql(q{SELECT count(*) FROM pg_settings WHERE name = 'idem.sweep_pause'});
	# an expired key makes the sweep read the table's last range
	sql(q{SELECT idem_claim('held-1', lease => '1 s', ttl => '1 s'), idem_complete('held-1')});
	my $range_q = q{SELECT (ctid::text::point)[0]::int / 256 FROM idem.keys WHERE key = };
	my $range = sql($range_q . q{'held-1'});
	usleep(1_200_000);
	my $sweeper = $node->background_psql('postgres');
	$sweeper->query_until(qr/sweeping/, q{SET idem.sweep_pause = '5s';
\echo sweeping
SELECT idem_purge();
});
	$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	                                       WHERE wait_event = 'Extension' AND query LIKE 'SELECT idem_purge%'})
	  or die 'the sweep did not pause';
	sql(q{SELECT idem_claim('held-2', lease => '1 s', ttl => '1 s'), idem_complete('held-2')});
	is(sql($range_q . q{'held-2'}), $range, 'a key is written into the range a paused sweep holds');
	$sweeper->quit;
	is(sql(q{SELECT string_agg(key, ' ') FROM idem.keys WHERE key LIKE 'held-%'}), 'held-2',
		'the sweep deleted the expired key it read, not the one written after');
	usleep(1_200_000);
	($purged, $read) = purge_reading();
	is($purged, 1, 'once expired, the key written while its range was swept is purged: its note counted');
	cmp_ok($read, '<=', 256, 'reading that range only');
}

# --- a purge that rolls back ---

sql(q{UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key IN ('k-10', 'k-11', 'k-12')});
is( sql(q{BEGIN; SELECT idem_purge(); ROLLBACK; SELECT idem_purge();}),
	"3\n3", 'a purge rolled back forgets what it learnt: the next deletes the same rows');
sql(q{UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key IN ('k-13', 'k-14')});
is( sql(q{BEGIN; SAVEPOINT s; SELECT idem_purge(); ROLLBACK TO s; COMMIT; SELECT idem_purge();}),
	"2\n2", 'and so does a purge rolled back to a savepoint');

# --- the trigger disabled, then enabled again ---

sql(q{ALTER TABLE idem.keys DISABLE TRIGGER keys_outside_write;
UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key = 'k-15';
ALTER TABLE idem.keys ENABLE ALWAYS TRIGGER keys_outside_write;});
is(sql('SELECT idem_purge()'), 1,
	'a key expired while the trigger was disabled is purged once it is enabled again');

# --- after a restart the map is empty ---

$node->restart;
sql(q{UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key = 'k-16'});
$node->restart;
($purged, $read) = purge_reading();
is($purged, 1, 'after a restart a purge finds what expired before it');
cmp_ok($read, '>=', $pages, 'reading the whole table');

# --- purges among claims that expire at once ---

my $claims = << 'EOF';
\set k random(1, 1000000000000)
SELECT idem_claim('storm-' || :client_id || '-' || :k, lease => '1 s', ttl => '1 s'),
       idem_complete('storm-' || :client_id || '-' || :k);
EOF
my $purges = << 'EOF';
SELECT idem_purge(50);
EOF
$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --time=6',
	0, [qr/processed: [1-9]/], [qr/^$/],
	'claims and purges run together',
	{ 'sweep-claims@9' => $claims, 'sweep-purges@1' => $purges });
usleep(1_100_000);
for (1 .. 100)
{
	last if sql('SELECT idem_purge()') == 0;
}
is( sql(q{SELECT count(*) FROM idem.keys WHERE expires_at < now() AND key LIKE 'storm-%'}),
	0, 'once they expire, purges leave none of them behind');
cmp_ok(sql(q{SELECT count(*) FROM idem.keys WHERE key LIKE 'k-%'}), '==', 30000 - 10,
	'and every live key stays');

done_testing();
