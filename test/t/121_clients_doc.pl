# doc/clients.md shows the code that the client tests run: every block
# marked with a file holds that file exactly, and every example service
# and the queue consumer has its block.
use strict;
use warnings;

use FindBin;
use Test::More;

my $root = "$FindBin::RealBin/../..";
my $out = `perl $root/test/clients_doc.pl --check 2>&1`;
is($?, 0, 'every code block of doc/clients.md is the file it names') or diag($out);

open(my $fh, '<', "$root/doc/clients.md") or die "doc/clients.md: $!";
my %shown = map { $_ => 1 } join('', <$fh>) =~ /<!-- file: (\S+) -->/g;
for my $file (qw(examples/schema.sql examples/python/app.py examples/node/app.js
	examples/java/Payments.java examples/go/main.go examples/queue/consumer.py))
{
	ok($shown{$file}, "doc/clients.md shows $file");
}

done_testing();
