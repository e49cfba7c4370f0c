#!/bin/sh
# Prints the fixed signature vectors used by
# test/regress/sql/webhook_hmac.sql, as psql \set lines to paste at the top
# of that file.
#
# The signatures are computed here with the openssl and base64 command-line
# tools, following each sender's published description, so the regression
# test checks idem's C code against an implementation that shares nothing
# with it:
#
#   GitHub ("Validating webhook deliveries"): X-Hub-Signature-256:
#     sha256=<hex>, HMAC-SHA256 of the body keyed with the webhook secret's
#     text.  GitHub's own example (secret, body and signature) is checked
#     here first.
#   Shopify: X-Shopify-Hmac-Sha256: <base64>, HMAC-SHA256 of the body keyed
#     with the app's client secret.
#   Razorpay: X-Razorpay-Signature: <hex>, HMAC-SHA256 of the body keyed
#     with the webhook secret.
#   Checkout.com: Cko-Signature: <hex>, HMAC-SHA256 of the body keyed with
#     the webhook's signature key.
#   Paddle Billing ("Verify webhook signatures"): Paddle-Signature:
#     ts=<unix seconds>;h1=<hex>, HMAC-SHA256 of "<ts>:<body>" keyed with the
#     endpoint secret key's text.
#   Adyen ("Verify HMAC signatures"): a NotificationRequestItem carries in
#     additionalData.hmacSignature the base64 HMAC-SHA256 of
#     pspReference:originalReference:merchantAccountCode:merchantReference:
#     value:currency:eventCode:success (absent fields empty), keyed with the
#     bytes of the hex HMAC key.  Three examples from Adyen's API libraries'
#     tests are checked here first: Adyen/adyen-python-api-library,
#     test/UtilTest.py (the same key and item as adyen-ruby-api-library's
#     spec/utils/hmac_validator_spec.rb); Adyen/adyen-java-api-library,
#     src/test/java/com/adyen/util/HMACValidatorTest.java, and the
#     notification of its src/test/resources/mocks/hmac-validation-webhook.json.
#   Adyen's platform webhooks (Balance Platform, Management API):
#     HmacSignature: <base64>, HMAC-SHA256 of the raw body keyed with the
#     bytes of the hex HMAC key.  Adyen's own example is checked here first:
#     adyen-java-api-library's HMACValidatorTest.testCalculateHMAC.
#   Paystack ("Verify events"): x-paystack-signature: <hex>, HMAC-SHA512 of
#     the body keyed with the secret key's text.
#   Airwallex ("Listen for webhook events"): x-signature: <hex>,
#     HMAC-SHA256 of x-timestamp (unix milliseconds) followed by the body,
#     keyed with the webhook's secret.
#   Mercado Pago ("Webhooks", "Validate origin of the notification"):
#     x-signature: ts=<unix>,v1=<hex>, HMAC-SHA256 of the manifest
#     "id:<data.id>;request-id:<x-request-id>;ts:<ts>;" keyed with the secret
#     key's text, data.id lowercased, a part left out when its value is
#     absent; the body is not signed.  No secret and signature are published.
#
# Usage: sh test/vectors/make_hmac_vectors.sh (needs openssl and base64)
set -eu

# shellcheck source=test/vectors/psql_set.sh
. "$(dirname "$0")/psql_set.sh"

# HMAC-SHA256 of stdin keyed with a string, as lowercase hex
hmac_hex() {
	openssl dgst -sha256 -hmac "$1" -r | cut -d' ' -f1
}

# HMAC-SHA256 of stdin keyed with a string, as base64
hmac_b64() {
	openssl dgst -sha256 -hmac "$1" -binary | base64
}

# HMAC-SHA256 of stdin keyed with hex-given bytes, as base64
hmac_b64_hexkey() {
	openssl dgst -sha256 -mac HMAC -macopt "hexkey:$1" -binary | base64
}

# Adyen's signed string of a notification item's fields
adyen_data() {
	printf '%s:%s:%s:%s:%s:%s:%s:%s' "$@"
}

# Check a published Adyen example: key, expected signature, the 8 fields
adyen_published() {
	key=$1
	want=$2
	shift 2
	got=$(adyen_data "$@" | hmac_b64_hexkey "$key")
	if [ "$got" != "$want" ]; then
		echo "Adyen's example keyed $key does not reproduce: $got" >&2
		exit 1
	fi
}

