/*
 * webhook_receive.c
 *		idem_webhook_receive: verify, check the sender, deduplicate, in one
 *		call, with the configuration of a webhook source.
 *
 * In this order: the source is known, the client address (when given and
 * the source lists addresses) is allowed, the signature verifies with one
 * of the source's secrets, the event id is found, and the delivery is
 * recorded as idem_webhook records it (webhook.c, the same code).  A
 * rejection writes nothing and answers why; like idem_webhook_verify, what
 * the request holds never raises an error.
 *
 * "timestamp" is told apart from "signature" without changing what the
 * schemes answer: when no secret verifies the request within the
 * tolerance, a scheme with a signed timestamp is asked again without the
 * timestamp check; if a secret verifies it then, the signature is genuine
 * and only its time is outside the tolerance.  Only rejected requests pay
 * for the second check.
 *
 * The source's row is read with the statement's snapshot: a change of a
 * source is seen by the next statement of any session once it commits.
 * A backend keeps the sources it read, and checks at every call that the
 * row it copied is still the one the snapshot sees (receive_read_source).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/inet.h"
#include "utils/lsyscache.h"

#include "idem.h"
#include "input.h"
#include "stats.h"
#include "store.h"
#include "verify.h"
#include "webhook.h"

PG_FUNCTION_INFO_V1(idem_webhook_receive);

/* Where a scheme's event id is */
typedef enum ReceiveIdPlace
{
	ID_BODY_MEMBER,				/* a string member of the JSON body's root */
	ID_HEADER,					/* a header */
	ID_FORM,					/* a parameter of the form body */
	ID_ADYEN					/* pspReference:eventCode:success of the item */
} ReceiveIdPlace;

/* What receive needs to know of a scheme beyond idem_webhook_verify's table */
typedef struct ReceiveScheme
{
	const char *scheme;
	bool		timestamped;	/* the signature covers a timestamp */
	ReceiveIdPlace place;
	const char *name;			/* member, header or parameter */
	const char *charset_param;	/* ID_FORM: the parameter naming the charset */
} ReceiveScheme;

static const ReceiveScheme receive_schemes[] = {
	{"stripe", true, ID_BODY_MEMBER, "id", NULL},
	{"standard", true, ID_HEADER, "webhook-id", NULL},
	{"svix", true, ID_HEADER, "svix-id", NULL},
	{"github", false, ID_HEADER, "X-GitHub-Delivery", NULL},
	{"shopify", false, ID_HEADER, "X-Shopify-Webhook-Id", NULL},
	{"razorpay", false, ID_HEADER, "X-Razorpay-Event-Id", NULL},
	{"checkout", false, ID_BODY_MEMBER, "id", NULL},
	{"paddle", true, ID_BODY_MEMBER, "event_id", NULL},
	{"adyen", false, ID_ADYEN, NULL, NULL},
	{"alipay", false, ID_FORM, "notify_id", "charset"},
	{"unionpay", false, ID_FORM, "queryId", "encoding"},
	{"wechatpay", true, ID_BODY_MEMBER, "id", NULL},
};

/* A source's row, copied out of the table */
typedef struct ReceiveSource
{
	const VerifyScheme *scheme;
	const ReceiveScheme *receive;
	void	  **keys;			/* each secret, prepared by its scheme */
	VerifyHeld **held;			/* what preparing each took over */
	int			nsecrets;
	double		tolerance_usecs;
	Datum	   *nets;			/* allowed_ips; NULL: any address */
	bool	   *net_nulls;
	int			nnets;
	bool		ttl_default;	/* no ttl of its own: idem.webhook_ttl, now */
	Interval	ttl;
} ReceiveSource;

/*
 * Sources read in earlier calls, each with the version of its row it was
 * read from (store.c), and checked against the table at every call: the
 * copy is used only while that version is still the one the statement's
 * snapshot sees, so a change is seen exactly when a read of the row would
 * see it.  Checking costs a look at one heap tuple instead of an index
 * probe, copying the row, taking its arrays apart and preparing its
 * secrets (decoding them, setting up HMAC keys, reading PEM).  Only the
 * prepared keys are kept, not the secrets' text; they are wiped when an
 * entry is dropped.
 */
#define RECEIVE_CACHED_SOURCES	8

typedef struct CachedSource
{
	MemoryContext cxt;			/* holds all of it; NULL: a free entry */
	text	   *name;
	IdemRowVersion version;
	ReceiveSource src;
	uint64		used;			/* when it was last used, to evict the oldest */
} CachedSource;

static CachedSource cached_sources[RECEIVE_CACHED_SOURCES];
static uint64 cached_sources_clock = 0;

/* The verdict on the signature */
typedef enum ReceiveVerdict
{
	VERDICT_GENUINE,
	VERDICT_STALE,				/* genuine, but signed outside the tolerance */
	VERDICT_FORGED
} ReceiveVerdict;

