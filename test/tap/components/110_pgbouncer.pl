# idem behind a real pgbouncer in transaction pooling, with fewer server
# connections than clients: a storm of in-transaction payments on a few keys
# books each once; a two-phase claim is completed with its token from another
# server connection; nowait answers at once; concurrent deliveries of one
# webhook are new once.  And the traps: a session-level SET of an idem.*
# setting leaks to other clients and is lost to its own, while SET LOCAL,
# the function arguments and ALTER ROLE ... SET work; protocol-level named
# prepared statements break (pgbouncer before 1.21); statement pooling
# refuses transactions, while one-statement calls work.
use strict;
use warnings;

use DBI;
use Digest::SHA qw(hmac_sha256_hex);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

plan skip_all => 'pgbouncer is not installed' unless -x $PGBOUNCER;

# Server connections per pool, and clients in the storms: more clients than
# server connections, so that transactions of different clients share them.
my $POOL = 3;
my $CLIENTS = 12;
my $KEYS = 4;

my $node = idem_node('pgbouncer', q(
max_connections = 40
));
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION idem;
CREATE TABLE ledger (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL,
                     backend int NOT NULL DEFAULT pg_backend_pid());
CREATE ROLE shop LOGIN;
ALTER ROLE shop SET idem.ttl = '2h';
GRANT EXECUTE ON FUNCTION idem_claim(text, bytea, text, interval, interval, boolean) TO shop;
GRANT ALL ON ledger, ledger_id_seq TO shop;
-- the one-statement form of a payment, for statement pooling
CREATE FUNCTION pay(k text, amount int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE s text;
BEGIN
    SELECT status INTO s FROM idem_claim(k, idem_fingerprint(jsonb_build_object('amount', amount)));
    IF s = 'claimed' THEN
        INSERT INTO ledger (key, amount) VALUES (k, amount);
        PERFORM idem_complete(k, jsonb_build_object('charge', 'ch_' || k));
    END IF;
    RETURN s;
END $$;
SELECT idem_webhook_source_set('stripe', 'stripe', ARRAY['whsec_pooler_test']);
});

# Run SQL on the node directly, not through pgbouncer
sub sql { return $node->safe_psql('postgres', $_[0]); }

# --- pgbouncer ---------------------------------------------------------------

my $dir = "${PostgreSQL::Test::Utils::tmp_check}/pgbouncer";
my ($port, $bouncer) = idem_pgbouncer(
	$node, $dir,
	users => [qw(postgres shop)],
	databases => ['stmt pool_mode=statement'],
	pool_mode => 'transaction',
	default_pool_size => $POOL,
	admin_users => 'postgres');

# A connection through pgbouncer ($db: postgres, or stmt for statement
# pooling); DBD::Pg's server-side prepared statements stay off unless asked
sub client
{
	my (%opt) = @_;
	my $db = $opt{db} // 'postgres';
	my $user = $opt{user} // 'postgres';
	return DBI->connect(
		"dbi:Pg:host=127.0.0.1;port=$port;dbname=$db",
		$user, '',
		{
			AutoCommit => 1,
			RaiseError => 1,
			PrintError => 0,
			AutoInactiveDestroy => 1,
			pg_server_prepare => $opt{server_prepare} // 0,
			# named from the first execution on, not the second
			pg_switch_prepared => 1
		});
}

# Clients of the postgres pool waiting for a server connection (pgbouncer's
# console, SHOW POOLS)
sub pool_waiting
{
	my $adm = DBI->connect("dbi:Pg:host=127.0.0.1;port=$port;dbname=pgbouncer",
		'postgres', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0, pg_server_prepare => 0 });
	my ($row) = grep { $_->{database} eq 'postgres' && $_->{user} eq 'postgres' }
	  @{ $adm->selectall_arrayref('SHOW POOLS', { Slice => {} }) };
	$adm->disconnect;
	return $row ? $row->{cl_waiting} : -1;
}

# The first column of the first row of $q on client $c
sub one
{
	my ($c, $q, @bind) = @_;
	return ($c->selectrow_array($q, undef, @bind))[0];
}

# The server backend that client $c's next statement runs on
sub pid_of { return one($_[0], 'SELECT pg_backend_pid()'); }

