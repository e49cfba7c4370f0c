# Failover under pg_auto_failover: a monitor and two nodes with synchronous
# replication, the real pg_autoctl from its Debian package.  Clients pay
# through a multi-host connection string (target_session_attrs=read-write),
# retrying the same key after every error; the primary's node dies (its
# pg_autoctl and its postmaster with every child, SIGKILL: the machine is
# gone, so nothing restarts it); pg_auto_failover promotes the standby.
# Every payment a client saw COMMIT return for answers completed with its
# response on the new primary, no key is charged twice, the clients resume
# there by themselves, a two-phase attempt committed before the failover is
# completed by its token after it, and the purge worker runs on the primary
# only: on the new primary after the failover, never on a standby.
use strict;
use warnings;

use File::Basename;
use File::Path;
use IPC::Run;
use POSIX qw(:sys_wait_h);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my ($bindir) = grep { -x "$_/pg_ctl" } split /:/, $ENV{PATH};
my ($autoctl) = grep { -x "$_/pg_autoctl" } split /:/, "$ENV{PATH}:/usr/bin";
plan skip_all => 'pg_autoctl (pg-auto-failover-cli) is not installed' unless $autoctl;
require_extension('pgautofailover', 'postgresql-NN-auto-failover');
$autoctl .= '/pg_autoctl';
BAIL_OUT('no pg_ctl on PATH') unless $bindir;

my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $test_pid = $$;

# Data directories laid out as PostgreSQL::Test::Cluster's, so that a run
# stopped on its time limit finds them; pg_autoctl's own files, its logs and
# the clients' beside them; the sockets in a short directory.
my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my %pgdata = map { $_ => "$tmp/t_113_auto_failover_${_}_data/pgdata" } qw(monitor node1 node2);
my $dir = "$tmp/t_113_auto_failover_files";
File::Path::rmtree([ $dir, map { File::Basename::dirname($_) } values %pgdata ]);
File::Path::mkpath([ $dir, map { File::Basename::dirname($_) } values %pgdata ]);
my $sockdir = PostgreSQL::Test::Utils::tempdir_short;

# pg_autoctl keeps its configuration and state under XDG_*; its postgres
# gets -k from PG_REGRESS_SOCK_DIR, and it connects locally through PGHOST.
$ENV{XDG_CONFIG_HOME} = "$dir/config";
$ENV{XDG_DATA_HOME} = "$dir/share";
$ENV{PG_REGRESS_SOCK_DIR} = $sockdir;
$ENV{PGHOST} = $sockdir;
delete $ENV{PGPORT};
delete $ENV{PGDATA};

my %port = map { $_ => PostgreSQL::Test::Cluster::get_free_port() } qw(monitor node1 node2);
my $monitor_uri =
  "postgres://autoctl_node\@127.0.0.1:$port{monitor}/pg_auto_failover?sslmode=disable";

# --- Starting and stopping pg_autoctl, whatever happens to the test ---

my %service;    # node => pid of its `pg_autoctl run`, leader of its own group

# Start pg_autoctl with the given arguments in a session of its own, its
# output appended to $dir/$log, and note its group for the watchdog; returns
# its pid.  Killing the group kills pg_autoctl's processes and the postmaster
# it started (whose children put themselves in groups of their own).
sub spawn
{
	my ($log, @args) = @_;
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		POSIX::setsid();
		open STDIN, '<', '/dev/null';
		open STDOUT, '>>', "$dir/$log";
		open STDERR, '>&', \*STDOUT;
		exec($autoctl, @args) or POSIX::_exit(127);
	}
	open my $fh, '>>', "$dir/groups" or die $!;
	print $fh "$pid\n";
	close $fh;
	return $pid;
}

# Run a pg_autoctl command to its end (at most the tests' timeout); true
# when it succeeded
sub autoctl
{
	my ($log, @args) = @_;
	my $pid = spawn($log, @args);
	my $deadline = time + $timeout;
	while (waitpid($pid, WNOHANG) == 0)
	{
		if (time > $deadline)
		{
			kill 'KILL', -$pid;
			waitpid($pid, 0);
			return 0;
		}
		usleep(100_000);
	}
	return $? == 0;
}

