/*
 * receive.c
 *		Entry point: idem_webhook_receive: verify, check the sender,
 *		deduplicate, in one call, with the configuration of a webhook source.
 *
 * May call: every layer below (scheme.h, crypto.h, wire.h), the source
 * cache (source_cache.c), the record of deliveries (record.c) and the rest
 * of idem (stats, input).
 *
 * In this order: the source is known, the client address (when the source
 * lists addresses) is allowed, the signature verifies with one
 * of the source's secrets, the event id is found where the scheme's entry
 * in the registry says, and the delivery is recorded as idem_webhook
 * records it (record.c, the same code).  A rejection writes nothing and
 * answers why; like idem_webhook_verify, what the request holds never
 * raises an error.
 *
 * "timestamp" is told apart from "signature" without changing what the
 * schemes answer: when no secret verifies the request within the
 * tolerance, a scheme with a signed timestamp is asked again without the
 * timestamp check; if a secret verifies it then, the signature is genuine
 * and only its time is outside the tolerance.  Only rejected requests pay
 * for the second check.
 */
#include "postgres.h"

#include <sys/socket.h>

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/inet.h"

#include "idem.h"
#include "input.h"
#include "stats.h"
#include "webhook/entry.h"

PG_FUNCTION_INFO_V1(idem_webhook_receive);
PG_FUNCTION_INFO_V1(idem_webhook_check);

/* The verdict on the signature */
typedef enum ReceiveVerdict
{
	VERDICT_GENUINE,
	VERDICT_STALE,				/* genuine, but signed outside the tolerance */
	VERDICT_FORGED
} ReceiveVerdict;

/* Is addr inside one of the source's allowed networks? */
static bool
receive_ip_in_nets(const WebhookSource *src, inet *addr)
{
	for (int i = 0; i < src->nnets; i++)
		if (!src->net_nulls[i] &&
			DatumGetBool(DirectFunctionCall2(network_subeq, InetPGetDatum(addr),
											 src->nets[i])))
			return true;
	return false;
}

/*
 * May a delivery from client_ip reach a source that lists addresses?  Only
 * a known host address inside one of them: a NULL (a lost proxy header, a
 * Unix-socket peer) or a network is refused, so that a handler that loses
 * the address does not turn the list off.  An IPv4-mapped IPv6 address
 * (::ffff:192.0.2.10, as dual-stack servers report an IPv4 peer) is also
 * checked as its IPv4 form.
 */
static bool
receive_ip_allowed(const WebhookSource *src, FunctionCallInfo fcinfo)
{
	static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	inet	   *addr;
	inet	   *v4;

	if (PG_ARGISNULL(3))
		return false;
	addr = PG_GETARG_INET_PP(3);
	if (ip_bits(addr) != ip_maxbits(addr))
		return false;
	if (receive_ip_in_nets(src, addr))
		return true;
	if (ip_family(addr) != PGSQL_AF_INET6 ||
		memcmp(ip_addr(addr), v4mapped, sizeof(v4mapped)) != 0)
		return false;
	v4 = palloc0(sizeof(inet));
	ip_family(v4) = PGSQL_AF_INET;
	ip_bits(v4) = 32;
	memcpy(ip_addr(v4), ip_addr(addr) + sizeof(v4mapped), 4);
	SET_INET_VARSIZE(v4);
	return receive_ip_in_nets(src, v4);
}

/* Does one of the source's secrets verify the request? */
static bool
receive_any_secret(const WebhookSource *src, const VerifyRequest *req)
{
	for (int i = 0; i < src->nsecrets; i++)
	{
		bool		ok = src->scheme->verify(src->keys[i], req);

		idem_verify_release_all();
		if (ok)
			return true;
	}
	return false;
}

/*
 * The verdict on the request's signature (see the head of this file for
 * how a stale one is told from a forged one)
 */
static ReceiveVerdict
receive_verify(const WebhookSource *src, VerifyRequest *req)
{
	if (receive_any_secret(src, req))
		return VERDICT_GENUINE;
	if (src->scheme->timestamped && req->tolerance_usecs >= 0)
	{
		req->tolerance_usecs = -1;
		if (receive_any_secret(src, req))
			return VERDICT_STALE;
	}
	return VERDICT_FORGED;
}

/* receive_verify, with what the schemes make wiped and freed, error or not */
static ReceiveVerdict
receive_verify_wiped(const WebhookSource *src, VerifyRequest *req)
{
	volatile ReceiveVerdict verdict = VERDICT_FORGED;

	PG_TRY();
	{
		verdict = receive_verify(src, req);
	}
	PG_CATCH();
	{
		idem_verify_release_all();
		PG_RE_THROW();
	}
	PG_END_TRY();
	idem_verify_release_all();
	return verdict;
}

