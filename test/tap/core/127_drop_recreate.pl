# DROP EXTENSION and CREATE EXTENSION in one session while others call idem:
# every call either works or fails with one of the SQLSTATEs doc/api.md
# lists for a dropped or re-created extension, never an internal one (class
# XX, 58).  Clients hold server-side prepared statements and PL/pgSQL
# functions (cached plans) calling each kind of function: in FROM and in
# the select list, with a row or a set as result, in and out of
# transactions, two-phase with a token.  A dropper drops the extension
# (with CASCADE, as a client's SQL function depends on it) and creates it
# again: in separate statements, in one transaction, and by an older
# version and ALTER EXTENSION UPDATE.  The purge worker runs all along.
# Afterwards a fresh payment and delivery work, the worker still purges, and
# the server's log shows no internal error either.
use strict;
use warnings;

use DBI;
use Digest::SHA qw(hmac_sha256_hex);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $CLIENTS = 4;
# 15 s gives about 15 drops and re-creations: the unfixed code of 1.6 met
# XX000 in two cycles of three
my $SECONDS = $ENV{IDEM_DROP_SECONDS} // 15;

# What a client may see while the extension is dropped or re-created
# (doc/api.md, "Errors"), and which of them the dropper may see.
# XX000/parse: PostgreSQL's own race, not idem's: the parser looks a
# function up by name, then by its OID, and takes no lock in between, so a
# statement parsed (or a prepared one parsed again) just as DROP EXTENSION
# commits fails with "cache lookup failed for function N" and a position in
# the statement (doc/api.md, "Errors").  An XX000 anywhere else fails.
my %DOCUMENTED = map { $_ => 1 } qw(42883 3F000 42P01 40P01 ID002 XX000/parse);

# The SQLSTATE of $dbh's last error, XX000/parse for the parser's race
sub state_of
{
	my ($dbh) = @_;
	my $state = $dbh->state;
	return 'XX000/parse'
	  if $state eq 'XX000' && $dbh->errstr =~ /^ERROR:  cache lookup failed for function \d+\nLINE \d+: /;
	return $state;
}

my $node = idem_node('drop_recreate', q(
idem.purge_interval = '1s'
idem.database = 'postgres'
log_line_prefix = '%m [%p] %e '
max_connections = 30
));

my $SECRET = 'whsec_drop_recreate';

# The extension and what the clients' SQL needs of it
my $SETUP = qq{
CREATE EXTENSION idem;
SELECT idem_webhook_source_set('stripe', 'stripe', ARRAY['$SECRET']);
CREATE FUNCTION fp_atomic(j jsonb) RETURNS bytea LANGUAGE sql
BEGIN ATOMIC SELECT idem_fingerprint(j); END;
};
$node->safe_psql('postgres', $SETUP);

# PL/pgSQL, which keeps its plans: these outlive the extension
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION pay(k text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE s text;
BEGIN
    SELECT status INTO s FROM idem_claim(k, idem_fingerprint('{"amount": 1}'));
    IF s = 'claimed' THEN
        PERFORM idem_complete(k, '{"charge": "ch"}');
    END IF;
    RETURN s;
END $$;
CREATE FUNCTION look(k text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    SELECT * INTO r FROM idem_lookup(k);
    PERFORM idem_webhook('plpgsql', k);
    RETURN r.state;
END $$;
});

# A connection whose statements are prepared on the server, named from
# their first execution
sub connect_client
{
	return idem_dbi($node, pg_server_prepare => 1, pg_switch_prepared => 1);
}

