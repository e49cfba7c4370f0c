# The example payment services of examples/, one per language and driver
# (doc/clients.md), run against a real idem and tested from the outside, over
# HTTP.  For each: a storm of concurrent duplicates books one payment, and
# every duplicate is told 409 at once, with Retry-After and a problem JSON,
# or gets the first response replayed byte for byte; a replay keeps a decimal
# amount and an id above 2^53 to the byte; a changed request is 422, a
# missing key or a body that is not JSON 400, with nothing written; every
# bad field is 400 with the same problem body in every language, before the
# key is claimed, and the key serves the corrected request; a failed
# payment leaves no payment and no key, and its retry books it; the service
# keeps working, with the statements its driver cached, when the extension
# is dropped and created again, or created at 1.3 and updated; and behind a
# real pgbouncer in transaction pooling the storm, the mismatch and the
# failure go the same way; without the driver's setting for pgbouncer no
# server connection is left in an aborted transaction (a connection whose
# ROLLBACK failed is not reused).  IDEM_CLIENTS=python,node tests some of
# them.
use strict;
use warnings;

use File::Path qw(make_path remove_tree);
use HTTP::Tiny;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

require_packaged_server('its services make the calls that the regression tests make on this build');

my $examples = "$FindBin::RealBin/../../../examples";

# What each service needs installed (a shell check), and where Debian has it
my %runtime = (
	python => [
		q{/usr/bin/python3 -c 'import psycopg, psycopg_pool' || python3 -c 'import psycopg, psycopg_pool'},
		'Debian packages python3-psycopg, python3-psycopg-pool'
	],
	node => [ 'command -v node && command -v npm', 'Debian packages nodejs, npm' ],
	java => [
		'command -v javac && test -f /usr/share/java/postgresql.jar && test -f /usr/share/java/gson.jar',
		'Debian packages default-jdk-headless, libpostgresql-jdbc-java, libgoogle-gson-java'
	],
	go => [
		'command -v go && test -d /usr/share/gocode/src/github.com/jackc/pgx/v4',
		'Debian packages golang-go, golang-github-jackc-pgx-v4-dev'
	],
);

my @langs = map { m{([^/]+)/run$} } sort glob("$examples/*/run");
if ($ENV{IDEM_CLIENTS})
{
	my %only = map { $_ => 1 } split /,/, $ENV{IDEM_CLIENTS};
	@langs = grep { $only{$_} } @langs;
}
sub missing { my $rt = $runtime{ $_[0] }; return $rt && system("($rt->[0]) >/dev/null 2>&1") != 0; }
plan skip_all => 'no runtime of the example services is installed ('
  . join('; ', map { "$_: $runtime{$_}[1]" } grep { $runtime{$_} } @langs) . ')'
  unless grep { !missing($_) } @langs;

my $POOL = 3;

# Logs, builds and responses, kept after a failure
my $dir = "${PostgreSQL::Test::Utils::tmp_check}/clients";
remove_tree($dir);
make_path($dir);

my $node = idem_node('clients', "listen_addresses = '127.0.0.1'\n");
# the services log in as shop over TCP with the password examples/schema.sql
# gives it, as Debian's pg_hba.conf asks (scram-sha-256), ahead of the trust
# of the test cluster
my $hba = $node->data_dir . '/pg_hba.conf';
my $rules = slurp_file($hba);
unlink $hba;
append_to_file($hba, "host all shop 127.0.0.1/32 scram-sha-256\n$rules");
$node->reload;
$node->safe_psql('postgres', slurp_file("$examples/schema.sql"));
my $tcp = 'host=127.0.0.1 port=' . $node->port . ' dbname=postgres user=shop';
{
	local $ENV{PGPASSWORD};
	delete $ENV{PGPASSWORD};
	my ($ret, $out, $err) = $node->psql('postgres', 'SELECT 1', connstr => $tcp, extra_params => ['-w']);
	like($err, qr/password/, 'shop cannot log in over TCP without a password');
	is($node->psql('postgres', 'SELECT 1', connstr => "$tcp password=shop"),
		0, 'and can with the password of examples/schema.sql');
}
my $GRANT = q{GRANT EXECUTE ON FUNCTION idem_http_claim(text, bytea, text, interval, interval, interval),
    idem_http_respond(text, integer, text, text, bigint), idem_fingerprint(jsonb) TO shop};

