# Set-up shared by idem's TAP tests: a started node with idem preloaded, a
# DBI session to it, the SQL of sqlstate_of(), which the tests install where
# they need it, the check that skips a test whose extension this server
# lacks, a pgbouncer in front of a node, and a storm of forked clients that
# start together.
package IdemTest;

use strict;
use warnings;

use Exporter 'import';
use IO::Socket::INET;
use IPC::Run;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Storable qw(retrieve store);
use Test::More;
use Time::HiRes qw(usleep);

our @EXPORT = qw(idem_node idem_dbi require_extension require_packaged_server older_servers
  idem_pgbouncer fork_storm cron_jobs_every_second $SQLSTATE_OF $PGBOUNCER);

# Debian's pgbouncer: the tests that need it skip without it.
our $PGBOUNCER = '/usr/sbin/pgbouncer';

# sqlstate_of(q) runs the statement q and returns its SQLSTATE, or ok.
our $SQLSTATE_OF = q{
CREATE FUNCTION sqlstate_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
};

# A started node with idem preloaded and its purge worker paused (tests that
# count purged rows run idem_purge themselves); $conf adds lines to
# postgresql.conf, and %init goes to init().
sub idem_node
{
	my ($name, $conf, %init) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(%init);
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'idem'\nidem.purge_interval = 0\n" . ($conf // ''));
	$node->start;
	return $node;
}

# A DBI session to the database postgres of $node that reports errors
# instead of raising them, and sends each statement as its text (no
# server-side prepare) unless the DBD::Pg attributes that follow say
# otherwise; a statement_timeout of 60 s guards against a hang.
sub idem_dbi
{
	my ($node, %attrs) = @_;
	require DBI;
	my $dbh = DBI->connect(
		'dbi:Pg:dbname=postgres;host=' . $node->host . ';port=' . $node->port,
		'', '',
		{
			AutoCommit => 1,
			RaiseError => 0,
			PrintError => 0,
			PrintWarn => 0,
			pg_server_prepare => 0,
			%attrs
		}) or die "cannot connect: $DBI::errstr";
	$dbh->do("SET statement_timeout = '60s'") or die $dbh->errstr;
	return $dbh;
}

