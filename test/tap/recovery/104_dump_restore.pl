# pg_dump and pg_restore: every key (each state, response, checkpoint,
# attempt, fingerprint, lease and expiry), every webhook record and the
# token sequence survive a dump in custom format restored into a fresh
# database, and claims, replays and completions go on there.  Leases and
# ttls that end as late as idem accepts, at the end of timestamptz's range,
# are restored too (one that ended past it would make COPY refuse the whole
# table).  When IDEM_KITS names a kit of 15 with idem ("15=KIT", its server
# installed at KIT/usr/lib/postgresql/15), the same data is also made on a
# 15 server, dumped by this server's pg_dump (the supported direction) and
# restored into this server, and the same checks hold there.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

# The older servers, as major => install path
my %kits = map { $_->[0] => $_->[1] } older_servers();

my $node = idem_node('dump', q(
log_statement = none
), extra => [ '--encoding=UTF8', '--no-locale' ]);
$node->safe_psql('postgres', 'CREATE DATABASE src');

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

# Keys in every state, in several scopes, with multibyte text.
my $fill = q{
CREATE EXTENSION idem;
} . $SQLSTATE_OF . q{

-- completed and failed, in one transaction each
BEGIN;
SELECT idem_claim('d-completed', idem_fingerprint('{"amount": 100}'));
SELECT idem_complete('d-completed', '{"charge": "ch_1", "amount": 100.50, "note": "naïve ☃"}');
COMMIT;
BEGIN;
SELECT idem_claim('d-failed', '\x0102', scope => 'merchant-7');
SELECT idem_fail('d-failed', '{"error": "card_declined"}', retryable => false, scope => 'merchant-7');
COMMIT;
-- released (a retryable failure), and a key in another scope with the same name
BEGIN;
SELECT idem_claim('d-released');
SELECT idem_fail('d-released', '{"error": "timeout"}');
COMMIT;
BEGIN;
SELECT idem_claim('d-completed', scope => 'другой');
SELECT idem_complete('d-completed', '"other scope"', scope => 'другой');
COMMIT;
-- two-phase: a processing attempt with a checkpoint and a live lease
SELECT idem_claim('d-processing', '\x03', lease => '1 hour', ttl => '2 days');
SELECT idem_checkpoint('d-processing', 'charged', '{"charge": "ch_2"}',
                       token => (SELECT token FROM idem.keys WHERE key = 'd-processing'),
                       lease => '1 hour');
-- attempt 2 after an expired lease
SELECT idem_claim('d-attempt2', lease => '1 ms');
SELECT pg_sleep(0.01);
SELECT idem_claim('d-attempt2', lease => '1 hour');
-- an application role with the documented grant
CREATE ROLE app_role;
GRANT EXECUTE ON FUNCTION idem_claim(text, bytea, text, interval, interval, boolean) TO app_role;
-- webhooks and queue messages
SELECT idem_webhook('stripe', 'evt_1'), idem_webhook('stripe', 'evt_2', ttl => '1 hour'),
       idem_webhook('queue-ü', 'msg-√2');
-- webhook sources, secrets included
SELECT idem_webhook_source_set('stripe', 'stripe', '{whsec_one, whsec_two}',
                               allowed_ips => '{192.0.2.0/24}', ttl => '7 days');
SELECT idem_webhook_source_set('gh-ü', 'github', '{"It''s a Secret"}', tolerance => '0');

-- Run the statement q with %s replaced by the longest duration the clock
-- allows: one that ends at the last valid microsecond, 294276-12-31
-- 23:59:59.999999 UTC, less a margin for the time the call takes to start.
-- A try that ends past it is refused (22008, nothing written); the next one
-- doubles the margin.  Returns the number of tries.
CREATE FUNCTION at_the_end(q text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    margin bigint := 0;
    tries integer := 0;
BEGIN
    LOOP
        tries := tries + 1;
        BEGIN
            EXECUTE format(q, quote_literal(format('%s microseconds',
                ((extract(epoch FROM timestamptz '294276-12-31 23:59:59.999999+00')
                  - extract(epoch FROM clock_timestamp())) * 1000000)::bigint - margin)));
            RETURN tries;
        EXCEPTION WHEN datetime_field_overflow THEN
            margin := margin * 2 + 1;
        END;
    END LOOP;
END $$;
SELECT at_the_end($$SELECT idem_claim('d-last-lease', lease => %s)$$);
SELECT at_the_end($$SELECT idem_claim('d-last-ttl', ttl => %s)$$);
SELECT idem_claim('d-last-checkpoint');
SELECT at_the_end($$SELECT idem_checkpoint('d-last-checkpoint', 'p',
    token => (SELECT token FROM idem.keys WHERE key = 'd-last-checkpoint'), lease => %s)$$);
SELECT at_the_end($$SELECT idem_webhook('stripe', 'evt_last', ttl => %s)$$);
};
sql('src', $fill);

my $keys_q = q{SELECT scope, key, state, token, attempt, encode(fingerprint, 'hex'),
       lease_until, checkpoint, checkpoint_data, response, created_at,
       completed_at, expires_at
FROM idem.keys ORDER BY scope, key};
my $webhooks_q =
  'SELECT source, event_id, received_at, expires_at FROM idem.webhooks ORDER BY 1, 2';
my $seq_q = 'SELECT last_value, is_called FROM idem.token_seq';
my $sources_q = 'SELECT * FROM idem.webhook_sources ORDER BY source';
my $extversion_q = "SELECT extversion FROM pg_extension WHERE extname = 'idem'";
# Each key and record that ends at the end of the range does so within the
# last hour of it (the margin covers the call's own delay, microseconds).
my $last_q = q{SELECT string_agg(what || ' ' || (t >= timestamptz '294276-12-31 23:00+00'
                                            AND t <= timestamptz '294276-12-31 23:59:59.999999+00'), ', ' ORDER BY what)
FROM (SELECT key || ' ' || c AS what, t
      FROM idem.keys,
           LATERAL (VALUES ('lease', lease_until), ('expiry', expires_at)) v(c, t)
      WHERE key LIKE 'd-last-%'
      UNION ALL
      SELECT event_id, expires_at FROM idem.webhooks WHERE event_id = 'evt_last') s};
my $last_expected = 'd-last-checkpoint expiry true, d-last-checkpoint lease true, '
  . 'd-last-lease expiry true, d-last-lease lease true, d-last-ttl expiry true, '
  . 'd-last-ttl lease false, evt_last true';

# What database $db of node $n holds, checked as written, for the checks of
# its restored copy; $label starts the names of the checks
sub written
{
	my ($n, $db, $label) = @_;
	my %before = map { $_ => $n->safe_psql($db, $_) }
	  $keys_q, $webhooks_q, $seq_q, $sources_q, $extversion_q;
	$before{max_token} = $n->safe_psql($db, 'SELECT max(token) FROM idem.keys');
	$before{processing_token} =
	  $n->safe_psql($db, "SELECT token FROM idem.keys WHERE key = 'd-processing'");
	$before{attempt1_token} = $n->safe_psql($db, 'SELECT min(token) FROM idem.keys');
	is($n->safe_psql($db, 'SELECT count(*) FROM idem.keys'), '9', "${label}nine keys written");
	is($n->safe_psql($db, $last_q), $last_expected,
		"${label}leases, expiries and a webhook record end in the last hour of the range, not past it");
	return \%before;
}

# The checks of database $db of this node, restored from a dump of what
# $before holds
sub restored_ok
{
	my ($db, $before, $label) = @_;
	is(sql($db, $keys_q), $before->{$keys_q},
		"${label}every key is restored identically, column by column");
	is(sql($db, $webhooks_q), $before->{$webhooks_q},
		"${label}every webhook record is restored identically");
	is(sql($db, $seq_q), $before->{$seq_q}, "${label}the token sequence is restored where it was");
	is(sql($db, $sources_q), $before->{$sources_q},
		"${label}every webhook source is restored identically, secrets included");
	is(sql($db, $last_q), $last_expected,
		"${label}the leases and expiries at the end of the range are among them");
	is(sql($db, $extversion_q), $before->{$extversion_q},
		"${label}the extension is restored at the same version");

	my $privs_q = q{SELECT has_function_privilege('app_role', 'idem_claim(text, bytea, text, interval, interval, boolean)', 'EXECUTE'),
       has_function_privilege('app_role', 'idem_complete(text, jsonb, text, bigint)', 'EXECUTE'),
       has_table_privilege('app_role', 'idem.keys', 'SELECT')};
	is(sql($db, $privs_q), 't|f|f',
		"${label}privileges are restored: the grant made, and nothing PUBLIC was not given");

	# --- claims and replays in the restored database ---

	is( sql($db, q{SELECT status, response FROM idem_claim('d-completed', idem_fingerprint('{"amount": 100}'))}),
		'completed|{"note": "naïve ☃", "amount": 100.50, "charge": "ch_1"}',
		"${label}a completed key replays its response");
	is(sql($db, q{SELECT status FROM idem_claim('d-completed', idem_fingerprint('{"amount": 200}'))}),
		'mismatch', "${label}its fingerprint still tells another request apart");
	is(sql($db, q{SELECT status, response FROM idem_claim('d-failed', '\x0102', scope => 'merchant-7')}),
		'failed|{"error": "card_declined"}', "${label}a failed key replays its error");
	is(sql($db, q{SELECT status, response FROM idem_claim('d-completed', scope => 'другой')}),
		'completed|"other scope"', "${label}scopes stay apart");
	is(sql($db, q{SELECT status, attempt FROM idem_claim('d-processing', '\x03')}),
		'in_progress|1', "${label}the restored lease is honoured");
	is(sql($db, q{SELECT status, retry_after > '290000 years' FROM idem_claim('d-last-lease')}),
		'in_progress|t', "${label}a lease that ends at the end of the range is honoured");
	is(sql($db, q{SELECT status, attempt FROM idem_claim('d-released')}),
		'claimed|2', "${label}a released key is claimed at once, as attempt 2");
	is(sql($db, q{SELECT state, attempt FROM idem_lookup('d-attempt2')}),
		'processing|2', "${label}the attempt count is kept");

	my $new_token = sql($db, q{SELECT token FROM idem_claim('d-new')});
	cmp_ok($new_token, '>', $before->{max_token},
		"${label}a new claim gets a token above every restored one");

	# the restored attempt's worker finishes it with its token; a stale token fails
	is( sql($db,
			qq{SELECT sqlstate_of(\$\$SELECT idem_complete('d-attempt2', '{}', token => $before->{attempt1_token})\$\$)}),
		'ID001', "${label}a token of an earlier attempt is still stale");
	sql($db,
		qq{SELECT idem_complete('d-processing', '{"charge": "ch_2"}', token => $before->{processing_token})});
	is(sql($db, q{SELECT status, response FROM idem_claim('d-processing', '\x03')}),
		'completed|{"charge": "ch_2"}',
		"${label}the two-phase worker completes its restored key with its token");

	is( sql($db,
			q{SELECT idem_webhook('stripe', 'evt_1'), idem_webhook('queue-ü', 'msg-√2'), idem_webhook('stripe', 'evt_3')}),
		'f|f|t', "${label}restored webhooks are duplicates; a new one is new");
	return;
}

my $before = written($node, 'src', '');

# --- dump, restore into a fresh database ---

my $dump = $node->basedir . '/src.dump';
$node->command_ok(
	[ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('src') ],
	'pg_dump in custom format');
sql('postgres', 'CREATE DATABASE dst');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dst'), $dump ],
	'pg_restore into a fresh database, without an error');
