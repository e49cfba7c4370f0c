# Upgrade: ALTER EXTENSION idem UPDATE from 1.0 to 1.1 keeps every row and
# the token sequence, and adds the operators' view idem_keys_in_progress;
# from 1.1 to 1.2 it marks idem_lookup PARALLEL RESTRICTED (under 1.1 a
# parallel worker refuses to run it rather than miss a pending claim); a
# fresh CREATE EXTENSION (1.0 followed by the update scripts) gives the same
# objects; DROP EXTENSION leaves nothing behind in the catalogs.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use IdemTest;

my $node = idem_node('upgrade', q(
log_statement = none
));

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

# Everything in the catalogs of a database that an extension could leave
# behind: schemas, relations (tables, indexes, sequences, views, TOAST),
# functions, types, operators, casts, initial privileges and dependencies.
my $catalog_q = q{
SELECT string_agg(x, E'\n' ORDER BY x) FROM (
    SELECT 'schema ' || nspname FROM pg_namespace
    UNION ALL SELECT 'relation ' || c.oid::regclass::text || ' ' || c.relkind::text FROM pg_class c
    UNION ALL SELECT 'function ' || p.oid::regprocedure::text FROM pg_proc p
    UNION ALL SELECT 'type ' || t.oid::regtype::text FROM pg_type t
    UNION ALL SELECT 'operator ' || o.oid::regoperator::text FROM pg_operator o
    UNION ALL SELECT 'cast ' || castsource::regtype::text || ' ' || casttarget::regtype::text FROM pg_cast
    UNION ALL SELECT 'init_privs ' || count(*) FROM pg_init_privs
    UNION ALL SELECT 'depend ' || count(*) FROM pg_depend
    UNION ALL SELECT 'extension ' || extname FROM pg_extension
) s(x)};

