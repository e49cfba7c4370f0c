/*
 * stats.c
 *		Operator counters in shared memory, one set per database.
 *
 * The counters need shared_preload_libraries = 'idem': shared memory can only
 * be reserved while the postmaster starts.  Without it, counting is a no-op
 * and the SQL functions that read or reset the counters say how to fix it.
 *
 * The counters live in a fixed array of IDEM_STATS_MAX_DATABASES slots, one
 * slot per database that has counted something.  A backend is connected to
 * one database for its whole life, so it looks its slot up once and keeps a
 * pointer to it; after that, counting is a single atomic add, which matters
 * because every claim counts.  The lock is taken only to hand out or recycle
 * slots and to read or reset them all.  When every slot is taken, slots of
 * databases that no longer exist are recycled; if none can be, the counts of
 * the extra databases are dropped.
 *
 * Counters are not transactional: a claim that is rolled back still counted,
 * as statistics in PostgreSQL do.
 *
 * May call: the result row of input.c and the server's shared memory.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "input.h"
#include "stats.h"

/* Databases with counters at once; doc/operations.md states the limit */
#define IDEM_STATS_MAX_DATABASES	64

/*
 * Columns of idem.stats_1_0(): dbid, the counters up to purged,
 * last_purge_at; idem.stats_1_3() adds the later counters after them
 */
#define IDEM_STATS_COLS_1_0			(IDEM_STAT_NCOUNTERS_1_0 + 2)
#define IDEM_STATS_COLS_1_3			(IDEM_STAT_NCOUNTERS + 2)

#define IDEM_STATS_TRANCHE			"idem_stats"

/* "Never purged": timestamps are stored as uint64 in an atomic */
#define IDEM_NEVER					((uint64) DT_NOBEGIN)

/* One database's counters */
typedef struct IdemDbStats
{
	Oid			dbid;			/* InvalidOid: free slot; changed under lock */
	pg_atomic_uint64 counters[IDEM_STAT_NCOUNTERS];
	pg_atomic_uint64 last_purge_at; /* TimestampTz, or IDEM_NEVER */
} IdemDbStats;

/* The whole shared state */
typedef struct IdemSharedStats
{
	LWLock	   *lock;			/* guards the slots' dbid fields */
	pg_atomic_uint32 recycled;	/* bumped whenever slots are freed */
	IdemDbStats dbs[IDEM_STATS_MAX_DATABASES];
} IdemSharedStats;

/* NULL unless the library was preloaded */
static IdemSharedStats *idem_shared = NULL;

/* This backend's slot, once found */
static IdemDbStats *my_slot = NULL;

/* Value of "recycled" when this backend last found no free slot */
static bool my_slot_missing = false;
static uint32 my_slot_missing_at = 0;

PG_FUNCTION_INFO_V1(idem_stats_1_0);
PG_FUNCTION_INFO_V1(idem_stats_1_3);
PG_FUNCTION_INFO_V1(idem_stats_reset);

/* Size of the shared state */
static Size
idem_stats_memsize(void)
{
	return MAXALIGN(sizeof(IdemSharedStats));
}

/* Reserve the shared memory and the lock; called from the request hook */
void
idem_stats_shmem_request(void)
{
	RequestAddinShmemSpace(idem_stats_memsize());
	RequestNamedLWLockTranche(IDEM_STATS_TRANCHE, 1);
}

/* Zero a slot's counters */
static void
idem_stats_clear_slot(IdemDbStats *slot)
{
	int			i;

	for (i = 0; i < IDEM_STAT_NCOUNTERS; i++)
		pg_atomic_write_u64(&slot->counters[i], 0);
	pg_atomic_write_u64(&slot->last_purge_at, IDEM_NEVER);
}

