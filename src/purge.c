/*
 * purge.c
 *		idem_purge: delete expired keys, webhook records and the objects'
 *		newest events (idem.webhook_order) in one batch.
 *
 * idem_purge_batch() does the work; the SQL function idem_purge() (run by
 * pg_cron or by hand) and the purge worker, which calls it directly and runs
 * no SQL, both go through it.  From 1.6 it sweeps each table in physical
 * order, skipping what the expiry map knows holds nothing to delete
 * (store_expiry.c); a table not yet updated is read through its expires_at
 * index up to now.  Either way it deletes what it may: a row whose key a
 * live transaction holds or is writing is skipped (the next pass gets it),
 * and a processing row whose lease has not run out is never removed.
 *
 * May call: the sweep and the purge's deletes (purge_sweep.c), the store
 * (rows, the relation cache, the compression of page images, and the
 * expiry map's forgetting of a table), the counters (stats.c) and the
 * argument checks (input.c).  It defines idem.purge_batch_size
 * (idem_purge_init).
 */
#include "postgres.h"

#include <limits.h>

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "idem.h"
#include "input.h"
#include "purge.h"
#include "stats.h"
#include "store.h"
#include "store_expiry.h"

PG_FUNCTION_INFO_V1(idem_purge);
PG_FUNCTION_INFO_V1(idem_expiry_outside_write);
PG_FUNCTION_INFO_V1(idem_purge_backlog);

int			idem_purge_batch_size = 10000;

/* Define idem.purge_batch_size (_PG_init) */
void
idem_purge_init(void)
{
	DefineCustomIntVariable("idem.purge_batch_size",
							"Rows a purge deletes per transaction.",
							NULL,
							&idem_purge_batch_size, 10000, 1, INT_MAX,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
}

/* Delete up to limit expired rows of one table; returns how many */
static int64
purge_table(IdemTable which, TimestampTz now, int64 limit)
{
	IdemStore	st;
	Relation	index;
	IndexScanDesc scan;
	ScanKeyData skey;
	int64		deleted = 0;
	Snapshot	snapshot;

	/*
	 * A snapshot taken now, not the statement's: it must not show rows this
	 * transaction already deleted or replaced (an earlier idem_purge or
	 * idem_claim in the same statement), which heap_delete would refuse.
	 */
	CommandCounterIncrement();
	idem_store_open(&st, which, true);
	if (!idem_store_has_expires_index(&st))
	{
		deleted = idem_sweep(&st, now, limit);
		idem_store_close(&st);
		return deleted;
	}
	index = idem_store_open_expires(&st);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyInit(&skey, 1, BTLessEqualStrategyNumber, F_TIMESTAMPTZ_LE,
				TimestampTzGetDatum(now));
	scan = idem_index_beginscan(st.heap, index, snapshot, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	while (deleted < limit && index_getnext_slot(scan, ForwardScanDirection, st.slot))
	{
		CHECK_FOR_INTERRUPTS();
		/* expired, but perhaps still leased */
		if (idem_sweep_purgeable_at(&st, ExecFetchSlotHeapTuple(st.slot, false, NULL)) > now)
			continue;
		if (idem_sweep_delete_expired(&st))
			deleted++;
	}
	index_endscan(scan);
	UnregisterSnapshot(snapshot);
	index_close(index, NoLock);
	idem_store_close(&st);
	return deleted;
}

/*
 * Delete at most limit (> 0) expired rows, keys first, in the current
 * transaction; count them and note the purge.  Returns how many.
 */
int64
idem_purge_batch(int64 limit)
{
	TimestampTz now = GetCurrentTimestamp();
	volatile int64 deleted;
	int			saved;

	Assert(limit > 0);
	idem_check_writable("idem_purge()");

	/* the sweep's pruning logs pages too, not only the deletes */
	saved = idem_store_images_begin();
	PG_TRY();
	{
		deleted = purge_table(IDEM_KEYS, now, limit);
		if (deleted < limit)
			deleted += purge_table(IDEM_WEBHOOKS, now, limit - deleted);
		if (deleted < limit)
			deleted += idem_sweep_order(now, limit - deleted);
	}
	PG_FINALLY();
	{
		idem_store_images_end(saved);
	}
	PG_END_TRY();
	if (deleted > 0)
		CommandCounterIncrement();

	idem_stats_count(IDEM_STAT_PURGED, deleted);
	idem_stats_note_purge(now);
	return deleted;
}

/* idem_purge(batch_size): delete expired rows, at most batch_size; returns how many */
Datum
idem_purge(PG_FUNCTION_ARGS)
{
	int64		limit = idem_purge_batch_size;

	if (!PG_ARGISNULL(0))
	{
		limit = PG_GETARG_INT32(0);
		if (limit <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("batch_size must be positive")));
	}
	PG_RETURN_INT64(idem_purge_batch(limit));
}

/*
 * Trigger idem.expiry_outside_write(), after each INSERT or UPDATE statement
 * on idem.keys and idem.webhooks: idem writes without the executor, so only
 * a write that bypasses idem (SQL, COPY, a restore) fires it.  The purge
 * then reads the whole table again, as the rows may expire anywhere.
 */
Datum
idem_expiry_outside_write(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("idem.expiry_outside_write() must be called as a trigger")));
	idem_expiry_forget(trigdata->tg_relation);
	PG_RETURN_POINTER(NULL);
}

/* The rows of one table a purge could delete now, and the earliest expiry among them */
static void
purge_backlog_of(IdemTable which, TimestampTz now, int64 *expired, TimestampTz *oldest)
{
	IdemStore	st;
	int			saved;

	idem_store_open(&st, which, false);
	/* reading sets hint bits, which log pages with checksums */
	saved = idem_store_images_begin();
	PG_TRY();
	{
		idem_sweep_backlog(&st, now, expired, oldest);
	}
	PG_FINALLY();
	{
		idem_store_images_end(saved);
	}
	PG_END_TRY();
	idem_store_close(&st);
}

/*
 * idem.purge_backlog(): for idem.keys and idem.webhooks, how many rows the
 * purge could delete now and the earliest expiry among them (NULL: none),
 * reading only where the expiry map does not know there is none.  For the
 * exporter, whose role reads no payment: counts and times only.
 */
Datum
idem_purge_backlog(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	static const IdemTable tables[] = {IDEM_KEYS, IDEM_WEBHOOKS};
	static const char *const names[] = {"keys", "webhooks"};
	int			i;

	/*
	 * The caller's descriptor, not the catalog's: the function may have been
	 * dropped since the statement looked it up (DROP EXTENSION idem)
	 */
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (i = 0; i < lengthof(tables); i++)
	{
		int64		expired;
		TimestampTz oldest;
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		purge_backlog_of(tables[i], now, &expired, &oldest);
		values[0] = CStringGetTextDatum(names[i]);
		values[1] = Int64GetDatum(expired);
		values[2] = TimestampTzGetDatum(oldest);
		nulls[2] = TIMESTAMP_NOT_FINITE(oldest);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
