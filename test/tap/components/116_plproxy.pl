# Sharding with PL/Proxy: a router database (contrib/plproxy/router.sql)
# in front of three shard clusters, each with idem and the business
# functions of contrib/plproxy/shard.sql.  A merchant's payments and keys
# live on the one shard hashtext(merchant) picks: a storm of retried
# payments through the router charges each key once, on that shard only; a
# two-phase attempt is claimed, checkpointed and settled through the
# router with its token; webhooks are deduplicated on the merchant's shard;
# each shard's own worker purges it.  Then one shard goes down (immediate
# shutdown) in the middle of a storm: only its merchants' calls fail, with
# PL/Proxy's error naming that shard, the others go on, and once it is back
# every acknowledged payment is there and replays, and no key was charged
# twice.  Last, with the ledgers' unique keys dropped, one merchant's
# partition moves to a fourth shard with its keys (contrib/plproxy/move.sql)
# under a storm of new orders and retries: no key is claimed or charged
# twice, and every acknowledged payment replays.
use strict;
use warnings;

use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;
use PayClients;

require_extension('plproxy', 'postgresql-NN-plproxy');

my $contrib = "$FindBin::RealBin/../../../contrib/plproxy";
my $nparts = 16;    # partitions of the cluster: a power of two
my $nshards = 3;

# --- Three shards and a router ---

# Shard $i: its database payments_$i with idem and the business schema;
# its purge worker cleans that database every second.
sub make_shard
{
	my ($i) = @_;
	my $node = idem_node("shard$i", qq(
idem.database = 'payments_$i'
idem.purge_interval = '1s'
max_connections = 40
));
	$node->safe_psql('postgres', "CREATE DATABASE payments_$i");
	$node->safe_psql("payments_$i", 'CREATE EXTENSION idem');
	$node->safe_psql("payments_$i", slurp_file("$contrib/shard.sql"));
	$node->safe_psql("payments_$i", slurp_file("$contrib/move.sql"));
	return $node;
}
my @shards = map { make_shard($_) } 0 .. $nshards - 1;

my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->append_conf('postgresql.conf', "max_connections = 40\n");
$router->start;

# Partition p is served by shard p mod 3: 6, 5 and 5 of the 16 partitions.
# Partitions of one shard share its connection string, and so one
# connection per router backend.  Each shard's database has a name of its
# own, which PL/Proxy's errors give.
my @parts = map {
	my $i = $_ % $nshards;
	"p$_ 'host=" . $shards[$i]->host . ' port=' . $shards[$i]->port . " dbname=payments_$i'"
} 0 .. $nparts - 1;
$router->safe_psql(
	'postgres', qq{
CREATE EXTENSION plproxy;
CREATE SERVER payments FOREIGN DATA WRAPPER plproxy
    OPTIONS (connection_lifetime '1800', @{[ join(', ', @parts) ]});
CREATE USER MAPPING FOR PUBLIC SERVER payments;
});
$router->safe_psql('postgres', slurp_file("$contrib/router.sql"));

# Run SQL in shard $i's database.
sub shard_sql
{
	my ($i, $sql) = @_;
	return $shards[$i]->safe_psql("payments_$i", $sql);
}

# The name each shard gives itself in the router's fan-out results.
my @shard_names = map { 'local:' . $shards[$_]->port . "/payments_$_" } 0 .. $nshards - 1;

# 24 merchants, and the shard each one belongs to, by PL/Proxy's rule:
# partition hashtext(merchant) & 15, served by shard partition mod 3.
my @merchants = map { sprintf 'm%02d', $_ } 1 .. 24;
my %home;
for (split /\n/,
	$router->safe_psql('postgres',
		"SELECT m, (hashtext(m) & ($nparts - 1)) % $nshards FROM unnest(ARRAY['"
		  . join("','", @merchants) . "']) m"))
{
	my ($m, $s) = split /\|/;
	$home{$m} = $s;
}
my @per_shard = map { my $i = $_; scalar grep { $home{$_} == $i } @merchants } 0 .. $nshards - 1;
ok((grep { $_ > 0 } @per_shard) == $nshards,
	"every shard is home to some merchants (@per_shard)");
