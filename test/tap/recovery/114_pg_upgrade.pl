# pg_upgrade (--link) across major versions: when IDEM_KITS names older
# servers with idem ("15=KIT 17=KIT", oldest first, each server installed at
# KIT/usr/lib/postgresql/NN), the cluster is made with the oldest, upgraded
# to each next one and at last to the server the test runs on, each hop by
# the newer side's pg_upgrade; with two kits or more, a copy of that first
# cluster is also upgraded in one hop to this server (on 19, with kits of
# 15 and 18: 15 to 18 to 19, and 15 to 19); without kits, one hop from
# this server to itself.  On the last cluster of each route, every key
# (completed, failed, released, processing with a lease and a checkpoint, a
# later attempt, a payment key), every webhook record and webhook source,
# the token sequence and the grants on idem's functions and views
# (including those an extension update recorded as initial privileges) come
# through unchanged; the attempt in flight is completed by its token
# afterwards, and claims go on.  The purge worker never runs on
# pg_upgrade's servers, at any hop: its lines are absent from pg_upgrade's
# server log, written at a level that shows every background worker
# registered and started, and that does show idem's when the same cluster
# starts normally.
use strict;
use warnings;

use File::Find;
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

# The older servers, oldest first, as [major, install path]
my @kits = older_servers();

# DEBUG1 logs each background worker the postmaster registers and starts.
# pg_prewarm's autoprewarm leader is a background worker that also runs in
# binary-upgrade mode (from 17 on, the logical replication launcher does
# not): its start shows that pg_upgrade's servers did start their workers.
my $conf = q(
shared_preload_libraries = 'pg_prewarm,idem'
idem.database = 'postgres'
idem.purge_interval = '1s'
log_min_messages = debug1
);

# The clusters of the chain, oldest first, each made (not started) with
# the server at install path $path, or this one
sub cluster
{
	my ($name, $path) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name, $path ? (install_path => $path) : ());
	# Checksums on in all: 18's initdb turns them on by default, older
	# ones off, and pg_upgrade wants both sides alike.
	$node->init(extra => [ '--encoding=UTF8', '--no-locale', '--data-checksums' ]);
	$node->append_conf('postgresql.conf', $conf);
	return $node;
}
my @paths = ((map { $_->[1] } @kits), undef);
unshift @paths, undef if @paths == 1;
my @chain = map {
	cluster($_ == 0 ? 'old' : $_ == $#paths ? 'new' : "hop$_", $paths[$_])
} 0 .. $#paths;
my ($old, $new) = @chain[ 0, -1 ];
my $route = join(' to ', map { $_->pg_version->major } @chain);
note "the upgrades: $route";
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
# pg_dump leaves out), and the column privileges on its tables, each told as
# pg_dump tells it: what they grant beyond the default for the object's kind
# and owner (+) and what of that default they take away (-).  pg_upgrade
# leaves privileges equal to the default NULL, which means the same, and the
# default itself is not the same in every version (17 gave the owner of a
# table MAINTAIN).
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
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')),
priv AS (
    SELECT pg_describe_object(m.classid, m.objid, 0) AS what, m.dflt,
           coalesce(m.acl, m.dflt) AS acl,
           coalesce((SELECT initprivs FROM pg_init_privs i
                     WHERE i.classoid = m.classid AND i.objoid = m.objid AND i.objsubid = 0),
                    m.dflt) AS init
    FROM member m
    UNION ALL
    SELECT attrelid::regclass || '.' || attname, NULL, attacl, NULL
    FROM pg_attribute WHERE attrelid IN ('idem.keys'::regclass, 'idem.webhooks'::regclass)
      AND attacl IS NOT NULL)
SELECT p.what, v.kind,
       (SELECT string_agg(t, ', ' ORDER BY t)
        FROM (SELECT e.sign || CASE e.grantee WHEN 0 THEN 'PUBLIC' ELSE e.grantee::regrole::text END
                     || ' ' || e.privilege_type || CASE WHEN e.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
                     || ' BY ' || e.grantor::regrole
              FROM ((SELECT '+', * FROM aclexplode(v.acl) EXCEPT SELECT '+', * FROM aclexplode(p.dflt))
                    UNION ALL
                    (SELECT '-', * FROM aclexplode(p.dflt) EXCEPT SELECT '-', * FROM aclexplode(v.acl)))
                   e(sign, grantor, grantee, privilege_type, is_grantable)) d(t))
FROM priv p, LATERAL (VALUES ('privileges', p.acl), ('initial privileges', p.init)) v(kind, acl)
WHERE v.acl IS NOT NULL
ORDER BY 1, 2};
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
like(
	$before{postgres}{$acl_q},
	qr/^function idem_claim\(text,bytea,text,interval,interval,boolean\)\|privileges\|\+app_role EXECUTE BY postgres, -PUBLIC EXECUTE BY postgres$/m,
	'the privileges read as what they grant and revoke against the defaults');
