#!/usr/bin/env bash
# make fuzz: build the fuzz targets of test/fuzz (libFuzzer, AddressSanitizer
# and UndefinedBehaviorSanitizer, clang 16) into tmp_check/fuzz/, then for
# each target replay test/fuzz/regressions/<target>/ and fuzz it for
# FUZZ_SECONDS (default 60) from its corpus.  One line per target; the exit
# status is 1 when any target crashed, leaked, timed out or reported
# undefined behaviour, or failed to build.
#
#   FUZZ_SECONDS=20        seconds of fuzzing per target (0: only replay
#                          the regressions and the corpus)
#   FUZZ_TARGETS="json"    the targets to run (default: all)
#   FUZZ_MERGE=1           after the run, merge what the fuzzer found into
#                          the checked-in corpus (libFuzzer's -merge=1,
#                          which keeps only inputs with new coverage)
#   PG_CONFIG=...          the pg_config of the PostgreSQL 15 to build
#                          against (its server headers and libpgcommon)
#
# New inputs go to tmp_check/fuzz/work/<target>/, kept from run to run.  An
# input that makes a target fail is copied to test/fuzz/regressions/<target>/
# (and its log left in tmp_check/fuzz/logs/): commit it with the fix, and
# every later run replays it first.  test/fuzz/README says what each target
# reads and how the server is stood in for.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
top=$PWD

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_MERGE=${FUZZ_MERGE:-0}
ALL_TARGETS="header codec siglist keys form json envelope verify"
FUZZ_TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}
CLANG=${CLANG:-clang-16}
if [ -z "${PG_CONFIG:-}" ]; then
	if [ -x /usr/lib/postgresql/15/bin/pg_config ]; then
		PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
	else
		PG_CONFIG=pg_config
	fi
fi
out=${IDEM_BUILD:-$top/tmp_check}/fuzz

case "$FUZZ_SECONDS" in
	'' | *[!0-9]*) echo "FUZZ_SECONDS must be a number of seconds, not '$FUZZ_SECONDS'" >&2; exit 1 ;;
esac
for t in $FUZZ_TARGETS; do
	case " $ALL_TARGETS " in
		*" $t "*) ;;
		*) echo "no fuzz target '$t'; the targets are: $ALL_TARGETS" >&2; exit 1 ;;
	esac
done

# The compiler, libFuzzer and the sanitizers' runtimes, the server headers
# and OpenSSL's: test/deps.sh installs what is missing.
resource_dir=$("$CLANG" -print-resource-dir 2>/dev/null || true)
if ! command -v "$CLANG" >/dev/null 2>&1 ||
	[ ! -f "$resource_dir/lib/linux/libclang_rt.fuzzer-$(uname -m).a" ] ||
	[ ! -f "$resource_dir/lib/linux/libclang_rt.asan-$(uname -m).a" ] ||
	! "$PG_CONFIG" --includedir-server >/dev/null 2>&1 ||
	[ ! -f /usr/include/openssl/evp.h ]; then
	bash test/deps.sh
fi
version=$("$PG_CONFIG" --version)
case "$version" in
	"PostgreSQL 15."*) ;;
	*)
		# the stand-ins of test/fuzz/shim.c follow 15's server functions
		echo "the fuzz targets build against PostgreSQL 15; $PG_CONFIG is $version (set PG_CONFIG)" >&2
		exit 1
		;;
esac
# libpgcommon and libpgport: in pg_config's libdir from a source build, in
# its pkglibdir on Debian
pglib=$("$PG_CONFIG" --libdir)
[ -f "$pglib/libpgcommon_shlib.a" ] || pglib=$("$PG_CONFIG" --pkglibdir)
for lib in libpgcommon_shlib.a libpgport_shlib.a; do
	[ -f "$pglib/$lib" ] || { echo "no $lib in $PG_CONFIG's libdir or pkglibdir" >&2; exit 1; }
done

# ---- build ------------------------------------------------------------------
# idem's own sources, as the extension compiles them (its assertions on),
# and the targets; the readers' entry points verify.c and
# wechatpay_decrypt.c are called as the server calls them.  -fwrapv is left
# out on purpose: a signed overflow in a parser is reported, even where the
# server's flags would define it.
mkdir -p "$out/obj" "$out/logs"
cflags=(-g -O1 -fno-omit-frame-pointer -fno-strict-aliasing
	-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
	-DUSE_ASSERT_CHECKING -D_GNU_SOURCE "-DFUZZ_KEYS_DIR=\"$top/test/fuzz/keys\""
	-I"$top/src" -I"$top/test/fuzz" -I"$("$PG_CONFIG" --includedir-server)"
	-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare
	-Wno-missing-field-initializers -Wno-ignored-attributes)
ldflags=(-fsanitize=fuzzer,address,undefined -Wl,--wrap=pg_parse_json)
libs=("$pglib/libpgcommon_shlib.a" "$pglib/libpgport_shlib.a" -lcrypto)
idem_sources=(src/webhook/wire_*.c src/webhook/crypto_*.c src/webhook/scheme_*.c
	src/webhook/verify.c src/webhook/config.c src/webhook/wechatpay_decrypt.c)
