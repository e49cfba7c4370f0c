# Set-up shared by idem's TAP tests: a started node with idem preloaded, the
# SQL of sqlstate_of(), which the tests install where they need it, and the
# check that skips a test whose extension this server lacks.
package IdemTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT = qw(idem_node require_extension $SQLSTATE_OF);

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
