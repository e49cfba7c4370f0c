# The shape of src/ (doc/architecture.md, "The code"): no two files of
# src/ call each other, directly or round a loop; no file calls one of a
# layer above its own in the table of layers; no file is over 800 lines;
# every .c file says what it may call.  test/src_layers.pl derives the
# calls from the source.  A copy of src/ with a call from what mirrors core
# back up to the store, and with a file grown past the limit, fails it.
use strict;
use warnings;

use File::Copy qw(copy);
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use FindBin;
use Test::More;

my $root = "$FindBin::RealBin/../../..";
my $out = `perl $root/test/src_layers.pl $root 2>&1`;
is($?, 0, 'src/ has no circle, no call up, no file over 800 lines') or diag($out);

# The same check on a copy that breaks each rule once
my $copy = tempdir(CLEANUP => 1);
make_path("$copy/src/webhook", "$copy/doc");
copy($_, "$copy/src/") or die "$_: $!" for glob("$root/src/*.[ch]");
copy($_, "$copy/src/webhook/") or die "$_: $!" for glob("$root/src/webhook/*.[ch]");
copy("$root/doc/architecture.md", "$copy/doc/") or die $!;
open(my $fh, '>>', "$copy/src/store_core.c") or die $!;
print $fh "\n/* Calls the store back */\nvoid\nidem_core_calls_up(IdemStore *st)\n{\n\tidem_store_close(st);\n}\n";
print $fh "\n" x 800;
close($fh);
$out = `perl $root/test/src_layers.pl $copy 2>&1`;
isnt($?, 0, 'a copy of src/ with a circle fails');
like($out, qr/^circle: .*store\.c -> store_core\.c.*store_core\.c -> store\.c \(idem_store_close\)/m,
	 'the circle is named with its calls');
like($out, qr/^store_core\.c \(store's ground\) calls up to store\.c \(store\)/m,
	 'the call up is named');
like($out, qr/^store_core\.c: \d+ lines, over 800/m, 'the long file is named');

done_testing();
