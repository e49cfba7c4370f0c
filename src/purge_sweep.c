/*
 * purge_sweep.c
 *		The purge's sweep: reading a table in physical order, range by
 *		range, deleting what has expired, and skipping the ranges that the
 *		expiry map knows hold nothing to delete; the count of the backlog;
 *		the purge's deletes, one key lock at a time; and the purge of
 *		idem.webhook_order, the objects' newest webhook events.
 *
 * The map and the protocol that the sweep follows to hold a range and set
 * its bound are stated at the top of store_expiry.c.
 *
 * May call: the expiry map (store_expiry.h), the key locks, the tables'
 * shape and the compression of page images (store.h, store_internal.h),
 * and the page reads of what mirrors core (store_core.c).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "idem.h"
#include "purge.h"
#include "store.h"
#include "store_core.h"
#include "store_expiry.h"
#include "store_internal.h"

#ifdef USE_ASSERT_CHECKING
/*
 * idem.sweep_pause, in builds with assertions only (make test builds idem
 * so): how long a sweep waits after reading a range it holds, before it
 * sets what it learnt, so that a test can write into the range meanwhile
 * (123_purge_sweep.pl).  The wait shows as wait_event Extension.
 */
static int	sweep_pause_ms = 0;
#endif

/* Define the sweep's settings: none but the test pause of assert builds (_PG_init) */
void
idem_sweep_init(void)
{
#ifdef USE_ASSERT_CHECKING
	DefineCustomIntVariable("idem.sweep_pause",
							"Test only: pause of a sweep between reading a range and setting its bound.",
							NULL,
							&sweep_pause_ms, 0, 0, 60 * 1000,
							PGC_SUSET, GUC_UNIT_MS | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
#endif
}

#ifdef USE_ASSERT_CHECKING
/* Wait idem.sweep_pause, as a test asked, answering interrupts */
static void
expiry_test_pause(void)
{
	TimestampTz until;

	if (sweep_pause_ms <= 0)
		return;
	until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), sweep_pause_ms);
	while (GetCurrentTimestamp() < until)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}
#endif

/*
 * Delete the expired row in st->slot that the purge found, unless a live
 * transaction holds its key or is writing it: a purge never waits for a
 * claim.  The key lock is released at once, so a purge of any size takes
 * one lock at a time; a claimer of the key then waits on the purge's
 * transaction through the row's xmax, as for any uncommitted write.
 */
bool
idem_sweep_delete_expired(IdemStore *st)
{
	bool		isnull;
	text	   *a = DatumGetTextPP(slot_getattr(st->slot, 1, &isnull));
	text	   *b = DatumGetTextPP(slot_getattr(st->slot, 2, &isnull));

	return idem_sweep_delete_expired_tid(st, &st->slot->tts_tid, a, b);
}

/*
 * Delete the expired row at tid, whose key is (a, b), as
 * idem_sweep_delete_expired does
 */
bool
idem_sweep_delete_expired_tid(IdemStore *st, ItemPointer tid, text *a, text *b)
{
	TM_FailureData tmfd;
	volatile TM_Result result;
	int			saved;

	if (!idem_store_lock(st->which, a, b, true))
		return false;
	saved = idem_store_images_begin();
	PG_TRY();
	{
		result = idem_heap_delete(st->heap, tid, GetCurrentCommandId(true),
								  InvalidSnapshot, false, &tmfd);
	}
	PG_FINALLY();
	{
		idem_store_images_end(saved);
	}
	PG_END_TRY();
	idem_store_unlock(st->which, a, b);
	return result == TM_Ok;
}

/*
 * When the row in tup, of the table open in st, becomes purgeable: its
 * expiry, or its lease's end if that is later (a key whose attempt is still
 * leased stays, whatever its ttl said).  The one statement of that rule,
 * for the sweep and for the purge through an index on expires_at.
 */
TimestampTz
idem_sweep_purgeable_at(IdemStore *st, HeapTuple tup)
{
	const StoreShape *shape = &idem_store_shapes[st->which];
	TupleDesc	desc = RelationGetDescr(st->heap);
	bool		isnull;
	TimestampTz at;

	at = DatumGetTimestampTz(heap_getattr(tup, shape->expires, desc, &isnull));
	if (st->which == IDEM_KEYS)
	{
		Datum		lease = heap_getattr(tup, KEYS_LEASE_UNTIL + 1, desc, &isnull);

		if (!isnull && DatumGetTimestampTz(lease) > at)
			at = DatumGetTimestampTz(lease);
	}
	return at;
}

/* A row the sweep of one page may delete */
typedef struct ExpiryCandidate
{
	ItemPointerData tid;
	TimestampTz purgeable;
	text	   *a;				/* its key's two parts, for the key lock */
	text	   *b;
} ExpiryCandidate;

/* One pass over a table: a sweep that deletes, or a count that only reads */
typedef struct ExpiryPass
{
	TimestampTz now;			/* purgeable means: at or before this */
	bool		counting;		/* count what a sweep would delete, change nothing */
	int64		limit;			/* a sweep deletes at most this many rows */
	int64		done;			/* rows deleted, or counted */
	TimestampTz oldest;			/* counting: the earliest expiry counted */
	Snapshot	snapshot;		/* what a row must be visible to, to count */
	BufferAccessStrategy strategy;
} ExpiryPass;