# ---- GitHub -------------------------------------------------------------
gh_secret="It's a Secret to Everybody"
gh_payload='Hello, World!'
gh_published='757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17'
gh_sig=$(printf '%s' "$gh_payload" | hmac_hex "$gh_secret")
if [ "$gh_sig" != "$gh_published" ]; then
	echo "GitHub's example does not reproduce: $gh_sig" >&2
	exit 1
fi
gh_secret_b='gh-webhook-secret-2'
gh_sig_b=$(printf '%s' "$gh_payload" | hmac_hex "$gh_secret_b")
# a JSON delivery with a newline and UTF-8 in it: raw bytes are signed
gh_json=$(printf '{"zen":"Design for failure.","hook_id":30,\n "sender":{"login":"z\303\274rich-\342\202\254"}}')
gh_sig_json=$(printf '%s' "$gh_json" | hmac_hex "$gh_secret")
gh_sig_empty=$(printf '' | hmac_hex "$gh_secret")
# the legacy X-Hub-Signature: sha1=<hex> of the same body
gh_sig_sha1=$(printf '%s' "$gh_payload" | openssl dgst -sha1 -hmac "$gh_secret" -r | cut -d' ' -f1)

# ---- Shopify ------------------------------------------------------------
shop_secret='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'
# (chosen so that the MAC's base64 holds a + or a /: the base64url test needs one)
shop_secret_b='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'
shop_payload='{"id":820982911946154508,"email":"jon@example.com","total_price":"199.00","currency":"CAD"}'
shop_sig=$(printf '%s' "$shop_payload" | hmac_b64 "$shop_secret")
shop_sig_b=$(printf '%s' "$shop_payload" | hmac_b64 "$shop_secret_b")

# ---- Razorpay -----------------------------------------------------------
rzp_secret='rzp-webhook-secret-7Gq2'
rzp_secret_b='rzp-webhook-secret-other'
rzp_payload='{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":"payment.captured","contains":["payment"],"payload":{"payment":{"entity":{"id":"pay_DESlfW9H8K9uqM","amount":100,"currency":"INR","status":"captured"}}},"created_at":1567674606}'
rzp_sig=$(printf '%s' "$rzp_payload" | hmac_hex "$rzp_secret")
rzp_sig_b=$(printf '%s' "$rzp_payload" | hmac_hex "$rzp_secret_b")

# ---- Checkout.com -------------------------------------------------------
cko_secret='0b5ec7f5-2b2e-4b71-9d64-0d5a2c4e6a3f'
cko_secret_b='1c6fd8a6-3c3f-4c82-8e75-1e6b3d5f7b40'
cko_payload='{"id":"evt_az5sblvku4ge3dwpztvyizgcau","type":"payment_captured","created_on":"2019-08-23T14:11:23Z","data":{"id":"pay_waji5hpbdevunjifb3uwpl6x2u","amount":6540,"currency":"USD"}}'
cko_sig=$(printf '%s' "$cko_payload" | hmac_hex "$cko_secret")
cko_sig_b=$(printf '%s' "$cko_payload" | hmac_hex "$cko_secret_b")

# ---- Paddle Billing -----------------------------------------------------
pdl_secret='pdl_ntfset_01hv8wpt2bm0xc3a4smqqq8ns7_4Zx0dNfPCM1c3OLXxz8GqUYX9RqGYpXo'
pdl_secret_b='pdl_ntfset_01hv8x1g3q7q2k5v9nbd2n4cfs_Yw8Ks2VbTq1r5GmHcA0pLx7Zd3NeUfJi'
pdl_ts=1671552777
pdl_ts_future=4102444800
pdl_payload='{"event_id":"evt_01hv8x2a6ssgd0xq9yjc5bn9vq","event_type":"transaction.completed","occurred_at":"2022-12-20T16:12:57.000000Z","notification_id":"ntf_01hv8x2a8c1pq0mw5m5vq3y3y1","data":{"id":"txn_01hv8wptq8987qeep44cyrewp9","status":"completed","currency_code":"USD"}}'
pdl_sig=$(printf '%s:%s' "$pdl_ts" "$pdl_payload" | hmac_hex "$pdl_secret")
pdl_sig_b=$(printf '%s:%s' "$pdl_ts" "$pdl_payload" | hmac_hex "$pdl_secret_b")
pdl_sig_future=$(printf '%s:%s' "$pdl_ts_future" "$pdl_payload" | hmac_hex "$pdl_secret")
# Stripe's joiner instead of Paddle's, and the body alone: not Paddle's MAC
pdl_sig_dot=$(printf '%s.%s' "$pdl_ts" "$pdl_payload" | hmac_hex "$pdl_secret")
pdl_sig_body=$(printf '%s' "$pdl_payload" | hmac_hex "$pdl_secret")