sub sql { return $node->safe_psql('postgres', $_[0]); }
sub payments_of { return sql("SELECT count(*) FROM payments WHERE idem_key = '$_[0]'"); }
sub keys_of { return sql("SELECT count(*) FROM idem.keys WHERE key = '$_[0]'"); }

# The services that run; stopped however the test ends (the forked clients
# leave with POSIX::_exit and never get here)
my %running;
my $parent = $$;
END
{
	if ($$ == $parent)
	{
		$_->kill_kill(grace => 5) for values %running;
	}
}

# Start examples/$lang/run on the database at $url, with %env added; returns
# its port once it says it is listening, or undef
sub start_service
{
	my ($lang, $url, %env) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $log = "$dir/$lang-$port";
	my $h;
	{
		local %ENV = (
			%ENV,
			PORT => $port,
			DATABASE_URL => $url,
			BUILD_DIR => "$dir/build-$lang",
			npm_config_cache => "$dir/npm-cache",
			%env);
		$h = IPC::Run::start([ "$examples/$lang/run" ],
			'<', '/dev/null', '>', "$log.out", '2>', "$log.err");
	}
	$running{$port} = $h;
	# the first start may build the service
	my $until = time + 300;
	while (time < $until && $h->pumpable)
	{
		return $port if slurp_file("$log.out") =~ /listening on/;
		usleep(100_000);
	}
	diag("$lang did not start:\n" . slurp_file("$log.err"));
	stop_service($port);
	return;
}

sub stop_service
{
	my $port = shift;
	delete($running{$port})->kill_kill(grace => 5);
	return;
}

# POST /payments to the service on $port: the response, as HTTP::Tiny
# gives it (status, headers by lowercase name, content as bytes).  Once the
# service has not answered (599), the next requests fail at once rather
# than wait for it in turn.
my %silent;

sub post
{
	my ($port, $key, $body) = @_;
	return { status => 599, headers => {}, content => 'the service stopped answering' }
	  if $silent{$port};
	my $res = HTTP::Tiny->new(timeout => 20)->request(
		'POST',
		"http://127.0.0.1:$port/payments",
		{
			headers => {
				'Content-Type' => 'application/json',
				defined $key ? ('Idempotency-Key' => $key) : ()
			},
			content => $body
		});
	$silent{$port} = 1 if $res->{status} == 599;
	return $res;
}

