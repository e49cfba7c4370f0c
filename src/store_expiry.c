/*
 * store_expiry.c
 *		Finding expired rows without an index on expires_at: the purge reads
 *		the table in physical order, and an expiry map in shared memory lets
 *		it skip what holds nothing to delete.
 *
 * A B-tree on expires_at costs every claim and every webhook delivery an
 * index insert: WAL, CPU, and 23 bytes a key on disk, for the purge alone.
 * From 1.6 the tables have none.  The purge reads a table range by range
 * (EXPIRY_RANGE_BLOCKS blocks), deleting what has expired, and the map says
 * for each range of up to EXPIRY_TABLES tables which ranges it can skip.
 *
 * The map protocol.  A range is known when its epoch equals its table's;
 * then no row of it that a transaction may still see becomes purgeable
 * before min (purgeable: expired, and for a key past its lease too).
 *	 - Writers: idem_store_insert and idem_store_update note each row version
 *	   they wrote, after writing it: under the range's spinlock, min and, if
 *	   a sweep holds the range, noted are lowered to its expires_at.
 *	 - A sweep of a range holds it (sweeping = the table's epoch, noted =
 *	   infinity) unless another sweep of this epoch does, reads its pages,
 *	   and on reading them all sets min to the least of noted and of what it
 *	   left (every row a dirty snapshot sees, but those it deleted), and the
 *	   range's epoch to the one it began in.  A row written meanwhile is on a
 *	   page before the sweep reads it, or is noted after noted was reset
 *	   (123_purge_sweep.pl pauses a sweep there to write one).
 *	 - Forgetting a table is a new epoch: every range unknown at once.  A
 *	   table is forgotten when its slot is given to another table (or to its
 *	   new file after TRUNCATE, CLUSTER or VACUUM FULL), when a transaction
 *	   that swept it aborts or is prepared (its deletions may come back), and
 *	   when a statement writes it without idem (SQL, COPY, a restore: the
 *	   tables' trigger idem.expiry_outside_write, idem--1.5--1.6.sql).
 *	 - Unknown is also every range after start or a crash, past
 *	   EXPIRY_RANGES, of a table without that trigger enabled ALWAYS or
 *	   whose trigger changed since (DISABLE, ENABLE), of a table a
 *	   subscription writes (apply fires no statement trigger), and every
 *	   range without shared_preload_libraries: unknown ranges are read.
 * Only a sweep can make a range skip rows, and only under these rules; a
 * note or a forgetting only makes the purge read more.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_subscription_rel.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/wait_event.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idem.h"
#include "store.h"
#include "store_internal.h"

#define EXPIRY_RANGE_BLOCKS	256		/* 2 MB, about 9,000 keys */
#define EXPIRY_RANGES		8192	/* 16 GB of a table */
#define EXPIRY_TABLES		8
#define EXPIRY_TRANCHE		"idem expiry"

/* One range of a table's blocks */
typedef struct ExpiryRange
{
	slock_t		mutex;
	uint64		epoch;			/* the table's epoch when min was set */
	uint64		sweeping;		/* epoch of the sweep holding it, or 0 */
	TimestampTz min;			/* nothing purgeable before it, when known */
	TimestampTz noted;			/* least expiry noted while swept */
} ExpiryRange;

/* The ranges of one table (a relation's file) in one database */
typedef struct ExpiryTable
{
	Oid			dbid;			/* InvalidOid: free; set under the lock */
	Oid			relid;
	Oid			filenode;
	TimestampTz swept;			/* last sweep: the least recent slot is reused */
	TransactionId trigger;		/* last change of its outside-write trigger */
	pg_atomic_uint64 epoch;		/* from 1; a new one forgets every range */
	ExpiryRange ranges[EXPIRY_RANGES];
} ExpiryTable;

typedef struct ExpiryShared
{
	LWLock	   *lock;			/* guards the slots' identities */
	ExpiryTable tables[EXPIRY_TABLES];
} ExpiryShared;

static ExpiryShared *expiry = NULL;

/* The slot this backend last found a table in */
static int	cached_slot = -1;

/*
 * Slots whose ranges this transaction may have made known: forgotten if it
 * aborts, as its deletions come back
 */
static bool touched[EXPIRY_TABLES];
static bool callbacks_registered = false;

#ifdef USE_ASSERT_CHECKING
/*
 * idem.sweep_pause, in builds with assertions only (make test builds idem
 * so): how long a sweep waits after reading a range it holds, before it
 * sets what it learnt, so that a test can write into the range meanwhile
 * (123_purge_sweep.pl).  The wait shows as wait_event Extension.
 */
static int	sweep_pause_ms = 0;
#endif

/* Define the map's settings: none but the test pause of assert builds */
void
idem_expiry_init(void)
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

