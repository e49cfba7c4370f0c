#!/usr/bin/env bash
# The PostgreSQL servers idem is tested on, each made by this script on a
# fresh machine and kept in a cache for the next run:
#
#   15           the host's Debian packages (test/deps.sh installs them)
#   17           Debian 13 (trixie) packages, in a chroot
#   18           Debian unstable (sid) packages, in a chroot
#   19           Debian experimental's server packages on sid, in a chroot
#                of its own: experimental is added to its apt sources,
#                pinned below sid (priority 1) but for the packages of
#                PostgreSQL 19 (experimental_packages), which come from
#                there; the rest is sid's.
#   15-asan      bookworm's source package of 15, built on the host with
#                --enable-cassert --enable-debug --enable-tap-tests and
#                gcc's AddressSanitizer and UndefinedBehaviorSanitizer
#                (-fsanitize=address,undefined); idem is built with the same
#                flags, which PGXS takes from its pg_config.  It is the
#                assert build of 15 too: 15-cassert is another name of it,
#                so that one run of the suite serves both.
#   17-cassert   trixie's source package of 17, built in the trixie chroot
#                with --enable-cassert --enable-debug --enable-tap-tests
#   15-sql       the servers of 15 and 18 for the SQL edition (idem_sql/):
#   18-sql       test/run.sh installs idem_sql there instead of idem, and
#                runs the tests that apply to it (no C library, no preload)
#
# In the chroots of packaged servers, Citus too (it is not in Debian):
# built from CITUS_SRC (a source tree, or a tarball of one), or else from
# the tarball in ../shared/vendor beside the checkout, against the packaged
# server in the chroot, and kept there in /opt/idem-citus/pgNN, for the
# majors that source's configure accepts (16 to 18 for the vendored one).
# Elsewhere the Citus test skips, and says why (IDEM_CITUS_SKIP).
#
# The programs of 15-asan run with the sanitizers' settings of
# sanitizer_env: leaks are not reported (a server keeps its memory until it
# exits, by design); an ASan report ends the process with abort(), so that a
# backend's is a crash, which the postmaster and the test see; a UBSan
# report is printed and the process goes on, so that none hides the next.
# ASan's reports go to DIR/report.PID, whoever reads the process's stderr,
# where DIR is IDEM_SANITIZER_LOGS (test/matrix.sh sets it to the run's
# outputs); UBSan's go to stderr (a server's: its log), and so do ASan's in
# a backend after a UBSan report (sanitizer_env says why).  The servers get
# a larger max_stack_depth.
#
# The chroots are made with debootstrap --variant=minbase from the Debian
# mirror that the host's own apt sources name (read at run time; no mirror
# is written down here), and run with /proc, /dev, /dev/pts and /dev/shm
# bound in a private mount namespace, so that the mounts go away with the
# command however it ends, and are unmounted explicitly before that.
#
# Usage:
#   test/servers.sh prepare FLAVOUR       make (or find cached) FLAVOUR's server
#   test/servers.sh run FLAVOUR CMD...    run CMD where FLAVOUR's server is,
#                                         with PG_CONFIG set to it
#   test/servers.sh kit FROM INTO TREE    FROM's server with idem (from TREE) in
#                                         INTO's chroot, for upgrade tests
#                                         (cached while TREE and FROM's
#                                         server stay the same)
#   test/servers.sh chroot FLAVOUR        where FLAVOUR's chroot is (if it has one)
#   test/servers.sh host-packages         install what making them takes here
#   test/servers.sh mirror                the mirror the chroots come from
#   test/servers.sh flavours              the flavours, one a line
#   test/servers.sh name FLAVOUR          the flavour FLAVOUR names (15-asan
#                                         for 15-cassert; itself otherwise)
#
# The cache is IDEM_CACHE (default /var/cache/idem); making it needs root.
# Each cached piece is marked done only when it is whole, with the recipe's
# version, so a run that was killed half-way starts that piece again.
set -uo pipefail
# what is made here is read by the postgres user, whatever root's umask
umask 022

IDEM_CACHE=${IDEM_CACHE:-/var/cache/idem}
# Raise when what is made changes, so that caches made before are remade:
# the chroots, and the servers built from source.
CHROOT_RECIPE=1
BUILD_RECIPE=2
CITUS_RECIPE=1
KIT_RECIPE=1
FLAVOURS=(15 17 18 19 15-asan 17-cassert 15-sql 18-sql)
APT=(apt-get -o DPkg::Lock::Timeout=900 -o APT::Install-Recommends=false -y -qq)
export DEBIAN_FRONTEND=noninteractive

die() {
	echo "servers.sh: $*" >&2
	exit 1
}

# The Debian release and where its packages are, per flavour.
codename_of() {
	case "$1" in
		15|15-asan|15-sql) echo bookworm ;;
		17|17-cassert) echo trixie ;;
		18|19|18-sql) echo sid ;;
		*) die "unknown server flavour '$1' (one of: ${FLAVOURS[*]})" ;;
	esac
}

major_of() {
	echo "${1%%-*}"
}