/*
 * Read blocks [start, end) of the table st has open.  A sweep deletes what
 * is purgeable and visible to the pass's snapshot, until it reaches its
 * limit, and lowers *least to the purgeable time of every row it leaves; a
 * count counts those rows instead.  True if every block was read.
 */
static bool
expiry_read_blocks(IdemStore *st, BlockNumber start, BlockNumber end,
				   ExpiryPass *pass, TimestampTz *least)
{
	TupleDesc	desc = RelationGetDescr(st->heap);
	AttrNumber	expires = idem_store_shapes[st->which].expires;
	ExpiryCandidate cand[MaxHeapTuplesPerPage];
	BlockNumber blk;

	for (blk = start; blk < end; blk++)
	{
		Buffer		buf;
		OffsetNumber off = InvalidOffsetNumber;
		HeapTupleData tup;
		SnapshotData dirty;
		int			ncand = 0;
		bool		full = false;
		int			i;

		CHECK_FOR_INTERRUPTS();
		buf = ReadBufferExtended(st->heap, MAIN_FORKNUM, blk, RBM_NORMAL, pass->strategy);
		if (!pass->counting)
			idem_core_page_prepare(st->heap, buf);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		while (idem_core_page_next(st->heap, buf, pass->snapshot, &off, &tup))
		{
			TimestampTz at;
			bool		isnull;

			if (pass->counting)
			{
				if (HeapTupleSatisfiesVisibility(&tup, pass->snapshot, buf) &&
					idem_sweep_purgeable_at(st, &tup) <= pass->now)
				{
					pass->done++;
					pass->oldest = Min(pass->oldest,
									   DatumGetTimestampTz(heap_getattr(&tup, expires, desc, &isnull)));
				}
				continue;
			}
			/* what a transaction may still see: committed, or being written */
			InitDirtySnapshot(dirty);
			if (!HeapTupleSatisfiesVisibility(&tup, &dirty, buf))
				continue;
			at = idem_sweep_purgeable_at(st, &tup);
			if (at > pass->now || !HeapTupleSatisfiesVisibility(&tup, pass->snapshot, buf))
			{
				*least = Min(*least, at);
				continue;
			}
			if (pass->done + ncand >= pass->limit)
			{
				full = true;
				break;
			}
			cand[ncand].tid = tup.t_self;
			cand[ncand].purgeable = at;
			cand[ncand].a = DatumGetTextPCopy(heap_getattr(&tup, 1, desc, &isnull));
			cand[ncand].b = DatumGetTextPCopy(heap_getattr(&tup, 2, desc, &isnull));
			ncand++;
		}
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);

		for (i = 0; i < ncand; i++)
		{
			if (idem_sweep_delete_expired_tid(st, &cand[i].tid, cand[i].a, cand[i].b))
				pass->done++;
			else
				*least = Min(*least, cand[i].purgeable);
			pfree(cand[i].a);
			pfree(cand[i].b);
		}
		ReleaseBuffer(buf);
		if (full)
			return false;
	}
	return true;
}

/*
 * Run a pass over the table st has open, range by range, skipping the
 * ranges that slot t (NULL: none) knows hold nothing purgeable in epoch.  A
 * sweep holds each range it reads, as the protocol above says, and sets
 * what it learnt; a count leaves the map as it is.
 */
static void
expiry_pass(IdemStore *st, ExpiryTable *t, uint64 epoch, ExpiryPass *pass)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(st->heap);
	BlockNumber nranges = (nblocks + EXPIRY_RANGE_BLOCKS - 1) / EXPIRY_RANGE_BLOCKS;
	BlockNumber r;

	for (r = 0; r < nranges && pass->done < pass->limit; r++)
	{
		ExpiryRange *range = (t != NULL && r < EXPIRY_RANGES) ? &t->ranges[r] : NULL;
		bool		held = false;
		bool		whole;
		TimestampTz least = DT_NOEND;

		if (range != NULL)
		{
			SpinLockAcquire(&range->mutex);
			if (idem_expiry_range_known_empty(range, epoch, pass->now))
			{
				SpinLockRelease(&range->mutex);
				continue;
			}
			if (!pass->counting && range->sweeping != epoch)
			{
				range->sweeping = epoch;
				range->noted = DT_NOEND;
				held = true;
			}
			SpinLockRelease(&range->mutex);
		}

		whole = expiry_read_blocks(st, r * EXPIRY_RANGE_BLOCKS,
								   Min(nblocks, (r + 1) * EXPIRY_RANGE_BLOCKS),
								   pass, &least);

		if (held)
		{
#ifdef USE_ASSERT_CHECKING
			expiry_test_pause();
#endif
			SpinLockAcquire(&range->mutex);
			if (range->sweeping == epoch)
			{
				if (whole)
				{
					range->min = Min(least, range->noted);
					range->epoch = epoch;
				}
				range->sweeping = 0;
			}
			SpinLockRelease(&range->mutex);
		}
	}
}

