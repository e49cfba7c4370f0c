/*
 * fuzz_verify.c
 *		Fuzz target: every scheme's check of a delivery end to end:
 *		idem_webhook_verify (verify.c), the SQL function itself, called as
 *		the server calls it, with the fixed secret of the scheme in
 *		test/fuzz/keys (the tests' own vectors), then the scheme's reader of
 *		the event id, as idem_webhook_receive reads it.
 *
 * Input: a first byte (bits 0-6: the scheme, modulo the number of them;
 * bit 7: a five-minute tolerance instead of none), a line of headers, JSON
 * text (made jsonb as the server would), then the body, which must be
 * UTF-8 text.  Each delivery is checked twice: the second check finds the
 * secret's keys and certificates in crypto_key.c's caches and must give
 * the same answer.
 */
#include "fuzz.h"

#include "datatype/timestamp.h"
#include "fmgr.h"

#include "webhook/scheme.h"

extern Datum idem_webhook_verify(PG_FUNCTION_ARGS);

/* The schemes and the file of test/fuzz/keys that holds each one's secret */
static const struct
{
	const char *scheme;
	const char *key;
}			variants[] = {
	{"stripe", "stripe"},
	{"standard", "standard"},
	{"standard", "standard_pk"},
	{"svix", "standard"},
	{"github", "github"},
	{"shopify", "shopify"},
	{"razorpay", "razorpay"},
	{"checkout", "checkout"},
	{"paddle", "paddle"},
	{"adyen", "adyen"},
	{"alipay", "alipay"},
	{"unionpay", "unionpay"},
	{"wechatpay", "wechatpay"},
	{"adyen_platform", "adyen_platform"},
	{"square", "square"},
	{"paystack", "paystack"},
	{"airwallex", "airwallex"},
	{"antom", "antom"},
	{"paypal", "paypal"},
	{"mercadopago", "mercadopago"},
	{"alipay_v3", "alipay_v3"},
};

/* idem_webhook_verify(scheme, secret, payload, headers, tolerance) */
static bool
verify(const char *scheme, Slice secret, Slice payload, Jsonb *headers,
	   Interval *tolerance)
{
	LOCAL_FCINFO(fcinfo, 5);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, NULL, 5, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = PointerGetDatum(fuzz_text(scheme, strlen(scheme)));
	fcinfo->args[1].value = PointerGetDatum(fuzz_text(secret.data, secret.len));
	fcinfo->args[2].value = PointerGetDatum(fuzz_text(payload.data, payload.len));
	fcinfo->args[3].value = PointerGetDatum(headers);
	fcinfo->args[4].value = PointerGetDatum(tolerance);
	for (int i = 0; i < 5; i++)
		fcinfo->args[i].isnull = false;
	fcinfo->args[4].isnull = (tolerance == NULL);
	result = idem_webhook_verify(fcinfo);
	if (fcinfo->isnull)
		fuzz_fail("idem_webhook_verify returned NULL");
	return DatumGetBool(result);
}

/* One input */
int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	int			v;
	Slice		rest;
	Slice		line;
	Slice		secret;
	Jsonb	   *headers;
	Interval	five_minutes = {.time = 300 * USECS_PER_SEC};
	Interval   *tolerance;
	bool		first;
	bool		second;
	Slice		name;
	const VerifyScheme *scheme;
	VerifyRequest req;
	Slice		id;

	if (size < 1)
		return 0;
	v = (data[0] & 0x7f) % lengthof(variants);
	tolerance = (data[0] & 0x80) ? &five_minutes : NULL;
	rest.data = (const char *) data + 1;
	rest.len = size - 1;
	if (!fuzz_next_line(&rest, &line) || rest.data == NULL ||
		!fuzz_valid_text(rest.data, rest.len, PG_UTF8) ||
		!fuzz_valid_text(line.data, line.len, PG_UTF8))
		return 0;
	fuzz_begin(PG_UTF8);
	headers = fuzz_jsonb_from_json(line.data, line.len, PG_UTF8);
	if (headers == NULL)
	{
		fuzz_end();
		return 0;
	}
	secret = fuzz_key(variants[v].key);

	first = verify(variants[v].scheme, secret, rest, headers, tolerance);
	second = verify(variants[v].scheme, secret, rest, headers, tolerance);
	if (first != second)
		fuzz_fail("the same %s delivery verified %d, then %d", variants[v].scheme,
				  first, second);

	/* the event id, as idem_webhook_receive reads it after the check */
	name.data = variants[v].scheme;
	name.len = strlen(name.data);
	scheme = idem_verify_scheme(name);
	req.payload = rest;
	req.headers = headers;
	req.tolerance_usecs = tolerance ? 300e6 : -1;
	if (scheme->event_id(scheme, &req, &id) && id.len > 0 && id.data == NULL)
		fuzz_fail("an event id without bytes");
	fuzz_end();
	return 0;
}
