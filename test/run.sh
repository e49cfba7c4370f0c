#!/usr/bin/env bash
# make test: install what is missing, build idem with its assertions on
# (warnings are errors when CI is set) into a private copy of the server
# tree, then run every test through `make installcheck` against that tree,
# one step at a time:
#   pg_regress           test/regress/sql/*.sql       against test/regress/expected/
#   pg_isolation_regress test/isolation/specs/*.spec  against test/isolation/expected/
#   prove                test/tap/core/*.pl, then recovery/ and components/
#                        (PostgreSQL::Test::Cluster), one `make installcheck`
#                        per file
# Each step has a time limit, so a file that hangs is one failure and the
# others still run.
# Counting: one per regression test, one per isolation spec, one per TAP file
# (a file passes when all its assertions do; one that skips all, because
# this server lacks what it tests, is skipped), and the build counts as one
# failure when it breaks.  The last line is "N passed, M failed, K skipped";
# the exit status is non-zero when M > 0 or when nothing ran.  Outputs go to
# tmp_check/.  PG=17 (18, 19, 15-asan, 17-cassert) runs it all on that
# server instead, through test/matrix.sh.
#
# On a -sql flavour (PG=15-sql, 18-sql: IDEM_FLAVOUR) the SQL edition is
# tested instead: idem_sql/ installed into the private tree (no C library,
# no preload: test/idem_sql.conf), the regression tests and specs copied
# to tmp_check/sql_edition/ with CREATE/DROP EXTENSION idem made idem_sql
# (pgcrypto is created first), where test/{regress,isolation}/expected_sql/
# NAME.out, a documented difference, replaces NAME's expected files; the
# tests listed in idem_sql/test/not_applicable ("folder/name: reason")
# count as skipped, with their reason; the TAP files are test/tap/sql/*.pl
# only.  The CONTEXT lines that name a PL/pgSQL or SQL function (where in
# the edition an error was raised: the C edition has none) are left out of
# the comparison.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# make test PG=17 (or 18, 19, 15-asan, 17-cassert, 15-sql, 18-sql): the
# same suite on that server, which test/matrix.sh makes and runs it on
if [ -n "${PG:-}" ] && [ -z "${IDEM_FLAVOUR:-}" ]; then
	exec bash test/matrix.sh "$PG"
fi

if [ -z "${IDEM_STAGED:-}" ]; then
	bash test/deps.sh test || exit 1
fi
. test/lib.sh
idem_run_readable_copy test/run.sh "$@"

# The same messages and encoding wherever this runs, so outputs compare.
if locale -a 2>/dev/null | grep -qix 'C\.utf-\?8'; then
	export LC_ALL=C.UTF-8
else
	export LC_ALL=C
fi
unset LANGUAGE PGHOST PGPORT PGDATABASE PGUSER PGSERVICE PGOPTIONS

# The whole run must stay well inside a CI job's limit; every step gets at
# most what is left of this budget.
budget=${IDEM_TEST_BUDGET:-1320}
deadline=$(( $(date +%s) + budget ))
# Seconds a step may take: at most $1, and no more than the budget leaves.
step_limit() {
	local left=$(( deadline - $(date +%s) ))
	[ "$left" -lt "$1" ] && echo $(( left > 10 ? left : 10 )) || echo "$1"
}

passed=0
failed=0
skipped=0
failures=()

# Print the closing line and leave with the right status.
finish() {
	if [ ${#failures[@]} -gt 0 ]; then
		echo ""
		echo "failed: ${failures[*]}"
	fi
	if [ $((passed + failed)) = 0 ]; then
		echo "nothing ran: add test/regress/sql/*.sql, test/isolation/specs/*.spec or test/tap/*/*.pl"
	fi
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" = 0 ] && [ $((passed + failed)) -gt 0 ]
	exit $?
}

# Stop a server left behind in data directory $1 (a step that timed out).
stop_leftover() {
	if [ -f "$1/postmaster.pid" ]; then
		as_server_user "$IDEM_BINDIR/pg_ctl" -D "$1" stop -m immediate >/dev/null 2>&1
	fi
}

# Count the results pg_regress or pg_isolation_regress printed in log $1 for
# suite $2, given the names that were asked for in the remaining arguments:
# a test without a result line failed (the driver stopped before it).
count_results() {
	local log=$1 suite=$2 name result
	shift 2
	declare -A seen=()
	while read -r name result; do
		seen[$name]=$result
	done < <(sed -nE \
		-e 's/^[[:space:]]*test[[:space:]]+([^[:space:]]+)[[:space:]]+\.\.\.[[:space:]]+(ok|FAILED|failed \(ignored\)).*/\1 \2/p' \
		-e 's/^[[:space:]]*ok[[:space:]]+[0-9]+[[:space:]]+[-+][[:space:]]+([^[:space:]]+).*/\1 ok/p' \
		-e 's/^[[:space:]]*not ok[[:space:]]+[0-9]+[[:space:]]+[-+][[:space:]]+([^[:space:]]+).*/\1 FAILED/p' \
		"$log")
	for name in "$@"; do
		case "${seen[$name]:-}" in
			ok|failed*) passed=$((passed + 1)) ;;
			*) failed=$((failed + 1)); failures+=("$suite/$name") ;;
		esac
	done
}