is( $router->safe_psql(
		'postgres',
		"SELECT string_agg(idem_shard_of(m), ',' ORDER BY m) FROM unnest(ARRAY['"
		  . join("','", @merchants) . "']) m"),
	join(',', map { $shard_names[ $home{$_} ] } sort @merchants),
	'the router sends each merchant to the shard its hash names');

# --- Clients ---

# A connection to the router.
sub router_session { return session_to($router) }

# One payment through the router's pay().
my $pay_sql = 'SELECT status, response FROM pay($1, $2, $3, $4)';

my $dir = $router->basedir;

# --- A storm of retried payments through the router ---

# 10 orders per merchant; the order ids repeat from merchant to merchant,
# which idem keeps apart by scope (pay() claims with scope => merchant).
my @storm = map { my $m = $_; map { [ $m, "order-$_" ] } 1 .. 10 } @merchants;
my $nclients = 4;
my @results = run_storm(\&router_session, $pay_sql, \@storm, $nclients, $dir, 'storm');

my $answer = check_storm(\@results, \@storm, $nclients);
my @storm_results = @results;

# On each shard: its merchants' keys and charges, nobody else's.
my $total = 0;
for my $i (0 .. $nshards - 1)
{
	my @mine = sort grep { $home{$_} == $i } @merchants;
	my $list = "'" . join("','", @mine) . "'";
	my $expect = 10 * @mine;
	is( shard_sql(
			$i, qq{
SELECT count(*), count(*) FILTER (WHERE merchant IN ($list)),
       count(DISTINCT (merchant, key))
FROM ledger WHERE key LIKE 'order-%'}),
		"$expect|$expect|$expect",
		"shard $i booked one charge for each of its merchants' $expect keys, and no other");
	is( shard_sql(
			$i, qq{
SELECT count(*), count(*) FILTER (WHERE k.scope IN ($list) AND k.state = 'completed'
                                    AND l.key IS NOT NULL)
FROM idem.keys k LEFT JOIN ledger l ON l.merchant = k.scope AND l.key = k.key
WHERE k.key LIKE 'order-%'}),
		"$expect|$expect",
		"shard $i holds the completed key of each of its charges, and no other key");
	$total += shard_sql($i,
		"SELECT count(*) FROM ledger WHERE key LIKE 'order-%'");
}
is($total, scalar @storm, 'the shards together hold exactly one charge per key');

is( $router->safe_psql(
		'postgres',
		'SELECT count(*), sum(claimed), sum(completed), sum(replayed) FROM idem_stats'),
	"$nshards|" . scalar(@storm) . '|' . scalar(@storm) . '|' . ($nclients - 1) * @storm,
	"the router's idem_stats has a row per shard, and their counts add up");

my $dbh = router_session();
my $r = call($dbh, $pay_sql, undef, 'order-1', 101, 'USD');
like($r->{message} // '', qr/PL\/Proxy function public\.pay\(4\): Hash function returned NULL/,
	'a payment without a merchant has no shard: an error, not a guess');

# --- Routed idem calls: a two-phase payment through the router ---

my $m2p = $merchants[0];
my $s2p = $home{$m2p};
$r = call($dbh,
	"SELECT status, token, attempt FROM idem_claim(\$1, 'pay-2p', '\\x02', scope => \$1, lease => '30 s')",
	$m2p);
is($r->{rows}[0][0], 'claimed', 'a two-phase claim through the router');
my $token = $r->{rows}[0][1];
is( shard_sql($s2p,
		"SELECT state FROM idem_lookup('pay-2p', '$m2p')"),
	'processing', 'the claim committed on its merchant\'s shard, with its lease');