/* Shared memory the map needs */
static Size
expiry_memsize(void)
{
	return MAXALIGN(sizeof(ExpiryShared));
}

/* Ask for the map's shared memory and lock (shmem_request_hook) */
void
idem_expiry_shmem_request(void)
{
	RequestAddinShmemSpace(expiry_memsize());
	RequestNamedLWLockTranche(EXPIRY_TRANCHE, 1);
}

/* Create, or attach to, the map: every slot free (shmem_startup_hook) */
void
idem_expiry_shmem_startup(void)
{
	bool		found;
	int			i;
	int			r;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	expiry = ShmemInitStruct("idem expiry map", expiry_memsize(), &found);
	if (!found)
	{
		expiry->lock = &(GetNamedLWLockTranche(EXPIRY_TRANCHE))->lock;
		for (i = 0; i < EXPIRY_TABLES; i++)
		{
			ExpiryTable *t = &expiry->tables[i];

			t->dbid = t->relid = t->filenode = InvalidOid;
			t->swept = 0;
			t->trigger = InvalidTransactionId;
			pg_atomic_init_u64(&t->epoch, 1);
			for (r = 0; r < EXPIRY_RANGES; r++)
			{
				SpinLockInit(&t->ranges[r].mutex);
				t->ranges[r].epoch = 0;
				t->ranges[r].sweeping = 0;
				t->ranges[r].min = DT_NOBEGIN;
				t->ranges[r].noted = DT_NOEND;
			}
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Is slot t the one of heap's current file? */
static inline bool
expiry_slot_is(ExpiryTable *t, Relation heap)
{
	return t->dbid == MyDatabaseId && t->relid == RelationGetRelid(heap) &&
		t->filenode == IDEM_REL_FILENUMBER(heap);
}

/*
 * The slot of heap's file, or NULL.  Read without the lock: a slot given to
 * another table meanwhile only takes a note it did not need.
 */
static ExpiryTable *
expiry_find(Relation heap)
{
	int			i;

	if (expiry == NULL)
		return NULL;
	if (cached_slot >= 0 && expiry_slot_is(&expiry->tables[cached_slot], heap))
		return &expiry->tables[cached_slot];
	for (i = 0; i < EXPIRY_TABLES; i++)
		if (expiry_slot_is(&expiry->tables[i], heap))
		{
			cached_slot = i;
			return &expiry->tables[i];
		}
	return NULL;
}

/*
 * Note a row version just written at tid, expiring at expires (the row is
 * on its page already: see the protocol above)
 */
void
idem_expiry_note(Relation heap, ItemPointer tid, TimestampTz expires)
{
	ExpiryTable *t = expiry_find(heap);
	BlockNumber r = ItemPointerGetBlockNumber(tid) / EXPIRY_RANGE_BLOCKS;
	ExpiryRange *range;

	if (t == NULL || r >= EXPIRY_RANGES)
		return;
	range = &t->ranges[r];
	SpinLockAcquire(&range->mutex);
	if (expires < range->min)
		range->min = expires;
	if (range->sweeping != 0 && expires < range->noted)
		range->noted = expires;
	SpinLockRelease(&range->mutex);
}

/* Forget what the map knows of heap's file: every range is read again */
void
idem_expiry_forget(Relation heap)
{
	ExpiryTable *t = expiry_find(heap);

	if (t != NULL)
		pg_atomic_fetch_add_u64(&t->epoch, 1);
}

/* Forget the slots this transaction swept; with forget, their ranges too */
static void
expiry_untouch(bool forget)
{
	int			i;

	for (i = 0; i < EXPIRY_TABLES; i++)
		if (touched[i])
		{
			if (forget)
				pg_atomic_fetch_add_u64(&expiry->tables[i].epoch, 1);
			touched[i] = false;
		}
}

/* At the end of a transaction that swept: forget if it aborts or is prepared */
static void
expiry_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			expiry_untouch(false);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			expiry_untouch(true);
			break;
		default:
			break;
	}
}

/*
 * A subtransaction that aborts undoes its deletions too: forget every slot
 * the transaction swept so far (more than needed, never less)
 */
static void
expiry_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		expiry_untouch(true);
}

