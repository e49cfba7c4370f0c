# shellcheck shell=bash
# Shared by test/run.sh, test/matrix.sh, test/demo.sh, bench/run.sh and
# bench/purge.sh: where things go, how a private copy of the server is made
# with idem installed into it, how a script runs on another server of
# test/servers.sh, and how a scratch cluster is started.
# Source it; it defines functions and variables, it runs nothing.

IDEM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The server version to build and test against: the host's release's own
# (15 on Debian 12, 17 on Debian 13; test/deps.sh says which); its
# pg_config wins over the one on PATH, which follows the newest server-dev
# package installed.
IDEM_PG_MAJOR=${IDEM_PG_MAJOR:-$(bash "$IDEM_ROOT/test/deps.sh" major)}
if [ -z "${PG_CONFIG:-}" ]; then
	if [ -x "/usr/lib/postgresql/$IDEM_PG_MAJOR/bin/pg_config" ]; then
		PG_CONFIG=/usr/lib/postgresql/$IDEM_PG_MAJOR/bin/pg_config
	else
		PG_CONFIG=pg_config
	fi
fi
# Everything the tests, the demo and the benchmark write lives below here.
IDEM_BUILD=${IDEM_BUILD:-$IDEM_ROOT/tmp_check}
IDEM_PRIVATE=$IDEM_BUILD/install

# Run a command as the server's user: initdb refuses root, so as root the
# servers run as postgres; as anyone else, as that user.
as_server_user() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- env PATH="$PATH" "$@"
	else
		"$@"
	fi
}