# The flavour whose server flavour $1 runs on: a -sql flavour's is its
# major's packaged server (15-sql: 15); the others' their own
server_of() {
	echo "${1%-sql}"
}

# The suite, besides its release, that flavour $1's server packages come
# from (none: the release's own)
server_suite_of() {
	case "$1" in
		19) echo experimental ;;
	esac
}

# What of experimental a chroot takes (apt_preferences(5) patterns): the
# server of major $1, its client and headers, and its extensions; libpq
# too, which a server newer than its release needs at its own version.
experimental_packages() {
	echo "postgresql-$1 postgresql-$1-* postgresql-client-$1 postgresql-server-dev-$1 libpq5 libpq-dev"
}

# The flavour that name $1 stands for: the assert build of 15 is the
# sanitizer build, which has assertions on as well
flavour_name() {
	case "$1" in
		15-cassert) echo 15-asan ;;
		*) echo "$1" ;;
	esac
}

# 15 and 15-asan run on the host; the others in a chroot
in_chroot() {
	[ "$(codename_of "$1")" != bookworm ]
}

# chroot-<release>, or chroot-<release><major> for a server from another
# suite (chroot-sid19): a chroot of its own, so that the release's own
# chroot never sees that suite
chroot_dir() {
	local suffix=""
	[ -n "$(server_suite_of "$1")" ] && suffix=$(major_of "$1")
	echo "$IDEM_CACHE/chroot-$(codename_of "$1")$suffix"
}

# The prefix a source build is installed in: in the cache on the host, in
# /opt inside a chroot (which is itself in the cache)
cassert_prefix() {
	if in_chroot "$1"; then
		echo "/opt/idem-pg$1"
	else
		echo "$IDEM_CACHE/pg$1"
	fi
}

# Has marker file $1 been written by a whole making of recipe $2?
made() {
	[ "$(cat "$1" 2>/dev/null)" = "$2" ]
}

# The marker of assert server $1's build, as seen from here
build_marker() {
	local root=""
	in_chroot "$1" && root=$(chroot_dir "$1")
	echo "$root$(cassert_prefix "$1")/.idem-ready"
}

# Hold lock $1 (a name in the cache) until the (sub)shell exits, so that two
# runs never make the same piece at once.
hold_lock() {
	local fd
	exec {fd}>"$IDEM_CACHE/.lock-$1"
	flock "$fd"
}

# The Debian mirror of the host's apt sources: the site of the index whose
# label is "Debian" and whose release is the distribution itself (not its
# -updates or -security).
mirror() {
	local format='$(SITE) $(LABEL) $(RELEASE) $(CODENAME)' targets site
	targets=$(apt-get indextargets --format "$format" 2>/dev/null)
	if [ -z "$targets" ]; then
		# apt's lists are not there yet
		apt-get -o DPkg::Lock::Timeout=900 update -qq >&2 || true
		targets=$(apt-get indextargets --format "$format" 2>/dev/null)
	fi
	site=$(awk '$2 == "Debian" && $3 == $4 { print $1; exit }' <<<"$targets")
	if [ -z "$site" ]; then
		# sources that name a suite (stable) rather than the release
		site=$(awk '$2 == "Debian" && $3 !~ /-(updates|security|backports)$/ { print $1; exit }' <<<"$targets")
	fi
	[ -n "$site" ] || die "no Debian mirror found in the apt sources"
	echo "$site"
}

# Install host packages $@ that are missing.
host_install() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} = 0 ] && return 0
	echo "servers.sh: installing ${missing[*]}" >&2
	"${APT[@]}" update >/dev/null || true
	"${APT[@]}" install "${missing[@]}" >/dev/null
}

# Run $2... inside chroot $1 in a private mount namespace with /proc, /dev,
# /dev/pts and /dev/shm bound; the mounts are undone when the command ends,
# also when it fails or is killed (the namespace dies with it).
chroot_exec() {
	local root=$1
	shift
	unshare --mount --propagation private -- bash -c '
		root=$1; shift
		undo() {
			for m in dev/shm dev/pts dev proc; do
				mountpoint -q "$root/$m" && umount -l "$root/$m"
			done
		}
		trap undo EXIT
		trap "exit 143" TERM INT HUP
		mount --bind /proc "$root/proc" &&
		mount --bind /dev "$root/dev" &&
		mount --bind /dev/pts "$root/dev/pts" &&
		mount --bind /dev/shm "$root/dev/shm" || exit 1
		chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			DEBIAN_FRONTEND=noninteractive CI="${CI:-}" "$@"
	' chroot-exec "$root" "$@"
}