/* Does a subscription write heap (logical replication applies rows)? */
static bool
expiry_subscribed(Relation heap)
{
	Relation	rel = table_open(SubscriptionRelRelationId, AccessShareLock);
	ScanKeyData skey;
	SysScanDesc scan;
	bool		found;

	ScanKeyInit(&skey, Anum_pg_subscription_rel_srrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(RelationGetRelid(heap)));
	scan = systable_beginscan(rel, SubscriptionRelSrrelidSrsubidIndexId, true,
							  NULL, 1, &skey);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * May the map serve the table st has open?  Sets *trigger to what
 * idem_store_outside_writes_seen answers, which the slot must match.
 */
static bool
expiry_serves(IdemStore *st, TransactionId *trigger)
{
	if (expiry == NULL)
		return false;
	*trigger = idem_store_outside_writes_seen(st);
	return TransactionIdIsValid(*trigger) && !expiry_subscribed(st->heap);
}

/*
 * The slot of heap's file for a sweep, taking the least recently swept one
 * if it has none, and its epoch; NULL when the map cannot serve the table.
 */
static ExpiryTable *
expiry_take(IdemStore *st, uint64 *epoch)
{
	Relation	heap = st->heap;
	ExpiryTable *t = NULL;
	TransactionId trigger;
	int			i;

	if (!expiry_serves(st, &trigger))
		return NULL;
	LWLockAcquire(expiry->lock, LW_EXCLUSIVE);
	for (i = 0; i < EXPIRY_TABLES && t == NULL; i++)
		if (expiry->tables[i].dbid == MyDatabaseId &&
			expiry->tables[i].relid == RelationGetRelid(heap))
			t = &expiry->tables[i];
	if (t == NULL)
	{
		t = &expiry->tables[0];
		for (i = 1; i < EXPIRY_TABLES; i++)
			if (expiry->tables[i].swept < t->swept)
				t = &expiry->tables[i];
	}
	if (!expiry_slot_is(t, heap) || t->trigger != trigger)
	{
		/* forget first: a note from before this is for another file */
		pg_atomic_fetch_add_u64(&t->epoch, 1);
		pg_write_barrier();
		t->dbid = MyDatabaseId;
		t->relid = RelationGetRelid(heap);
		t->filenode = IDEM_REL_FILENUMBER(heap);
		t->trigger = trigger;
	}
	t->swept = GetCurrentTimestamp();
	*epoch = pg_atomic_read_u64(&t->epoch);
	LWLockRelease(expiry->lock);

	if (!callbacks_registered)
	{
		RegisterXactCallback(expiry_xact_callback, NULL);
		RegisterSubXactCallback(expiry_subxact_callback, NULL);
		callbacks_registered = true;
	}
	touched[t - expiry->tables] = true;
	return t;
}

/*
 * Does the map know that range (its spinlock held) holds nothing
 * purgeable at now, in the table's epoch?
 */
static inline bool
expiry_range_known_empty(ExpiryRange *range, uint64 epoch, TimestampTz now)
{
	return range->epoch == epoch && range->min > now;
}

/*
 * Delete the expired row in st->slot that the purge found, unless a live
 * transaction holds its key or is writing it: a purge never waits for a
 * claim.  The key lock is released at once, so a purge of any size takes
 * one lock at a time; a claimer of the key then waits on the purge's
 * transaction through the row's xmax, as for any uncommitted write.
 */
bool
idem_store_delete_expired(IdemStore *st)
{
	bool		isnull;
	text	   *a = DatumGetTextPP(slot_getattr(st->slot, 1, &isnull));
	text	   *b = DatumGetTextPP(slot_getattr(st->slot, 2, &isnull));

	return idem_store_delete_expired_tid(st, &st->slot->tts_tid, a, b);
}

/*
 * Delete the expired row at tid, whose key is (a, b), as
 * idem_store_delete_expired does
 */
bool
idem_store_delete_expired_tid(IdemStore *st, ItemPointer tid, text *a, text *b)
{
	TM_FailureData tmfd;
	volatile TM_Result result;
	int			saved;

	if (!idem_store_lock(st->which, a, b, true))
		return false;
	saved = idem_store_images_begin();
	PG_TRY();
	{
		result = heap_delete(st->heap, tid, GetCurrentCommandId(true),
							 InvalidSnapshot, false, &tmfd, false);
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
idem_expiry_purgeable_at(IdemStore *st, HeapTuple tup)
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
					idem_expiry_purgeable_at(st, &tup) <= pass->now)
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
			at = idem_expiry_purgeable_at(st, &tup);
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
			if (idem_store_delete_expired_tid(st, &cand[i].tid, cand[i].a, cand[i].b))
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
			if (expiry_range_known_empty(range, epoch, pass->now))
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
idem_expiry_sweep(IdemStore *st, TimestampTz now, int64 limit)
{
	uint64		epoch = 0;
	ExpiryTable *t = expiry_take(st, &epoch);
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
idem_expiry_backlog(IdemStore *st, TimestampTz now, int64 *expired, TimestampTz *oldest)
{
	ExpiryTable *t = NULL;
	uint64		epoch = 0;
	TransactionId trigger;
	ExpiryPass	pass = {.now = now,.counting = true,.limit = PG_INT64_MAX,.oldest = DT_NOEND};

	if (expiry_serves(st, &trigger) && (t = expiry_find(st->heap)) != NULL)
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
