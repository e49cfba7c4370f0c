# pg_upgrade (15 to 15, --link): every key (completed, failed, released,
# processing with a lease and a checkpoint, a later attempt, a payment key),
# every webhook record and webhook source, the token sequence and the grants
# on idem's functions and views (including those an extension update
# recorded as initial privileges) come through unchanged; the attempt in
# flight is completed by its token afterwards, and claims go on.  The purge
# worker never runs on pg_upgrade's servers: its lines are absent from
# pg_upgrade's server log, written at a level that shows every background
# worker registered and started, and that does show idem's when the same
# cluster starts normally.
use strict;
use warnings;

use File::Find;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use IdemTest;

# DEBUG1 logs each background worker the postmaster registers and starts
my $conf = q(
shared_preload_libraries = 'idem'
idem.database = 'postgres'
idem.purge_interval = '1s'
log_min_messages = debug1
);

my $old = PostgreSQL::Test::Cluster->new('old');
$old->init(extra => [ '--encoding=UTF8', '--no-locale' ]);
$old->append_conf('postgresql.conf', $conf);
$old->start;

# Lines of a server log that say an idem background process was registered,
# started or is running
my $idem_lines =
  qr/^.*(?:background worker "idem purge|background worker process "idem purge|idem purge launcher started|idem purge worker).*$/m;

# The check below can fail: a normal start with these settings logs them.
$old->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'")
  or die 'the purge launcher did not start';
my @normal = slurp_file($old->logfile) =~ /$idem_lines/g;
cmp_ok(scalar @normal, '>=', 2,
	'a normal start of the old cluster logs idem\'s launcher at this log level');
note join "\n", @normal;

# --- What the old cluster holds ---

# fill(): keys in every state, each written in a transaction of its own as
# an application writes them, webhook records and webhook sources
my $fill = q{
CREATE PROCEDURE fill() LANGUAGE plpgsql AS $$
DECLARE
    r record;
    t bigint;
BEGIN
    -- finished keys: completed (one of them a payment key, as a checkout
    -- derives it), failed for good, released for a retry
    FOR r IN SELECT * FROM (VALUES
        ('u-completed', '', idem_fingerprint('{"amount": 100}'), 'completed',
         jsonb '{"charge": "ch_1", "note": "naïve ☃"}'),
        (idem_payment_key('m-7', 'order-42', 100.50, 'EUR', '2026-01-02'), 'm-7', NULL,
         'completed', '{"charge": "ch_pk"}'),
        ('u-failed', 'merchant-7', '\x0102', 'failed', '{"error": "card_declined"}'),
        ('u-released', '', NULL, 'released', '{"error": "timeout"}')) v(k, s, fp, outcome, body)
    LOOP
        PERFORM idem_claim(r.k, r.fp, scope => r.s);
        IF r.outcome = 'completed' THEN
            PERFORM idem_complete(r.k, r.body, scope => r.s);
        ELSE
            PERFORM idem_fail(r.k, r.body, retryable => r.outcome = 'released', scope => r.s);
        END IF;
        COMMIT;
    END LOOP;
    -- two-phase: an attempt in flight with a checkpoint and a lease
    SELECT token INTO t FROM idem_claim('u-processing', '\x03', lease => '1 hour');
    COMMIT;
    PERFORM idem_checkpoint('u-processing', 'charged', '{"charge": "ch_2"}', token => t);
    COMMIT;
    -- attempt 2, after the lease of attempt 1 ran out
    PERFORM idem_claim('u-attempt2', lease => '1 ms');
    COMMIT;
    PERFORM pg_sleep(0.01);
    PERFORM idem_claim('u-attempt2', lease => '1 hour');
    COMMIT;
    PERFORM idem_webhook('stripe', 'evt_1'), idem_webhook('stripe', 'evt_2', ttl => '1 hour'),
            idem_webhook('queue-ü', 'msg-√2');
    PERFORM idem_webhook_source_set('stripe', 'stripe', '{whsec_one, whsec_two}',
                                    allowed_ips => '{192.0.2.0/24}', ttl => '7 days');
    PERFORM idem_webhook_source_set('gh', 'github', '{"It''s a Secret"}', tolerance => '0');
END $$;
};