# `make installcheck` as the server's user, stopped after $1 seconds, with
# the make variables that follow; only the kind of test they name runs (the
# Makefile lists every test; the caller names the ones to run), and the
# servers come from the private tree.  The status is make's, or 124 when the
# time limit stopped it.
installcheck() {
	local limit=$1
	shift
	as_server_user timeout -k 20 "$limit" \
		make -s --no-print-directory -C "$IDEM_ROOT" installcheck \
		PG_CONFIG="$PG_CONFIG" bindir="$IDEM_BINDIR" IDEM_BUILD="$IDEM_BUILD" \
		REGRESS= ISOLATION= TAP_TESTS= "${edition_vars[@]}" "$@"
}

# Run one pg_regress-style suite through make installcheck: $1 its label
# (where the Makefile writes it: $IDEM_BUILD/$1), $2 its make variable
# (REGRESS or ISOLATION), then the test names.
run_suite() {
	local label=$1 var=$2 out=$IDEM_BUILD/$1 rc t0=$SECONDS
	shift 2
	echo ""
	echo "== $label: $# test(s) =="
	rm -rf "$out" "$out-instance"
	as_server_user mkdir -p "$out"
	installcheck "$(step_limit 900)" "$var=$*" 2>&1 | tee "$out.log"
	rc=${PIPESTATUS[0]}
	echo "($label took $((SECONDS - t0)) s)"
	[ "$rc" = 124 ] && echo "$label: stopped after its time limit"
	stop_leftover "$out-instance/data"
	count_results "$out.log" "$label" "$@"
	if [ -s "$out/regression.diffs" ]; then
		echo ""
		echo "-- $label: first lines of $out/regression.diffs --"
		[ "$edition" = sql ] && echo "(expected: test/$label/expected_sql/NAME.out where there is one, else expected/NAME.out, with idem made idem_sql)"
		head -n "${IDEM_DIFF_LINES:-150}" "$out/regression.diffs"
	elif [ "$rc" != 0 ] && [ -f "$out-instance/log/postmaster.log" ]; then
		echo "-- $label: end of the server log --"
		tail -n 30 "$out-instance/log/postmaster.log"
	fi
}

# Run each TAP file on its own (make installcheck with PROVE_TESTS naming
# it), so that one that dies or hangs is one failure and the others still
# run.
run_tap() {
	local out=$IDEM_BUILD/tap t name rc log srclog t0 took
	echo ""
	echo "== tap: $# file(s) =="
	rm -rf "$out"
	as_server_user mkdir -p "$out"
	for t in "$@"; do
		name=$(basename "$t" .pl)
		log=$out/$name.prove.log
		t0=$SECONDS
		installcheck "$(step_limit 600)" TAP_TESTS=1 PROVE_TESTS="$t" PROVE_FLAGS=-v >"$log" 2>&1
		rc=$?
		took="$((SECONDS - t0)) s"
		if [ "$rc" = 0 ] && grep -q '^Result: NOTESTS' "$log"; then
			# plan skip_all: what this server lacks, never a pass
			skipped=$((skipped + 1))
			echo "$t ... $(grep -o 'skipped: .*' "$log" | head -n 1) ($took)"
		elif [ "$rc" = 0 ]; then
			passed=$((passed + 1))
			echo "$t ... ok ($(grep -c '^ok ' "$log") assertions, $took)"
		else
			failed=$((failed + 1))
			failures+=("$t")
			[ "$rc" = 124 ] && echo "$t ... stopped after its time limit ($took)" || echo "$t ... FAILED ($took)"
			echo "-- prove output ($log) --"
			grep -v '^ok ' "$log" | tail -n "${IDEM_DIFF_LINES:-150}"
			srclog=$out/tmp_check/log/regress_log_$name
			if [ -f "$srclog" ]; then
				echo "-- end of $srclog --"
				tail -n 60 "$srclog"
			fi
		fi
		# A test killed on its time limit leaves its servers running.
		for d in "$out"/tmp_check/t_"${name}"_*_data/pgdata; do
			[ -d "$d" ] && stop_leftover "$d"
		done
	done
}

