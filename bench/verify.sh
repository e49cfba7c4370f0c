#!/usr/bin/env bash
# bench/verify.sh: verifications per second of idem_webhook_verify, and
# OpenSSL's own signature verification rate (openssl speed), side by side on
# one CPU.
#
# One scratch cluster; the server and openssl speed are pinned to the same
# CPU.  The deliveries are made with fresh keys (test/vectors/Deliveries.pm):
# stripe (HMAC-SHA256), standard v1a (Ed25519), alipay RSA2 and wechatpay
# (RSA-2048 with a platform certificate).  Every call is a complete
# verification as an application makes it: the secret parsed from its text
# (PEM, base64), the request's headers or form read, the signature decoded
# and checked.  A round times each scheme over a fixed number of calls in
# one backend,
#   SELECT count(*) FROM generate_series(1, n)
#   WHERE idem_webhook_verify(scheme, secret, payload, headers, '1 day')
# (n chosen in the warm-up so that a run takes about BENCH_SECONDS), then
# runs openssl speed rsa2048 ed25519 for BENCH_SECONDS each, once timed by
# the clock (-elapsed) and once by its CPU time; the report gives the
# medians over the rounds and the ratios of idem's RSA rates to openssl's
# rsa2048 verify rate, by the clock and by CPU time.
#
# Settings (environment):
#   BENCH_SECONDS   seconds per run of each scheme and of openssl (2; quick: 1)
#   BENCH_ROUNDS    rounds, each running everything once          (5; quick: 2)
#   BENCH_CPU       the CPU (taskset -c) of the server and openssl (the last)
#   BENCH_PORT      port of the scratch server                    (5495)
#   BENCH_PIN=0     no pinning
#   BENCH_QUICK=1   a short smoke run with the defaults marked quick
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=test/lib.sh
source test/lib.sh

if [ "${BENCH_QUICK:-0}" = 1 ]; then
	SECONDS_PER_RUN=${BENCH_SECONDS:-1}
	ROUNDS=${BENCH_ROUNDS:-2}
else
	SECONDS_PER_RUN=${BENCH_SECONDS:-2}
	ROUNDS=${BENCH_ROUNDS:-5}
fi
PORT=${BENCH_PORT:-5495}
CPU=${BENCH_CPU:-$(($(nproc) - 1))}
PIN=()
if [ "${BENCH_PIN:-1}" != 0 ]; then
	PIN=(taskset -c "$CPU")
fi

# name, scheme (the kind of key of test/vectors/Deliveries.pm)
SCHEMES="
stripe     hmac
standard   ed25519
alipay     rsa_form
wechatpay  rsa_cert
"

BENCH_DIR=$IDEM_BUILD/bench_verify
RAW=$BENCH_DIR/raw.tsv
RESULTS=$BENCH_DIR/results.md

log() { echo "bench: $*" >&2; }

log "building idem and installing it privately"
idem_private_install

trap 'idem_scratch_stop || true' EXIT
idem_scratch_start "$BENCH_DIR" "$PORT" "${PIN[@]}" <<EOF
max_connections = 10
autovacuum = off
EOF
export PGHOST=$IDEM_SOCK PGPORT=$IDEM_PORT PGUSER=postgres
PSQL="$IDEM_BINDIR/psql -X -q -v ON_ERROR_STOP=1"

"$IDEM_BINDIR/createdb" bench
log "making keys, certificates and deliveries"
mkdir -p "$BENCH_DIR/keys"
perl test/vectors/make_deliveries.pl "$BENCH_DIR/keys" >"$BENCH_DIR/deliveries.sql"
$PSQL -d bench -c "CREATE EXTENSION idem" -f "$BENCH_DIR/deliveries.sql"
# rate(kind, n): seconds and backend CPU seconds of n verifications of the
# kind's valid delivery in one statement; an error if one is false
$PSQL -d bench <<EOF
-- the backend's user and system time (fields 14 and 15 of /proc/self/stat,
-- the 12th and 13th after the command's name), in clock ticks
CREATE FUNCTION cpu_ticks() RETURNS bigint LANGUAGE sql AS \$\$
	SELECT f[12]::bigint + f[13]::bigint
	FROM string_to_array(split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' ') AS f
\$\$;
CREATE FUNCTION rate(k text, n int, OUT secs float8, OUT cpu_secs float8)
LANGUAGE plpgsql AS \$\$
DECLARE
	d deliveries;
	t0 timestamptz;
	c0 bigint;
	c bigint;
BEGIN
	SELECT * INTO STRICT d FROM deliveries WHERE kind = k AND valid;
	c0 := cpu_ticks();
	t0 := clock_timestamp();
	SELECT count(*) INTO c FROM generate_series(1, n)
	WHERE idem_webhook_verify(d.scheme, d.secret, d.payload, d.headers, '1 day');
	secs := extract(epoch FROM clock_timestamp() - t0);
	cpu_secs := (cpu_ticks() - c0) / $(getconf CLK_TCK)::float8;
	IF c <> n THEN
		RAISE EXCEPTION '% of % verifications of % were false', n - c, n, k;
	END IF;
END \$\$;
EOF

# Run one scheme n times: prints "seconds cpu_seconds"
run_scheme() {
	$PSQL -d bench -At -F ' ' -c "SELECT secs, cpu_secs FROM rate('$1', $2)"
}