# Make the chroot of release $1 at $2 (if not cached) for PostgreSQL $3,
# whose packages come from suite $4 if given (pinned: apt takes nothing
# else from it): debootstrap minbase, then the server, its headers and a
# compiler.  The rest of what the tests need is installed by test/deps.sh
# inside it, as on the host.
make_chroot() (
	local codename=$1 root=$2 major=$3 suite=${4:-} site
	hold_lock "$(basename "$root")"
	made "$root/.idem-ready" "$CHROOT_RECIPE" && return 0
	site=$(mirror) || exit 1
	echo "servers.sh: making the $codename chroot in $root from $site" >&2
	mkdir -p "$(dirname "$root")"
	# a tree a killed run left half made is made again; debootstrap's own
	# mounts (proc, sys) stay in a private mount namespace, gone with it
	for d in "$root.tmp" "$root"; do
		if findmnt -rn -o TARGET | grep -q "^$d/"; then
			die "something is still mounted below $d: unmount it first"
		fi
		rm -rf --one-file-system "$d"
	done
	unshare --mount --propagation private -- \
		debootstrap --variant=minbase "$codename" "$root.tmp" "$site" >"$root.debootstrap.log" 2>&1 || {
		tail -n 20 "$root.debootstrap.log" >&2
		die "debootstrap $codename failed (log: $root.debootstrap.log)"
	}
	mv "$root.tmp" "$root"
	# No services start inside; no cluster is made by the server package.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod +x "$root/usr/sbin/policy-rc.d"
	mkdir -p "$root/etc/postgresql-common"
	echo "create_main_cluster = false" >"$root/etc/postgresql-common/createcluster.conf"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	# A mirror may serve a release whose signed Release file has passed its
	# Valid-Until date (a frozen copy of unstable): take it all the same.
	echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99idem"
	if [ -n "$suite" ]; then
		echo "deb $site $suite main" >"$root/etc/apt/sources.list.d/idem-$suite.list"
		printf 'Package: *\nPin: release a=%s\nPin-Priority: 1\n\nPackage: %s\nPin: release a=%s\nPin-Priority: 500\n' \
			"$suite" "$(experimental_packages "$major")" "$suite" >"$root/etc/apt/preferences.d/idem-$suite"
	fi
	chroot_exec "$root" "${APT[@]}" update &&
	chroot_exec "$root" "${APT[@]}" install \
		"postgresql-$major" "postgresql-server-dev-$major" build-essential \
		libssl-dev openssl locales-all ca-certificates >/dev/null ||
		die "installing PostgreSQL $major in the $codename${suite:+ (+$suite)} chroot failed"
	# and what the tests need there, as test/deps.sh installs it on a host
	cp "$(dirname "${BASH_SOURCE[0]}")/deps.sh" "$root/tmp/idem-deps.sh" &&
	chroot_exec "$root" env IDEM_PG_MAJOR="$major" IDEM_APP_DEPS=0 bash /tmp/idem-deps.sh ||
		die "installing the tests' packages in the $codename chroot failed"
	rm -f "$root/tmp/idem-deps.sh"
	echo "$CHROOT_RECIPE" >"$root/.idem-ready"
)

# Fetch and unpack the Debian source package $2 of release $1 into $3, with a
# private apt configuration (a deb-src line for the same mirror) that leaves
# the host's own apt alone.
fetch_source() {
	local codename=$1 pkg=$2 dest=$3 site apt
	site=$(mirror) || exit 1
	apt=$IDEM_CACHE/apt-src-$codename
	rm -rf "$apt"
	mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$dest"
	echo "deb-src $site $codename main" >"$apt/sources.list"
	local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
		-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root"
		-o "Acquire::Check-Valid-Until=false")
	apt-get "${opts[@]}" -qq update || die "apt-get update for the $codename sources failed"
	if ! (cd "$dest" && apt-get "${opts[@]}" -qq --download-only source "$pkg" 2>"$dest/apt.log"); then
		fetch_earlier_source "$site" "$pkg" \
			"$(apt-cache "${opts[@]}" showsrc "$pkg" 2>/dev/null | sed -n 's/^Version: //p' | head -n 1)" \
			"$dest" || { cat "$dest/apt.log" >&2; die "apt-get source $pkg ($codename) failed"; }
	fi
	rm -rf "$apt"
	unpack_source "$dest"
}

