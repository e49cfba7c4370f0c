#!/usr/bin/env bash
# Run idem's C code under valgrind memcheck, once, by hand (not part of
# `make test`: it takes about three minutes on two cores).
#
#   bash test/valgrind/run.sh
#
# It builds idem, starts a private server whose processes all run under
# valgrind, runs against it the regression tests (test/regress/sql/), the
# isolation specs (test/isolation/specs/, for the paths that wait for
# another transaction) and the hostile-input sweep (test/hostile/, without
# its multi-megabyte cases), stops it, and reads valgrind's logs.  Every error valgrind reports is
# counted; those with a frame in idem's code are printed.  The exit status
# is 1 when there is any error in idem's code, when a server process
# crashed, or when the sweep could not run.  The outputs of the regression
# tests and specs are not the point (timing differs under valgrind), but
# their summaries are printed.
#
# Suppressions: test/valgrind/postgres.supp (errors of the server's own
# code that are known to be harmless, such as padding bytes written to WAL);
# if a PostgreSQL source tree is given as PG_SOURCE, its
# src/tools/valgrind.supp is used as well.
#
# What it cannot see: a server built without USE_VALGRIND (as distributions
# build it) does not tell valgrind about palloc chunks, so a read past the
# end of a chunk inside a memory context block, a read of pfree'd memory,
# and uninitialised bytes of a chunk that reuses memory written before go
# unnoticed.  Uninitialised bytes of fresh memory and of the stack that
# reach a branch, a system call or the disk, bad frees, overlapping copies
# and reads outside malloc'd blocks are seen.  For the rest, build
# PostgreSQL with -DUSE_VALGRIND and point PG_CONFIG at it.
#
# Settings: IDEM_VALGRIND_PORT (default 55499; the socket is in a private
# directory), IDEM_VALGRIND_NO_SUPP=1 (no suppressions), PG_SOURCE,
# VALGRIND_OPTS_EXTRA (more valgrind options).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
. test/lib.sh

if ! command -v valgrind >/dev/null; then
	echo "valgrind is not installed (apt-get install valgrind)" >&2
	exit 1
fi
idem_private_install || exit 1
PGXS_SRC=$(dirname "$("$PG_CONFIG" --pgxs)")/..
port=${IDEM_VALGRIND_PORT:-55499}
out=$IDEM_BUILD/valgrind
data=$out/data

# Stop the server started below, whatever happens.
stop_server() {
	if [ -f "$data/postmaster.pid" ]; then
		as_server_user "$IDEM_BINDIR/pg_ctl" -D "$data" -m fast -t 600 stop >/dev/null 2>&1 ||
			as_server_user "$IDEM_BINDIR/pg_ctl" -D "$data" -m immediate stop >/dev/null 2>&1
	fi
}
trap stop_server EXIT

stop_server
rm -rf "$out"
mkdir -p "$out"
chown -R postgres: "$IDEM_BUILD" 2>/dev/null || true
as_server_user "$IDEM_BINDIR/initdb" -D "$data" --encoding=UTF8 --no-locale -A trust >"$out/initdb.log" 2>&1 || {
	cat "$out/initdb.log"
	exit 1
}

supp=(--suppressions="$PWD/test/valgrind/postgres.supp")
if [ -n "${PG_SOURCE:-}" ] && [ -f "$PG_SOURCE/src/tools/valgrind.supp" ]; then
	supp+=(--suppressions="$PG_SOURCE/src/tools/valgrind.supp")
fi
# IDEM_VALGRIND_NO_SUPP=1: no suppressions, to check that none of the errors
# they hide comes from idem (an error's block includes where the bad bytes
# were created, so a write of bytes idem left uninitialised counts as idem's)
if [ -n "${IDEM_VALGRIND_NO_SUPP:-}" ]; then
	supp=()
fi

echo "starting the server under valgrind (slow) ..."
# shellcheck disable=SC2086
as_server_user valgrind --quiet --trace-children=yes --track-origins=yes \
	--read-var-info=no --num-callers=40 --leak-check=no \
	--error-markers=VALGRINDERROR-BEGIN,VALGRINDERROR-END \
	--gen-suppressions=all "${supp[@]}" ${VALGRIND_OPTS_EXTRA:-} \
	--log-file="$out/valgrind.%p.log" \
	"$IDEM_BINDIR/postgres" -D "$data" -p "$port" -k "$out" \
	-c listen_addresses= -c shared_preload_libraries=idem \
	-c idem.purge_interval=0 -c max_connections=20 -c max_prepared_transactions=10 \
	-c fsync=off -c statement_timeout=0 >"$out/postmaster.log" 2>&1 &

for _ in $(seq 1 300); do
	as_server_user "$IDEM_BINDIR/pg_isready" -h "$out" -p "$port" -q && break
	sleep 1
