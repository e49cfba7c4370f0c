# A storm of webhooks out of order: 1,000 payment intents, each with four
# events at increasing times (created, processing, succeeded, refunded),
# each event delivered one to three times, all shuffled and handled by
# eight clients at once, a transaction per delivery.  The handler applies
# an event by setting the intent's status.  Through idem_webhook_order
# every intent ends in its newest state (refunded), every event is applied
# at most once, and no older event overwrites a newer one.  The same storm
# through dedup alone (idem_webhook) must leave intents in an older state,
# or this test could not fail.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $node = idem_node('webhook_order_storm');
my $dir = PostgreSQL::Test::Utils::tempdir('order_storm');
my ($host, $port) = ($node->host, $node->port);
my $clients = 8;

$node->safe_psql('postgres', q{
CREATE EXTENSION idem;
-- the deliveries, in the order they arrive
CREATE TABLE storm (seq bigint PRIMARY KEY, object_id text, event_id text, rank int,
                    status text, at timestamptz);
INSERT INTO storm
SELECT row_number() OVER (ORDER BY random()), 'pi_' || o, 'evt_' || o || '_' || r, r,
       (ARRAY['created', 'processing', 'succeeded', 'refunded'])[r],
       timestamptz '2026-11-01 10:00Z' + o * interval '1 minute' + r * interval '1 second'
FROM generate_series(1, 1000) o, generate_series(1, 4) r,
     generate_series(1, 1 + (o * 7 + r * 13) % 3) copy;
CREATE SEQUENCE next_ordered;
CREATE SEQUENCE next_dedup;
-- each intent's status as each handler left it, and how often an event was applied
CREATE TABLE intents (design text, id text, rank int NOT NULL DEFAULT 0,
                      PRIMARY KEY (design, id));
INSERT INTO intents SELECT d, 'pi_' || o FROM unnest('{ordered,dedup}'::text[]) d,
                                              generate_series(1, 1000) o;
CREATE TABLE applied (n bigserial, design text, event_id text, rank int);
-- handle the next delivery: false when the storm is over
CREATE FUNCTION deliver(design text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    n bigint := nextval(CASE design WHEN 'ordered' THEN 'next_ordered' ELSE 'next_dedup' END);
    d storm;
    apply boolean;
BEGIN
    SELECT * INTO d FROM storm WHERE seq = n;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF design = 'ordered' THEN
        apply := idem_webhook_order('ordered', d.object_id, d.at, d.event_id) = 'new';
    ELSE
        apply := idem_webhook('dedup', d.event_id);
    END IF;
    IF apply THEN
        UPDATE intents i SET rank = d.rank WHERE i.design = deliver.design AND i.id = d.object_id;
        INSERT INTO applied (design, event_id, rank) VALUES (design, d.event_id, d.rank);
    END IF;
    RETURN true;
END $$;
});
my $deliveries = $node->safe_psql('postgres', 'SELECT count(*) FROM storm');
cmp_ok($deliveries, '>', 6000, "$deliveries deliveries of 4000 events");

# the storm, through one design
sub storm
{
	my ($design) = @_;
	my @out = fork_storm(
		$clients, $dir,
		sub {
			my ($i, $dbh) = @_;
			my $n = 0;
			$n++ while $dbh->selectrow_array('SELECT deliver($1)', undef, $design);
			return $n;
		},
		sub {
			DBI->connect("dbi:Pg:host=$host;port=$port;dbname=postgres", 'postgres', '',
				{ AutoCommit => 1, RaiseError => 1, PrintError => 0, AutoInactiveDestroy => 1 });
		});
	my $handled = 0;
	$handled += $_ // 0 for @out;
	is($handled, $deliveries, "$design: the $clients clients handled every delivery");
}

storm('ordered');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM intents WHERE design = 'ordered' AND rank <> 4}),
	'0', 'ordered: every intent ends refunded, its newest state');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM (SELECT event_id FROM applied WHERE design = 'ordered'
                      GROUP BY event_id HAVING count(*) > 1) t}),
	'0', 'ordered: no event applied twice');
# applied in the order of each intent's events: ranks only go up (n is
# drawn under the intent's lock)
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM (SELECT rank < lag(rank) OVER (PARTITION BY split_part(event_id, '_', 2)
                                                    ORDER BY n) AS down
                      FROM applied WHERE design = 'ordered') t WHERE down}),
	'0', 'ordered: no older event applied after a newer one');
is( $node->safe_psql('postgres', q{
SELECT count(*), count(*) FILTER (WHERE event_id = 'evt_' || substr(object_id, 4) || '_4')
FROM idem.webhook_order WHERE source = 'ordered'}),
	'1000|1000', 'ordered: each intent\'s newest event is its refund');

storm('dedup');
my $older = $node->safe_psql('postgres',
	q{SELECT count(*) FROM intents WHERE design = 'dedup' AND rank <> 4});
cmp_ok($older, '>', 0, "dedup alone: $older intents end in an older state");
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM (SELECT event_id FROM applied WHERE design = 'dedup'
                      GROUP BY event_id HAVING count(*) > 1) t}),
	'0', 'dedup alone: no event applied twice either');

$node->stop;
done_testing();
