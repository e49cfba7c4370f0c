#!/usr/bin/env bash
# Install what idem needs, and only what is missing, from the host's own
# Debian (or Ubuntu) packages, for the PostgreSQL of the host's release (15
# on Debian 12, 17 on Debian 13; IDEM_PG_MAJOR names another).
#
#   test/deps.sh demo    building idem and running the demo (make demo): the
#                        server with pgbench, its headers and PGXS, OpenSSL's
#                        headers (idem links libcrypto), make and gcc
#   test/deps.sh [test]  every test (make test, make deps): the demo's list
#                        and what the tests run idem with, listed below
#   test/deps.sh major   print the host's PostgreSQL major and install nothing
#
# `apt-get update` runs only when something has to be installed, and the
# time the install took is printed.  As root it installs; otherwise it uses
# sudo, or prints the command to run.
set -uo pipefail

# The PostgreSQL major of the host's release: the one Debian 12 and 13 ship;
# elsewhere the one the release's postgresql package depends on, or 15.
host_pg_major() {
	local codename="" major=""
	if [ -r /etc/os-release ]; then
		codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	fi
	case "$codename" in
		bookworm) major=15 ;;
		trixie) major=17 ;;
		*) major=$(apt-cache show --no-all-versions postgresql 2>/dev/null |
			sed -n 's/^Depends:.*postgresql-\([0-9][0-9]*\).*/\1/p' | head -n 1) ;;
	esac
	echo "${major:-15}"
}

mode=${1:-test}
case "$mode" in
	demo|test) ;;
	major) host_pg_major; exit 0 ;;
	*) echo "usage: $0 [demo|test|major]" >&2; exit 2 ;;
esac

PG_MAJOR=${IDEM_PG_MAJOR:-$(host_pg_major)}
PGLIB=/usr/lib/postgresql/$PG_MAJOR
PGSHARE=/usr/share/postgresql/$PG_MAJOR

missing=()

# Queue package $1 unless the check that follows it succeeds.
want() {
	local pkg=$1
	shift
	if ! "$@" >/dev/null 2>&1; then
		case " ${missing[*]-} " in *" $pkg "*) ;; *) missing+=("$pkg") ;; esac
	fi
}

# Is Debian package $1 installed?
installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'
}

# Say why package(s) $1 are left out on this host.
skip() {
	echo "deps.sh: not installing $1: $2" >&2
}

# What each package gives us, tested by its effect rather than by dpkg, so
# that a server built from source with these pieces in place passes too.
#
# The demo's list: building idem and running the demo.  (The server-dev
# package brings clang and LLVM's headers with it: PGXS builds the JIT's
# bitcode of an extension.)
want "postgresql-$PG_MAJOR" test -x "$PGLIB/bin/postgres" -a -x "$PGLIB/bin/pgbench"
# (and the isolation tester, which the tests run, from the same package)
want "postgresql-server-dev-$PG_MAJOR" test -f "/usr/include/postgresql/$PG_MAJOR/server/postgres.h" \
	-a -f "$PGLIB/lib/pgxs/src/makefiles/pgxs.mk" \
	-a -x "$PGLIB/lib/pgxs/src/test/isolation/pg_isolation_regress"
want libssl-dev test -f /usr/include/openssl/evp.h
want make command -v make
want gcc command -v gcc