/* Create or attach to the shared state; called from the startup hook */
void
idem_stats_shmem_startup(void)
{
	bool		found;
	int			i,
				c;

	/* A crash restart of the postmaster starts over from nothing */
	idem_shared = NULL;
	my_slot = NULL;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	idem_shared = ShmemInitStruct("idem stats", idem_stats_memsize(), &found);
	if (!found)
	{
		idem_shared->lock = &(GetNamedLWLockTranche(IDEM_STATS_TRANCHE))->lock;
		pg_atomic_init_u32(&idem_shared->recycled, 0);
		for (i = 0; i < IDEM_STATS_MAX_DATABASES; i++)
		{
			IdemDbStats *slot = &idem_shared->dbs[i];

			slot->dbid = InvalidOid;
			for (c = 0; c < IDEM_STAT_NCOUNTERS; c++)
				pg_atomic_init_u64(&slot->counters[c], 0);
			pg_atomic_init_u64(&slot->last_purge_at, IDEM_NEVER);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/* The slot of dbid, or NULL; the caller holds the lock */
static IdemDbStats *
idem_stats_find_locked(Oid dbid)
{
	int			i;

	for (i = 0; i < IDEM_STATS_MAX_DATABASES; i++)
		if (idem_shared->dbs[i].dbid == dbid)
			return &idem_shared->dbs[i];
	return NULL;
}

/*
 * Free the slots of databases that were dropped.  Looking at the catalog
 * needs a transaction, and is done without our lock held so that no catalog
 * lock is ever waited for under it.  A dropped database has no backend left
 * that could still hold a pointer to its slot.
 */
static void
idem_stats_recycle(void)
{
	Oid			dbids[IDEM_STATS_MAX_DATABASES];
	bool		dead[IDEM_STATS_MAX_DATABASES];
	int			i;
	bool		any = false;

	if (!IsTransactionState())
		return;

	LWLockAcquire(idem_shared->lock, LW_SHARED);
	for (i = 0; i < IDEM_STATS_MAX_DATABASES; i++)
		dbids[i] = idem_shared->dbs[i].dbid;
	LWLockRelease(idem_shared->lock);

	for (i = 0; i < IDEM_STATS_MAX_DATABASES; i++)
	{
		dead[i] = OidIsValid(dbids[i]) &&
			!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbids[i]));
		any |= dead[i];
	}
	if (!any)
		return;

	LWLockAcquire(idem_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < IDEM_STATS_MAX_DATABASES; i++)
	{
		IdemDbStats *slot = &idem_shared->dbs[i];

		if (dead[i] && slot->dbid == dbids[i])
		{
			idem_stats_clear_slot(slot);
			slot->dbid = InvalidOid;
		}
	}
	pg_atomic_fetch_add_u32(&idem_shared->recycled, 1);
	LWLockRelease(idem_shared->lock);
}

/* Find or take a slot for dbid; NULL when all are taken */
static IdemDbStats *
idem_stats_attach(Oid dbid)
{
	IdemDbStats *slot;
	int			attempt;

	LWLockAcquire(idem_shared->lock, LW_SHARED);
	slot = idem_stats_find_locked(dbid);
	LWLockRelease(idem_shared->lock);
	if (slot)
		return slot;

	for (attempt = 0; attempt < 2; attempt++)
	{
		LWLockAcquire(idem_shared->lock, LW_EXCLUSIVE);
		slot = idem_stats_find_locked(dbid);
		if (slot == NULL)
		{
			slot = idem_stats_find_locked(InvalidOid);
			if (slot)
			{
				/* Counters of a freed slot were zeroed when it was freed */
				slot->dbid = dbid;
			}
		}
		LWLockRelease(idem_shared->lock);
		if (slot || attempt > 0)
			break;
		idem_stats_recycle();
	}
	return slot;
}

/* This backend's slot, found once; NULL if none can be had */
static inline IdemDbStats *
idem_stats_my_slot(void)
{
	if (likely(my_slot != NULL))
		return my_slot;
	if (idem_shared == NULL || !OidIsValid(MyDatabaseId))
		return NULL;

	/* Don't search again until some slot has been freed */
	if (my_slot_missing &&
		pg_atomic_read_u32(&idem_shared->recycled) == my_slot_missing_at)
		return NULL;

	my_slot_missing_at = pg_atomic_read_u32(&idem_shared->recycled);
	my_slot = idem_stats_attach(MyDatabaseId);
	my_slot_missing = (my_slot == NULL);
	return my_slot;
}

/* Add n to a counter of the current database; a no-op without preload */
void
idem_stats_count(IdemCounter counter, int64 n)
{
	IdemDbStats *slot;

	Assert(counter >= 0 && counter < IDEM_STAT_NCOUNTERS);
	if (n <= 0 || idem_shared == NULL)
		return;
	slot = idem_stats_my_slot();
	if (slot)
		pg_atomic_fetch_add_u64(&slot->counters[counter], (uint64) n);
}

/* Remember when the current database was last purged */
void
idem_stats_note_purge(TimestampTz when)
{
	IdemDbStats *slot;

	if (idem_shared == NULL)
		return;
	slot = idem_stats_my_slot();
	if (slot)
		pg_atomic_write_u64(&slot->last_purge_at, (uint64) when);
}

/* Refuse to go on when the counters have no shared memory */
static void
idem_stats_require_preload(void)
{
	if (idem_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem counters are not available"),
				 errdetail("The counters need shared memory, which only a library loaded at server start can have."),
				 errhint("Add idem to shared_preload_libraries and restart the server.")));
}

