# bench/lib.sh: what the benchmarks share.  Sourced once the scratch
# server runs (test/lib.sh's idem_scratch_start), by a script that
# defines log().

# CPU the server's backends spent: the postmaster's reaped children's user
# and system time, in clock ticks.  Unlike tps it hardly moves when other
# work competes for the cores, so the reports give it next to tps.
PM_PID=$(head -1 "$IDEM_DATA/postmaster.pid")
TICK_US=$((1000000 / $(getconf CLK_TCK)))
children_ticks() { awk '{ print $16 + $17 }' "/proc/${1:-$PM_PID}/stat"; }
# CPU a process ($1) spent itself, in clock ticks; 0 once it is gone
self_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# Wait until no more than $1 children of the postmaster are left: the
# backends of the last run have exited and been reaped
wait_backends_gone() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(pgrep -c -P "$PM_PID")" -le "$1" ] && return 0
		sleep 0.05
	done
	log "backends of the last run still there; its CPU figure is low"
}