like(
	$before{legacy}{$acl_q},
	qr/^function idem\.stats_1_3\(\)\|initial privileges\|\+idem_monitor EXECUTE BY postgres, -PUBLIC EXECUTE BY postgres$/m,
	'and the initial privileges too');
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

# pg_dumpall of this server, the newest of the chain, dumps both sides:
# older versions' pg_dumpall writes otherwise.
my $bindir = `pg_config --bindir`;
chomp $bindir;
my $dump_before = $old->basedir . '/before.sql';
command_ok(
	[ "$bindir/pg_dumpall", '--no-sync', '-d', $old->connstr('postgres'), '-f', $dump_before ],
	'pg_dumpall before the upgrade');

# --- pg_upgrade, hop by hop ---

# Debian's 15.20 and 17.12 stamp every column they create with an option
# pg_attver (in pg_attribute.attoptions) that 18.6, released before them,
# does not know: its pg_dump copies the stamps of the old cluster's tables
# into the binary-upgrade dump, and its server refuses them, so pg_upgrade
# fails on any table.  A server that stamps leaves the old stamps out and
# stamps anew.  Before a hop into a server that does not stamp, the stamps
# are taken off the old cluster's own tables (nothing else of pg_attribute
# changes; the rows of idem's tables are compared after the last hop).
my $stamped_q = q{SELECT count(*) > 0 FROM pg_attribute WHERE attoptions::text LIKE '%pg_attver=%'};
sub unstamp
{
	my ($from, $to) = @_;
	return unless $from->safe_psql('postgres', $stamped_q) eq 't';
	$to->start;
	my $stamps = $to->safe_psql('postgres', $stamped_q);
	$to->stop;
	return if $stamps eq 't';
	note 'taking the pg_attver stamps off the user tables of ', $from->name;
	for my $db (split /\n/,
		$from->safe_psql('postgres', 'SELECT datname FROM pg_database WHERE datallowconn'))
	{
		$from->safe_psql(
			$db, q{
UPDATE pg_attribute
SET attoptions = nullif(ARRAY(SELECT o FROM unnest(attoptions) o WHERE o NOT LIKE 'pg_attver=%'), '{}')
WHERE attrelid >= 16384 AND attoptions::text LIKE '%pg_attver=%'});
	}
	return;
}

