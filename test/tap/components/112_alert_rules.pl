# idem's Prometheus alerts (monitoring/idem.rules.yml), checked by the real
# promtool: the rules load, the Prometheus configuration that loads them is
# valid, and the unit tests of monitoring/idem.rules.test.yml pass.  Each
# alert has a case where it fires and one where it does not (promtool
# passing shows that each fires where expected and nowhere else); a broken
# expression or a moved threshold makes promtool fail.
use strict;
use warnings;

use File::Copy qw(copy);
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;

my $mon = "$FindBin::RealBin/../../../monitoring";
my $rules = "$mon/idem.rules.yml";
my $tests = "$mon/idem.rules.test.yml";

# promtool with its arguments: (exit status, stdout and stderr together)
sub promtool
{
	my $out = `promtool @_ 2>&1`;
	return ($? >> 8, $out);
}

my ($rc, $out) = promtool('check', 'rules', $rules);
is($rc, 0, 'promtool check rules accepts idem.rules.yml') or diag($out);
($rc, $out) = promtool('check', 'config', "$mon/prometheus.yml");
is($rc, 0, 'promtool check config accepts prometheus.yml, which loads the rules')
  or diag($out);
($rc, $out) = promtool('test', 'rules', $tests);
is($rc, 0, 'promtool test rules: idem.rules.test.yml passes') or diag($out);

# --- Every alert is tested both ways ---

my $rules_text = slurp_file($rules);
my $tests_text = slurp_file($tests);
my @alerts = $rules_text =~ /^  - alert: (\w+)$/mg;
cmp_ok(scalar @alerts, '>=', 6, 'the rules define the alerts') or diag($rules_text);

my (%quiet, %firing);
while ($tests_text =~ /^\s+alertname: (\w+)\n\s+exp_alerts:(.*)$/mg)
{
	if ($2 eq ' []') { $quiet{$1}++ } else { $firing{$1}++ }
}
for my $alert (@alerts)
{
	ok($quiet{$alert} && $firing{$alert},
		"$alert has a case where it does not fire and one where it fires");
}

# --- A broken rule fails ---

my $dir = PostgreSQL::Test::Utils::tempdir();
copy($tests, "$dir/idem.rules.test.yml") or die "copy: $!";

# Write the rules, changed by $edit (on $_), into the scratch directory.
sub write_rules
{
	my $edit = shift;
	my $text = $rules_text;
	$edit->() for $text;
	open(my $fh, '>', "$dir/idem.rules.yml") or die "open: $!";
	print $fh $text;
	close($fh);
	return;
}

write_rules(sub { s/\Q> 0.01\E\n/> 0.01)\n/ or die 'no mismatch threshold' });
($rc, $out) = promtool('check', 'rules', "$dir/idem.rules.yml");
ok($rc != 0 && $out =~ /IdemMismatchRateHigh.*parse error/,
	'promtool check rules fails on a broken expression') or diag($out);

write_rules(sub { s/\Q> 0.01\E\n/> 0.03\n/ or die 'no mismatch threshold' });
($rc, $out) = promtool('test', 'rules', "$dir/idem.rules.test.yml");
ok($rc != 0 && $out =~ /alertname: IdemMismatchRateHigh\b/,
	'promtool test rules fails when a threshold moves past its firing case')
  or diag($out);

done_testing();