/* The receive entry of the scheme of that name; its absence is a bug */
static const ReceiveScheme *
receive_scheme(const char *name)
{
	for (int i = 0; i < lengthof(receive_schemes); i++)
		if (strcmp(receive_schemes[i].scheme, name) == 0)
			return &receive_schemes[i];
	elog(ERROR, "webhook scheme \"%s\" has no event id", name);
	return NULL;				/* keep the compiler quiet */
}

/* Drop a cached source, its keys wiped */
static void
receive_forget(CachedSource *e)
{
	for (int i = 0; i < e->src.nsecrets; i++)
		if (e->src.held[i] != NULL)
			idem_verify_held_release(e->src.held[i]);
	MemoryContextDelete(e->cxt);
	e->cxt = NULL;
}

/*
 * Prepare the secrets of an array into src->keys, in the current memory
 * context, each key kept past the call with what it holds; the array's
 * copy is wiped.  An error (a secret its scheme refuses) releases them.
 */
static void
receive_prepare_keys(ArrayType *secrets, ReceiveSource *src)
{
	Datum	   *texts;
	bool	   *nulls;
	int			n;

	deconstruct_array(secrets, TEXTOID, -1, false, TYPALIGN_INT, &texts, &nulls, &n);
	src->keys = palloc0(Max(n, 1) * sizeof(void *));
	src->held = palloc0(Max(n, 1) * sizeof(VerifyHeld *));
	src->nsecrets = 0;
	PG_TRY();
	{
		for (int i = 0; i < n; i++)
		{
			int			mark = idem_verify_tracked_mark();

			src->keys[i] = src->scheme->prepare(idem_slice_of_text(DatumGetTextPP(texts[i])));
			src->held[i] = idem_verify_hold(mark);
			src->nsecrets = i + 1;
		}
	}
	PG_CATCH();
	{
		for (int i = 0; i < src->nsecrets; i++)
			idem_verify_held_release(src->held[i]);
		idem_verify_release_all();
		explicit_bzero(secrets, VARSIZE(secrets));
		PG_RE_THROW();
	}
	PG_END_TRY();
	explicit_bzero(secrets, VARSIZE(secrets));
}

/*
 * Copy the row st holds into *src, in the current memory context: the
 * scheme, the secrets prepared, the tolerance, the allowed networks and
 * the ttl
 */
static void
receive_copy_row(IdemStore *st, ReceiveSource *src)
{
	char	   *scheme = TextDatumGetCString(st->values[SOURCES_SCHEME]);

	src->scheme = idem_verify_scheme((Slice) {scheme, strlen(scheme)});
	if (src->scheme == NULL)
		elog(ERROR, "webhook source has unknown scheme \"%s\"", scheme);
	src->receive = receive_scheme(src->scheme->name);
	src->tolerance_usecs =
		idem_verify_tolerance_usecs(DatumGetIntervalP(st->values[SOURCES_TOLERANCE]), false);
	src->nets = NULL;
	src->net_nulls = NULL;
	src->nnets = 0;
	if (!st->nulls[SOURCES_ALLOWED_IPS])
		deconstruct_array(DatumGetArrayTypePCopy(st->values[SOURCES_ALLOWED_IPS]),
						  CIDROID, -1, false, TYPALIGN_INT,
						  &src->nets, &src->net_nulls, &src->nnets);
	src->ttl_default = st->nulls[SOURCES_TTL];
	if (!src->ttl_default)
		src->ttl = *DatumGetIntervalP(st->values[SOURCES_TTL]);
	/* last: what it holds is released only by receive_forget */
	receive_prepare_keys(DatumGetArrayTypePCopy(st->values[SOURCES_SECRETS]), src);
}

/*
 * The source's configuration as the statement's snapshot sees its row,
 * into *src (pointing into the cache, valid for this call); false if there
 * is no such source
 */
static bool
receive_read_source(text *source, ReceiveSource *src)
{
	CachedSource *entry = NULL;
	CachedSource *victim = &cached_sources[0];
	IdemStore	st;
	bool		found;
	MemoryContext cxt;
	MemoryContext oldcxt;

	for (int i = 0; i < RECEIVE_CACHED_SOURCES; i++)
	{
		CachedSource *e = &cached_sources[i];

		if (e->cxt != NULL && VARSIZE_ANY_EXHDR(e->name) == VARSIZE_ANY_EXHDR(source) &&
			memcmp(VARDATA_ANY(e->name), VARDATA_ANY(source), VARSIZE_ANY_EXHDR(source)) == 0)
			entry = e;
		else if (e->cxt == NULL || (victim->cxt != NULL && e->used < victim->used))
			victim = e;
	}
	if (entry != NULL && idem_store_still_visible(IDEM_SOURCES, &entry->version))
	{
		entry->used = ++cached_sources_clock;
		*src = entry->src;
	}
	else
	{
		if (entry != NULL)
			receive_forget(entry);
		else
			entry = victim;

		/* read into memory of the call's, kept only once it is complete */
		cxt = AllocSetContextCreate(CurrentMemoryContext, "idem webhook source",
									ALLOCSET_SMALL_SIZES);
		idem_store_open(&st, IDEM_SOURCES, false);
		found = idem_store_fetch_visible(&st, source, NULL);
		if (found)
		{
			text	   *name = MemoryContextAlloc(cxt, VARSIZE_ANY(source));

			memcpy(name, source, VARSIZE_ANY(source));
			oldcxt = MemoryContextSwitchTo(cxt);
			receive_copy_row(&st, src);
			MemoryContextSwitchTo(oldcxt);
			/* nothing below raises an error: the keys are the entry's now */
			if (entry->cxt != NULL)
				receive_forget(entry);
			idem_store_row_version(&st, &entry->version);
			entry->name = name;
			entry->src = *src;
			entry->used = ++cached_sources_clock;
			MemoryContextSetParent(cxt, TopMemoryContext);
			entry->cxt = cxt;
		}
		idem_store_close(&st);
		if (!found)
		{
			MemoryContextDelete(cxt);
			return false;
		}
	}
	if (src->ttl_default)
	{
		memset(&src->ttl, 0, sizeof(Interval));
		src->ttl.time = (TimeOffset) idem_webhook_ttl_secs * USECS_PER_SEC;
	}
	return true;
}

