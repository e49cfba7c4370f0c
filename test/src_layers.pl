#!/usr/bin/perl
# src_layers.pl [ROOT]: check the shape of idem's C code, from the source.
#
# Derives which file of src/ (and src/webhook/) calls which: a file uses
# another when it names a function or variable that the other defines and
# does not declare static.  Then it fails (exit 1, one line per finding) on:
#   - a circle: two files that call each other, directly or round a loop;
#   - a file of src/ over 800 lines;
#   - a .c file whose opening comment has no "May call:" line;
#   - a file of src/ that doc/architecture.md's table of layers does not
#     name exactly once, or a call from a file to one of a layer above it.
# With -v it prints the calls between files.
use strict;
use warnings;

my $verbose = @ARGV && $ARGV[0] eq '-v' ? shift : 0;
my $root = shift // '.';
my $max_lines = 800;
my @problems;

my @c = (sort(glob("$root/src/*.c")), sort(glob("$root/src/webhook/*.c")));
my @h = (sort(glob("$root/src/*.h")), sort(glob("$root/src/webhook/*.h")));
die "no C files below $root/src\n" unless @c;

sub rel { my ($f) = @_; $f =~ s{^\Q$root\E/src/}{}; return $f; }

sub slurp
{
	my ($f) = @_;
	open(my $fh, '<', $f) or die "$f: $!\n";
	local $/;
	return scalar <$fh>;
}

# The text without comments, strings and character constants: what names
# the code uses, not what it says
sub code_of
{
	my ($text) = @_;
	$text =~ s{/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'}
		{ my $m = $&; $m =~ tr/\n//cd; $m }gse;
	return $text;
}

my (%defines, %code);
for my $f (@c)
{
	my $text = code_of(slurp($f));
	$code{$f} = $text;
	# functions: PostgreSQL's layout, the type on the line above the name
	while ($text =~ /(?:^|\n)([^\n]*)\n(\w+)\([^;{}]*\)\s*\n\{/g)
	{
		my ($type, $name) = ($1, $2);
		next if $type =~ /^\s*static\b/ || $type =~ /^\s/;
		push @{ $defines{$name} }, $f;
	}
	# variables at file scope (column 0) that are not static
	while ($text =~ /(?:^|\n)(?!static\b|extern\b|typedef\b|return\b|#)([A-Za-z][^\n;(){}=]*?)\b(\w+)\s*(?:\[[^\]\n]*\]\s*)*(?:=|;)/g)
	{
		push @{ $defines{$2} }, $f;
	}
}

my %calls;						# $calls{$from}{$to} = [names]
for my $f (@c)
{
	my %seen;
	for my $name ($code{$f} =~ /\b([A-Za-z_]\w*)\b/g)
	{
		next if $seen{$name}++;
		my $owners = $defines{$name} or next;
		next if grep { $_ eq $f } @$owners;
		push @{ $calls{$f}{$_} }, $name for @$owners;
	}
}

if ($verbose)
{
	for my $f (@c)
	{
		for my $t (sort keys %{ $calls{$f} })
		{
			printf "%s -> %s: %s\n", rel($f), rel($t), join(' ', @{ $calls{$f}{$t} });
		}
	}
}

# Circles: strongly connected components of more than one file (Tarjan)
{
	my ($index, @stack, %idx, %low, %on) = (0);
	my $strong;
	$strong = sub {
		my ($v) = @_;
		$idx{$v} = $low{$v} = $index++;
		push @stack, $v;
		$on{$v} = 1;
		for my $w (sort keys %{ $calls{$v} || {} })
		{
			if (!defined $idx{$w})
			{
				$strong->($w);
				$low{$v} = $low{$w} if $low{$w} < $low{$v};
			}
			elsif ($on{$w})
			{
				$low{$v} = $idx{$w} if $idx{$w} < $low{$v};
			}
		}
		if ($low{$v} == $idx{$v})
		{
			my @scc;
			my $w;
			do { $w = pop @stack; $on{$w} = 0; push @scc, $w; } while ($w ne $v);
			if (@scc > 1)
			{
				my %in = map { $_ => 1 } @scc;
				my @edges;
				for my $a (sort @scc)
				{
					for my $b (sort grep { $in{$_} } keys %{ $calls{$a} })
					{
						push @edges, sprintf("%s -> %s (%s)", rel($a), rel($b),
											 join(' ', @{ $calls{$a}{$b} }));
					}
				}
				push @problems, "circle: " . join('; ', @edges);
			}
		}
	};
	$strong->($_) for grep { !defined $idx{$_} } @c;
}

# Size
for my $f (@c, @h)
{
	my $n = () = slurp($f) =~ /\n/g;
	push @problems, sprintf("%s: %d lines, over %d", rel($f), $n, $max_lines)
		if $n > $max_lines;
}

# "May call:" in the opening comment
for my $f (@c)
{
	my ($head) = slurp($f) =~ m{\A(/\*.*?\*/)}s;
	push @problems, rel($f) . ": no \"May call:\" line in its opening comment"
		unless defined $head && $head =~ /^ \* May call:/m;
}

# Layers: doc/architecture.md's table of src/, top to bottom
my $doc = slurp("$root/doc/architecture.md");
my ($table) = $doc =~ /\n\| layer \| files in `src\/` \|[^\n]*\n\|[-|]+\|\n((?:\|[^\n]*\n)+)/;
if (!defined $table)
{
	push @problems, "doc/architecture.md: no table \"| layer | files in `src/` |\"";
}
else
{
	my (%layer, %named);
	my $depth = 0;
	for my $row (split /\n/, $table)
	{
		my (undef, $name, $files) = split /\s*\|\s*/, $row;
		for my $file ($files =~ /`([\w.\/]+\.c)`/g)
		{
			$named{$file}++;
			$layer{"$root/src/$file"} = [ $depth, $name ];
		}
		$depth++;
	}
	for my $f (grep { rel($_) !~ m{/} } @c)
	{
		my $n = $named{ rel($f) } // 0;
		push @problems, "doc/architecture.md names " . rel($f) . " $n times in its table of layers"
			if $n != 1;
	}
	for my $f (keys %calls)
	{
		next unless $layer{$f};
		for my $t (keys %{ $calls{$f} })
		{
			next unless $layer{$t};
			push @problems, sprintf("%s (%s) calls up to %s (%s): %s",
									rel($f), $layer{$f}[1], rel($t), $layer{$t}[1],
									join(' ', @{ $calls{$f}{$t} }))
				if $layer{$t}[0] < $layer{$f}[0];
		}
	}
}

print "$_\n" for sort @problems;
exit(@problems ? 1 : 0);
