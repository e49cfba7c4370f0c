# The SQL edition (idem_sql) installed the three ways a managed platform
# allows, each by a role that is not a superuser, on a server without
# idem's library (not preloaded, and not in its lib directory: the server
# runs from a copy of its tree without idem's files):
#   tle     through pg_tle: pgtle.install_extension and CREATE EXTENSION by
#           the database's owner, a member of pgtle_admin; then an update
#           to a next version through pgtle.install_update_path and ALTER
#           EXTENSION ... UPDATE
#   script  the plain script idem_sql.sql, run with psql by the database's
#           owner after CREATE EXTENSION pgcrypto
#   files   make install of idem_sql/ into the server's tree, and CREATE
#           EXTENSION idem_sql CASCADE by the database's owner
# In each database: a storm of retried payments charges every key once;
# pg_cron's job, scheduled by that owner, purges the expired keys; the keys
# exported there (idem_keys_export) are imported into the C edition (another
# server, with idem's library) and replay there, and the C edition's keys
# are imported there and replay.
#
# pg_tle comes from PG_TLE_SRC (a source tarball or tree), or else from the
# newest pg_tle-*.tar.gz in the shared/vendor directory beside the
# checkout; it is built into the test's own directory (a few seconds).
# Where there is none, or it does not build for this server, the pg_tle
# part is skipped and says why.  pg_cron before 1.5 runs its jobs at minute
# boundaries only: the purge is scheduled first, and checked last (later
# pg_cron runs it every second).
#
# It runs on the servers the SQL edition is supported on, Debian's 15 and
# 18 (the README's table); on the others it skips: the edition has no C
# code for the assert and sanitizer builds to check, and 17 and 19 would
# repeat 15's and 18's run.
use strict;
use warnings;

use File::Basename qw(basename dirname);
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;
use IPC::Run;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;
use PayClients;

my $major = require_packaged_server('the SQL edition has no C code for it to check');
plan skip_all => "the SQL edition is tested on Debian's PostgreSQL 15 and 18, not $major"
  unless $major == 15 || $major == 18;
require_extension('pg_cron', 'postgresql-NN-cron');

my $checkout = "$FindBin::RealBin/../../..";
my $tmp = PostgreSQL::Test::Utils::tempdir('sql_edition');
my $nclients = 4;

# --- A server tree without idem ---