# Start `pg_autoctl run` for a node: its keeper and its postgres
sub start_service
{
	my ($node) = @_;
	$service{$node} = spawn("$node.log", 'run', '--pgdata', $pgdata{$node});
	return;
}

# The command line of a process, '' when there is none
sub cmdline
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/cmdline" or return '';
	local $/;
	return <$fh> // '';
}

# The postmaster of a data directory and its children, when it runs
sub server_pids
{
	my ($pgdata) = @_;
	open my $fh, '<', "$pgdata/postmaster.pid" or return ();
	my $pm = <$fh>;
	close $fh;
	chomp $pm;
	# a postmaster of this data directory, not a process that took its pid
	return () unless $pm && index(cmdline($pm), $pgdata) >= 0;
	my @pids = ($pm);
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open my $s, '<', $stat or next;
		my $line = <$s> // next;
		close $s;
		# pid (comm) state ppid ...: comm may hold spaces and parentheses
		my ($pid, $rest) = $line =~ /^(\d+) \(.*\) (.*)$/s or next;
		push @pids, $pid if (split / /, $rest)[1] == $pm;
	}
	return @pids;
}

# What a machine crash does to a node: every process of it gets SIGKILL at
# once, pg_autoctl's (which would restart postgres) and postgres's.
sub crash_node
{
	my ($node) = @_;
	my @pids = server_pids($pgdata{$node});
	kill 'KILL', -$service{$node}, @pids;
	waitpid($service{$node}, 0);
	delete $service{$node};
	return scalar @pids;
}

# Stop every node: pg_autoctl stops its postgres on SIGTERM; whatever is
# still there after a while is killed.
sub stop_all
{
	kill 'TERM', values %service;
	my $deadline = time + 30;
	while (%service && time < $deadline)
	{
		for my $node (keys %service)
		{
			delete $service{$node} if waitpid($service{$node}, WNOHANG) != 0;
		}
		usleep(100_000);
	}
	kill 'KILL', map { -$_ } values %service;
	kill 'KILL', server_pids($_) for values %pgdata;
	return;
}

# A watchdog in a session of its own: if the test dies without its END
# block (SIGKILL on a time limit), it kills what the test started.
my $watchdog = fork() // die "fork: $!";
if ($watchdog == 0)
{
	POSIX::setsid();
	sleep 1 while getppid() == $test_pid;
	# the groups whose leader is still one of our pg_autoctl processes
	if (open my $fh, '<', "$dir/groups")
	{
		kill 'KILL', map { -$_ } grep { chomp; cmdline($_) =~ /pg_autoctl/ } <$fh>;
	}
	kill 'KILL', server_pids($_) for values %pgdata;
	POSIX::_exit(0);
}

my $clients;    # the IPC::Run harness of the payment clients

END
{
	if ($$ == $test_pid)
	{
		my $rc = $?;
		$clients->kill_kill if $clients;
		stop_all();
		kill 'TERM', $watchdog;
		waitpid($watchdog, 0);
		$? = $rc;
	}
}
$SIG{TERM} = $SIG{INT} = sub { exit 1 };

# --- Helpers ---

# The monitor's view of one node: "reported assigned" states, from the rows
# of `pg_autoctl show state` (name | node | host:port | ... | reported | assigned)
sub node_state
{
	my ($node) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $autoctl, 'show', 'state', '--pgdata', $pgdata{monitor} ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout($timeout));
	for my $row (split /\n/, $out)
	{
		my @col = map { s/^\s+|\s+$//gr } split /\|/, $row;
		return "$col[-2] $col[-1]" if @col > 2 && $col[0] eq $node;
	}
	return '';
}

# Wait until the monitor shows the node in the given reported and assigned
# state; returns what it showed last.
sub wait_state
{
	my ($node, $want) = @_;
	my $deadline = time + $timeout;
	my $state;
	while (time < $deadline)
	{
		$state = node_state($node);
		return $state if $state eq $want;
		usleep(200_000);
	}
	return $state;
}

# Run SQL on a node through its socket; dies on error, returns the output.
sub sql
{
	my ($node, $query) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
			'-h', $sockdir, '-p', $port{$node}, '-d', 'postgres', '-c', $query
		],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout($timeout))
	  or die "SQL on $node failed: $err\n$query";
	chomp $out;
	return $out;
}