$old->safe_psql('postgres', 'CREATE DATABASE legacy');
$old->safe_psql(
	'postgres', q{
CREATE EXTENSION idem;
} . $SQLSTATE_OF . $fill . q{
CALL fill();

-- an application role and a monitoring role, as doc/api.md and
-- doc/operations.md grant them
CREATE ROLE app_role;
GRANT EXECUTE ON FUNCTION idem_claim(text, bytea, text, interval, interval, boolean),
                          idem_complete(text, jsonb, text, bigint) TO app_role;
CREATE ROLE idem_monitor;
GRANT SELECT ON idem_stats TO idem_monitor;
GRANT EXECUTE ON FUNCTION idem.stats_1_3() TO idem_monitor;
GRANT USAGE ON SCHEMA idem TO idem_monitor;
GRANT SELECT (state, lease_until, created_at, completed_at, expires_at) ON idem.keys TO idem_monitor;
GRANT SELECT ON idem_keys_in_progress TO idem_monitor;
});

# A database whose extension was created at 1.2 and updated: the update
# grants idem.stats_1_3() to idem_monitor, a grant recorded as the
# extension's own initial privilege.
$old->safe_psql(
	'legacy', q{
CREATE EXTENSION idem VERSION '1.2';
GRANT SELECT ON idem_stats TO idem_monitor;
GRANT EXECUTE ON FUNCTION idem.stats_1_0() TO idem_monitor;
ALTER EXTENSION idem UPDATE TO '1.3';
} . $fill . q{
CALL fill();
});

# Whole rows of idem's tables, every column
my %rows_q = map { $_->[0] => "SELECT t::text FROM idem.$_->[0] t ORDER BY $_->[1]" }
  [ 'keys', 'scope, key' ], [ 'webhooks', 'source, event_id' ], [ 'webhook_sources', 'source' ];
