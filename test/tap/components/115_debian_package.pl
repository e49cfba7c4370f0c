# The Debian package and the release metadata.  idem.control's
# default_version, META.json (valid JSON, PGXN's required fields) and
# debian/changelog name the same release.  dpkg-buildpackage builds
# postgresql-NN-idem, for the packaged server NN this test runs on (one of
# debian/pgversions), from a copy of the source tree, as the server's user
# and with IDEM_ASSERT and CI set in its environment: the package holds
# idem.so in the server's lib directory and the control file and every
# install and update script in its extension directory, nothing else outside
# /usr/share/doc, depends on the server and on libcrypto, and is the release
# build (no assertion checks compiled in).  Unpacked into a scratch root, it
# is loaded by a server whose lib and share directories are that root's:
# CREATE EXTENSION installs the default version and a key is claimed,
# completed and replayed.
use strict;
use warnings;

use Cwd qw(realpath);
use File::Basename qw(basename);
use File::Path qw(make_path);
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $src = realpath("$FindBin::RealBin/../../..");

# The text of file $1 (below the source tree when relative)
sub slurp
{
	my ($file) = @_;
	$file = "$src/$file" unless $file =~ m{^/};
	open my $fh, '<', $file or die "could not read $file: $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

# Standard output of a command, which must succeed
sub output_of
{
	my @cmd = @_;
	my ($stdout, $stderr);
	IPC::Run::run(\@cmd, '>', \$stdout, '2>', \$stderr)
	  or die "@cmd failed: $stderr";
	return $stdout;
}

if (!-x '/usr/bin/dpkg-buildpackage' && !$ENV{CI})
{
	plan skip_all => 'dpkg-buildpackage is not installed: the package builds on Debian';
}

# The major version of the server the tests run on; the package is built
# for the packaged server of that version, whose directories are these.
my $major = require_packaged_server("the package is built for Debian's server of that major");
my $pg = "/usr/lib/postgresql/$major";

# --- versions and metadata ---------------------------------------------

my ($extversion) = slurp('idem.control') =~ /^default_version\s*=\s*'([^']+)'/m;
ok(defined $extversion, "idem.control has a default_version");
$extversion //= '?';

my $meta = eval { JSON::PP->new->decode(slurp('META.json')) };
ok(ref $meta eq 'HASH', 'META.json is a JSON object') or diag($@);
$meta = {} unless ref $meta eq 'HASH';
my $version = $meta->{version} // '?';