# The older servers with idem that the tests across major versions carry
# data from (IDEM_KITS, "15=KIT 17=KIT", which test/matrix.sh sets on 18), as
# [major, install path] pairs, oldest first; none elsewhere.  The libraries
# those servers need and this system lacks (each kit's compat-lib) go on
# the library path of the whole test, since pg_upgrade runs the old binaries
# with its own environment; the newest kit's first, so that where two carry
# the same soname (libxml2.so.2) the newer build serves both.
sub older_servers
{
	my @kits = map { [ split /=/, $_, 2 ] } split ' ', $ENV{IDEM_KITS} // '';
	my $libs = join(':', map { "$_->[1]/compat-lib" } reverse @kits);
	$ENV{LD_LIBRARY_PATH} = join(':', $libs, $ENV{LD_LIBRARY_PATH} // ())
	  if @kits && ($ENV{LD_LIBRARY_PATH} // '') !~ /^\Q$libs\E(:|$)/;
	return map { [ $_->[0], "$_->[1]/usr/lib/postgresql/$_->[0]" ] } @kits;
}

# Skip the test on a server built from source (the assert and sanitizer
# builds), where $why says it adds nothing; returns the server's major.
sub require_packaged_server
{
	my ($why) = @_;
	my ($major) = `pg_config --version` =~ /PostgreSQL (\d+)/;
	my $debian = `/usr/lib/postgresql/$major/bin/pg_config --configure 2>/dev/null`;
	plan skip_all => "run on Debian's servers, not on this build of $major from source: $why"
	  unless $debian ne '' && $debian eq `pg_config --configure`;
	return $major;
}

# Move node $node's pg_cron jobs named like $like (SQL LIKE) to a schedule
# of one second, where pg_cron (1.5 and later) takes one, so that they run
# at once rather than at the next minute; earlier ones keep theirs.
sub cron_jobs_every_second
{
	my ($node, $like) = @_;
	my ($cmajor, $cminor) = $node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'") =~ /^(\d+)\.(\d+)/;
	return if $cmajor == 1 && $cminor < 5;
	$node->safe_psql('postgres',
		qq{SELECT count(cron.alter_job(jobid, schedule => '1 seconds')) FROM cron.job WHERE jobname LIKE '$like'});
	return;
}

# Skip the whole test unless extension $name is installed for the server
# the tests run on.  Debian's extension packages are built for Debian's
# server: a server built from source (the assert builds) has none of them.
# $package names Debian's package, NN standing for the server's major; the
# reason says when apt's sources have no such package (a server newer than
# its extensions' packages, as 19 from experimental).
sub require_extension
{
	my ($name, $package) = @_;
	my $sharedir = `pg_config --sharedir`;
	chomp $sharedir;
	return if -e "$sharedir/extension/$name.control";
	my ($major) = `pg_config --version` =~ /(\d+)/;
	$package =~ s/NN/$major/;
	my $configure = `pg_config --configure`;
	my $packaged = `apt-cache policy $package 2>/dev/null` =~ /Candidate: [^(]/;
	plan skip_all => $configure =~ /--enable-cassert/
	  ? "$name is not installed for this server, built from source ($package is built for Debian's server)"
	  : $packaged ? "$name is not installed ($package)"
	  : "$name is not installed: the apt sources have no $package for PostgreSQL $major yet";
	return;
}

# The pgbouncers started, each with the process that started it: stopped
# however the test ends, by that process only (not by a forked client),
# keeping the test's exit status.
my @pgbouncers;

END
{
	local $?;
	$_->[0]->kill_kill for grep { $_->[1] == $$ } @pgbouncers;
}

# Start pgbouncer in front of the database postgres of $node, listening on
# 127.0.0.1 only, with its configuration, log and output in $dir; returns
# its port, once it accepts connections (else the test bails out with its
# output), and its IPC::Run harness: kill_kill stops it, signal('HUP')
# reloads $dir/pgbouncer.ini (whose last section is [pgbouncer], for lines
# appended to it).  %settings: users, the logins it lets in (trust);
# databases, more pools of that database, each "NAME [OPTION=VALUE ...]";
# every other key a line of its [pgbouncer] section.  pgbouncer 1.21 added
# max_prepared_statements (named prepared statements tracked across server
# connections) and 1.22 turned it on by default: it is off here, so that
# every version passes named statements through as 1.18 does.
sub idem_pgbouncer
{
	my ($node, $dir, %settings) = @_;
	my @users = @{ delete $settings{users} };
	my @databases = ('postgres', @{ delete $settings{databases} // [] });
	my ($major, $minor) = `$PGBOUNCER --version` =~ /PgBouncer (\d+)\.(\d+)/;
	note("PgBouncer $major.$minor");
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $backend = 'host=' . $node->host . ' port=' . $node->port . ' dbname=postgres';
	%settings = (
		listen_addr => '127.0.0.1',
		listen_port => $port,
		unix_socket_dir => '',
		auth_type => 'trust',
		auth_file => "$dir/userlist.txt",
		logfile => "$dir/pgbouncer.log",
		pidfile => "$dir/pgbouncer.pid",
		($major > 1 || $minor >= 21 ? (max_prepared_statements => 0) : ()),
		%settings);

	mkdir $dir;
	# the tests share tmp_check: not what an earlier one wrote there
	unlink "$dir/userlist.txt", "$dir/pgbouncer.ini";
	append_to_file("$dir/userlist.txt", join('', map { qq("$_" ""\n) } @users));
	append_to_file("$dir/pgbouncer.ini",
		"[databases]\n"
		  . join('', map { s/^(\S+)/$1 = $backend/r . "\n" } @databases)
		  . "[pgbouncer]\n"
		  . join('', map { "$_ = $settings{$_}\n" } sort keys %settings));
	my $bouncer = IPC::Run::start([ $PGBOUNCER, "$dir/pgbouncer.ini" ],
		'<', \undef, '>', "$dir/pgbouncer.out", '2>&1');
	push @pgbouncers, [ $bouncer, $$ ];

	my $up;
	for (1 .. 100)
	{
		last if $up = IO::Socket::INET->new("127.0.0.1:$port");
		usleep(100_000);
	}
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok($up, 'pgbouncer accepts connections')
	  or BAIL_OUT('pgbouncer did not start: ' . slurp_file("$dir/pgbouncer.out"));
	return ($port, $bouncer);
}

# The storms run so far, which number their files
my $storms = 0;

# Run $body->($i, $setup->($i)) in $n forked clients, $i from 1 to $n, all
# starting their bodies together: each runs $setup first, if given (to
# connect, say), and the bodies start once every client is ready.  Returns
# what each body returned (passed back in a file in $dir), in order; undef
# for a client that died, whose error is shown.
sub fork_storm
{
	my ($n, $dir, $body, $setup) = @_;
	my $storm = ++$storms;
	pipe(my $ready_r, my $ready_w) or die "pipe: $!";
	pipe(my $go_r, my $go_w) or die "pipe: $!";
	my @kids;
	for my $i (1 .. $n)
	{
		my $pid = fork() // die "fork: $!";
		if ($pid == 0)
		{
			close $_ for $ready_r, $go_w;
			my $ok = eval {
				my @setup = $setup ? $setup->($i) : ();
				close $ready_w;
				# wait for the start: the parent closes the pipe
				my $dummy = <$go_r>;
				store([ scalar $body->($i, @setup) ], "$dir/storm-$storm-$i");
				1;
			};
			diag("client $i of the storm: $@") unless $ok;
			POSIX::_exit($ok ? 0 : 1);
		}
		push @kids, $pid;
	}
	close $_ for $go_r, $ready_w;
	# every client has closed its end once it is ready (or has died)
	my $dummy = <$ready_r>;
	close $go_w;
	return map {
		waitpid($kids[ $_ - 1 ], 0);
		$? == 0 ? retrieve("$dir/storm-$storm-$_")->[0] : undef;
	} 1 .. $n;
}

1;
