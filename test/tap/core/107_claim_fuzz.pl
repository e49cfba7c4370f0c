# A model-based fuzzer of the pending-claim protocol (src/claim_memory.c).
#
# Session A runs random transactions over a few keys: plain claims and
# finishing calls, savepoints released or rolled back at any depth, cursors
# whose rows claim keys (fetched at any savepoint level, some with a row
# that fails), and PL/pgSQL functions that claim keys or fetch such a cursor
# inside exception blocks.  A model predicts every answer and error of
# session A.  After each statement of A, session B probes every key with
# idem_claim(nowait => true) in a transaction it rolls back: a key A's open
# transaction holds or has written must be in_progress to B, never claimed;
# a key A has nothing for (its claims there were rolled back with their
# savepoint) must answer from the committed state alone.  After each
# transaction of A the committed table must be what the model committed.
#
# The seed is fixed, so make test runs the same sequence every time.  For a
# longer run:
#   IDEM_FUZZ_SEED     first seed (default below)
#   IDEM_FUZZ_STEPS    statements of session A per seed
#   IDEM_FUZZ_SECONDS  keep running further seeds (seed + 1, ...) until this
#                      many seconds have passed
#   IDEM_FUZZ_TRACE=1  log every statement of both sessions
# A failure prints the seed, the statement number, what differed and the
# last statements of both sessions; IDEM_FUZZ_SEED=<seed>
# IDEM_FUZZ_STEPS=<step> runs the same sequence up to it again.
use strict;
use warnings;

use DBI;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../lib";
use IdemTest;

my $first_seed = $ENV{IDEM_FUZZ_SEED} // 20261122;
my $steps_per_seed = $ENV{IDEM_FUZZ_STEPS} // 8000;
my $seconds = $ENV{IDEM_FUZZ_SECONDS} // 0;
my $trace = $ENV{IDEM_FUZZ_TRACE} // 0;

my $nkeys = 8;			  # keys per seed, one scope
my $max_depth = 4;		  # savepoints open at once
my $max_cursors = 3;	  # cursors open at once
# A claim committed in progress holds its key for the default lease (60 s):
# its row is deleted at the latest this many transactions later (a few
# seconds), so that no lease runs out under the model, however long the run.
my $forget_after = 10;

# max_locks_per_transaction makes the limit of pending claims (a quarter
# of it) 5, fewer than the keys: past it, claims write their row at once
# and hold no key lock, which B must not tell apart.
my $node = idem_node('claim_fuzz', q(
log_statement = none
max_locks_per_transaction = 20
));
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

