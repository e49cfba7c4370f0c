/*
 * record.c
 *		Entry point: idem_webhook, which records a webhook delivery or queue
 *		message once; idem_webhook_receive records through it too.
 *
 * The record is written in the caller's transaction, so the handler's
 * writes and the record commit or roll back together.  A concurrent
 * duplicate waits for the first delivery's transaction (through the row's
 * in-progress xmin, see store.c) and answers from how it ended.
 *
 * May call: the rest of idem (store, stats, input), none of the layers
 * below the entry points: a record needs no signature.
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "idem.h"
#include "input.h"
#include "stats.h"
#include "store.h"
#include "webhook/entry.h"

PG_FUNCTION_INFO_V1(idem_webhook);

int			idem_webhook_ttl_secs = 7 * 24 * 60 * 60;

/* Define idem.webhook_ttl, which a delivery and a source take by default (_PG_init) */
void
idem_webhook_record_init(void)
{
	DefineCustomIntVariable("idem.webhook_ttl",
							"How long a webhook or message id is kept.",
							NULL,
							&idem_webhook_ttl_secs, 7 * 24 * 60 * 60, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
}

/* Is there no live record of the delivery read?  Moves *now past any wait. */
static bool
webhook_is_first(IdemStore *st, IdemFetch fetched, TimestampTz *now)
{
	if (fetched != IDEM_FETCH_FOUND)
		return true;
	*now = Max(*now, GetCurrentTimestamp());
	return DatumGetTimestampTz(st->values[WEBHOOKS_EXPIRES_AT]) <= *now;
}

/*
 * Record a delivery of (source, event_id), kept for ttl: true the first
 * time, false for a duplicate.  idem_webhook and idem_webhook_receive both
 * record through here, with checked arguments.
 */
bool
idem_webhook_record(text *source, text *event_id, const Interval *ttl)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[WEBHOOKS_NATTS];
	bool		nulls[WEBHOOKS_NATTS] = {false};
	IdemStore	st;
	IdemFetch	fetched;
	bool		first;
	bool		locked;

	idem_check_writable("idem_webhook()");

	/*
	 * The key lock is tried first, without waiting, so a new delivery is
	 * read once, under it.  If another transaction holds it, a duplicate is
	 * answered from a read without it, and only a delivery that looks new
	 * waits for the lock and reads again.
	 */
	idem_store_open(&st, IDEM_WEBHOOKS, true);
	locked = idem_store_lock(IDEM_WEBHOOKS, source, event_id, true);
	fetched = idem_store_fetch(&st, source, event_id, false, locked);
	first = webhook_is_first(&st, fetched, &now);
	if (first && !locked)
	{
		ExecClearTuple(st.slot);
		locked = idem_store_lock(IDEM_WEBHOOKS, source, event_id, false);
		fetched = idem_store_fetch(&st, source, event_id, false, true);
		first = webhook_is_first(&st, fetched, &now);
	}
	if (first)
	{
		values[WEBHOOKS_SOURCE] = PointerGetDatum(source);
		values[WEBHOOKS_EVENT_ID] = PointerGetDatum(event_id);
		values[WEBHOOKS_RECEIVED_AT] = TimestampTzGetDatum(now);
		values[WEBHOOKS_EXPIRES_AT] = TimestampTzGetDatum(idem_after(now, ttl, "ttl"));
		/* an expired record is a delivery seen too long ago: it starts again */
		if (fetched == IDEM_FETCH_FOUND)
			idem_store_update(&st, values, nulls);
		else
			idem_store_insert(&st, values, nulls);
	}
	if (locked)
		idem_store_unlock(IDEM_WEBHOOKS, source, event_id);
	idem_store_close(&st);

	idem_stats_count(first ? IDEM_STAT_WEBHOOKS_NEW : IDEM_STAT_WEBHOOKS_DUPLICATE, 1);
	return first;
}

/* idem_webhook(source, event_id, ttl): true the first time, false for a duplicate */
Datum
idem_webhook(PG_FUNCTION_ARGS)
{
	text	   *source = idem_arg_scope(fcinfo, 0, "source");
	text	   *event_id = idem_arg_key(fcinfo, 1, "event_id");
	Interval   *ttl = idem_arg_interval(fcinfo, 2, "ttl", idem_webhook_ttl_secs);

	PG_RETURN_BOOL(idem_webhook_record(source, event_id, ttl));
}