# Wait until a query returns t on a node (errors count as not yet)
sub poll
{
	my ($node, $query) = @_;
	my $deadline = time + $timeout;
	while (time < $deadline)
	{
		my $r = eval { sql($node, $query) };
		return 1 if defined $r && $r eq 't';
		usleep(200_000);
	}
	return 0;
}

# --- The monitor and two nodes ---

# The monitor's and the first node's data directories are made here without
# fsync, as the tests' other servers are; pg_autoctl adopts them.
my @initdb = map {
	[ 'initdb', '-D', $pgdata{$_}, '-A', 'trust', '-N', '-E', 'UTF8', '--no-locale' ],
	  '>', "$dir/initdb_$_.log", '2>&1'
} qw(monitor node1);
IPC::Run::run(@initdb[ 0 .. 3 ], '&', @initdb[ 4 .. 7 ]) or BAIL_OUT('initdb failed');

ok( autoctl(
		'create_monitor.log', 'create', 'monitor',
		'--pgctl', "$bindir/pg_ctl",
		'--pgdata', $pgdata{monitor},
		'--pgport', $port{monitor},
		'--hostname', '127.0.0.1',
		'--auth', 'trust', '--no-ssl'),
	'pg_autoctl creates the monitor');
autoctl('config.log', 'config', 'set', '--pgdata', $pgdata{monitor},
	'postgresql.listen_addresses', '127.0.0.1');

# pg_autoctl's include comes first in postgresql.conf, so what is appended
# once it is there wins.  Its tuning takes a quarter of the machine's memory
# for shared_buffers: the tests' servers need far less.
my $small = "shared_buffers = 32MB\nwork_mem = 4MB\nmaintenance_work_mem = 64MB\n";

# The monitor checks the nodes every second and gives up on one after a
# retry half a second later (a dead node refuses connections at once) and 3 s
# without news from its keeper; a primary that does not answer is not waited
# for beyond 2 s.
append_to_file(
	"$pgdata{monitor}/postgresql.conf", $small . q(
pgautofailover.health_check_period = 1000
pgautofailover.health_check_retry_delay = 500
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_timeout = 2000
pgautofailover.node_considered_unhealthy_timeout = 3000
pgautofailover.primary_demote_timeout = 2000
pgautofailover.startup_grace_period = 1000
));
start_service('monitor');

# Register node $1 with the monitor (the second one is cloned from the
# primary with pg_basebackup by pg_autoctl)
sub create_node
{
	my ($node) = @_;
	return autoctl(
		"create_$node.log", 'create', 'postgres',
		'--pgctl', "$bindir/pg_ctl",
		'--pgdata', $pgdata{$node},
		'--pgport', $port{$node},
		'--listen', '127.0.0.1',
		'--hostname', '127.0.0.1',
		'--name', $node,
		'--dbname', 'postgres',
		'--monitor', $monitor_uri,
		'--auth', 'trust', '--no-ssl');
}

ok(create_node('node1'), 'pg_autoctl creates the first node');
# idem preloaded (with pg_stat_statements, which pg_autoctl's include
# preloads and this line would otherwise drop), its purge every second;
# node2's copy of the data directory brings the same settings.
append_to_file(
	"$pgdata{node1}/postgresql.conf", $small . q(
shared_preload_libraries = 'pg_stat_statements,idem'
idem.database = 'postgres'
idem.purge_interval = '1s'
));
start_service('node1');
is(wait_state('node1', 'single single'), 'single single', 'node1 is a single primary');
ok(poll('node1', 'SELECT NOT pg_is_in_recovery()'), 'node1 takes connections');