# The pg_config of the server the tests run on (PATH's; under make test, a
# copy of the server's tree with idem installed), and the one to build
# against: PG_CONFIG (the tree the copy was made of, whose headers are
# there), or PATH's where it has the headers.
sub config_of
{
	my ($pg_config, $what) = @_;
	my $v = `"$pg_config" --$what`;
	chomp $v;
	return $v;
}
my ($build_config) = grep { -f config_of($_, 'includedir-server') . '/postgres.h' }
  ($ENV{PG_CONFIG} // ()), 'pg_config';
$build_config //= 'pg_config';
my %run = map { $_ => config_of('pg_config', $_) } qw(bindir pkglibdir sharedir);
my %built = map { $_ => config_of($build_config, $_) } qw(bindir pkglibdir sharedir);
die "the server's bindir $built{bindir} does not end in /bin" unless $built{bindir} =~ m{/bin$};

# The tree: the programs copied (PostgreSQL finds its lib and share
# directories from where they are), every other file linked, but idem's
# (and idem_sql's: pg_tle refuses an extension whose control file exists);
# laid out as the build's paths under $root, where make install
# DESTDIR=$root puts pg_tle and idem_sql.
my $root = "$tmp/root";
sub mirror
{
	my ($from, $to, $skip) = @_;
	make_path($to);
	for my $f (glob("$from/*"))
	{
		my $b = basename($f);
		next if $b =~ $skip;
		if (-d $f && $b =~ /^(extension|bitcode)$/)
		{
			mirror($f, "$to/$b", $skip);
			next;
		}
		symlink($f, "$to/$b") or die "symlink $to/$b: $!";
	}
	return;
}
make_path("$root$built{bindir}");
system('cp', '-a', "$run{bindir}/.", "$root$built{bindir}/") == 0 or die 'cannot copy the programs';
mirror($run{pkglibdir}, "$root$built{pkglibdir}", qr/^idem(_sql)?(\.so|\.index\.bc)?$/);
mirror($run{sharedir}, "$root$built{sharedir}", qr/^idem(_sql)?(\.control|--.*)$/);
my $install_path = dirname("$root$built{bindir}");

# make install of the source tree $src into the tree; its output in $log;
# false on failure.
sub install_into_tree
{
	my ($src, $log, @vars) = @_;
	return system("make -C '$src' -s PG_CONFIG='$build_config' @vars install DESTDIR='$root' >'$log' 2>&1")
	  == 0;
}

# pg_tle: the source, and its build (an empty reason when it is installed)
sub pg_tle_source
{
	return $ENV{PG_TLE_SRC} if $ENV{PG_TLE_SRC};
	my @tarballs = sort glob("$checkout/../shared/vendor/pg_tle-*.tar.gz");
	return $tarballs[-1];
}
my $tle_why = '';
my $tle_src = pg_tle_source();
if (!$tle_src || !-e $tle_src)
{
	$tle_why = 'no pg_tle source (set PG_TLE_SRC, or put pg_tle-*.tar.gz in shared/vendor beside the checkout)';
}
else
{
	my $dir = "$tmp/pg_tle";
	make_path($dir);
	my $unpacked = -d $tle_src
	  ? system('cp', '-a', "$tle_src/.", "$dir/") == 0
	  : system('tar', '-xzf', $tle_src, '-C', $dir, '--strip-components=1') == 0;
	if (!$unpacked)
	{
		$tle_why = "cannot unpack $tle_src";
	}
	# (no JIT bitcode: the server needs the library only)
	elsif (!install_into_tree($dir, "$tmp/pg_tle.log", 'with_llvm=no'))
	{
		my @log = split /\n/, slurp_file("$tmp/pg_tle.log");
		$tle_why = 'pg_tle does not build for this server: ' . join(' / ', @log[ -3 .. -1 ]);
	}
}
note($tle_why ? "pg_tle: $tle_why" : 'pg_tle built from ' . basename($tle_src));

# The edition's scripts, made from a copy of idem_sql/ (the checkout may
# not be writable), as a release's source tree would hold them
system('cp', '-a', "$checkout/idem_sql", "$tmp/idem_sql") == 0 or die 'cannot copy idem_sql';
system('sh', "$tmp/idem_sql/build.sh") == 0 or die 'idem_sql/build.sh failed';
my $version = (slurp_file("$tmp/idem_sql/idem_sql.control") =~ /^default_version = '([^']+)'/m)[0];
my $ext_script = slurp_file("$tmp/idem_sql/idem_sql--$version.sql");

# --- The servers ---

my $sql = PostgreSQL::Test::Cluster->new('sql_edition', install_path => $install_path);
$sql->init;
$sql->append_conf(
	'postgresql.conf', ($tle_why ? "shared_preload_libraries = 'pg_cron'" : "shared_preload_libraries = 'pg_tle,pg_cron'") . q(
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 16
max_connections = 40
));
$sql->start;
my ($loaded, $out, $err) = $sql->psql('postgres', "LOAD 'idem'");
like($err, qr/could not access file "idem"/, 'the SQL edition\'s server has no idem library to load');
$sql->safe_psql('postgres', 'CREATE EXTENSION pg_cron');

my $c = idem_node('sql_edition_c');
$c->safe_psql('postgres', 'CREATE EXTENSION idem');

# The business side, as an application writes it: contrib/plproxy/shard.sql
# (a payment claims, books and completes in one transaction), with the
# ledger's unique key dropped, so that a second charge of a key would show
# as a second row.
my $business = slurp_file("$checkout/contrib/plproxy/shard.sql")
  . "\nALTER TABLE ledger DROP CONSTRAINT ledger_pkey;\n";