# The edition under test: the SQL edition on a -sql flavour, else the C one;
# the make variables of the SQL edition's runs (the Makefile says which)
edition=c
edition_vars=()
case "${IDEM_FLAVOUR:-}" in *-sql) edition=sql ;; esac

# The SQL edition's copies of the regression tests or specs of folder $1
# (test/regress or test/isolation), whose inputs are in $1/$2, into
# $sql_tests/<folder>: CREATE and DROP EXTENSION idem (and extname =
# 'idem') made idem_sql in the inputs and the expected files, and
# $1/expected_sql/NAME.out (and NAME_N.out, pg_regress's alternatives) in
# place of all of NAME's expected files.
sql_tests=$IDEM_BUILD/sql_edition
map_extension() {
	sed -E -e 's/((CREATE|DROP)[[:space:]]+EXTENSION[[:space:]]+(IF[[:space:]]+(NOT[[:space:]]+)?EXISTS[[:space:]]+)?)idem\b/\1idem_sql/gI' \
		-e "s/(extname[[:space:]]*=[[:space:]]*)'idem'/\\1'idem_sql'/g"
}
sql_copy_suite() {
	local src=$1 inputs=$2 dest f name
	dest=$sql_tests/$(basename "$1")
	rm -rf "$dest"
	mkdir -p "$dest/$inputs" "$dest/expected"
	for f in "$src/$inputs"/* "$src"/expected/*.out; do
		[ -f "$f" ] || continue
		case "$f" in
			*/expected/*) map_extension <"$f" >"$dest/expected/$(basename "$f")" ;;
			*) map_extension <"$f" >"$dest/$inputs/$(basename "$f")" ;;
		esac
	done
	for f in "$src"/expected_sql/*.out; do
		[ -f "$f" ] || continue
		name=$(basename "$f" .out)
		rm -f "$dest/expected/${name%_[0-9]}.out" "$dest/expected/${name%_[0-9]}"_[0-9].out
	done
	for f in "$src"/expected_sql/*.out; do
		[ -f "$f" ] && map_extension <"$f" >"$dest/expected/$(basename "$f")"
	done
}

# The tests the SQL edition cannot run at all, from
# idem_sql/test/not_applicable: not_applicable[folder/name]=reason
declare -A not_applicable=()
read_not_applicable() {
	local line
	[ -f idem_sql/test/not_applicable ] || return 0
	while IFS= read -r line; do
		case "$line" in ''|'#'*) continue ;; esac
		not_applicable[${line%%:*}]=$(echo "${line#*:}" | sed -E 's/^[[:space:]]+//')
	done <idem_sql/test/not_applicable
}

# Leave out of array $2 (names of folder $1) those of not_applicable, each
# counted as skipped with its reason
skip_not_applicable() {
	local folder=$1 name kept=()
	local -n names=$2
	for name in "${names[@]}"; do
		if [ -n "${not_applicable[$folder/$name]+set}" ]; then
			skipped=$((skipped + 1))
			echo "$folder/$name ... skipped: ${not_applicable[$folder/$name]}"
		else
			kept+=("$name")
		fi
	done
	names=("${kept[@]}")
}

# Build and install into the private tree; a broken build is one failure.
# The tests run idem with its own assertions on (USE_ASSERT_CHECKING): the
# pending-claim protocol of src/claim_memory.c is checked at every call.
# The SQL edition's build is its scripts only.
if [ "$edition" = sql ]; then
	echo "== build (the SQL edition) =="
	if ! idem_private_install sql; then
		failed=$((failed + 1))
		failures+=("build")
		finish
	fi
	echo "idem_sql installed privately in $IDEM_PRIVATE, without idem's library"
	read_not_applicable
	sql_copy_suite test/regress sql
	sql_copy_suite test/isolation specs
	for f in test/regress/expected_sql/*.out test/isolation/expected_sql/*.out; do
		[ -f "$f" ] && echo "a documented difference: $f"
	done
	# diff as pg_regress runs it, but blind to the CONTEXT lines that name
	# a PL/pgSQL or SQL function (and the lines of such a context after
	# its first, among them the statement that called a function)
	mkdir -p "$sql_tests/bin"
	cat >"$sql_tests/bin/diff" <<-EOS
		#!/bin/sh
		exec $(command -v diff) -I '^CONTEXT:  PL/pgSQL function ' -I '^PL/pgSQL function ' \
			-I '^CONTEXT:  SQL function "' -I '^SQL function "' -I '^SQL statement "' \
			-I '^PL/pgSQL assignment "' "\$@"
	EOS
	chmod +x "$sql_tests/bin/diff"
	[ "$(id -u)" = 0 ] && chown -R postgres: "$sql_tests"
	export PATH="$sql_tests/bin:$PATH"
	edition_vars=(IDEM_REGRESS_DIR="$sql_tests/regress" IDEM_ISOLATION_DIR="$sql_tests/isolation"
		IDEM_TEST_CONF=./test/idem_sql.conf IDEM_REGRESS_EXTRA=--load-extension=pgcrypto)
else
	export IDEM_ASSERT=1
	echo "== build =="
	if [ -n "${CI:-}" ]; then
		# From scratch, so that every file is compiled with -Werror: the
		# objects only, for PGXS's clean of the tests' outputs would take
		# tmp_check, where test/matrix.sh keeps its logs while this runs
		make -s clean PG_CONFIG="$PG_CONFIG" REGRESS= ISOLATION= TAP_TESTS= \
			EXTRA_CLEAN=src/.flavour >/dev/null 2>&1
	fi
	if ! idem_private_install; then
		failed=$((failed + 1))
		failures+=("build")
		finish
	fi
	echo "built with assertions; installed privately in $IDEM_PRIVATE"
fi

# T: the tests to run, as shell patterns separated by spaces or commas,
# each matched against a test's name (a regression test's or a spec's, a
# TAP file's with or without its number: 101_crash or crash), alone or
# after its folder (regress/, isolation/, core/, recovery/, components/:
# T='recovery/*' runs that group); unset, all.  T=claim runs
# test/regress/sql/claim.sql alone; T='claim*' its family too.
picked() {
	local dir=$1 name=$2 short=${2#[0-9][0-9][0-9]_} p pats
	[ -z "${T:-}" ] && return 0
	IFS=', ' read -ra pats <<<"$T"
	for p in "${pats[@]}"; do
		# shellcheck disable=SC2053
		[[ $name == $p || $short == $p || $dir/$name == $p || $dir/$short == $p ]] && return 0
	done
	return 1
}
mapfile -t regress < <(for f in test/regress/sql/*.sql; do [ -f "$f" ] && picked regress "$(basename "$f" .sql)" && basename "$f" .sql; done | sort)
mapfile -t specs < <(for f in test/isolation/specs/*.spec; do [ -f "$f" ] && picked isolation "$(basename "$f" .spec)" && basename "$f" .spec; done | sort)
# the TAP files group by group, those that need only a server first; the
# SQL edition's only on a -sql flavour; IDEM_TAP_GROUPS, the groups to run
# (test/matrix.sh leaves core and recovery to the assert build of a major)
tap_groups=${IDEM_TAP_GROUPS:-core recovery components}
[ "$edition" = sql ] && tap_groups=sql
[ -n "${IDEM_TAP_GROUPS:-}" ] && [ "$edition" != sql ] &&
	echo "TAP groups: $tap_groups only (the others run on this major's assert build)"
mapfile -t taps < <(for g in $tap_groups; do
	for f in test/tap/"$g"/*.pl; do [ -f "$f" ] && picked "$g" "$(basename "$f" .pl)" && echo "$f"; done
done)
if [ -n "${T:-}" ] && [ $(( ${#regress[@]} + ${#specs[@]} + ${#taps[@]} )) = 0 ]; then
	echo "T=$T names no test: see test/regress/sql/, test/isolation/specs/ and test/tap/*/"
fi

if [ "$edition" = sql ]; then
	echo ""
	skip_not_applicable regress regress
	skip_not_applicable isolation specs
	for name in "${!not_applicable[@]}"; do
		case "$name" in
			regress/*) f=test/regress/sql/${name#*/}.sql ;;
			isolation/*) f=test/isolation/specs/${name#*/}.spec ;;
			*) f="" ;;
		esac
		if [ ! -f "$f" ]; then
			echo "idem_sql/test/not_applicable names $name, which is no regression test or spec"
			failed=$((failed + 1))
			failures+=("not_applicable:$name")
		fi
	done
fi
if [ ${#regress[@]} -gt 0 ]; then
	run_suite regress REGRESS "${regress[@]}"
fi
if [ ${#specs[@]} -gt 0 ]; then
	run_suite isolation ISOLATION "${specs[@]}"
fi
if [ ${#taps[@]} -gt 0 ]; then
	run_tap "${taps[@]}"
fi

echo ""
finish
