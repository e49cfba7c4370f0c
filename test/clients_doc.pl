#!/usr/bin/perl
# doc/clients.md shows the example services and the queue consumer as the
# tests run them: after each line "<!-- file: PATH -->" comes a fenced block
# holding PATH (relative to the top of the tree) exactly.
#   perl test/clients_doc.pl --write   copies the files into the blocks
#   perl test/clients_doc.pl --check   lists the blocks that differ; exits 1
#                                      if any does, or a file is missing
use strict;
use warnings;

use FindBin;

my $mode = shift // '--check';
die "usage: $0 --write|--check\n" unless $mode =~ /^--(write|check)$/;
my $root = "$FindBin::RealBin/..";
my $doc = "$root/doc/clients.md";

# The text of a file, or undef if there is none
sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or return undef;
	local $/;
	return scalar <$fh>;
}

my $text = slurp($doc) // die "cannot read $doc\n";
my @stale;
my $n = 0;
$text =~ s{(<!-- file: (\S+) -->\n```(\w*)\n)(.*?)(```\n)}{
	my ($head, $path, $body, $tail) = ($1, $2, $4, $5);
	my $file = slurp("$root/$path");
	$n++;
	if (!defined $file) { push @stale, "$path: no such file"; $head . $body . $tail }
	else
	{
		$file .= "\n" unless $file =~ /\n\z/;
		push @stale, "$path: the block differs from the file" if $file ne $body;
		$head . $file . $tail;
	}
}gse;
die "no <!-- file: ... --> block in $doc\n" if $n == 0;

if ($mode eq '--write')
{
	open(my $fh, '>', $doc) or die "cannot write $doc: $!\n";
	print $fh $text;
	close $fh;
	print "$doc: $n blocks\n";
	exit 0;
}
print "$_\n" for @stale;
exit(@stale ? 1 : 0);