/*
 * One row per database with counters, in the columns of the given version
 * of the function: dbid, the counters up to purged, last_purge_at, then (from
 * 1.3) the later counters.  The version in the function's name lets a
 * release add columns under a new name while an older install script's view
 * keeps working with the new library, as pg_stat_statements does.
 */
static Datum
idem_stats_rows(FunctionCallInfo fcinfo, int ncols)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	tupdesc;
	Tuplestorestate *tupstore;
	MemoryContext per_query_ctx;
	MemoryContext oldcontext;
	int			i;

	idem_stats_require_preload();

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("materialize mode required, but it is not allowed in this context")));
	per_query_ctx = rsinfo->econtext->ecxt_per_query_memory;
	oldcontext = MemoryContextSwitchTo(per_query_ctx);
	tupdesc = idem_call_result_desc(fcinfo);
	if (tupdesc->natts != ncols)
		elog(ERROR, "incorrect number of output arguments");
	tupstore = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tupstore;
	rsinfo->setDesc = tupdesc;
	MemoryContextSwitchTo(oldcontext);

	/*
	 * The shared lock only keeps slots from changing database under us; the
	 * counters themselves keep moving, so a row is not a consistent snapshot
	 * of all its counters (nor is pg_stat_database's).
	 */
	LWLockAcquire(idem_shared->lock, LW_SHARED);
	for (i = 0; i < IDEM_STATS_MAX_DATABASES; i++)
	{
		IdemDbStats *slot = &idem_shared->dbs[i];
		Datum		values[IDEM_STATS_COLS_1_3];
		bool		nulls[IDEM_STATS_COLS_1_3];
		uint64		last;
		int			c;
		int			col = 0;

		if (!OidIsValid(slot->dbid))
			continue;

		memset(nulls, 0, sizeof(nulls));
		values[col++] = ObjectIdGetDatum(slot->dbid);
		for (c = 0; c < IDEM_STAT_NCOUNTERS_1_0; c++)
			values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&slot->counters[c]));
		last = pg_atomic_read_u64(&slot->last_purge_at);
		if (last == IDEM_NEVER)
			nulls[col++] = true;
		else
			values[col++] = TimestampTzGetDatum((TimestampTz) last);
		for (; col < ncols; c++)
			values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&slot->counters[c]));
		Assert(col == ncols);

		tuplestore_putvalues(tupstore, tupdesc, values, nulls);
	}
	LWLockRelease(idem_shared->lock);

	return (Datum) 0;
}

/* idem.stats_1_0(): the counters of 1.0 to 1.2, for their idem_stats view */
Datum
idem_stats_1_0(PG_FUNCTION_ARGS)
{
	return idem_stats_rows(fcinfo, IDEM_STATS_COLS_1_0);
}

/* idem.stats_1_3(): every counter, for the idem_stats view of 1.3 */
Datum
idem_stats_1_3(PG_FUNCTION_ARGS)
{
	return idem_stats_rows(fcinfo, IDEM_STATS_COLS_1_3);
}

/*
 * idem_stats_reset(): zero the counters of every database, as
 * pg_stat_statements_reset() does by default; slots of dropped databases are
 * freed on the way.
 */
Datum
idem_stats_reset(PG_FUNCTION_ARGS)
{
	int			i;

	idem_stats_require_preload();

	idem_stats_recycle();

	LWLockAcquire(idem_shared->lock, LW_SHARED);
	for (i = 0; i < IDEM_STATS_MAX_DATABASES; i++)
	{
		if (OidIsValid(idem_shared->dbs[i].dbid))
			idem_stats_clear_slot(&idem_shared->dbs[i]);
	}
	LWLockRelease(idem_shared->lock);

	PG_RETURN_VOID();
}
