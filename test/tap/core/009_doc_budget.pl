# Budget: README.md and every page under doc/ together stay within 220 KB
# (220,000 bytes; 210 KB before the gateways and the webhook order of 1.7,
# 215 KB before Mercado Pago, Alipay's v3 and the CPU profile), so that
# each fact is said once (doc/api.md is the reference; other pages link to
# it) and there is room for the pages to come.  Needs no server.  (The
# size of src/'s files is 008_src_layers.pl's.)
use strict;
use warnings;

use File::Find;
use FindBin;
use Test::More;

my $root = "$FindBin::RealBin/../../..";
my $doc_budget = 220_000;

my @pages = ("$root/README.md");
find(sub { push @pages, $File::Find::name if /\.md\z/ && -f }, "$root/doc");
my %size = map { $_ => -s $_ } @pages;
my $total = 0;
$total += $_ for values %size;

cmp_ok(scalar(@pages), '>', 1, 'doc/ has pages');
note(sprintf('README.md and doc/: %d bytes of %d', $total, $doc_budget));
cmp_ok($total, '<=', $doc_budget, 'README.md and doc/**/*.md are within 220 KB (220,000 bytes)')
	or diag(join('', "the biggest:\n",
		map { sprintf("  %7d %s\n", $size{$_}, substr($_, length($root) + 1)) }
		(sort { $size{$b} <=> $size{$a} } @pages)[0 .. 4]));

done_testing();
