#!/usr/bin/env bash
# make test-matrix (and make test PG=...): the whole suite of test/run.sh on
# each server of test/servers.sh, one after the other:
#
#   test/matrix.sh                 every flavour: 15 17 18 15-cassert 17-cassert
#   test/matrix.sh 17 15-cassert   those only
#
# Each flavour runs in a copy of the tree of its own (so that objects built
# for one major never meet another's), inside its chroot where it has one:
#   15           the checkout itself, as make test
#   15-cassert   /tmp/idem-15-cassert
#   17, 18, 17-cassert
#                /tmp/idem-<flavour> in the chroot (the path printed)
# Each run's output is also kept in tmp_check/matrix/<flavour>.log.
# After each flavour a line "pgNN: N passed, M failed, K skipped"; after an
# assert build's run, every "TRAP:" line of its server logs is printed and
# counts as one more failure.  The last line sums them: "N passed, M failed,
# K skipped".  Making a server the first time needs root (test/servers.sh).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
. test/lib.sh

total_passed=0
total_failed=0
total_skipped=0
lines=()

# The "TRAP:" lines of the server logs below $1, one a line with its file
summarize_traps() {
	grep -r --include='*.log' --include='postmaster.log' --include='regress_log_*' \
		-H -m 5 '^TRAP:' "$1" 2>/dev/null
}

# The older servers, with idem, that flavour $1's tests upgrade from (the
# tests across major versions: test/t/104, 114, 117), as "major=path ..."
# in its chroot: on 18, those of 15 and 17; empty elsewhere.  False when one
# cannot be made (the run counts that as a failure: those tests would
# otherwise carry data from the server to itself only, and pass).
kits_for() {
	local from path kits=()
	[ "$1" = 18 ] || return 0
	for from in 15 17; do
		path=$(bash test/servers.sh kit "$from" "$1" "$IDEM_ROOT" | tail -n 1) && [ -n "$path" ] ||
			return 1
		kits+=("$from=$path")
	done
	echo "${kits[*]}"
}

# Run the suite on flavour $1; add its counts to the totals
run_flavour() {
	local flavour=$1 label tree log line passed failed skipped traps start kits kits_failed=""
	label=pg$flavour
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
	idem_on_server "$flavour" test/run.sh IDEM_KITS="$kits" 2>&1 | tee "$log"
	tree=$(idem_server_tree "$flavour")
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
		*-cassert)
			traps=$(summarize_traps "$tree/tmp_check")
			if [ -n "$traps" ]; then
				echo ""
				echo "$label: assertion failures in the server logs:"
				echo "$traps"
				failed=$((failed + 1))
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
main() {
	local flavours f
	if [ $# = 0 ]; then
		mapfile -t flavours < <(bash test/servers.sh flavours)
	else
		flavours=("$@")
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