# Take server backend $pid away from the other clients: open transactions
# on spare clients until one of them runs on it.  Returns the holders,
# whose transactions release.  pgbouncer hands out the most recently used
# server first, so the first holder normally gets it.
sub hold_backend
{
	my $pid = shift;
	my @holders;
	for (1 .. $POOL - 1)
	{
		my $h = client();
		$h->begin_work;
		push @holders, $h;
		return @holders if pid_of($h) == $pid;
	}
	release(@holders);
	return;
}

# End the holders' transactions and disconnect them
sub release
{
	for my $h (@_)
	{
		$h->rollback;
		$h->disconnect;
	}
	return;
}

# --- 1. the in-transaction storm ---------------------------------------------

# Each client pays every key once, in its own order: BEGIN; claim; book;
# complete; COMMIT.  A claimer that loses the race waits for the winner's
# transaction and gets completed.  A failed transaction (none expected) is
# retried.  Each line of output: key, status, backend, tries.  Each client
# has its own connection through pgbouncer, made before they all start.
my @out = fork_storm(
	$CLIENTS, $dir,
	sub {
		my ($i, $dbh) = @_;
		my $fp = '{"amount": 100, "currency": "EUR"}';
		my @keys = map { "storm-$_" } 1 .. $KEYS;
		# a client-specific rotation, so the clients collide in every order
		@keys = (@keys[ $i % $KEYS .. $#keys ], @keys[ 0 .. $i % $KEYS - 1 ]);
		my $lines = '';
		for my $k (@keys)
		{
			for my $try (1 .. 10)
			{
				my ($status, $pid) = eval {
					$dbh->begin_work;
					my ($s, $p) = $dbh->selectrow_array(
						'SELECT status, pg_backend_pid() FROM idem_claim($1, idem_fingerprint($2::jsonb))',
						undef, $k, $fp);
					if ($s eq 'claimed')
					{
						$dbh->do('INSERT INTO ledger (key, amount) VALUES ($1, 100)', undef, $k);
						# hold the key a moment, so that the others queue up behind it
						$dbh->do('SELECT pg_sleep(0.05)');
						$dbh->do(q{SELECT idem_complete($1, '{"charge": "ch_1"}')}, undef, $k);
					}
					$dbh->commit;
					($s, $p);
				};
				if (!defined $status)
				{
					eval { $dbh->rollback };
					next;
				}
				$lines .= "$k $status $pid $try\n";
				last if $status eq 'claimed' || $status eq 'completed';
			}
		}
		return $lines;
	},
	sub { client() });

my (%status, %backends, $lines, $retried);
for my $line (map { split /\n/, $_ // '' } @out)
{
	my ($k, $s, $pid, $try) = split / /, $line;
	$status{$s}++;
	$backends{$pid} = 1;
	$lines++;
	$retried++ if $try > 1;
}
note('storm: ' . ($retried // 0) . ' payments needed more than one try');
is($lines, $CLIENTS * $KEYS, 'storm: every client paid every key');
is($status{claimed}, $KEYS, 'storm: one claimed per key');
is($status{completed}, ($CLIENTS - 1) * $KEYS, 'storm: every other attempt replayed completed');
ok(keys(%backends) <= $POOL && keys(%backends) > 1,
	"storm: $CLIENTS clients ran on " . scalar(keys %backends) . " server backends (pool of $POOL)");
is( sql(q{SELECT string_agg(n::text, ',') FROM (SELECT count(*) AS n FROM ledger
           WHERE key LIKE 'storm-%' GROUP BY key) s}),
	join(',', (1) x $KEYS),
	'storm: exactly one ledger row per key');
is( sql(q{SELECT count(*) FROM generate_series(1, } . $KEYS . q{) i,
           idem_lookup('storm-' || i) l WHERE l.state = 'completed'}),
	$KEYS, 'storm: every key is completed');

# --- 2. two-phase: the completion on another server connection ----------------

{
	my $a = client();
	my ($token, $claim_pid) = $a->selectrow_array(
		q{SELECT token, pg_backend_pid() FROM idem_claim('two-phase-1', lease => '5 min')});
	# the gateway call happens here; meanwhile another client takes the
	# claim's server connection
	my @held = hold_backend($claim_pid);
	ok(@held, 'the claim\'s server backend is held by another client');
	my $b = client();
	my $done_pid = pid_of($b);
	isnt($done_pid, $claim_pid, 'the completion runs on another server backend');

	# without its token the completion cannot be told from a stranger's
	my $err = eval {
		$b->do(q{SELECT idem_complete('two-phase-1', '{"charge": "ch_2"}')});
		'ok';
	} // $b->state;
	is($err, 'ID004', 'completing without the token from another connection: ID004');
	$b->begin_work;
	$b->do(q{INSERT INTO ledger (key, amount) VALUES ('two-phase-1', 250)});
	$b->do(q{SELECT idem_complete('two-phase-1', '{"charge": "ch_2"}', token => $1)}, undef, $token);
	is(pid_of($b), $done_pid, 'the completing transaction stays on its server backend');
	$b->commit;
	release(@held);
	is(sql(q{SELECT state || ' ' || (response->>'charge') FROM idem.keys WHERE key = 'two-phase-1'}),
		'completed ch_2', 'the two-phase claim completed with its token');
	is(sql(q{SELECT count(*) || ' ' || count(*) FILTER (WHERE backend = } . $done_pid . q{)
	         FROM ledger WHERE key = 'two-phase-1'}),
		'1 1', 'its business write committed with the completion, on the other backend');
	is(one($a, q{SELECT status FROM idem_claim('two-phase-1')}), 'completed',
		'the client that claimed now gets the replay');
	$_->disconnect for $a, $b;
}

# --- 3. nowait through the pooler ---------------------------------------------

{
	my $holder = client();
	$holder->begin_work;
	is(one($holder, q{SELECT status FROM idem_claim('nowait-1')}), 'claimed',
		'a transaction claims the key and stays open');
	my $racer = client();
	my ($s, $retry) = $racer->selectrow_array(
		q{SELECT status, extract(epoch FROM retry_after)::int FROM idem_claim('nowait-1', nowait => true)});
	is("$s $retry", 'in_progress 1',
		'nowait: the racer gets in_progress and retry_after 1 s while the claim is still open');

	# without nowait the racer waits for the holder's transaction
	my $wait = $racer->prepare(q{SELECT status FROM idem_claim('nowait-1')},
		{ pg_async => DBD::Pg::PG_ASYNC() });
	$wait->execute;
	ok( $node->poll_query_until(
			'postgres', q{SELECT count(*) > 0 FROM pg_stat_activity
			             WHERE wait_event_type = 'Lock' AND query LIKE '%nowait-1%'}),
		'without nowait the racer waits for the open claim');
	$holder->do(q{SELECT idem_complete('nowait-1', '{"charge": "ch_3"}')});
	$holder->commit;
	$wait->pg_result;
	is(($wait->fetchrow_array)[0], 'completed',
		'and gets completed once the holder commits');
	$wait->finish;
	$_->disconnect for $holder, $racer;
}

# --- 4. webhook dedup through the pooler ----------------------------------------

{
	my $payload = '{"id":"evt_pooler_1","object":"event","type":"charge.succeeded"}';
	@out = fork_storm(
		$CLIENTS, $dir,
		sub {
			my (undef, $dbh) = @_;
			my $t = time;
			my $headers = qq({"Stripe-Signature": "t=$t,v1=)
			  . hmac_sha256_hex("$t.$payload", 'whsec_pooler_test') . '"}';
			$dbh->begin_work;
			my ($s) = $dbh->selectrow_array(
				'SELECT status FROM idem_webhook_receive($1, $2, $3::jsonb)',
				undef, 'stripe', $payload, $headers);
			if ($s eq 'new')
			{
				$dbh->do(q{INSERT INTO ledger (key, amount) VALUES ('evt_pooler_1', 0)});
				$dbh->do('SELECT pg_sleep(0.05)');
			}
			$dbh->commit;
			return "$s\n";
		},
		sub { client() });
	my %seen;
	$seen{$_}++ for map { split /\n/, $_ // '' } @out;
	is($seen{new}, 1, 'webhook: one delivery of the event is new');
	is($seen{duplicate}, $CLIENTS - 1, 'webhook: every other one is a duplicate');
	is(sql(q{SELECT count(*) FROM ledger WHERE key = 'evt_pooler_1'}), 1,
		'webhook: the handler acted once');

	# idem_webhook the same way, three clients on one event
	my @c = map { client() } 1 .. 3;
	$c[0]->begin_work;
	is(one($c[0], q{SELECT idem_webhook('queue', 'msg-1')}), 1, 'idem_webhook: the first is new');
	my @wait = map {
		my $w = $_->prepare(q{SELECT idem_webhook('queue', 'msg-1')}, { pg_async => DBD::Pg::PG_ASYNC() });
		$w->execute;
		$w;
	} @c[ 1 .. 2 ];
	ok( $node->poll_query_until(
			'postgres', q{SELECT count(*) = 2 FROM pg_stat_activity
			             WHERE wait_event_type = 'Lock' AND query LIKE '%msg-1%'}),
		'idem_webhook: the others wait for the first delivery\'s transaction');

	# Waiting claims and deliveries hold their server connections: with the
	# holder, they take the whole pool, and the next client queues in pgbouncer.
	my $next = client();
	my $queued = $next->prepare('SELECT 1', { pg_async => DBD::Pg::PG_ASYNC() });
	$queued->execute;
	my $waiting = 0;
	for (1 .. 100)
	{
		$waiting = pool_waiting();
		last if $waiting;
		usleep(50_000);
	}
	is($waiting, 1, 'with the pool taken by the holder and the waiters, a fourth client queues in pgbouncer');
	$c[0]->commit;
	my @dup;
	for my $w (@wait)
	{
		$w->pg_result;
		push @dup, ($w->fetchrow_array)[0];
	}
	is("@dup", '0 0', 'idem_webhook: both are duplicates once it commits');
	$queued->pg_result;
	is(($queued->fetchrow_array)[0], 1, 'and the queued client runs');
	$_->finish for @wait, $queued;
	$_->disconnect for @c, $next;
}

# --- 5. the trap: session settings -----------------------------------------------

# How long a key claimed now is kept, in hours (expires_at - created_at)
my $ttl_of = q{SELECT round(extract(epoch FROM expires_at - created_at) / 3600) FROM idem.keys WHERE key = $1};

{
	my $a = client();
	my $b = client();
	# session SET: it lands on one server backend and stays there
	$a->do(q{SET idem.ttl = '1h'});
	my $set_pid = pid_of($a);
	my ($b_ttl, $b_pid) = $b->selectrow_array(q{SELECT current_setting('idem.ttl'), pg_backend_pid()});
	is($b_pid, $set_pid, 'the next client runs on the server backend that took the SET');
	is($b_ttl, '1h', 'session SET leaks: another client sees idem.ttl = 1h');
	one($b, q{SELECT status FROM idem_claim('leak-1')});
	is(one($b, $ttl_of, 'leak-1'), 1, 'and its claims get the other client\'s TTL');

	# the client that ran SET, on another server backend: its SET is lost
	my @held = hold_backend($set_pid);
	ok(@held, 'the backend with the SET is held by another client');
	my ($a_ttl, $a_pid) = $a->selectrow_array(q{SELECT current_setting('idem.ttl'), pg_backend_pid()});
	isnt($a_pid, $set_pid, 'the client that ran SET now runs on another server backend');
	is($a_ttl, '1d', 'session SET is lost: there idem.ttl is the default');
	one($a, q{SELECT status FROM idem_claim('lost-1')});
	is(one($a, $ttl_of, 'lost-1'), 24, 'and its claim gets the default TTL');
	release(@held);
	# RESET on the backend that took the SET, or it stays there for whoever
	# comes next (it is normally the next one handed out)
	for (1 .. 10)
	{
		last if one($a, q{SELECT pg_backend_pid() FROM set_config('idem.ttl', NULL, false)}) == $set_pid;
	}
	is(one($b, q{SELECT current_setting('idem.ttl') || ' ' || pg_backend_pid()}), "1d $set_pid",
		'RESET run on that server backend undoes the leak');

	# SET LOCAL, inside the transaction: applies to it, and ends with it
	$a->begin_work;
	$a->do(q{SET LOCAL idem.ttl = '3h'});
	one($a, q{SELECT status FROM idem_claim('local-1')});
	my $local_pid = pid_of($a);
	$a->commit;
	is(one($a, $ttl_of, 'local-1'), 3, 'SET LOCAL inside the transaction applies to its claim');
	my ($after, $after_pid) = $b->selectrow_array(q{SELECT current_setting('idem.ttl'), pg_backend_pid()});
	is($after_pid, $local_pid, 'the next client runs on the same server backend');
	is($after, '1d', 'and SET LOCAL has not leaked to it');

	# the function's argument
	one($a, q{SELECT status FROM idem_claim('arg-1', ttl => '5h')});
	is(one($a, $ttl_of, 'arg-1'), 5, 'the ttl argument applies whatever the server backend');

	# a setting in the startup packet (PGOPTIONS, options=-c ...): pgbouncer
	# refuses it (or drops it, if listed in ignore_startup_parameters)
	my $opt = eval {
		DBI->connect("dbi:Pg:host=127.0.0.1;port=$port;dbname=postgres;options=-cidem.ttl=1h",
			'postgres', '', { RaiseError => 1, PrintError => 0 });
		'connected';
	} // $DBI::errstr;
	like($opt, qr/unsupported startup parameter(: options| in options: idem\.ttl)/,
		'pgbouncer refuses idem.ttl given as a startup option');

	# ALTER ROLE ... SET: every server connection of the role starts with it
	my $shop = client(user => 'shop');
	one($shop, q{SELECT status FROM idem_claim('role-1')});
	is(one($a, $ttl_of, 'role-1'), 2, 'ALTER ROLE ... SET idem.ttl applies to the role\'s pool');
	$_->disconnect for $a, $b, $shop;
}

# --- 6. protocol-level prepared statements ----------------------------------------
# (with max_prepared_statements = 0 where pgbouncer has it: as pgbouncer
# before 1.21 always behaves)

{
	my $a = client(server_prepare => 1);
	my $sth = $a->prepare('SELECT status, pg_backend_pid() FROM idem_claim($1)');
	$sth->execute('prep-1');
	my ($s, $prep_pid) = $sth->fetchrow_array;
	is($s, 'claimed', 'a named prepared statement runs once');
	my @held = hold_backend($prep_pid);
	ok(@held, 'the backend that holds the prepared statement is taken by another client');
	my $err = eval { $sth->execute('prep-2'); 'ok' } // $a->state;
	is($err, '26000',
		'its next execution, on another server backend: prepared statement does not exist (26000)');
	release(@held);
	$sth->finish;
	$a->disconnect;

	# unnamed statements (DBD::Pg pg_server_prepare => 0, libpq PQexecParams)
	# are parsed and run in one go
	my $u = client();
	for my $i (1 .. 3)
	{
		is(one($u, 'SELECT status FROM idem_claim($1, ttl => $2::interval)', "unnamed-$i", '1 h'),
			'claimed', "unnamed extended-protocol statement $i");
	}
	$u->disconnect;
}

# --- 7. statement pooling ---------------------------------------------------------

{
	my $st = client(db => 'stmt');
	my $err = eval {
		$st->begin_work;
		$st->do(q{SELECT status FROM idem_claim('stmt-1')});
		'ok';
	} // $st->errstr;
	like($err, qr/transaction blocks not allowed/,
		'statement pooling refuses the multi-statement transaction');
	$st->disconnect;

	$st = client(db => 'stmt');
	is(one($st, q{SELECT pay('stmt-2', 100)}), 'claimed',
		'statement pooling: a one-statement payment (a function) works');
	is(one($st, q{SELECT pay('stmt-2', 100)}), 'completed', 'and its retry is replayed');
	my $token = one($st, q{SELECT token FROM idem_claim('stmt-3', lease => '1 min')});
	ok($token, 'statement pooling: a two-phase claim commits on its own');
	one($st, q{SELECT idem_complete('stmt-3', '{"charge": "ch_4"}', token => $1)}, $token);
	is(sql(q{SELECT state FROM idem_lookup('stmt-3')}), 'completed',
		'and its completion with the token works');
	is(sql(q{SELECT count(*) FROM ledger WHERE key = 'stmt-2'}), 1, 'the payment booked once');
	$st->disconnect;
}

$bouncer->kill_kill;
$node->stop;
done_testing();
