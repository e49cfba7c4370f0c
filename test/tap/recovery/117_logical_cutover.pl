# Moving to a new server by logical replication, with a near-zero downtime:
# a publisher with idem (the oldest kit of IDEM_KITS, "15=KIT", its server
# installed at KIT/usr/lib/postgresql/15; without one, this server) and a
# subscriber on this server, subscribed to a publication FOR ALL TABLES.
# Payments are claimed, charged and completed by concurrent clients on the
# publisher (in one transaction, or two-phase with a lease), and webhook
# deliveries recorded, while the subscriber follows; then the cutover of
# doc/operations.md: the writers stop, the subscriber catches up, its token
# sequence is set past the publisher's, the subscription is dropped and the
# application moves to the subscriber.  There every row arrived identical,
# every finished key replays its response, a retry of every key charges
# nothing twice, new claims get tokens above every old one, the attempts in
# flight keep their leases and are completed by their tokens, and recorded
# deliveries are duplicates.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

# The older servers, as major => install path
my %kits = map { $_->[0] => $_->[1] } older_servers();

# Both servers write times in UTC, so that rows compare as text
my $conf = q(
shared_preload_libraries = 'idem'
idem.purge_interval = 0
timezone = 'UTC'
log_statement = none
);

my $pub = PostgreSQL::Test::Cluster->new('publisher',
	$kits{15} ? (install_path => $kits{15}) : ());
# wal_level set here: init's allows_streaming writes settings of the test
# library's own version, which an older server refuses
$pub->init;
$pub->append_conf('postgresql.conf', $conf . "wal_level = logical\nmax_wal_senders = 10\n");
$pub->start;
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$sub->append_conf('postgresql.conf', $conf);
$sub->start;
my $hop = $pub->pg_version->major . ' to ' . $sub->pg_version->major;
note "logical replication from $hop";

