/*
 * store_expiry.c
 *		The expiry map: finding expired rows without an index on expires_at: the purge reads
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
 *
 * This file is the map and its protocol; the sweep that reads ranges and
 * sets their bounds is the purge's (purge_sweep.c).
 *
 * May call: the relation cache (store_relcache.c: whether the table's
 * outside-write trigger is set up) and the server's shared memory, locks
 * and catalogs.  The store calls in to note its writes, the purge to take
 * a table's slot and to forget a table.
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
#include "store_expiry.h"

#define EXPIRY_TRANCHE		"idem expiry"

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
ExpiryTable *
idem_expiry_find(Relation heap)
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
	ExpiryTable *t = idem_expiry_find(heap);
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
	ExpiryTable *t = idem_expiry_find(heap);

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
bool
idem_expiry_serves(IdemStore *st, TransactionId *trigger)
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
ExpiryTable *
idem_expiry_take(IdemStore *st, uint64 *epoch)
{
	Relation	heap = st->heap;
	ExpiryTable *t = NULL;
	TransactionId trigger;
	int			i;

	if (!idem_expiry_serves(st, &trigger))
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