done
if ! as_server_user "$IDEM_BINDIR/pg_isready" -h "$out" -p "$port" -q; then
	echo "the server did not start under valgrind; see $out/postmaster.log" >&2
	exit 1
fi

psql_v() {
	as_server_user "$IDEM_BINDIR/psql" -X -q -h "$out" -p "$port" -U postgres -v ON_ERROR_STOP=1 "$@"
}
failed_runs=()

psql_v -d postgres -c 'CREATE DATABASE contrib_regression' -c 'CREATE DATABASE isolation_regression' || exit 1

echo "regression tests ..."
mapfile -t regress < <(for f in test/regress/sql/*.sql; do basename "$f" .sql; done)
as_server_user "$PGXS_SRC/test/regress/pg_regress" --use-existing --host="$out" --port="$port" \
	--bindir="$IDEM_BINDIR" --inputdir=test/regress --outputdir="$out/regress" \
	--dbname=contrib_regression "${regress[@]}" >"$out/regress.log" 2>&1

echo "isolation specs ..."
mapfile -t specs < <(for f in test/isolation/specs/*.spec; do basename "$f" .spec; done)
as_server_user "$PGXS_SRC/test/isolation/pg_isolation_regress" --use-existing --host="$out" --port="$port" \
	--bindir="$IDEM_BINDIR" --inputdir=test/isolation --outputdir="$out/isolation" \
	--dbname=isolation_regression "${specs[@]}" >"$out/isolation.log" 2>&1

echo "hostile-input sweep ..."
perl test/hostile/generate.pl --quick >"$out/hostile_cases.sql" 2>/dev/null
chown postgres: "$out/hostile_cases.sql"
{
	psql_v -d postgres -c 'CREATE DATABASE hostile' &&
	psql_v -d hostile -c 'CREATE EXTENSION idem' -f test/hostile/driver.sql -f "$out/hostile_cases.sql" &&
	psql_v -d hostile -c 'SELECT hostile.add_null_cases((SELECT max(id) + 1 FROM hostile.cases))' >/dev/null &&
	psql_v -d hostile -c 'CALL hostile.run(1, 1000000)' &&
	psql_v -d hostile -At -c "SELECT count(*) || ' cases, ' || count(*) FILTER (WHERE outcome LIKE 'XX%' OR outcome LIKE '58%') || ' internal errors' FROM hostile.results"
} >"$out/hostile.log" 2>&1 || failed_runs+=(hostile)

echo "stopping the server ..."
stop_server
trap - EXIT
if grep -Eq 'terminated by signal|PANIC' "$out/postmaster.log"; then
	failed_runs+=(server)
fi

# Read the logs: one block per error, between the markers.
total=0
# a frame in idem: its library, or one of its source files
idem_files=$(cd src && ls *.c | sed 's/\.c$//' | paste -sd'|')
idem_frame="idem\\.so|\\(($idem_files)\\.c:[0-9]+\\)"
: >"$out/idem_errors.txt"
for log in "$out"/valgrind.*.log; do
	n=$(grep -c 'VALGRINDERROR-BEGIN' "$log")
	total=$((total + n))
	[ "$n" = 0 ] && continue
	awk -v file="$log" -v frame="$idem_frame" '
		/VALGRINDERROR-BEGIN/ { block = ""; inblock = 1; next }
		/VALGRINDERROR-END/ {
			inblock = 0
			if (block ~ frame) { print "== " file; print block }
			next
		}
		inblock { block = block $0 "\n" }' "$log" >>"$out/idem_errors.txt"
done
idem_errors=$(grep -c '^== ' "$out/idem_errors.txt")

# Under valgrind everything is 20 to 50 times slower: a test whose output
# depends on timing (a 1 ms ttl that must not have run out yet) may differ.
# Only valgrind's findings, a crash and a broken sweep count here.
echo ""
summary() {
	grep -E 'tests? (passed|failed)' "$1" | sed -E 's/=+//g; s/^ +| +$//g' | head -n 1
}
echo "regression: $(summary "$out/regress.log")"
echo "isolation:  $(summary "$out/isolation.log")"
echo "hostile:    $(tail -n 1 "$out/hostile.log")"
echo "valgrind:   $total error(s) in all processes, $idem_errors in idem's code ($(ls "$out"/valgrind.*.log | wc -l) process logs in $out)"
if [ "$idem_errors" -gt 0 ]; then
	echo ""
	cat "$out/idem_errors.txt"
fi
if [ ${#failed_runs[@]} -gt 0 ]; then
	echo "did not run cleanly: ${failed_runs[*]} (see $out/*.log)"
fi
[ "$idem_errors" = 0 ] && [ ${#failed_runs[@]} = 0 ]