# The application's schema, made on both servers (logical replication does
# not carry DDL).  pay(n): order n, in one transaction: claim, charge (a
# ledger row), complete; every 7th order is declined for good, every 11th
# fails retryably at its first attempt.  tp_begin(n) and tp_finish(n, t):
# two-phase payment tp-n, claimed with a lease in a transaction of its own,
# then charged and completed by its token; every 5th is left in flight.
# deliver(n): webhook event evt_n, handled once.  Each answers what the
# claim answered.
my $app = q{
CREATE EXTENSION idem;
CREATE TABLE ledger (scope text, key text, token bigint, amount numeric NOT NULL,
                     PRIMARY KEY (scope, key, token));
CREATE TABLE handled (source text, event_id text, xid bigint, PRIMARY KEY (source, event_id, xid));
CREATE FUNCTION pay(n integer) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    k text := 'order-' || n;
    c record;
BEGIN
    SELECT * INTO c FROM idem_claim(k, idem_fingerprint(jsonb_build_object('amount', n)), scope => 'shop');
    IF c.status = 'claimed' THEN
        IF n % 7 = 0 THEN
            PERFORM idem_fail(k, jsonb_build_object('error', 'card_declined', 'order', n),
                              retryable => false, scope => 'shop');
        ELSIF n % 11 = 0 AND c.attempt = 1 THEN
            PERFORM idem_fail(k, '{"error": "timeout"}', retryable => true, scope => 'shop');
        ELSE
            INSERT INTO ledger VALUES ('shop', k, c.token, n);
            PERFORM idem_complete(k, jsonb_build_object('charge', 'ch_' || n, 'amount', n,
                                                        'attempt', c.attempt, 'note', 'naïve ☃'),
                                  scope => 'shop');
        END IF;
    END IF;
    RETURN jsonb_build_object('status', c.status, 'token', c.token, 'response', c.response);
END $$;
CREATE FUNCTION tp_begin(n integer) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('status', status, 'token', token, 'response', response)
    FROM idem_claim('tp-' || n, idem_fingerprint(jsonb_build_object('amount', n)),
                    scope => 'shop', lease => '1 hour')
$$;
CREATE FUNCTION tp_finish(n integer, t bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF t > 0 AND n % 5 <> 0 THEN
        INSERT INTO ledger VALUES ('shop', 'tp-' || n, t, n);
        PERFORM idem_complete('tp-' || n, jsonb_build_object('charge', 'ch_tp_' || n),
                              scope => 'shop', token => t);
    END IF;
END $$;
CREATE FUNCTION deliver(n integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF idem_webhook('stripe', 'evt_' || n) THEN
        INSERT INTO handled VALUES ('stripe', 'evt_' || n, txid_current());
        RETURN true;
    END IF;
    RETURN false;
END $$;
};
for my $node ($pub, $sub)
{
	$node->safe_psql('postgres', 'CREATE DATABASE shop');
	$node->safe_psql('shop', $app);
}

# Whole rows of idem's tables and the application's, every column
my %rows_q = (
	keys => 'SELECT t::text FROM idem.keys t ORDER BY scope, key',
	webhooks => 'SELECT t::text FROM idem.webhooks t ORDER BY source, event_id',
	webhook_sources => 'SELECT t::text FROM idem.webhook_sources t ORDER BY source',
	ledger => 'SELECT t::text FROM ledger t ORDER BY scope, key, token',
	handled => 'SELECT t::text FROM handled t ORDER BY source, event_id, xid');

# --- Before the subscription: copied by its initial synchronisation ---

$pub->safe_psql(
	'shop', q{
SELECT idem_webhook_source_set('stripe', 'stripe', '{whsec_old}', ttl => '7 days');
DO $$
DECLARE
    t bigint;
BEGIN
    FOR n IN 1001 .. 1030 LOOP
        PERFORM pay(n);
        COMMIT;
        IF n <= 1010 THEN
            t := tp_begin(n)->>'token';
            COMMIT;
            PERFORM tp_finish(n, t);
            COMMIT;
        END IF;
        PERFORM deliver(n);
        COMMIT;
    END LOOP;
    -- order 1023 is retried and completes at its second attempt; 1012 stays released
    PERFORM pay(1023);
END $$;
CREATE PUBLICATION cutover FOR ALL TABLES;
});
$sub->safe_psql('shop',
	    "CREATE SUBSCRIPTION cutover CONNECTION 'host="
	  . $pub->host
	  . ' port='
	  . $pub->port
	  . " dbname=shop' PUBLICATION cutover");
ok( $sub->poll_query_until(
		'shop', q{SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate NOT IN ('r', 's')}),
	'the subscriber copied every table and follows the publisher');

# Changes from here on are streamed: a rotation of the secret and a source
$pub->safe_psql(
	'shop', q{
SELECT idem_webhook_source_set('stripe', 'stripe', '{whsec_old, whsec_new}',
                               allowed_ips => '{192.0.2.0/24}', ttl => '7 days');
SELECT idem_webhook_source_set('gh', 'github', '{"It''s a Secret"}', tolerance => '0');
});

# --- The storm ---

# Four clients, 600 scripts at a rate spread over about fifteen seconds
# (long enough for the subscriber to show the storm's charges while it
# still runs, on an assert-enabled server too), each a payment of one of
# 300 orders, a two-phase payment of one of 100, or a delivery of one of
# 300 events: keys are retried, some while their first attempt runs, and
# replayed after it.
my $dir = $pub->basedir;
append_to_file("$dir/pay.sql", "\\set n random(1, 300)\nSELECT pay(:n);\n");
append_to_file(
	"$dir/tp.sql", q{\set n random(1, 100)
SELECT coalesce((tp_begin(:n)->>'token')::bigint, 0) AS t \gset
SELECT tp_finish(:n, :t);
});
append_to_file("$dir/deliver.sql", "\\set n random(1, 300)\nSELECT deliver(:n);\n");
my $ledger_copied = $sub->safe_psql('shop', 'SELECT count(*) FROM ledger');
my $storm = IPC::Run::start(
	[
		'pgbench', '-n', '-c', 4, '-j', 2, '-t', 150, '-R', 40,
		'-f', "$dir/pay.sql\@6", '-f', "$dir/tp.sql\@2", '-f', "$dir/deliver.sql\@2",
		'-h', $pub->host, '-p', $pub->port, 'shop'
	],
	'>', "$dir/storm.out", '2>', "$dir/storm.err",
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));

ok( $sub->poll_query_until('shop', "SELECT count(*) > $ledger_copied + 20 FROM ledger"),
	'charges of the storm reach the subscriber');
ok($storm->pumpable, 'while the clients are still writing');
ok($storm->finish, 'the clients finish without an error');
note 'pgbench: ', slurp_file("$dir/storm.out"), slurp_file("$dir/storm.err");
like(slurp_file("$dir/storm.out"), qr/number of transactions actually processed: 600\/600/,
	'every script of the storm ran');

# --- The cutover ---

# The writers have stopped: the subscriber has caught up once it has
# confirmed the publisher's WAL up to its current end.
my $lsn = $pub->safe_psql('shop', 'SELECT pg_current_wal_lsn()');
ok( $pub->poll_query_until(
		'shop', qq{SELECT replay_lsn >= '$lsn' FROM pg_stat_replication WHERE application_name = 'cutover'}),
	"the subscriber caught up with the publisher at $lsn");
# (every *_error_count column: 19 split sync_error_count into
# sync_seq_error_count and sync_table_error_count)
is( $sub->safe_psql(
		'shop', q{SELECT sum(e.value::bigint) FROM pg_stat_subscription_stats s,
			json_each_text(row_to_json(s)) e
			WHERE s.subname = 'cutover' AND e.key LIKE '%error_count'}),
	'0', 'and applied every change without an error');

my %pub_rows = map { $_ => $pub->safe_psql('shop', $rows_q{$_}) } keys %rows_q;
for my $t (sort keys %rows_q)
{
	is($sub->safe_psql('shop', $rows_q{$t}), $pub_rows{$t},
		"every row of $t arrived identical, column by column");
}
# What the storm left, so that the checks below check something
is( $pub->safe_psql(
		'shop', q{
SELECT bool_and(n > 0) FROM (
    SELECT count(*) FILTER (WHERE state = 'completed' AND key LIKE 'order-%'),
           count(*) FILTER (WHERE state = 'completed' AND key LIKE 'tp-%' AND attempt = 1),
           count(*) FILTER (WHERE state = 'completed' AND attempt = 2),
           count(*) FILTER (WHERE state = 'failed'),
           count(*) FILTER (WHERE state = 'released'),
           count(*) FILTER (WHERE state = 'processing' AND lease_until > now()),
           (SELECT count(*) FROM idem.webhooks),
           (SELECT count(*) FROM idem.webhook_sources)
    FROM idem.keys) c(a, b, c, d, e, f, g, h),
    LATERAL (VALUES (a), (b), (c), (d), (e), (f), (g), (h)) v(n)}),
	't',
	'the publisher holds completed, failed, released and in-flight keys, retried ones, deliveries and sources');

# The token sequence is not replicated: as the doc says, it is set on the
# subscriber, past the last token the publisher handed out, before the
# subscriber takes claims.
my $old_last = $pub->safe_psql('shop', 'SELECT last_value FROM idem.token_seq');
my $old_max = $pub->safe_psql('shop', 'SELECT max(token) FROM idem.keys');
cmp_ok($sub->safe_psql('shop', 'SELECT last_value FROM idem.token_seq'),
	'<', $old_max, "the subscriber's sequence is behind the publisher's tokens");
$sub->safe_psql('shop', "SELECT setval('idem.token_seq', $old_last)");
$sub->safe_psql('shop', 'DROP SUBSCRIPTION cutover');
is($pub->safe_psql('shop', 'SELECT count(*) FROM pg_replication_slots'),
	'0', 'dropping the subscription dropped its slot on the publisher');
$pub->stop;

# --- The application on the new server ---

# What the new server held at the cutover
$sub->safe_psql(
	'shop', q{
CREATE TABLE keys_then AS SELECT * FROM idem.keys;
CREATE TABLE ledger_then AS SELECT * FROM ledger;
CREATE TABLE handled_then AS SELECT * FROM handled;
});

# A retry of every key and every delivery, as the clients retry them
$sub->safe_psql(
	'shop', q{
CREATE TABLE retried AS
SELECT k.key, CASE WHEN k.key LIKE 'order-%' THEN pay(substr(k.key, 7)::integer)
                   ELSE tp_begin(substr(k.key, 4)::integer) END AS answer
FROM keys_then k;
CREATE TABLE redelivered AS
SELECT w.event_id, deliver(substr(w.event_id, 5)::integer) AS new
FROM idem.webhooks w WHERE w.event_id IN (SELECT event_id FROM handled_then);
});

# 'all' when the retry of every key that matched $where at the cutover
# answered as $answer says, and there was at least one such key
sub retries
{
	my ($where, $answer) = @_;
	return $sub->safe_psql(
		'shop', qq{
SELECT count(*) FILTER (WHERE $answer), count(*)
FROM keys_then k JOIN retried r USING (key)
WHERE $where}) =~ s/^([1-9]\d*)\|\1$/all/r;
}
is( retries(
		q{k.state IN ('completed', 'failed')},
		q{r.answer->>'status' = k.state AND (r.answer->'response')::text = k.response::text}),
	'all',
	'every finished key replays its status and its response on the new server');
is( retries(q{k.state = 'processing' AND k.lease_until > now()},
		q{r.answer->>'status' = 'in_progress'}),
	'all',
	'every attempt in flight keeps its lease: its key answers in_progress');
is(retries(q{k.state = 'released'}, q{r.answer->>'status' = 'claimed'}),
	'all', 'every released key is claimed again');
is( $sub->safe_psql(
		'shop', q{
SELECT (SELECT count(*) FROM (SELECT FROM ledger GROUP BY scope, key HAVING count(*) > 1) d),
       (SELECT count(*) FROM (SELECT * FROM ledger_then EXCEPT SELECT * FROM ledger) l),
       (SELECT count(*) FROM ledger l
        WHERE NOT EXISTS (SELECT FROM ledger_then t WHERE t = l)
          AND l.key NOT IN (SELECT key FROM keys_then WHERE state = 'released'))}),
	'0|0|0',
	'after the retries no key is charged twice, and only the released keys were charged anew');
cmp_ok(
	$sub->safe_psql(
		'shop', q{SELECT min(token) FROM ledger l WHERE NOT EXISTS (SELECT FROM ledger_then t WHERE t = l)}),
	'>', $old_last,
	'the retried released keys got tokens above every token of the old server');
is( $sub->safe_psql(
		'shop', q{
SELECT count(*) FILTER (WHERE NOT new), count(*),
       (SELECT count(*) FROM (SELECT * FROM handled EXCEPT SELECT * FROM handled_then) h)
FROM redelivered}) =~ s/^([1-9]\d*)\|\1\|0$/all/r,
	'all',
	'every recorded delivery is a duplicate on the new server, and is not handled again');

# New orders, and the workers holding tokens of the attempts in flight
cmp_ok($sub->safe_psql('shop', q{SELECT min((pay(n)->>'token')::bigint) FROM generate_series(5001, 5010) n}),
	'>', $old_last, 'new claims get tokens above every token of the old server');
my ($inflight, $inflight_token) = split /\|/, $sub->safe_psql(
	'shop', q{
SELECT key, token FROM keys_then WHERE state = 'processing' AND lease_until > now()
ORDER BY key LIMIT 1});
$sub->safe_psql('shop',
	qq{SELECT idem_complete('$inflight', '{"charge": "late"}', scope => 'shop', token => $inflight_token)});
is( $sub->safe_psql(
		'shop', qq{SELECT status, response FROM idem_claim('$inflight', scope => 'shop')}),
	'completed|{"charge": "late"}',
	'the worker of an attempt in flight completes it on the new server by its token');
is($sub->safe_psql('shop', 'SELECT count(*) FROM idem.webhook_sources'),
	'2', 'the webhook sources are there, for idem_webhook_receive');

ok(!$sub->log_contains('PANIC|TRAP:'), 'no PANIC or assertion failure');
$sub->stop;
done_testing();