# fz_act runs one call on a key and answers its status (a claim) or ok;
# fz_block runs calls, each in an exception block that may be made to fail
# after the call, or without a block; fz_fetch opens a cursor whose rows
# claim keys (row "boom" fails) and fetches it one row at a time, plainly or
# inside an exception block that catches the failing row; fz_outer runs
# either directly, or inside an outer block left normally (keep) or by an
# error it catches (undo).
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION fz_act(k text, act text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    CASE act
    WHEN 'claim' THEN RETURN (SELECT status FROM idem_claim(k));
    WHEN 'complete' THEN PERFORM idem_complete(k, '"pl"');
    WHEN 'fail' THEN PERFORM idem_fail(k, '"pl"', retryable => false);
    WHEN 'release' THEN PERFORM idem_fail(k, '"pl"', retryable => true);
    ELSE PERFORM idem_checkpoint(k, 'pl');
    END CASE;
    RETURN 'ok';
END $$;

CREATE FUNCTION fz_block(keys text[], acts text[], blocks bool[], booms bool[])
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    answers text[] := '{}';
BEGIN
    FOR i IN 1 .. array_length(keys, 1) LOOP
        IF blocks[i] THEN
            BEGIN
                answers := answers || fz_act(keys[i], acts[i]);
                IF booms[i] THEN
                    RAISE EXCEPTION 'fuzz: undo block %', i;
                END IF;
            EXCEPTION WHEN OTHERS THEN
                answers := answers || ('caught ' || SQLSTATE);
            END;
        ELSE
            answers := answers || fz_act(keys[i], acts[i]);
        END IF;
    END LOOP;
    RETURN answers;
END $$;

CREATE FUNCTION fz_fetch(keys text[], boom int, plan text[])
RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    c refcursor;
    r record;
    answers text[] := '{}';
BEGIN
    OPEN c FOR SELECT i, (SELECT status FROM idem_claim(keys[i])) AS status, 1 / (i - boom) AS x
               FROM generate_subscripts(keys, 1) i;
    FOR j IN 1 .. array_length(plan, 1) LOOP
        IF plan[j] = 'block' THEN
            BEGIN
                FETCH c INTO r;
                answers := answers || coalesce(r.status, 'end');
            EXCEPTION WHEN division_by_zero THEN
                answers := answers || ('caught ' || SQLSTATE);
                EXIT;       -- the cursor failed: it cannot be fetched again
            END;
        ELSE
            FETCH c INTO r;
            answers := answers || coalesce(r.status, 'end');
        END IF;
    END LOOP;
    CLOSE c;
    RETURN answers;
END $$;

CREATE FUNCTION fz_outer(q text, outer_block text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    answers text[];
BEGIN
    IF outer_block = 'none' THEN
        EXECUTE q INTO answers;
        RETURN answers;
    END IF;
    BEGIN
        EXECUTE q INTO answers;
        IF outer_block = 'undo' THEN
            RAISE EXCEPTION 'fuzz: undo the call';
        END IF;
    EXCEPTION WHEN raise_exception THEN
        answers := answers || 'undone'::text;
    END;
    RETURN answers;
END $$;
});

# ---------------------------------------------------------------------
# Randomness: a generator of its own (xorshift32), so that nothing else in
# the process can move the sequence a seed gives.
my $rng_state;

sub rng_seed
{
	my ($seed) = @_;
	$rng_state = ($seed ^ 0x9e3779b9) & 0xffffffff;
	$rng_state ||= 1;
	rnd(2) for 1 .. 16;
	return;
}

# An integer in [0, n)
sub rnd
{
	my ($n) = @_;
	$rng_state ^= ($rng_state << 13) & 0xffffffff;
	$rng_state ^= $rng_state >> 17;
	$rng_state ^= ($rng_state << 5) & 0xffffffff;
	return $rng_state % $n;
}

sub chance { return rnd(1000) < $_[0] * 1000; }
sub pick { return $_[ rnd(scalar @_) ]; }

# One name out of (name, weight, ...) pairs, in the order given
sub weighted
{
	my @pairs = @_;
	my $total = 0;
	for (my $i = 1; $i < @pairs; $i += 2) { $total += $pairs[$i]; }
	my $r = rnd($total);
	for (my $i = 0; $i < @pairs; $i += 2)
	{
		return $pairs[$i] if $r < $pairs[ $i + 1 ];
		$r -= $pairs[ $i + 1 ];
	}
	die 'unreachable';
}

# ---------------------------------------------------------------------
# Sessions (their statement_timeout guards against a hang only: no
# statement here ever waits)
sub session { return idem_dbi($node); }