# pay(k): a payment in the in-transaction mode; the charge id (from the
# stored response for a replay), the claim's token, and whether it replayed.
sql('node1', q{
CREATE EXTENSION idem;
CREATE TABLE ledger (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
CREATE INDEX ON ledger (key);
CREATE FUNCTION pay(k text, OUT charge bigint, OUT token bigint, OUT replayed boolean)
LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idem_claim(k, idem_fingerprint('{"amount": 100}'));
    token := coalesce(c.token, 0);
    IF c.status = 'claimed' THEN
        INSERT INTO ledger (key, amount) VALUES (k, 100) RETURNING id INTO charge;
        PERFORM idem_complete(k, jsonb_build_object('charge', charge));
        replayed := false;
    ELSIF c.status = 'completed' THEN
        charge := (c.response->>'charge')::bigint;
        replayed := true;
    ELSE
        RAISE EXCEPTION 'unexpected claim status % for %', c.status, k;
    END IF;
END $$;
});

# pg_basebackup waits for a spread checkpoint: let it find little to write
sql('node1', 'CHECKPOINT');
ok(create_node('node2'), 'pg_autoctl creates the second node as a standby');
start_service('node2');
is(wait_state('node2', 'secondary secondary'), 'secondary secondary', 'node2 is a secondary');
is(wait_state('node1', 'primary primary'), 'primary primary', 'node1 is the primary');
is( sql('node1', 'SHOW synchronous_standby_names'),
	'ANY 1 (pgautofailover_standby_2)',
	'pg_auto_failover made the standby synchronous');
ok(poll('node1', "SELECT sync_state = 'quorum' FROM pg_stat_replication"),
	'and it is in the quorum: a commit is acknowledged once node2 has it');

# --- The purge worker runs on the primary only ---

my $idem_procs = "SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem purge %'";

# Wait until the purge launcher runs on a node
sub launcher_runs
{
	my ($node) = @_;
	return poll($node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'");
}

ok(launcher_runs('node1'), 'the purge launcher runs on the primary');
ok(poll('node1', 'SELECT last_purge_at IS NOT NULL FROM idem_stats'),
	'and purges there every second');
is(sql('node2', 'SELECT pg_is_in_recovery()'), 't', 'node2 is in recovery');
is(sql('node2', $idem_procs), '0', 'no idem purge launcher or worker runs on the standby');
is(sql('node2', 'SELECT count(*) FROM idem_stats WHERE last_purge_at IS NOT NULL'),
	'0', 'and the standby has never purged');

# --- A two-phase attempt in flight across the failover ---

my $t2p = sql('node1', "SELECT token FROM idem_claim('a-2p', '\\x02', lease => '10 min')");
sql('node1',
	"SELECT idem_checkpoint('a-2p', 'charged', '{\"charge\": \"ch_7\"}', token => $t2p)");

# --- The storm ---

# Each client pays random keys out of 800 (so many are replays), and after
# any error reconnects through the multi-host string and retries the same
# key; a payment whose COMMIT returned is logged as acknowledged, with the
# port of the server that acknowledged it.
my $client_pl = "$dir/client.pl";
append_to_file(
	$client_pl, q{
use strict;
use warnings;
use DBI;
use IO::Handle;
use Time::HiRes qw(sleep);

my ($id, $dsn, $user, $dir, $seconds) = @ARGV;
my $test = getppid();
my $deadline = time + $seconds;
open my $ack, '>>', "$dir/ack.$id" or die $!;
open STDERR, '>>', "$dir/client.$id.log" or die $!;
$ack->autoflush(1);
srand($id * 7919 + $$);
# $tries: attempts of the current key so far (more than one: a retry)
my ($dbh, $k, $tries, $errors, $conn_errors) = (undef, undef, 0, 0, 0);
# until told to stop, or the test is gone
while (!-e "$dir/stop" && time < $deadline && getppid() == $test)
{
	if (!defined $k)
	{
		$k = 1 + int rand 800;
		$tries = 0;
	}
	$dbh //= eval {
		DBI->connect($dsn, $user, '',
			{ AutoCommit => 1, RaiseError => 1, PrintError => 0 });
	};
	if (!$dbh)
	{
		$conn_errors++;
		sleep 0.1;
		next;
	}
	$tries++;
	my $ok = eval {
		$dbh->begin_work;
		my @r = $dbh->selectrow_array('SELECT charge, token, replayed FROM pay(?)',
			undef, "a-$k");
		$dbh->commit;
		print $ack join(' ', $k, $r[0], $r[1], $r[2] ? 1 : 0, $dbh->{pg_port}, $tries), "\n";
		1;
	};
	if ($ok)
	{
		undef $k;
	}
	else
	{
		$errors++;
		eval { $dbh->disconnect };
		undef $dbh;
	}
}
print STDERR "client $id: $errors failed payments, $conn_errors failed connections\n";
});

my $nclients = 6;
my $dsn =
  "dbi:Pg:dbname=postgres;host=127.0.0.1,127.0.0.1;port=$port{node1},$port{node2};"
  . 'target_session_attrs=read-write;connect_timeout=2';
my @cmds =
  map { [ $^X, $client_pl, $_, $dsn, scalar getpwuid($<), $dir, 3 * $timeout ] } 1 .. $nclients;
$clients = IPC::Run::start((map { ($_, '&') } @cmds[ 0 .. $#cmds - 1 ]), $cmds[-1]);

# Acknowledged payments: client => [ [key, charge, token, replayed, port, tries] ]
sub acked
{
	my %acks;
	for my $id (1 .. $nclients)
	{
		next unless -e "$dir/ack.$id";
		$acks{$id} = [ map { [ split / / ] } grep { /^\d+ \d+ \d+ [01] \d+ \d+$/ }
			  split /\n/, slurp_file("$dir/ack.$id") ];
	}
	return \%acks;
}

ok(poll('node1', 'SELECT count(*) >= 300 FROM ledger'), 'the storm is charging on node1');

# Completed keys that expire 5 s from now, just before the crash: node1
# cannot have purged them, whoever purges them later is node2.
sql('node1', q{
BEGIN;
SELECT count(idem_claim('x-' || i, ttl => '5 s', lease => '5 s')) FROM generate_series(1, 50) i;
SELECT count(idem_complete('x-' || i)) FROM generate_series(1, 50) i;
COMMIT;
});

# --- The primary's machine dies ---

my $crashed_at = Time::HiRes::time();
my $killed = crash_node('node1');
note "killed node1's pg_autoctl group and $killed postgres processes";
my $before = acked();

is(wait_state('node2', 'wait_primary wait_primary'),
	'wait_primary wait_primary', 'pg_auto_failover promotes node2');
note sprintf('node2 promoted %.1f s after the crash', Time::HiRes::time() - $crashed_at);
is(sql('node2', 'SELECT pg_is_in_recovery()'), 'f', 'node2 is out of recovery');

# The clients come back by themselves, through the multi-host string
my $resumed = 0;
my $deadline = time + $timeout;
while (time < $deadline)
{
	my $acks = acked();
	$resumed = grep {
		my $id = $_;
		(grep { $_->[4] == $port{node2} } @{ $acks->{$id} // [] }) >= 20
	} 1 .. $nclients;
	last if $resumed == $nclients;
	usleep(200_000);
}
append_to_file("$dir/stop", '');
$clients->finish;
undef $clients;
note slurp_file("$dir/client.$_.log") for 1 .. $nclients;
is($resumed, $nclients,
	"all $nclients clients resumed paying on node2 through the multi-host string");

# --- What the new primary knows ---

my $acks = acked();
my @all = map { @$_ } values %$acks;
my @on1 = grep { $_->[4] == $port{node1} } @all;
my @on2 = grep { $_->[4] == $port{node2} } @all;
cmp_ok(scalar @on1, '>', 0, 'payments were acknowledged by node1 before the crash');
note scalar(@on1) . ' acknowledged by node1, ' . scalar(@on2) . ' by node2';

# Within what the clients saw, a key always had one charge
my %charge_of;
my $inconsistent = 0;
for my $a (@all)
{
	$charge_of{ $a->[0] } //= $a->[1];
	$inconsistent++ if $charge_of{ $a->[0] } != $a->[1];
}
is($inconsistent, 0, 'every answer a client got for a key named the same charge');
cmp_ok(scalar(grep { $_->[3] && $_->[4] == $port{node2} } @all),
	'>', 0, 'retries on node2 replayed charges');
# The payments the crash interrupted, retried until they were answered
my @retried = grep { $_->[5] > 1 && $_->[4] == $port{node2} } @all;
cmp_ok(scalar @retried, '>', 0,
	'payments in flight at the crash were retried on node2 with the same key and answered');
note scalar(@retried) . ' retried after the crash: '
  . scalar(grep { $_->[3] } @retried) . ' had committed on node1 (replayed), '
  . scalar(grep { !$_->[3] } @retried) . ' had not (charged on node2)';

my $values = join ',', map { "('a-$_', $charge_of{$_})" } sort { $a <=> $b } keys %charge_of;
is( sql(
		'node2', qq{
SELECT count(*) FROM (VALUES $values) a(key, charge),
LATERAL idem_claim(a.key, idem_fingerprint('{"amount": 100}')) c
WHERE c.status <> 'completed' OR (c.response->>'charge')::bigint <> a.charge}),
	'0',
	'every acknowledged payment answers completed with its response on node2: '
	  . scalar(keys %charge_of) . ' keys');
is( sql(
		'node2', qq{
SELECT count(*) FROM (VALUES $values) a(key, charge)
WHERE (SELECT count(*) FROM ledger l WHERE l.key = a.key) <> 1
   OR NOT EXISTS (SELECT FROM ledger l WHERE l.key = a.key AND l.id = a.charge)}),
	'0',
	'every acknowledged payment was charged exactly once, with the acknowledged charge');
is(sql('node2', 'SELECT count(*) FROM (SELECT key FROM ledger GROUP BY key HAVING count(*) > 1) d'),
	'0', 'no key was charged twice');
is( sql(
		'node2', q{
SELECT count(*) FROM ledger l LEFT JOIN idem.keys k ON k.scope = '' AND k.key = l.key
WHERE k.state IS DISTINCT FROM 'completed'
   OR (k.response->>'charge')::bigint IS DISTINCT FROM l.id}),
	'0',
	'every charge belongs to a key completed with it: no charge without its key');

# The token sequence did not go back
my $max_acked = 0;
$max_acked = $_->[2] > $max_acked ? $_->[2] : $max_acked for @all;
cmp_ok(sql('node2', "SELECT token FROM idem_claim('a-after', '\\x03')"),
	'>', $max_acked, 'a new token on node2 is above every token the clients saw');

# --- The two-phase attempt goes on ---

is(sql('node2', "SELECT state, attempt, checkpoint FROM idem_lookup('a-2p')"),
	'processing|1|charged', 'node2 has the attempt in flight with its checkpoint');
is(sql('node2', "SELECT status, attempt FROM idem_claim('a-2p', '\\x02')"),
	'in_progress|1', 'and honours its lease');
sql('node2', "SELECT idem_complete('a-2p', '{\"charge\": \"ch_7\"}', token => $t2p)");
is(sql('node2', "SELECT status, response FROM idem_claim('a-2p', '\\x02')"),
	'completed|{"charge": "ch_7"}',
	'its worker completes it by its fencing token on node2');

# --- The purge follows the primary ---

ok(launcher_runs('node2'), 'the purge launcher runs on node2 once promoted');
ok(poll('node2', 'SELECT purged >= 50 FROM idem_stats'),
	"node2's own worker purged the keys that expired after the crash");
is(sql('node2', "SELECT count(*) FROM idem.keys WHERE key LIKE 'x-%'"), '0', 'they are gone');

# The old primary comes back: pg_autoctl rewinds it and makes it a standby
start_service('node1');
is(wait_state('node1', 'secondary secondary'), 'secondary secondary',
	'node1 rejoins as a secondary');
is(wait_state('node2', 'primary primary'), 'primary primary', 'node2 is the primary');
ok(poll('node2', "SELECT sync_state = 'quorum' FROM pg_stat_replication"),
	'node1 is node2\'s synchronous standby');
# A primary starts the launcher as soon as it runs; give it a moment
sleep 2;
is(sql('node1', 'SELECT pg_is_in_recovery()'), 't', 'node1 is in recovery');
is(sql('node1', $idem_procs), '0', 'no idem purge launcher or worker runs on the new standby');
is(sql('node1', 'SELECT count(*) FROM idem_stats WHERE purged > 0 OR last_purge_at IS NOT NULL'),
	'0', 'and it has not purged');
my $charges = sql('node2', 'SELECT count(*) FROM ledger');
ok(poll('node1', "SELECT count(*) = $charges FROM ledger"), 'node1 has every charge of node2');

# Payments go on, synchronously replicated again
is(sql('node2', "SELECT charge > 0 FROM pay('a-final')"), 't', 'payments go on on node2');

my $panics = 0;
for my $log (map { glob "$pgdata{$_}/log/*.log" } qw(node1 node2))
{
	$panics++ if slurp_file($log) =~ /PANIC|TRAP:/;
}
is($panics, 0, 'no PANIC or assertion failure on either node');

done_testing();