# The tests' list: what the tests run idem with and against, beyond that.
if [ "$mode" = test ]; then
	# pgcrypto ships in postgresql-NN on Debian; postgresql-contrib-NN names it.
	if [ -x "$PGLIB/bin/postgres" ]; then
		want "postgresql-contrib-$PG_MAJOR" test -f "$PGSHARE/extension/pgcrypto.control"
	fi
	want "postgresql-$PG_MAJOR-cron" test -f "$PGSHARE/extension/pg_cron.control"
	# flex: pg_tle's build (its src/guc-file.l), which the SQL edition's
	# test makes from the vendored source (test/tap/components/129_sql_edition.pl)
	want flex command -v flex
	want libipc-run-perl perl -MIPC::Run -e 1
	# DBD::Pg (and DBI): the two client sessions of the claim fuzzer
	want libdbd-pg-perl perl -MDBD::Pg -e 1
	want perl command -v prove
	# the tests make keys and certificates with it
	want openssl command -v openssl
	# Python's cryptography: the signer, independent of idem, of the
	# differential test of the webhook schemes (test/differential/sign.py)
	want python3-cryptography /usr/bin/python3 -c 'import cryptography'
	# monitoring/: the real exporter (test/tap/components/111) and promtool
	# (test/tap/components/112; it brings the Prometheus server too, which
	# Debian starts as a service where services run)
	want prometheus-sql-exporter command -v prometheus-sql-exporter
	want prometheus command -v promtool
	# dpkg-buildpackage, debhelper and pg_buildext: the Debian package
	# (debian/, test/tap/components/115_debian_package.pl)
	want dpkg-dev command -v dpkg-buildpackage
	want debhelper command -v dh
	# (dpkg-checkbuilddeps wants build-essential itself, by name)
	want build-essential installed build-essential
	# (the package itself: dpkg-checkbuilddeps asks for it by name, and from
	# Debian 13 on pgxs_debian_control.mk alone comes with postgresql-common-dev)
	want postgresql-server-dev-all installed postgresql-server-dev-all
	# PL/Proxy: the router in front of the shards of
	# test/tap/components/116_plproxy.pl
	want "postgresql-$PG_MAJOR-plproxy" test -f "$PGSHARE/extension/plproxy.control"
	# pg_auto_failover: the monitor's extension and pg_autoctl, for the failover test
	want "postgresql-$PG_MAJOR-auto-failover" test -f "$PGSHARE/extension/pgautofailover.control"
	want pg-auto-failover-cli command -v pg_autoctl
	# pgbouncer: test/tap/components/110_pgbouncer.pl runs idem behind a
	# real one
	want pgbouncer test -x /usr/sbin/pgbouncer
fi

# Application runtimes: the example services, the drivers and the queue
# consumer that the client tests run against idem (examples/, test/drivers/).
# The servers' chroots (test/servers.sh) leave them out: those tests run on
# the host.
if [ "$mode" = test ] && [ "${IDEM_APP_DEPS:-1}" != 0 ]; then
	# Python: psycopg 3 and its pool, for Debian's Python
	want python3-psycopg /usr/bin/python3 -c 'import psycopg'
	want python3-psycopg-pool /usr/bin/python3 -c 'import psycopg_pool'
	# Node.js and npm (a Node.js from elsewhere, such as NodeSource's, brings
	# its own npm); the pg package comes from npm
	want nodejs command -v node
	want npm command -v npm
	# Java: a JDK, pgjdbc and Gson (the Java service's JSON)
	want default-jdk-headless command -v javac
	want libpostgresql-jdbc-java test -f /usr/share/java/postgresql.jar
	want libgoogle-gson-java test -f /usr/share/java/gson.jar
	# Go and pgx v4 with its pool, built offline in GOPATH mode
	want golang-go command -v go
	want golang-github-jackc-pgx-v4-dev test -d /usr/share/gocode/src/github.com/jackc/pgx/v4
	# The queue consumer (examples/queue): RabbitMQ, whose node
	# test/tap/components/119_rabbitmq.pl runs apart from the service the
	# package starts, and pika, with the psycopg above
	want rabbitmq-server test -x /usr/sbin/rabbitmq-server
	want python3-pika /usr/bin/python3 -c 'import pika'

	# The fuzz targets (make fuzz, test/fuzz/): clang 16, libFuzzer and the
	# runtimes of AddressSanitizer and UndefinedBehaviorSanitizer.  On the
	# host only, as the application runtimes, and only where the server is
	# 15: the targets' stand-ins follow 15's server functions, and clang 16
	# is Debian 12's (Debian 13 has none).
	if [ "$PG_MAJOR" = 15 ]; then
		want clang-16 command -v clang-16
		want libfuzzer-16-dev test -f /usr/lib/llvm-16/lib/libFuzzer.a
		want libclang-rt-16-dev test -f "/usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.fuzzer-$(uname -m).a"
	else
		skip "clang-16, libfuzzer-16-dev, libclang-rt-16-dev" \
			"make fuzz builds against PostgreSQL 15 only, and the server here is $PG_MAJOR"
	fi
