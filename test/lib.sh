# Shared by test/run.sh, test/demo.sh and bench/run.sh: where things go and
# how a private copy of the server is made with idem installed into it.
# Source it; it defines functions and variables, it runs nothing.

IDEM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=${PG_CONFIG:-pg_config}
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
# touches the system's directories.  Sets IDEM_BINDIR.
idem_private_install() {
	local bindir libdir sharedir f
	bindir=$("$PG_CONFIG" --bindir)
	libdir=$("$PG_CONFIG" --pkglibdir)
	sharedir=$("$PG_CONFIG" --sharedir)

	make -C "$IDEM_ROOT" -s all >&2 || return 1
	rm -rf "$IDEM_PRIVATE"
	mkdir -p "$IDEM_PRIVATE$bindir" "$IDEM_PRIVATE$libdir" "$IDEM_PRIVATE$sharedir/extension"
	cp -a "$bindir/." "$IDEM_PRIVATE$bindir/"
	for f in "$libdir"/*; do
		case "$(basename "$f")" in idem.so|idem) ;; *) ln -s "$f" "$IDEM_PRIVATE$libdir/" ;; esac
	done
	for f in "$sharedir"/*; do
		[ "$(basename "$f")" = extension ] || ln -s "$f" "$IDEM_PRIVATE$sharedir/"
	done
	for f in "$sharedir"/extension/*; do
		case "$(basename "$f")" in idem.control|idem--*) ;; *) ln -s "$f" "$IDEM_PRIVATE$sharedir/extension/" ;; esac
	done
	make -C "$IDEM_ROOT" -s install DESTDIR="$IDEM_PRIVATE" >/dev/null || return 1
	IDEM_BINDIR=$IDEM_PRIVATE$bindir
	if [ "$(id -u)" = 0 ]; then
		chown -R postgres: "$IDEM_BUILD"
	fi
}
