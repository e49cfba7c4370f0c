# Clients of a sharded payment service (test/tap/components/116_plproxy.pl,
# through a PL/Proxy router; test/tap/components/125_citus.pl, through a
# Citus coordinator): forked processes that call a payment function for a
# list of orders, retrying them, and write what each call answered.
package PayClients;

use strict;
use warnings;

use DBI;
use Exporter 'import';
use List::Util qw(shuffle);
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(hmac_sha256_hex);
use Time::HiRes qw(time usleep);

our @EXPORT = qw(call amount_of start_client finish_clients check_storm split_outage
  check_replays refund_twice
  run_storm run_storm_during run_outage_storm session_to);

# A connection to the database postgres of $node, as the clients use it:
# errors returned, not raised.
sub session_to
{
	my ($node) = @_;
	my $dbh = DBI->connect(
		'dbi:Pg:dbname=postgres;host=' . $node->host . ';port=' . $node->port,
		'', '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0 })
	  or die "cannot connect: $DBI::errstr";
	# guards against a hang only
	$dbh->do("SET statement_timeout = '60s'") or die $dbh->errstr;
	return $dbh;
}

# Run one statement: { rows => [[...], ...] } or { error => SQLSTATE,
# message => ... }.
sub call
{
	my ($dbh, $sql, @bind) = @_;
	my $rows = $dbh->selectall_arrayref($sql, undef, @bind);
	return { error => $dbh->state, message => $dbh->errstr } unless $rows;
	return { rows => $rows };
}

# The amount of an order: it depends on the order only, so that every
# retry is the same request.
sub amount_of
{
	my ($key) = @_;
	my ($n) = $key =~ /(\d+)$/;
	return 100 + $n;
}

# A client process: on a connection from $connect->(), runs $pay_sql
# (merchant, key, amount, currency) for each [merchant, key] of its list,
# in its own order, once or (with $stopfile) over and over until the file
# exists, and writes one line per call to $out: time, merchant, key, then
# the status and response, or ERROR, the SQLSTATE and the message.
sub start_client
{
	my ($connect, $pay_sql, $calls, $out, $stopfile) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	return $pid if $pid;

	# the child: its own order of calls, and no END blocks of the test
	# (they would stop the nodes)
	srand($$);
	my $ok = eval {
		my $dbh = $connect->();
		open my $fh, '>', $out or die "$out: $!";
		$fh->autoflush(1);
		do
		{
			for my $c (shuffle @$calls)
			{
				my ($m, $k) = @$c;
				my $r = call($dbh, $pay_sql, $m, $k, amount_of($k), 'USD');
				my $line;
				if ($r->{rows})
				{
					$line = join "\t", @{ $r->{rows}[0] };
				}
				else
				{
					(my $msg = $r->{message} // '') =~ s/\s+/ /g;
					$line = "ERROR\t$r->{error}\t$msg";
					# the connection may not outlive a node's death; if it
					# did not, the next calls need a new one
					$dbh = $connect->() unless $dbh->ping;
				}
				printf $fh "%.3f\t%s\t%s\t%s\n", time, $m, $k, $line;
				last if $stopfile && -e $stopfile;
			}
		} while ($stopfile && !-e $stopfile);
		close $fh;
		1;
	};
	print STDERR "client: $@" unless $ok;
	POSIX::_exit($ok ? 0 : 1);
}

# Wait for the clients and read their lines: [time, merchant, key, status,
# response] or [time, merchant, key, 'ERROR', sqlstate, message].
sub finish_clients
{
	my ($pids, $outs) = @_;
	my $failed = 0;
	for (@$pids)
	{
		waitpid($_, 0);
		$failed++ if $?;
	}
	is($failed, 0, 'every client ran to its end');
	my @lines;
	for my $out (@$outs)
	{
		push @lines, map { [ split /\t/ ] } split /\n/, slurp_file($out);
	}
	return @lines;
}


# Check the lines of a storm in which $nclients clients each paid every
# order of @$storm once: no call failed, each key was charged by one call
# only, and every call of a key got the same answer.  Returns the answers,
# by "merchant/key".
sub check_storm
{
	my ($results, $storm, $nclients) = @_;
	my (%claimed, %answer);
	my ($errors, $mismatched) = (0, 0);
	for (@$results)
	{
		my (undef, $m, $k, $status, $resp) = @$_;
		if ($status eq 'ERROR') { $errors++; note "error: @$_"; next; }
		$claimed{"$m/$k"}++ if $status eq 'claimed';
		$answer{"$m/$k"} //= $resp;
		$mismatched++ if $answer{"$m/$k"} ne $resp;
	}
	is(scalar @$results, $nclients * @$storm,
		"$nclients clients made " . $nclients * @$storm . ' calls');
	is($errors, 0, 'no call failed');
	is(scalar(keys %claimed), scalar @$storm, 'every key was charged by one call ...');
	is((grep { $_ != 1 } values %claimed), 0, '... and by one call only');
	is($mismatched, 0, 'every retry got the answer of the call that charged');
	return \%answer;
}

# Sort the lines of a storm during which node $down (the home of some
# merchants: $home->{merchant}) was down from $t_down to $t_up: the answers
# acknowledged (claimed), by "merchant/key"; the errors, by node; the calls
# each node served while $down was down; the error lines that $expected
# ($node, $sqlstate, $message) refuses.
sub split_outage
{
	my ($results, $home, $down, $t_down, $t_up, $expected) = @_;
	my (%acked, %errors, %served_while_down, @bad_errors);
	for (@$results)
	{
		my ($when, $m, $k, $status, @rest) = @$_;
		my $node = $home->{$m};
		if ($status eq 'ERROR')
		{
			$errors{$node}++;
			push @bad_errors, "@$_" unless $node == $down && $expected->(@rest);
			next;
		}
		$served_while_down{$node}++ if $when > $t_down + 0.1 && $when < $t_up;
		$acked{"$m/$k"} //= $rest[0] if $status eq 'claimed';
	}
	return (\%acked, \%errors, \%served_while_down, \@bad_errors);
}

# Once every node is back ($after: after what), pay each order of
# @$orders again: each one answered before ($answers, by "merchant/key")
# replays that answer, and any other is answered, charged now or earlier.
sub check_replays
{
	my ($dbh, $pay_sql, $orders, $answers, $after) = @_;
	my ($replayed, @wrong) = (0);
	for my $c (@$orders)
	{
		my ($m, $k) = @$c;
		my $want = $answers->{"$m/$k"};
		my $r = call($dbh, $pay_sql, $m, $k, amount_of($k), 'USD');
		if (!$r->{rows})
		{
			push @wrong, "$m/$k: $r->{message}";
			next;
		}
		my ($status, $resp) = @{ $r->{rows}[0] };
		if (defined $want)
		{
			if ($status eq 'completed' && $resp eq $want) { $replayed++ }
			else { push @wrong, "$m/$k: $status $resp, acknowledged $want" }
		}
		elsif ($status ne 'claimed' && $status ne 'completed')
		{
			push @wrong, "$m/$k: $status";
		}
	}
	my $nacked = grep { defined $answers->{"$_->[0]/$_->[1]"} } @$orders;
	is_deeply(\@wrong, [], "$after, every retry is answered");
	is($replayed, $nacked, "$after, every acknowledged payment replays its answer ($nacked)");
}


# A gateway's charge.refunded event for merchant $m (evt_refund_1: 50.00
# of charge ch_w), signed now as Stripe signs with $secret, delivered twice
# to receive_refund() through $dbh as from source $source.  Returns the
# payload and what each delivery answered ("status event_id", or the error).
sub refund_twice
{
	my ($dbh, $m, $source, $secret) = @_;
	my $payload =
	  qq({"id": "evt_refund_1", "type": "charge.refunded", "data": {"object": {"id": "ch_w", "amount_refunded": 5000, "currency": "usd"}}});
	my $t = int(time);
	my $headers =
	  qq({"Stripe-Signature": "t=$t,v1=) . hmac_sha256_hex("$t.$payload", $secret) . '"}';
	my @seen;
	for (1 .. 2)
	{
		my $r = call($dbh, 'SELECT status, event_id FROM receive_refund($1, $2, $3, $4)',
			$m, $source, $payload, $headers);
		push @seen, $r->{rows} ? "@{ $r->{rows}[0] }" : "error $r->{message}";
	}
	return ($payload, \@seen);
}


# $nclients clients (connections from $connect) each pay every order of
# @$orders once, in their own order, through $pay_sql; their lines (files
# $dir/$name_N.out), once all are done.
sub run_storm
{
	my ($connect, $pay_sql, $orders, $nclients, $dir, $name) = @_;
	my (@pids, @outs);
	for my $c (1 .. $nclients)
	{
		push @outs, "$dir/${name}_$c.out";
		push @pids, start_client($connect, $pay_sql, $orders, $outs[-1]);
	}
	return finish_clients(\@pids, \@outs);
}

# As run_storm, the clients paying @$orders over and over while
# $during->() runs, and 1 s more; their lines.
sub run_storm_during
{
	my ($connect, $pay_sql, $orders, $nclients, $dir, $name, $during) = @_;
	my $stopfile = "$dir/$name.stop";
	my (@pids, @outs);
	for my $c (1 .. $nclients)
	{
		push @outs, "$dir/${name}_$c.out";
		push @pids, start_client($connect, $pay_sql, $orders, $outs[-1], $stopfile);
	}
	$during->();
	usleep(1_000_000);
	append_to_file($stopfile, 'stop');
	return finish_clients(\@pids, \@outs);
}

# As run_storm_during, while $node goes down without a checkpoint
# (immediate shutdown: it recovers from its WAL when it starts again) 0.7 s
# after the clients start, $while_down->() runs, and $node comes back 1.5 s
# later.  Returns the times it went down and came back, and the lines.
sub run_outage_storm
{
	my ($connect, $pay_sql, $orders, $nclients, $dir, $name, $node, $while_down) = @_;
	my ($t_down, $t_up);
	my @results = run_storm_during(
		$connect, $pay_sql, $orders, $nclients, $dir, $name,
		sub {
			usleep(700_000);
			$t_down = time;
			$node->stop('immediate');
			$while_down->();
			usleep(1_500_000);
			$t_up = time;
			$node->start;
		});
	return ($t_down, $t_up, @results);
}

1;
