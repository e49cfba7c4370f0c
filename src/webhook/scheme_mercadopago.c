/*
 * scheme_mercadopago.c
 *		Scheme: Mercado Pago, whose notifications carry in x-signature the
 *		HMAC-SHA256 of a manifest naming the notified resource's id, the
 *		request's id and a timestamp.  The body is not signed but for the
 *		resource's id, which idem reads from it (data.id).
 *
 * May call: the wire format (wire.h) and the crypto (crypto.h).  The MAC is
 * compared in constant time (idem_mac_equal); anything wrong with the
 * request is false, never an error.
 */
#include "postgres.h"

#include "webhook/scheme.h"

/* Mercado Pago keys its HMAC with the secret key's text, as shown */
void *
idem_mercadopago_prepare(Slice secret)
{
	return idem_verify_mac_key((const uint8 *) secret.data, secret.len);
}

/*
 * ts and v1 of x-signature, "ts=<unix>,v1=<hex>": comma-separated
 * name=value elements, spaces around them allowed, elements of other
 * names (or without "=") ignored; ts and v1 each exactly once, v1 the 64
 * hex digits of the MAC (into mac)
 */
static bool
mercadopago_signature(Slice header, Slice *ts, uint8 *mac)
{
	Slice		rest = header;
	Slice		item;
	Slice		name;
	Slice		value;
	Slice		v1 = {NULL, 0};
	int			nts = 0;
	int			nv1 = 0;

	while (idem_next_element(&rest, ',', &item))
	{
		if (!idem_split_pair(item, '=', &name, &value))
			continue;
		if (idem_slice_is(name, "ts"))
		{
			*ts = value;
			nts++;
		}
		else if (idem_slice_is(name, "v1"))
		{
			v1 = value;
			nv1++;
		}
	}
	return nts == 1 && nv1 == 1 && idem_decode_hex(v1, mac, VERIFY_MAC_LEN);
}

/*
 * The unix seconds of ts, plain decimal digits: seconds, or milliseconds
 * from 10^11 on (twelve digits or more, leading zeros aside), as some
 * deliveries carry them
 */
static bool
mercadopago_seconds(Slice ts, int64 *secs)
{
	Slice		digits = ts;

	while (digits.len > 1 && digits.data[0] == '0')
	{
		digits.data++;
		digits.len--;
	}
	if (digits.len >= 12)
		return idem_parse_unix_millis(digits, secs);
	return idem_parse_unix_seconds(digits, secs);
}

/*
 * Mercado Pago's notification: x-signature's v1 is the hex HMAC-SHA256 of
 * "id:<data.id>;request-id:<x-request-id>;ts:<ts>;", data.id the body's
 * (a string or a number, not empty), its ASCII letters lowercased as
 * Mercado Pago's documentation asks; the request-id part is left out when
 * x-request-id is absent or empty, as that documentation says.  ts must be
 * within the tolerance.
 */
bool
idem_mercadopago_verify(void *key, const VerifyRequest *req)
{
	static const char *const data_id[] = {"data", "id", NULL};
	Slice		header;
	Slice		ts = {NULL, 0};
	Slice		id;
	Slice		request_id;
	int64		secs;
	char	   *lower;
	uint8		given[VERIFY_MAC_LEN];
	uint8		expected[VERIFY_MAC_LEN];
	Slice		parts[7] = {{"id:", 3}, {"", 0}, {";request-id:", 12}, {"", 0},
	{";ts:", 4}, {"", 0}, {";", 1}};
	bool		matched;

	if (!idem_find_header(req->headers, "x-signature", &header) ||
		!mercadopago_signature(header, &ts, given) ||
		!mercadopago_seconds(ts, &secs) ||
		!idem_timestamp_acceptable(secs, req->tolerance_usecs) ||
		!idem_json_path_scalar(req->payload, data_id, &id) || id.len == 0)
		return false;

	lower = palloc(id.len);
	for (size_t i = 0; i < id.len; i++)
		lower[i] = (id.data[i] >= 'A' && id.data[i] <= 'Z') ? id.data[i] + ('a' - 'A') : id.data[i];
	parts[1].data = lower;
	parts[1].len = id.len;
	if (idem_find_header(req->headers, "x-request-id", &request_id) && request_id.len > 0)
		parts[3] = request_id;
	else
		parts[2].len = 0;		/* no request-id part at all */
	parts[5] = ts;
	idem_verify_mac(key, parts, lengthof(parts), expected);
	matched = idem_mac_equal(expected, given, VERIFY_MAC_LEN);
	explicit_bzero(expected, sizeof(expected));
	pfree(lower);
	return matched;
}
