#!/usr/bin/env bash
# make test-matrix (and make test PG=...): the whole suite of test/run.sh on
# each server of test/servers.sh, one after the other:
#
#   test/matrix.sh                 every flavour: 15 17 18 19 15-asan 17-cassert
#                                  15-sql 18-sql
#   test/matrix.sh 17 15-asan      those only
#
# 15-asan, PostgreSQL 15 built with assertions, ASan and UBSan, is also the
# assert build of 15: 15-cassert names it, and it runs once, on the line
# "pg15-asan (assert + ASan/UBSan)".  15-sql and 18-sql test the SQL
# edition (idem_sql/) on the servers of 15 and 18, on lines of their own,
# "pg15-sql (SQL edition)": test/run.sh says what runs there.
# Each flavour runs in a copy of the tree of its own (so that objects built
# for one major never meet another's), inside its chroot where it has one:
#   15           the checkout itself, as make test
#   15-asan, 15-sql
#                /tmp/idem-<flavour>
#   17, 18, 19, 17-cassert, 18-sql
#                /tmp/idem-<flavour> in the chroot (the path printed)
# Each run's output is also kept in tmp_check/matrix/<flavour>.log.
# After each flavour a line "pgNN: N passed, M failed, K skipped"; after an
# assert build's run, every "TRAP:" line of its server logs is printed and
# counts as one more failure; after the sanitizer build's, every report of
# ASan or UBSan (in the files the sanitizers write, one a process, and in
# the server, regression and TAP logs) is printed and counts as one more
# failure each.  The last line sums them: "N passed, M failed, K skipped".
# Making a server the first time needs root (test/servers.sh).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
. test/lib.sh

total_passed=0
total_failed=0
total_skipped=0
lines=()

# The "TRAP:" lines of the server logs below $1, one a line with its file,
# and the warnings of an assert build's memory checks (a write past the end
# of a palloc'd chunk, which neither ASan nor an assertion stops)
summarize_traps() {
	grep -r --include='*.log' --include='postmaster.log' --include='regress_log_*' \
		-H -m 5 -E '^TRAP:|problem in alloc set|detected write past chunk end' "$1" 2>/dev/null
}

# What starts a report of ASan ("==PID==ERROR: AddressSanitizer: ...") or
# UBSan ("file.c:LINE:COL: runtime error: ..."), one a report, or says that
# a process died for want of the file to write one into
sanitizer_report="ERROR: [A-Za-z]+Sanitizer|: runtime error: |ERROR: Can't open file: "

# Print the sanitizers' reports of a run whose outputs are below $1 and set
# sanitizer_reports to their number: those in the files of ASan's log_path
# ($1/sanitizer/report.PID, one a process, whoever read its stderr), whole
# up to a limit, and those that went to stderr (UBSan's, and ASan's in a
# backend after a UBSan report: test/servers.sh) and so to a server's log
# or a test's, each by its first line and its stack if it has one.
summarize_sanitizers() {
	local out=$1 f n shown=0 logs=()
	sanitizer_reports=0
	for f in "$out"/sanitizer/report.*; do
		[ -f "$f" ] || continue
		# a file with no report line (a warning of the runtime) counts too
		n=$(grep -oE "$sanitizer_report" "$f" | wc -l)
		[ "$n" -gt 0 ] || n=1
		sanitizer_reports=$((sanitizer_reports + n))
		if [ "$shown" -lt 20 ]; then
			echo "-- $f: $n report(s) --"
			head -n 60 "$f"
			shown=$((shown + 1))
		fi
	done
	[ "$shown" -lt 20 ] || echo "(the first 20 files only: the rest are in $out/sanitizer)"
	mapfile -t logs < <(grep -rlE --include='*.log' --include='regress_log_*' --include='regression.diffs' \
		--exclude-dir=sanitizer --exclude-dir=install "$sanitizer_report" "$out" 2>/dev/null)
	for f in "${logs[@]}"; do
		n=$(grep -oE "$sanitizer_report" "$f" | wc -l)
		sanitizer_reports=$((sanitizer_reports + n))
		echo "-- $f: $n report(s) --"
		# each report and what follows it, up to a blank line or the next
		# line of the server's own (which starts with a date), 20 at most
		awk -v re="$sanitizer_report" '
			$0 ~ re { print substr($0, 1, 300); n = 20; next }
			/^$/ || /^[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] / { n = 0 }
			n > 0 { print substr($0, 1, 300); n-- }' "$f" | head -n 400
	done
}

# The older servers, with idem, that flavour $1's tests upgrade from (the
# tests across major versions: test/tap/recovery/104, 114, 117), as
# "major=path ..." in its chroot, oldest first: on 18, those of 15 and 17;
# on 19, those of 15 and 18 (15's is made once for both: test/servers.sh
# kit); empty elsewhere.  False when one cannot be made (the run counts
# that as a failure: those tests would otherwise carry data from the
# server to itself only, and pass).
kits_for() {
	local from path kits=() froms
	case "$1" in
		18) froms="15 17" ;;
		19) froms="15 18" ;;
		*) return 0 ;;
	esac
	for from in $froms; do
		path=$(bash test/servers.sh kit "$from" "$1" "$IDEM_ROOT" | tail -n 1) && [ -n "$path" ] ||
			return 1
		kits+=("$from=$path")
	done
	echo "${kits[*]}"
}

