#!/bin/sh
# Prints the fixed signature vectors used by
# test/regress/sql/webhook_verify.sql, as psql \set lines to paste at the
# top of that file.
#
# The signatures are computed here with the openssl and base64 command-line
# tools, following the two published descriptions, so the regression test
# checks idem's C code against an implementation that shares nothing with it:
#
#   Stripe ("Verify webhook signatures manually"): the header is
#     Stripe-Signature: t=<unix seconds>,v1=<hex>
#   where <hex> is HMAC-SHA256 over "<t>.<payload>", keyed with the endpoint
#   secret string exactly as shown in the dashboard (whsec_ included).
#
#   Standard Webhooks (spec, "Signature scheme"): headers webhook-id,
#   webhook-timestamp and webhook-signature: v1,<base64>, where <base64> is
#   HMAC-SHA256 over "<id>.<timestamp>.<payload>", keyed with the base64
#   decoding of the secret after its whsec_ prefix.  The spec's own example
#   (secret, id, timestamp, payload and signature) is checked here first.
#   Its asymmetric form: v1a,<base64> is the Ed25519 signature of the same
#   string, checked with the public key given as whpk_ + base64 of its 32
#   bytes.  Svix sends the same under svix-id, svix-timestamp, svix-signature.
#
# Usage: sh test/vectors/make_webhook_vectors.sh (needs openssl, base64, xxd)
set -eu

# psql \set quoting: backslash, quote and newline escaped inside '...'
psql_quote() {
	printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/''/g" | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }'
}

# HMAC-SHA256 of stdin keyed with a string, as lowercase hex
hmac_hex_strkey() {
	openssl dgst -sha256 -hmac "$1" -r | cut -d' ' -f1
}

# HMAC-SHA256 of stdin keyed with base64-given bytes, as base64
hmac_b64_b64key() {
	hexkey=$(printf '%s' "$1" | base64 -d | od -An -v -tx1 | tr -d ' \n')
	openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hexkey" -binary | base64
}

setvar() {
	printf "\\\\set %s '%s'\n" "$1" "$(psql_quote "$2")"
}

# ---- Stripe -------------------------------------------------------------
stripe_secret='whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH'
stripe_secret_b='whsec_Qm7nRk2pLx9TzV4cY8dJ3fH6gW1sA0eB'
stripe_t=1700000000
stripe_t_future=4102444800
stripe_payload='{"id":"evt_1OE2sL2eZvKYlo2C","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3OE2sL","amount":2000,"currency":"usd"}}}'
# raw bytes matter: a newline, spaces and UTF-8 are signed as they are
stripe_payload_utf8=$(printf '{\n  "description": "caf\303\251 \342\202\254 2",\n  "amount": 100.00\n}')

sig_a=$(printf '%s.%s' "$stripe_t" "$stripe_payload" | hmac_hex_strkey "$stripe_secret")
sig_b=$(printf '%s.%s' "$stripe_t" "$stripe_payload" | hmac_hex_strkey "$stripe_secret_b")
sig_noprefix=$(printf '%s.%s' "$stripe_t" "$stripe_payload" | hmac_hex_strkey "${stripe_secret#whsec_}")
sig_future=$(printf '%s.%s' "$stripe_t_future" "$stripe_payload" | hmac_hex_strkey "$stripe_secret")
sig_utf8=$(printf '%s.%s' "$stripe_t" "$stripe_payload_utf8" | hmac_hex_strkey "$stripe_secret")

# ---- Standard Webhooks --------------------------------------------------
std_secret='whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
std_id='msg_p5jXN8AQM9LWM0D4loKWxJek'
std_ts=1614265330
std_payload='{"test": 2432232314}'
std_published='g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='

std_sig=$(printf '%s.%s.%s' "$std_id" "$std_ts" "$std_payload" | hmac_b64_b64key "${std_secret#whsec_}")
if [ "$std_sig" != "$std_published" ]; then
	echo "the Standard Webhooks example does not reproduce: $std_sig" >&2
	exit 1
fi

# a second secret for rotation: 26 key bytes, so its base64 carries padding
std_secret_b="whsec_$(printf 'idem rotation secret 2 key' | base64)"
std_sig_b=$(printf '%s.%s.%s' "$std_id" "$std_ts" "$std_payload" | hmac_b64_b64key "${std_secret_b#whsec_}")
# keyed with the secret's text instead of its decoded bytes (a common mistake)
std_sig_textkey=$(printf '%s.%s.%s' "$std_id" "$std_ts" "$std_payload" |
	openssl dgst -sha256 -hmac "$std_secret" -binary | base64)
std_ts_future=4102444800
std_sig_future=$(printf '%s.%s.%s' "$std_id" "$std_ts_future" "$std_payload" | hmac_b64_b64key "${std_secret#whsec_}")

# ---- Standard Webhooks, asymmetric (v1a, Ed25519) -----------------------
# Ed25519 signatures are deterministic: fixed seeds give fixed vectors.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# a PKCS#8 Ed25519 private key around a 32-byte seed, and its raw public key
ed25519_key() {
	{ printf '302e020100300506032b657004220420'; printf '%s' "$1" | openssl dgst -sha256 -r | cut -c1-64; } |
		xxd -r -p | openssl pkey -inform DER -out "$work/$2.pem"
	openssl pkey -in "$work/$2.pem" -pubout -outform DER | tail -c 32 | base64
}
std_pk=$(ed25519_key 'idem standard key a' a)
std_pk_b=$(ed25519_key 'idem standard key b' b)
printf '%s.%s.%s' "$std_id" "$std_ts" "$std_payload" >"$work/msg"
std_sig_v1a=$(openssl pkeyutl -sign -inkey "$work/a.pem" -rawin -in "$work/msg" | base64 -w0)
std_sig_v1a_b=$(openssl pkeyutl -sign -inkey "$work/b.pem" -rawin -in "$work/msg" | base64 -w0)

echo "-- generated by test/vectors/make_webhook_vectors.sh; do not edit by hand"
setvar stripe_secret "$stripe_secret"
setvar stripe_secret_b "$stripe_secret_b"
setvar stripe_t "$stripe_t"
setvar stripe_t_future "$stripe_t_future"
setvar stripe_payload "$stripe_payload"
setvar stripe_payload_utf8 "$stripe_payload_utf8"
setvar stripe_sig "$sig_a"
setvar stripe_sig_b "$sig_b"
setvar stripe_sig_noprefix "$sig_noprefix"
setvar stripe_sig_future "$sig_future"
setvar stripe_sig_utf8 "$sig_utf8"
setvar std_secret "$std_secret"
setvar std_secret_b "$std_secret_b"
setvar std_id "$std_id"
setvar std_ts "$std_ts"
setvar std_ts_future "$std_ts_future"
setvar std_payload "$std_payload"
setvar std_sig "$std_sig"
setvar std_sig_b "$std_sig_b"
setvar std_sig_textkey "$std_sig_textkey"
setvar std_sig_future "$std_sig_future"
setvar std_pk "whpk_$std_pk"
setvar std_pk_b "whpk_$std_pk_b"
setvar std_sig_v1a "$std_sig_v1a"
setvar std_sig_v1a_b "$std_sig_v1a_b"
echo "-- end of generated vectors"
