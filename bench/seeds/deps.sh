#!/usr/bin/env bash
# What `make bench-seeds` needs beyond what test/deps.sh installs, and only
# what is missing (Debian packages): Redis (redis-server, redis-cli), the
# client libraries the load generator is built with (libpq-dev,
# libhiredis-dev), what injects the network round trip (iproute2 for the
# network namespaces, iptables and libnetfilter-queue-dev for the delay) and
# gnuplot-nox for the chart.  `make test` needs none of these.
set -uo pipefail

missing=()

# Queue package $1 unless the check that follows it succeeds.
want() {
	local pkg=$1
	shift
	if ! "$@" >/dev/null 2>&1; then
		missing+=("$pkg")
	fi
}

want redis-server command -v redis-server
want redis-tools command -v redis-cli
want libpq-dev test -f "$(pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)/libpq-fe.h"
want libhiredis-dev test -f /usr/include/hiredis/hiredis.h
want libnetfilter-queue-dev test -f /usr/include/libnetfilter_queue/libnetfilter_queue.h
want iproute2 command -v ip
want iptables command -v iptables
want gnuplot-nox command -v gnuplot

[ ${#missing[@]} = 0 ] && exit 0

echo "Installing what the seeds benchmark needs: ${missing[*]}" >&2
if [ "$(id -u)" = 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1; then
	sudo=(sudo)
else
	echo "As root, run: apt-get install -y --no-install-recommends ${missing[*]}" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get update -qq ||
   ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
	echo "Could not install: ${missing[*]}" >&2
	exit 1
fi