$r = call($dbh,
	'SELECT shard, scope, key, attempt FROM idem_keys_in_progress');
is_deeply($r->{rows}, [ [ $shard_names[ $home{$m2p} ], $m2p, 'pay-2p', 1 ] ],
	"the router's idem_keys_in_progress shows it, on its shard");
$r = call($dbh,
	"SELECT status, retry_after > '0' FROM idem_claim(\$1, 'pay-2p', '\\x02', scope => \$1)",
	$m2p);
is_deeply($r->{rows}, [ [ 'in_progress', 1 ] ], 'a retry meanwhile answers in_progress');

$r = call($dbh, "SELECT idem_complete(\$1, 'pay-2p', '{}', scope => \$1)", $m2p);
is($r->{error}, 'ID004',
	'completing without the token through the router is refused with the shard\'s SQLSTATE (each routed call is a transaction of its own)');
$r = call($dbh,
	"SELECT idem_checkpoint(\$1, 'pay-2p', 'charged', '{\"charge\": \"ch_2p\"}', scope => \$1, token => \$2)",
	$m2p, $token);
ok($r->{rows}, 'a checkpoint with the token through the router');
is( shard_sql($s2p,
		"SELECT checkpoint, checkpoint_data->>'charge' FROM idem.keys WHERE scope = '$m2p' AND key = 'pay-2p'"),
	'charged|ch_2p', 'it is recorded on the shard');
$r = call($dbh,
	"SELECT pay_settle(\$1, 'pay-2p', \$2, 'ch_2p', 250, 'USD')->'body'->>'charge'",
	$m2p, $token);
is($r->{rows}[0][0], 'ch_2p', 'the worker settles: booking and completion with the token, one shard transaction');
$r = call($dbh,
	"SELECT status, response->'body'->>'charge' FROM idem_claim(\$1, 'pay-2p', '\\x02', scope => \$1)",
	$m2p);
is_deeply($r->{rows}, [ [ 'completed', 'ch_2p' ] ], 'a retry replays the settled answer');
$r = call($dbh,
	"SELECT pay_settle(\$1, 'pay-2p', \$2, 'ch_2p', 250, 'USD')", $m2p, $token);
is($r->{error}, 'ID003', 'settling again fails (already finished), and books nothing');
is( shard_sql($s2p,
		"SELECT count(*), sum(amount) FROM ledger WHERE merchant = '$m2p' AND key = 'pay-2p'"),
	'1|250', 'the two-phase payment is booked once');
$r = call($dbh, "SELECT state FROM idem_lookup(\$1, 'pay-2p', \$1)", $m2p);
is($r->{rows}[0][0], 'completed', 'idem_lookup through the router');
$r = call($dbh, "SELECT count(*) FROM idem_keys_in_progress");
is($r->{rows}[0][0], 0, 'no attempt left in flight on any shard');

# idem_fail through the router: a declined card, replayed as failed.
$r = call($dbh,
	"SELECT token FROM idem_claim(\$1, 'pay-declined', scope => \$1)", $merchants[1]);
$r = call($dbh,
	"SELECT idem_fail(\$1, 'pay-declined', '{\"status\": 402}', retryable => false, scope => \$1, token => \$2)",
	$merchants[1], $r->{rows}[0][0]);
$r = call($dbh,
	"SELECT status, response->>'status' FROM idem_claim(\$1, 'pay-declined', scope => \$1)",
	$merchants[1]);
is_deeply($r->{rows}, [ [ 'failed', 402 ] ], 'idem_fail through the router: the decline is replayed');

# --- Webhooks on the merchant's shard ---

$r = call($dbh,
	"SELECT * FROM idem_webhook_source_set_shards('psp', 'stripe', ARRAY['whsec_plproxy']) s ORDER BY 1");