/* Is the client address within one of the source's allowed networks? */
static bool
receive_ip_allowed(const ReceiveSource *src, Datum client_ip)
{
	for (int i = 0; i < src->nnets; i++)
		if (!src->net_nulls[i] &&
			DatumGetBool(DirectFunctionCall2(network_subeq, client_ip, src->nets[i])))
			return true;
	return false;
}

/* Does one of the source's secrets verify the request? */
static bool
receive_any_secret(const ReceiveSource *src, const VerifyRequest *req)
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
receive_verify(const ReceiveSource *src, VerifyRequest *req)
{
	if (receive_any_secret(src, req))
		return VERDICT_GENUINE;
	if (src->receive->timestamped && req->tolerance_usecs >= 0)
	{
		req->tolerance_usecs = -1;
		if (receive_any_secret(src, req))
			return VERDICT_STALE;
	}
	return VERDICT_FORGED;
}

/*
 * The event id of a verified request, as the source's scheme places it, as
 * a text; NULL if it is missing, empty, longer than an event id may be, or
 * not text of the database's encoding
 */
static text *
receive_event_id(const ReceiveSource *src, const VerifyRequest *req)
{
	const ReceiveScheme *rs = src->receive;
	Slice		id;
	Form		form;
	bool		found = false;

	switch (rs->place)
	{
		case ID_BODY_MEMBER:
			found = idem_json_member_string(req->payload, rs->name, &id);
			break;
		case ID_HEADER:
			found = idem_find_header(req->headers, rs->name, &id);
			break;
		case ID_FORM:
			found = idem_form_decode_charset(req->payload, rs->charset_param, &form) &&
				idem_form_get(&form, rs->name, &id);
			break;
		case ID_ADYEN:
			found = idem_adyen_event_id(req->payload, &id);
			break;
	}
	if (!found || id.len == 0 || id.len > IDEM_MAX_KEY_BYTES ||
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

/* A rejection: counted, nothing written */
static Datum
receive_reject(FunctionCallInfo fcinfo, const char *reason)
{
	idem_stats_count(IDEM_STAT_WEBHOOKS_REJECTED, 1);
	return receive_answer(fcinfo, "rejected", NULL, reason);
}

/*
 * idem_webhook_receive(source, payload, headers, client_ip): status new,
 * duplicate or rejected; the event id; the reason of a rejection
 */
Datum
idem_webhook_receive(PG_FUNCTION_ARGS)
{
	text	   *source = idem_arg_scope(fcinfo, 0, "source");
	ReceiveSource src;
	VerifyRequest req;
	volatile ReceiveVerdict verdict = VERDICT_FORGED;
	text	   *event_id;
	bool		first;

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

	if (!receive_read_source(source, &src))
		return receive_reject(fcinfo, "unknown_source");
	if (!PG_ARGISNULL(3) && src.nets != NULL &&
		!receive_ip_allowed(&src, PG_GETARG_DATUM(3)))
		return receive_reject(fcinfo, "ip");

	req.payload = idem_slice_of_text(PG_GETARG_TEXT_PP(1));
	req.headers = PG_GETARG_JSONB_P(2);
	req.tolerance_usecs = src.tolerance_usecs;
	/* what the schemes make is wiped and freed, error or not */
	PG_TRY();
	{
		verdict = receive_verify(&src, &req);
	}
	PG_FINALLY();
	{
		idem_verify_release_all();
	}
	PG_END_TRY();
	if (verdict == VERDICT_FORGED)
		return receive_reject(fcinfo, "signature");
	if (verdict == VERDICT_STALE)
		return receive_reject(fcinfo, "timestamp");

	event_id = receive_event_id(&src, &req);
	if (event_id == NULL)
		return receive_reject(fcinfo, "malformed");

	first = idem_webhook_record(source, event_id, &src.ttl);
	return receive_answer(fcinfo, first ? "new" : "duplicate", event_id, NULL);
}