# openssl speed on the same CPU: prints "rsa2048_verify_per_s ed25519_verify_per_s"
# (its -mr lines: +F2:<n>:<bits>:<sign/s>:<verify/s>, and for EdDSA
# +F6:<n>:<bits>:<name>:<sign/s>:<verify/s>).  With "-elapsed" the rates are
# per second of the clock; without, per second of openssl's own CPU time,
# which a busy machine disturbs less (compare with idem per CPU second).
run_openssl() {
	"${PIN[@]}" openssl speed "$@" -mr -seconds "$SECONDS_PER_RUN" rsa2048 ed25519 2>/dev/null |
		awk -F: '/^\+F2:/ && $3 == 2048 { rsa = $5 }
			/^\+F6:/ && $4 == "Ed25519" { ed = $6 }
			END { printf "%.1f %.1f\n", rsa, ed }'
}

declare -A CALLS=()
log "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg) (on $(nproc) cores)"
log "warm-up: sizing each run to about ${SECONDS_PER_RUN}s"
while read -r name kind; do
	[ -n "$name" ] || continue
	read -r secs _ < <(run_scheme "$kind" 200)
	read -r secs _ < <(run_scheme "$kind" 1000)
	CALLS[$name]=$(awk -v s="$secs" -v t="$SECONDS_PER_RUN" 'BEGIN { n = int(1000 * t / s); print (n < 1000 ? 1000 : n) }')
	log "$name: ${CALLS[$name]} calls a run"
done <<<"$SCHEMES"

printf 'round\tname\tcalls\tseconds\tcpu_seconds\tper_s\n' >"$RAW"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= ROUNDS; r++)); do
	while read -r name kind; do
		[ -n "$name" ] || continue
		read -r secs cpu < <(run_scheme "$kind" "${CALLS[$name]}")
		per_s=$(awk -v n="${CALLS[$name]}" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "${CALLS[$name]}" "$secs" "$cpu" "$per_s" >>"$RAW"
		log "round $r/$ROUNDS $name: $per_s verifications/s (${CALLS[$name]} in ${secs}s, CPU ${cpu}s)"
	done <<<"$SCHEMES"
	read -r rsa ed < <(run_openssl -elapsed)
	printf '%s\topenssl_rsa2048\t\t\t\t%s\n%s\topenssl_ed25519\t\t\t\t%s\n' "$r" "$rsa" "$r" "$ed" >>"$RAW"
	read -r crsa ced < <(run_openssl)
	printf '%s\topenssl_rsa2048_cpu\t\t\t\t%s\n%s\topenssl_ed25519_cpu\t\t\t\t%s\n' "$r" "$crsa" "$r" "$ced" >>"$RAW"
	log "round $r/$ROUNDS openssl speed: rsa2048 $rsa verify/s ($crsa per CPU second), ed25519 $ed verify/s ($ced per CPU second)"
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# median <name> [column]: the median of a column (6: per second, default)
# of the raw file over the rounds
median() {
	awk -F'\t' -v n="$1" -v c="${2:-6}" 'NR > 1 && $2 == n { v[++k] = $c }
		END {
			if (k == 0) exit
			for (i = 2; i <= k; i++)
				for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
			print (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
		}' "$RAW"
}
# CPU rate: calls per second of the backend's CPU, median over the rounds
cpu_rate() {
	awk -F'\t' -v n="$1" 'NR > 1 && $2 == n && $5 > 0 { v[++k] = $3 / $5 }
		END {
			if (k == 0) exit
			for (i = 2; i <= k; i++)
				for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
			printf "%.1f\n", (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
		}' "$RAW"
}

OSSL_RSA=$(median openssl_rsa2048)
OSSL_ED=$(median openssl_ed25519)
OSSL_RSA_CPU=$(median openssl_rsa2048_cpu)
OSSL_ED_CPU=$(median openssl_ed25519_cpu)
MODEL=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
{
	echo "# idem signature verification: results"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- server: $("$IDEM_BINDIR/postgres" --version); $(openssl version)"
	echo "- machine: $(nproc) cores, $MODEL"
	echo "- load average before / after: $LOAD_BEFORE / $LOAD_AFTER"
	if [ ${#PIN[@]} -gt 0 ]; then
		echo "- the server and openssl speed pinned to CPU $CPU"
	else
		echo "- not pinned"
	fi
	echo "- $ROUNDS interleaved rounds, about ${SECONDS_PER_RUN}s per run; medians"
	echo
	echo "| scheme | idem verifications/s | openssl speed verify/s | idem / openssl | idem per CPU second | openssl per CPU second | idem / openssl, CPU |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	while read -r name kind; do
		[ -n "$name" ] || continue
		m=$(median "$name")
		c=$(cpu_rate "$name")
		case $kind in
			rsa_*) o=$OSSL_RSA; oc=$OSSL_RSA_CPU; what="rsa2048" ;;
			ed25519) o=$OSSL_ED; oc=$OSSL_ED_CPU; what="ed25519" ;;
			*) o=; oc=; what= ;;
		esac
		q=$(awk -v a="$m" -v b="$o" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
		qc=$(awk -v a="$c" -v b="$oc" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
		printf '| %s | %.0f | %s | %s | %.0f | %s | %s |\n' "$name" "$m" \
			"${o:+$(printf '%.0f' "$o") ($what)}" "${q:--}" "$c" \
			"${oc:+$(printf '%.0f' "$oc")}" "${qc:--}"
	done <<<"$SCHEMES"
	echo
	for name in alipay wechatpay; do
		wall=$(awk -v a="$(median "$name")" -v b="$OSSL_RSA" 'BEGIN { printf "%.2f", a / b }')
		cpu=$(awk -v a="$(cpu_rate "$name")" -v b="$OSSL_RSA_CPU" 'BEGIN { printf "%.2f", a / b }')
		echo "- $name / openssl rsa2048 verify: $wall by the clock, $cpu by CPU time"
	done
} >"$RESULTS"

cat "$RESULTS"
log "results in $RESULTS, every run in $RAW"