is_deeply([ map { $_->[0] } @{ $r->{rows} } ], [ sort @shard_names ],
	'a platform-wide webhook source is set on every shard');

my $mw = $merchants[2];
my ($payload, $seen) = refund_twice($dbh, $mw, 'psp', 'whsec_plproxy');
is_deeply($seen, [ 'new evt_refund_1', 'duplicate evt_refund_1' ],
	'a refund webhook through the router: applied once, then a duplicate');
is( shard_sql($home{$mw},
		"SELECT count(*), sum(amount) FROM ledger WHERE merchant = '$mw' AND kind = 'refund'"),
	'1|-50.00', "the refund is booked once, on the merchant's shard, with the delivery's record");
$r = call($dbh, 'SELECT status, reason FROM idem_webhook_receive($1, $2, $3, $4)',
	$mw, 'psp', $payload, '{"Stripe-Signature": "t=1,v1=00"}');
is_deeply($r->{rows}, [ [ 'rejected', 'signature' ] ],
	'idem_webhook_receive through the router rejects a bad delivery');
$r = call($dbh,
	"SELECT idem_webhook(\$1, 'queue', 'msg-1'), idem_webhook(\$1, 'queue', 'msg-1')", $mw);
is_deeply($r->{rows}, [ [ 1, 0 ] ], 'idem_webhook through the router: new, then duplicate (each call commits on the shard at once)');

# Each shard's own worker purges it: short-lived deliveries on every shard
# are gone within seconds, and each shard counts its own.
$r = call($dbh,
	"SELECT count(idem_webhook(m, 'short', 'evt-' || m, ttl => '200 ms')) FROM unnest(\$1::text[]) m",
	'{' . join(',', @merchants) . '}');
is($r->{rows}[0][0], scalar @merchants, 'one short-lived delivery per merchant');
ok( $router->poll_query_until(
		'postgres', 'SELECT sum(purged) >= ' . scalar(@merchants) . ' FROM idem_stats'),
	"the shards' purge workers purged the expired deliveries");
$r = call($dbh, 'SELECT shard, purged FROM idem_stats ORDER BY shard');
is_deeply(
	$r->{rows},
	[ sort { $a->[0] cmp $b->[0] } map { [ $shard_names[$_], $per_shard[$_] ] } 0 .. $nshards - 1 ],
	"each shard's own worker purged exactly its merchants' deliveries");
for my $i (0 .. $nshards - 1)
{
	is(shard_sql($i,
			"SELECT count(*) FROM idem.webhooks WHERE source = 'short'"),
		0, "shard $i has no short-lived delivery left");
}

# --- A shard dies in the middle of a storm ---

# The clients pay new orders and retry the old ones over and over; shard 1
# goes down without a checkpoint (immediate shutdown: it recovers from its
# WAL when it starts again) and comes back 1.5 s later.
my $down = 1;
my $downport = $shards[$down]->port;
my @late = map { my $m = $_; map { [ $m, "late-$_" ] } 1 .. 15 } @merchants;
my ($t_down, $t_up);
($t_down, $t_up, @results) = run_outage_storm(
	\&router_session, $pay_sql, [ @late, @storm ], $nclients, $dir, 'late', $shards[$down],
	sub {
		# Meanwhile, on the router: a fan-out needs every shard, and says which
		# one it misses; a merchant of another shard is served.
		$r = call($dbh, 'SELECT count(*) FROM idem_stats');
		like($r->{message} // '',
			qr/^ERROR:  PL\/Proxy function public\.idem_stats_shards\(0\): \[payments_$down\] /,
			'while a shard is down, the fan-out view fails with an error naming it');
		my ($m_other) = grep { $home{$_} != $down } @merchants;
		$r = call($dbh, $pay_sql, $m_other, 'order-1', amount_of('order-1'), 'USD');
		is($r->{rows} ? $r->{rows}[0][0] : $r->{message}, 'completed',
			'and a retry for a merchant of another shard replays');
	});

