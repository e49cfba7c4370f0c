# Hostile input: a sweep of generated cases (test/hostile/generate.pl and
# the NULL sweep of test/hostile/driver.sql) against every SQL function.
# Every case either works or raises an error with a standard SQLSTATE (never
# XX000 internal_error or class 58) and a message; a case that errors has
# written nothing (rows of idem.keys and idem.webhooks, the token sequence);
# and the server never crashes.  The seed is fixed (IDEM_HOSTILE_SEED
# overrides it), so a failure is reproduced by running the test again.
use strict;
use warnings;

use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $hostile = dirname(__FILE__) . '/../../hostile';
my $seed = $ENV{IDEM_HOSTILE_SEED} // 20240601;

# UTC: the interval cases that end exactly now ('-1 day +24 hours', a month
# less its days) hold on the calendar of a zone without summer time
my $node = idem_node('hostile', q(
log_statement = none
timezone = 'UTC'
), extra => [ '--encoding=UTF8', '--no-locale' ]);
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

# The cases
my $cases = $node->basedir . '/hostile_cases.sql';
my $gen_err = '';
ok( IPC::Run::run(
		[ $^X, "$hostile/generate.pl", '--seed', $seed ],
		'>', $cases, '2>', \$gen_err),
	"cases generated: $gen_err");
for my $file ("$hostile/driver.sql", $cases)
{
	$node->command_ok(
		[
			'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
			$node->connstr('postgres'), '-f', $file
		],
		"loaded $file");
}
my $generated = $node->safe_psql('postgres', 'SELECT max(id) FROM hostile.cases');
my $null_cases =
  $node->safe_psql('postgres', 'SELECT hostile.add_null_cases(' . ($generated + 1) . ')');
cmp_ok($null_cases, '>', 40, "the NULL sweep has a case for every argument of every function: $null_cases");
my $total = $generated + $null_cases;

# Run them in batches, each case its own transaction.  A batch that fails
# means the server died (the driver catches every error): the log tells
# at which case.
my $crashed = '';
for (my $first = 1; $first <= $total; $first += 300)
{
	my $last = $first + 299;
	my $log_offset = -s $node->logfile;
	my ($rc, $out, $err) = $node->psql('postgres', "CALL hostile.run($first, $last)");
	if ($rc != 0)
	{
		my $log = slurp_file($node->logfile, $log_offset);
		my @seen = $log =~ /hostile case (\d+)/g;
		$crashed = "batch $first..$last failed at case " . ($seen[-1] // '?') . ": $err";
		last;
	}
}
is($crashed, '', "all $total cases ran");

# Every way a case can break the rules, per family
my $failures = $node->safe_psql(
	'postgres', q{
SELECT c.family, count(*) OVER (PARTITION BY c.family),
       format('case %s: expected %s, got %s%s%s%s -- %s', c.id, c.expect,
              coalesce(r.outcome, 'nothing'),
              coalesce(' (' || r.message || ')', ''),
              coalesce(' = ' || left(r.value, 60), ''),
              CASE WHEN r.wrote_on_error THEN ', and it wrote although it failed' ELSE '' END,
              left(c.sql, 300))
FROM hostile.cases c LEFT JOIN hostile.results r USING (id)
WHERE r.id IS NULL
   OR r.wrote_on_error
   OR (r.outcome <> 'ok' AND (left(r.outcome, 2) IN ('XX', '58') OR coalesce(r.message, '') = ''))
   OR (c.expect = 'ok' AND r.outcome <> 'ok')
   OR (c.expect LIKE 'ok:%' AND (r.outcome <> 'ok' OR r.value IS DISTINCT FROM substr(c.expect, 4)))
   OR (c.expect = 'err' AND r.outcome = 'ok')
   OR (c.expect LIKE 'err:%' AND r.outcome <> substr(c.expect, 5))
ORDER BY c.id});
my %failed;
for my $line (split /\n/, $failures)
{
	my ($family, undef, $what) = split /\|/, $line, 3;
	push @{ $failed{$family} }, $what;
}

my @families = split /\n/,
  $node->safe_psql('postgres',
	'SELECT family || \'|\' || count(*) FROM hostile.cases GROUP BY family ORDER BY min(id)');
for (@families)
{
	my ($family, $n) = split /\|/;
	my $bad = $failed{$family} // [];
	is(scalar @$bad, 0, "$family: all $n cases work or fail with a standard SQLSTATE as expected")
	  or diag join("\n", @$bad[ 0 .. ($#$bad < 19 ? $#$bad : 19) ]);
}
note $node->safe_psql('postgres',
	q{SELECT family || ' ' || outcome || ' ' || count(*) FROM hostile.cases JOIN hostile.results USING (id) GROUP BY family, outcome ORDER BY family, outcome});

# The server stayed up through all of it.
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server still answers');
ok( !$node->log_contains('terminated by signal|PANIC|TRAP:|server process .* exited with exit code'),
	'no backend crashed or panicked');

$node->stop;
done_testing();
