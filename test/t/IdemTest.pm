# Set-up shared by idem's TAP tests: a started node with idem preloaded, and
# the SQL of sqlstate_of(), which the tests install where they need it.
package IdemTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;

our @EXPORT = qw(idem_node $SQLSTATE_OF);

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

1;
