# idem_http_claim's bounded wait, with the first request ending right at the
# duplicate's deadline, hundreds of times: a quarter of the tries commit (or
# roll back) the first request from 10 ms before the deadline to 10 ms
# after, in small steps; the rest close in on the offset where the
# duplicate's answer flips from the first's to 409 (a staircase per ending,
# starting where the sweep saw it flip), where the lock comes as the
# deadline fires.  Whatever the interleaving, the duplicate answers as
# doc/api.md says, what the first left (its response, its committed lease,
# or the claim if it rolled back) or 409 at the deadline, and its
# transaction goes on: never a cancel (57014) or a lock timeout (55P03)
# that the deadline leaves behind.  IDEM_WAIT_RACE_TRIES sets the number of
# tries.
use strict;
use warnings;

use DBI;
use DBD::Pg;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $tries = $ENV{IDEM_WAIT_RACE_TRIES} // 600;
my $wait_ms = 30;
my $spread_ms = 10;

my $node = idem_node('http_wait_race', "log_statement = none\n");

# commit_point(waiter, key, wait, offset_ms): return once `offset_ms` past
# the deadline of the bounded wait of session `waiter` for `key`: the start
# of its statement, once it waits in the lock manager, plus `wait`; 'late'
# at once if its statement ended without waiting.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION idem;
CREATE TABLE after_wait (try int PRIMARY KEY, status text NOT NULL);
CREATE FUNCTION commit_point(waiter int, key text, wait interval, offset_ms float8)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    a record;
    give_up timestamptz := clock_timestamp() + interval '30 s';
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();
        SELECT query_start, state, wait_event_type INTO a FROM pg_stat_activity
        WHERE pid = waiter AND strpos(query, quote_literal(key)) > 0;
        EXIT WHEN a.wait_event_type = 'Lock';
        IF a.state <> 'active' THEN
            RETURN 'late';
        END IF;
        IF clock_timestamp() > give_up THEN
            RAISE EXCEPTION 'session % did not wait: %', waiter, a;
        END IF;
        PERFORM pg_sleep(0.0001);
    END LOOP;
    PERFORM pg_sleep(greatest(0, extract(epoch FROM
        a.query_start + wait + offset_ms * interval '1 ms' - clock_timestamp())));
    RETURN 'on time';
END $$;
});

# every wait here is bounded: idem_dbi's statement_timeout only guards
my $first = idem_dbi($node);
my $dup = idem_dbi($node);
my $dup_pid = $dup->{pg_pid};

# Run a statement in $dbh; dies on an error (the first request's side).
sub must
{
	my ($dbh, $sql) = @_;
	defined $dbh->do($sql) or die "$sql: " . $dbh->state . ' ' . $dbh->errstr;
	return;
}

# How the first request ends, and what the duplicate may answer then (status,
# and whether it has an attempt): what the first left, or 409 at the deadline.
my %endings = (
	complete => [ 'completed/attempt', 'in_progress/none' ],
	rollback => [ 'claimed/attempt', 'in_progress/none' ],
	lease => [ 'in_progress/attempt', 'in_progress/none' ],
);
my @kinds = sort keys %endings;
my (%answers, @failures, $errors);

# the sweep's tries, and per ending how many of them the first was in time
# for; then the staircase's offset per ending
my $sweep = int($tries / 4);
my (%in_time, %flip);

for my $try (0 .. $tries - 1)
{
	my $kind = $kinds[ $try % @kinds ];
	my $key = "race-$try";
	my $offset;

	if ($try < $sweep)
	{
		$offset = -$spread_ms + 2 * $spread_ms * $try / ($sweep - 1);
	}
	else
	{
		$flip{$kind} //=
		  -$spread_ms + 2 * $spread_ms * ($in_time{$kind} // 0) / ($sweep / @kinds);
		$offset = $flip{$kind};
	}

	must($first, 'BEGIN');
	must($first,
		"SELECT idem_http_claim('$key'"
		  . ($kind eq 'lease' ? ", lease => '1 min'" : '') . ')');
	must($first, qq{SELECT idem_http_respond('$key', 201, '{"try": $try}')})
	  if $kind eq 'complete';

	must($dup, 'BEGIN');
	my $sth = $dup->prepare(
		"SELECT status, attempt IS NOT NULL FROM idem_http_claim('$key', wait => '$wait_ms ms')",
		{ pg_async => DBD::Pg::PG_ASYNC() });
	$sth->execute;

	my ($late) = $first->selectrow_array(
		sprintf("SELECT commit_point(%d, '%s', '%d ms', %.4f) = 'late'",
			$dup_pid, $key, $wait_ms, $offset))
	  or die $first->errstr;
	must($first, $kind eq 'rollback' ? 'ROLLBACK' : 'COMMIT');
	$answers{'(the duplicate ended before the first)'}++ if $late;

	# the duplicate's answer, then more work in its transaction, and commit
	my ($answer, $error);
	if (defined $dup->pg_result)
	{
		my ($status, $has_attempt) = @{ $sth->fetchrow_arrayref };
		$answer = $status . ($has_attempt ? '/attempt' : '/none');
		if ($status eq 'claimed')
		{
			$error = $dup->state
			  unless defined $dup->do(
				"SELECT idem_http_respond('$key', 201, '{\"retry\": $try}')");
		}
		$error //= $dup->state
		  unless defined $dup->do("INSERT INTO after_wait VALUES ($try, '$status')");
	}
	else
	{
		$error = $dup->state;
	}
	if (defined $error)
	{
		push @failures, sprintf('try %d (%s, %+.2f ms): %s %s',
			$try, $kind, $offset, $error, $dup->errstr // '');
		$answers{"error $error"}++;
		$errors++;
		$dup->do('ROLLBACK');
		next;
	}
	must($dup, 'COMMIT');

	# the first was in time: next time it commits later; else earlier
	my $first_in_time = $answer ne 'in_progress/none';
	$in_time{$kind}++ if $first_in_time && $try < $sweep;
	$flip{$kind} += $first_in_time ? 0.1 : -0.1 if $try >= $sweep;

	if (!grep { $_ eq $answer } @{ $endings{$kind} })
	{
		push @failures, sprintf('try %d (%s, %+.2f ms): answered %s',
			$try, $kind, $offset, $answer);
		$answers{"wrong $answer"}++;
	}
	else
	{
		$answers{ ($answer eq 'in_progress/none' ? 'deadline' : "first $kind") . " $answer" }++;
	}
}

note("$_: $answers{$_}") for sort keys %answers;
note(sprintf('%s flips at %+.2f ms', $_, $flip{$_})) for sort keys %flip;
is(scalar @failures, 0,
	"$tries duplicates at the deadline answer as documented, and their transactions go on")
  or diag(join("\n", @failures[ 0 .. ($#failures < 19 ? $#failures : 19) ]));
is( $node->safe_psql('postgres', 'SELECT count(*) FROM after_wait'),
	$tries - ($errors // 0),
	'each duplicate that answered committed what it did after');
ok( ($answers{'deadline in_progress/none'} // 0) > 0
	  && ($answers{'first complete completed/attempt'} // 0) > 0,
	'the commits fell both before and after the deadline');

$first->disconnect;
$dup->disconnect;
$node->stop;
done_testing();