# Build idem and install it into a private copy of the server tree.  The
# server finds its lib/ and share/ relative to its own binary, so a copy of
# bin/ next to links to lib/ and share/ loads this build of idem and never
# touches the system's directories.  Sets IDEM_BINDIR.  With argument sql,
# the SQL edition instead (make -C idem_sql install): no C library, and
# none of idem's files, the system's or this tree's, in the copy.
idem_private_install() {
	local edition=${1:-c} bindir libdir sharedir f
	bindir=$("$PG_CONFIG" --bindir)
	libdir=$("$PG_CONFIG" --pkglibdir)
	sharedir=$("$PG_CONFIG" --sharedir)

	if [ "$edition" = sql ]; then
		make -C "$IDEM_ROOT/idem_sql" -s all PG_CONFIG="$PG_CONFIG" >&2 || return 1
	else
		make -C "$IDEM_ROOT" -s all PG_CONFIG="$PG_CONFIG" >&2 || return 1
	fi
	rm -rf "$IDEM_PRIVATE"
	mkdir -p "$IDEM_PRIVATE$bindir" "$IDEM_PRIVATE$libdir" "$IDEM_PRIVATE$sharedir/extension"
	cp -a "$bindir/." "$IDEM_PRIVATE$bindir/"
	for f in "$libdir"/*; do
		case "$(basename "$f")" in idem.so|idem|bitcode) ;; *) ln -s "$f" "$IDEM_PRIVATE$libdir/" ;; esac
	done
	# The JIT bitcode goes to lib/bitcode: a real directory here, or the
	# install would write through a link into the system's.
	if [ -d "$libdir/bitcode" ]; then
		mkdir -p "$IDEM_PRIVATE$libdir/bitcode"
		for f in "$libdir"/bitcode/*; do
			case "$(basename "$f")" in idem|idem.index.bc) ;; *) ln -s "$f" "$IDEM_PRIVATE$libdir/bitcode/" ;; esac
		done
	fi
	for f in "$sharedir"/*; do
		[ "$(basename "$f")" = extension ] || ln -s "$f" "$IDEM_PRIVATE$sharedir/"
	done
	for f in "$sharedir"/extension/*; do
		case "$(basename "$f")" in idem.control|idem--*|idem_sql.control|idem_sql--*) ;; *) ln -s "$f" "$IDEM_PRIVATE$sharedir/extension/" ;; esac
	done
	# Citus, where test/servers.sh made it for this server (IDEM_CITUS: its
	# install tree), beside idem
	if [ -n "${IDEM_CITUS:-}" ] && [ -d "$IDEM_CITUS$libdir" ]; then
		for f in "$IDEM_CITUS$libdir"/*; do
			[ "$(basename "$f")" = bitcode ] || ln -s "$f" "$IDEM_PRIVATE$libdir/"
		done
		if [ -d "$IDEM_CITUS$libdir/bitcode" ] && [ -d "$IDEM_PRIVATE$libdir/bitcode" ]; then
			ln -s "$IDEM_CITUS$libdir"/bitcode/* "$IDEM_PRIVATE$libdir/bitcode/"
		fi
		ln -s "$IDEM_CITUS$sharedir"/extension/* "$IDEM_PRIVATE$sharedir/extension/"
	fi
	if [ "$edition" = sql ]; then
		make -C "$IDEM_ROOT/idem_sql" -s install PG_CONFIG="$PG_CONFIG" DESTDIR="$IDEM_PRIVATE" >/dev/null || return 1
	else
		make -C "$IDEM_ROOT" -s install PG_CONFIG="$PG_CONFIG" DESTDIR="$IDEM_PRIVATE" >/dev/null || return 1
	fi
	IDEM_BINDIR=$IDEM_PRIVATE$bindir
	if [ "$(id -u)" = 0 ]; then
		chown -R postgres: "$IDEM_BUILD"
	fi
}

# As root the servers run as postgres, which must be able to read the
# checkout and reach tmp_check inside it.  When it cannot (a clone under
# /root, a umask of 077), run the calling script again from a copy under /tmp
# that postgres owns, and exit with its status.  Returns when no copy is
# needed.  Usage: idem_run_readable_copy test/run.sh "$@"; with
# IDEM_KEEP_STAGE set the copy stays after success too (the demo's cluster
# lives in it).
idem_run_readable_copy() {
	local script=$1 stage rc unreadable
	shift
	[ "$(id -u)" = 0 ] && [ -z "${IDEM_STAGED:-}" ] || return 0
	if runuser -u postgres -- test -x "$IDEM_ROOT" -a -r "$IDEM_ROOT/Makefile" 2>/dev/null; then
		unreadable=$(runuser -u postgres -- find "$IDEM_ROOT" \
			\( -path "$IDEM_ROOT/.git" -o -path "$IDEM_BUILD" \) -prune -o \
			\( ! -readable -o -type d ! -executable \) -print -quit 2>&1)
		[ -n "$unreadable" ] || return 0
	fi
	stage=$(mktemp -d /tmp/idem-stage.XXXXXX) || exit 1
	if [ -n "${IDEM_KEEP_STAGE:-}" ]; then
		echo "The postgres user cannot read $IDEM_ROOT: running from a copy in $stage" >&2
	else
		echo "The postgres user cannot read $IDEM_ROOT: running from a copy in $stage (removed afterwards unless something fails)" >&2
	fi
	tar -C "$IDEM_ROOT" --exclude=./.git --exclude=./tmp_check -cf - . | tar -C "$stage" -xf - || exit 1
	chown -R postgres: "$stage"
	IDEM_STAGED=1 env -u IDEM_BUILD bash "$stage/$script" "$@"
	rc=$?
	if [ "$rc" = 0 ] && [ -z "${IDEM_KEEP_STAGE:-}" ]; then
		rm -rf "$stage"
	fi
	exit "$rc"
}

# Copy the source tree to directory $1 (made if missing): what git tracks
# and the new files it does not ignore, so no object built for one server
# goes along to another; outside a git checkout, all but the known outputs.
idem_copy_tree() {
	mkdir -p "$1" || return 1
	if git -C "$IDEM_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		# (a file deleted but not yet staged is listed, and passed over)
		git -C "$IDEM_ROOT" ls-files -z -co --exclude-standard |
			tar -C "$IDEM_ROOT" --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$1" -xf -
	else
		tar -C "$IDEM_ROOT" --exclude=./.git --exclude=./tmp_check --exclude='*.o' \
			--exclude='*.so' --exclude='*.bc' --exclude=./src/.flavour -cf - . | tar -C "$1" -xf -
	fi
}

# Run script $2 of the tree (test/run.sh, bench/run.sh) on server flavour
# $1 of test/servers.sh, with the environment words that follow (NAME=value),
# in a copy of the tree of that server's own, so that objects built for one
# major never meet another's: /tmp/idem-<flavour>, inside the chroot for 17
# and 18 (idem_server_tree says where it is seen from here; its outputs are
# in its tmp_check/); for 15 the checkout itself (15-sql, which runs
# there too, has /tmp/idem-15-sql).  Making the server the
# first time needs root.
idem_on_server() {
	local flavour=$1 script=$2 tree owner=postgres:postgres root settings
	shift 2
	# the settings of the tests and benchmarks go along (a chroot starts
	# with an empty environment)
	mapfile -t settings < <(env | grep -E '^(BENCH_[A-Z_]+|IDEM_TEST_BUDGET|IDEM_DIFF_LINES|IDEM_WEBHOOK_SEED|IDEM_WEBHOOK_CASES)=')
	set -- "${settings[@]}" "$@"
	if [ "$flavour" = 15 ]; then
		env IDEM_FLAVOUR=15 IDEM_PG_MAJOR=15 "$@" bash "$IDEM_ROOT/$script"
		return
	fi
	bash "$IDEM_ROOT/test/servers.sh" prepare "$flavour" || return 1
	tree=$(idem_server_tree "$flavour")
	root=${tree%"/tmp/idem-$flavour"}
	if [ -n "$root" ]; then
		owner=$(chroot "$root" id -u postgres):$(chroot "$root" id -g postgres)
		echo "(the copy of the tree for $flavour: $tree)"
	fi
	rm -rf "$tree"
	idem_copy_tree "$tree" || return 1
	if [ "$(id -u)" = 0 ]; then
		chown -R "$owner" "$tree"
	fi
	bash "$IDEM_ROOT/test/servers.sh" run "$flavour" env CI="${CI:-}" "$@" \
		bash "/tmp/idem-$flavour/$script"
}

# Where idem_on_server's copy of the tree for flavour $1 is, seen from here
idem_server_tree() {
	if [ "$1" = 15 ]; then
		echo "$IDEM_ROOT"
	else
		echo "$(bash "$IDEM_ROOT/test/servers.sh" chroot "$1" || true)/tmp/idem-$1"
	fi
}

# A scratch cluster of the demo's or a benchmark's own: a data directory
# below <dir>, reached through a Unix socket only, with idem preloaded.
#
#   idem_scratch_start <dir> <port> [launcher words ...] <extra-settings
#
# stops a server an earlier run left in <dir>/data, empties <dir>, runs
# initdb as the server user, appends the common settings and then those read
# from standard input to postgresql.conf, and starts the server (through the
# launcher words, "taskset -c 0" say, if any are given).  It sets IDEM_DATA,
# IDEM_SOCK (the socket's directory: <dir>, unless that path is too long for
# a Unix socket, then /tmp) and IDEM_PORT (<port>, or the next one whose
# socket file is free there).  The server log is <dir>/server.log.
# Needs IDEM_BINDIR (idem_private_install).  On failure it prints the log's
# tail and returns non-zero.  The caller stops the server with
# idem_scratch_stop, from an EXIT trap set before the start (a start that
# times out may leave a server running).
idem_scratch_start() {
	local dir=$1 port=$2
	shift 2
	IDEM_DATA=$dir/data
	if [ -f "$IDEM_DATA/postmaster.pid" ]; then
		as_server_user "$IDEM_BINDIR/pg_ctl" -D "$IDEM_DATA" -m fast stop >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	# sun_path holds 107 bytes, ".s.PGSQL.<port>.lock" included
	if [ ${#dir} -le 80 ]; then
		IDEM_SOCK=$dir
	else
		IDEM_SOCK=/tmp
	fi
	IDEM_PORT=$port
	while [ -e "$IDEM_SOCK/.s.PGSQL.$IDEM_PORT" ]; do
		IDEM_PORT=$((IDEM_PORT + 1))
	done
	if [ "$(id -u)" = 0 ]; then
		chown postgres: "$dir"
	fi
	if ! as_server_user "$IDEM_BINDIR/initdb" -D "$IDEM_DATA" -U postgres -A trust \
		-E UTF8 --no-locale -N >"$dir/initdb.log" 2>&1; then
		tail -n 20 "$dir/initdb.log" >&2
		return 1
	fi
	{
		cat <<-EOC

			# scratch cluster (test/lib.sh)
			port = $IDEM_PORT
			listen_addresses = ''
			unix_socket_directories = '$IDEM_SOCK'
			shared_preload_libraries = 'idem'
		EOC
		cat
	} | as_server_user tee -a "$IDEM_DATA/postgresql.conf" >/dev/null
	if ! as_server_user "$@" "$IDEM_BINDIR/pg_ctl" -D "$IDEM_DATA" -l "$dir/server.log" \
		-w start >/dev/null; then
		tail -n 20 "$dir/server.log" >&2
		return 1
	fi
}

# Stop the scratch cluster of idem_scratch_start; false if it was not running
# (or not even created yet: the EXIT trap may be set before the start)
idem_scratch_stop() {
	[ -n "${IDEM_DATA:-}" ] || return 1
	as_server_user "$IDEM_BINDIR/pg_ctl" -D "$IDEM_DATA" -m fast stop >/dev/null 2>&1
}