# Every error must be PL/Proxy's, for a merchant of the dead shard, and name
# that shard's database; the other shards must have gone on serving.
my $conn_err;
my ($acked, $errors, $served_while_down, $bad_errors) = split_outage(
	\@results, \%home, $down, $t_down, $t_up,
	sub {
		my ($state, $msg) = @_;
		$conn_err //= $msg if $msg =~ /PQconnect/;
		return $state eq 'XX000'
		  && $msg =~ /^ERROR: PL\/Proxy function public\.pay\(4\): \[payments_$down\] /;
	});
note 'calls: ' . scalar(@results) . '; errors by shard: '
  . join(', ', map { "$_: $errors->{$_}" } sort keys %$errors);
cmp_ok($errors->{$down} // 0, '>', 0, "calls for the dead shard's merchants failed");
is_deeply($bad_errors, [],
	"every error was PL/Proxy's, for a merchant of the dead shard, naming its database");
my @other = grep { $_ != $down } 0 .. $nshards - 1;
is((grep { ($served_while_down->{$_} // 0) > 0 } @other), scalar @other,
	'while it was down the other shards went on: '
	  . join(', ', map { "shard $_ served " . ($served_while_down->{$_} // 0) } @other));
like($conn_err // '',
	qr/^ERROR: PL\/Proxy function public\.pay\(4\): \[payments_$down\] PQconnect\w+: connection to server .*\.s\.PGSQL\.$downport.* failed/,
	"a failed connection's message also gives the dead shard's address");
note "for example: $conn_err" if $conn_err;

# Back up: every payment acknowledged before or during the outage replays
# its answer; the calls that failed (or broke off: their outcome was
# unknown to the client) are retried now and charge at most once.
check_replays($dbh, $pay_sql, [ @storm, @late ], { %$acked, %$answer }, 'after the outage');
is($router->safe_psql('postgres', 'SELECT count(*) FROM idem_stats'),
	$nshards, 'the fan-out views see every shard again');
$total = 0;
my $misplaced = 0;
for my $i (0 .. $nshards - 1)
{
	my $list = "'" . join("','", grep { $home{$_} == $i } @merchants) . "'";
	$total += shard_sql($i,
		"SELECT count(*) FROM ledger WHERE key ~ '^(order|late)-'");
	$misplaced += shard_sql($i,
		"SELECT count(*) FROM ledger WHERE merchant NOT IN ($list)");
}
is($total, @storm + @late, 'in the end every key is charged exactly once across the shards');
is($misplaced, 0, 'and every charge is on its merchant\'s shard');

# --- A partition moved to a new shard with its keys, without the backstop ---

# From here no unique key of the ledger stands between a retry and a second
# charge: idem alone must hold through the move.
shard_sql($_, 'ALTER TABLE ledger DROP CONSTRAINT ledger_pkey') for 0 .. $nshards - 1;

# the new shard, set up as the others (the platform's webhook source too)
my $new = make_shard(3);
$new->safe_psql('payments_3', 'ALTER TABLE ledger DROP CONSTRAINT ledger_pkey');
$new->safe_psql('payments_3', "SELECT idem_webhook_source_set('psp', 'stripe', ARRAY['whsec_plproxy'])");
my $new_name = 'local:' . $new->port . '/payments_3';

# the partition of the merchant that received the refund, from its shard
my $part = $router->safe_psql('postgres', "SELECT hashtext('$mw') & ($nparts - 1)");
my $from = $part % $nshards;
my @movers = grep {
	$router->safe_psql('postgres', "SELECT hashtext('$_') & ($nparts - 1)") == $part
} @merchants;
my @moves = map { my $m = $_; map { [ $m, "move-$_" ] } 1 .. 10 } @merchants;
my %answers = (%$answer, %$acked);
my @move_results = run_storm_during(
	\&router_session, $pay_sql, [ @moves, @storm, @late ], $nclients, $dir, 'move',
	sub {
		usleep(500_000);
		# the move, step by step as doc/scaling.md says
		shard_sql($from, "SELECT partition_move_begin($part, $nparts)");
		my $rows = shard_sql($from, "SELECT partition_export($part, $nparts)");
		$new->safe_psql('payments_3', "SELECT partition_import($part, $nparts, \$rows\$$rows\$rows\$)");
		$router->safe_psql('postgres',
			"ALTER SERVER payments OPTIONS (SET p$part 'host=" . $new->host . ' port=' . $new->port
			  . " dbname=payments_3')");
		shard_sql($from, "SELECT partition_move_end($part, $nparts)");
	});
is_deeply([ map { "@$_" } grep { $_->[3] eq 'ERROR' } @move_results ], [], 'no call failed during the move');
note 'during the move ' . (grep { $_->[3] eq 'in_progress' } @move_results) . ' calls answered in_progress';
for (@move_results)
{
	my (undef, $m, $k, $status, $resp) = @$_;
	$answers{"$m/$k"} //= $resp if $status eq 'claimed';
}
my $list = "'" . join("','", @movers) . "'";
is(join(',', map { $router->safe_psql('postgres', "SELECT idem_shard_of('$_')") } @movers),
	join(',', ($new_name) x @movers), "the merchants of partition $part (@movers) are served by the new shard");
is( shard_sql($from,
		"SELECT (SELECT count(*) FROM ledger WHERE merchant IN ($list)) + (SELECT count(*) FROM idem.keys WHERE scope IN ($list))"),
	0, 'no row or key of theirs is left on the old shard');
is( $new->safe_psql('payments_3',
		"SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT FROM idem.keys k WHERE k.scope = l.merchant AND k.key = l.key))
		 FROM ledger l WHERE l.merchant IN ($list) AND l.kind = 'charge' AND l.key ~ '^(order|late)-'"),
	(25 * @movers) . '|' . (25 * @movers),
	'on the new shard each of their earlier charges is there with its key');
is( $new->safe_psql('payments_3', "SELECT count(*), sum(amount) FROM ledger WHERE kind = 'refund'"),
	'1|-50.00', 'the refund moved with its merchant, and its delivery is still a duplicate there:');
($payload, $seen) = refund_twice($dbh, $mw, 'psp', 'whsec_plproxy');
is_deeply($seen, [ 'duplicate evt_refund_1', 'duplicate evt_refund_1' ], '... twice');

# No key was claimed twice, whatever moved; every acknowledged payment
# replays where its merchant now is; the ledgers, without their unique
# keys, hold one charge per key.
my %claims;
$claims{"$_->[1]/$_->[2]"}++ for grep { $_->[3] eq 'claimed' } @storm_results, @results, @move_results;
is_deeply([ grep { $claims{$_} > 1 } sort keys %claims ], [], 'no key was claimed twice');
check_replays($dbh, $pay_sql, [ @storm, @late, @moves ], \%answers, 'after the move');
# every charge of every shard, new one included, by merchant/key
my %charges;
for my $q ((map { [ $shards[$_], "payments_$_" ] } 0 .. $nshards - 1), [ $new, 'payments_3' ])
{
	$charges{$_}++ for split /\n/, $q->[0]->safe_psql($q->[1],
		"SELECT merchant || '/' || key FROM ledger WHERE key ~ '^(order|late|move)-'");
}
is_deeply([ grep { $charges{$_} > 1 } sort keys %charges ], [],
	'no key was charged twice, on one shard or across them (counted without the ledgers\' unique keys)');
is(scalar(keys %charges), @storm + @late + @moves, 'and every key is charged');

for my $node (@shards, $new)
{
	ok(!$node->log_contains('PANIC|TRAP:'), $node->name . ': no PANIC or assertion failure');
}
$_->stop for @shards, $new;
$router->stop;
done_testing();
