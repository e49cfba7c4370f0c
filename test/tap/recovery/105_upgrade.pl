# Upgrade: ALTER EXTENSION idem UPDATE from 1.0 to 1.1 keeps every row and
# the token sequence, and adds the operators' view idem_keys_in_progress;
# from 1.1 to 1.2 it marks idem_lookup PARALLEL RESTRICTED (under 1.1 a
# parallel worker refuses to run it rather than miss a pending claim); from
# 1.2 to 1.3 it adds idem_wechatpay_decrypt and the counters of 1.3 (the
# 1.2 view of the counters works with the new library until the update),
# which PUBLIC cannot execute, and keeps every grant users made; from 1.3 to
# 1.4 it adds the columns of the response as sent to idem.keys, and
# idem_http_claim and idem_http_respond, which neither PUBLIC nor a role
# granted the 1.3 functions can execute, and keeps every key, webhook
# record, source and grant (until the update the later library claims,
# finishes and replays on the 1.3 table, and refuses to store an HTTP
# response there); from 1.4 to 1.5 it adds, drops and re-creates nothing,
# keeps every row, source and grant, and states in the comment of
# idem_webhook_receive the address rule of sources with allowed_ips, which
# is in the library: on a database still at 1.4, before its update, the new
# library already rejects a delivery whose client_ip is NULL; from 1.5 to
# 1.6 it drops the indexes on expires_at and adds the trigger function
# idem.expiry_outside_write, idem.purge_backlog and the export and import
# of keys and deliveries, keeping every other member, row, source and
# grant (until the update the new library purges through the indexes, after
# it by sweeping the tables); from 1.6 to 1.7 it replaces the export and
# import of keys and deliveries in place (a role granted them keeps its
# grant) and adds their helpers in schema idem, keeping every row, the
# token sequence's settings and every grant, and a 1.6 export imports
# under 1.7; 1.0 to 1.6 each update straight to 1.7 with their rows and
# grants; a fresh CREATE EXTENSION (1.0 followed by the update scripts)
# gives the same objects, the same idem.keys and the same comments; DROP
# EXTENSION leaves nothing behind in the catalogs.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(hmac_sha256_hex);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $node = idem_node('upgrade', q(
log_statement = none
));

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

# Everything in the catalogs of a database that an extension could leave
# behind: schemas, relations (tables, indexes, sequences, views, TOAST),
# functions, types, operators, casts, initial privileges, dependencies and
# comments.
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
    UNION ALL SELECT 'description ' || count(*) FROM pg_description
    UNION ALL SELECT 'extension ' || extname FROM pg_extension
) s(x)};

# The extension's member objects, as pg_describe_object names them
# The members of the extension, less the row types of its tables and views
# and their array types, which go with the relations: 15 records them as
# members for CREATE EXTENSION only, 17 on for an update's new relations too.
my $members_q = q{
SELECT string_agg(pg_describe_object(classid, objid, objsubid), E'\n'
                  ORDER BY pg_describe_object(classid, objid, objsubid))
FROM pg_depend d
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
  AND NOT EXISTS (SELECT 1 FROM pg_type t LEFT JOIN pg_type e ON e.oid = t.typelem
                  WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
                    AND (t.typrelid <> 0 OR e.typrelid <> 0))};

my $version_q = "SELECT extversion FROM pg_extension WHERE extname = 'idem'";

# The comments on the extension's member objects and their columns
my $comments_q = q{
SELECT string_agg(pg_describe_object(ds.classoid, ds.objoid, ds.objsubid) || ': ' || ds.description,
                  E'\n' ORDER BY pg_describe_object(ds.classoid, ds.objoid, ds.objsubid))
FROM pg_depend d
JOIN pg_description ds ON ds.classoid = d.classid AND ds.objoid = d.objid
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')};

# Every member object of the extension by its catalog and oid: the same
# before and after an update that adds nothing and re-creates nothing
my $member_oids_q = q{
SELECT string_agg(classid::regclass::text || ' ' || objid::text, ',' ORDER BY classid, objid)
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')};

# The extension's functions with their volatility and parallel labels
my $labels_q = q{
SELECT string_agg(p.proname || ' ' || p.provolatile::text || p.proparallel::text, ', '
                  ORDER BY p.proname)
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idem'};

# The privileges on the extension's functions and relations
my $acls_q = q{
SELECT string_agg(o || ' ' || coalesce(acl::text, 'default'), E'\n' ORDER BY o) FROM (
    SELECT p.oid::regprocedure::text, p.proacl
    FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
    WHERE d.deptype = 'e' AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
    UNION ALL
    SELECT c.oid::regclass::text, c.relacl
    FROM pg_depend d JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
    WHERE d.deptype = 'e' AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
) AS a(o, acl)};

# The privileges now of the objects a database had when $before was read
# from $acls_q: those of the objects an update adds are left out
sub acls_kept
{
	my ($db, $before) = @_;
	my %had = map { (split / /)[0] => 1 } split /\n/, $before;
	return join("\n", grep { $had{ (split / /)[0] } } split /\n/, sql($db, $acls_q));
}

# The columns of idem.keys, with their types, collations and NOT NULL
my $columns_q = q{
SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod)
                  || CASE WHEN attcollation = '"C"'::regcollation THEN ' collate "C"' ELSE '' END
                  || CASE WHEN attnotnull THEN ' not null' ELSE '' END, ', ' ORDER BY attnum)
FROM pg_attribute WHERE attrelid = 'idem.keys'::regclass AND attnum > 0 AND NOT attisdropped};

my $keys_q = q{SELECT scope, key, state, token, attempt, encode(fingerprint, 'hex'),
       lease_until, checkpoint, checkpoint_data, response, created_at,
       completed_at, expires_at
FROM idem.keys ORDER BY scope, key};
my $webhooks_q = 'SELECT * FROM idem.webhooks ORDER BY 1, 2';
my $sources_q = 'SELECT * FROM idem.webhook_sources ORDER BY 1';
my $seq_q = 'SELECT last_value, is_called FROM idem.token_seq';

# Every key, every webhook record and the token sequence of a database
sub rows_of
{
	my $db = shift;
	return join("\n", map { sql($db, $_) } ($keys_q, $webhooks_q, $seq_q));
}

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
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
    THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', true);
SELECT state, attempt FROM idem_lookup('u-pending');
ROLLBACK;};
my ($rc, $out, $err) = $node->psql('up', $parallel_lookup);
like($err, qr/idem_lookup\(\) cannot run in a parallel worker.*\n.*\n.*ALTER EXTENSION idem UPDATE/s,
	'under 1.1, idem_lookup in a parallel worker is refused, with the update as the hint');