# A mirror may list a stable point release in its Sources index before (or
# without) serving its files.  Then take the newest earlier point release of
# the same Debian revision (17.11-0+deb13u1 for 17.12-0+deb13u1) that it
# does serve, straight from the pool: dpkg-source checks the files against
# the checksums of its .dsc.  For PostgreSQL's own source packages only.
fetch_earlier_source() {
	local site=$1 pkg=$2 version=$3 dest=$4 upstream revision minor m dir f
	case "$pkg" in postgresql-[0-9]*) ;; *) return 1 ;; esac
	upstream=${version%%-*}
	revision=${version#*-}
	minor=${upstream#*.}
	[ -n "$version" ] && [ "$upstream" != "$version" ] && [ "$minor" -gt 0 ] 2>/dev/null || return 1
	dir=$site/pool/main/p/$pkg
	for m in $(seq $((minor - 1)) -1 $((minor > 6 ? minor - 6 : 0))); do
		f=${pkg}_${upstream%%.*}.$m-$revision.dsc
		curl -fsS -o "$dest/$f" "$dir/${f//+/%2b}" 2>/dev/null || continue
		echo "servers.sh: the mirror has no files of $pkg $version: taking ${f%.dsc}" >&2
		for f in $(awk '/^Files:/ { on = 1; next } /^[^ ]/ { on = 0 } on { print $3 }' "$dest/$f"); do
			curl -fsS -o "$dest/$f" "$dir/${f//+/%2b}" || return 1
		done
		return 0
	done
	return 1
}

# Unpack the source package fetched into $1 as $1/src, with Debian's patches
# but the one that puts a server's modules in /usr/lib/postgresql/NN/lib
# whatever the prefix (it would overwrite the packaged server's).
unpack_source() {
	local dest=$1 p opts
	(cd "$dest" && dpkg-source -x --skip-patches ./*.dsc src >/dev/null 2>&1) || die "unpacking $(ls "$dest"/*.dsc) failed"
	[ -f "$dest/src/debian/patches/series" ] || return 0
	while read -r p opts; do
		case "$p" in ''|'#'*|*per-version-dirs*) continue ;; esac
		patch -d "$dest/src" -s -p1 ${opts:-} <"$dest/src/debian/patches/$p" ||
			die "applying Debian's patch $p failed"
	done <"$dest/src/debian/patches/series"
}

# The shell commands that configure, build and install PostgreSQL from the
# unpacked source in $1 into prefix $2 with assertions on, with the contrib
# modules (pgcrypto) and the TAP test modules, and then pg_cron, PL/Proxy
# and pg_auto_failover from their own source packages in $1/../ext-*.
# $3, when given, are the sanitizers to build with (address,undefined):
# pg_config then hands the same flags to every extension built against it.
build_commands() {
	local src=$1 prefix=$2 sanitize=${3:-} flags=""
	if [ -n "$sanitize" ]; then
		# -O1 and frame pointers: the stacks of the reports are whole
		flags="CFLAGS='-O1 -fsanitize=$sanitize -fno-omit-frame-pointer' LDFLAGS='-fsanitize=$sanitize'"
	fi
	cat <<-EOS
		set -e
		# configure's probes and the tools run while installing leak, by
		# design: LeakSanitizer would fail them
		export ASAN_OPTIONS=detect_leaks=0
		cd '$src'
		./configure --prefix='$prefix' --enable-cassert --enable-debug --enable-tap-tests \
			--with-openssl --without-readline --without-icu --without-llvm $flags >configure.log 2>&1 \
			|| { tail -n 30 configure.log; exit 1; }
		# the generated headers first: world-bin's recursion does not wait
		# for them, and a parallel build may compile src/common before
		make -s -C src/backend generated-headers >build.log 2>&1 &&
		make -s -j\$(nproc) world-bin >>build.log 2>&1 || { tail -n 40 build.log; exit 1; }
		make -s install-world-bin >>build.log 2>&1 || { tail -n 40 build.log; exit 1; }
		for ext in ../ext-*/src; do
			[ -d "\$ext" ] || continue
			make -s -C "\$ext" PG_CONFIG='$prefix/bin/pg_config' USE_PGXS=1 >>build.log 2>&1 &&
			make -s -C "\$ext" PG_CONFIG='$prefix/bin/pg_config' USE_PGXS=1 install >>build.log 2>&1 ||
				echo "building \$ext against the assert build failed: its tests will skip" >&2
		done
	EOS
}

# The build dependencies of a PostgreSQL source build (configure options of
# build_commands) and of the extensions built with it; libasan8 and
# libubsan1 are the runtimes of gcc's sanitizers.
BUILD_DEPS=(build-essential bison flex libssl-dev zlib1g-dev libxml2-dev libipc-run-perl
	perl pkg-config libkrb5-dev libselinux1-dev libreadline-dev libasan8 libubsan1)

# Make the assert-enabled server of flavour $1 (if not cached).
make_cassert() (
	local flavour=$1 codename major prefix root="" work marker sanitize=""
	codename=$(codename_of "$flavour")
	major=$(major_of "$flavour")
	prefix=$(cassert_prefix "$flavour")
	if in_chroot "$flavour"; then
		make_chroot "$codename" "$(chroot_dir "$flavour")" "$major" || exit 1
		root=$(chroot_dir "$flavour")
	fi
	marker=$(build_marker "$flavour")
	hold_lock "$flavour"
	made "$marker" "$BUILD_RECIPE" && return 0
	case "$flavour" in
		*-asan)
			sanitize=address,undefined
			echo "servers.sh: building PostgreSQL $major from $codename's source package with assertions, ASan and UBSan on" >&2
			;;
		*) echo "servers.sh: building PostgreSQL $major from $codename's source package with assertions on" >&2 ;;
	esac
	# the sources and the build, inside the chroot or in this cache's own
	# directory (two caches never share one)
	if [ -n "$root" ]; then
		work=$root/var/tmp/idem-build-$flavour
	else
		work=$IDEM_CACHE/build-$flavour
	fi
	rm -rf "$work" "$root$prefix"
	fetch_source "$codename" "postgresql-$major" "$work"
	# pg_cron for its test; without it that test skips on this server
	(fetch_source "$codename" pg-cron "$work/ext-pg_cron") ||
		echo "servers.sh: no pg_cron source: test/tap/components/004 will skip on $flavour" >&2
	if [ -n "$root" ]; then
		chroot_exec "$root" "${APT[@]}" install \
			"${BUILD_DEPS[@]}" >/dev/null || die "installing build dependencies in $root failed"
		build_commands "${work#"$root"}/src" "$prefix" "$sanitize" | chroot_exec "$root" bash ||
			die "building $flavour failed (logs in $work/src)"
	else
		build_commands "$work/src" "$prefix" "$sanitize" | bash || die "building $flavour failed (logs in $work/src)"
	fi
	rm -rf "$work"
	echo "$BUILD_RECIPE" >"$marker"
)

