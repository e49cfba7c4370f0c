# Set-up shared by idem's TAP tests: a started node with idem preloaded, the
# SQL of sqlstate_of(), which the tests install where they need it, and the
# check that skips a test whose extension this server lacks.
package IdemTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT = qw(idem_node require_extension older_servers $SQLSTATE_OF);

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

# Skip the whole test unless extension $name is installed for the server
# the tests run on.  Debian's extension packages are built for Debian's
# server: a server built from source (the assert builds) has none of them.
sub require_extension
{
	my ($name, $package) = @_;
	my $sharedir = `pg_config --sharedir`;
	chomp $sharedir;
	return if -e "$sharedir/extension/$name.control";
	my $configure = `pg_config --configure`;
	plan skip_all => $configure =~ /--enable-cassert/
	  ? "$name is not installed for this server, built from source ($package is built for Debian's server)"
	  : "$name is not installed ($package)";
	return;
}

1;