my $keys_11 = sql('up', $keys_q);
sql('up', "ALTER EXTENSION idem UPDATE TO '1.2'");
is(sql('up', $version_q),
	'1.2', "ALTER EXTENSION idem UPDATE TO '1.2' goes on to 1.2");
is(sql('up', "SELECT proparallel FROM pg_proc WHERE proname = 'idem_lookup'"),
	'r', '1.2 marks idem_lookup PARALLEL RESTRICTED');
is(sql('up', $parallel_lookup), "claimed\non\nprocessing|1",
	'under 1.2 the same query runs idem_lookup in the leader and sees the pending claim');
is(sql('up', $keys_q), $keys_11, 'every key is unchanged by the second update');
is(sql('up', $webhooks_q), $webhooks_before, 'every webhook record is unchanged by the second update');

# --- 1.2 to 1.3: idem_wechatpay_decrypt, and every grant kept ---

# An application role granted what doc/api.md grants under 1.2; the
# operators' grant on the view is there from above
sql('up', 'CREATE ROLE app LOGIN');
sql('up', q{GRANT EXECUTE ON FUNCTION idem_claim(text, bytea, text, interval, interval, boolean),
                                      idem_webhook(text, text, interval),
                                      idem_webhook_verify(text, text, text, jsonb, interval) TO app});
# A monitoring role with the grants doc/operations.md gives under 1.2
sql('up', q{CREATE ROLE mon LOGIN;
            GRANT SELECT ON idem_stats TO mon;
            GRANT EXECUTE ON FUNCTION idem.stats_1_0() TO mon});

# The server already runs a later library: the 1.2 view of the counters,
# on idem.stats_1_0(), keeps working before the update, with its columns
sql('up', q{SELECT idem_claim('stats-12')});
is( sql('up', q{SELECT claimed > 0, count(*) OVER () FROM idem_stats WHERE datname = 'up'}),
	't|1', 'the 1.2 view idem_stats works with the later library before the update');
is( sql('up', q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
                WHERE attrelid = 'idem_stats'::regclass AND attnum > 0}),
	'datname,claimed,completed,failed,replayed,in_progress,mismatched,webhooks_new,'
	  . 'webhooks_duplicate,purged,last_purge_at',
	'with the columns of 1.2');

is(sql('up', q{SELECT to_regprocedure('idem_wechatpay_decrypt(text, jsonb)') IS NULL}),
	't', '1.2 has no idem_wechatpay_decrypt');
my $acls_12 = sql('up', $acls_q);
like($acls_12, qr/idem_webhook_verify\(text,text,text,jsonb,interval\) \{.*app=X/,
	'the grants are in the ACLs before the update');
my $rows_12 = rows_of('up');
my $members_12 = sql('up', $members_q);


sql('up', "ALTER EXTENSION idem UPDATE TO '1.3'");
is(sql('up', $version_q), '1.3', "ALTER EXTENSION idem UPDATE TO '1.3' goes on to 1.3");
is(rows_of('up'), $rows_12, 'every key, webhook record and the token sequence are unchanged by the update to 1.3');
is(acls_kept('up', $acls_12), $acls_12, 'every grant is kept: no function or view was dropped and re-created');
is( sql('up', $members_q),
	join("\n", sort(split(/\n/, $members_12), 'function idem_wechatpay_decrypt(text,jsonb)',
		'function idem.stats_1_3()',
		'function idem_webhook_source_set(text,text,text[],interval,cidr[],interval)',
		'function idem_webhook_source_drop(text)', 'table idem.webhook_sources',
		'view idem_webhook_sources', 'function idem_webhook_receive(text,text,jsonb,inet)')),
	'the update adds exactly idem_wechatpay_decrypt, idem.stats_1_3 and the webhook sources to the extension');
is( sql('up', q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
                WHERE attrelid = 'idem_stats'::regclass AND attnum > 0}),
	'datname,claimed,completed,failed,replayed,in_progress,mismatched,webhooks_new,'
	  . 'webhooks_duplicate,purged,last_purge_at,taken_over,stale_tokens,webhooks_rejected',
	'after the update the view has the counters of 1.3 after those of 1.2');
is( $node->safe_psql('up', q{SELECT claimed > 0, taken_over > 0 FROM idem_stats WHERE datname = 'up'},
		extra_params => [ '-U', 'mon' ]),
	't|t', 'the monitoring role granted under 1.2 reads the 1.3 view (the takeover above counted)');
is( sql('up', q{SELECT has_function_privilege('public', 'idem.stats_1_3()', 'EXECUTE')}),
	'f', 'PUBLIC cannot execute idem.stats_1_3');