# ---- Adyen --------------------------------------------------------------
adyen_published 44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056 \
	'coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0=' \
	7914073381342284 '' TestMerchant TestPayment-1407325143704 1130 EUR AUTHORISATION true
adyen_published 9064450A8892A093D9E97EFCC9639DE31B74F3A7803135555A3C96F5A57915D6 \
	'NuEkADFmlCC6VgX+wcoPAegIWxVPNBPCuKlM4Hzo5qc=' \
	test_REPORT_AVAILABLE '' Magento2Rik testMerchantRef1 0 EUR REPORT_AVAILABLE true
adyen_published 74F490DD33F7327BAECC88B2947C011FC02D014A473AAA33A8EC93E4DC069174 \
	'CZErGCNQaSsxbaQfZaJlakqo7KPP+mIa8a+wx3yNs9A=' \
	ZVWN7D3WSMK2WN82 '' AntoniStroinski '\:/\/slashes are fun' 1000 EUR AUTHORISATION true

adyen_key='3F1A9C0D5E7B2486A1C3E5F7092B4D6F8A0C2E4F6B8D0A1C3E5F7A9B1D3F5E7C'
adyen_key_b='0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF'
# a refund of a payment: every field present, a colon and UTF-8 in the
# merchant reference (signed as they are, never escaped)
adyen_psp='8816178914778451'
adyen_orig='8816178914771230'
adyen_merchant='IdemShopECOM'
adyen_ref=$(printf 'order-42:caf\303\251')
adyen_value=2599
adyen_currency='EUR'
adyen_event='REFUND'
adyen_success='true'
adyen_sig=$(adyen_data "$adyen_psp" "$adyen_orig" "$adyen_merchant" "$adyen_ref" \
	"$adyen_value" "$adyen_currency" "$adyen_event" "$adyen_success" | hmac_b64_hexkey "$adyen_key")
adyen_sig_b=$(adyen_data "$adyen_psp" "$adyen_orig" "$adyen_merchant" "$adyen_ref" \
	"$adyen_value" "$adyen_currency" "$adyen_event" "$adyen_success" | hmac_b64_hexkey "$adyen_key_b")
# keyed with the hex text itself instead of the bytes it spells
adyen_sig_textkey=$(adyen_data "$adyen_psp" "$adyen_orig" "$adyen_merchant" "$adyen_ref" \
	"$adyen_value" "$adyen_currency" "$adyen_event" "$adyen_success" | hmac_b64 "$adyen_key")
# a report: no originalReference, no amount, success false
adyen_psp_report='8816178914779999'
adyen_sig_report=$(adyen_data "$adyen_psp_report" '' "$adyen_merchant" 'order-43' '' '' \
	REPORT_AVAILABLE false | hmac_b64_hexkey "$adyen_key")

# Adyen's platform webhooks: Adyen's example first, then a configuration
# webhook as it arrives, under two keys, and keyed with the hex text
got=$(printf '%s' TestPayload | hmac_b64_hexkey 9064450A8892A093D9E97EFCC9639DE31B74F3A7803135555A3C96F5A57915D6)
if [ "$got" != 'YA9/UDjldIO4Gq68X4ATYYoEaPYH4f4k2uzBBzEF1PA=' ]; then
	echo "Adyen's platform example does not reproduce: $got" >&2
	exit 1
