# The application drivers behind a real pgbouncer 1.18 in transaction
# pooling (or a later one with max_prepared_statements = 0, as 1.18 always
# behaves), each with its defaults and with its
# setting for the pooler: pgjdbc, psycopg 3, pgx v4 and node-pg run the same
# payment (BEGIN; idem_claim; INSERT the charge; idem_complete; COMMIT) from
# small programs under test/drivers.  With the defaults: pgjdbc before
# 42.7.5 cannot connect until the pool ignores extra_float_digits; the named
# statements of every driver fail once clients share server connections
# (42P05 "already exists", 26000 "does not exist"), pgjdbc's also leave a
# transaction that its ROLLBACK could not end (25P02).  Before 42.7.7,
# pgjdbc names BEGIN too, and a storm of its payments leaves keys committed
# as processing with no charge: a BEGIN run as another client's COMMIT or
# ROLLBACK leaves the claim alone in its transaction.  Paying with
# idem_http_claim and idem_http_respond (idem 1.4) instead, the same storms
# leave no such key: the claim is refused at commit (25P01), and no key is
# charged twice.  From 42.7.7 BEGIN is always BEGIN, and neither leaves one.
# With the settings each storm books exactly one charge per key.  (Session
# SET through the pooler: 110_pgbouncer.pl.)
use strict;
use warnings;

use DBI;
use File::Copy qw(copy);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

require_packaged_server('its drivers make the calls that the regression tests make on this build');

plan skip_all => 'pgbouncer is not installed' unless -x $PGBOUNCER;

my $drivers = "$FindBin::RealBin/../../drivers";
my $build = PostgreSQL::Test::Utils::tempdir;

my $node = idem_node('drivers', "max_connections = 40\n");
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION idem;
CREATE TABLE payments (id bigserial PRIMARY KEY, idem_key text NOT NULL, amount numeric NOT NULL);
});

sub sql { return $node->safe_psql('postgres', $_[0]); }

# --- pgbouncer: transaction pooling, 3 server connections per pool -----------
# The storms use the pool of postgres; each driver's clash a fresh one of its
# own (clash_LANG), as the clash counts on which server connection a client
# gets: pgbouncer hands out the one released last.

my $dir = "${PostgreSQL::Test::Utils::tmp_check}/pgbouncer";
my ($port, $bouncer) = idem_pgbouncer(
	$node, $dir,
	users => ['postgres'],
	databases => [ map { "clash_$_" } qw(java python go node) ],
	pool_mode => 'transaction',
	default_pool_size => 3,
	admin_users => 'postgres');

# pgbouncer's console
sub console
{
	return DBI->connect("dbi:Pg:host=127.0.0.1;port=$port;dbname=pgbouncer",
		'postgres', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0, pg_server_prepare => 0 });
}

sub url { return "postgresql://postgres\@127.0.0.1:$port/$_[0]"; }

# Run a driver's program, with its setting for the pooler if $fix; returns
# what it printed
sub run_driver
{
	my ($fix, @cmd) = @_;
	local $ENV{PGBOUNCER} = $fix ? 1 : 0;
	IPC::Run::run(\@cmd, '<', \undef, '>', \my $out, '2>', \my $err, IPC::Run::timeout(600));
	note("stderr of @cmd[0 .. 1]: $err") if $err ne '';
	return $out;
}