is( sql('up', q{SELECT provolatile::text || proparallel::text || proisstrict::text FROM pg_proc
                WHERE oid = 'idem_wechatpay_decrypt(text, jsonb)'::regprocedure}),
	'isfalse', 'idem_wechatpay_decrypt is IMMUTABLE, PARALLEL SAFE and takes NULLs itself');
is( sql('up', q{SELECT has_function_privilege('public', 'idem_wechatpay_decrypt(text, jsonb)', 'EXECUTE')}),
	'f', 'PUBLIC cannot execute idem_wechatpay_decrypt');
is( sql('up', q{SELECT has_function_privilege('public', 'idem_webhook_source_set(text, text, text[], interval, cidr[], interval)', 'EXECUTE'),
                       has_function_privilege('public', 'idem_webhook_source_drop(text)', 'EXECUTE'),
                       has_function_privilege('public', 'idem_webhook_receive(text, text, jsonb, inet)', 'EXECUTE'),
                       has_table_privilege('public', 'idem_webhook_sources', 'SELECT'),
                       has_table_privilege('public', 'idem.webhook_sources', 'SELECT')}),
	'f|f|f|f|f', 'PUBLIC can use none of the webhook sources');
is( sql('up', q{SELECT cfg::regclass FROM pg_extension, unnest(extconfig) AS cfg
                WHERE extname = 'idem' AND cfg = 'idem.webhook_sources'::regclass}),
	'idem.webhook_sources', 'the sources table is a configuration table: pg_dump keeps its rows');
sql('up', q{SELECT idem_webhook_source_set('gh', 'github', '{s1}')});
is( sql('up', q{SELECT source, scheme, secret_count FROM idem_webhook_sources}),
	'gh|github|1', 'after the update a source can be set and read back without its secret');
is( sql('up', q{SELECT status, reason FROM idem_webhook_receive('gh', 'p', '{}')}),
	'rejected|signature', 'and deliveries of it received');
is( $node->safe_psql(
		'up', q{SELECT idem_webhook('stripe', 'evt_13'), idem_webhook_verify('stripe', 'k', 'p', '{}')},
		extra_params => [ '-U', 'app' ]),
	't|f', 'the role granted under 1.2 still calls what it was granted');
my ($rc13, $out13, $err13) = $node->psql('up', q{SELECT idem_wechatpay_decrypt(repeat('k', 32), '{}')},
	extra_params => [ '-U', 'app' ]);
like($err13, qr/permission denied for function idem_wechatpay_decrypt/,
	'and not idem_wechatpay_decrypt, until it is granted');
sql('up', 'GRANT EXECUTE ON FUNCTION idem_wechatpay_decrypt(text, jsonb) TO app');
is( $node->safe_psql(
		'up', q{SELECT idem_wechatpay_decrypt(repeat('k', 32), '{}') IS NULL},
		extra_params => [ '-U', 'app' ]),
	't', 'then it calls it');

# --- 1.3 to 1.4: the response as sent, idem_http_claim and idem_http_respond ---

# The server already runs a later library.  Until the update idem.keys has
# the 13 columns of 1.0 to 1.3: the library reads its rows with the columns
# of 1.4 null, and writes them without.
is(sql('up', q{SELECT relnatts FROM pg_class WHERE oid = 'idem.keys'::regclass}),
	'13', '1.3 has the 13 columns of idem.keys');
is( sql('up', q{SELECT to_regprocedure('idem_http_claim(text, bytea, text, interval, interval, interval)') IS NULL}),
	't', '1.3 has no idem_http_claim');

# Claims finished in their own transaction (their rows written once, at the
# finish), one of them with no response and one released for a retry; a
# two-phase claim, with a checkpoint, finished by its token; the released
# attempt taken over in place, and in flight across the update
sql('up', q{
BEGIN;
SELECT idem_claim('v-one', '\x09');
SELECT idem_complete('v-one', '{"b": 1, "a": 2.50}');
SELECT idem_claim('v-empty');
SELECT idem_complete('v-empty');
SELECT idem_claim('v-declined');
SELECT idem_fail('v-declined', '{"error": "card_declined"}', retryable => false);
SELECT idem_claim('v-retry');
SELECT idem_fail('v-retry', '{"error": "timeout"}');
COMMIT;
});
my $t_two = sql('up', q{SELECT token FROM idem_claim('v-two', '\x02', lease => '1 hour')});
is(sql('up', q{SELECT status, attempt FROM idem_claim('v-two', '\x02')}),
	'in_progress|1', 'on the 1.3 table the later library answers a committed claim in progress');
sql('up', qq{SELECT idem_checkpoint('v-two', 'charged', '{"charge": "ch_9"}', token => $t_two)});
sql('up', qq{SELECT idem_complete('v-two', '{"charge": "ch_9"}', token => $t_two)});
my ($t_retry, $attempt_retry) =
  split /\|/, sql('up', q{SELECT token, attempt FROM idem_claim('v-retry', lease => '1 hour')});
is($attempt_retry, '2', 'takes a released attempt over as attempt 2');

# A replay reads the row with the columns of 1.4 added as null: were they
# not null, v-empty, which has no response, would replay them as its body
my $replays_q = q{
SELECT status, response FROM idem_claim('v-one', '\x09');
SELECT status, response IS NULL FROM idem_claim('v-empty');
SELECT status, response FROM idem_claim('v-declined');
SELECT status, response FROM idem_claim('v-two', '\x02');
SELECT status FROM idem_claim('v-one', '\x00')};
my $replays_13 = sql('up', $replays_q);
is( $replays_13,
	qq{completed|{"a": 2.50, "b": 1}\ncompleted|t\nfailed|{"error": "card_declined"}\n}
	  . qq{completed|{"charge": "ch_9"}\nmismatch},
	'replays each response (none where none was given), and tells another request apart');