fi
adyp_payload='{"data":{"balancePlatform":"YOUR_BALANCE_PLATFORM","accountHolder":{"id":"AH00000000000000000000001","status":"active"}},"environment":"test","timestamp":"2026-11-29T10:00:00+01:00","type":"balancePlatform.accountHolder.created"}'
adyp_sig=$(printf '%s' "$adyp_payload" | hmac_b64_hexkey "$adyen_key")
adyp_sig_b=$(printf '%s' "$adyp_payload" | hmac_b64_hexkey "$adyen_key_b")
adyp_sig_textkey=$(printf '%s' "$adyp_payload" | hmac_b64 "$adyen_key")
# ---- Paystack -----------------------------------------------------------
psk_secret='sk_test_4e9f8c1a2b3d5e6f7a8b9c0d1e2f3a4b5c6d7e8f'
psk_secret_b='sk_live_0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c'
psk_payload='{"event":"charge.success","data":{"id":302961,"domain":"live","status":"success","reference":"qTPrJoy9Bx","amount":10000,"currency":"NGN","paid_at":"2026-11-29T10:00:00.000Z"}}'
psk_sig=$(printf '%s' "$psk_payload" | openssl dgst -sha512 -hmac "$psk_secret" -r | cut -d' ' -f1)
psk_sig_b=$(printf '%s' "$psk_payload" | openssl dgst -sha512 -hmac "$psk_secret_b" -r | cut -d' ' -f1)
# the HMAC-SHA256 of the same body: not Paystack's MAC
psk_sig_sha256=$(printf '%s' "$psk_payload" | hmac_hex "$psk_secret")
# ---- Airwallex ----------------------------------------------------------
awx_secret='whsec_awx_5f3c9e1d7b2a4c6e8f0a1b3d5c7e9f2a'
awx_secret_b='whsec_awx_0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d'
awx_ts=1764410400123
awx_payload='{"id":"evt_hkdf7zbpkg3uhqgrxqu","name":"payment_intent.succeeded","account_id":"acct_8yTcQmZ9Ta6Lk1Zr6Wb2cQ","data":{"object":{"id":"int_hkdmr2jxpgbm1kdq2te","amount":100.5,"currency":"AUD","status":"SUCCEEDED"}},"created_at":"2026-11-29T10:00:00+0000"}'
awx_sig=$(printf '%s%s' "$awx_ts" "$awx_payload" | hmac_hex "$awx_secret")
awx_sig_b=$(printf '%s%s' "$awx_ts" "$awx_payload" | hmac_hex "$awx_secret_b")
# the body alone, and the timestamp in seconds: not Airwallex's MAC
awx_sig_body=$(printf '%s' "$awx_payload" | hmac_hex "$awx_secret")
awx_sig_secs=$(printf '%s%s' "${awx_ts%???}" "$awx_payload" | hmac_hex "$awx_secret")
# ---- Mercado Pago -------------------------------------------------------
mp_secret='9f1c2e7a4b6d8f0a3c5e7b9d1f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a'
mp_secret_b='0a2c4e6b8d1f3a5c7e9b2d4f6a8c1e3b5d7f9a2c4e6b8d1f3a5c7e9b2d4f6a8c'
mp_ts=1764410400
mp_ts_ms=1764410400123
mp_request_id='bb56a2f1-6aae-46ac-982e-9dcd3581d08e'
mp_payload='{"action":"payment.updated","api_version":"v1","data":{"id":"123456789"},"date_created":"2025-11-29T10:00:00Z","id":118765432101,"live_mode":true,"type":"payment","user_id":2647542}'
# the manifest of data.id (lowercased), request id (or none) and ts
mp_manifest() {
	if [ -n "$2" ]; then
		printf 'id:%s;request-id:%s;ts:%s;' "$(printf '%s' "$1" | tr 'A-Z' 'a-z')" "$2" "$3"
	else
		printf 'id:%s;ts:%s;' "$(printf '%s' "$1" | tr 'A-Z' 'a-z')" "$3"
	fi
}
mp_sig=$(mp_manifest 123456789 "$mp_request_id" "$mp_ts" | hmac_hex "$mp_secret")
mp_sig_b=$(mp_manifest 123456789 "$mp_request_id" "$mp_ts" | hmac_hex "$mp_secret_b")
mp_sig_ms=$(mp_manifest 123456789 "$mp_request_id" "$mp_ts_ms" | hmac_hex "$mp_secret")
mp_sig_noreq=$(mp_manifest 123456789 '' "$mp_ts" | hmac_hex "$mp_secret")
# an alphanumeric data.id, sent in upper case, signed lowercased
mp_alnum_payload='{"action":"created","api_version":"v1","data":{"id":"AB12cd34EF56"},"date_created":"2025-11-29T10:00:00Z","id":"118765432102","live_mode":false,"type":"subscription_preapproval","user_id":2647542}'
mp_sig_alnum=$(mp_manifest AB12cd34EF56 "$mp_request_id" "$mp_ts" | hmac_hex "$mp_secret")
# not Mercado Pago's MACs: the id as sent, without the last ";", the body
mp_sig_alnum_asis=$(printf 'id:AB12cd34EF56;request-id:%s;ts:%s;' "$mp_request_id" "$mp_ts" | hmac_hex "$mp_secret")
mp_sig_nosemi=$(printf 'id:123456789;request-id:%s;ts:%s' "$mp_request_id" "$mp_ts" | hmac_hex "$mp_secret")
mp_sig_body=$(printf '%s' "$mp_payload" | hmac_hex "$mp_secret")