# The extension's member objects, as pg_describe_object names them
my $members_q = q{
SELECT string_agg(pg_describe_object(classid, objid, objsubid), E'\n'
                  ORDER BY pg_describe_object(classid, objid, objsubid))
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')};

my $version_q = "SELECT extversion FROM pg_extension WHERE extname = 'idem'";

# The extension's functions with their volatility and parallel labels
my $labels_q = q{
SELECT string_agg(p.proname || ' ' || p.provolatile::text || p.proparallel::text, ', '
                  ORDER BY p.proname)
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idem'};

my $keys_q = q{SELECT scope, key, state, token, attempt, encode(fingerprint, 'hex'),
       lease_until, checkpoint, checkpoint_data, response, created_at,
       completed_at, expires_at
FROM idem.keys ORDER BY scope, key};
my $webhooks_q = 'SELECT * FROM idem.webhooks ORDER BY 1, 2';
my $seq_q = 'SELECT last_value, is_called FROM idem.token_seq';

# --- 1.0, with data, updated to 1.1 ---

$node->safe_psql('postgres', 'CREATE DATABASE up');
my $clean_catalog = sql('up', $catalog_q);
sql('up', "CREATE EXTENSION idem VERSION '1.0'");
is(sql('up', $version_q),
	'1.0', 'version 1.0 installs when asked for');
is(sql('up', "SELECT to_regclass('idem_keys_in_progress') IS NULL"),
	't', '1.0 has no idem_keys_in_progress');

sql('up', q{
BEGIN;
SELECT idem_claim('u-completed', idem_fingerprint('{"amount": 5}'));
SELECT idem_complete('u-completed', '{"charge": "ch_1"}');
COMMIT;
SELECT idem_claim('u-expired', lease => '1 ms');
SELECT idem_webhook('stripe', 'evt_1');
});
my $t_live = sql('up', q{SELECT token FROM idem_claim('u-live', '\x01', scope => 'm-1', lease => '1 hour')});
sql('up', qq{SELECT idem_checkpoint('u-live', 'charged', '{"charge": "ch_2"}', scope => 'm-1', token => $t_live, lease => '1 hour')});

my $keys_before = sql('up', $keys_q);
my $webhooks_before = sql('up', $webhooks_q);
my $seq_before = sql('up', $seq_q);
my $members_10 = sql('up', $members_q);

sql('up', "ALTER EXTENSION idem UPDATE TO '1.1'");
is(sql('up', $version_q),
	'1.1', "ALTER EXTENSION idem UPDATE TO '1.1' goes to 1.1");
is(sql('up', $keys_q), $keys_before, 'every key is unchanged by the update');
is(sql('up', $webhooks_q), $webhooks_before, 'every webhook record is unchanged');
is(sql('up', $seq_q), $seq_before, 'the token sequence is unchanged');
is( sql('up', $members_q),
	join("\n", sort(split(/\n/, $members_10), 'view idem_keys_in_progress')),
	'the update adds exactly the view to the extension');

# the new view shows the attempts in flight, and nothing else
is( sql('up', q{SELECT scope, key, attempt, lease_expired, checkpoint, checkpoint_data
                FROM idem_keys_in_progress ORDER BY key}),
	qq{|u-expired|1|t||\nm-1|u-live|1|f|charged|{"charge": "ch_2"}},
	'idem_keys_in_progress lists the processing keys, with lease and checkpoint');

# operators get it by a grant on the view alone
sql('up', 'CREATE ROLE ops LOGIN');
is(sql('up', "SELECT has_table_privilege('ops', 'idem_keys_in_progress', 'SELECT')"),
	'f', 'PUBLIC cannot read the view');
sql('up', 'GRANT SELECT ON idem_keys_in_progress TO ops');
is( $node->safe_psql(
		'up', 'SELECT count(*) FROM idem_keys_in_progress',
		extra_params => [ '-U', 'ops' ]),
	'2',
	'a role granted SELECT on the view reads it without rights on idem.keys');

# the key written under 1.0 goes on under 1.1
sql('up', qq{SELECT idem_complete('u-live', '{"charge": "ch_2"}', scope => 'm-1', token => $t_live)});
is(sql('up', q{SELECT status, response FROM idem_claim('u-live', '\x01', scope => 'm-1')}),
	'completed|{"charge": "ch_2"}', 'a 1.0 attempt completes under 1.1');
is(sql('up', q{SELECT status, attempt FROM idem_claim('u-expired')}),
	'claimed|2', 'an expired 1.0 attempt is taken over under 1.1');
is(sql('up', q{SELECT count(*) FROM idem_keys_in_progress WHERE key = 'u-live'}),
	'0', 'a completed key leaves the view');

# --- 1.1 to 1.2: idem_lookup stays out of parallel workers ---

# A pending claim (no row yet) is in the claiming backend's memory only.
# Under 1.1 the planner may run idem_lookup in a worker, which refuses.
my $parallel_lookup = q{
BEGIN;
SELECT status FROM idem_claim('u-pending');
SET LOCAL force_parallel_mode = on;
SELECT state, attempt FROM idem_lookup('u-pending');
ROLLBACK;};
my ($rc, $out, $err) = $node->psql('up', $parallel_lookup);
like($err, qr/idem_lookup\(\) cannot run in a parallel worker.*\n.*\n.*ALTER EXTENSION idem UPDATE/s,
	'under 1.1, idem_lookup in a parallel worker is refused, with the update as the hint');

my $keys_11 = sql('up', $keys_q);
sql('up', 'ALTER EXTENSION idem UPDATE');
is(sql('up', $version_q),
	'1.2', 'ALTER EXTENSION idem UPDATE goes on to 1.2');
is(sql('up', "SELECT proparallel FROM pg_proc WHERE proname = 'idem_lookup'"),
	'r', '1.2 marks idem_lookup PARALLEL RESTRICTED');
is(sql('up', $parallel_lookup), "claimed\nprocessing|1",
	'under 1.2 the same query runs idem_lookup in the leader and sees the pending claim');
is(sql('up', $keys_q), $keys_11, 'every key is unchanged by the second update');
is(sql('up', $webhooks_q), $webhooks_before, 'every webhook record is unchanged by the second update');

# --- a fresh CREATE EXTENSION is 1.0 and the updates ---

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
my $fresh_clean_catalog = sql('fresh', $catalog_q);
sql('fresh', 'CREATE EXTENSION idem');
is(sql('fresh', $version_q),
	'1.2', 'CREATE EXTENSION installs 1.2 by default');
is(sql('fresh', $members_q), sql('up', $members_q),
	'a fresh 1.2 has exactly the objects of an updated 1.0');
is( sql('fresh', $labels_q),
	sql('up', $labels_q),
	'and the same volatility and parallel labels');
is( sql('fresh', q{SELECT string_agg(path, ', ') FROM pg_extension_update_paths('idem')
                   WHERE source = '1.0' AND target = '1.2'}),
	'1.0--1.1--1.2', 'the update path is 1.0--1.1--1.2');
is(sql('fresh', q{SELECT status FROM idem_claim('f-1')}), 'claimed', 'claims work in a fresh 1.2');

# --- DROP EXTENSION removes everything ---

sql('fresh', 'DROP EXTENSION idem');
is(sql('fresh', $catalog_q), $fresh_clean_catalog,
	'after DROP EXTENSION the catalogs are as before CREATE EXTENSION');

sql('up', 'REVOKE SELECT ON idem_keys_in_progress FROM ops');
sql('up', 'DROP EXTENSION idem');
is( sql('up', q{
SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = 'idem')
     + (SELECT count(*) FROM pg_proc WHERE proname LIKE 'idem%' OR proname LIKE 'stats_1_%')
     + (SELECT count(*) FROM pg_class WHERE relname LIKE 'idem%' OR relname IN ('keys', 'webhooks', 'token_seq'))
     + (SELECT count(*) FROM pg_type WHERE typname LIKE 'idem%')}),
	'0',
	'after DROP EXTENSION of the updated one: no idem schema, function, view, table or sequence');
is(sql('up', $catalog_q), $clean_catalog,
	'and its catalogs are as before CREATE EXTENSION');

$node->stop;
done_testing();