my $pay_sql = 'SELECT status, response FROM pay($1, $2, $3, $4)';
$c->safe_psql('postgres', $business);

# A DBI session to database $db of the SQL edition's server as $role,
# errors returned
sub session
{
	my ($db, $role) = @_;
	my $dbh = DBI->connect('dbi:Pg:dbname=' . $db . ';host=' . $sql->host . ';port=' . $sql->port,
		$role, '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0, pg_server_prepare => 0 })
	  or die "cannot connect: $DBI::errstr";
	$dbh->do("SET statement_timeout = '60s'") or die $dbh->errstr;
	return $dbh;
}

# Run $q with @bind on $dbh: its first row's first column, or "ERROR: ..."
sub value
{
	my ($dbh, $q, @bind) = @_;
	my $rows = $dbh->selectall_arrayref($q, undef, @bind);
	return 'ERROR: ' . $dbh->errstr =~ s/\s+/ /gr unless $rows;
	return $rows->[0][0];
}

# The database $db, owned by role $role, which is no superuser
sub make_owner
{
	my ($db, $role) = @_;
	$sql->safe_psql('postgres', "CREATE ROLE $role LOGIN; CREATE DATABASE $db OWNER $role;");
	return session($db, $role);
}

# --- a) Through pg_tle ---

my %installed;    # database => its owner, for those installed
SKIP:
{
	skip "pg_tle: $tle_why", 11 if $tle_why;
	my $dbh = make_owner('tle', 'tle_owner');
	# what the platform has done: pg_tle in the database, and its admin
	# role granted
	$sql->safe_psql('tle', 'CREATE EXTENSION pg_tle; GRANT pgtle_admin TO tle_owner;');
	is(value($dbh, q{SELECT string_agg(b.rolname, ',') || ' ' || bool_or(r.rolsuper)
		FROM pg_roles r JOIN pg_auth_members m ON m.member = r.oid JOIN pg_roles b ON b.oid = m.roleid
		WHERE r.rolname = current_user}), 'pgtle_admin false',
		'the installing role is a member of pgtle_admin only, and no superuser');

	# The extension's script as it is: pg_tle refuses only its own string
	# delimiters ($_pgtle_o_$, $_pgtle_i_$), and drops the \echo line and
	# replaces @extschema@ itself, as CREATE EXTENSION does with files.
	unlike($ext_script, qr/\$_pgtle_[io]_\$/, 'the script has none of the delimiters pg_tle refuses');
	like(
		value(
			$dbh, q{SELECT pgtle.install_extension('idem_sql', $1, 'x', $2, ARRAY['pgcrypto'])},
			$version, $ext_script . "\nSELECT '\$_pgtle_i_\$';\n"),
		qr/invalid character in extension definition/,
		'(pg_tle refuses a script with one of them)');
	is( value(
			$dbh, q{SELECT pgtle.install_extension('idem_sql', $1, $2, $3, ARRAY['pgcrypto'])},
			$version,
			'idempotency keys, webhook dedup and retry-safe payments, in SQL and PL/pgSQL',
			$ext_script),
		1,
		"pgtle.install_extension takes idem_sql--$version.sql as it is");
	is(value($dbh, 'CREATE EXTENSION idem_sql CASCADE; SELECT extversion FROM pg_extension WHERE extname = \'idem_sql\''),
		$version, 'CREATE EXTENSION idem_sql CASCADE installs it (and pgcrypto)');
	# (pg_tle adds itself to what the extension requires: DROP EXTENSION
	# pg_tle CASCADE would drop idem_sql and its keys)
	is( value(
			$dbh, q{SELECT string_agg(r.extname, ',' ORDER BY r.extname)
			FROM pg_depend d JOIN pg_extension e ON e.oid = d.objid
			JOIN pg_extension r ON r.oid = d.refobjid
			WHERE e.extname = 'idem_sql' AND d.classid = 'pg_extension'::regclass
			  AND d.refclassid = 'pg_extension'::regclass}),
		'pg_tle,pgcrypto', 'and it requires pgcrypto and pg_tle');

	# A next version: the script again (every statement of it may run over
	# an earlier install), and one comment changed
	my $next = "$version.1";
	is( value(
			$dbh, q{SELECT pgtle.install_update_path('idem_sql', $1, $2, $3)},
			$version, $next,
			$ext_script . "\nCOMMENT ON FUNCTION idem.hmac_sha256(bytea, bytea) IS 'HMAC-SHA256, $next';\n"),
		1,
		"pgtle.install_update_path takes an update to $next");
	is(value($dbh, q{SELECT pgtle.set_default_version('idem_sql', $1)}, $next),
		1, "$next is the default version");
	is( value(
			$dbh,
			q{ALTER EXTENSION idem_sql UPDATE; SELECT extversion FROM pg_extension WHERE extname = 'idem_sql'}),
		$next,
		'ALTER EXTENSION idem_sql UPDATE takes it there');
	is( value($dbh, q{SELECT obj_description('idem.hmac_sha256(bytea, bytea)'::regprocedure)}),
		"HMAC-SHA256, $next", 'with the update\'s change');
	is( value(
			$dbh, q{SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'idem' AND c.relkind IN ('r', 'p', 'S', 'v', 'm')
			  AND NOT EXISTS (SELECT FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
			                  WHERE e.extname = 'idem_sql' AND d.deptype = 'e'
			                    AND d.classid = 'pg_class'::regclass AND d.objid = c.oid)}),
		0,
		'every table, sequence and view of schema idem belongs to the extension');
	$installed{tle} = 'tle_owner';
}

# --- b) As a plain script, by the database's owner ---

{
	my $dbh = make_owner('script', 'script_owner');
	is(value($dbh, 'CREATE EXTENSION pgcrypto; SELECT 1'), 1, 'the owner creates pgcrypto');
	my $run_script = sub {
		my ($out, $err) = ('', '');
		my $ok = IPC::Run::run(
			[
				"$install_path/bin/psql", '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-1',
				'-h', $sql->host, '-p', $sql->port, '-U', 'script_owner', '-d', 'script',
				'-f', "$tmp/idem_sql/idem_sql.sql"
			],
			'>', \$out, '2>', \$err);
		diag($err) unless $ok;
		return $ok;
	};
	ok($run_script->(), 'psql -1 -f idem_sql.sql runs as the database\'s owner');
	ok($run_script->(), 'and again over itself (how such a database updates)');
	$installed{script} = 'script_owner';
}

# --- c) From files, by the database's owner ---

{
	ok(install_into_tree("$tmp/idem_sql", "$tmp/idem_sql.log"), 'make install of idem_sql/')
	  or diag(slurp_file("$tmp/idem_sql.log"));
	my $dbh = make_owner('files', 'files_owner');
	is(value($dbh, q{CREATE EXTENSION idem_sql CASCADE; SELECT extversion FROM pg_extension WHERE extname = 'idem_sql'}),
		$version, 'CREATE EXTENSION idem_sql CASCADE by the database\'s owner');
	$installed{files} = 'files_owner';
}
SKIP:
{
	skip "pg_tle: $tle_why", 1 if $tle_why;
	like(
		value(session('tle', 'tle_owner'),
			q{SELECT pgtle.install_extension('idem_sql', '9.9', 'x', 'SELECT 1', ARRAY['pgcrypto'])}),
		qr/control file already exists for the idem_sql extension/,
		'pg_tle refuses idem_sql where its files are installed');
}

my @dbs = sort keys %installed;
$sql->safe_psql($_, $business, extra_params => [ '-U', $installed{$_} ]) for @dbs;
is( join(' ', map { value(session($_, $installed{$_}), 'SELECT rolsuper FROM pg_roles WHERE rolname = current_user') } @dbs),
	join(' ', map { 0 } @dbs),
	'no owner that installed is a superuser');

# --- The purge, from pg_cron ---

# Expired keys in each database, then each owner schedules the purge of its
# database (pg_cron's jobs run as the role that scheduled them)
# (pg_cron lets only a superuser schedule until granted: as a platform's
# administrator grants it)
my $owners = join(', ', values %installed);
$sql->safe_psql('postgres', qq{
GRANT USAGE ON SCHEMA cron TO $owners;
GRANT EXECUTE ON FUNCTION cron.schedule_in_database(text, text, text, text, text, boolean) TO $owners;
});
for my $db (@dbs)
{
	my $dbh = session($db, $installed{$db});
	is( value(
			$dbh, q{
		SELECT count(idem_claim('old-' || i)) + count(idem_complete('old-' || i))
		FROM generate_series(1, 5) i}),
		10,
		"$db: five keys claimed and completed");
	is($dbh->do(q{UPDATE idem.keys SET expires_at = now() - interval '1 s' WHERE key LIKE 'old-%'}),
		5, "$db: and aged past their expiry by the owner");
}
my $t0 = $sql->safe_psql('postgres', 'SELECT now()');
for my $db (@dbs)
{
	like(
		value(
			session('postgres', $installed{$db}),
			q{SELECT cron.schedule_in_database($1, '* * * * *', 'SELECT idem_purge()', $2)},
			"idem-purge-$db", $db),
		qr/^\d+$/,
		"$db: its owner schedules idem_purge() there");
}
# pg_cron 1.5 and later: each job moved to a schedule of one second, so that
# it runs at once rather than at the next minute
cron_jobs_every_second($sql, 'idem-purge-%');

# --- Storms ---

# $nclients clients pay every order of @$orders, each in its own order, on
# database $db as its owner, or on the C edition's server ($db undef)
sub storm
{
	my ($db, $orders, $name) = @_;
	my $connect = $db ? sub { session($db, $installed{$db}) } : sub { session_to($c) };
	my @results = run_storm($connect, $pay_sql, $orders, $nclients, $tmp, $name);
	return check_storm(\@results, $orders, $nclients);
}

# orders of three merchants of $prefix
sub orders_of
{
	my ($prefix) = @_;
	return map { my $m = "$prefix-$_"; map { [ $m, "order-$_" ] } 1 .. 10 } 1 .. 3;
}

my (%orders, %answers);
for my $db (@dbs)
{
	$orders{$db} = [ orders_of("m-$db") ];
	note("storm on $db");
	$answers{$db} = storm($db, $orders{$db}, "storm_$db");
	is( value(session($db, $installed{$db}), 'SELECT count(*) || \' \' || count(DISTINCT (merchant, key)) FROM ledger'),
		scalar(@{ $orders{$db} }) . ' ' . scalar(@{ $orders{$db} }),
		"$db: the ledger holds one charge per key");
}
my @c_orders = orders_of('m-c');
note('storm on the C edition');
my $c_answers = storm(undef, \@c_orders, 'storm_c');

# --- Keys to the C edition and back ---

my $cdbh = session_to($c);
my $c_ledger = value($cdbh, 'SELECT count(*) FROM ledger');
for my $db (@dbs)
{
	my $dbh = session($db, $installed{$db});
	my @merchants = map { "m-$db-$_" } 1 .. 3;
	my $keys = value($dbh, q{SELECT jsonb_agg(e) FROM idem_keys_export($1) e},
		'{' . join(',', @merchants) . '}');
	is(value($cdbh, 'SELECT idem_keys_import($1::jsonb)', $keys),
		scalar @{ $orders{$db} }, "$db: its keys import into the C edition");
	is( value(
			$cdbh, q{SELECT jsonb_agg(e ORDER BY e->>'scope', e->>'key') FROM idem_keys_export($1) e},
			'{' . join(',', @merchants) . '}'),
		value(
			$dbh, q{SELECT jsonb_agg(e ORDER BY e->>'scope', e->>'key') FROM idem_keys_export($1) e},
			'{' . join(',', @merchants) . '}'),
		"$db: the C edition exports them as the SQL edition does");
	check_replays($cdbh, $pay_sql, $orders{$db}, $answers{$db}, "$db -> C");

	my $back = value($cdbh, q{SELECT jsonb_agg(e) FROM idem_keys_export('{m-c-1,m-c-2,m-c-3}') e});
	is(value($dbh, 'SELECT idem_keys_import($1::jsonb)', $back),
		scalar @c_orders, "$db: the C edition's keys import there");
	is( value($dbh, q{SELECT jsonb_agg(e ORDER BY e->>'scope', e->>'key') FROM idem_keys_export('{m-c-1,m-c-2,m-c-3}') e}),
		value($cdbh, q{SELECT jsonb_agg(e ORDER BY e->>'scope', e->>'key') FROM idem_keys_export('{m-c-1,m-c-2,m-c-3}') e}),
		"$db: and export there as from the C edition");
	check_replays($dbh, $pay_sql, \@c_orders, $c_answers, "C -> $db");
	is(value($dbh, q{SELECT count(*) FROM ledger WHERE merchant LIKE 'm-c-%'}),
		0, "$db: no replay charged");
}
is(value($cdbh, 'SELECT count(*) FROM ledger'), $c_ledger, 'C: no replay charged');

# --- The purge, checked ---

# A minute and some, whatever a short test timeout says
$PostgreSQL::Test::Utils::timeout_default = 90
  if $PostgreSQL::Test::Utils::timeout_default < 90;
ok( $sql->poll_query_until(
		'postgres', qq{
		SELECT count(DISTINCT j.jobid) = ${\ scalar @dbs}
		FROM cron.job j JOIN cron.job_run_details d USING (jobid)
		WHERE j.jobname LIKE 'idem-purge-%' AND d.start_time > '$t0'
		  AND d.status IN ('succeeded', 'failed')}),
	'each database\'s purge job has run');
for my $db (@dbs)
{
	is( $sql->safe_psql(
			'postgres', qq{
		SELECT d.status || ' ' || d.return_message || ' ' || j.username
		FROM cron.job j JOIN cron.job_run_details d USING (jobid)
		WHERE j.jobname = 'idem-purge-$db' AND d.start_time > '$t0'
		ORDER BY d.start_time LIMIT 1}),
		"succeeded SELECT 1 $installed{$db}",
		"$db: the job ran as its owner");
	is( value(session($db, $installed{$db}),
			q{SELECT count(*) FILTER (WHERE key LIKE 'old-%') || ' ' || count(*) FROM idem.keys}),
		'0 ' . (@{ $orders{$db} } + @c_orders),
		"$db: it purged the expired keys, and only them");
}

# --- The same bytes, value by value ---

# test/differential/sql_edition.py asks both editions the same questions
# (canonical JSON, fingerprints, keys, payment keys with their refusals,
# exports and each edition's import of the other's export) and compares
# the answers; a seed of its own each run, printed.
SKIP:
{
	skip 'no /usr/bin/python3 for the differential check', 1 unless -x '/usr/bin/python3';
	my $seed = int(rand(1_000_000));
	$c->safe_psql('postgres', 'CREATE DATABASE diff');
	$c->safe_psql('diff', 'CREATE EXTENSION idem');
	$sql->safe_psql('postgres', 'CREATE DATABASE diff');
	$sql->safe_psql('diff', 'CREATE EXTENSION idem_sql CASCADE');
	my $conninfo = sub { my $n = shift; 'host=' . $n->host . ' port=' . $n->port . ' dbname=diff' };
	my $out = `/usr/bin/python3 $checkout/test/differential/sql_edition.py $seed 300 '${\ $conninfo->($c)}' '${\ $conninfo->($sql)}' $tmp 2>&1`;
	is($?, 0, "the C and SQL editions give the same bytes (seed $seed)")
	  or diag($out . (-f "$tmp/differences.txt" ? slurp_file("$tmp/differences.txt") : ''));
	note($out);
}

$sql->stop;
$c->stop;
done_testing();