headers=(src/*.h src/webhook/*.h test/fuzz/fuzz.h test/fuzz/run.sh)
flags_now="$CLANG ${cflags[*]}"

# Compile $1 into $2 unless $2 is newer than it, every header and the flags
compile() {
	local src=$1 obj=$2 h
	if [ -f "$obj" ] && [ "$obj" -nt "$src" ] && cmp -s "$out/obj/flags" <(echo "$flags_now"); then
		for h in "${headers[@]}"; do
			[ "$h" -nt "$obj" ] && break
		done
		[ "$h" -nt "$obj" ] || return 0
	fi
	"$CLANG" "${cflags[@]}" -c "$src" -o "$obj"
}

# Compile idem's sources into an archive and link each target
build() {
	local objs=() src obj t
	for src in "${idem_sources[@]}"; do
		obj=$out/obj/$(basename "$src" .c).o
		compile "$src" "$obj" || return 1
		objs+=("$obj")
	done
	compile test/fuzz/shim.c "$out/obj/shim.o" || return 1
	rm -f "$out/obj/libidem_webhook.a"
	ar rcs "$out/obj/libidem_webhook.a" "${objs[@]}" || return 1
	for t in $FUZZ_TARGETS; do
		compile "test/fuzz/fuzz_$t.c" "$out/obj/fuzz_$t.o" || return 1
		"$CLANG" "${ldflags[@]}" "$out/obj/fuzz_$t.o" "$out/obj/shim.o" \
			"$out/obj/libidem_webhook.a" "${libs[@]}" -o "$out/$t" || return 1
	done
	echo "$flags_now" >"$out/obj/flags"
}

if ! build >"$out/logs/build.log" 2>&1; then
	cat "$out/logs/build.log" >&2
	echo "building the fuzz targets failed" >&2
	exit 1
fi

# ---- run --------------------------------------------------------------------
# Leaks are reported: every input's memory is freed when it ends (shim.c),
# and what idem keeps across calls (its key caches) stays reachable, so a
# leak is an OpenSSL object or a chunk that idem lost.
# Stacks name functions and lines when an llvm-symbolizer is found (the
# sanitizers want its real path, not a symbolic link).
symbolizer=""
for s in llvm-symbolizer-16 /usr/lib/llvm-16/bin/llvm-symbolizer llvm-symbolizer; do
	if command -v "$s" >/dev/null 2>&1; then
		symbolizer=":external_symbolizer_path=$(readlink -f "$(command -v "$s")")"
		break
	fi
done
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_string_checks=1$symbolizer}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1$symbolizer}
failed=()

# The last "#N ... cov: C ft: F corp: K/..." figures of a libFuzzer log
summary() {
	local log=$1 execs rate cov ft
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
	ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
	printf '%10s execs %7s/s  cov %5s  ft %6s' "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}"
}

# Keep the inputs that made target $1 fail as regression cases
keep_artifacts() {
	local t=$1 f kept=0
	if [ "$status" != FAILED ]; then
		echo "  (the input is one of test/fuzz/regressions/$t: see the log)"
		return
	fi
	mkdir -p "test/fuzz/regressions/$t"
	for f in "$out/artifacts/$t"/*; do
		[ -f "$f" ] || continue
		cp "$f" "test/fuzz/regressions/$t/"
		echo "  input kept as test/fuzz/regressions/$t/$(basename "$f")"
		kept=1
	done
	[ "$kept" = 1 ] || echo "  (no input was written: see the log)"
}

for t in $FUZZ_TARGETS; do
	log=$out/logs/$t.log
	work=$out/work/$t
	seeds=test/fuzz/corpus/$t
	rm -rf "$out/artifacts/$t"
	mkdir -p "$work" "$seeds" "$out/artifacts/$t"
	opts=(-artifact_prefix="$out/artifacts/$t/" -timeout=20 -rss_limit_mb=2048
		-print_final_stats=1 -dict=test/fuzz/idem.dict)
	status=ok

	# the regressions first, each input once
	regressions=()
	if [ -d "test/fuzz/regressions/$t" ]; then
		for f in "test/fuzz/regressions/$t"/*; do
			[ -f "$f" ] && regressions+=("$f")
		done
	fi
	: >"$log"
	if [ ${#regressions[@]} -gt 0 ] &&
		! "$out/$t" "${opts[@]}" "${regressions[@]}" >>"$log" 2>&1; then
		status="FAILED replaying test/fuzz/regressions/$t"
	fi

	if [ "$status" = ok ]; then
		if [ "$FUZZ_SECONDS" = 0 ]; then
			length=(-runs=0)
		else
			length=(-max_total_time="$FUZZ_SECONDS")
		fi
		if ! "$out/$t" "${opts[@]}" "${length[@]}" "$work" "$seeds" >>"$log" 2>&1; then
			status=FAILED
		elif [ "$FUZZ_MERGE" = 1 ] &&
			! "$out/$t" -merge=1 "${opts[@]}" "$seeds" "$work" >>"$log" 2>&1; then
			status="FAILED merging"
		fi
	fi

	corpus=$(( $(find "$seeds" -type f | wc -l) + $(find "$work" -type f | wc -l) ))
	printf '%-9s %-4s %s  corpus %5s\n' "$t" "$([ "$status" = ok ] && echo ok || echo FAIL)" \
		"$(summary "$log")" "$corpus"
	if [ "$status" != ok ]; then
		failed+=("$t")
		echo "  $status; log: $log"
		grep -E '^(==[0-9]+==ERROR|SUMMARY|idem fuzz:|.*runtime error:)' "$log" | head -n 5 | sed 's/^/  /'
		keep_artifacts "$t"
	fi
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzzing failed: ${failed[*]}"
	exit 1
fi
echo "fuzzing passed: $FUZZ_TARGETS"