# The Citus source to build: CITUS_SRC, or the newest tarball in the
# shared/vendor directory beside the checkout; false when there is none.
citus_source() {
	local f
	if [ -n "${CITUS_SRC:-}" ]; then
		[ -e "$CITUS_SRC" ] || die "CITUS_SRC ($CITUS_SRC) does not exist"
		realpath "$CITUS_SRC"
		return 0
	fi
	f=$(ls -1 "$(dirname "${BASH_SOURCE[0]}")"/../../shared/vendor/citus-*.tar.gz 2>/dev/null | tail -n 1)
	[ -n "$f" ] && realpath "$f"
}

# The pg_tle source that 129_sql_edition.pl builds: PG_TLE_SRC, or the
# newest tarball in the shared/vendor directory beside the checkout; false
# when there is none.
pg_tle_source() {
	local f
	if [ -n "${PG_TLE_SRC:-}" ]; then
		[ -e "$PG_TLE_SRC" ] && realpath "$PG_TLE_SRC"
		return
	fi
	f=$(ls -1 "$(dirname "${BASH_SOURCE[0]}")"/../../shared/vendor/pg_tle-*.tar.gz 2>/dev/null | tail -n 1)
	[ -n "$f" ] && realpath "$f"
}

# The PostgreSQL majors that Citus source $1 builds for, one a line: those
# its configure accepts ("Citus is not compatible with the detected
# PostgreSQL version" for the others)
citus_majors() {
	local src=$1 conf
	if [ -d "$src" ]; then
		conf=$(cat "$src/configure")
	else
		conf=$(tar -xzf "$src" -O "$(tar -tzf "$src" | awk -F/ 'NF == 2 && $2 == "configure" { print; exit }')")
	fi 2>/dev/null
	grep -E '^ *(el)?if test "\$version_num" != ' <<<"$conf" | grep -oE "'[0-9]+'" | tr -d "'"
}

# Does flavour $1 get Citus?  True for a packaged server in a chroot that
# the Citus source builds for; else false, and prints why not.
citus_for() {
	local flavour=$1 src majors
	case "$flavour" in
		*-cassert|*-asan) echo "Citus is built for Debian's servers only, not for this one built from source"; return 1 ;;
		*-sql) echo "the SQL edition's runs have no Citus test"; return 1 ;;
	esac
	if ! in_chroot "$flavour"; then
		echo "Citus is built in the chroots only, not for the host's $flavour"
		return 1
	fi
	src=$(citus_source) || { echo "Citus source not found (set CITUS_SRC)"; return 1; }
	majors=$(citus_majors "$src" | paste -sd ' ')
	[ -n "$majors" ] || { echo "no PostgreSQL versions found in the configure of $(basename "$src")"; return 1; }
	case " $majors " in
		*" $(major_of "$flavour") "*) return 0 ;;
	esac
	majors=${majors// /, }
	case "$majors" in *", "*) majors="${majors%, *} and ${majors##*, }" ;; esac
	echo "the Citus of $(basename "$src") supports PostgreSQL $majors only:" \
		"its configure refuses $(major_of "$flavour"), which needs a newer Citus"
	return 1
}

# Where flavour $1's Citus is installed, as seen in its chroot
citus_dir() {
	echo "/opt/idem-citus/pg$(major_of "$1")"
}

# The build dependencies of Citus (its configure: ICU, lz4, zstd, curl,
# Kerberos for libpq's headers)
CITUS_DEPS=(libicu-dev liblz4-dev libzstd-dev libcurl4-openssl-dev libkrb5-dev)