my $seq_q = 'SELECT last_value, is_called FROM idem.token_seq';
# Every object of the extension with its privileges and its initial
# privileges (those of CREATE EXTENSION and ALTER EXTENSION UPDATE, which
# pg_dump leaves out), and the column privileges on its tables.  Privileges
# equal to the default for the object's kind and owner are shown as the
# default: pg_upgrade leaves them NULL, which means the same.
my $acl_q = q{
WITH member AS (
    SELECT d.classid, d.objid, a.acl, a.dflt
    FROM pg_depend d,
    LATERAL (SELECT proacl, acldefault('f', proowner) FROM pg_proc
             WHERE d.classid = 'pg_proc'::regclass AND oid = d.objid
             UNION ALL
             SELECT relacl, acldefault(CASE relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", relowner)
             FROM pg_class WHERE d.classid = 'pg_class'::regclass AND oid = d.objid
             UNION ALL
             SELECT nspacl, acldefault('n', nspowner) FROM pg_namespace
             WHERE d.classid = 'pg_namespace'::regclass AND oid = d.objid) a(acl, dflt)
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem'))
SELECT pg_describe_object(m.classid, m.objid, 0),
       coalesce(m.acl, m.dflt),
       coalesce((SELECT initprivs FROM pg_init_privs i
                 WHERE i.classoid = m.classid AND i.objoid = m.objid AND i.objsubid = 0), m.dflt)
FROM member m
UNION ALL
SELECT attrelid::regclass || '.' || attname, attacl, NULL
FROM pg_attribute WHERE attrelid IN ('idem.keys'::regclass, 'idem.webhooks'::regclass)
  AND attacl IS NOT NULL
ORDER BY 1};
my $privs_q = q{
SELECT has_function_privilege('app_role', 'idem_claim(text, bytea, text, interval, interval, boolean)', 'EXECUTE'),
       has_function_privilege('app_role', 'idem_complete(text, jsonb, text, bigint)', 'EXECUTE'),
       has_function_privilege('app_role', 'idem_purge(integer)', 'EXECUTE'),
       has_function_privilege('idem_monitor', 'idem.stats_1_3()', 'EXECUTE'),
       has_table_privilege('idem_monitor', 'idem_stats', 'SELECT'),
       has_column_privilege('idem_monitor', 'idem.keys', 'state', 'SELECT'),
       has_column_privilege('idem_monitor', 'idem.keys', 'response', 'SELECT'),
       has_function_privilege('public', 'idem_claim(text, bytea, text, interval, interval, boolean)', 'EXECUTE')};
my $legacy_privs_q =
  q{SELECT has_function_privilege('idem_monitor', 'idem.stats_1_3()', 'EXECUTE'),
       has_table_privilege('idem_monitor', 'idem_stats', 'SELECT')};

my %before;
for my $db (qw(postgres legacy))
{
	for my $q (values %rows_q, $seq_q, $acl_q)
	{
		$before{$db}{$q} = $old->safe_psql($db, $q);
	}
}
is($old->safe_psql('postgres', $privs_q), 't|t|f|t|t|t|f|f', 'the grants before the upgrade');
is($old->safe_psql('legacy', $legacy_privs_q), 't|t',
	'the update to 1.3 granted idem.stats_1_3() to the monitoring role');
is($old->safe_psql('postgres', 'SELECT count(*) FROM idem.keys'), '6', 'six keys written');
my $processing_token =
  $old->safe_psql('postgres', "SELECT token FROM idem.keys WHERE key = 'u-processing'");
my $stale_token = $old->safe_psql('postgres', 'SELECT min(token) FROM idem.keys');
my $max_token = $old->safe_psql('postgres', 'SELECT max(token) FROM idem.keys');
my $payment_key = $old->safe_psql('postgres',
	"SELECT idem_payment_key('m-7', 'order-42', 100.50, 'EUR', '2026-01-02')");

my $dump_before = $old->basedir . '/before.sql';
$old->command_ok([ 'pg_dumpall', '--no-sync', '-d', $old->connstr('postgres'), '-f', $dump_before ],
	'pg_dumpall before the upgrade');

# --- pg_upgrade ---

my $new = PostgreSQL::Test::Cluster->new('new');
$new->init(extra => [ '--encoding=UTF8', '--no-locale' ]);
$new->append_conf('postgresql.conf', $conf);

my $bindir = $old->config_data('--bindir');
$old->stop;
# pg_upgrade writes its scripts to the current directory
chdir $new->basedir or die $!;
command_ok(
	[
		'pg_upgrade', '--no-sync', '--link', '--retain',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $bindir, '-B', $bindir,
		'-s', $new->host,
		'-p', $old->port, '-P', $new->port,
		'-U', scalar getpwuid($<)
	],
	'pg_upgrade --link, with idem preloaded in both clusters');

# --- Nothing of idem's ran on pg_upgrade's servers ---

my @server_logs;
find(sub { push @server_logs, $File::Find::name if $_ eq 'pg_upgrade_server.log' },
	$new->data_dir . '/pg_upgrade_output.d');
is(scalar @server_logs, 1, 'pg_upgrade kept its server log (--retain)');
my $upgrade_log = slurp_file($server_logs[0]);
my $starts = () = $upgrade_log =~ /database system is ready to accept connections/g;
my $lr = () = $upgrade_log =~ /starting background worker process "logical replication launcher"/g;
cmp_ok($starts, '>=', 2, "pg_upgrade started its servers ($starts starts in its log)");
is($lr, $starts,
	'at each start the log shows the background workers started (the logical replication launcher)');
my @upgrade_idem = $upgrade_log =~ /$idem_lines/g;
is(scalar @upgrade_idem, 0,
	'and no idem purge launcher or worker registered, started or ran in binary-upgrade mode')
  or diag join "\n", @upgrade_idem;

# --- The upgraded cluster ---

$new->start;
for my $db (qw(postgres legacy))
{
	is($new->safe_psql($db, $rows_q{keys}), $before{$db}{ $rows_q{keys} },
		"$db: every key is unchanged, column by column");
	is($new->safe_psql($db, $rows_q{webhooks}), $before{$db}{ $rows_q{webhooks} },
		"$db: every webhook record is unchanged");
	is($new->safe_psql($db, $rows_q{webhook_sources}), $before{$db}{ $rows_q{webhook_sources} },
		"$db: every webhook source is unchanged, secrets included");
	is($new->safe_psql($db, $seq_q), $before{$db}{$seq_q},
		"$db: the token sequence is where it was");
	is($new->safe_psql($db, $acl_q), $before{$db}{$acl_q},
		"$db: the privileges and initial privileges of every object of idem are unchanged");
}
is($new->safe_psql('postgres', $privs_q), 't|t|f|t|t|t|f|f',
	'the grants to the application and monitoring roles hold, and PUBLIC still has none');
is($new->safe_psql('legacy', $legacy_privs_q), 't|t',
	'the grant the update made holds too');
is( $new->safe_psql(
		'legacy', 'SET ROLE idem_monitor; SELECT count(*) >= 0 FROM idem_stats'),
	't', 'the monitoring role reads idem_stats in the updated database');

my $dump_after = $new->basedir . '/after.sql';
$new->command_ok([ 'pg_dumpall', '--no-sync', '-d', $new->connstr('postgres'), '-f', $dump_after ],
	'pg_dumpall after the upgrade');
# Less the random keys of \restrict, new in every dump
my @dumps = map { slurp_file($_) =~ s/^\\(?:un)?restrict .*$//mgr } $dump_before, $dump_after;
is($dumps[1], $dumps[0], 'pg_dumpall writes the same before and after the upgrade');

# --- Claims, replays and the attempt in flight ---

my $fp100 = q{idem_fingerprint('{"amount": 100}')};
is( $new->safe_psql('postgres', "SELECT status, response FROM idem_claim('u-completed', $fp100)"),
	'completed|{"note": "naïve ☃", "charge": "ch_1"}',
	'a completed key replays its response');
is($new->safe_psql('postgres', q{SELECT status FROM idem_claim('u-completed', '\x00')}),
	'mismatch', 'its fingerprint still tells another request apart');
is( $new->safe_psql('postgres',
		q{SELECT status, response FROM idem_claim('u-failed', '\x0102', scope => 'merchant-7')}),
	'failed|{"error": "card_declined"}',
	'a failed key replays its error');
is($new->safe_psql('postgres', "SELECT idem_payment_key('m-7', 'order-42', 100.50, 'EUR', '2026-01-02')"),
	$payment_key, 'the payment key derives the same');
is( $new->safe_psql(
		'postgres',
		"SELECT status, response FROM idem_claim(idem_payment_key('m-7', 'order-42', 100.50, 'EUR', '2026-01-02'), scope => 'm-7')"
	),
	'completed|{"charge": "ch_pk"}',
	'and replays its charge');
is($new->safe_psql('postgres', q{SELECT status, attempt FROM idem_claim('u-processing', '\x03')}),
	'in_progress|1', 'the lease of the attempt in flight is honoured');
is( $new->safe_psql(
		'postgres',
		"SELECT sqlstate_of(\$\$SELECT idem_complete('u-attempt2', '{}', token => $stale_token)\$\$)"),
	'ID001', 'a token of an earlier attempt is still stale');
$new->safe_psql('postgres',
	"SELECT idem_complete('u-processing', '{\"charge\": \"ch_2\"}', token => $processing_token)");
is($new->safe_psql('postgres', q{SELECT status, response FROM idem_claim('u-processing', '\x03')}),
	'completed|{"charge": "ch_2"}', 'its worker completes it by its token after the upgrade');
is($new->safe_psql('postgres', q{SELECT status, attempt FROM idem_claim('u-released')}),
	'claimed|2', 'a released key is claimed at once, as attempt 2');
cmp_ok($new->safe_psql('postgres', "SELECT token FROM idem_claim('u-new')"),
	'>', $max_token, 'a new claim gets a token above every one from before');
is( $new->safe_psql(
		'postgres',
		q{SET ROLE app_role;
		  SELECT c.status FROM idem_claim('u-app') c, LATERAL (SELECT idem_complete('u-app', '{}')) x;
		  SELECT status FROM idem_claim('u-app');}
	),
	"claimed\ncompleted", 'the application role claims and completes');
is( $new->safe_psql('postgres',
		"SELECT idem_webhook('stripe', 'evt_1'), idem_webhook('queue-ü', 'msg-√2'), idem_webhook('stripe', 'evt_3')"),
	'f|f|t', 'recorded webhooks are duplicates; a new one is new');

# And the purge worker runs again, now that the server runs normally
ok( $new->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem purge launcher'"),
	'the purge launcher runs on the upgraded cluster');
ok($new->poll_query_until('postgres', 'SELECT last_purge_at IS NOT NULL FROM idem_stats'),
	'and purges');

ok(!$new->log_contains('PANIC|TRAP:'), 'no PANIC or assertion failure');
$new->stop;
done_testing();
