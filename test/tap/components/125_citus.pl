# Sharding with Citus: a coordinator and two workers, idem on every node
# (CREATE EXTENSION on the coordinator creates it on the workers), the
# business schema of contrib/plproxy/shard.sql distributed by merchant and
# its functions run on the merchant's worker (contrib/citus/coordinator.sql,
# as doc/scaling.md says).  A storm of retried payments through the
# coordinator charges each key once, on the merchant's worker, and the
# coordinator's idem.keys stays empty, also when a call is not delegated
# (it is refused); a two-phase attempt is claimed, checkpointed and settled
# through the coordinator with its token; a refund webhook is verified,
# deduplicated and booked on the merchant's worker; each node's purge worker
# purges its own keys; the counters of every node are read from the
# coordinator.  Then a worker goes down in the middle of a storm: only its
# merchants' calls fail, with Citus's error naming it, and once it is back
# every acknowledged payment replays and no key was charged twice.  Last,
# with the ledger's unique key dropped, a shard group is moved with
# idem_move_shard and a third worker is filled by idem_rebalance, each
# under a storm of new orders and retries: no key is claimed twice, every
# acknowledged payment replays where its merchant now is, and the ledger
# holds one charge per key.
#
# Citus is not in Debian: test/servers.sh builds it from the vendored source
# for the packaged servers its configure accepts (IDEM_CITUS: 17 and 18),
# and the test skips elsewhere, saying why (IDEM_CITUS_SKIP).
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

my ($major) = `pg_config --version` =~ /(\d+)/;
plan skip_all => 'Citus needs PostgreSQL 16 or later' if $major < 16;
my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
if (!-e "$sharedir/extension/citus.control")
{
	plan skip_all => $ENV{IDEM_CITUS_SKIP}
	  || (`pg_config --configure` =~ /--enable-cassert/
		? 'Citus is built for Debian\'s servers only, not for this one built from source'
		: 'Citus is not installed: Debian has no package of it (make test-matrix builds it from source for the servers it supports)');
}

my $contrib = "$FindBin::RealBin/../../../contrib";

# --- A coordinator and two workers ---

# A node of the cluster: Citus first in shared_preload_libraries, as it
# requires; its purge worker cleans the payments database every second.
# The nodes listen on the test's Unix socket directory only, which is
# where a node reaches itself too (a shard move connects to the
# coordinator as citus.local_hostname).
sub citus_node
{
	my ($name) = @_;
	my $node = idem_node($name, qq(
shared_preload_libraries = 'citus,idem'
citus.local_hostname = '$PostgreSQL::Test::Cluster::test_pghost'
idem.database = 'postgres'
idem.purge_interval = '1s'
max_connections = 100
));
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
	return $node;
}
my @nodes = map { citus_node($_) } qw(coordinator worker1 worker2);
my ($coord, @workers) = @nodes;

# Nodes reach each other over the test's Unix socket directory.
$coord->safe_psql('postgres',
	"SELECT citus_set_coordinator_host('" . $coord->host . "', " . $coord->port . ')');
$coord->safe_psql('postgres',
	"SELECT citus_add_node('" . $_->host . "', " . $_->port . ')')
  for @workers;
my @worker_names = map { $_->host . ':' . $_->port } @workers;