/*
 * The event id of a verified request, as the source's scheme places it, as
 * a text; NULL if it is missing, empty, longer than an event id may be, or
 * not text of the database's encoding
 */
static text *
receive_event_id(const WebhookSource *src, const VerifyRequest *req)
{
	Slice		id;

	if (!src->scheme->event_id(src->scheme, req, &id))
		return NULL;
	if (id.len == 0 || id.len > IDEM_MAX_KEY_BYTES ||
		!pg_verifymbstr(id.data, (int) id.len, true))
		return NULL;
	return cstring_to_text_with_len(id.data, (int) id.len);
}

/* The answer (status, event_id, reason) as a record */
static Datum
receive_answer(FunctionCallInfo fcinfo, const char *status, text *event_id,
			   const char *reason)
{
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = CStringGetTextDatum(status);
	values[1] = PointerGetDatum(event_id);
	nulls[1] = event_id == NULL;
	values[2] = reason != NULL ? CStringGetTextDatum(reason) : (Datum) 0;
	nulls[2] = reason == NULL;
	return idem_result_row(fcinfo, values, nulls);
}

/*
 * Check a delivery to a source, as idem_webhook_receive does before it
 * records it: NULL and *event_id set if it is genuine, else the reason of
 * its rejection (counted).  Fills *src.
 */
static const char *
receive_check(FunctionCallInfo fcinfo, text *source, WebhookSource *src,
			  text **event_id)
{
	VerifyRequest req;
	ReceiveVerdict verdict;
	const char *reason = NULL;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("payload must not be null"),
				 errhint("Pass the raw body as received; an empty body is the empty string.")));
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("headers must not be null"),
				 errhint("Pass the request's headers as a JSON object of name to string.")));
	idem_check_writable("idem_webhook_receive()");

	*event_id = NULL;
	if (!idem_webhook_source_read(source, src))
		reason = "unknown_source";
	else if (src->nets != NULL && !receive_ip_allowed(src, fcinfo))
		reason = "ip";
	else
	{
		req.payload = idem_slice_of_text(PG_GETARG_TEXT_PP(1));
		req.headers = PG_GETARG_JSONB_P(2);
		req.tolerance_usecs = src->tolerance_usecs;
		verdict = receive_verify_wiped(src, &req);
		if (verdict == VERDICT_FORGED)
			reason = "signature";
		else if (verdict == VERDICT_STALE)
			reason = "timestamp";
		else if ((*event_id = receive_event_id(src, &req)) == NULL)
			reason = "malformed";
	}
	if (reason != NULL)
		idem_stats_count(IDEM_STAT_WEBHOOKS_REJECTED, 1);
	return reason;
}

/*
 * idem_webhook_receive(source, payload, headers, client_ip): status new,
 * duplicate or rejected; the event id; the reason of a rejection
 */
Datum
idem_webhook_receive(PG_FUNCTION_ARGS)
{
	text	   *source = idem_arg_scope(fcinfo, 0, "source");
	WebhookSource src;
	text	   *event_id;
	const char *reason = receive_check(fcinfo, source, &src, &event_id);
	bool		first;

	if (reason != NULL)
		return receive_answer(fcinfo, "rejected", NULL, reason);
	first = idem_webhook_record(source, event_id, &src.ttl);
	return receive_answer(fcinfo, first ? "new" : "duplicate", event_id, NULL);
}

/*
 * idem.webhook_check(source, payload, headers, client_ip): what
 * idem_webhook_receive checks, without the record, for
 * idem_webhook_receive_ordered: status verified or rejected, the event id,
 * the reason, and the source's scheme and ttl
 */
Datum
idem_webhook_check(PG_FUNCTION_ARGS)
{
	text	   *source = idem_arg_scope(fcinfo, 0, "source");
	WebhookSource src;
	text	   *event_id;
	const char *reason = receive_check(fcinfo, source, &src, &event_id);
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	values[0] = CStringGetTextDatum(reason != NULL ? "rejected" : "verified");
	values[1] = PointerGetDatum(event_id);
	nulls[1] = event_id == NULL;
	values[2] = reason != NULL ? CStringGetTextDatum(reason) : (Datum) 0;
	nulls[2] = reason == NULL;
	values[3] = reason != NULL ? (Datum) 0 : CStringGetTextDatum(src.scheme->name);
	nulls[3] = reason != NULL;
	values[4] = reason != NULL ? (Datum) 0 : IntervalPGetDatum(&src.ttl);
	nulls[4] = reason != NULL;
	return idem_result_row(fcinfo, values, nulls);
}
