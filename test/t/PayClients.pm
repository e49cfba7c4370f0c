# Clients of a sharded payment service (test/t/116_plproxy.pl, through a
# PL/Proxy router; test/t/125_citus.pl, through a Citus coordinator): forked
# processes that call a payment function for a list of orders, retrying
# them, and write what each call answered.
package PayClients;

use strict;
use warnings;

use Exporter 'import';
use List::Util qw(shuffle);
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

our @EXPORT = qw(call amount_of start_client finish_clients);

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

1;
