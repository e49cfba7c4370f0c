#!/usr/bin/perl
# The docs show excerpts of code that tests run (doc/clients.md: the example
# services and the queue consumer; the webhook pages: the handlers of the
# regression tests), and readers copy them: each must be the tested code.
# After each line "<!-- file: PATH -->" comes a fenced block whose lines are
# lines of PATH (relative to the top of the tree), verbatim, whole and in
# order; a line of only "..." (indented or not) stands for lines left out.
#   perl test/doc_excerpts.pl [DOC]   lists the blocks of DOC (by default
#                                     doc/clients.md) that are not in their
#                                     file; exits 1 if any is not
use strict;
use warnings;

use FindBin;

my $root = "$FindBin::RealBin/..";
my $doc = shift // "$root/doc/clients.md";

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
while ($text =~ /<!-- file: (\S+) -->\n(?:```\w*\n(.*?)^```$)?/gms)
{
	my ($path, $block) = ($1, $2);
	my $file = slurp("$root/$path");
	$n++;
	if (!defined $block) { push @stale, "$path: no fenced block after its marker"; next }
	if (!defined $file) { push @stale, "$path: no such file"; next }
	$file .= "\n" unless $file =~ /\n\z/;

	# Each run of lines between "..." lines is in the file, whole lines,
	# after the run before it
	my @runs = grep { $_ ne '' } split(/^[ \t]*\.\.\.\n/m, $block);
	push @stale, "$path: an empty block" unless @runs;
	my $at = 0;
	for my $run (@runs)
	{
		$at = index("\n$file", "\n$run", $at);
		if ($at < 0) { push @stale, "$path: these lines are not in the file (after the lines before them):\n$run"; last }
		$at += length($run);
	}
}
die "no <!-- file: ... --> block in $doc\n" if $n == 0;

print "$_\n" for @stale;
exit(@stale ? 1 : 0);