echo "-- generated by test/vectors/make_hmac_vectors.sh; do not edit by hand"
setvar gh_secret "$gh_secret"
setvar gh_secret_b "$gh_secret_b"
setvar gh_payload "$gh_payload"
setvar gh_json "$gh_json"
setvar gh_sig "$gh_sig"
setvar gh_sig_b "$gh_sig_b"
setvar gh_sig_json "$gh_sig_json"
setvar gh_sig_empty "$gh_sig_empty"
setvar gh_sig_sha1 "$gh_sig_sha1"
setvar shop_secret "$shop_secret"
setvar shop_secret_b "$shop_secret_b"
setvar shop_payload "$shop_payload"
setvar shop_sig "$shop_sig"
setvar shop_sig_b "$shop_sig_b"
setvar rzp_secret "$rzp_secret"
setvar rzp_secret_b "$rzp_secret_b"
setvar rzp_payload "$rzp_payload"
setvar rzp_sig "$rzp_sig"
setvar rzp_sig_b "$rzp_sig_b"
setvar cko_secret "$cko_secret"
setvar cko_secret_b "$cko_secret_b"
setvar cko_payload "$cko_payload"
setvar cko_sig "$cko_sig"
setvar cko_sig_b "$cko_sig_b"
setvar pdl_secret "$pdl_secret"
setvar pdl_secret_b "$pdl_secret_b"
setvar pdl_ts "$pdl_ts"
setvar pdl_ts_future "$pdl_ts_future"
setvar pdl_payload "$pdl_payload"
setvar pdl_sig "$pdl_sig"
setvar pdl_sig_b "$pdl_sig_b"
setvar pdl_sig_future "$pdl_sig_future"
setvar pdl_sig_dot "$pdl_sig_dot"
setvar pdl_sig_body "$pdl_sig_body"
setvar adyen_key "$adyen_key"
setvar adyen_key_b "$adyen_key_b"
setvar adyen_psp "$adyen_psp"
setvar adyen_orig "$adyen_orig"
setvar adyen_merchant "$adyen_merchant"
setvar adyen_ref "$adyen_ref"
setvar adyen_value "$adyen_value"
setvar adyen_currency "$adyen_currency"
setvar adyen_event "$adyen_event"
setvar adyen_success "$adyen_success"
setvar adyen_sig "$adyen_sig"
setvar adyen_sig_b "$adyen_sig_b"
setvar adyen_sig_textkey "$adyen_sig_textkey"
setvar adyen_psp_report "$adyen_psp_report"
setvar adyen_sig_report "$adyen_sig_report"
setvar adyp_payload "$adyp_payload"
setvar adyp_sig "$adyp_sig"
setvar adyp_sig_b "$adyp_sig_b"
setvar adyp_sig_textkey "$adyp_sig_textkey"
setvar psk_secret "$psk_secret"
setvar psk_secret_b "$psk_secret_b"
setvar psk_payload "$psk_payload"
setvar psk_sig "$psk_sig"
setvar psk_sig_b "$psk_sig_b"
setvar psk_sig_sha256 "$psk_sig_sha256"
setvar awx_secret "$awx_secret"
setvar awx_secret_b "$awx_secret_b"
setvar awx_ts "$awx_ts"
setvar awx_payload "$awx_payload"
setvar awx_sig "$awx_sig"
setvar awx_sig_b "$awx_sig_b"
setvar awx_sig_body "$awx_sig_body"
setvar awx_sig_secs "$awx_sig_secs"
setvar mp_secret "$mp_secret"
setvar mp_secret_b "$mp_secret_b"
setvar mp_ts "$mp_ts"
setvar mp_ts_ms "$mp_ts_ms"
setvar mp_request_id "$mp_request_id"
setvar mp_payload "$mp_payload"
setvar mp_sig "$mp_sig"
setvar mp_sig_b "$mp_sig_b"
setvar mp_sig_ms "$mp_sig_ms"
setvar mp_sig_noreq "$mp_sig_noreq"
setvar mp_alnum_payload "$mp_alnum_payload"
setvar mp_sig_alnum "$mp_sig_alnum"
setvar mp_sig_alnum_asis "$mp_sig_alnum_asis"
setvar mp_sig_nosemi "$mp_sig_nosemi"
setvar mp_sig_body "$mp_sig_body"
echo "-- end of generated vectors"
