# Claims during a large idem_keys_import: the database's token sequence
# is at 100 and the import carries 8000 keys of another database with
# tokens 1101 to 9100, while three clients claim new keys as fast as they
# can, from the moment the import's statement is seen running until after
# it has ended.  No claim may draw an imported token: the import locks the
# sequence first, so a claim made while it checks and writes waits for its
# commit and draws a token past 9100.  (The 1000 tokens below the import's
# leave room for the claims made in the instant before its lock: a few
# dozen.)  Under
# 1.6, which locked the sequence after writing every row, and with the
# checks made before the lock, claims drew hundreds of imported tokens.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;
use Time::HiRes qw(usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $node = idem_node('import_storm');
my $dir = PostgreSQL::Test::Utils::tempdir('storm');
my $port = $node->port;
my $host = $node->host;

$node->safe_psql('postgres', q{
CREATE EXTENSION idem;
CREATE TABLE moving AS
SELECT jsonb_agg(jsonb_build_object(
           'scope', 'moved', 'key', 'k-' || t, 'state', 'processing', 'token', t,
           'attempt', 1, 'fingerprint', '0a0b', 'lease_until', now() + interval '1 hour',
           'checkpoint', 'charged', 'checkpoint_data', jsonb_build_object('charge', 'ch_' || t),
           'created_at', now(), 'expires_at', now() + interval '1 day') ORDER BY t) AS keys
FROM generate_series(1101, 9100) t;
SELECT setval('idem.token_seq', 100);
});

sub client
{
	return DBI->connect("dbi:Pg:host=$host;port=$port;dbname=postgres", 'postgres', '',
		{ AutoCommit => 1, RaiseError => 1, PrintError => 0, AutoInactiveDestroy => 1 });
}

# Client 1 imports; client 2 watches for the import's statement to run,
# then lets the claimers go; clients 3 to 5 claim new keys one by one until
# the import has ended, and a few more
my ($started, $done) = ("$dir/started", "$dir/imported");
sub touch { open(my $fh, '>', shift) or die "$!"; close $fh; }
my @out = fork_storm(
	5, $dir,
	sub {
		my ($i, $dbh) = @_;
		if ($i == 1)
		{
			usleep(200_000);
			my ($n) = $dbh->selectrow_array(
				q{SELECT idem_keys_import(keys) FROM moving /* the import */});
			touch($done);
			return "imported $n";
		}
		if ($i == 2)
		{
			my $seen = 0;
			until ($seen || -e $done)
			{
				($seen) = $dbh->selectrow_array(q{SELECT count(*) FROM pg_stat_activity
					WHERE query LIKE '%/* the import */%' AND state = 'active' AND pid <> pg_backend_pid()});
			}
			touch($started);
			return $seen ? 'seen' : 'missed';
		}
		usleep(100) until -e $started;
		my ($claims, $after) = (0, 0);
		while ($after < 20)
		{
			my ($status) = $dbh->selectrow_array(
				q{SELECT status FROM idem_claim($1, scope => 'here', lease => '1 hour')},
				undef, "c-$i-$claims");
			die "claim c-$i-$claims: $status" unless $status eq 'claimed';
			$claims++;
			$after++ if -e $done;
		}
		return $claims;
	},
	sub { client() });

is($out[0], 'imported 8000', 'the import wrote 8000 keys');
is($out[1], 'seen', 'the claims began once the import was running');
my $claims = 0;
$claims += $_ // 0 for @out[ 2 .. 4 ];
# (each client's first claim began while the import ran, and may have
# waited for its commit; on a loaded machine none ends before it)
cmp_ok($claims, '>=', 60, "the other clients claimed $claims keys around it");
is( $node->safe_psql('postgres', q{SELECT count(*) FROM idem.keys WHERE scope = 'here'}),
	$claims, 'every claim wrote its key');
note('claims before the import took its lock: ' . $node->safe_psql('postgres',
	q{SELECT count(*) FROM idem.keys WHERE scope = 'here' AND token < 1101}));
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM (SELECT token FROM idem.keys GROUP BY token HAVING count(*) > 1) t}),
	'0', 'no token is held by two keys');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM idem.keys WHERE scope = 'here' AND token BETWEEN 1101 AND 9100}),
	'0', 'no claim drew a token of the imported range');
is( $node->safe_psql('postgres', q{
SELECT count(*), min(token), max(token) FROM idem.keys WHERE scope = 'moved'}),
	'8000|1101|9100', 'the imported keys are there with their tokens');

$node->stop;
done_testing();