# Make Citus for flavour $1 (citus_for) from source $2, if not cached with
# that source's checksum: configure and make inside the chroot, against its
# packaged server, installed with DESTDIR into citus_dir (its usr/lib and
# usr/share hold the module and the extension's files).
make_citus() (
	local flavour=$1 src=$2 root major dest sum work
	root=$(chroot_dir "$flavour")
	major=$(major_of "$flavour")
	dest=$(citus_dir "$flavour")
	if [ -d "$src" ]; then
		sum=$(tar -C "$src" --exclude=./.git --sort=name --mtime=@0 -cf - . | sha256sum | cut -c 1-16)
	else
		sum=$(sha256sum <"$src" | cut -c 1-16)
	fi
	made "$root$dest/.idem-ready" "$CITUS_RECIPE $sum" && return 0
	[ "$(id -u)" = 0 ] || die "making Citus for $flavour needs root"
	hold_lock "citus-$flavour"
	made "$root$dest/.idem-ready" "$CITUS_RECIPE $sum" && return 0
	echo "servers.sh: building Citus for PostgreSQL $major from $src" >&2
	chroot_exec "$root" "${APT[@]}" install "${CITUS_DEPS[@]}" >/dev/null ||
		die "installing Citus's build dependencies in $root failed"
	work=/var/tmp/idem-citus-build-$major
	rm -rf "${root:?}$work" "${root:?}$dest"
	mkdir -p "$root$work"
	if [ -d "$src" ]; then
		tar -C "$src" --exclude=./.git -cf - . | tar -C "$root$work" -xf -
	else
		tar -C "$root$work" --strip-components=1 -xzf "$src"
	fi || die "unpacking $src failed"
	chroot_exec "$root" bash -c "cd $work &&
		{ ./configure PG_CONFIG=/usr/lib/postgresql/$major/bin/pg_config >configure.log 2>&1 ||
			{ tail -n 30 configure.log; exit 1; }; } &&
		{ make -s -j\$(nproc) >build.log 2>&1 && make -s install DESTDIR=$dest >>build.log 2>&1 ||
			{ tail -n 40 build.log; exit 1; }; }" >&2 ||
		die "building Citus for $flavour failed (logs in $root$work)"
	rm -rf "${root:?}$work"
	echo "$CITUS_RECIPE $sum" >"$root$dest/.idem-ready"
)

# Is flavour $1's server there already (nothing to make, no root needed)?
# 15 is the host's: test/deps.sh, which installs what is missing, decides.
ready() {
	case "$(server_of "$1")" in
		15) return 1 ;;
		*-cassert|*-asan)
			made "$(build_marker "$1")" "$BUILD_RECIPE" &&
				{ ! in_chroot "$1" || made "$(chroot_dir "$1")/.idem-ready" "$CHROOT_RECIPE"; }
			;;
		*) made "$(chroot_dir "$1")/.idem-ready" "$CHROOT_RECIPE" ;;
	esac
}

# What making the servers takes on the host, installed in one go (a run
# that makes several at once then never runs apt on the host twice at once)
host_packages() {
	host_install debootstrap dpkg-dev patch curl "${BUILD_DEPS[@]}"
}

# Make flavour $1's server (whatever of it is not cached), without Citus.
prepare_server() {
	local flavour
	codename_of "$1" >/dev/null
	flavour=$(server_of "$1")
	if [ "$flavour" = 15 ]; then
		# the host's packages: deps.sh installs them as root, or through sudo
		IDEM_PG_MAJOR=15 bash "$(dirname "${BASH_SOURCE[0]}")/deps.sh" >&2 || exit 1
		return 0
	fi
	ready "$flavour" && return 0
	[ "$(id -u)" = 0 ] || die "making the $flavour server needs root"
	mkdir -p "$IDEM_CACHE"
	host_packages || exit 1
	case "$flavour" in
		*-cassert|*-asan) make_cassert "$flavour" || exit 1 ;;
		*) make_chroot "$(codename_of "$flavour")" "$(chroot_dir "$flavour")" "$(major_of "$flavour")" \
			"$(server_suite_of "$flavour")" || exit 1 ;;
	esac
}

# Make flavour $1's server, and Citus for it where it has Citus (citus_for).
prepare() {
	local src
	prepare_server "$1" || exit 1
	citus_for "$1" >/dev/null || return 0
	src=$(citus_source) || return 0
	make_citus "$1" "$src" || exit 1
}

# Run $2... for flavour $1, with PG_CONFIG and IDEM_PG_MAJOR set for it.
run() {
	local flavour=$1 pgc root=""
	shift
	prepare "$flavour" || exit 1
	case "$flavour" in
		*-cassert|*-asan) pgc=$(cassert_prefix "$flavour")/bin/pg_config ;;
		*) pgc=/usr/lib/postgresql/$(major_of "$flavour")/bin/pg_config ;;
	esac
	in_chroot "$flavour" && root=$(chroot_dir "$flavour")
	sanitizer_env "$flavour" "$root" || exit 1
	if [ -n "$root" ]; then
		# Citus, if it was made for this flavour (prepare), or why not
		local citus="" why
		if why=$(citus_for "$flavour"); then
			[ -f "$root$(citus_dir "$flavour")/.idem-ready" ] && citus=$(citus_dir "$flavour")
		fi
		# pg_tle's source, copied in where the test finds it (a tarball)
		local tle="" src
		if src=$(pg_tle_source) && [ -f "$src" ]; then
			mkdir -p "$root/opt/idem-vendor" &&
				cp "$src" "$root/opt/idem-vendor/" &&
				tle=/opt/idem-vendor/$(basename "$src")
		fi
		# the application runtimes are the host's only (test/deps.sh)
		chroot_exec "$root" env PG_CONFIG="$pgc" IDEM_APP_DEPS=0 IDEM_CITUS="$citus" IDEM_CITUS_SKIP="$why" \
			PG_TLE_SRC="$tle" \
			IDEM_PG_MAJOR="$(major_of "$flavour")" IDEM_FLAVOUR="$flavour" "${sanitizers[@]}" "$@"
	else
		env PG_CONFIG="$pgc" IDEM_PG_MAJOR="$(major_of "$flavour")" IDEM_FLAVOUR="$flavour" \
			IDEM_CITUS_SKIP="$(citus_for "$flavour")" "${sanitizers[@]}" "$@"
	fi
}

