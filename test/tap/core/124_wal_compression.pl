# idem.wal_compression: the full-page images that idem's own writes log are
# compressed as that setting says (by default lz4, where the server has
# it), while wal_compression keeps governing every other write, in the same
# transaction too.  Shown by decoding the WAL with pg_waldump:
#   - after a checkpoint, the images of idem.keys and its primary key carry
#     idem's method, those of the payment's ledger none (wal_compression off);
#   - inherit leaves idem's images to wal_compression; a method set for idem
#     differs from wal_compression's where both are set;
#   - the purge's deletes and the pages its sweep logs for hint bits (the
#     node logs hints, as with checksums) follow idem's, and a purge puts
#     wal_compression back too;
#   - a write that fails halfway (a unique index a DBA added) puts
#     wal_compression back, also under a savepoint that catches the error;
#   - a crash right after compressed images: recovery replays them and every
#     key is found again through the primary key; those reads, the first of
#     the rows, log their pages for hint bits with idem's method too.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

# wal_log_hints: reads log pages too, as with data checksums (initdb's
# default from 18 on)
my $node = IdemTest::idem_node('walc', "autovacuum = off\nwal_log_hints = on\n");
sub sql { return $node->safe_psql('postgres', shift) }

sql('CREATE EXTENSION idem');
sql('CREATE TABLE ledger (id bigserial PRIMARY KEY, k text NOT NULL)');
# a transaction that writes, whose commit flushes the WAL before it (one
# that only takes an xid, as txid_current(), commits without a flush)
sql('CREATE TABLE flush_mark (n int)');

# The default: lz4 where this server was built with it, else zstd, else
# inherit
my %methods = map { $_ => 1 } split /,/,
  sql(q{SELECT array_to_string(enumvals, ',') FROM pg_settings WHERE name = 'wal_compression'});
my $best = $methods{lz4} ? 'lz4' : $methods{zstd} ? 'zstd' : 'inherit';
is(sql('SHOW idem.wal_compression'), $best, "idem.wal_compression defaults to $best");
is(sql('SHOW wal_compression'), 'off', 'wal_compression is off');

# pg_waldump names a relation tablespace/database/filenode
my $db = sql(q{SELECT oid FROM pg_database WHERE datname = 'postgres'});
my %part;
for my $rel (qw(idem.keys idem.keys_pkey idem.webhooks idem.webhooks_pkey ledger ledger_pkey))
{
	$part{ "1663/$db/" . sql("SELECT pg_relation_filenode('$rel')") } = $rel;
}