$coord->safe_psql('postgres', 'CREATE EXTENSION idem');
is( join(',', map { $_->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'idem'") } @workers),
	join(',', ($coord->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'idem'")) x 2),
	'CREATE EXTENSION idem on the coordinator creates it on both workers');
$coord->safe_psql('postgres', slurp_file("$contrib/plproxy/shard.sql"));
$coord->safe_psql('postgres', slurp_file("$contrib/citus/coordinator.sql"));

# 24 merchants and the worker that holds each, as Citus placed them
my @merchants = map { sprintf 'm%02d', $_ } 1 .. 24;
my %home;
for (split /\n/,
	$coord->safe_psql('postgres',
		"SELECT m, idem_node_of(m) FROM unnest(ARRAY['" . join("','", @merchants) . "']) m"))
{
	my ($m, $node) = split /\|/;
	($home{$m}) = grep { $worker_names[$_] eq $node } 0 .. $#workers;
	die "merchant $m is on $node, not on a worker" unless defined $home{$m};
}
my @per_worker = map { my $i = $_; scalar grep { $home{$_} == $i } @merchants } 0 .. $#workers;
ok((grep { $_ > 0 } @per_worker) == @workers,
	"both workers hold some of the merchants (@per_worker)");

# Run SQL on worker $i.
sub worker_sql
{
	my ($i, $sql) = @_;
	return $workers[$i]->safe_psql('postgres', $sql);
}

# A connection to the coordinator.
sub coordinator_session { return session_to($coord) }

my $pay_sql = 'SELECT status, response FROM pay($1, $2, $3, $4)';
my $dir = $coord->basedir;

# --- A storm of retried payments through the coordinator ---

my @storm = map { my $m = $_; map { [ $m, "order-$_" ] } 1 .. 10 } @merchants;
my $nclients = 4;
my @results = run_storm(\&coordinator_session, $pay_sql, \@storm, $nclients, $dir, 'storm');
my @storm_results = @results;

my $answer = check_storm(\@results, \@storm, $nclients);

is( $coord->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT (merchant, key)) FROM ledger WHERE key LIKE 'order-%'"),
	scalar(@storm) . '|' . scalar(@storm),
	'the distributed ledger holds one charge per key');
for my $i (0 .. $#workers)
{
	my $list = "'" . join("','", grep { $home{$_} == $i } @merchants) . "'";
	my $expect = 10 * $per_worker[$i];
	is( worker_sql(
			$i, qq{
SELECT count(*), count(*) FILTER (WHERE scope IN ($list) AND state = 'completed')
FROM idem.keys WHERE key LIKE 'order-%'}),
		"$expect|$expect",
		"worker " . ($i + 1) . " holds the completed key of each of its merchants' $expect charges, and no other");
}
is($coord->safe_psql('postgres', 'SELECT count(*) FROM idem.keys'),
	0, "the coordinator's idem.keys is empty");

# Every node's counters, read on the coordinator
is( $coord->safe_psql(
		'postgres', 'SELECT count(*), sum(claimed), sum(completed), sum(replayed) FROM idem_stats_nodes()'),
	'3|' . scalar(@storm) . '|' . scalar(@storm) . '|' . ($nclients - 1) * @storm,
	'idem_stats_nodes() has a row per node, and their counts add up');
is( $coord->safe_psql(
		'postgres',
		"SELECT string_agg(node || '=' || claimed, ',' ORDER BY node) FROM idem_stats_nodes()"),
	join(',',
		sort($coord->host . ':' . $coord->port . '=0',
			map { "$worker_names[$_]=" . 10 * $per_worker[$_] } 0 .. $#workers)),
	'each worker claimed its merchants\' keys, the coordinator none');

# A call Citus does not delegate runs on the coordinator: refused there.
my $dbh = coordinator_session();
my $r = call($dbh, q{SELECT (pay(m, 'order-1', 101, 'USD')).status FROM (VALUES ('m01')) v(m)});
is($r->{error}, '55000', 'a payment that Citus does not delegate is refused ...');
like($r->{message}, qr/merchant m01 is not on this node/, '... saying why');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM idem.keys'),
	0, '... and the coordinator\'s idem.keys is still empty');

# --- A two-phase payment through the coordinator ---

my $m2p = $merchants[0];
my $w2p = $home{$m2p};
$r = call($dbh,
	"SELECT status, token, attempt FROM routed.idem_claim(\$1, 'pay-2p', '\\x02', scope => \$1, lease => '30 s')",
	$m2p);
is($r->{rows}[0][0], 'claimed', 'a two-phase claim through the coordinator');
my $token = $r->{rows}[0][1];
is(worker_sql($w2p, "SELECT state FROM idem_lookup('pay-2p', '$m2p')"),
	'processing', 'it committed on its merchant\'s worker, with its lease');
$r = call($dbh,
	"SELECT status, retry_after > '0' FROM routed.idem_claim(\$1, 'pay-2p', '\\x02', scope => \$1)", $m2p);
is_deeply($r->{rows}, [ [ 'in_progress', 1 ] ], 'a retry meanwhile answers in_progress');
$r = call($dbh, "SELECT routed.idem_complete(\$1, 'pay-2p', '{}', scope => \$1)", $m2p);
is($r->{error}, 'ID004',
	'completing without the token through the coordinator is refused with the worker\'s SQLSTATE');
$r = call($dbh,
	"SELECT routed.idem_checkpoint(\$1, 'pay-2p', 'charged', '{\"charge\": \"ch_2p\"}', scope => \$1, token => \$2)",
	$m2p, $token);
ok($r->{rows}, 'a checkpoint with the token through the coordinator');
is( worker_sql($w2p,
		"SELECT checkpoint, checkpoint_data->>'charge' FROM idem.keys WHERE scope = '$m2p' AND key = 'pay-2p'"),
	'charged|ch_2p', 'it is recorded on the worker');
# (a plain call: Citus delegates nothing more, such as pay_settle(...)->'body')
$r = call($dbh, "SELECT pay_settle(\$1, 'pay-2p', \$2, 'ch_2p', 250, 'USD')", $m2p, $token);
like($r->{rows} ? $r->{rows}[0][0] : $r->{message}, qr/"charge": "ch_2p"/,
	'the worker settles: booking and completion with the token, one transaction on the worker');
$r = call($dbh,
	"SELECT status, response->'body'->>'charge' FROM routed.idem_claim(\$1, 'pay-2p', '\\x02', scope => \$1)",
	$m2p);
is_deeply($r->{rows}, [ [ 'completed', 'ch_2p' ] ], 'a retry replays the settled answer');
$r = call($dbh, "SELECT pay_settle(\$1, 'pay-2p', \$2, 'ch_2p', 250, 'USD')", $m2p, $token);
is($r->{error}, 'ID003', 'settling again fails (already finished), and books nothing');
is( $coord->safe_psql('postgres',
		"SELECT count(*), sum(amount) FROM ledger WHERE merchant = '$m2p' AND key = 'pay-2p'"),
	'1|250', 'the two-phase payment is booked once');
$r = call($dbh, "SELECT state FROM routed.idem_lookup(\$1, 'pay-2p', \$1)", $m2p);
is($r->{rows}[0][0], 'completed', 'idem_lookup through the coordinator');

# idem_fail through the coordinator: a declined card, replayed as failed.
$r = call($dbh, "SELECT token FROM routed.idem_claim(\$1, 'pay-declined', scope => \$1)", $merchants[1]);
$r = call($dbh,
	"SELECT routed.idem_fail(\$1, 'pay-declined', '{\"status\": 402}', retryable => false, scope => \$1, token => \$2)",
	$merchants[1], $r->{rows}[0][0]);
$r = call($dbh,
	"SELECT status, response->>'status' FROM routed.idem_claim(\$1, 'pay-declined', scope => \$1)",
	$merchants[1]);
is_deeply($r->{rows}, [ [ 'failed', 402 ] ], 'idem_fail through the coordinator: the decline is replayed');

# --- A refund webhook, on the merchant's worker ---

$r = call($dbh,
	"SELECT * FROM idem_webhook_source_set_nodes('psp', 'stripe', ARRAY['whsec_citus']) s ORDER BY 1");
is(scalar @{ $r->{rows} // [] }, 3, 'a platform-wide webhook source is set on every node');

my $mw = $merchants[2];
my (undef, $seen) = refund_twice($dbh, $mw, 'psp', 'whsec_citus');
is_deeply($seen, [ 'new evt_refund_1', 'duplicate evt_refund_1' ],
	'a refund webhook through the coordinator: applied once, then a duplicate');
is( $coord->safe_psql('postgres',
		"SELECT count(*), sum(amount) FROM ledger WHERE merchant = '$mw' AND kind = 'refund'"),
	'1|-50.00', 'the refund is booked once');
is( join(',', map { worker_sql($_, "SELECT count(*) FROM idem.webhooks WHERE source = 'psp'") } 0 .. $#workers)
	  . ',' . $coord->safe_psql('postgres', 'SELECT count(*) FROM idem.webhooks'),
	join(',', map { $_ == $home{$mw} ? 1 : 0 } 0 .. $#workers) . ',0',
	'the delivery is recorded on the merchant\'s worker only');

# --- Each node's purge worker purges its own keys ---

# one short-lived two-phase claim per merchant, on the merchants' workers
$r = call($dbh,
	"SELECT count(*) FROM unnest(\$1::text[]) m, routed.idem_claim(m, 'short', scope => m, lease => '200 ms', ttl => '200 ms') c WHERE c.status = 'claimed'",
	'{' . join(',', @merchants) . '}');
is($r->{error}, '55000',
	'claims for several merchants in one statement are not delegated: refused on the coordinator');
my $short = 0;
for my $m (@merchants)
{
	$r = call($dbh, "SELECT status FROM routed.idem_claim(\$1, 'short', scope => \$1, lease => '200 ms', ttl => '200 ms')", $m);
	$short++ if ($r->{rows} // [ [''] ])->[0][0] eq 'claimed';
}
is($short, scalar @merchants, 'one short-lived claim per merchant, each a call of its own');
ok( $coord->poll_query_until(
		'postgres', 'SELECT sum(purged) >= ' . scalar(@merchants) . ' FROM idem_stats_nodes()'),
	"the workers' purge workers purged the expired keys");
is( $coord->safe_psql('postgres',
		"SELECT string_agg(node || '=' || purged, ',' ORDER BY node) FROM idem_stats_nodes()"),
	join(',',
		sort($coord->host . ':' . $coord->port . '=0',
			map { "$worker_names[$_]=$per_worker[$_]" } 0 .. $#workers)),
	"each worker's own purge worker purged exactly its merchants' keys");

# --- A worker dies in the middle of a storm ---

# The clients pay new orders and retry the old ones over and over; worker 2
# goes down without a checkpoint (immediate shutdown) and comes back 1.5 s
# later.
my $down = 1;
my @late = map { my $m = $_; map { [ $m, "late-$_" ] } 1 .. 15 } @merchants;
my ($t_down, $t_up);
($t_down, $t_up, @results) = run_outage_storm(
	\&coordinator_session, $pay_sql, [ @late, @storm ], $nclients, $dir, 'late', $workers[$down],
	sub {
		# Meanwhile, on the coordinator: the fan-out needs every node, and says
		# which one it misses; a merchant of the other worker is served.
		$r = call($dbh, 'SELECT count(*) FROM idem_stats_nodes()');
		like($r->{message} // '', qr/node \Q$worker_names[$down]\E failed/,
			'while a worker is down, the fan-out fails with an error naming it');
		my ($m_other) = grep { $home{$_} != $down } @merchants;
		$r = call($dbh, $pay_sql, $m_other, 'order-1', amount_of('order-1'), 'USD');
		is($r->{rows} ? $r->{rows}[0][0] : $r->{message}, 'completed',
			'and a retry for a merchant of the other worker replays');
	});

# Every error must be for a merchant of the dead worker, and name it (Citus
# gives its address); the other worker must have gone on serving.
my $conn_err;
my ($acked, $errors, $served_while_down, $bad_errors) = split_outage(
	\@results, \%home, $down, $t_down, $t_up,
	sub {
		my ($state, $msg) = @_;
		$conn_err //= $msg;
		return $msg =~ /^ERROR: connection to the remote node \S*\Q$worker_names[$down]\E failed/;
	});
note 'calls: ' . scalar(@results) . '; errors by worker: '
  . join(', ', map { 'worker ' . ($_ + 1) . ": $errors->{$_}" } sort keys %$errors);
note "for example: $conn_err" if $conn_err;
cmp_ok($errors->{$down} // 0, '>', 0, "calls for the dead worker's merchants failed");
is_deeply($bad_errors, [], 'every error was for a merchant of the dead worker, and named it');
my ($other) = grep { $_ != $down } 0 .. $#workers;
cmp_ok($served_while_down->{$other} // 0, '>', 0,
	'while it was down the other worker went on serving ('
	  . ($served_while_down->{$other} // 0) . ' calls)');

# Back up: every payment acknowledged before or during the outage replays
# its answer; the calls that failed (or broke off: their outcome was
# unknown to the client) are retried now and charge at most once.
check_replays($dbh, $pay_sql, [ @storm, @late ], { %$acked, %$answer }, 'after the outage');
is( $coord->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT (merchant, key)) FROM ledger WHERE key ~ '^(order|late)-'"),
	(@storm + @late) . '|' . (@storm + @late),
	'in the end every key is charged exactly once');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM idem.keys'),
	0, "the coordinator's idem.keys is still empty");

# --- Moving shards with their keys, under a storm, without the backstop ---

# From here no unique key of the ledger stands between a retry and a second
# charge: idem alone must hold through the moves.
$coord->safe_psql('postgres', 'ALTER TABLE ledger DROP CONSTRAINT ledger_pkey');

# Every call of every storm: each key must have been claimed by one call
# only, across all of them.
my @all_results = (@storm_results, @results);
my %answers = (%$answer, %$acked);

# A storm of retries and new orders of every merchant while $during runs;
# its lines join the others, and what was acknowledged joins the answers.
sub storm_while
{
	my ($name, $orders, $during) = @_;
	my @lines = run_storm_during(\&coordinator_session, $pay_sql, $orders, $nclients, $dir,
		$name, $during);
	my @errors = grep { $_->[3] eq 'ERROR' } @lines;
	is_deeply([ map { "@$_" } @errors ], [], "$name: no call failed");
	push @all_results, @lines;
	for (@lines)
	{
		my (undef, $m, $k, $status, $resp) = @$_;
		$answers{"$m/$k"} //= $resp if $status eq 'claimed';
	}
	return scalar grep { $_->[3] eq 'in_progress' } @lines;
}

# Where each merchant's keys are: merchant => the workers that hold some,
# by name, comma-separated
sub keys_by_worker
{
	my %where;
	for my $i (0 .. $#workers)
	{
		push @{ $where{$_} }, $worker_names[$i]
		  for split /\n/, worker_sql($i, "SELECT DISTINCT scope FROM idem.keys WHERE scope ~ '^m[0-9]+\$'");
	}
	return { map { $_ => join(',', @{ $where{$_} }) } keys %where };
}

# one shard group of worker 1's merchants, moved to worker 2
my ($m_move) = grep { $home{$_} == 0 } @merchants;
my $shard = $coord->safe_psql('postgres',
	"SELECT get_shard_id_for_distribution_column('ledger', '$m_move')");
my @group = split /\n/, $coord->safe_psql('postgres',
	"SELECT m FROM unnest(ARRAY['" . join("','", @merchants) . "']) m
	 WHERE get_shard_id_for_distribution_column('ledger', m) = $shard ORDER BY m");
my @moves = map { my $m = $_; map { [ $m, "move-$_" ] } 1 .. 10 } @merchants;
# a two-phase attempt in flight across the move: claimed on worker 1,
# settled on worker 2 with its token
$r = call($dbh,
	"SELECT status, token FROM routed.idem_claim(\$1, 'pay-inflight', scope => \$1, lease => '1 min')", $m_move);
is($r->{rows}[0][0], 'claimed', 'a two-phase claim before the move');
my $inflight = $r->{rows}[0][1];
my $waited = storm_while('move', [ @moves, @storm, @late ], sub {
	usleep(500_000);
	$coord->safe_psql('postgres',
		"CALL idem_move_shard($shard, '" . $workers[1]->host . "', " . $workers[1]->port . ')');
});
cmp_ok($waited, '>', 0, "calls of the group's merchants answered in_progress during the move ($waited)");
is($coord->safe_psql('postgres', "SELECT idem_node_of('$m_move')"), $worker_names[1],
	"idem_move_shard moved the shard group of @group to worker 2");
my $where = keys_by_worker();
is(join(' ', map { $where->{$_} // 'none' } @group), join(' ', ($worker_names[1]) x @group),
	'their keys are on worker 2 now, none left on worker 1');
$r = call($dbh, "SELECT status FROM routed.idem_claim(\$1, 'pay-inflight', scope => \$1)", $m_move);
is($r->{rows}[0][0], 'in_progress', 'after the move its lease still holds the key ...');
$r = call($dbh, "SELECT pay_settle(\$1, 'pay-inflight', \$2, 'ch_if', 300, 'USD')", $m_move, $inflight);
like($r->{rows} ? $r->{rows}[0][0] : $r->{message}, qr/"charge": "ch_if"/,
	'... and its worker settles it on the new node with its token');

# A third worker, and the shard groups rebalanced onto it
my $worker3 = citus_node('worker3');
$coord->safe_psql('postgres',
	"SELECT citus_add_node('" . $worker3->host . "', " . $worker3->port . ')');
is($worker3->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'idem'"),
	$coord->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'idem'"),
	'a worker added later gets idem from Citus');
push @workers, $worker3;
push @nodes, $worker3;
push @worker_names, $worker3->host . ':' . $worker3->port;
my @rebalance = map { my $m = $_; map { [ $m, "rebalance-$_" ] } 1 .. 10 } @merchants;
my $moved;
$waited = storm_while('rebalance', [ @rebalance, @moves, @storm ], sub {
	usleep(500_000);
	($moved) = $coord->safe_psql('postgres', 'CALL idem_rebalance()');
});
note "idem_rebalance moved $moved shard groups; meanwhile $waited calls answered in_progress";
cmp_ok($moved, '>', 0, 'idem_rebalance moved shard groups onto the new worker');
my %node_of = map { split /\|/ }
  split /\n/, $coord->safe_psql('postgres',
	"SELECT m, idem_node_of(m) FROM unnest(ARRAY['" . join("','", @merchants) . "']) m");
ok((grep { $node_of{$_} eq $worker_names[2] } @merchants) > 0, 'some merchants are on worker 3 now');
$where = keys_by_worker();
is_deeply([ map { "$_: " . ($where->{$_} // 'none') } grep { ($where->{$_} // '') ne $node_of{$_} } @merchants ], [],
	"every merchant's keys are on the worker that holds its rows, and on no other");

# A move that stopped half way, after Citus moved the group and before the
# keys went along (simulated: the group marked as idem_move_shard marks it,
# then moved by Citus alone): its merchants answer in_progress until
# idem_move_shard is called again, which carries the keys from where the
# group was.
my $m_half = $merchants[0];
my ($from_w) = grep { $worker_names[$_] eq $node_of{$m_half} } 0 .. $#workers;
my $to_w = ($from_w + 1) % @workers;
my $half = $coord->safe_psql('postgres', "SELECT get_shard_id_for_distribution_column('ledger', '$m_half')");
$coord->safe_psql('postgres', "INSERT INTO idem_moving (shardid, source_name, source_port)
	VALUES ($half, '" . $workers[$from_w]->host . "', " . $workers[$from_w]->port . ')');
$coord->safe_psql('postgres', "SELECT citus_move_shard_placement($half, '" . $workers[$from_w]->host . "', "
	  . $workers[$from_w]->port . ", '" . $workers[$to_w]->host . "', " . $workers[$to_w]->port . ", 'block_writes')");
$r = call($dbh, $pay_sql, $m_half, 'order-1', amount_of('order-1'), 'USD');
is($r->{rows} ? $r->{rows}[0][0] : $r->{message}, 'in_progress',
	'a group moved by Citus but not yet by idem_move_shard answers in_progress ...');
$coord->safe_psql('postgres',
	"CALL idem_move_shard($half, '" . $workers[$to_w]->host . "', " . $workers[$to_w]->port . ')');
$r = call($dbh, $pay_sql, $m_half, 'order-1', amount_of('order-1'), 'USD');
is($r->{rows} ? "$r->{rows}[0][0] $r->{rows}[0][1]" : $r->{message}, "completed $answers{\"$m_half/order-1\"}",
	'... and once idem_move_shard is called again its keys are on the new node: the payment replays');
$where = keys_by_worker();
is($where->{$m_half}, $worker_names[$to_w], 'its keys are on the new node only');

# No key was claimed twice, whatever moved; every acknowledged payment
# replays where it is now; the ledger, without its unique key, holds one
# charge per key.
my %claims;
$claims{"$_->[1]/$_->[2]"}++ for grep { $_->[3] eq 'claimed' } @all_results;
is_deeply([ grep { $claims{$_} > 1 } sort keys %claims ], [], 'no key was claimed twice');
check_replays($dbh, $pay_sql, [ @storm, @late, @moves, @rebalance ], \%answers, 'after the moves');
is( $coord->safe_psql('postgres',
		'SELECT count(*) - count(DISTINCT (merchant, key)) FROM ledger'),
	0, 'no key was charged twice (counted without the ledger\'s unique key)');
is( $coord->safe_psql('postgres', "SELECT count(*) FROM ledger WHERE key ~ '^(order|late|move|rebalance)-'"),
	@storm + @late + @moves + @rebalance, 'and every key is charged');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM idem.keys'),
	0, "the coordinator's idem.keys is still empty");

for my $node (@nodes)
{
	ok(!$node->log_contains('PANIC|TRAP:'), $node->name . ': no PANIC or assertion failure');
}
$_->stop for @nodes;
done_testing();
