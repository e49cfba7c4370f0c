# shellcheck shell=bash
# bench/callgrind.sh: a scratch server under valgrind's callgrind, and the
# instructions of the backend that runs a pgbench script, for
# bench/instructions.sh and bench/scale.sh.  Sourced once test/lib.sh's
# idem_scratch_start has made the server (IDEM_BINDIR, IDEM_DATA,
# IDEM_SOCK, IDEM_PORT), by a script that defines log().

# callgrind_start <dir> [postgres options ...]: stop the scratch server and
# start it again under callgrind, a file of counts a process in <dir>
callgrind_start() {
	local dir=$1 i
	shift
	if ! command -v valgrind >/dev/null; then
		if [ "$(id -u)" != 0 ]; then
			log "as root, run: apt-get install -y valgrind"
			exit 1
		fi
		log "installing valgrind"
		DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq valgrind >/dev/null
	fi
	idem_scratch_stop || true
	mkdir -p "$dir"
	rm -f "$dir"/*
	if [ "$(id -u)" = 0 ]; then
		chown postgres: "$dir"
	fi
	as_server_user valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$dir/out.%p" \
		"$IDEM_BINDIR/postgres" -D "$IDEM_DATA" "$@" >"$dir/valgrind.log" 2>&1 &
	CALLGRIND_LAUNCHED=$!
	for ((i = 0; ; i++)); do
		"$IDEM_BINDIR/pg_isready" -q -h "$IDEM_SOCK" -p "$IDEM_PORT" && break
		if ((i == 600)); then
			log "the server did not start under callgrind:"
			tail -n 20 "$dir/valgrind.log" >&2
			kill "$CALLGRIND_LAUNCHED" 2>/dev/null || true
			exit 1
		fi
		sleep 0.2
	done
	# the server's own processes, with no client connected (the caller
	# turns off what starts more, as the purge launcher's workers)
	sleep 2
	CALLGRIND_DIR=$dir
	CALLGRIND_PM=$(head -1 "$IDEM_DATA/postmaster.pid")
	CALLGRIND_BASE=$(pgrep -c -P "$CALLGRIND_PM")
}

# callgrind_count <keep> <requests> <pgbench args ...>: run pgbench, one
# client, for that many requests; print the instructions of its backend
# (pgbench's other connection only looks at the server: the larger count)
# and keep that backend's counts as <keep> for callgrind_annotate, unless
# <keep> is empty
callgrind_count() {
	local keep=$1 requests=$2 before i last n f
	shift 2
	before=$(ls "$CALLGRIND_DIR")
	if ! "$IDEM_BINDIR/pgbench" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -n -M prepared -c 1 \
		-t "$requests" "$@" >"$CALLGRIND_DIR/pgbench.out" 2>&1 ||
		! grep -q "^number of transactions actually processed: $requests/$requests" "$CALLGRIND_DIR/pgbench.out"; then
		cat "$CALLGRIND_DIR/pgbench.out" >&2
		exit 1
	fi
	# callgrind writes a process's counts when it exits
	for ((i = 0; ; i++)); do
		[ "$(pgrep -c -P "$CALLGRIND_PM")" -le "$CALLGRIND_BASE" ] && break
		if ((i == 600)); then
			log "the backends of the run did not exit"
			exit 1
		fi
		sleep 0.2
	done
	last=
	while read -r n f; do
		[ -z "$last" ] || rm -f "$CALLGRIND_DIR/${last#* }"
		last="$n $f"
	done < <(comm -13 <(echo "$before") <(ls "$CALLGRIND_DIR") | grep '^out\.' | while read -r f; do
		printf '%s %s\n' "$(awk '/^totals:/ { print $2 }' "$CALLGRIND_DIR/$f")" "$f"
	done | sort -n)
	if ! [[ ${last%% *} =~ ^[0-9]+$ ]]; then
		log "no count from the backend of the run"
		exit 1
	fi
	if [ -n "$keep" ]; then
		mv "$CALLGRIND_DIR/${last#* }" "$keep"
	else
		rm -f "$CALLGRIND_DIR/${last#* }"
	fi
	echo "${last%% *}"
}