# The page images logged while $work runs after a checkpoint, as
# "relation method" for each (method none: not compressed), counted, and as
# "relation hint" for those of records that set hint bits.  An image under
# 1 kB that is not compressed is left out: PostgreSQL logs an image as it
# is when compressing it saves too little (pglz: under a quarter).
sub images
{
	my ($work) = @_;
	sql('CHECKPOINT');
	my $l0 = sql('SELECT pg_current_wal_insert_lsn()');
	$work->();
	my $l1 = sql('SELECT pg_current_wal_insert_lsn()');
	# a record past the end, flushed, for pg_waldump to stop at
	sql('INSERT INTO flush_mark VALUES (1)');
	my ($out, $err) = run_command([ 'pg_waldump', '-b', '-p', $node->data_dir . '/pg_wal',
		'-s', $l0, '-e', $l1 ]);
	die "pg_waldump: $err" if $err ne '';
	my (%seen, $desc);
	for my $line (split /\n/, $out)
	{
		$desc = $1 if $line =~ /^rmgr: .* desc: (\S+)/;
		next unless $line =~ m{blkref #\d+: rel (\d+/\d+/\d+) fork main blk \d+ \(FPW\); hole: offset: \d+, length: (\d+)(.*)};
		my ($rel, $hole, $rest) = ($1, $2, $3);
		next unless exists $part{$rel};
		my $method = $rest =~ /method: (\w+)/ ? $1 : 'none';
		next if $method eq 'none' && 8192 - $hole < 1024;
		$seen{"$part{$rel} $method"}++;
		$seen{"$part{$rel} hint"}++ if $desc eq 'FPI_FOR_HINT';
	}
	return \%seen;
}

# The methods seen for relation $rel in $seen, joined
sub methods_of
{
	my ($seen, $rel) = @_;
	return join ',', sort grep { $_ ne 'hint' } map { (split / /)[1] } grep { (split / /)[0] eq $rel } keys %$seen;
}

# n one-statement payments of new keys (as doc/usage.md), from key $from on
sub payments
{
	my ($from, $n) = @_;
	for my $i ($from .. $from + $n - 1)
	{
		sql(qq{WITH c AS (SELECT * FROM idem_claim('pay-$i')),
		            pay AS (INSERT INTO ledger (k) SELECT 'pay-$i' FROM c WHERE c.status = 'claimed'
		                    RETURNING id, idem_complete('pay-$i', jsonb_build_object('charge', id)))
		       SELECT c.status FROM c});
	}
}

# Enough keys for a primary key and a ledger of several pages each
sql(q{SELECT count(idem_claim('load-' || i)), count(idem_complete('load-' || i)) FROM generate_series(1, 5000) i});
sql(q{INSERT INTO ledger (k) SELECT 'load-' || i FROM generate_series(1, 5000) i});
my $next = 1;

# --- the default -------------------------------------------------------------

SKIP:
{
	skip 'this server has no compression method but pglz', 3 if $best eq 'inherit';
	my $seen = images(sub { payments($next, 30) });
	$next += 30;
	is(methods_of($seen, 'idem.keys_pkey'), $best, "idem's primary key: images in $best");
	is(methods_of($seen, 'idem.keys'), $best, "idem's table: images in $best");
	is(methods_of($seen, 'ledger') . ' ' . methods_of($seen, 'ledger_pkey'), 'none none',
		'the ledger, written in the same statements: images not compressed');
}

# --- inherit, and a method of idem's beside wal_compression's -----------------

# set <name> <value>: in postgresql.auto.conf, then reloaded
sub set
{
	my ($name, $value) = @_;
	sql("ALTER SYSTEM SET $name = '$value'");
	sql('SELECT pg_reload_conf()');
	$node->poll_query_until('postgres', "SELECT current_setting('$name') = '$value'")
	  or die "$name is not $value after a reload";
}

set('idem.wal_compression', 'inherit');
my $seen = images(sub { payments($next, 30) });
$next += 30;
is(methods_of($seen, 'idem.keys_pkey') . ' ' . methods_of($seen, 'ledger'), 'none none',
	'inherit, wal_compression off: no image compressed');

set('wal_compression', 'pglz');
$seen = images(sub { payments($next, 30) });
$next += 30;
is(methods_of($seen, 'idem.keys_pkey') . ' ' . methods_of($seen, 'ledger'), 'pglz pglz',
	'inherit, wal_compression pglz: both pglz');

set('idem.wal_compression', 'off');
$seen = images(sub { payments($next, 30) });
$next += 30;
is(methods_of($seen, 'idem.keys_pkey') . ' ' . methods_of($seen, 'ledger'), 'none pglz',
	"off: idem's images not compressed, the ledger's in pglz");

set('wal_compression', 'off');
set('idem.wal_compression', 'pglz');
$seen = images(sub { payments($next, 30) });
$next += 30;
is(methods_of($seen, 'idem.keys_pkey') . ' ' . methods_of($seen, 'ledger'), 'pglz none',
	"pglz: idem's images in pglz, the ledger's not compressed");

# zstd, the default before 1.7, where the server has it
SKIP:
{
	skip 'this server has no zstd', 1 unless $methods{zstd};
	set('idem.wal_compression', 'zstd');
	$seen = images(sub { payments($next, 30) });
	$next += 30;
	is(methods_of($seen, 'idem.keys_pkey') . ' ' . methods_of($seen, 'ledger'), 'zstd none',
		"zstd: idem's images in zstd, the ledger's not compressed");
	set('idem.wal_compression', 'pglz');
}

# A user may not set it: it is the DBA's, as wal_compression is
sql(q{CREATE ROLE app LOGIN; GRANT USAGE ON SCHEMA idem TO app});
my ($rc, $out, $err) = $node->psql('postgres', q{SET idem.wal_compression = 'off'},
	extra_params => [ '-U', 'app' ]);
like($err, qr/permission denied to set parameter "idem.wal_compression"/,
	'a user without the privilege cannot set it');

# --- webhooks and the purge --------------------------------------------------

# ids already seen, so that new ones land on pages that exist
sql(q{SELECT count(idem_webhook('stripe', 'old_' || i)) FROM generate_series(1, 5000) i});
$seen = images(sub {
	sql(q{SELECT count(idem_webhook('stripe', 'evt_' || i, ttl => '1 s')) FROM generate_series(1, 3000) i});
});
is(methods_of($seen, 'idem.webhooks_pkey') . ' ' . methods_of($seen, 'idem.webhooks'), 'pglz pglz',
	'webhook ids: images in pglz');
usleep(1_200_000);
$seen = images(sub {
	is(sql('SELECT idem_purge(); SHOW wal_compression'), "3000\noff",
		'the purge deletes the expired ids, and puts wal_compression back');
});
is(methods_of($seen, 'idem.webhooks') . ' ' . methods_of($seen, 'idem.keys'), 'pglz pglz',
	"the purge's images of idem.webhooks and idem.keys in pglz");
ok($seen->{'idem.webhooks hint'} && $seen->{'idem.keys hint'},
	'among them, pages its sweep logged for hint bits');

# --- a write that fails halfway ------------------------------------------------

# Two keys completed with the same response: the second insert into this
# index fails after its heap insert, inside idem's write.
sql('CREATE UNIQUE INDEX keys_response_uniq ON idem.keys (response)');
($rc, $out, $err) = $node->psql('postgres', q{
	BEGIN;
	SELECT idem_claim('twin-1'), idem_complete('twin-1', '{"same": 1}');
	SELECT idem_claim('twin-2'), idem_complete('twin-2', '{"same": 1}');
	ROLLBACK;
	SHOW wal_compression;
	}, on_error_stop => 0);
like($err, qr/duplicate key value violates unique constraint "keys_response_uniq"/,
	'the second insert fails in the index');
is((split /\n/, $out)[-1], 'off', 'wal_compression is off again in the session after the error');
is(sql(q{DO $$
	BEGIN
		PERFORM idem_claim('twin-3'), idem_complete('twin-3', '{"same": 3}');
		BEGIN
			PERFORM idem_claim('twin-4'), idem_complete('twin-4', '{"same": 3}');
		EXCEPTION WHEN unique_violation THEN
			NULL;
		END;
		IF current_setting('wal_compression') <> 'off' THEN
			RAISE 'wal_compression is %', current_setting('wal_compression');
		END IF;
	END $$;
	SELECT string_agg(key, ',' ORDER BY key) FROM idem.keys WHERE key LIKE 'twin-%'}),
	'twin-3', 'caught under a savepoint: off again in the transaction, the first key kept');
sql('DROP INDEX idem.keys_response_uniq');

# --- a crash after compressed images -------------------------------------------

$seen = images(sub { payments($next, 200) });
is(methods_of($seen, 'idem.keys_pkey'), 'pglz', 'two hundred payments after a checkpoint, images in pglz');
$node->stop('immediate');
$node->start;
# set in postgresql.auto.conf before idem was loaded: kept by the library
is(sql('SHOW idem.wal_compression'), 'pglz', 'after a restart the setting holds');
$seen = images(sub {
	is(sql(qq{SELECT count(*) FROM generate_series($next, $next + 199) i,
	                 idem_claim('pay-' || i) c WHERE c.status = 'completed'}),
		200, 'after the crash, each of them replays through the primary key');
});
is(sql(q{SELECT count(*) FROM ledger WHERE k LIKE 'pay-%'}), $next + 199,
	'and each payment was booked once');
# the replays are the first reads of those rows: they set hint bits
is(methods_of($seen, 'idem.keys'), 'pglz', 'the pages the replays logged, in pglz');
ok($seen->{'idem.keys hint'}, 'among them, pages logged for hint bits');
$next += 200;

SKIP:
{
	skip 'this server has no compression method but pglz', 2 if $best eq 'inherit';
	sql("ALTER SYSTEM RESET idem.wal_compression");
	sql('SELECT pg_reload_conf()');
	$node->poll_query_until('postgres', "SELECT current_setting('idem.wal_compression') = '$best'")
	  or die "idem.wal_compression is not back to $best";
	$seen = images(sub { payments($next, 200) });
	is(methods_of($seen, 'idem.keys_pkey'), $best, "two hundred more, images in $best");
	$node->stop('immediate');
	$node->start;
	is(sql(qq{SELECT count(*) FROM generate_series($next, $next + 199) i,
	                 idem_claim('pay-' || i) c WHERE c.status = 'completed'}),
		200, 'after the crash, each of them replays');
}

$node->stop;
done_testing();