/*
 * Delete up to limit purgeable rows of the table st has open, reading the
 * ranges that the map does not know to hold none; returns how many.
 */
int64
idem_sweep(IdemStore *st, TimestampTz now, int64 limit)
{
	uint64		epoch = 0;
	ExpiryTable *t = idem_expiry_take(st, &epoch);
	ExpiryPass	pass = {.now = now,.counting = false,.limit = limit};

	pass.snapshot = RegisterSnapshot(GetLatestSnapshot());
	pass.strategy = GetAccessStrategy(BAS_BULKREAD);
	expiry_pass(st, t, epoch, &pass);
	UnregisterSnapshot(pass.snapshot);
	FreeAccessStrategy(pass.strategy);
	return pass.done;
}

/*
 * How many rows of the table st has open are purgeable at now, visible to
 * the active snapshot, and the earliest expiry among them (DT_NOEND: none),
 * reading the ranges that the map does not know to hold none.  Only reads:
 * neither the rows nor the map change (the monitoring role calls it).
 */
void
idem_sweep_backlog(IdemStore *st, TimestampTz now, int64 *expired, TimestampTz *oldest)
{
	ExpiryTable *t = NULL;
	uint64		epoch = 0;
	TransactionId trigger;
	ExpiryPass	pass = {.now = now,.counting = true,.limit = PG_INT64_MAX,.oldest = DT_NOEND};

	if (idem_expiry_serves(st, &trigger) && (t = idem_expiry_find(st->heap)) != NULL)
	{
		epoch = pg_atomic_read_u64(&t->epoch);
		if (t->trigger != trigger)
			t = NULL;
	}
	pass.snapshot = GetActiveSnapshot();
	pass.strategy = GetAccessStrategy(BAS_BULKREAD);
	expiry_pass(st, t, epoch, &pass);
	FreeAccessStrategy(pass.strategy);
	*expired = pass.done;
	*oldest = pass.oldest;
}

/*
 * Is index a btree whose first column is the expires_at (timestamptz) of
 * heap?  idem.webhook_order is not one of the store's tables, whose shape
 * the store checks: a table altered by hand is then left alone.
 */
static bool
order_expiry_index(Relation heap, Relation index)
{
	AttrNumber	attnum;

	if (index->rd_index->indrelid != RelationGetRelid(heap) ||
		index->rd_rel->relam != BTREE_AM_OID || index->rd_index->indnkeyatts < 1)
		return false;
	attnum = index->rd_index->indkey.values[0];
	return attnum > 0 &&
		TupleDescAttr(RelationGetDescr(heap), attnum - 1)->atttypid == TIMESTAMPTZOID &&
		strcmp(NameStr(TupleDescAttr(RelationGetDescr(heap), attnum - 1)->attname), "expires_at") == 0;
}

/*
 * Delete up to limit rows of idem.webhook_order that expired by now,
 * through its expires_at index, as the purge deletes the store's rows: in
 * a snapshot taken now, a row that another transaction holds or changed
 * skipped (the next pass gets it), without the executor (no SQL, so no
 * search_path, privilege or isolation level of the caller's plays a part).
 * Nothing when the database's idem is older than 1.7.  Returns how many.
 */
int64
idem_sweep_order(TimestampTz now, int64 limit)
{
	Oid			nsp = get_namespace_oid("idem", true);
	Oid			heapid;
	Oid			indexid;
	Relation	heap;
	Relation	index;
	Snapshot	snapshot;
	TupleTableSlot *slot;
	IndexScanDesc scan;
	ScanKeyData skey;
	int64		deleted = 0;

	/* by OID, not by name: a name is checked against the caller's rights */
	heapid = OidIsValid(nsp) ? get_relname_relid("webhook_order", nsp) : InvalidOid;
	if (!OidIsValid(heapid) || (heap = try_relation_open(heapid, RowExclusiveLock)) == NULL)
		return 0;
	indexid = get_relname_relid("webhook_order_expires_at_idx", RelationGetNamespace(heap));
	if (!OidIsValid(indexid))
	{
		table_close(heap, RowExclusiveLock);
		return 0;
	}
	index = index_open(indexid, AccessShareLock);
	if (!order_expiry_index(heap, index))
	{
		index_close(index, AccessShareLock);
		table_close(heap, RowExclusiveLock);
		return 0;
	}
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	slot = table_slot_create(heap, NULL);
	ScanKeyInit(&skey, 1, BTLessEqualStrategyNumber, F_TIMESTAMPTZ_LE,
				TimestampTzGetDatum(now));
	scan = idem_index_beginscan(heap, index, snapshot, 1, 0);
	index_rescan(scan, &skey, 1, NULL, 0);
	while (deleted < limit && index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		TM_FailureData tmfd;

		CHECK_FOR_INTERRUPTS();
		if (idem_heap_delete(heap, &slot->tts_tid, GetCurrentCommandId(true),
							 InvalidSnapshot, false, &tmfd) == TM_Ok)
			deleted++;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	index_close(index, AccessShareLock);
	table_close(heap, RowExclusiveLock);
	return deleted;
}