# Run the suite on flavour $1; add its counts to the totals
run_flavour() {
	local flavour=$1 label tree log line passed failed skipped traps start kits kits_failed="" sanitizer_logs="" groups
	label=pg$flavour
	case "$flavour" in
		*-asan) label="$label (assert + ASan/UBSan)" ;;
		*-sql) label="$label (SQL edition)" ;;
	esac
	start=$(date +%s)
	echo ""
	echo "=== $label ==="
	if ! bash test/servers.sh prepare "$flavour"; then
		echo "$label: the server could not be made"
		lines+=("$label: 0 passed, 1 failed, 0 skipped")
		total_failed=$((total_failed + 1))
		return
	fi
	log=$IDEM_BUILD/matrix/$flavour.log
	mkdir -p "$IDEM_BUILD/matrix"
	kits=$(kits_for "$flavour" 2>"$IDEM_BUILD/matrix/kits.log") || kits_failed=1
	tree=$(idem_server_tree "$flavour")
	# the sanitizers' reports go into the run's own outputs (the path as
	# the run sees it, inside its chroot if it has one), new with each run
	case "$flavour" in
		*-asan) sanitizer_logs=${tree#"$(bash test/servers.sh chroot "$flavour")"}/tmp_check/sanitizer ;;
	esac
	# A packaged server whose major has an assert build in this run too
	# leaves the core and recovery TAP tests to that build (the same code,
	# checked with assertions), and runs the components, which it skips.
	groups=""
	case " ${all_flavours[*]} " in *" $flavour-cassert "*) groups=components ;; esac
	IDEM_SANITIZER_LOGS=$sanitizer_logs idem_on_server "$flavour" test/run.sh IDEM_KITS="$kits" \
		IDEM_TAP_GROUPS="$groups" T="${T:-}" 2>&1 | tee "$log"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	passed=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p')
	failed=$(echo "$line" | sed -nE 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/p')
	skipped=$(echo "$line" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
	passed=${passed:-0}
	skipped=${skipped:-0}
	if [ -z "$failed" ]; then
		echo "$label: the suite did not finish"
		failed=1
	fi
	if [ -n "$kits_failed" ]; then
		echo "$label: the older servers for the tests across majors could not be made:"
		tail -n 20 "$IDEM_BUILD/matrix/kits.log"
		failed=$((failed + 1))
	fi
	case "$flavour" in
		*-cassert|*-asan)
			traps=$(summarize_traps "$tree/tmp_check")
			if [ -n "$traps" ]; then
				echo ""
				echo "$label: assertion failures in the server logs:"
				echo "$traps"
				failed=$((failed + 1))
			fi
			;;
	esac
	case "$flavour" in
		*-asan)
			summarize_sanitizers "$tree/tmp_check" >"$IDEM_BUILD/matrix/$flavour.sanitizers"
			echo "$label: $sanitizer_reports report(s) of the sanitizers"
			if [ "$sanitizer_reports" -gt 0 ]; then
				cat "$IDEM_BUILD/matrix/$flavour.sanitizers"
				failed=$((failed + sanitizer_reports))
			fi
			;;
	esac
	line="$label: $passed passed, $failed failed, $skipped skipped"
	echo "($label took $(( ($(date +%s) - start + 30) / 60 )) min)"
	echo "$line"
	lines+=("$line")
	total_passed=$((total_passed + passed))
	total_failed=$((total_failed + failed))
	total_skipped=$((total_skipped + skipped))
}

# Run every flavour asked for (all by default) and sum the lines
# the background preparation of the later servers (main), stopped with
# everything it started if this run ends before it
preparing=""
all_flavours=()
main() {
	local flavours=() f name
	if [ $# = 0 ]; then
		mapfile -t flavours < <(bash test/servers.sh flavours)
	else
		# by the names of test/servers.sh (15-cassert is 15-asan), each once
		for f in "$@"; do
			name=$(bash test/servers.sh name "$f") || exit 1
			case " ${flavours[*]} " in *" $name "*) ;; *) flavours+=("$name") ;; esac
		done
	fi

	# Make the servers of the later flavours (chroots, source builds) while
	# the first ones run their tests: on a fresh machine that is most of the
	# set-up time.  Each piece is made once, under its lock in
	# test/servers.sh; a flavour whose turn comes first waits for it there.
	mkdir -p "$IDEM_BUILD/matrix"
	if [ "$(id -u)" = 0 ] && [ ${#flavours[@]} -gt 1 ]; then
		# the host's packages first, so that no two installs meet
		bash test/servers.sh host-packages
		case " ${flavours[*]} " in *" 15 "*) bash test/servers.sh prepare 15 ;; esac
		# in a process group of its own, at a lower priority than the tests,
		# and stopped with everything it started if this run ends first
		setsid nice -n 10 bash -c 'for f in "$@"; do
				bash test/servers.sh prepare "$f" || echo "matrix.sh: making $f failed (its run says why)"
			done' prepare "${flavours[@]:1}" >"$IDEM_BUILD/matrix/prepare.log" 2>&1 &
		preparing=$!
		trap '[ -n "$preparing" ] && kill -- -"$preparing" 2>/dev/null' EXIT
		trap 'exit 130' INT TERM
	fi

	all_flavours=("${flavours[@]}")
	for f in "${flavours[@]}"; do
		run_flavour "$f"
	done
	[ -n "$preparing" ] && wait "$preparing"
	preparing=""

	echo ""
	printf '%s\n' "${lines[@]}"
	echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
	[ "$total_failed" = 0 ] && [ $((total_passed + total_failed)) -gt 0 ]
}

# On one line: a run goes on reading this file after main returns.
main "$@"; exit $?