# Run one statement: { rows => [[...], ...] } or { error => SQLSTATE,
# message => ..., lost => 1 when the connection is gone }
sub run_sql
{
	my ($dbh, $sql) = @_;
	my $sth = $dbh->prepare($sql);
	if ($sth && defined $sth->execute)
	{
		return { rows => ($sth->{NUM_OF_FIELDS} ? $sth->fetchall_arrayref : []) };
	}
	my ($first_line) = split /\n/, $dbh->errstr // '';
	my %r = (error => $dbh->state || '?', message => $first_line // '');
	$r{lost} = 1 unless $dbh->ping;
	return \%r;
}

# ---------------------------------------------------------------------
# The model.
#
# committed: key -> processing / completed / failed / released (absent:
# none); committed_at: for a processing row, the transaction that committed
# it.  levels: the open transaction as a stack; levels[0] is the
# transaction itself, then one per savepoint (sql) or PL/pgSQL exception
# block (pl) open.  Each level holds the changes made at it: key -> { state,
# mine }, where mine says that the transaction's claim memory has the claim
# (so that the finishing calls without a token are allowed; only a claim or
# a finishing call allowed so makes a change, so every change is mine).  A
# key with a change at any level is held by the transaction: B must find it
# in_progress.  cursors: name -> the keys of its rows (and which row fails),
# its position, the level that owns it (where it was declared, or the one
# a RELEASE merged that into), and whether a FETCH of it failed.
my (%committed, %committed_at, @levels, %cursors, $in_xact);
my ($seed, $step, $xact_no, $cursor_no, $savepoint_no);
my (@log_a, @log_b);
my %seen;				# how often each interesting case came up

sub sql_depth
{
	return scalar grep { $_->{kind} eq 'sql' } @levels;
}

sub effective
{
	my ($k) = @_;
	for my $level (reverse @levels)
	{
		return $level->{changes}{$k} if exists $level->{changes}{$k};
	}
	return { state => $committed{$k} // 'none', mine => 0 };
}

sub held
{
	my ($k) = @_;
	return scalar grep { exists $_->{changes}{$k} } @levels;
}

sub change
{
	my ($k, $state) = @_;
	$levels[-1]{changes}{$k} = { state => $state, mine => 1 };
	return;
}

sub push_level
{
	my ($kind, $name) = @_;
	push @levels, { kind => $kind, name => $name, changes => {} };
	return;
}

# The top level ends well (RELEASE, an exception block left normally)
sub merge_top
{
	my $top = pop @levels;
	my $index = scalar @levels;
	$levels[-1]{changes}{$_} = $top->{changes}{$_} for keys %{ $top->{changes} };
	for my $c (values %cursors)
	{
		$c->{level} = $index - 1 if $c->{level} >= $index;
	}
	return;
}

# The top level rolls back: its changes are gone, its cursors too; a key
# freed so is noted, B must find it answering from the committed state
sub discard_top
{
	my $top = pop @levels;
	my $index = scalar @levels;
	for my $k (keys %{ $top->{changes} })
	{
		$seen{freed}{$k} = 1 unless held($k);
	}
	for my $name (keys %cursors)
	{
		delete $cursors{$name} if $cursors{$name}{level} >= $index;
	}
	return;
}

# What idem_claim answers to A, and what it changes
sub model_claim
{
	my ($k) = @_;
	my $e = effective($k);
	my $s = $e->{state};
	if ($s eq 'none' || $s eq 'released')
	{
		change($k, 'processing');
		return 'claimed';
	}
	return 'in_progress' if $s eq 'processing';
	return $s;
}

# What a finishing call without a token raises (or undef), and what it
# changes
sub model_finish
{
	my ($k, $act) = @_;
	my $e = effective($k);
	my $s = $e->{state};
	return 'ID002' if $s eq 'none';
	return 'ID003' if $s eq 'completed' || $s eq 'failed';
	return 'ID004' unless $e->{mine};
	return 'ID001' if $s eq 'released';
	my %to = (
		complete => 'completed',
		fail => 'failed',
		release => 'released',
		checkpoint => 'processing');
	change($k, $to{$act});
	return undef;
}

# A statement of A failed: the model has run it up to the error; the
# levels it opened go, and the savepoint it ran in rolls back (or the
# transaction, outside any).  Returns the statement that follows.
sub model_error
{
	discard_top() while $levels[-1]{kind} eq 'pl';
	if (sql_depth() == 0)
	{
		model_end(0);
		return 'ROLLBACK';
	}
	return model_rollback_to(scalar(@levels) - 1);
}

sub model_rollback_to
{
	my ($index) = @_;
	discard_top() while @levels > $index + 1;
	my $name = $levels[-1]{name};
	discard_top();
	push_level('sql', $name);
	return "ROLLBACK TO SAVEPOINT $name";
}

sub model_end
{
	my ($commit) = @_;
	if ($commit)
	{
		merge_top() while @levels > 1;
		for my $k (keys %{ $levels[0]{changes} })
		{
			my $s = $levels[0]{changes}{$k}{state};
			$committed{$k} = $s;
			$committed_at{$k} = $xact_no if $s eq 'processing';
		}
	}
	@levels = ();
	%cursors = ();
	$in_xact = 0;
	return;
}

# ---------------------------------------------------------------------
# Operations of session A.  Each returns the statement, and what it must
# answer: rows (a list of values, compared in order) or an error.

sub key_name { return "f$seed-k$_[0]"; }
sub rand_key { return key_name(rnd($nkeys)); }

# Mostly a key the transaction holds a claim of, so that finishing calls
# are not mostly refused
sub finish_key
{
	my @mine = grep { effective($_)->{mine} } map { key_name($_) } 0 .. $nkeys - 1;
	return chance(0.7) && @mine ? pick(@mine) : rand_key();
}

sub sql_array { return 'ARRAY[' . join(', ', map { "'$_'" } @_) . ']::text[]'; }

sub op_claim
{
	my $k = rand_key();
	return ("SELECT status FROM idem_claim('$k')", { rows => [ model_claim($k) ] });
}

# idem_lookup shows the row as the transaction sees it, its own pending
# claims included
sub op_lookup
{
	my $k = rand_key();
	my $s = effective($k)->{state};
	return ("SELECT state FROM idem_lookup('$k')", { rows => [ $s eq 'none' ? () : $s ] });
}

sub op_finish
{
	my ($act) = @_;
	my $k = finish_key();
	my %call = (
		complete => "idem_complete('$k', '\"done\"')",
		fail => "idem_fail('$k', '\"declined\"', retryable => false)",
		release => "idem_fail('$k', '\"timeout\"', retryable => true)",
		checkpoint => "idem_checkpoint('$k', 'charged')");
	my $err = model_finish($k, $act);
	return ("SELECT $call{$act}", $err ? { error => $err } : { rows => [''] });
}

sub op_savepoint
{
	my $name = 's' . ++$savepoint_no;
	push_level('sql', $name);
	return ("SAVEPOINT $name", { rows => [] });
}

sub sql_levels
{
	return grep { $levels[$_]{kind} eq 'sql' } 0 .. $#levels;
}

sub op_release
{
	my $index = pick(sql_levels());
	my $name = $levels[$index]{name};
	merge_top() while @levels > $index;
	return ("RELEASE SAVEPOINT $name", { rows => [] });
}

sub op_rollback_to
{
	my $index = pick(sql_levels());
	$seen{rollback_to}++;
	return (model_rollback_to($index), { rows => [] });
}

sub op_declare
{
	my $name = 'c' . ++$cursor_no;
	my $n = 1 + rnd(4);
	my @rows = map { [ rand_key(), 0 ] } 1 .. $n;
	# a failing row, most often after one that claims (OFFSET 0 keeps the
	# planner from folding a single row's 1 / 0 at DECLARE)
	$rows[ $n == 1 ? 0 : 1 + rnd($n - 1) ][1] = 1 if chance(0.7);
	my $values = join(', ',
		map { sprintf("(%d, '%s', %d)", $_ + 1, $rows[$_][0], $rows[$_][1] ? 0 : 1) }
		  0 .. $#rows);
	$cursors{$name} =
	  { rows => \@rows, pos => 0, level => $#levels, failed => 0, pending => [] };
	return (
		"DECLARE $name CURSOR FOR SELECT v.i, (SELECT status FROM idem_claim(v.k)) AS status, "
		  . "1 / v.d AS x FROM (SELECT * FROM (VALUES $values) r OFFSET 0) v(i, k, d)",
		{ rows => [] });
}

# Cursors that can be fetched, and those it is time to close
sub live_cursors
{
	return grep { !$cursors{$_}{failed} && $cursors{$_}{pos} < @{ $cursors{$_}{rows} } }
	  sort keys %cursors;
}

sub done_cursors
{
	return scalar(keys %cursors) - scalar(live_cursors());
}

sub op_fetch
{
	my $name = pick(live_cursors());
	my $c = $cursors{$name};
	my $n = weighted(1 => 3, 2 => 2, 3 => 1);
	my @answers;
	for (1 .. $n)
	{
		last if $c->{pos} >= @{ $c->{rows} };
		my ($k, $boom) = @{ $c->{rows}[ $c->{pos}++ ] };
		if ($boom)
		{
			$c->{failed} = 1;
			# the review's case: a claim of a new key by an earlier FETCH of
			# this cursor, below the level that now rolls back
			$seen{outer_claim_then_failed_fetch}++
			  if grep { $_->[1] < $#levels && held($_->[0]) } @{ $c->{pending} };
			return ("FETCH $n FROM $name", { error => '22012' });
		}
		my $new = effective($k)->{state} eq 'none';
		push @answers, model_claim($k);
		push @{ $c->{pending} }, [ $k, $#levels ] if $new && $answers[-1] eq 'claimed';
	}
	$seen{fetch_above_cursor}++ if $c->{level} < $#levels && @answers;
	return ("FETCH $n FROM $name", { rows => \@answers });
}

sub op_close
{
	my $name = pick(sort keys %cursors);
	delete $cursors{$name};
	return ("CLOSE $name", { rows => [] });
}

sub op_pl_block
{
	my $n = 1 + rnd(4);
	my (@keys, @acts, @blocks, @booms);
	for (1 .. $n)
	{
		push @acts,
		  weighted(claim => 6, complete => 2, fail => 1, release => 1, checkpoint => 1);
		push @keys, $acts[-1] eq 'claim' ? rand_key() : finish_key();
		push @blocks, chance(0.75) ? 1 : 0;
		push @booms, ($blocks[-1] && chance(0.4)) ? 1 : 0;
	}
	my $outer = weighted(none => 2, keep => 1, undo => 1);
	my $sql = sprintf(
		"SELECT fz_outer(\$\$SELECT fz_block(%s, %s, ARRAY[%s], ARRAY[%s])\$\$, '%s')",
		sql_array(@keys), sql_array(@acts),
		join(', ', map { $_ ? 'true' : 'false' } @blocks),
		join(', ', map { $_ ? 'true' : 'false' } @booms), $outer);

	my @answers;
	push_level('pl', 'outer') if $outer ne 'none';
	for my $i (0 .. $n - 1)
	{
		push_level('pl', 'block') if $blocks[$i];
		my ($answer, $err);
		if ($acts[$i] eq 'claim') { $answer = model_claim($keys[$i]); }
		else
		{
			$err = model_finish($keys[$i], $acts[$i]);
			$answer = 'ok';
		}
		if ($err)
		{
			return ($sql, { error => $err }) unless $blocks[$i];
			discard_top();
			push @answers, "caught $err";
			next;
		}
		push @answers, $answer;
		next unless $blocks[$i];
		if ($booms[$i])
		{
			discard_top();
			push @answers, 'caught P0001';
			$seen{pl_block_undone}++;
		}
		else { merge_top(); }
	}
	if ($outer eq 'undo') { discard_top(); push @answers, 'undone'; }
	elsif ($outer eq 'keep') { merge_top(); }
	return ($sql, { rows => [ \@answers ] });
}

sub op_pl_fetch
{
	my $n = 1 + rnd(4);
	my @keys = map { rand_key() } 1 .. $n;
	my $boom = chance(0.7) ? 1 + rnd($n) : 0;
	my @plan = map { chance(0.6) ? 'block' : 'plain' } 1 .. 1 + rnd($n + 1);
	my $outer = weighted(none => 2, keep => 1, undo => 1);
	my $sql = sprintf("SELECT fz_outer(\$\$SELECT fz_fetch(%s, %d, %s)\$\$, '%s')",
		sql_array(@keys), $boom, sql_array(@plan), $outer);

	my @answers;
	my $pos = 0;
	push_level('pl', 'outer') if $outer ne 'none';
	for my $how (@plan)
	{
		if ($pos >= $n) { push @answers, 'end'; next; }
		$pos++;
		push_level('pl', 'block') if $how eq 'block';
		if ($pos == $boom)
		{
			return ($sql, { error => '22012' }) if $how ne 'block';
			$seen{pl_fetch_caught}++ if $pos > 1;
			discard_top();
			push @answers, 'caught 22012';
			last;
		}
		push @answers, model_claim($keys[ $pos - 1 ]);
		merge_top() if $how eq 'block';
	}
	if ($outer eq 'undo') { discard_top(); push @answers, 'undone'; }
	elsif ($outer eq 'keep') { merge_top(); }
	return ($sql, { rows => [ \@answers ] });
}

# ---------------------------------------------------------------------
# Checking

# A value as text: NULL, or an array as {a,b}
sub show
{
	my ($v) = @_;
	return 'NULL' unless defined $v;
	return ref $v ? '{' . join(',', map { show($_) } @$v) . '}' : $v;
}

# What the model wants a statement to answer, as text
sub wanted
{
	my ($want) = @_;
	return "error $want->{error}" if $want->{error};
	return '(' . join(', ', map { show($_) } @{ $want->{rows} }) . ')';
}

# What a statement answered, as text: the values of its rows (of FETCH,
# the status column), or its error
sub answered
{
	my ($sql, $got) = @_;
	return "error $got->{error}" if $got->{error};
	my @values =
	  $sql =~ /^FETCH/
	  ? map { $_->[1] } @{ $got->{rows} }
	  : map { @$_ } @{ $got->{rows} };
	return '(' . join(', ', map { show($_) } @values) . ')';
}

sub log_line
{
	my ($log, $line) = @_;
	push @$log, $line;
	# A's statements say more than B's probes
	shift @$log while @$log > ($log == \@log_a ? 25 : 12);
	note($line) if $trace;
	return;
}

my $failure;

sub fail_run
{
	my ($what) = @_;
	my @report = (
		"seed $seed, statement $step (transaction $xact_no): $what",
		"replay: IDEM_FUZZ_SEED=$seed IDEM_FUZZ_STEPS=$step (IDEM_FUZZ_TRACE=1 logs every statement)",
		'model: committed '
		  . join(' ', map { "$_=" . ($committed{ key_name($_) } // 'none') } 0 .. $nkeys - 1),
		'model: levels '
		  . join(' | ',
			map {
				my $l = $_;
				"$l->{kind} $l->{name}: "
				  . join(' ', map { "$_=$l->{changes}{$_}{state}" } sort keys %{ $l->{changes} })
			} @levels),
		'last statements of session A:',
		map({ "  $_" } @log_a),
		'last statements of session B:',
		map({ "  $_" } @log_b));
	$failure = join("\n", @report);
	return;
}

# Compare what A got with what the model expects
sub check_a
{
	my ($sql, $want, $got) = @_;
	my ($w, $g) = (wanted($want), answered($sql, $got));
	my $message = $got->{message} ? " ($got->{message})" : '';
	log_line(\@log_a, "$step: $sql -> $g$message");
	if ($got->{lost})
	{
		fail_run("session A lost its connection (did the server crash?)$message");
		return 0;
	}
	return 1 if $g eq $w;
	fail_run("session A: expected $w, got $g$message");
	return 0;
}

# B probes every key, in a transaction it rolls back
sub probe_b
{
	my ($dbh) = @_;
	my @keys = map { key_name($_) } 0 .. $nkeys - 1;
	my $sql = 'SELECT c.status FROM unnest(' . sql_array(@keys)
	  . ') WITH ORDINALITY u(k, n), idem_claim(u.k, nowait => true) c ORDER BY u.n';
	my $got = run_sql($dbh, 'BEGIN');
	$got = run_sql($dbh, $sql) unless $got->{error};
	my $end = run_sql($dbh, 'ROLLBACK');
	$got = $end if $end->{error} && !$got->{error};
	if ($got->{error})
	{
		log_line(\@log_b, "$step: probe -> error $got->{error} ($got->{message})");
		fail_run('session B: '
			  . ($got->{lost} ? 'lost its connection (did the server crash?)' : "error $got->{error}")
			  . " ($got->{message})");
		return 0;
	}
	my @answers = map { $_->[0] } @{ $got->{rows} };
	log_line(\@log_b,
		"$step: probe -> " . join(' ', map { "k$_=" . show($answers[$_]) } 0 .. $#answers));
	for my $i (0 .. $nkeys - 1)
	{
		my $k = $keys[$i];
		my $want;
		if (held($k))
		{
			$want = 'in_progress';
		}
		else
		{
			my $s = $committed{$k} // 'none';
			$want = ($s eq 'none' || $s eq 'released') ? 'claimed'
			  : $s eq 'processing' ? 'in_progress' : $s;
		}
		if (($answers[$i] // 'NULL') ne $want)
		{
			fail_run("session B: key $k answered "
				  . ($answers[$i] // 'NULL')
				  . ", expected $want ("
				  . (held($k) ? "A's open transaction holds it" : 'A holds nothing for it')
				  . ', committed '
				  . ($committed{$k} // 'none') . ')');
			return 0;
		}
		$seen{b_held}++ if held($k) && !$committed{$k};
		if ($seen{freed}{$k} && !held($k))
		{
			$seen{b_freed}++ if $want eq 'claimed';
			delete $seen{freed}{$k};
		}
	}
	return 1;
}

# The committed table against the model
sub check_table
{
	my ($dbh) = @_;
	my $got = run_sql($dbh,
		"SELECT key, state FROM idem.keys WHERE key LIKE 'f$seed-%' ORDER BY key");
	if ($got->{error})
	{
		fail_run("reading idem.keys: error $got->{error} ($got->{message})");
		return 0;
	}
	my $g = join(' ', map { "$_->[0]=$_->[1]" } @{ $got->{rows} });
	my $w = join(' ', map { "$_=$committed{$_}" } sort keys %committed);
	return 1 if $g eq $w;
	fail_run("committed table: expected [$w], got [$g]");
	return 0;
}

# ---------------------------------------------------------------------
# One run: $steps statements of A from one seed

my ($sa, $sb) = (session(), session());

# Run a statement of A and probe with B; false when the run must stop
sub step_a
{
	my ($sql, $want) = @_;
	$step++;
	my $got = run_sql($sa, $sql);
	return 0 unless check_a($sql, $want, $got);
	if ($want->{error})
	{
		# the error undid the savepoint's work (or the transaction's) at
		# once; the statement that follows it only ends the savepoint
		my $recover = model_error();
		return 0 unless probe_b($sb);
		$step++;
		$got = run_sql($sa, $recover);
		return 0 unless check_a($recover, { rows => [] }, $got);
	}
	return probe_b($sb);
}

sub run_seed
{
	($seed) = @_;
	rng_seed($seed);
	%committed = %committed_at = %cursors = %seen = ();
	@levels = @log_a = @log_b = ();
	$in_xact = 0;
	$step = $xact_no = $cursor_no = $savepoint_no = 0;
	$seen{freed} = {};

	while ($step < $steps_per_seed)
	{
		# between transactions: forget some committed keys, and every claim
		# whose lease could run out before the next check
		my @forget = grep {
			my $k = $_;
			exists $committed{$k}
			  && (chance(0.3)
				|| ($committed{$k} eq 'processing'
					&& $xact_no - $committed_at{$k} >= $forget_after))
		} map { key_name($_) } 0 .. $nkeys - 1;
		if (@forget)
		{
			delete @committed{@forget};
			$step++;
			my $sql = 'DELETE FROM idem.keys WHERE key = ANY (' . sql_array(@forget) . ')';
			return 0 unless check_a($sql, { rows => [] }, run_sql($sa, $sql));
			return 0 unless check_table($sb);
		}

		$xact_no++;
		@levels = ({ kind => 'xact', name => 'top', changes => {} });
		$in_xact = 1;
		return 0 unless step_a('BEGIN', { rows => [] });
		while ($in_xact)
		{
			my $depth = sql_depth();
			my $op = weighted(
				claim => 8,
				complete => 3,
				fail => 1,
				release => 2,
				checkpoint => 1,
				lookup => 2,
				savepoint => ($depth < $max_depth ? 12 : 0),
				release_sp => ($depth > 0 ? 3 : 0),
				rollback_to => ($depth > 0 ? 6 : 0),
				declare => (scalar(keys %cursors) < $max_cursors ? 10 : 0),
				fetch => (live_cursors() ? 24 : 0),
				close => (%cursors ? 1 + 4 * done_cursors() : 0),
				pl_block => 5,
				pl_fetch => 6,
				commit => ($step < $steps_per_seed ? 3 : 1000),
				rollback => 1);
			my ($sql, $want);
			if ($op eq 'commit' || $op eq 'rollback')
			{
				model_end($op eq 'commit');
				($sql, $want) = (uc $op, { rows => [] });
			}
			elsif ($op eq 'claim') { ($sql, $want) = op_claim(); }
			elsif ($op eq 'lookup') { ($sql, $want) = op_lookup(); }
			elsif ($op =~ /^(complete|fail|release|checkpoint)$/)
			{
				($sql, $want) = op_finish($op);
			}
			elsif ($op eq 'savepoint') { ($sql, $want) = op_savepoint(); }
			elsif ($op eq 'release_sp') { ($sql, $want) = op_release(); }
			elsif ($op eq 'rollback_to') { ($sql, $want) = op_rollback_to(); }
			elsif ($op eq 'declare') { ($sql, $want) = op_declare(); }
			elsif ($op eq 'fetch') { ($sql, $want) = op_fetch(); }
			elsif ($op eq 'close') { ($sql, $want) = op_close(); }
			elsif ($op eq 'pl_block') { ($sql, $want) = op_pl_block(); }
			else { ($sql, $want) = op_pl_fetch(); }
			return 0 unless step_a($sql, $want);
		}
		return 0 unless check_table($sb);
	}
	return 1;
}

# ---------------------------------------------------------------------
my $started = time;
my %total;
my $seeds = 0;
for (my $s = $first_seed;; $s++)
{
	my $ok = run_seed($s);
	$seeds++;
	ok($ok, "seed $s: $step statements in $xact_no transactions agree with the model")
	  or diag($failure);
	for my $what (qw(b_held b_freed rollback_to fetch_above_cursor
		outer_claim_then_failed_fetch pl_block_undone pl_fetch_caught))
	{
		$total{$what} += $seen{$what} // 0;
	}
	last if !$ok || time - $started >= $seconds;
}
note("$seeds seed(s) in " . (time - $started) . ' s: '
	  . join(', ', map { "$_ $total{$_}" } sort keys %total));

# The sequences reached the cases the protocol is about (if a change of
# the weights lost one, these say so)
SKIP:
{
	skip 'the sequence stopped at a difference', 6 if $failure;
	cmp_ok($total{b_held}, '>', 0, "B was told in_progress for A's uncommitted claims");
	cmp_ok($total{b_freed}, '>', 0,
		'B got keys whose claims A rolled back with their savepoint');
	cmp_ok($total{fetch_above_cursor}, '>', 0,
		'cursors fetched in a savepoint opened after them');
	cmp_ok($total{outer_claim_then_failed_fetch}, '>', 0,
		"a FETCH failed in a savepoint after the same cursor's claim outside it");
	cmp_ok($total{pl_block_undone}, '>', 0, 'PL/pgSQL exception blocks undid claims');
	cmp_ok($total{pl_fetch_caught}, '>', 0,
		'PL/pgSQL exception blocks caught a failed FETCH after a claim');
}

# No assertion failed in the server (a crash would also have cut a session)
$sa->disconnect;
$sb->disconnect;
my @crashes =
  grep { /TRAP:|was terminated by signal/ } split /\n/, slurp_file($node->logfile);
is(join("\n", @crashes), '', 'no backend crashed');

$node->stop;
done_testing();
