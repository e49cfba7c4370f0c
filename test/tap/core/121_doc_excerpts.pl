# The docs show excerpts of the code that tests run: every block marked with
# a file is lines of that file, verbatim and in order.  doc/clients.md shows
# every example service and the queue consumer; the webhook pages show the
# handlers of the regression tests.  A copy of a page with one changed
# character in a block fails the check.
use strict;
use warnings;

use File::Temp qw(tempdir);
use FindBin;
use Test::More;

my $root = "$FindBin::RealBin/../../..";
my $out = `perl $root/test/doc_excerpts.pl 2>&1`;
is($?, 0, 'every code block of doc/clients.md is lines of the file it names') or diag($out);

for my $doc (qw(doc/webhooks.md doc/webhooks/alipay.md doc/webhooks/wechatpay.md))
{
	my $out = `perl $root/test/doc_excerpts.pl $root/$doc 2>&1`;
	is($?, 0, "every code block of $doc marked with a file is lines of that file") or diag($out);
}

open(my $fh, '<', "$root/doc/clients.md") or die "doc/clients.md: $!";
my $text = join('', <$fh>);
my %shown = map { $_ => 1 } $text =~ /<!-- file: (\S+) -->/g;
for my $file (qw(examples/schema.sql examples/python/app.py examples/node/app.js
	examples/java/Payments.java examples/go/main.go examples/queue/consumer.py))
{
	ok($shown{$file}, "doc/clients.md shows $file");
}

# The first line of the first block, with one more character
my $dir = tempdir(CLEANUP => 1);
$text =~ s/(<!-- file: \S+ -->\n```\w*\n[^\n]*)/$1x/ or die "no block in doc/clients.md";
open($fh, '>', "$dir/clients.md") or die "$dir/clients.md: $!";
print $fh $text;
close $fh;
`perl $root/test/doc_excerpts.pl $dir/clients.md 2>&1`;
is($? >> 8, 1, 'the check fails when a line of a block differs from its file');

done_testing();
