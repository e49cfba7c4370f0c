# idem's metrics through the real prometheus-sql-exporter, with the
# configuration of monitoring/ as shipped (its jobs made to run every second,
# its connections pointed at this node) and the role of
# monitoring/idem_monitor.sql: claims, replays, a mismatch, an attempt in
# progress and an abandoned one, a takeover and a stale token, webhooks new,
# duplicate and rejected, expired rows and a purge, read back from /metrics
# over HTTP.  The exporter serves what its jobs read at their last run, so
# the test waits for each value rather than for a time.
use strict;
use warnings;

use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $mon = "$FindBin::RealBin/../../../monitoring";
my ($exporter, $exporter_log);

# The exporter goes with the test, however the test ends.
END { $exporter->kill_kill if $exporter; }
$SIG{TERM} = $SIG{INT} = sub { die "killed\n"; };

my $node = idem_node('exporter');
$node->safe_psql('postgres', q(
CREATE DATABASE payments;
CREATE ROLE idem_monitor LOGIN;
GRANT pg_monitor TO idem_monitor;
));
$node->safe_psql('payments', 'CREATE EXTENSION idem');
$node->safe_psql('payments', slurp_file("$mon/idem_monitor.sql"));

# --- The exporter, on a free loopback port ---

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $config = slurp_file("$mon/prometheus-sql-exporter.yml");
my $conns = ($config =~
	  s{postgres://idem_monitor\@/payments\?host=/var/run/postgresql&}
	   {'postgres://idem_monitor@/payments?host=' . $node->host . '&port=' . $node->port . '&'}ge);
my $intervals = ($config =~ s/^(\s+interval:) '[^']*'$/$1 '1s'/mg);
is("$conns $intervals", '2 2', 'the configuration has two jobs, each with its connection');
my $config_file = $node->basedir . '/prometheus-sql-exporter.yml';
PostgreSQL::Test::Utils::append_to_file($config_file, $config);

$exporter_log = $node->basedir . '/exporter.log';
{
	local $ENV{LOGLEVEL} = 'warn';
	# timeout: a test killed outright does not leave it behind for long
	$exporter = IPC::Run::start(
		[
			'timeout', '600', 'prometheus-sql-exporter',
			'-config.file', $config_file,
			'-web.listen-address', "127.0.0.1:$port"
		],
		'>&', $exporter_log);
}

my $http = HTTP::Tiny->new(timeout => 5);

# The exporter's answer: {name}{"label=value,..." sorted} = value
sub scrape
{
	my $res = $http->get("http://127.0.0.1:$port/metrics");
	return undef unless $res->{success};
	my %m;
	for (split /\n/, $res->{content})
	{
		next unless /^(\w+)(?:\{(.*)\})? (\S+)$/;
		my ($name, $labels, $value) = ($1, $2 // '', $3);
		$m{$name}{ join(',', sort $labels =~ /(\w+="[^"]*")/g) } = $value;
	}
	return \%m;
}

# The value of the series of $name whose labels include %want
sub value
{
	my ($m, $name, %want) = @_;
	my @found;
	for my $labels (keys %{ $m->{$name} // {} })
	{
		my %has = $labels =~ /(\w+)="([^"]*)"/g;
		push @found, $m->{$name}{$labels}
		  unless grep { ($has{$_} // '') ne $want{$_} } keys %want;
	}
	return @found == 1 ? $found[0] : undef;
}

# Wait until every check holds; a check is [name, {labels}, predicate,
# what it means].  Then report each, so that a failure says which.
sub wait_metrics
{
	my @checks = @_;
	my $m;
	for (1 .. 240)
	{
		$m = scrape();
		last if $m && !grep {
			my $v = value($m, $_->[0], %{ $_->[1] });
			!defined $v || !$_->[2]->($v)
		} @checks;
		usleep(250_000);
	}
	for my $c (@checks)
	{
		my $v = $m ? value($m, $c->[0], %{ $c->[1] }) : undef;
		ok(defined $v && $c->[2]->($v), $c->[3])
		  or diag("$c->[0] is " . ($v // 'missing') . "\n" . slurp_file($exporter_log));
	}
	return $m;
}

# Checks that counter $name (sql_idem_$name_total) reads exactly $n
sub counters
{
	my %want = @_;
	return map {
		my ($c, $n) = ($_, $want{$_});
		[ "sql_idem_${c}_total", {}, sub { $_[0] == $n }, "$c reads $n" ]
	} sort keys %want;
}

my %zero = map { $_ => 0 } qw(claimed completed failed replayed in_progress
  mismatched webhooks_new webhooks_duplicate webhooks_rejected taken_over
  stale_tokens purged);
my $m = wait_metrics(counters(%zero));

my @failing = grep { $m->{sql_exporter_last_scrape_failed}{$_} != 0 }
  keys %{ $m->{sql_exporter_last_scrape_failed} };
ok(@failing == 0 && keys %{ $m->{sql_exporter_last_scrape_failed} } >= 20,
	'idem_monitor runs every query of the configuration')
  or diag(join("\n", @failing), "\n", slurp_file($exporter_log));

is(value($m, 'sql_idem_claimed_total', database => 'payments', user => 'idem_monitor',
		sql_job => 'idem'), '0',
	'the series name the database, the role and the job');

# Every metric the alerts use is one the exporter serves.
my $rules = slurp_file("$mon/idem.rules.yml");
$rules =~ s/(sql_\w+?)\(([\w|]+)\)(\w*)/join(' ', map { "$1$_$3" } split m{\|}, $2)/ge;
my %used = map { $_ => 1 } $rules =~ /\b(sql_\w+)/g;
my @absent = grep { !exists $m->{$_} } sort keys %used;
ok(keys %used >= 10 && !@absent, 'the exporter serves every metric the alerts use')
  or diag("absent: @absent");

my ($ret, $out, $err) = $node->psql('payments', 'SELECT key, response FROM idem.keys',
	extra_params => [ '-U', 'idem_monitor' ]);
like($err, qr/permission denied for table keys/,
	'idem_monitor cannot read keys or responses');

# --- What the application does ---

# Run SQL in the database the exporter watches.
sub sql { return $node->safe_psql('payments', $_[0]); }

# Each counter is given a count of its own, so that one read for another
# shows.
sql(q{
BEGIN;
SELECT idem_claim('c' || i, '\x01'::bytea) FROM generate_series(1, 7) i;
SELECT idem_complete('c' || i, '{"charge": "ch_1"}') FROM generate_series(1, 7) i;
COMMIT;
SELECT idem_claim('c1', '\x01'::bytea) FROM generate_series(1, 5);  -- replayed
SELECT idem_claim('c2', '\x02'::bytea) FROM generate_series(1, 4);  -- mismatch
BEGIN;
SELECT idem_claim('f' || i) FROM generate_series(1, 3) i;
SELECT idem_fail('f' || i, '{"code": "card_declined"}', retryable => false)
FROM generate_series(1, 3) i;
COMMIT;
SELECT idem_claim('k2', lease => '1 h');                -- its lease runs
SELECT idem_claim('k2') FROM generate_series(1, 6);     -- in_progress
SELECT idem_claim('a' || i, lease => '1 ms') FROM generate_series(1, 2) i;  -- abandoned
SELECT idem_webhook('stripe', 'evt_' || i) FROM generate_series(1, 9) i;
SELECT idem_webhook('stripe', 'evt_1') FROM generate_series(1, 10);
SELECT idem_webhook_source_set('shop', 'github', ARRAY['s3cret']);
});

# a takeover, and the first attempt's token refused twice
my $t1 = sql(q{SELECT token FROM idem_claim('t1', lease => '1 ms')});
$node->poll_query_until('payments',
	"SELECT lease_until < clock_timestamp() FROM idem_lookup('t1')")
  or die 'the lease of t1 did not run out';
my $t2 = sql(q{SELECT token FROM idem_claim('t1')});
($ret, $out, $err) = $node->psql('payments', "SELECT idem_complete('t1', '{}', token => $t1)");
like($err, qr/does not hold key "t1"/, 'the first attempt\'s token is stale');
$node->psql('payments', "SELECT idem_checkpoint('t1', 'late', token => $t1)");
sql("SELECT idem_complete('t1', '{}', token => $t2)");

is( sql(q{SELECT DISTINCT status || ' ' || reason FROM generate_series(1, 12) i,
	idem_webhook_receive('shop', '{}', jsonb_build_object(
		'X-Hub-Signature-256', 'sha256=00', 'X-GitHub-Delivery', 'd-' || i))}),
	'rejected signature', 'deliveries with a bad signature are rejected');

# Expired rows: ten keys ten minutes ago, six webhook ids twenty.
sql(q{
UPDATE idem.keys SET expires_at = now() - interval '10 min' WHERE key ~ '^[cf]';
UPDATE idem.webhooks SET expires_at = now() - interval '20 min' WHERE event_id <= 'evt_6';
});

wait_metrics(
	counters(
		claimed => 15, completed => 8, failed => 3, replayed => 5,
		in_progress => 6, mismatched => 4, webhooks_new => 9,
		webhooks_duplicate => 10, webhooks_rejected => 12, taken_over => 1,
		stale_tokens => 2, purged => 0),
	[ 'sql_idem_keys_in_progress', { lease => 'running' }, sub { $_[0] == 1 },
		'one attempt in progress holds its lease' ],
	[ 'sql_idem_keys_in_progress', { lease => 'expired' }, sub { $_[0] == 2 },
		'two attempts in progress have lost it' ],
	[ 'sql_idem_keys_in_progress_oldest_age_seconds', { lease => 'expired' },
		sub { $_[0] > 0 && $_[0] < 300 }, 'the abandoned attempts\' age' ],
	[ 'sql_idem_expired_rows', { table => 'keys' }, sub { $_[0] == 10 },
		'ten expired keys wait for the purge' ],
	[ 'sql_idem_expired_rows', { table => 'webhooks' }, sub { $_[0] == 6 },
		'six expired webhook ids wait for the purge' ],
	[ 'sql_idem_expired_oldest_age_seconds', { table => 'keys' },
		sub { $_[0] >= 600 && $_[0] < 900 }, 'the keys expired ten minutes ago' ],
	[ 'sql_idem_expired_oldest_age_seconds', { table => 'webhooks' },
		sub { $_[0] >= 1200 && $_[0] < 1500 }, 'the webhook ids twenty minutes ago' ]);

# --- A purge ---

is(sql('SELECT idem_purge()'), '16', 'idem_purge deletes the expired rows');

$m = wait_metrics(
	counters(purged => 16),
	[ 'sql_idem_expired_rows', { table => 'keys' }, sub { $_[0] == 0 },
		'no expired key is left' ],
	[ 'sql_idem_expired_rows', { table => 'webhooks' }, sub { $_[0] == 0 },
		'no expired webhook id is left' ],
	[ 'sql_idem_expired_oldest_age_seconds', { table => 'keys' }, sub { $_[0] == 0 },
		'the purge lag is back to 0' ],
	[ 'sql_idem_last_purge_age_seconds', {}, sub { $_[0] >= 0 && $_[0] < 60 },
		'the last purge was a moment ago' ],
	[ 'sql_idem_table_live_rows', { table => 'keys' }, sub { $_[0] == 4 },
		'idem.keys holds four live rows' ],
	[ 'sql_idem_table_live_rows', { table => 'webhooks' }, sub { $_[0] == 3 },
		'idem.webhooks three' ],
	[ 'sql_idem_table_dead_rows', { table => 'keys' }, sub { $_[0] >= 10 },
		'the purged keys are dead rows' ],
	[ 'sql_idem_table_size_bytes', { table => 'keys' },
		sub { $_[0] >= 8192 && $_[0] % 8192 == 0 }, 'idem.keys takes whole pages' ],
	[ 'sql_idem_index_size_bytes', { table => 'keys', index => 'keys_pkey' },
		sub { $_[0] >= 16384 && $_[0] % 8192 == 0 }, 'and so does its primary key' ],
	[ 'sql_idem_index_size_bytes', { table => 'webhooks', index => 'webhooks_pkey' },
		sub { $_[0] >= 8192 }, 'every index is measured' ],
	[ 'sql_idem_purge_launcher_running', {}, sub { $_[0] == 1 },
		'the purge launcher is seen running' ]);

# --- A query that fails keeps its last values ---

sql('REVOKE EXECUTE ON FUNCTION idem.purge_backlog() FROM idem_monitor');
wait_metrics(
	[ 'sql_exporter_last_scrape_failed', { query => 'idem_expired_rows' },
		sub { $_[0] == 1 }, 'a query that fails is flagged' ],
	[ 'sql_exporter_last_scrape_failed', { query => 'idem_claimed_total' },
		sub { $_[0] == 0 }, 'the others are not' ],
	[ 'sql_idem_expired_rows', { table => 'keys' }, sub { $_[0] == 0 },
		'and its metrics keep the values of its last run' ]);

$exporter->kill_kill;
undef $exporter;
$node->stop;
done_testing();