# The sanitizers' settings for the programs of flavour $1 (whose chroot, if
# any, is $2) into sanitizers, as NAME=value words for env; none but for a
# sanitizer build.  Every program of the run inherits them: pg_regress's,
# the isolation tester's and the TAP tests' servers, and the client
# programs.  Their directory, IDEM_SANITIZER_LOGS (a path as seen by the
# run; by default /tmp/idem-sanitizer-<flavour>), is made writable by all:
# the servers run as postgres, make and pg_config as whoever runs the tests.
sanitizer_env() {
	local dir=${IDEM_SANITIZER_LOGS:-/tmp/idem-sanitizer-$1}
	sanitizers=()
	case "$1" in *-asan) ;; *) return 0 ;; esac
	mkdir -p "$2$dir" && chmod 1777 "$2$dir" || die "cannot make $2$dir"
	# Every server of the run (TEMP_CONFIG: the TAP tests'; --temp-config:
	# pg_regress's and the isolation tester's) gets 6MB of stack, not 2MB:
	# the sanitizers' frames are about three times as large, and core's
	# own JSON parser stops at 6,700 levels of nesting with 2MB, where
	# the tests ask for 10,000.  (8MB, the usual ulimit -s, allows it.)
	echo "max_stack_depth = 6MB" >"$2$dir/server.conf" || die "cannot write $2$dir/server.conf"
	# detect_stack_use_after_return stays off: its fake frames are on the
	# heap, and the server's stack depth check measures the stack by the
	# addresses of locals.
	# gcc's UBSan is a runtime of its own next to ASan's, which reads its
	# options at its first report, from /proc/self/environ: in a backend
	# the process title has been written over that by then, so there it
	# runs with its defaults (report, go on, no stack) and writes to
	# stderr, the server's log, whatever log_path says; and it then points
	# ASan's reports of that process to stderr too.  Elsewhere (psql, a
	# --single server) it reads these, where log_path keeps ASan's in DIR.
	sanitizers=("ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0:log_path=$dir/report"
		"UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=0:log_path=$dir/report"
		"TEMP_CONFIG=$dir/server.conf"
		"EXTRA_REGRESS_OPTS=${EXTRA_REGRESS_OPTS:+$EXTRA_REGRESS_OPTS }--temp-config=$dir/server.conf")
}

# An older server for the tests across major versions, inside flavour $2's
# chroot: flavour $1's packaged server (bin, lib, share), with idem built
# from tree $3 for it and installed into it, at /opt/idem-kit/pgNN there, and
# in its compat-lib/ the shared libraries it needs that $2's release lacks
# (ICU and LDAP of an older soname).  Prints the kit's path in the chroot.
# The server with idem is made once in the cache (kit-pgNN) for every
# chroot it goes into, and both are kept while the tree and $1's server
# stay the same (kit_stamp): a run whose tree did not change since the
# last one builds nothing.
kit() (
	local from=$1 into=$2 tree=$3 major stamp base dest
	major=$(major_of "$from")
	case "$from" in 15|17|18) ;; *) die "no kit of flavour $from" ;; esac
	in_chroot "$into" || die "a kit goes into a chroot flavour, not $into"
	[ "$major" -lt "$(major_of "$into")" ] || die "a kit of $from is not older than $into"
	# the servers only: a kit needs no Citus
	prepare_server "$from" >&2 || exit 1
	prepare_server "$into" >&2 || exit 1
	base=$IDEM_CACHE/kit-pg$major
	dest=$(chroot_dir "$into")/opt/idem-kit/pg$major
	hold_lock "kit-pg$major"
	stamp=$(kit_stamp "$from" "$tree") || exit 1
	if ! made "$dest/.idem-ready" "$stamp"; then
		made "$base/.idem-ready" "$stamp" || make_kit_base "$from" "$tree" "$base" || exit 1
		echo "$stamp" >"$base/.idem-ready"
		echo "servers.sh: putting the $major kit into $(chroot_dir "$into")" >&2
		rm -rf "$dest"
		mkdir -p "$(dirname "$dest")"
		cp -a "$base" "$dest" && rm -f "$dest/.idem-ready" || die "copying the $major kit failed"
		kit_compat_libs "$from" "$into" "$dest" || exit 1
		echo "$stamp" >"$dest/.idem-ready"
	fi
	echo "/opt/idem-kit/pg$major"
)