# The signed headers of a Stripe delivery of $payload
sub stripe_headers
{
	my ($payload) = @_;
	my $t = int(time);
	return qq({"Stripe-Signature": "t=$t,v1=) . hmac_sha256_hex("$t.$payload", $SECRET) . '"}';
}

# One client: run each kind of call in turn until the deadline; returns
# { ok => calls that worked, states => { SQLSTATE => count },
#   messages => { SQLSTATE => first message } }
sub client
{
	my ($i, $dbh, $deadline) = @_;
	my %st = map { $_->[0] => $dbh->prepare($_->[1]) } (
		[ claim => q{SELECT status FROM idem_claim($1, idem_fingerprint('{"amount": 1}'))} ],
		[ claim_row => q{SELECT idem_claim($1)} ],
		[ complete => q{SELECT idem_complete($1, '{"charge": "ch"}')} ],
		[ lease => q{SELECT token FROM idem_claim($1, lease => '30 s')} ],
		[ checkpoint => q{SELECT idem_checkpoint($1, 'charged', '{"id": 1}', token => $2)} ],
		[ complete_token => q{SELECT idem_complete($1, '{}', token => $2)} ],
		[ http_claim => q{SELECT status, token FROM idem_http_claim($1)} ],
		[ http_respond => q{SELECT idem_http_respond($1, 201, '{"id": 1}')} ],
		[ lookup => q{SELECT state FROM idem_lookup($1)} ],
		[ webhook => q{SELECT idem_webhook('queue', $1)} ],
		[ receive => q{SELECT status FROM idem_webhook_receive('stripe', $1, $2::jsonb)} ],
		[ hashes => q{SELECT idem_fingerprint($1::jsonb), idem_key($2, 'x'), fp_atomic($1::jsonb)} ],
		[ stats => q{SELECT sum(claimed) FROM idem_stats} ],
		[ pay => q{SELECT pay($1)} ],
		[ look => q{SELECT look($1)} ],
		[ purge => q{SELECT idem_purge(100)} ],
		[ backlog => q{SELECT count(*) FROM idem.purge_backlog()} ],
		[ backlog_row => q{SELECT idem.purge_backlog()} ]);
	my (%states, %messages);
	my $ok = 0;
	my $n = 0;

	# Run statements in order, in a transaction if $tx, stopping at the
	# first error; true if all worked
	my $run = sub {
		my ($tx, @steps) = @_;
		$dbh->begin_work if $tx;
		for my $step (@steps)
		{
			my ($name, @args) = @$step;
			next if $st{$name}->execute(@args);
			my $state = state_of($dbh);
			$states{$state}++;
			$messages{$state} //= "$name: " . $dbh->errstr;
			$dbh->rollback if $tx;
			return 0;
		}
		$dbh->commit if $tx;
		$ok++;
		return 1;
	};

	while (time < $deadline)
	{
		my $k = "c$i-" . $n++;
		$run->(1, [ claim => "$k-a" ], [ complete => "$k-a" ]);
		$run->(0, [ claim_row => "$k-b" ]);
		if ($run->(0, [ lease => "$k-c" ]))
		{
			my ($token) = $st{lease}->fetchrow_array;
			$run->(0, [ checkpoint => "$k-c", $token ], [ complete_token => "$k-c", $token ])
			  if defined $token;
		}
		$run->(1, [ http_claim => "$k-d" ], [ http_respond => "$k-d" ]);
		$run->(0, [ lookup => "$k-a" ]);
		$run->(0, [ webhook => $k ]);
		my $payload = qq({"id": "evt_$k", "type": "charge.succeeded"});
		$run->(0, [ receive => $payload, stripe_headers($payload) ]);
		$run->(0, [ hashes => '{"amount": 1}', $k ]);
		$run->(0, [ stats => () ]);
		$run->(0, [ pay => "$k-e" ]);
		$run->(0, [ look => "$k-e" ]);
		$run->(0, [ purge => () ], [ backlog => () ], [ backlog_row => () ]) if $n % 10 == 0;
	}
	return { ok => $ok, states => \%states, messages => \%messages };
}

# The dropper: drop the extension and create it again, three ways in turn,
# until the deadline; returns { cycles => n, states => ... } as a client
sub dropper
{
	my ($dbh, $deadline) = @_;
	my (%states, %messages);
	my $cycles = 0;

	$dbh->{pg_server_prepare} = 0;
	while (time < $deadline)
	{
		my $way = $cycles % 3;
		my @sql = $way == 0
		  ? ('DROP EXTENSION idem CASCADE', $SETUP)
		  : $way == 1 ? ("BEGIN; DROP EXTENSION idem CASCADE; $SETUP COMMIT;")
		  : ('DROP EXTENSION idem CASCADE',
			  $SETUP =~ s/CREATE EXTENSION idem;/CREATE EXTENSION idem VERSION '1.5'; ALTER EXTENSION idem UPDATE;/r);
		my $done = 1;
		for my $sql (@sql)
		{
			# until it works: a deadlock with a client is possible
			for (;;)
			{
				last if $dbh->do($sql);
				my $state = state_of($dbh);
				$states{$state}++;
				$messages{$state} //= $dbh->errstr;
				$dbh->do('ROLLBACK');
				if (!$DOCUMENTED{$state} || time > $deadline + 30)
				{
					$done = 0;
					last;
				}
			}
			last unless $done;
			usleep(20_000);
		}
		last unless $done;
		$cycles++;
		usleep(100_000);
	}
	return { cycles => $cycles, states => \%states, messages => \%messages };
}

my $log_start = -s $node->logfile;
my $deadline = time + $SECONDS + 2;
my @results = fork_storm(
	$CLIENTS + 1,
	$PostgreSQL::Test::Utils::tmp_check,
	sub {
		my ($i, $dbh) = @_;
		return $i > $CLIENTS ? dropper($dbh, $deadline) : client($i, $dbh, $deadline);
	},
	sub { return connect_client(); });

is(scalar(grep { !defined } @results), 0, 'every client and the dropper ran to the end');
my $dropper = pop @results;
my (%seen, %example);
for my $r (grep { defined } @results, $dropper)
{
	for my $state (keys %{ $r->{states} })
	{
		$seen{$state} += $r->{states}{$state};
		$example{$state} //= $r->{messages}{$state};
	}
}
note("SQLSTATE $_: $seen{$_} times, e.g. $example{$_}") for sort keys %seen;
note('calls that worked: ' . join(', ', map { $_ ? $_->{ok} : 'died' } @results));
cmp_ok($dropper->{cycles}, '>=', 10, "the extension was dropped and created again ($dropper->{cycles} times)");
ok(!grep({ !defined || $_->{ok} < 10 } @results), 'every client had calls that worked');
is($seen{XX000} // 0, 0, 'no XX000');
my @undocumented = grep { !$DOCUMENTED{$_} } sort keys %seen;
is_deeply(\@undocumented, [], 'every SQLSTATE seen is one documented for a dropped extension')
  or diag(join("\n", map { "$_: $example{$_}" } @undocumented));
ok($seen{42883} || $seen{'3F000'} || $seen{'42P01'}, 'clients met the extension dropped');

# The server's log, the purge worker's reports included
my $log = slurp_file($node->logfile, $log_start);
# (but the parser's race: its error has a position, and its statement)
my %race = map { $_ => 1 } $log =~ /^.*\[(\d+)\] XX000 ERROR:  cache lookup failed for function \d+ at character \d+$/mg;
my @internal = grep { !/\[(\d+)\] XX000 (?:ERROR:  cache lookup failed for function \d+ at character \d+|STATEMENT:  )/ || !$race{$1} }
  $log =~ /^.*\] (?:XX|58)\d\d\d .*$/mg;
is(scalar(@internal), 0, 'no internal error in the log')
  or diag(join("\n", @internal[ 0 .. ($#internal < 9 ? $#internal : 9) ]));

# Nothing inconsistent is left: the extension is whole, a payment and a
# delivery work from a new session and from an old one's prepared
# statements, and the worker purges.
is( $node->safe_psql('postgres',
		q{SELECT extversion = default_version FROM pg_extension, pg_available_extensions
		  WHERE extname = 'idem' AND name = 'idem'}),
	't', 'the extension is there, at its default version');
is( $node->safe_psql(
		'postgres', q{
BEGIN;
SELECT status FROM idem_claim('after', idem_fingerprint('{"amount": 1}'));
SELECT idem_complete('after', '{"charge": "ch_after"}');
COMMIT;
SELECT status || ' ' || (response->>'charge') FROM idem_claim('after', idem_fingerprint('{"amount": 1}'));
}),
	"claimed\n\ncompleted ch_after", 'a fresh payment is claimed, completed and replayed');
{
	my $dbh = connect_client();
	my $r = client(99, $dbh, time + 1);
	is_deeply($r->{states}, {}, 'a client works again with prepared statements')
	  or diag(explain $r->{messages});
}
$node->safe_psql('postgres', q{SELECT idem_webhook('expire', 'e1', ttl => '1 s')});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idem.webhooks WHERE source = 'expire'}),
	'the purge worker still purges');

done_testing();
