#!/usr/bin/env bash
# Install what building and testing idem needs, and only what is missing:
# the PostgreSQL server, its headers and PGXS, pgcrypto (contrib), pg_cron,
# the Perl modules of the TAP tests, OpenSSL's headers (idem links libcrypto)
# and command line (the tests make keys and certificates with it), Python's
# cryptography package (it signs the webhook deliveries of the differential
# test), a C compiler; and the real components the tests run idem behind:
# pgbouncer (the connection pooler test), prometheus-sql-exporter and
# prometheus (for promtool; it brings the Prometheus server too, which
# Debian starts as a service where services run), pg_auto_failover (its
# monitor's extension and pg_autoctl), PL/Proxy (the router of the sharding
# test), and dpkg-dev, debhelper and postgresql-server-dev-all (pg_buildext)
# to build the Debian package.  Debian and Ubuntu packages; `apt-get
# update` runs only when something has to be installed.
# As root it installs; otherwise it uses sudo, or prints the command to run.
set -uo pipefail

PG_MAJOR=${IDEM_PG_MAJOR:-15}
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

# What each package gives us, tested by its effect rather than by dpkg, so
# that a server built from source with these pieces in place passes too.
want "postgresql-$PG_MAJOR" test -x "$PGLIB/bin/postgres"
want "postgresql-$PG_MAJOR" test -x "$PGLIB/bin/pgbench"
want "postgresql-server-dev-$PG_MAJOR" test -f "/usr/include/postgresql/$PG_MAJOR/server/postgres.h"
want "postgresql-server-dev-$PG_MAJOR" test -f "$PGLIB/lib/pgxs/src/makefiles/pgxs.mk"
want "postgresql-server-dev-$PG_MAJOR" test -x "$PGLIB/lib/pgxs/src/test/isolation/pg_isolation_regress"
# pgcrypto ships in postgresql-15 on Debian; postgresql-contrib-15 names it.
if [ -x "$PGLIB/bin/postgres" ]; then
	want "postgresql-contrib-$PG_MAJOR" test -f "$PGSHARE/extension/pgcrypto.control"
fi
want "postgresql-$PG_MAJOR-cron" test -f "$PGSHARE/extension/pg_cron.control"
want libipc-run-perl perl -MIPC::Run -e 1
# DBD::Pg (and DBI): the two client sessions of the claim fuzzer
want libdbd-pg-perl perl -MDBD::Pg -e 1
want perl command -v prove
want libssl-dev test -f /usr/include/openssl/evp.h
want openssl command -v openssl
# Python's cryptography: the signer, independent of idem, of the
# differential test of the webhook schemes (test/differential/sign.py)
want python3-cryptography /usr/bin/python3 -c 'import cryptography'
# monitoring/: the real exporter (test/t/111) and promtool (test/t/112)
want prometheus-sql-exporter command -v prometheus-sql-exporter
want prometheus command -v promtool
# dpkg-buildpackage, debhelper and pg_buildext: the Debian package (debian/,
# test/t/115_debian_package.pl)
want dpkg-dev command -v dpkg-buildpackage
want debhelper command -v dh
# (the package itself: dpkg-checkbuilddeps asks for it by name, and from
# Debian 13 on pgxs_debian_control.mk alone comes with postgresql-common-dev)
want postgresql-server-dev-all installed postgresql-server-dev-all
# PL/Proxy: the router in front of the shards of test/t/116_plproxy.pl
want "postgresql-$PG_MAJOR-plproxy" test -f "$PGSHARE/extension/plproxy.control"
# pg_auto_failover: the monitor's extension and pg_autoctl, for the failover test
want "postgresql-$PG_MAJOR-auto-failover" test -f "$PGSHARE/extension/pgautofailover.control"
want pg-auto-failover-cli command -v pg_autoctl
# pgbouncer: test/t/110_pgbouncer.pl runs idem behind a real one
want pgbouncer test -x /usr/sbin/pgbouncer
want make command -v make
want gcc command -v gcc

# Application runtimes: the example services, the drivers and the queue
# consumer that the client tests run against idem (examples/, test/drivers/).
# The servers' chroots (test/servers.sh) leave them out: those tests run on
# the host.
if [ "${IDEM_APP_DEPS:-1}" != 0 ]; then
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
	# test/t/119_rabbitmq.pl runs apart from the service the package
	# starts, and pika, with the psycopg above
	want rabbitmq-server test -x /usr/sbin/rabbitmq-server
	want python3-pika /usr/bin/python3 -c 'import pika'
fi

# The fuzz targets (make fuzz, test/fuzz/): clang 16, libFuzzer and the
# runtimes of AddressSanitizer and UndefinedBehaviorSanitizer.  On the host
# only, as the application runtimes: the servers' chroots leave them out.
if [ "${IDEM_APP_DEPS:-1}" != 0 ]; then
	want clang-16 command -v clang-16
	want libfuzzer-16-dev test -f /usr/lib/llvm-16/lib/libFuzzer.a
	want libclang-rt-16-dev test -f "/usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.fuzzer-$(uname -m).a"
fi

# As root the test servers run as postgres, whom the server package creates.
check_user() {
	if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
		echo "There is no postgres user to run the test servers (initdb refuses root): create one." >&2
		exit 1
	fi
}

if [ ${#missing[@]} = 0 ]; then
	check_user
	exit 0
fi

install_line="apt-get install -y --no-install-recommends ${missing[*]}"
echo "Installing what is missing: ${missing[*]}" >&2

if ! command -v apt-get >/dev/null 2>&1; then
	echo "No apt-get here: install PostgreSQL $PG_MAJOR with its server headers (PGXS)," >&2
	echo "pgcrypto, pg_cron, the Perl modules IPC::Run and DBD::Pg, make and a C compiler, then run this again." >&2
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
if ! "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 update -qq ||
   ! "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
	echo "" >&2
	echo "Could not install: ${missing[*]}." >&2
	echo "If this release has no PostgreSQL $PG_MAJOR packages, add the PostgreSQL apt" >&2
	echo "repository (https://wiki.postgresql.org/wiki/Apt) and run this again." >&2
	exit 1
fi
check_user
exit 0