# $n clients POST the same request at once: their responses
sub storm
{
	my ($port, $n, $key, $body) = @_;
	my @res = map { $_ // { status => 599, headers => {}, content => '' } }
	  fork_storm($n, $dir, sub { post($port, $key, $body) });
	$silent{$port} = 1 if grep { $_->{status} == 599 } @res;
	return @res;
}

# Is $res an RFC 9457 problem with HTTP status $status?
sub is_problem
{
	my ($res, $status) = @_;
	my $p = eval { decode_json($res->{content}) };
	return $res->{status} == $status
	  && ($res->{headers}{'content-type'} // '') =~ m{^application/problem\+json\b}
	  && ref $p eq 'HASH'
	  && ($p->{status} // 0) == $status;
}

# The status codes of @res, counted: "201x1 409x49"
sub tally
{
	my %n;
	$n{ $_->{status} }++ for @_;
	return join ' ', map { "${_}x$n{$_}" } sort keys %n;
}

sub body
{
	my ($amount, $more) = @_;
	return qq({"account": "acct_7", "amount": $amount, "currency": "CNY"$more});
}

# a. $n duplicates of one slow payment at once, then 5 replays
sub duplicates
{
	my ($what, $port, $key, $n, $delay) = @_;
	my $body = body('100.50', qq(, "delay_ms": $delay));
	my @res = storm($port, $n, $key, $body);
	my @created = grep { $_->{status} eq '201' } @res;
	my @busy = grep { $_->{status} eq '409' } @res;
	note("$what: " . tally(@res));
	is(payments_of($key), 1, "$what: $n concurrent duplicates book one payment");
	is(@created + @busy, $n, "$what: every answer is 201 or 409") or diag(tally(@res));
	ok(@busy > 0, "$what: duplicates of the payment in flight are answered 409 at once");
	is( scalar(grep { is_problem($_, 409) && ($_->{headers}{'retry-after'} // '') =~ /^[1-9][0-9]*$/ } @busy),
		scalar(@busy), "$what: every 409 is a problem JSON with Retry-After");
	my %bodies = map { $_->{content} => 1 } @created;
	is(scalar(keys %bodies), 1, "$what: every 201 of the storm has the same body");
	my @again = map { post($port, $key, $body) } 1 .. 5;
	is(tally(@again), '201x5', "$what: 5 replays after it completed are 201");
	is( scalar(grep { $_->{content} eq ($created[0]{content} // '') } @again),
		5, "$what: their bodies are the first response's, byte for byte");
	# the client can tell a replay: Idempotent-Replayed on each replay only
	is( scalar(grep { ($_->{headers}{'idempotent-replayed'} // '') eq 'true' } @again),
		5, "$what: every replay says Idempotent-Replayed: true");
	is( scalar(grep { defined $_->{headers}{'idempotent-replayed'} } @busy),
		0, "$what: no 409 says Idempotent-Replayed");
	return;
}

# Post the payment of $key 60 times, so that every connection of a pool of
# 10 runs the claim a few times: a driver that prepares a statement after
# some executions (psycopg and pgjdbc from the 5th) has done so by then.
sub warm_up
{
	my ($what, $port, $key) = @_;
	my @res = map { post($port, $key, body('1.00', '')) } 1 .. 60;
	is(tally(@res), '201x60', "$what: one payment posted 60 times in a row is 201 each time");
	return;
}

# c. the key of a completed payment with another amount
sub mismatch
{
	my ($what, $port, $key) = @_;
	my $before = sql('SELECT count(*) FROM payments');
	my $res = post($port, $key, body('100.51', ''));
	ok(is_problem($res, 422), "$what: the same key with another amount is 422, a problem JSON")
	  or diag(explain $res);
	is(sql('SELECT count(*) FROM payments'), $before, "$what: and writes nothing");
	return;
}

# e. a payment that fails after its write, and its retry
sub failure
{
	my ($what, $port, $key) = @_;
	my $res = post($port, $key, body('7.00', ', "fail": true'));
	ok(is_problem($res, 500), "$what: a payment that fails is 500, a problem JSON") or diag(explain $res);
	is(payments_of($key) . ' ' . keys_of($key), '0 0', "$what: and leaves no payment and no key");
	$res = post($port, $key, body('7.00', ''));
	is($res->{status}, 201, "$what: its retry is 201");
	is(payments_of($key), 1, "$what: and books it once");
	return;
}

# Bad requests, each with the field a 400 names (none: the body)
my @invalid = (
	[ '{"account": "acct_7", "amount": 5.00,', undef ],
	[ '', undef ],
	[ '[{"account": "acct_7", "amount": 5.00, "currency": "CNY"}]', undef ],
	[ 'null', undef ],
	[ '"a payment"', undef ],
	[ qq({"account": "acct_\xff", "amount": 5.00, "currency": "CNY"}), undef ],    # not UTF-8
	[ '{"amount": 5.00, "currency": "CNY"}', 'account' ],
	[ '{"account": "", "amount": 5.00, "currency": "CNY"}', 'account' ],
	[ '{"account": 7, "amount": 5.00, "currency": "CNY"}', 'account' ],
	[ '{"account": "acct_7", "currency": "CNY"}', 'amount' ],
	(map { ; [ body($_, ''), 'amount' ] } 'null', '"5.00"', '0', '0.00', '-5.00', '5.001', '1e2', '5.5e0', 'true'),
	[ '{"account": "acct_7", "amount": 5.00}', 'currency' ],
	(map { ; [ qq({"account": "acct_7", "amount": 5.00, "currency": $_}), 'currency' ] } 'null', '"cny"', '"CNYX"', '156'),
	(map { ; [ body('5.00', qq(, "delay_ms": $_)), 'delay_ms' ] } 'null', '-1', '1.5', '"10"', '10001'),
	(map { ; [ body('5.00', qq(, "fail": $_)), 'fail' ] } 'null', '1', '"true"'));

my %detail = (
	account => 'account must be a non-empty string',
	amount => 'amount must be a positive number with at most 2 decimals',
	currency => 'currency must be 3 capital letters (ISO 4217)',
	delay_ms => 'delay_ms must be an integer from 0 to 10000',
	fail => 'fail must be true or false');

# h. every bad request is 400, the same problem in every language, before
# the key is claimed: nothing is written, the key stays free for the
# corrected request
sub invalid
{
	my ($lang, $port) = @_;
	my $key = "$lang-invalid";
	my $count = 'SELECT (SELECT count(*) FROM idem.keys) || \' \' || (SELECT count(*) FROM payments)';
	my $before = sql($count);
	for my $case (@invalid)
	{
		my ($body, $field) = @$case;
		my $problem = '{"type":"about:blank","title":"Invalid request","status":400,"detail":"'
		  . (defined $field ? qq($detail{$field}","field":"$field") : 'the body must be a JSON object"') . '}';
		for my $k ($key, undef)
		{
			my $res = post($port, $k, $body);
			is( "$res->{status} " . ($res->{headers}{'content-type'} // '') . " $res->{content}",
				"400 application/problem+json $problem",
				"$lang: 400 naming " . ($field // 'the body') . ' for ' . ($k ? 'the body' : 'no key and the body') . " $body");
		}
	}
	is(sql($count), $before, "$lang: the bad requests write no key and no payment");
	my $first = post($port, $key, body('5.00', ''));
	is($first->{status}, 201, "$lang: the corrected request with their key is 201") or diag(explain $first);
	my $replay = post($port, $key, body('5.00', ''));
	is("$replay->{status} $replay->{content}", "201 $first->{content}",
		"$lang: and its retry replays it, byte for byte");
	return;
}

# The direct tests of the service of $lang, on $port
sub direct
{
	my ($lang, $port) = @_;

	duplicates("$lang", $port, "$lang-storm", 50, 1500);

	# b. a decimal amount and an id above 2^53, through a replay
	my $key = "$lang-exact";
	my $first = post($port, $key, body('100.50', ''));
	is($first->{status}, 201, "$lang: a payment is 201");
	my $id = sql("SELECT id FROM payments WHERE idem_key = '$key'");
	ok($id > 9007199254740992, "$lang: its id is above 2^53 ($id)");
	like($first->{content}, qr/"id"\s*:\s*"?$id\b/, "$lang: the body carries the id to the digit");
	like($first->{content}, qr/"amount"\s*:\s*"?100\.50\b/, "$lang: and the amount as given, 100.50");
	my $replay = post($port, $key, body('100.50', ''));
	is("$replay->{status} $replay->{content}", "201 $first->{content}",
		"$lang: the replay is 201 with the first body, byte for byte");
	is( join(' ', map { $_->{headers}{'idempotent-replayed'} // 'none' } $first, $replay),
		'none true', "$lang: only the replay says Idempotent-Replayed: true");

	mismatch($lang, $port, $key);

	invalid($lang, $port);

	# d. no key; a body that is not JSON
	my $before = sql('SELECT count(*) FROM payments');
	my $res = post($port, undef, body('5.00', ''));
	ok(is_problem($res, 400), "$lang: without Idempotency-Key: 400, a problem JSON")
	  or diag(explain $res);
	$res = post($port, "$lang-garbage", '{"account": "acct_7", "amount": 5.00,');
	is($res->{status}, 400, "$lang: a body that is not JSON: 400");
	is(sql('SELECT count(*) FROM payments') . ' ' . keys_of("$lang-garbage"),
		"$before 0", "$lang: neither writes a payment or a key");

	failure($lang, $port, "$lang-fail");

	# f. the extension dropped and created again under the running service
	# and its prepared statements
	warm_up($lang, $port, "$lang-warm");
	sql("DROP EXTENSION idem; CREATE EXTENSION idem; $GRANT");
	$key = "$lang-recreated";
	$first = post($port, $key, body('12.30', ''));
	is($first->{status}, 201, "$lang: after DROP and CREATE EXTENSION idem, a payment is 201 at once")
	  or diag(explain $first);
	$replay = post($port, $key, body('12.30', ''));
	is("$replay->{status} $replay->{content}", "201 $first->{content}",
		"$lang: and its replay is the same bytes");

	warm_up($lang, $port, "$lang-warm-again");
	sql("DROP EXTENSION idem; CREATE EXTENSION idem VERSION '1.3'; ALTER EXTENSION idem UPDATE; $GRANT");
	$key = "$lang-updated";
	$first = post($port, $key, body('12.40', ''));
	is($first->{status}, 201, "$lang: after the extension is updated from 1.3, a payment is 201 at once")
	  or diag(explain $first);
	$replay = post($port, $key, body('12.40', ''));
	is("$replay->{status} $replay->{content}", "201 $first->{content}",
		"$lang: and its replay is the same bytes");
	return;
}

# g. behind pgbouncer
sub pooled
{
	my ($lang, $port) = @_;
	my $what = "$lang behind pgbouncer";
	# A driver that prepares statements prepares them on the server
	# connection it has for the moment, and finds them missing on the next
	# one unless told not to prepare
	warm_up($what, $port, "$lang-pgb-warm");
	duplicates($what, $port, "$lang-pgb-storm", 20, 800);
	# pgbouncer's server connections come over the Unix socket, the
	# service's own would come over TCP
	my ($own, $pooled) = split /\|/, sql(q{SELECT count(*) FILTER (WHERE client_addr IS NOT NULL),
	    count(*) FILTER (WHERE client_addr IS NULL) FROM pg_stat_activity WHERE usename = 'shop'});
	ok($own == 0 && $pooled >= 1 && $pooled <= $POOL,
		"$what: the storm ran on pgbouncer's pool, $pooled server connections of at most $POOL");
	mismatch($what, $port, "$lang-pgb-storm");
	failure($what, $port, "$lang-pgb-fail");
	return;
}

# i. behind pgbouncer without the driver's setting: its named statements
# clash and some payments fail, and a failed ROLLBACK may leave the
# service's connection in a transaction.  The service must not keep it:
# its server connection would stay "idle in transaction (aborted)", lost
# to the pool.
sub unprepared
{
	my ($lang, $port) = @_;
	my $what = "$lang behind pgbouncer without its setting";
	my @res = map { post($port, "$lang-unprepared-$_", body('1.00', '')) } 1 .. 60;
	note("$what: " . tally(@res));
	ok( $node->poll_query_until(
			'postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
			  WHERE usename = 'shop' AND state = 'idle in transaction (aborted)'}),
		"$what: no server connection is left in an aborted transaction");
	return;
}

# --- pgbouncer, in transaction pooling with few server connections ----------

my ($bouncer_port, $bouncer);
if (-x $PGBOUNCER)
{
	# it passes named prepared statements through, as 1.18 does: it shows
	# what the drivers' settings are for
	($bouncer_port, $bouncer) = idem_pgbouncer(
		$node, $dir,
		users => ['shop'],
		pool_mode => 'transaction',
		default_pool_size => $POOL,
		# pgjdbc sends it at connection start
		ignore_startup_parameters => 'extra_float_digits',
		# a client still waiting for a server connection after 10 s gets an
		# error: a wedged pool fails the test rather than hangs it
		query_wait_timeout => 10);
}

# --- each service -------------------------------------------------------------

my $db = 'postgresql://shop:shop@127.0.0.1:' . $node->port . '/postgres';
for my $lang (@langs)
{
  SKIP:
	{
		skip "$lang: its runtime is not installed ($runtime{$lang}[1])", 1 if missing($lang);
		my $t0 = time;
		my $port = start_service($lang, $db);
		ok($port, "$lang: the service starts and listens") or last SKIP;
		direct($lang, $port);
		stop_service($port);
		# its server connections go with it
		$node->poll_query_until('postgres',
			q{SELECT count(*) = 0 FROM pg_stat_activity WHERE usename = 'shop' AND client_addr IS NOT NULL})
		  or diag("$lang: the service's connections outlive it");

		skip "$lang behind pgbouncer: pgbouncer is not installed (Debian package pgbouncer)", 1
		  unless $bouncer_port;
		$port = start_service($lang, "postgresql://shop\@127.0.0.1:$bouncer_port/postgres", PGBOUNCER => 1);
		ok($port, "$lang: the service starts behind pgbouncer") or last SKIP;
		pooled($lang, $port);
		stop_service($port);
		$port = start_service($lang, "postgresql://shop\@127.0.0.1:$bouncer_port/postgres", PGBOUNCER => 0);
		unprepared($lang, $port);
		stop_service($port);
		note(sprintf('%s: %.0f s', $lang, time - $t0));
	}
}

$bouncer->kill_kill if $bouncer;
$node->stop;
done_testing();