# Upgrade running cluster $from into $to with $to's pg_upgrade, and show
# that nothing of idem's ran on pg_upgrade's servers.
sub upgrade
{
	my ($from, $to) = @_;
	my $hop = $from->pg_version->major . ' to ' . $to->pg_version->major;
	unstamp($from, $to);
	$from->stop;
	my ($old_bindir, $new_bindir) = map { $_->config_data('--bindir') } $from, $to;
	# The test library may give relative paths; pg_upgrade runs elsewhere.
	my ($olddata, $newdata, $dir) =
	  map { File::Spec->rel2abs($_) } $from->data_dir, $to->data_dir, $to->basedir;
	# pg_upgrade writes its scripts to the current directory
	ok( run_log(
			[
				"$new_bindir/pg_upgrade", '--no-sync', '--link', '--retain',
				'-d', $olddata, '-D', $newdata,
				'-b', $old_bindir, '-B', $new_bindir,
				'-s', $to->host,
				'-p', $from->port, '-P', $to->port,
				'-U', scalar getpwuid($<)
			],
			init => sub { chdir $dir or die "chdir $dir: $!" }),
		"$hop: pg_upgrade --link, with idem preloaded in both clusters");

	my @server_logs;
	find(sub { push @server_logs, $File::Find::name if $_ eq 'pg_upgrade_server.log' },
		"$newdata/pg_upgrade_output.d");
	is(scalar @server_logs, 1, "$hop: pg_upgrade kept its server log (--retain)");
	my $upgrade_log = slurp_file($server_logs[0] // '/dev/null');
	my $starts = () = $upgrade_log =~ /database system is ready to accept connections/g;
	my $workers = () = $upgrade_log =~ /starting background worker process "autoprewarm leader"/g;
	cmp_ok($starts, '>=', 2, "$hop: pg_upgrade started its servers ($starts starts in its log)");
	is($workers, $starts,
		"$hop: at each start the log shows the background workers started (the autoprewarm leader)");
	my @upgrade_idem = $upgrade_log =~ /$idem_lines/g;
	is(scalar @upgrade_idem, 0,
		"$hop: and no idem purge launcher or worker registered, started or ran in binary-upgrade mode")
	  or diag join "\n", @upgrade_idem;
	return;
}

# With two older servers or more, a copy of the old cluster, taken while
# it was stopped, is upgraded to this server in one hop as well, as a DBA
# who skips the majors between upgrades it (15 to 19 beside 15 to 18 to 19)
my ($direct, $direct_new, $direct_route);
if (@chain > 2)
{
	$direct_route = $old->pg_version->major . ' to ' . $new->pg_version->major;
	$old->stop;
	$old->backup_fs_cold('before');
	$old->start;
	$direct = PostgreSQL::Test::Cluster->new('old_copy', install_path => $paths[0]);
	$direct->init_from_backup($old, 'before');
	$direct_new = cluster('new_direct');
	$direct->start;
	upgrade($direct, $direct_new);
}

for my $i (1 .. $#chain)
{
	upgrade(@chain[ $i - 1, $i ]);
	next if $i == $#chain;
	# A cluster on the way, started as its operator would start it
	$chain[$i]->start;
	for my $db (qw(postgres legacy))
	{
		is($chain[$i]->safe_psql($db, $rows_q{keys}), $before{$db}{ $rows_q{keys} },
			$chain[$i]->pg_version->major . ": $db: every key is unchanged on the way");
	}
}

# --- The upgraded cluster ---

# Start upgraded cluster $new, the end of route $route ("15 to 18 to
# 19"), and show in a subtest of that name that it holds everything the old
# cluster held, that claims go on there and that its purge worker runs
# again; then stop it
sub check_upgraded
{
	my ($new, $route) = @_;
	subtest $route => sub { check_upgraded_cluster($new) };
	$new->stop;
	return;
}

# The checks of check_upgraded on running cluster $new
sub check_upgraded_cluster
{
	my ($new) = @_;
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
	command_ok(
		[ "$bindir/pg_dumpall", '--no-sync', '-d', $new->connstr('postgres'), '-f', $dump_after ],
		'pg_dumpall after the upgrade');
	# Less the random keys of \restrict, new in every dump, and the version of
	# the server dumped, named in a comment of each database's part: the oldest
	# server of the chain before, this one after
	my @dumps = map {
		slurp_file($_) =~ s/^\\(?:un)?restrict .*$//mgr =~ s/^-- Dumped from database version .*$//mgr
	} $dump_before, $dump_after;
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
	return;
}

check_upgraded($new, $route);
check_upgraded($direct_new, $direct_route) if $direct;
done_testing();
