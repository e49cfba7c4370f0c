# Budgets: README.md and every page under doc/ together stay within
# 200 KB, so that each fact is said once (doc/api.md is the reference;
# other pages link to it) and there is room for the pages to come; no file
# of src/ is over 800 lines.  Needs no server.
use strict;
use warnings;

use File::Find;
use FindBin;
use Test::More;

my $root = "$FindBin::RealBin/../..";
my $doc_budget = 200 * 1024;
my $max_lines = 800;

my @pages = ("$root/README.md");
find(sub { push @pages, $File::Find::name if /\.md\z/ && -f }, "$root/doc");
my %size = map { $_ => -s $_ } @pages;
my $total = 0;
$total += $_ for values %size;

cmp_ok(scalar(@pages), '>', 1, 'doc/ has pages');
note(sprintf('README.md and doc/: %d bytes (%.1f KB) of %d', $total, $total / 1024, $doc_budget));
cmp_ok($total, '<=', $doc_budget, 'README.md and doc/**/*.md are within 200 KB')
	or diag(join('', "the biggest:\n",
		map { sprintf("  %7d %s\n", $size{$_}, substr($_, length($root) + 1)) }
		(sort { $size{$b} <=> $size{$a} } @pages)[0 .. 4]));

my @sources;
find(sub { push @sources, $File::Find::name if /\.[ch]\z/ && -f }, "$root/src");
cmp_ok(scalar(@sources), '>', 1, 'src/ has files');
my @long;
for my $f (sort @sources)
{
	open(my $fh, '<', $f) or die "$f: $!";
	my $n = 0;
	$n++ while <$fh>;
	close $fh;
	push @long, sprintf('%s: %d lines', substr($f, length($root) + 1), $n) if $n > $max_lines;
}
is(scalar(@long), 0, "no file of src/ is over $max_lines lines")
	or diag(join("\n", @long));

done_testing();