is($meta->{name}, 'idem', 'META.json: name');
ok(length($meta->{abstract} // ''), 'META.json: abstract');
like($version, qr/^\Q$extversion\E\.(0|[1-9][0-9]*)$/,
	"META.json: version is a semantic version of default_version $extversion");
ok(ref $meta->{maintainer} eq 'ARRAY' ? @{ $meta->{maintainer} } : length($meta->{maintainer} // ''),
	'META.json: maintainer');
is($meta->{license}, 'postgresql', 'META.json: license');
is(($meta->{'meta-spec'} // {})->{version}, '1.0.0', 'META.json: meta-spec 1.0.0');
my $provided = ($meta->{provides} // {})->{idem} // {};
is($provided->{version}, $version, 'META.json: provides idem at the same version');
ok(defined $provided->{file} && -f "$src/$provided->{file}",
	'META.json: the file that provides idem exists');
ok(defined $provided->{docfile} && -f "$src/$provided->{docfile}",
	'META.json: its docfile exists');
my @pgversions = split ' ', slurp('debian/pgversions');
ok((grep { $_ eq $major } @pgversions), "debian/pgversions lists $major");
# Claim only what the matrix tests: the packages are built for its majors,
# and META.json's range runs from the oldest to the newest of them.
my ($flavours) = slurp('test/servers.sh') =~ /^FLAVOURS=\(([^)]*)\)/m;
my @majors = sort { $a <=> $b } grep { /^[0-9]+$/ } split ' ', ($flavours // '');
is("@pgversions", "@majors", 'debian/pgversions lists the majors test/servers.sh tests');
my $range = ((($meta->{prereqs} // {})->{runtime} // {})->{requires} // {})->{PostgreSQL} // '';
is($range, @majors ? ">= $majors[0].0.0, < " . ($majors[-1] + 1) . '.0.0' : '?',
	'META.json: requires PostgreSQL from the oldest to the newest major tested');

my ($debversion) = slurp('debian/changelog') =~ /^idem \(([^)]+)\)/;
$debversion //= '?';
like($debversion, qr/^\Q$version\E-[0-9]+$/,
	"debian/changelog: the newest entry packages $version");

my @scripts = sort map { basename($_) } glob("$src/idem--*.sql");
ok((grep { /^idem--(.+--)?\Q$extversion\E\.sql$/ } @scripts),
	"a script installs or updates to $extversion");

# --- the build ---------------------------------------------------------

# absolute: the framework of 17 and 18 gives a relative path
my $work = realpath(PostgreSQL::Test::Utils::tempdir('pkg'));
my $tree = "$work/idem-$version";
make_path($tree);
# the source as a user has it: no git metadata, no test outputs
system_or_bail("tar -C '$src' --exclude=./.git --exclude=./tmp_check -cf - . | tar -C '$tree' -xf -");

# A developer's environment: assertions and warnings-as-errors asked for.
# The package must be the release build all the same.  pg_buildext builds
# for the versions of debian/pgversions that postgresql-common supports:
# by default the release's own server only (18 on sid, also where 19 comes
# from experimental), so the version this test runs on is named, as
# doc/install.md says to.
{
	local $ENV{IDEM_ASSERT} = 1;
	local $ENV{CI}          = 1;
	local $ENV{PG_SUPPORTED_VERSIONS} = $major;
	local $ENV{DEB_BUILD_OPTIONS} = 'noautodbgsym';
	my $build_log = "$PostgreSQL::Test::Utils::log_path/115_dpkg_buildpackage.log";
	note("dpkg-buildpackage writes to $build_log");
	my $built = IPC::Run::run(
		[ 'dpkg-buildpackage', '-us', '-uc', '-b', '-j2' ],
		'>', $build_log, '2>&1',
		init => sub { chdir $tree or die "chdir $tree: $!" });
	ok($built, 'dpkg-buildpackage -us -uc -b')
	  or diag(join('', (split /^/m, slurp($build_log))[-40 .. -1]));
	unlike(slurp($build_log), qr/installcheck|pg_regress|pg_isolation_regress|prove /,
		'the package build runs no test');
}

my ($deb) = glob("$work/postgresql-$major-idem_${debversion}_*.deb");
ok(defined $deb, "postgresql-$major-idem_${debversion} built") or BAIL_OUT('no package');

my %field = map { $_ => output_of('dpkg-deb', '-f', $deb, $_) =~ s/\s+$//r }
  qw(Package Version Depends);
is($field{Package}, "postgresql-$major-idem", 'package name');
is($field{Version}, $debversion, 'package version is debian/changelog\'s');
like($field{Depends}, qr/(^|, )postgresql-$major( |,|$)/, 'depends on the server');
like($field{Depends}, qr/(^|, )libssl3(t64)?\b/, 'depends on libcrypto\'s package (shlibs)');

my @files = grep { !m{/$} }
  map { (split ' ', $_)[5] } split /\n/, output_of('dpkg-deb', '-c', $deb);
s{^\./}{/} for @files;
my $lib = "$pg/lib";
my $ext = "/usr/share/postgresql/$major/extension";
my %has = map { $_ => 1 } @files;
ok($has{"$lib/idem.so"}, "idem.so in $lib");
ok($has{"$ext/idem.control"}, "idem.control in $ext");
is_deeply([ sort grep { m{^\Q$ext\E/idem--} } @files ], [ map { "$ext/$_" } @scripts ],
	'every install and update script, and only those');
is_deeply(
	[
		grep {
			!m{^\Q$lib\E/(idem\.so|bitcode/idem(\.index\.bc|/.*))$}
			  && !m{^\Q$ext\E/idem(\.control|--.*\.sql)$}
			  && !m{^/usr/share/doc/postgresql-$major-idem/}
		} @files
	],
	[],
	'nothing else is installed');
ok($has{"/usr/share/doc/postgresql-$major-idem/copyright"}, 'the copyright file');

my $root = "$work/root";
system_or_bail('dpkg', '-x', $deb, $root);
is(slurp("$root$ext/idem.control"), slurp('idem.control'), 'the control file is the tree\'s');

# A build with IDEM_ASSERT calls ExceptionalCondition (Assert's failure
# path); the release build does not.
unlike(output_of('nm', '-D', '--undefined-only', "$root$lib/idem.so"),
	qr/\bExceptionalCondition\b/, 'idem.so is the release build (no assertions)');

# --- the unpacked files, loaded by a server ----------------------------

# A server tree in the scratch root: a copy of the server's binaries (it
# finds lib/ and share/ relative to them), the package's files, and links
# to everything else of the installed server.
make_path("$root$pg/bin");
system_or_bail('cp', '-a', "$pg/bin/.", "$root$pg/bin/");
# Link every entry of $from that $to (in the root) does not have yet,
# except idem's own, going down into the directories both have.
sub link_missing
{
	my ($from, $to) = @_;
	make_path("$root$to");
	for my $f (glob("$from/*"))
	{
		my $name = basename($f);
		next if $name =~ /^idem([-.]|$)/;
		if (-d "$root$to/$name" && !-l "$root$to/$name")
		{
			link_missing($f, "$to/$name");
		}
		elsif (!-e "$root$to/$name")
		{
			symlink($f, "$root$to/$name") or die "symlink $f: $!";
		}
	}
	return;
}
link_missing("$pg/lib", $lib);
link_missing("/usr/share/postgresql/$major", "/usr/share/postgresql/$major");

my $node = PostgreSQL::Test::Cluster->new('pkg', install_path => "$root$pg");
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.purge_interval = 0\n");
$node->start;

is($node->safe_psql('postgres', "SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'"),
	"$root$lib", 'the server\'s lib directory is the scratch root\'s');
my ($postmaster) = slurp($node->data_dir . '/postmaster.pid') =~ /^(\d+)/;
my ($mapped) = grep { m{/idem\.so$} } map { (split ' ', $_)[5] // () }
  split /\n/, slurp("/proc/$postmaster/maps");
is($mapped, realpath("$root$lib/idem.so"), 'the postmaster preloaded the packaged idem.so');

$node->safe_psql('postgres', 'CREATE EXTENSION idem');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'idem'"),
	$extversion, "CREATE EXTENSION installs $extversion");
my $pay = q{
BEGIN;
SELECT status FROM idem_claim('pkg-1', idem_fingerprint('{"amount": 5}'));
SELECT idem_complete('pkg-1', '{"charge": "ch_pkg"}');
COMMIT;
};
like($node->safe_psql('postgres', $pay), qr/^claimed\n/, 'a key is claimed and completed');
is($node->safe_psql('postgres',
	q{SELECT status || ' ' || (response->>'charge') FROM idem_claim('pkg-1', idem_fingerprint('{"amount": 5}'))}),
	'completed ch_pkg', 'and a retry replays the stored response');
is($node->safe_psql('postgres',
	q{SELECT claimed || ' ' || completed || ' ' || replayed FROM idem_stats WHERE datname = 'postgres'}),
	'1 1 1', 'idem_stats counted them in the preloaded library\'s shared memory');

$node->stop;
done_testing();