restored_ok('dst', $before, '');

# a dump can leave the secrets out, as doc/operations.md says: the sources'
# rows are not in it, the other tables' rows are
my $dump_nosecrets = $node->basedir . '/src-nosecrets.dump';
$node->command_ok(
	[ 'pg_dump', '-Fc', '--exclude-table-data=idem.webhook_sources', '-f', $dump_nosecrets,
	  '-d', $node->connstr('src') ],
	'pg_dump --exclude-table-data=idem.webhook_sources');
sql('postgres', 'CREATE DATABASE dst_nosecrets');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dst_nosecrets'), $dump_nosecrets ],
	'pg_restore of the dump without the secrets');
is(sql('dst_nosecrets', 'SELECT count(*) FROM idem.webhook_sources'), '0',
	'a dump taken with --exclude-table-data=idem.webhook_sources holds no source');
is(sql('dst_nosecrets', $webhooks_q), $before->{$webhooks_q}, 'and still every webhook record');

# the source is untouched by all this
is(sql('src', $keys_q), $before->{$keys_q}, 'the source database is unchanged');

# --- from a 15 server, by this server's pg_dump ---

if ($kits{15})
{
	my $old = PostgreSQL::Test::Cluster->new('dump15',
		install_path => $kits{15});
	$old->init(extra => [ '--encoding=UTF8', '--no-locale' ]);
	$old->append_conf('postgresql.conf', "shared_preload_libraries = 'idem'\nidem.purge_interval = 0\n");
	$old->start;
	$old->safe_psql('postgres', 'CREATE DATABASE src');
	$old->safe_psql('src', $fill);
	my $label = $old->pg_version->major . ' to ' . $node->pg_version->major . ': ';
	my $before15 = written($old, 'src', $label);

	my $dump15 = $node->basedir . '/src15.dump';
	$node->command_ok(
		[ 'pg_dump', '-Fc', '-f', $dump15, '-d', $old->connstr('src') ],
		"${label}this server's pg_dump dumps the 15 server");
	$old->stop;
	sql('postgres', 'CREATE DATABASE dst15');
	$node->command_ok(
		[ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dst15'), $dump15 ],
		"${label}pg_restore into a fresh database of this server, without an error");
	restored_ok('dst15', $before15, $label);
}
else
{
	note 'IDEM_KITS names no 15 kit: no dump of a 15 server';
}

$node->stop;
done_testing();