is( sql('up', q{
SELECT state, attempt, checkpoint, completed_at IS NOT NULL FROM idem_lookup('v-two');
SELECT state, attempt FROM idem_lookup('v-retry');
BEGIN;
SELECT status FROM idem_claim('v-pending');
SELECT state, attempt FROM idem_lookup('v-pending');
ROLLBACK}),
	"completed|1|charged|t\nprocessing|2\nclaimed\nprocessing|1",
	'idem_lookup reads its rows, and a claim of the transaction not written yet');
is( sql('up', q{
SELECT idem_webhook('stripe', 'evt_14');
SELECT idem_webhook('stripe', 'evt_14');
SELECT status, reason FROM idem_webhook_receive('gh', 'p', '{}')}),
	"t\nf\nrejected|signature", 'and records webhooks, tells duplicates and receives deliveries of a source');

# idem_http_respond is in the library but not in 1.3: declared by hand, it
# refuses to finish an attempt on the 1.3 table, which has no room for the
# response as sent
my ($rc_hand, $out_hand, $err_hand) = $node->psql(
	'up', q{
\set VERBOSITY verbose
CREATE SCHEMA by_hand;
CREATE FUNCTION by_hand.idem_http_respond(key text, http_status integer, body text,
                                          scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void AS '$libdir/idem', 'idem_http_respond' LANGUAGE C;
BEGIN;
SELECT status FROM idem_claim('v-by-hand');
SELECT by_hand.idem_http_respond('v-by-hand', 201, '{}');
COMMIT;
DROP SCHEMA by_hand CASCADE;
SELECT count(*) FROM idem.keys WHERE key = 'v-by-hand';
},
	on_error_stop => 0);
like($err_hand, qr/ERROR:  55000: idem_http_respond needs idem 1\.4\nHINT:  Run ALTER EXTENSION idem UPDATE\./,
	'idem_http_respond on the 1.3 table fails with 55000, the update as the hint');
is($out_hand, "claimed\n0", 'and the attempt rolls back with it');

my $acls_13 = sql('up', $acls_q);
like($acls_13, qr/^idem\.stats_1_3\(\) \{.*mon=X/m, 'the grant the update to 1.3 made is in the ACLs');
my $rows_13 = rows_of('up');
my $sources_13 = sql('up', $sources_q);
my $members_13 = sql('up', $members_q);
my $columns_13 = sql('up', $columns_q);

sql('up', "ALTER EXTENSION idem UPDATE TO '1.4'");
is(sql('up', $version_q), '1.4', "ALTER EXTENSION idem UPDATE TO '1.4' goes on to 1.4");
is(rows_of('up'), $rows_13, 'every key, webhook record and the token sequence are unchanged by the update to 1.4');
is(sql('up', $sources_q), $sources_13, 'every webhook source is unchanged, secrets included');
is(acls_kept('up', $acls_13), $acls_13, 'every grant is kept, those on the objects of 1.3 included');
is( sql('up', $members_q),
	join("\n", sort(split(/\n/, $members_13),
		'function idem_http_claim(text,bytea,text,interval,interval,interval)',
		'function idem_http_respond(text,integer,text,text,bigint)')),
	'the update adds exactly idem_http_claim and idem_http_respond to the extension');
is(sql('up', $columns_q), "$columns_13, http_status smallint, body text",
	'and to idem.keys the HTTP status and body, nullable, after the columns of 1.3');
is(sql('up', q{SELECT count(*) FROM idem.keys WHERE http_status IS NOT NULL OR body IS NOT NULL}),
	'0', 'the rows written before the update have neither');
is(sql('up', $replays_q), $replays_13, 'and replay through idem_claim as they did before it');
is( sql('up', q{
SELECT has_function_privilege(r, 'idem_http_claim(text, bytea, text, interval, interval, interval)', 'EXECUTE'),
       has_function_privilege(r, 'idem_http_respond(text, integer, text, text, bigint)', 'EXECUTE')
FROM unnest('{public, app}'::name[]) r}),
	"f|f\nf|f", 'neither PUBLIC nor the role granted the 1.3 functions can execute the new ones');

is( sql('up', q{
SELECT status, http_status, body, content_type FROM idem_http_claim('v-one', '\x09');
SELECT status, http_status, body IS NULL FROM idem_http_claim('v-empty');
SELECT status, http_status, body FROM idem_http_claim('v-declined')}),
	qq{completed|200|{"a": 2.50, "b": 1}|application/json\ncompleted|200|t\n}
	  . qq{failed|400|{"error": "card_declined"}},
	'a key finished before the update replays through idem_http_claim as 200 or 400 with its jsonb\'s text');

# The response as the application serialised it: spaces, an id above 2^53,
# 100.50
my $sent = '{"id": 9007199254740993,  "amount": 100.50}';
sql('up', qq{SELECT idem_http_respond('v-retry', 201, '$sent', token => $t_retry)});
is( sql('up', q{SELECT status, http_status, body, attempt FROM idem_http_claim('v-retry')}),
	"completed|201|$sent|2",
	'the attempt in flight across the update is finished by idem_http_respond with its token, and replayed byte for byte');
is( sql('up', q{SELECT status, response FROM idem_claim('v-retry')}),
	'completed|{"id": 9007199254740993, "amount": 100.50}',
	'idem_claim replays that body as jsonb');
sql('up', q{GRANT EXECUTE ON FUNCTION idem_http_claim(text, bytea, text, interval, interval, interval),
                                      idem_http_respond(text, integer, text, text, bigint) TO app});
is( $node->safe_psql(
		'up', q{
BEGIN;
SELECT status FROM idem_http_claim('v-http');
SELECT idem_http_respond('v-http', 402, '{"error":"card_declined"}');
COMMIT;
SELECT status, http_status, body FROM idem_http_claim('v-http');
SELECT status, response FROM idem_claim('v-http')},
		extra_params => [ '-U', 'app' ]),
	qq{claimed\n\nfailed|402|{"error":"card_declined"}\nfailed|{"error": "card_declined"}},
	'once granted, the role claims and responds in one transaction, replayed as sent, and as jsonb by idem_claim');

# --- 1.4 to 1.5: sources with allowed_ips fail closed ---

# A genuine GitHub delivery (the source's secret is s1), so that the
# address is the only thing a source could refuse it for
my $gh_payload = '{"action": "opened"}';
my $gh_sig     = hmac_sha256_hex($gh_payload, 's1');
sub gh_receive
{
	my ($source, $id, $ip) = @_;
	return qq{SELECT status, reason FROM idem_webhook_receive('$source', '$gh_payload',
	    '{"X-Hub-Signature-256": "sha256=$gh_sig", "X-GitHub-Delivery": "$id"}', $ip);};
}

# The rule is in the library, not in the SQL: a database still at 1.4
# already gets it with the new library.  A NULL client_ip used to skip the
# check; the same delivery from an allowed host is recorded.
sql('up', q{SELECT idem_webhook_source_set('gh-ip', 'github', '{s1}', allowed_ips => '{192.0.2.0/24}')});
is( sql('up', $version_q . ';' . gh_receive('gh-ip', 'gh-14', 'NULL') . gh_receive('gh-ip', 'gh-14', "'192.0.2.10'")),
	"1.4\nrejected|ip\nnew|",
	'at 1.4, before the update, the new library rejects a NULL client_ip for a source with allowed_ips');
is( sql('up', q{SELECT obj_description('idem_webhook_receive(text, text, jsonb, inet)'::regprocedure, 'pg_proc') IS NULL}),
	't', '1.4 has no comment on idem_webhook_receive');

sql('up', 'GRANT EXECUTE ON FUNCTION idem_webhook_receive(text, text, jsonb, inet) TO app');
my $acls_14 = sql('up', $acls_q);
my $rows_14 = rows_of('up');
my $sources_14 = sql('up', $sources_q);
my $member_oids_14 = sql('up', $member_oids_q);
my $shape_14 = join("\n", map { sql('up', $_) } $columns_q, $labels_q);

sql('up', "ALTER EXTENSION idem UPDATE TO '1.5'");
is(sql('up', $version_q), '1.5', "ALTER EXTENSION idem UPDATE TO '1.5' goes on to 1.5");
is(sql('up', $member_oids_q), $member_oids_14,
	'the update to 1.5 adds, drops and re-creates no object: every member keeps its oid');
is(rows_of('up'), $rows_14, 'every key, webhook record and the token sequence are unchanged by the update to 1.5');
is(sql('up', $sources_q), $sources_14, 'every webhook source is unchanged, allowed_ips and secrets included');
is(sql('up', $acls_q), $acls_14, 'every grant is kept, that on idem_webhook_receive included');
is(join("\n", map { sql('up', $_) } $columns_q, $labels_q), $shape_14,
	'the columns of idem.keys and the labels of the functions are unchanged');
like( sql('up', q{SELECT obj_description('idem_webhook_receive(text, text, jsonb, inet)'::regprocedure, 'pg_proc')}),
	qr/^for a source with allowed_ips, client_ip must be one host .*IPv4-mapped IPv6 .* a NULL or a network is rejected with reason ip; a source without allowed_ips takes any address$/,
	'the update states the address rule in the comment on idem_webhook_receive');
is( $node->safe_psql(
		'up',
		gh_receive('gh-ip', 'gh-15', 'NULL')
		  . gh_receive('gh-ip', 'gh-15', "'192.0.2.0/24'")
		  . gh_receive('gh-ip', 'gh-15', "'::ffff:192.0.2.10'")
		  . gh_receive('gh-ip', 'gh-14', "'192.0.2.10'")
		  . gh_receive('gh', 'gh-15', 'NULL'),
		extra_params => [ '-U', 'app' ]),
	"rejected|ip\nrejected|ip\nnew|\nduplicate|\nnew|",
	'the role granted under 1.4 receives after the update: NULL and a network rejected, an IPv4-mapped one taken and a known one a duplicate; a source without allowed_ips takes a NULL');

# --- 1.5 to 1.6: no index on expires_at, the purge sweeps ---

# Until the update the new library purges a 1.5 database through its
# indexes on expires_at: two expired keys and an expired delivery go, a
# live key stays, and so does an expired key whose lease still runs.
my $indexes_q = q{SELECT string_agg(indexrelid::regclass::text, ' ' ORDER BY indexrelid::regclass::text)
FROM pg_index WHERE indrelid IN ('idem.keys'::regclass, 'idem.webhooks'::regclass)};
sql('up', q{
SELECT idem_claim('p-old-1'), idem_claim('p-old-2'), idem_claim('p-live'), idem_claim('p-leased');
SELECT idem_webhook('stripe', 'evt-old');
UPDATE idem.keys SET expires_at = now() - interval '1 s', lease_until = now() - interval '1 s'
WHERE key LIKE 'p-old-%';
UPDATE idem.keys SET expires_at = now() - interval '1 s', lease_until = now() + interval '1 hour'
WHERE key = 'p-leased';
UPDATE idem.webhooks SET expires_at = now() - interval '1 s' WHERE event_id = 'evt-old';
});
is( sql('up', $indexes_q . '; SELECT idem_purge()'),
	"idem.keys_expires_at_idx idem.keys_pkey idem.webhooks_expires_at_idx idem.webhooks_pkey\n3",
	'at 1.5, before the update, the new library purges through the indexes on expires_at');

my $acls_15 = sql('up', $acls_q);
my $rows_15 = rows_of('up');
my $sources_15 = sql('up', $sources_q);
my $member_oids_15 = sql('up', $member_oids_q);

# a key that expires at 1.5 is purged at 1.6
sql('up', q{
SELECT idem_claim('p-old-3');
UPDATE idem.keys SET expires_at = now() - interval '1 s', lease_until = now() - interval '1 s'
WHERE key = 'p-old-3';
});
$rows_15 = rows_of('up');
sql('up', "ALTER EXTENSION idem UPDATE TO '1.6'");
is(sql('up', $version_q), '1.6', "ALTER EXTENSION idem UPDATE TO '1.6' goes on to 1.6");
is(sql('up', $indexes_q), 'idem.keys_pkey idem.webhooks_pkey', 'the update drops the indexes on expires_at');
is( sql('up', $member_oids_q . q{ AND NOT (classid = 'pg_proc'::regclass
        AND objid IN ('idem.expiry_outside_write()'::regprocedure, 'idem.purge_backlog()'::regprocedure,
                      'idem_keys_export(text[])'::regprocedure, 'idem_keys_import(jsonb)'::regprocedure,
                      'idem_webhooks_export(text, text[])'::regprocedure,
                      'idem_webhooks_import(jsonb)'::regprocedure,
                      'idem.import_rows(jsonb, text, text[], text[])'::regprocedure))}),
	$member_oids_15,
	'the update to 1.6 adds the trigger function, idem.purge_backlog and the export and import of keys and deliveries, and drops or re-creates no member: each keeps its oid');
is( sql('up', q{SELECT string_agg(concat(has_function_privilege('app', f, 'EXECUTE'),
                                         has_function_privilege('public', f, 'EXECUTE')), ' ')
                FROM unnest(ARRAY['idem.purge_backlog()', 'idem_keys_export(text[])',
                                  'idem_keys_import(jsonb)', 'idem_webhooks_export(text, text[])',
                                  'idem_webhooks_import(jsonb)',
                                  'idem.import_rows(jsonb, text, text[], text[])']::regprocedure[]) f}),
	'ff ff ff ff ff ff',
	'neither PUBLIC nor the application role may execute idem.purge_backlog or the export and import functions');
is( sql('up', q{SELECT string_agg(concat_ws(' ', tgrelid::regclass, tgname, tgenabled), ', ' ORDER BY tgname)
FROM pg_trigger WHERE tgfoid = 'idem.expiry_outside_write()'::regprocedure}),
	'idem.keys keys_outside_write A, idem.webhooks webhooks_outside_write A',
	'its triggers fire on idem.keys and idem.webhooks ALWAYS');
is(rows_of('up'), $rows_15, 'every key, webhook record and the token sequence are unchanged by the update to 1.6');
is(sql('up', $sources_q), $sources_15, 'every webhook source is unchanged by the update to 1.6');
is(acls_kept('up', $acls_15), $acls_15, 'every grant is kept by the update to 1.6');
is( sql('up', q{SELECT has_function_privilege('app', 'idem.expiry_outside_write()', 'EXECUTE'),
                       has_function_privilege('public', 'idem.expiry_outside_write()', 'EXECUTE')}),
	'f|f', 'neither PUBLIC nor the application role may execute the trigger function');
is( sql('up', q{SELECT idem_purge();
SELECT string_agg(key, ' ' ORDER BY key) FROM idem.keys WHERE key LIKE 'p-%'}),
	"1\np-leased p-live",
	'after the update the purge sweeps: the key expired before it goes, the live and the leased ones stay');

# --- 1.6 to 1.7: imports that keep fencing ---

# A role granted the move functions under 1.6, keys completed with the
# JSON value null and with none, and the sequence with settings of its
# own; a 1.6 export of the keys, which carries every field and null for
# SQL NULL and for the JSON value null alike
sql('up', q{
CREATE ROLE mover;
GRANT EXECUTE ON FUNCTION idem_keys_export(text[]), idem_keys_import(jsonb),
    idem_webhooks_export(text, text[]), idem_webhooks_import(jsonb) TO mover;
SELECT idem_complete('q-null', 'null', scope => 'q', token => (SELECT token FROM idem_claim('q-null', scope => 'q')));
SELECT idem_complete('q-none', scope => 'q', token => (SELECT token FROM idem_claim('q-none', scope => 'q')));
ALTER SEQUENCE idem.token_seq INCREMENT BY 3 CACHE 2;
});
my $export_16 = sql('up', q{SELECT jsonb_agg(e ORDER BY e ->> 'key') FROM idem_keys_export(ARRAY['q']) e});
is( sql('up', qq{SELECT string_agg((SELECT count(*) FROM jsonb_object_keys(e)) || ' ' || (e -> 'response'), ', ')
                 FROM jsonb_array_elements(\$j\$$export_16\$j\$) e}),
	'15 null, 15 null', 'a 1.6 export writes every field, null for SQL NULL and the JSON value null alike');
my $acls_16 = sql('up', $acls_q);
my $rows_16 = rows_of('up');
my $sources_16 = sql('up', $sources_q);
my $member_oids_16 = sql('up', $member_oids_q);
my $seq_settings_q = q{SELECT seqincrement, seqcache, seqmax FROM pg_sequence WHERE seqrelid = 'idem.token_seq'::regclass};
my $seq_settings_16 = sql('up', $seq_settings_q);

sql('up', 'ALTER EXTENSION idem UPDATE');
is(sql('up', $version_q), '1.7', 'ALTER EXTENSION idem UPDATE goes on to 1.7');
is( sql('up', $member_oids_q . q{ AND NOT (classid = 'pg_proc'::regclass
        AND objid IN ('idem.max_response_bytes()'::regprocedure,
                      'idem.import_raise(text, bigint, text, text, text, text)'::regprocedure,
                      'idem.import_text(jsonb, text, integer, integer)'::regprocedure,
                      'idem.import_time(jsonb, text)'::regprocedure,
                      'idem.import_integer(jsonb, text)'::regprocedure,
                      'idem.import_json(jsonb, text, boolean, bigint)'::regprocedure,
                      'idem.import_key(jsonb, bigint, bigint)'::regprocedure,
                      'idem.check_replay(jsonb, text)'::regprocedure,
                      'idem_http_respond_retryable(text, integer, text, text, bigint)'::regprocedure,
                      'idem.webhook_check(text, text, jsonb, inet)'::regprocedure,
                      'idem.webhook_record(text, text, interval)'::regprocedure,
                      'idem.webhook_order_lock(text, text)'::regprocedure,
                      'idem.webhook_ttl_default()'::regprocedure,
                      'idem.webhook_json(text)'::regprocedure,
                      'idem.webhook_object(text, jsonb)'::regprocedure,
                      'idem.webhook_order_apply(text, text, timestamptz, text, interval)'::regprocedure,
                      'idem.webhook_order_check(text, text, timestamptz, text)'::regprocedure,
                      'idem_webhook_order(text, text, timestamptz, text, interval)'::regprocedure,
                      'idem_webhook_receive_ordered(text, text, jsonb, inet, text, timestamptz)'::regprocedure))
        AND NOT (classid = 'pg_class'::regclass AND objid = 'idem.webhook_order'::regclass)
        AND NOT (classid = 'pg_type'::regclass
                 AND objid IN ('idem.webhook_order'::regtype, 'idem.webhook_order[]'::regtype))}),
	$member_oids_16,
	'the update to 1.7 adds the helpers of the imports, idem_http_respond_retryable and the webhook order, and drops or re-creates no member: each keeps its oid');
is( sql('up', q{SELECT has_function_privilege('public',
                    'idem_http_respond_retryable(text, integer, text, text, bigint)', 'EXECUTE')}),
	'f', 'PUBLIC may not execute idem_http_respond_retryable');
is( sql('up', q{SELECT string_agg(has_function_privilege('public', p.oid, 'EXECUTE')::text, ' ')
                FROM pg_proc p WHERE p.pronamespace = 'idem'::regnamespace
                 AND p.proname IN ('max_response_bytes', 'import_raise', 'import_text', 'import_time',
                                   'import_integer', 'import_json', 'import_key', 'check_replay')}),
	'false false false false false false false false', 'PUBLIC may execute none of the helpers');
is(rows_of('up'), $rows_16, 'every key, webhook record and the token sequence are unchanged by the update to 1.7');
is(sql('up', $seq_settings_q), $seq_settings_16, 'and the settings of the token sequence');
is(sql('up', $sources_q), $sources_16, 'every webhook source is unchanged by the update to 1.7');
is(acls_kept('up', $acls_16), $acls_16, 'every grant is kept by the update to 1.7');
is( sql('up', q{SELECT string_agg(has_function_privilege('mover', f, 'EXECUTE')::text, ' ')
                FROM unnest(ARRAY['idem_keys_export(text[])', 'idem_keys_import(jsonb)',
                                  'idem_webhooks_export(text, text[])', 'idem_webhooks_import(jsonb)']::regprocedure[]) f}),
	'true true true true', 'the role granted the move functions under 1.6 may still execute them');

# the 1.6 export imports under 1.7 as 1.6 meant it: its nulls are SQL
# NULL; the 1.7 export leaves SQL NULL out and keeps the JSON value null;
# the import keeps the sequence's settings
is( sql('up', qq{
DELETE FROM idem.keys WHERE scope = 'q';
SELECT idem_keys_import(\$j\$$export_16\$j\$);
SELECT key, response IS NULL FROM idem.keys WHERE scope = 'q' ORDER BY key;
SELECT string_agg(e ->> 'key' || ' ' || (e ? 'response'), ', ' ORDER BY e ->> 'key')
FROM idem_keys_export(ARRAY['q']) e}),
	"2\nq-none|t\nq-null|t\nq-none false, q-null false",
	'a 1.6 export imports under 1.7 with its nulls as SQL NULL');
sql('up', q{SELECT idem_complete('q-json', 'null', scope => 'q', token => (SELECT token FROM idem_claim('q-json', scope => 'q')))});
is( sql('up', q{SELECT e ? 'response', e -> 'response' FROM idem_keys_export(ARRAY['q']) e WHERE e ->> 'key' = 'q-json'}),
	't|null', 'under 1.7 a key completed with the JSON value null is exported with "response": null');
is(sql('up', $seq_settings_q), $seq_settings_16, 'the import kept the settings of the token sequence');
sql('up', 'ALTER SEQUENCE idem.token_seq INCREMENT BY 1 CACHE 1');

# --- 1.0, 1.1, 1.2, 1.3, 1.4, 1.5 and 1.6 each straight to 1.7 ---

my %updated;
for my $from ('1.0', '1.1', '1.2', '1.3', '1.4', '1.5', '1.6')
{
	my $db = 'from_' . ($from =~ s/\.//r);
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	sql($db, "CREATE EXTENSION idem VERSION '$from'");
	sql($db, q{
BEGIN;
SELECT idem_claim('d-completed', idem_fingerprint('{"amount": 7}'));
SELECT idem_complete('d-completed', '{"charge": "ch_7"}');
COMMIT;
SELECT idem_claim('d-live', lease => '1 hour');
SELECT idem_webhook('wechatpay', 'EV-1');
GRANT EXECUTE ON FUNCTION idem_claim(text, bytea, text, interval, interval, boolean),
                          idem_webhook_verify(text, text, text, jsonb, interval) TO app;
});
	my ($rows, $acls) = (rows_of($db), sql($db, $acls_q));
	my $t_live = sql($db, q{SELECT token FROM idem.keys WHERE key = 'd-live'});
	# one session: idem's tables looked up before the update, the sources
	# table and the columns of 1.4 used after it, from 1.0 to 1.3 just added
	# (the response is written in a transaction that rolls back, so the rows
	# stay as they were)
	is( sql($db, qq{
SELECT state FROM idem_lookup('d-completed');
SELECT idem_webhook('stripe', 'evt-before') AS looked_up;
ALTER EXTENSION idem UPDATE;
SELECT idem_webhook_source_set('gh', 'github', '{s1}');
SELECT source FROM idem_webhook_sources;
SELECT idem_webhook_source_drop('gh');
BEGIN;
SELECT idem_http_respond('d-live', 201, '{"ok":true}', token => $t_live);
SELECT state, http_status, body FROM idem.keys WHERE key = 'd-live';
ROLLBACK;
DELETE FROM idem.webhooks WHERE event_id = 'evt-before';
}),
		qq{completed\nt\n\ngh\nt\n\ncompleted|201|{"ok":true}},
		"$from to 1.7: the session that updated uses the sources table and the new columns at once");
	is(sql($db, $version_q), '1.7', "$from updates to 1.7 in one ALTER EXTENSION");
	is(rows_of($db), $rows, "$from to 1.7 keeps every key, webhook record and the token sequence");
	is(acls_kept($db, $acls), $acls, "$from to 1.7 keeps every grant");
	is( $node->safe_psql(
			$db, q{SELECT status FROM idem_claim('d-completed')},
			extra_params => [ '-U', 'app' ]),
		'completed', "$from to 1.7: the granted role replays a key written under $from");
	is( sql($db, q{SELECT status, http_status, body FROM idem_http_claim('d-completed')}),
		'completed|200|{"charge": "ch_7"}',
		"$from to 1.7: idem_http_claim replays it as 200 with its jsonb's text");
	is( sql($db, q{
SELECT has_function_privilege('app', 'idem_wechatpay_decrypt(text, jsonb)', 'EXECUTE'),
       has_function_privilege('app', 'idem_http_claim(text, bytea, text, interval, interval, interval)', 'EXECUTE'),
       has_function_privilege('app', 'idem_http_respond(text, integer, text, text, bigint)', 'EXECUTE')}),
		'f|f|f', "$from to 1.7: the role may execute none of the functions it was not granted");
	$updated{$from} = $db;
}

# --- a fresh CREATE EXTENSION is 1.0 and the updates ---

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
my $fresh_clean_catalog = sql('fresh', $catalog_q);
sql('fresh', 'CREATE EXTENSION idem');
is(sql('fresh', $version_q),
	'1.7', 'CREATE EXTENSION installs 1.7 by default');
is(sql('fresh', $members_q), sql('up', $members_q),
	'a fresh 1.7 has exactly the objects of an updated 1.0');
is(sql('fresh', $indexes_q), sql('up', $indexes_q), 'and exactly its indexes');
is(sql('fresh', $columns_q), sql('up', $columns_q),
	'and exactly its columns of idem.keys, in the same order');
is( sql('fresh', $labels_q),
	sql('up', $labels_q),
	'and the same volatility and parallel labels');
is(sql('fresh', $comments_q), sql('up', $comments_q),
	'and the same comments, the address rule on idem_webhook_receive included');
for my $from (sort keys %updated)
{
	is( join("\n", map { sql($updated{$from}, $_) } $members_q, $columns_q, $labels_q, $comments_q),
		join("\n", map { sql('fresh', $_) } $members_q, $columns_q, $labels_q, $comments_q),
		"$from updated straight to 1.7 has the objects, columns, labels and comments of a fresh 1.7");
}
is( sql('fresh', q{SELECT string_agg(path, ', ') FROM pg_extension_update_paths('idem')
                   WHERE source = '1.0' AND target = '1.7'}),
	'1.0--1.1--1.2--1.3--1.4--1.5--1.6--1.7', 'the update path is 1.0--1.1--1.2--1.3--1.4--1.5--1.6--1.7');
is(sql('fresh', q{SELECT status FROM idem_claim('f-1')}), 'claimed', 'claims work in a fresh 1.7');
is( sql('fresh', q{
SELECT has_function_privilege('public', 'idem_wechatpay_decrypt(text, jsonb)', 'EXECUTE'),
       has_function_privilege('public', 'idem_http_claim(text, bytea, text, interval, interval, interval)', 'EXECUTE'),
       has_function_privilege('public', 'idem_http_respond(text, integer, text, text, bigint)', 'EXECUTE')}),
	'f|f|f', 'PUBLIC cannot execute idem_wechatpay_decrypt, idem_http_claim or idem_http_respond in a fresh 1.7');

# --- DROP EXTENSION removes everything ---

sql('fresh', 'DROP EXTENSION idem');
is(sql('fresh', $catalog_q), $fresh_clean_catalog,
	'after DROP EXTENSION the catalogs are as before CREATE EXTENSION');

sql('up', 'REVOKE SELECT ON idem_keys_in_progress FROM ops');
sql('up', 'REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM app');
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