# A storm with the pooler setting: $clients clients make $payments payments
# each on $keys keys, together.  Every payment ends claimed or replayed, one
# per key claimed, one charge per key, every key completed.
sub storm_ok
{
	my ($who, $cmd, $prefix, $clients, $payments, $keys) = @_;
	my $out = run_driver(1, @$cmd, url('postgres'), 'storm', $prefix, $clients, $payments, $keys);
	my @errors = $out =~ /^error (.*)$/mg;
	is(scalar @errors, 0, "$who: no payment of the storm failed")
	  or diag(join("\n", @errors[ 0 .. ($#errors < 4 ? $#errors : 4) ]));
	my %status;
	$status{$_}++ for $out =~ /^\Q$prefix\E-\d+ (\S+)$/mg;
	my $total = $clients * $payments;
	is( sprintf('claimed %d, replayed %d', $status{claimed} // 0, $status{completed} // 0),
		sprintf('claimed %d, replayed %d', $keys, $total - $keys),
		"$who: of $total payments on $keys keys, one per key claimed, the others replayed");
	is( sql(qq{SELECT count(*) || ' ' || count(*) FILTER (WHERE state = 'completed'
	             AND (SELECT count(*) FROM payments p WHERE p.idem_key = k.key) = 1)
	           FROM idem.keys k WHERE key ~ '^$prefix-[0-9]+\$'}),
		"$keys $keys", "$who: every key completed with exactly one charge");
	return;
}

# --- pgjdbc ----------------------------------------------------------------------

SKIP:
{
	skip 'pgjdbc or a JDK is not installed (Debian packages libpostgresql-jdbc-java, default-jdk-headless)', 18
	  unless -f '/usr/share/java/postgresql.jar' && system('javac -version >/dev/null 2>&1') == 0;
	my @java = ('java', '-cp', '/usr/share/java/postgresql.jar', "$drivers/java/Pay.java");

	# Two changes of pgjdbc show here (Debian 12 has 42.5, Debian 13 42.7.7):
	# from 42.7.5 it sends extra_float_digits to PostgreSQL 12 and later with
	# a SET once connected, no longer in the startup packet; from 42.7.7 it
	# sends BEGIN with the simple protocol, never as a named statement.
	my ($jdbc) = `java -jar /usr/share/java/postgresql.jar` =~ /PostgreSQL JDBC Driver (\d+\.\d+\.\d+)/;
	$jdbc //= '0.0.0';
	note("pgjdbc $jdbc");
	my $jdbc_from = sub { return sprintf('%03d%03d%03d', split /\./, $jdbc) ge sprintf('%03d%03d%03d', split /\./, $_[0]); };
	my $set_float_digits = $jdbc_from->('42.7.5');
	my $simple_begin = $jdbc_from->('42.7.7');

	# pgjdbc before 42.7.5 puts extra_float_digits in the startup packet,
	# which pgbouncer refuses unless told to ignore it
	if ($set_float_digits)
	{
		is(run_driver(1, @java, url('clash_java'), 'clash', 'jdbc-start'),
			"shared ok ok\nafter ok\nmoved ok\n",
			"pgjdbc $jdbc connects without ignore_startup_parameters: extra_float_digits comes in a SET");
	}
	else
	{
		is(run_driver(1, @java, url('clash_java'), 'clash', 'jdbc-start'),
			"error 08P01 FATAL: unsupported startup parameter: extra_float_digits\n",
			"pgjdbc $jdbc cannot connect: unsupported startup parameter: extra_float_digits (08P01)");
	}
	# (what the docs say for pgjdbc before 42.7.5; harmless after)
	append_to_file("$dir/pgbouncer.ini", "ignore_startup_parameters = extra_float_digits\n");
	$bouncer->signal('HUP');
	my $ignored = '';
	for (1 .. 100)
	{
		my $c = console();
		($ignored) = map { $_->{value} } grep { $_->{key} eq 'ignore_startup_parameters' }
		  @{ $c->selectall_arrayref('SHOW CONFIG', { Slice => {} }) };
		$c->disconnect;
		last if $ignored eq 'extra_float_digits';
		usleep(50_000);
	}
	is($ignored, 'extra_float_digits', 'pgbouncer reloaded with ignore_startup_parameters = extra_float_digits');

	# pgjdbc prepares COMMIT and ROLLBACK as named statements from their first
	# use, and before 42.7.7 BEGIN too, with the statement that crosses
	# prepareThreshold: b's first COMMIT finds a's S_1 on the server
	# connection.  Its ROLLBACK fails the same way, so its server connection
	# stays in the aborted transaction (25P02 for its next payment).  On a
	# server connection it has not used, a named BEGIN that finds no
	# statement fails outside a transaction, and pgjdbc prepares again and
	# retries; from 42.7.7 BEGIN runs, and the claim's named statement fails
	# inside the transaction (26000).
	is(run_driver(0, @java, url('clash_java'), 'clash', 'jdbc-clash'),
		"shared ok 42P05\@1\nafter 25P02\@1\nmoved " . ($simple_begin ? "26000\@1" : 'ok') . "\n",
		'pgjdbc defaults: 42P05 at the first COMMIT of a second client on the connection, then 25P02, '
		  . ($simple_begin ? '26000 at the claim on another one' : 'BEGIN retried on another one'));
	is(run_driver(1, @java, url('clash_java'), 'clash', 'jdbc-clash-fixed'),
		"shared ok ok\nafter ok\nmoved ok\n", 'pgjdbc with prepareThreshold=0: no failure');

	# A storm of payments on fresh keys with the defaults.  Each client's
	# output lists, before each payment's final status, the errors of its
	# attempts: they go to %seen, the key's list of "SQLSTATE MESSAGE".
	# Returns the count of each SQLSTATE and the orphans, keys committed as
	# processing with no charge, as "KEY LEASE_SECONDS,...".
	my %seen;
	my $defaults_storm = sub {
		my ($prefix) = @_;
		my $out = run_driver(0, @java, url('postgres'), 'storm', $prefix, 16, 30, 480);
		my (%codes, @errors);
		for my $line (split /\n/, $out)
		{
			if ($line =~ /^error ((\S+) .*)/)
			{
				$codes{$2}++;
				push @errors, $1;
				next;
			}
			my ($key) = split / /, $line;
			$seen{$key} = [@errors];
			@errors = ();
		}
		return (\%codes,
			sql(qq{SELECT string_agg(key || ' ' || extract(epoch FROM lease_until - created_at)::int, ',')
			       FROM idem.keys k WHERE key ~ '^$prefix-[0-9]+\$' AND state = 'processing'
			       AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.idem_key = k.key)}));
	};

	# Storms until one leaves an orphan (before 42.7.7; from 42.7.7 three,
	# which leave none)
	my (%codes, @all_orphans, $orphans, $storms);
	for my $n (1 .. ($simple_begin ? 3 : 10))
	{
		$storms = $n;
		(my $codes, $orphans) = $defaults_storm->("jdbc-orphan-$n");
		$codes{$_} += $codes->{$_} for keys %$codes;
		note("pgjdbc defaults, idem_claim, storm $n: orphans: " . ($orphans || 'none'));
		push @all_orphans, $orphans if $orphans ne '';
		last if $orphans ne '' && !$simple_begin;
	}
	note("pgjdbc defaults: SQLSTATEs " . join(' ', map { "$_ x$codes{$_}" } sort keys %codes));
	is(join(' ', grep { $codes{$_} } qw(08P01 25P02 26000 42P05)), '08P01 25P02 26000 42P05',
		'pgjdbc defaults: the storm fails with 42P05, 26000, 25P02 and 08P01');
	my $begin_answered = qr/^08P01 Expected command status BEGIN, got (COMMIT|ROLLBACK)\.$/;
	# the errors of the storms so far that are a BEGIN answered so
	my $answered_begins = sub { return scalar grep { $_ =~ $begin_answered } map { @$_ } values %seen; };
	# the keys of the storms on $prefix charged other than once or not
	# completed
	my $charged_wrong = sub {
		return sql(qq{SELECT string_agg(idem_key, ',') FROM (SELECT idem_key, count(*) FROM payments GROUP BY idem_key) p
		              LEFT JOIN idem.keys k ON k.key = p.idem_key
		              WHERE idem_key ~ '^$_[0]-' AND (count <> 1 OR state IS DISTINCT FROM 'completed')});
	};
	if ($simple_begin)
	{
		# BEGIN is always BEGIN: every claim is in its payment's transaction
		is(join(',', @all_orphans), '',
			"pgjdbc $jdbc defaults: no storm leaves a key committed as processing with no charge");
		is($answered_begins->(), 0, 'and no BEGIN was answered by another client\'s COMMIT or ROLLBACK');
		is($charged_wrong->('jdbc-orphan'), '', 'and every charged key completed, with exactly one charge');
	}
	else
	{
		my @orphans = map { [ split / / ] } split /,/, $orphans;
		ok(@orphans, "pgjdbc $jdbc defaults: a storm leaves a key committed as processing with no charge");
		is(join(',', grep { $_->[1] != 60 } @orphans), '',
			'each orphan is a committed claim with the default lease (idem.lease, 60 s)');
		is( join(',', map { $_->[0] } grep { !grep { $_ =~ $begin_answered } @{ $seen{ $_->[0] } } } @orphans),
			'', 'and each orphan\'s payment had its BEGIN answered by another client\'s COMMIT or ROLLBACK');
	}

	# As many storms (at least 3) paying with idem_http_claim and
	# idem_http_respond: a claim made outside a transaction block without a
	# lease is refused at commit when it is not finished (25P01), so an
	# orphan's claim leaves nothing, and a retry pays.
	my @http_orphans;
	{
		local $ENV{HTTP} = 1;
		for my $n (1 .. ($storms < 3 ? 3 : $storms))
		{
			my ($codes, $orphans) = $defaults_storm->("jdbc-http-$n");
			note("pgjdbc defaults, idem_http_claim, storm $n: 25P01 x" . ($codes->{'25P01'} // 0)
				  . ', orphans: ' . ($orphans || 'none'));
			push @http_orphans, $orphans if $orphans ne '';
		}
	}
	is(join(',', @http_orphans), '', 'idem_http_claim, pgjdbc defaults: no key left processing with no charge');
	my @refused = grep {
		my $key = $_;
		grep { /^25P01 ERROR: key "\Q$key\E" was claimed outside a transaction block and not finished$/ } @{ $seen{$key} }
	} keys %seen;
	if ($simple_begin)
	{
		is(join(',', @refused), '',
			"idem_http_claim, pgjdbc $jdbc defaults: no claim runs outside a transaction block (no 25P01)");
		is($answered_begins->(), 0, 'and no BEGIN was answered by another client\'s COMMIT or ROLLBACK');
	}
	else
	{
		ok(@refused,
			"idem_http_claim, pgjdbc $jdbc defaults: claims run outside a transaction block are refused at commit (25P01)");
		is( join(',', grep { !grep { $_ =~ $begin_answered } @{ $seen{$_} } } @refused),
			'', 'and each refused payment had its BEGIN answered by another client\'s COMMIT or ROLLBACK');
	}
	is($charged_wrong->('jdbc-http'), '',
		'idem_http_claim, pgjdbc defaults: every charged key completed, with exactly one charge');

	storm_ok('pgjdbc with prepareThreshold=0, fresh keys', \@java, 'jdbc-fixed-fresh', 16, 30, 480);
	storm_ok('pgjdbc with prepareThreshold=0', \@java, 'jdbc-fixed', 12, 20, 40);
}

# --- psycopg 3 ---------------------------------------------------------------------

SKIP:
{
	# Debian's psycopg is installed for Debian's Python
	my @python = ('/usr/bin/python3', "$drivers/python/pay.py");
	skip 'psycopg 3 is not installed (Debian package python3-psycopg)', 5
	  unless system("$python[0] -c 'import psycopg' 2>/dev/null") == 0;

	# prepare_threshold 5: the 6th execution of a query prepares it as _pg3_0
	is(run_driver(0, @python, url('clash_python'), 'clash', 'psycopg-clash'),
		"shared ok 42P05\@6\nafter ok\nmoved 26000\@1\n",
		'psycopg defaults: 42P05 at the 6th payment of a second client, 26000 on another server connection');
	is(run_driver(1, @python, url('clash_python'), 'clash', 'psycopg-clash-fixed'),
		"shared ok ok\nafter ok\nmoved ok\n", 'psycopg with prepare_threshold=None: no failure');
	storm_ok('psycopg with prepare_threshold=None', \@python, 'psycopg-fixed', 12, 20, 40);
}

# --- pgx v4 ---------------------------------------------------------------------------

SKIP:
{
	skip 'Go or pgx v4 is not installed (Debian packages golang-go, golang-github-jackc-pgx-v4-dev)', 6
	  unless -d '/usr/share/gocode/src/github.com/jackc/pgx/v4' && system('go version >/dev/null 2>&1') == 0;
	# offline, in GOPATH mode, from Debian's Go packages
	local $ENV{GO111MODULE} = 'off';
	local $ENV{GOPATH} = '/usr/share/gocode';
	local $ENV{GOCACHE} = "$build/go-cache";
	ok(system('go', 'build', '-o', "$build/pay", "$drivers/go/pay.go") == 0,
		'the pgx program builds offline from Debian\'s Go packages')
	  or skip 'the pgx program does not build', 5;
	my @go = ("$build/pay");

	# the statement cache prepares each query as a named statement at its
	# first execution (names unique per connection of a process)
	is(run_driver(0, @go, url('clash_go'), 'clash', 'pgx-clash'),
		"shared ok ok\nafter ok\nmoved 26000\@1\n",
		'pgx defaults: 26000 on another server connection');
	is(run_driver(1, @go, url('clash_go'), 'clash', 'pgx-clash-fixed'),
		"shared ok ok\nafter ok\nmoved ok\n", 'pgx with prefer_simple_protocol=true: no failure');
	storm_ok('pgx with prefer_simple_protocol=true', \@go, 'pgx-fixed', 12, 20, 40);
}

# --- node-pg ----------------------------------------------------------------------------

SKIP:
{
	skip 'Node.js or npm is not installed (Debian packages nodejs, npm)', 5
	  unless system('node --version >/dev/null 2>&1') == 0 && system('npm --version >/dev/null 2>&1') == 0;
	# pg as the example service pins it, installed into the build directory
	my $modules = "$build/node";
	mkdir $modules;
	copy("$FindBin::RealBin/../../../examples/node/$_", "$modules/$_") or die "copy $_: $!"
	  for qw(package.json package-lock.json);
	my $npm = system("cd '$modules' && npm_config_cache='$build/npm-cache' npm ci --no-audit --no-fund >/dev/null 2>&1");
	skip 'npm could not install pg from the registry', 5 if $npm != 0;
	local $ENV{NODE_PATH} = "$modules/node_modules";
	my @js = ('node', "$drivers/node/pay.js");

	# a named query is parsed once per connection, under the same name by
	# every client
	is(run_driver(0, @js, url('clash_node'), 'clash', 'node-clash'),
		"shared ok 42P05\@1\nafter 42P05\@1\nmoved 26000\@1\n",
		'node-pg named queries: 42P05 for a second client on the connection, 26000 on another one');
	is(run_driver(1, @js, url('clash_node'), 'clash', 'node-clash-fixed'),
		"shared ok ok\nafter ok\nmoved ok\n", 'node-pg unnamed queries: no failure');
	storm_ok('node-pg unnamed queries', \@js, 'node-fixed', 12, 20, 40);
}

$bouncer->kill_kill;
$node->stop;
done_testing();
