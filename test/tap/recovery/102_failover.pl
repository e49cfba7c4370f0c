# Failover: with synchronous replication, a payment acknowledged as
# committed on the primary is completed, with the same response, on the
# standby promoted after the primary died in the middle of a storm; the
# fencing tokens never go back; and claims, completions and webhooks carry
# on there.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $primary = idem_node('primary', q(
max_connections = 30
log_statement = none
), allows_streaming => 1);

# pay(k): a payment in the in-transaction mode; returns the charge id (0 for
# a replay) and the token of the claim that charged.
$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION idem;
CREATE TABLE ledger (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL);
CREATE INDEX ON ledger (key);
CREATE FUNCTION pay(k text, OUT charge bigint, OUT token bigint) LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idem_claim(k, idem_fingerprint('{"amount": 100}'));
    charge := 0;
    token := 0;
    IF c.status = 'claimed' THEN
        INSERT INTO ledger (key, amount) VALUES (k, 100) RETURNING id INTO charge;
        PERFORM idem_complete(k, jsonb_build_object('charge', charge));
        token := c.token;
    ELSIF c.status <> 'completed' THEN
        RAISE EXCEPTION 'unexpected claim status % for %', c.status, k;
    END IF;
END $$;
} . $SQLSTATE_OF . q{
});

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

# Synchronous replication: a commit is acknowledged once the standby has it.
$primary->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = '*'");
$primary->reload;
ok( $primary->poll_query_until(
		'postgres', "SELECT sync_state = 'sync' FROM pg_stat_replication"),
	'the standby is synchronous');

# A two-phase attempt in flight and a webhook, from before the storm.
my $t2p = $primary->safe_psql('postgres',
	"SELECT token FROM idem_claim('f-2p', '\\x02', lease => '10 min')");
$primary->safe_psql(
	'postgres', qq{
SELECT idem_checkpoint('f-2p', 'charged', '{"charge": "ch_7"}', token => $t2p, lease => '10 min');
SELECT idem_webhook('gateway', 'evt_1');
});

# The standby reads idem's rows but refuses to write them.
is($standby->safe_psql('postgres', "SELECT state, checkpoint FROM idem_lookup('f-2p')"),
	'processing|charged', 'the standby sees the two-phase attempt');
is( $standby->safe_psql(
		'postgres', "SELECT sqlstate_of(\$\$SELECT idem_claim('f-standby')\$\$)"),
	'25006', 'a claim on the standby is refused as a write in a read-only transaction');

# --- The storm, and the primary's death ---

my $acklog = $primary->basedir . '/failover_acknowledged.log';
unlink $acklog;
my $script = $primary->basedir . '/failover_storm.sql';
unlink $script;
# After COMMIT returns, the client logs the charge: it was acknowledged.
append_to_file(
	$script, qq{\\set k random(1, 2000)
BEGIN;
SELECT charge, token FROM pay('f-' || :k) \\gset
COMMIT;
\\if :charge > 0
\\shell echo :k :charge :token >> $acklog
\\endif
});
my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[
		'pgbench', '-n', '-c', 8, '-j', 2, '-T', 20, '-f', $script,
		'-h', $primary->host, '-p', $primary->port, 'postgres'
	],
	'>', \$out, '2>', \$err);

ok( $primary->poll_query_until(
		'postgres', "SELECT count(*) >= 150 FROM ledger WHERE key LIKE 'f-%'"),
	'the storm is charging on the primary');
$primary->stop('immediate');
$h->finish;
note "pgbench: $err";

$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'the standby is promoted');

# --- What the promoted standby knows ---

my @acked = grep { /^\d+ \d+ \d+$/ } split /\n/, slurp_file($acklog);
cmp_ok(scalar @acked, '>', 0, 'the client saw charges acknowledged before the failover');
my $values = join ',', map { my ($k, $c, $t) = split / /; "('f-$k', $c, $t)" } @acked;

# a retry of each acknowledged payment, asked the way an application asks
is( $standby->safe_psql(
		'postgres', qq{
SELECT count(*) FROM (VALUES $values) a(key, charge, token),
LATERAL idem_claim(a.key, idem_fingerprint('{"amount": 100}')) c
WHERE c.status <> 'completed' OR (c.response->>'charge')::bigint <> a.charge}),
	'0',
	'every acknowledged charge answers completed with its response on the new primary: '
	  . scalar(@acked) . ' charges');

is( $standby->safe_psql(
		'postgres', q{
SELECT count(*) FROM ledger l LEFT JOIN idem.keys k ON k.scope = '' AND k.key = l.key
WHERE l.key LIKE 'f-%' AND (k.state IS DISTINCT FROM 'completed'
                            OR (k.response->>'charge')::bigint IS DISTINCT FROM l.id)}),
	'0',
	'every replicated charge belongs to a completed key');
is( $standby->safe_psql(
		'postgres', q{
SELECT count(*) FROM idem.keys k
WHERE k.key LIKE 'f-%' AND k.key <> 'f-2p'
  AND (k.state <> 'completed' OR (SELECT count(*) FROM ledger l WHERE l.key = k.key) <> 1)}),
	'0',
	'every replicated key is completed with exactly one charge');

# The token sequence did not go back: a new claim's token is above every
# token the client saw and every token stored.
my $max_acked = 0;
for (@acked) { my (undef, undef, $t) = split / /; $max_acked = $t if $t > $max_acked; }
my $max_stored = $standby->safe_psql('postgres', 'SELECT max(token) FROM idem.keys');
my $new_token = $standby->safe_psql('postgres', "SELECT token FROM idem_claim('f-after', '\\x03')");
cmp_ok($new_token, '>', $max_acked, 'a new token is above every token the client saw');
cmp_ok($new_token, '>', $max_stored, 'and above every stored token');

# Claims work: retrying every key of the set charges each missing one once.
$standby->safe_psql('postgres', "SELECT count(pay('f-' || i)) FROM generate_series(1, 2000) i");
is( $standby->safe_psql(
		'postgres', "SELECT count(DISTINCT key), count(*) FROM ledger WHERE key LIKE 'f-%' AND key ~ '^f-[0-9]+\$'"),
	'2000|2000',
	'after retrying all 2000 keys on the new primary, each is charged exactly once');

# The two-phase attempt goes on: its worker completes it with its token.
is( $standby->safe_psql(
		'postgres', "SELECT status, attempt FROM idem_claim('f-2p', '\\x02')"),
	'in_progress|1', 'the replicated lease is honoured');
$standby->safe_psql('postgres',
	"SELECT idem_complete('f-2p', '{\"charge\": \"ch_7\"}', token => $t2p)");
is( $standby->safe_psql(
		'postgres', "SELECT status, response FROM idem_claim('f-2p', '\\x02')"),
	'completed|{"charge": "ch_7"}',
	'the two-phase worker completes its key on the new primary');
is($standby->safe_psql('postgres', "SELECT idem_webhook('gateway', 'evt_1')"),
	'f', 'a webhook seen before the failover is a duplicate after it');

ok(!$standby->log_contains('PANIC|TRAP:'), 'no PANIC or assertion failure');
$standby->stop;
done_testing();
