# shellcheck shell=sh
# test/vectors/psql_set.sh: what the make_*_vectors.sh scripts share,
# sourced by each.  They print psql \set lines to paste at the top of a
# regression test.

# psql \set quoting: backslash, quote and newline escaped inside '...'
psql_quote() {
	printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/''/g" | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }'
}

# A line "\set <name> '<value>'"
setvar() {
	printf "\\\\set %s '%s'\n" "$1" "$(psql_quote "$2")"
}

# Two fresh RSA keys of 2048 bits, a and b, as $1/a.key, $1/a.pub and
# $1/b.key, $1/b.pub (PEM): test keys that sign nothing else
rsa_test_keys() {
	for k in a b; do
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1/$k.key" 2>/dev/null
		openssl pkey -in "$1/$k.key" -pubout -out "$1/$k.pub"
	done
}