fi

# As root the test servers run as postgres, whom the server package creates.
check_user() {
	if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
		echo "There is no postgres user to run the test servers (initdb refuses root): create one." >&2
		exit 1
	fi
}

# A server newer than the release (19 on sid, from experimental) may have
# no package yet of an extension the tests use: print into kept what of
# missing apt's lists have, leaving out the packages of the server's major
# that they lack (their tests skip; with "say", each is named).
unpackaged_left_out() {
	local say=$1 pkg policy
	kept=()
	for pkg in "${missing[@]}"; do
		case "$pkg" in
			"postgresql-$PG_MAJOR-"*)
				# (read whole: under pipefail, grep -q ending first fails
				# the pipe when apt-cache is still writing)
				policy=$(apt-cache policy "$pkg" 2>/dev/null)
				if [[ "$policy" != *"Candidate: "[!\(]* ]]; then
					[ "$say" = say ] && skip "$pkg" "the apt sources have no package of it for PostgreSQL $PG_MAJOR (its tests skip)"
					continue
				fi
				;;
		esac
		kept+=("$pkg")
	done
}

# Nothing (left) to install: check the user, and stop here
stop_if_nothing_missing() {
	if [ ${#missing[@]} = 0 ]; then
		check_user
		exit 0
	fi
}

# With apt's lists there already, no update when all that is missing is
# what they do not have.  Lists from before an update may lack what it
# brings, so nothing is left out on their word: the check after the
# update decides.
if command -v apt-cache >/dev/null 2>&1 && compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
	unpackaged_left_out quiet
	if [ ${#kept[@]} = 0 ]; then
		unpackaged_left_out say
		missing=()
	fi
fi

stop_if_nothing_missing

install_line="apt-get install -y --no-install-recommends ${missing[*]}"
echo "Installing what is missing: ${missing[*]}" >&2

if ! command -v apt-get >/dev/null 2>&1; then
	echo "No apt-get here: install PostgreSQL $PG_MAJOR with its server headers (PGXS)," >&2
	if [ "$mode" = demo ]; then
		echo "OpenSSL's headers, make and a C compiler, then run this again." >&2
	else
		echo "pgcrypto, pg_cron, the Perl modules IPC::Run and DBD::Pg, make and a C compiler, then run this again." >&2
	fi
	exit 1
fi

if [ "$(id -u)" = 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1; then
	sudo=(sudo)
else
	echo "Installing packages needs root, and sudo is not available. As root, run:" >&2
	echo "" >&2
	echo "    apt-get update && $install_line" >&2
	echo "" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
started=$(date +%s)
if ! "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 update -qq; then
	echo "apt-get update failed." >&2
	exit 1
fi
unpackaged_left_out say
missing=("${kept[@]}")
stop_if_nothing_missing
if ! "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
	echo "" >&2
	echo "Could not install: ${missing[*]}." >&2
	echo "If this release has no PostgreSQL $PG_MAJOR packages (IDEM_PG_MAJOR names another" >&2
	echo "than the release's own), add the PostgreSQL apt repository" >&2
	echo "(https://wiki.postgresql.org/wiki/Apt) and run this again." >&2
	exit 1
fi
echo "Installed ${#missing[@]} packages (and what they depend on) in $(( $(date +%s) - started ))s." >&2
check_user
exit 0