# What a kit of flavour $1 with idem from tree $2 is made of, on one line:
# the recipe, the version of the server's package and a checksum of what of
# the tree (idem_copy_tree's files) its build and install read: the
# Makefile, the control file, the SQL scripts and src/
kit_stamp() {
	local from=$1 tree=$2 src_root=/ version sum tmp
	in_chroot "$from" && src_root=$(chroot_dir "$from")
	version=$(dpkg-query --admindir="${src_root%/}/var/lib/dpkg" -W -f='${Version}' \
		"postgresql-$(major_of "$from")" 2>/dev/null) || die "no postgresql-$(major_of "$from") package in $src_root"
	tmp=$(mktemp -d) || exit 1
	sum=$(. "$tree/test/lib.sh" && idem_copy_tree "$tmp" && cd "$tmp" &&
		tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - Makefile ./*.control ./*.sql src |
		sha256sum) ||
		{ rm -rf "$tmp"; die "reading $tree failed"; }
	rm -rf "$tmp"
	echo "$KIT_RECIPE $version ${sum:0:16}"
}

# Make the kit of flavour $1 with idem from tree $2 at $3 (on the host):
# the server's files, and idem built where that server's headers are and
# installed into them
make_kit_base() {
	local from=$1 tree=$2 base=$3 major src_root=/ build inst cmd
	major=$(major_of "$from")
	in_chroot "$from" && src_root=$(chroot_dir "$from")
	echo "servers.sh: making the $major kit (its server, and idem built for it) in $base" >&2
	rm -rf "$base"
	mkdir -p "$base/usr/lib/postgresql" "$base/usr/share/postgresql" "$base/compat-lib"
	cp -a "${src_root%/}/usr/lib/postgresql/$major" "$base/usr/lib/postgresql/" &&
	cp -a "${src_root%/}/usr/share/postgresql/$major" "$base/usr/share/postgresql/" ||
		die "copying the $major server failed"
	build=/tmp/idem-kit-build-$major
	inst=/tmp/idem-kit-inst-$major
	rm -rf "${src_root%/}$build" "${src_root%/}$inst"
	mkdir -p "${src_root%/}$build"
	cmd="make -s -C $build PG_CONFIG=/usr/lib/postgresql/$major/bin/pg_config >/dev/null &&
		make -s -C $build install PG_CONFIG=/usr/lib/postgresql/$major/bin/pg_config DESTDIR=$inst >/dev/null"
	(. "$tree/test/lib.sh" && idem_copy_tree "${src_root%/}$build") &&
	if [ "$src_root" = / ]; then bash -c "$cmd"; else chroot_exec "$src_root" bash -c "$cmd"; fi ||
		die "building idem for the $major kit failed"
	cp -a "${src_root%/}$inst/." "$base/" || die "installing idem into the $major kit failed"
	rm -rf "${src_root%/}$build" "${src_root%/}$inst"
}

# Copy into kit $3 (of flavour $1, in flavour $2's chroot) the libraries
# its files need that $2's release lacks, from the release they were built
# on (and what those need in turn)
kit_compat_libs() {
	local from=$1 into=$2 dest=$3 major src_root=/ missing lib f round
	major=$(major_of "$from")
	in_chroot "$from" && src_root=$(chroot_dir "$from")
	for round in 1 2 3 4; do
		mapfile -t missing < <(chroot_exec "$(chroot_dir "$into")" env LD_LIBRARY_PATH="/opt/idem-kit/pg$major/compat-lib" \
			bash -c "find /opt/idem-kit/pg$major -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
				xargs -0 ldd 2>/dev/null" | awk '/=> not found/ { print $1 }' | sort -u)
		[ ${#missing[@]} = 0 ] && return 0
		for lib in "${missing[@]}"; do
			if [ "$src_root" = / ]; then
				f=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ { print $NF; exit }')
			else
				f=$(chroot "$src_root" ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ { print $NF; exit }')
				[ -n "$f" ] && f=$src_root$f
			fi
			[ -n "$f" ] || die "the $major kit needs $lib, which its own release lacks too"
			cp -L "$f" "$dest/compat-lib/$lib"
		done
	done
}

# The command line
main() {
	# a flavour's other name stands for it wherever a flavour is named
	case "${1:-}" in
		prepare|run|chroot|name) [ $# -ge 2 ] && set -- "$1" "$(flavour_name "$2")" "${@:3}" ;;
		kit) [ $# = 4 ] && set -- "$1" "$(flavour_name "$2")" "$(flavour_name "$3")" "$4" ;;
	esac
	case "${1:-}" in
		prepare) [ $# = 2 ] || die "usage: $0 prepare FLAVOUR"; prepare "$2" ;;
		run) [ $# -ge 3 ] || die "usage: $0 run FLAVOUR CMD..."; shift; run "$@" ;;
		host-packages) host_packages ;;
		kit) [ $# = 4 ] || die "usage: $0 kit FROM INTO TREE"; kit "$2" "$3" "$4" ;;
		mirror) mirror ;;
		chroot) [ $# = 2 ] || die "usage: $0 chroot FLAVOUR"; in_chroot "$2" && chroot_dir "$2" ;;
		flavours) printf '%s\n' "${FLAVOURS[@]}" ;;
		name) [ $# = 2 ] || die "usage: $0 name FLAVOUR"; codename_of "$2" >/dev/null && echo "$2" ;;
		*) die "usage: $0 prepare|run|kit|mirror|chroot|flavours|name ..." ;;
	esac
}

# On one line: a run goes on reading this file after main returns.
main "$@"; exit $?
