/*
 * store.c
 *		Direct access to idem's tables under a short per-key lock.
 *
 * Every call that writes a key first takes a heavyweight lock on a hash of
 * (scope, key), reads the newest version of the row through the primary key
 * with a dirty snapshot (waiting for any other transaction that is still
 * writing it), decides, writes, and releases the key lock.  The lock makes
 * "read, decide, write" atomic; a second claimer of an uncommitted claim
 * finds the first one's row with an in-progress xmin and waits on that
 * transaction, exactly as a unique index makes INSERT wait.  The one
 * exception, a claim of a new key, keeps the key lock instead of writing a
 * row at once: the second claimer then waits on the lock (the protocol of
 * these pending claims is stated in claim_memory.c).
 *
 * Rows are read and written with heap and index calls rather than SPI: the
 * claim path is what every payment runs, and the executor's per-statement
 * set-up would cost more than the work itself.  That is safe only on tables
 * as the install scripts created them, which store_shape.c checks.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/predicate.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "idem.h"
#include "store.h"
#include "store_internal.h"

/*
 * locktag_field4 of idem's key locks.  PostgreSQL's own advisory locks use 1
 * and 2 there, so these never meet pg_advisory_lock() calls; in pg_locks they
 * show as locktype advisory with objsubid 7649 (keys), 7650 (webhooks) or
 * 7651 (webhook sources).
 */
static const uint16 lock_fields[IDEM_NTABLES] = {0x1DE1, 0x1DE2, 0x1DE3};

/* OIDs of idem's relations in this database, resolved once and cached */
typedef struct StoreOids
{
	bool		valid;
	Oid			heap[IDEM_NTABLES];
	Oid			pkey[IDEM_NTABLES];
	Oid			expires[IDEM_NTABLES];	/* InvalidOid: none (from 1.6, or sources) */
	Oid			token_seq;
	Oid			outside_write;	/* trigger function idem.expiry_outside_write (1.6) */
} StoreOids;

static StoreOids oids;
static bool callback_registered = false;

static const char *store_lookup(void);

/*
 * idem.wal_compression: how the full-page images of idem's own writes are
 * compressed in the WAL, whatever wal_compression says for the rest; -1
 * (inherit) leaves them to wal_compression.  Random inserts into the primary
 * keys make most of a payment's page images, and they compress to about 40%
 * with zstd (doc/performance.md).  The values are wal_compression's (the
 * methods this server was built with, and the same hidden aliases of on and
 * off), and inherit.
 */
#define STORE_WAL_INHERIT	(-1)

static const struct config_enum_entry wal_compression_options[] = {
	{"inherit", STORE_WAL_INHERIT, false},
	{"off", WAL_COMPRESSION_NONE, false},
	{"pglz", WAL_COMPRESSION_PGLZ, false},
#ifdef USE_LZ4
	{"lz4", WAL_COMPRESSION_LZ4, false},
#endif
#ifdef USE_ZSTD
	{"zstd", WAL_COMPRESSION_ZSTD, false},
#endif
	{"on", WAL_COMPRESSION_PGLZ, true},
	{"true", WAL_COMPRESSION_PGLZ, true},
	{"yes", WAL_COMPRESSION_PGLZ, true},
	{"1", WAL_COMPRESSION_PGLZ, true},
	{"false", WAL_COMPRESSION_NONE, true},
	{"no", WAL_COMPRESSION_NONE, true},
	{"0", WAL_COMPRESSION_NONE, true},
	{NULL, 0, false}
};

#if defined(USE_ZSTD)
#define STORE_WAL_DEFAULT	WAL_COMPRESSION_ZSTD
#elif defined(USE_LZ4)
#define STORE_WAL_DEFAULT	WAL_COMPRESSION_LZ4
#else
#define STORE_WAL_DEFAULT	STORE_WAL_INHERIT
#endif

static int	wal_images = STORE_WAL_DEFAULT;

/* Define the store's settings */
void
idem_store_init(void)
{
	DefineCustomEnumVariable("idem.wal_compression",
							 "Compression of the full-page images that idem's own writes log.",
							 "inherit leaves them to wal_compression, which governs the rest of the WAL.",
							 &wal_images, STORE_WAL_DEFAULT, wal_compression_options,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	idem_expiry_init();
}

/*
 * Log the page images of the writes that follow as idem.wal_compression
 * says; returns what idem_store_images_end must put back, which the caller
 * does in PG_FINALLY, so that no other write of the session is affected.
 */
int
idem_store_images_begin(void)
{
	return idem_core_wal_compression_set(wal_images);
}

/* End what idem_store_images_begin started */
void
idem_store_images_end(int saved)
{
	idem_core_wal_compression_reset(saved);
}

/*
 * Relcache invalidations of each table (or of its two indexes) seen so far,
 * and how many had been seen when the table last passed store_check_table.
 * Every ALTER TABLE, CREATE TRIGGER, CREATE RULE, CREATE POLICY or foreign
 * key to a table invalidates its relcache entry, so the check runs once per
 * change of the table, not on every call.
 */
static uint64 invalidations[IDEM_NTABLES] = {1, 1, 1};
static uint64 checked[IDEM_NTABLES] = {0, 0, 0};

/*
 * oids_generation is bumped whenever the cached OIDs are forgotten, so
 * that a caller can tell whether they were while it waited for a lock
 * (store_open_heap); resolving is true while store_resolve looks them up,
 * when any invalidation may concern a relation it has not filled in yet.
 */
static uint64 oids_generation = 0;
static bool resolving = false;

/* Forget the cached OIDs, and checks, when one of the relations changes or goes */
static void
store_relcache_callback(Datum arg, Oid relid)
{
	int			i;

	if (!OidIsValid(relid) || relid == oids.token_seq || resolving)
		oids.valid = false;
	for (i = 0; i < IDEM_NTABLES; i++)
		if (!OidIsValid(relid) ||
			relid == oids.heap[i] || relid == oids.pkey[i] ||
			(OidIsValid(oids.expires[i]) && relid == oids.expires[i]))
		{
			oids.valid = false;
			invalidations[i]++;
		}
	if (!oids.valid)
		oids_generation++;
}

/*
 * Resolve the OIDs of idem's relations, once per backend and invalidation.
 * The catalog reads may take in invalidations: one that arrives meanwhile
 * leaves them unsettled (oids.valid false), to be looked up again by the
 * next call.  store_open_heap settles them under the table's lock.  A
 * relation found missing while invalidations arrived may have been looked
 * for in a schema dropped and created again meanwhile (DROP and CREATE
 * EXTENSION in another session): it is looked up again, as
 * RangeVarGetRelidExtended does, and is reported missing only from a
 * lookup that no invalidation disturbed.
 */
static void
store_resolve(void)
{
	uint64		generation;
	const char *volatile missing;

	if (oids.valid)
		return;
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		generation = oids_generation;
		resolving = true;
		PG_TRY();
		{
			missing = store_lookup();
		}
		PG_FINALLY();
		{
			resolving = false;
		}
		PG_END_TRY();
		if (missing == NULL || generation == oids_generation)
			break;
	}
	if (missing == NULL)
		oids.valid = (generation == oids_generation);
	else if (strcmp(missing, "idem") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_SCHEMA),
				 errmsg("schema \"idem\" does not exist"),
				 errhint("Run CREATE EXTENSION idem in this database; if another session is dropping it and creating it again, retry the call.")));
	else
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"idem.%s\" does not exist", missing),
				 errhint("If another session is dropping the idem extension and creating it again, retry the call; else idem is not installed correctly in this database: DROP and CREATE EXTENSION idem.")));
}

/*
 * Look up the OIDs of idem's relations (store_resolve); answers the name of
 * one that is missing ("idem": the schema), or NULL if none is
 */
static const char *
store_lookup(void)
{
	Oid			nsp;
	int			i;

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(store_relcache_callback, (Datum) 0);
		callback_registered = true;
	}
	nsp = get_namespace_oid("idem", true);
	if (!OidIsValid(nsp))
		return "idem";
	for (i = 0; i < IDEM_NTABLES; i++)
	{
		oids.heap[i] = get_relname_relid(idem_store_heap_names[i], nsp);
		oids.pkey[i] = InvalidOid;
		/* before ALTER EXTENSION UPDATE to 1.3 there is no sources table */
		if (i == IDEM_SOURCES && !OidIsValid(oids.heap[i]))
			continue;
		if (!OidIsValid(oids.heap[i]))
			return idem_store_heap_names[i];
		oids.pkey[i] = get_relname_relid(idem_store_pkey_names[i], nsp);
		if (!OidIsValid(oids.pkey[i]))
			return idem_store_pkey_names[i];
	}
	oids.token_seq = get_relname_relid("token_seq", nsp);
	if (!OidIsValid(oids.token_seq))
		return "token_seq";
	oids.outside_write = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
										 CStringGetDatum("expiry_outside_write"),
										 PointerGetDatum(buildoidvector(NULL, 0)),
										 ObjectIdGetDatum(nsp));
	/*
	 * Before 1.6, which drops them and adds that function, the purge scans
	 * the indexes on expires_at; from 1.6 it sweeps (store_expiry.c), and an
	 * index of that name is a user's, like any other.
	 */
	for (i = 0; i < IDEM_NTABLES; i++)
	{
		oids.expires[i] = InvalidOid;
		if (OidIsValid(oids.heap[i]) && idem_store_expires_names[i] != NULL &&
			!OidIsValid(oids.outside_write))
		{
			oids.expires[i] = get_relname_relid(idem_store_expires_names[i], nsp);
			if (!OidIsValid(oids.expires[i]))
				return idem_store_expires_names[i];
		}
	}
	return NULL;
}

/*
 * The OID that one of idem's tables has now, or InvalidOid if there is none
 * (a transaction may drop the extension and create it again).
 */
Oid
idem_store_table_oid(IdemTable which)
{
	Oid			nsp;

	if (oids.valid)
		return oids.heap[which];
	nsp = get_namespace_oid("idem", true);
	return OidIsValid(nsp) ? get_relname_relid(idem_store_heap_names[which], nsp) : InvalidOid;
}


/*
 * Check, once per change of the table, that the table st has open is as
 * idem--1.0.sql created it and has nothing that idem would bypass.
 */
static void
store_check_table(IdemStore *st, LOCKMODE lockmode)
{
	/* invalidations that arrive while checking make the next call check again */
	uint64		seen = invalidations[st->which];

	idem_store_check_columns(st->heap, st->which);
	idem_store_check_indexes(st, oids.expires[st->which], lockmode);
	idem_store_check_bypassed(st->heap, st->which, oids.outside_write);
	checked[st->which] = seen;
}

/*
 * Has the table st has open an index on expires_at (before 1.6), which the
 * purge then scans?
 */
bool
idem_store_has_expires_index(IdemStore *st)
{
	return OidIsValid(oids.expires[st->which]);
}

/*
 * Does a statement that writes the table st has open without idem fire
 * idem.expiry_outside_write, as idem--1.5--1.6.sql set it up (after each
 * INSERT or UPDATE statement, whatever session_replication_role)?  Only
 * then may the purge skip what the expiry map says holds nothing.  Answers
 * the transaction that last changed the trigger (ENABLE and DISABLE do),
 * or InvalidTransactionId: the map forgets the table when that changes, as
 * writes may have gone unseen meanwhile.
 */
TransactionId
idem_store_outside_writes_seen(IdemStore *st)
{
	Relation	rel;
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tup;
	TransactionId seen = InvalidTransactionId;

	if (!OidIsValid(oids.outside_write))
		return InvalidTransactionId;
	rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&skey, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(RelationGetRelid(st->heap)));
	scan = systable_beginscan(rel, TriggerRelidNameIndexId, true, NULL, 1, &skey);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_trigger trig = (Form_pg_trigger) GETSTRUCT(tup);

		if (trig->tgfoid == oids.outside_write &&
			trig->tgenabled == TRIGGER_FIRES_ALWAYS &&
			!TRIGGER_FOR_ROW(trig->tgtype) && TRIGGER_FOR_AFTER(trig->tgtype) &&
			TRIGGER_FOR_INSERT(trig->tgtype) && TRIGGER_FOR_UPDATE(trig->tgtype))
			seen = HeapTupleHeaderGetXmin(tup->t_data);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return seen;
}

/* Open the expires_at index of the table st has open (purge scans it) */
Relation
idem_store_open_expires(IdemStore *st)
{
	return index_open(oids.expires[st->which], RowExclusiveLock);
}

/*
 * Open table which under lockmode, with the OIDs of its indexes resolved
 * while the lock is held; NULL if the table does not exist (before the
 * update that creates it).  As RangeVarGetRelidExtended does: resolve,
 * lock, and if an invalidation came in meanwhile, resolve again under the
 * lock, keeping it if the table is still the one locked.  An update that
 * drops or replaces one of idem's relations holds the table's ACCESS
 * EXCLUSIVE lock (1.6 drops the expires_at indexes): a claim that waited
 * behind it must not go on with the OIDs it had before.
 */
static Relation
store_open_heap(IdemTable which, LOCKMODE lockmode)
{
	for (;;)
	{
		uint64		generation;
		bool		settled;
		Oid			relid;
		Relation	heap;

		CHECK_FOR_INTERRUPTS();
		store_resolve();
		if (!OidIsValid(oids.heap[which]))
		{
			/* created since it was looked up: ALTER EXTENSION UPDATE, here or elsewhere */
			oids.valid = false;
			store_resolve();
			if (!OidIsValid(oids.heap[which]))
				return NULL;
		}
		relid = oids.heap[which];
		settled = oids.valid;
		generation = oids_generation;
		heap = try_table_open(relid, lockmode);
		if (heap == NULL)
		{
			/* dropped meanwhile: look again */
			oids.valid = false;
			continue;
		}
		if (settled && generation == oids_generation)
			return heap;
		/* what is looked up now, under the lock, stays so until it ends */
		oids.valid = false;
		store_resolve();
		if (oids.heap[which] == relid)
			return heap;
		table_close(heap, lockmode);
	}
}

/*
 * Open a table and its primary key to write one key, or only to read it
 * (which works on a standby too).
 */
void
idem_store_open(IdemStore *st, IdemTable which, bool write)
{
	LOCKMODE	lockmode = write ? RowExclusiveLock : AccessShareLock;

	st->which = which;
	st->heap = store_open_heap(which, lockmode);
	if (st->heap == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"idem.%s\" does not exist", idem_store_heap_names[which]),
				 errhint("Run ALTER EXTENSION idem UPDATE.")));
	st->pkey = index_open(oids.pkey[which], lockmode);
	if (checked[which] != invalidations[which])
		store_check_table(st, lockmode);
	st->slot = table_slot_create(st->heap, NULL);
	st->scan = NULL;
	st->found = false;
	st->own = false;
	st->values = NULL;
	st->nulls = NULL;
}

/* Close what idem_store_open opened; the locks stay to transaction end */
void
idem_store_close(IdemStore *st)
{
	if (st->scan != NULL)
		index_endscan(st->scan);
	ExecDropSingleTupleTableSlot(st->slot);
	index_close(st->pkey, NoLock);
	table_close(st->heap, NoLock);
}

/*
 * The lock tag of one key: a 64-bit hash of both parts (b is NULL for a
 * table whose key has one column)
 */
static void
store_locktag(LOCKTAG *tag, IdemTable which, text *a, text *b)
{
	uint64		h;

	h = hash_bytes_extended((const unsigned char *) VARDATA_ANY(a),
							VARSIZE_ANY_EXHDR(a), 0x1DE0);
	if (b != NULL)
		h = hash_bytes_extended((const unsigned char *) VARDATA_ANY(b),
								VARSIZE_ANY_EXHDR(b), h);
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 lock_fields[which]);
}

/*
 * Take the key lock; with nowait, return false if another holds it.  The
 * lock belongs to the current subtransaction's resource owner, whatever
 * portal or function the call runs in: claim_memory.c states why.  An error
 * while the owner is switched aborts that (sub)transaction, whose clean-up
 * sets CurrentResourceOwner again.
 */
bool
idem_store_lock(IdemTable which, text *a, text *b, bool nowait)
{
	ResourceOwner caller_owner = CurrentResourceOwner;
	LOCKTAG		tag;
	LockAcquireResult result;

	store_locktag(&tag, which, a, b);
	CurrentResourceOwner = CurTransactionResourceOwner;
	result = LockAcquire(&tag, ExclusiveLock, false, nowait);
	CurrentResourceOwner = caller_owner;
	return result != LOCKACQUIRE_NOT_AVAIL;
}

/* Release the key lock taken by idem_store_lock in this subtransaction */
void
idem_store_unlock(IdemTable which, text *a, text *b)
{
	ResourceOwner caller_owner = CurrentResourceOwner;
	LOCKTAG		tag;

	store_locktag(&tag, which, a, b);
	CurrentResourceOwner = CurTransactionResourceOwner;
	LockRelease(&tag, ExclusiveLock, false);
	CurrentResourceOwner = caller_owner;
}

/* Does this backend hold the key lock (under any resource owner)? */
bool
idem_store_lock_held(IdemTable which, text *a, text *b)
{
	LOCKTAG		tag;

	store_locktag(&tag, which, a, b);
	return idem_lock_held_by_me(&tag, ExclusiveLock);
}

/*
 * Equality scan keys on the primary key columns: (key, scope) or
 * (event_id, source), the selective one first, so b (the key) comes first;
 * or (source) alone, a.  Answers how many keys were set.
 */
static int
store_scankeys(IdemStore *st, ScanKeyData *skey, text *a, text *b)
{
	if (idem_store_shapes[st->which].npkey == 1)
	{
		ScanKeyEntryInitialize(&skey[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
							   st->pkey->rd_indcollation[0], F_TEXTEQ,
							   PointerGetDatum(a));
		return 1;
	}
	ScanKeyEntryInitialize(&skey[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   st->pkey->rd_indcollation[0], F_TEXTEQ,
						   PointerGetDatum(b));
	ScanKeyEntryInitialize(&skey[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   st->pkey->rd_indcollation[1], F_TEXTEQ,
						   PointerGetDatum(a));
	return 2;
}

/* Deform the row in st->slot and note whether this transaction wrote it */
static void
store_take_row(IdemStore *st)
{
	bool		isnull;
	int			natts = st->slot->tts_tupleDescriptor->natts;

	slot_getallattrs(st->slot);
	st->values = st->slot->tts_values;
	st->nulls = st->slot->tts_isnull;
	if (natts < idem_store_shapes[st->which].natts)
	{
		/* a table not yet updated: the later columns read as null */
		memcpy(st->padded_values, st->values, sizeof(Datum) * natts);
		memcpy(st->padded_nulls, st->nulls, sizeof(bool) * natts);
		memset(st->padded_nulls + natts, true, idem_store_shapes[st->which].natts - natts);
		st->values = st->padded_values;
		st->nulls = st->padded_nulls;
	}
	st->found = true;
	st->xmin = DatumGetTransactionId(slot_getsysattr(st->slot, MinTransactionIdAttributeNumber,
													 &isnull));
	st->own = TransactionIdIsCurrentTransactionId(st->xmin);
}

/*
 * Read the newest version of the row of (a, b), waiting for a transaction
 * that is still writing it (or, with nowait, answering BUSY).  If the caller
 * holds the key lock (locked), it is let go while waiting and held again on
 * return.  Without the key lock the row read may change at any moment, so
 * only answers that no writer can take back may be given from it.  Under
 * REPEATABLE READ and SERIALIZABLE a row this transaction's snapshot cannot
 * see raises serialization_failure, as INSERT ... ON CONFLICT does.
 */
static IdemFetch
store_fetch(IdemStore *st, text *a, text *b, bool nowait, bool locked)
{
	ScanKeyData skey[2];
	int			nkeys = store_scankeys(st, skey, a, b);

	/* one scan serves every fetch of the call: a claim reads twice */
	if (st->scan == NULL)
		st->scan = idem_index_beginscan(st->heap, st->pkey, &st->dirty, nkeys, 0);
	for (;;)
	{
		TransactionId xwait = InvalidTransactionId;
		bool		found;

		InitDirtySnapshot(st->dirty);
		index_rescan(st->scan, skey, nkeys, NULL, 0);
		found = index_getnext_slot(st->scan, ForwardScanDirection, st->slot);
		if (!found)
		{
			st->found = false;
			return IDEM_FETCH_NONE;
		}
		xwait = TransactionIdIsValid(st->dirty.xmin) ? st->dirty.xmin : st->dirty.xmax;
		if (!TransactionIdIsValid(xwait))
			break;
		if (nowait)
		{
			ExecClearTuple(st->slot);
			st->found = false;
			return IDEM_FETCH_BUSY;
		}

		/*
		 * Wait for the writer without the key lock (it may need the lock
		 * itself, to complete its claim, before it can end) and without
		 * buffer pins (the rescan drops the scan's).
		 */
		{
			ItemPointerData tid = st->slot->tts_tid;

			ExecClearTuple(st->slot);
			index_rescan(st->scan, skey, nkeys, NULL, 0);
			if (locked)
				idem_store_unlock(st->which, a, b);
			XactLockTableWait(xwait, st->heap, &tid, XLTW_None);
			if (locked)
				idem_store_lock(st->which, a, b, false);
		}
	}

	store_take_row(st);
	if (IsolationUsesXactSnapshot() && !st->own &&
		!table_tuple_satisfies_snapshot(st->heap, st->slot, GetTransactionSnapshot()))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update"),
				 errdetail("Another transaction wrote this key after this transaction's snapshot was taken.")));
	return IDEM_FETCH_FOUND;
}

/*
 * store_fetch, logging the page images its reads may cause (pruning, hint
 * bits with checksums) as idem.wal_compression says
 */
IdemFetch
idem_store_fetch(IdemStore *st, text *a, text *b, bool nowait, bool locked)
{
	volatile IdemFetch result;
	int			saved = idem_store_images_begin();

	PG_TRY();
	{
		result = store_fetch(st, a, b, nowait, locked);
	}
	PG_FINALLY();
	{
		idem_store_images_end(saved);
	}
	PG_END_TRY();
	return result;
}

/*
 * Read, by its address, a row this transaction wrote and has not replaced
 * since.  No other transaction can write such a row before this one ends
 * (it would wait for it), so no key lock is needed to read and replace it.
 * False if the row is not that (replaced, rolled back, or someone else's),
 * or if the address is no longer one of the table: it was written in a file
 * that TRUNCATE, CLUSTER or VACUUM FULL has since replaced, or in a page that
 * a VACUUM truncated after the row was rolled back.
 */
bool
idem_store_fetch_own(IdemStore *st, ItemPointer tid, Oid filenode)
{
	volatile bool fetched;
	int			saved;

	if (filenode != IDEM_REL_FILENUMBER(st->heap) ||
		ItemPointerGetBlockNumber(tid) >= RelationGetNumberOfBlocks(st->heap))
		return false;
	InitDirtySnapshot(st->dirty);
	saved = idem_store_images_begin();
	PG_TRY();
	{
		fetched = table_tuple_fetch_row_version(st->heap, tid, &st->dirty, st->slot);
	}
	PG_FINALLY();
	{
		idem_store_images_end(saved);
	}
	PG_END_TRY();
	if (!fetched)
		return false;
	store_take_row(st);
	if (st->own && !TransactionIdIsValid(st->dirty.xmax))
		return true;
	ExecClearTuple(st->slot);
	st->found = false;
	return false;
}

/* Read the row of (a, b) visible to the active snapshot, without locking */
bool
idem_store_fetch_visible(IdemStore *st, text *a, text *b)
{
	ScanKeyData skey[2];
	int			nkeys = store_scankeys(st, skey, a, b);
	IndexScanDesc scan;
	volatile bool found;
	int			saved;

	scan = idem_index_beginscan(st->heap, st->pkey, GetActiveSnapshot(), nkeys, 0);
	index_rescan(scan, skey, nkeys, NULL, 0);
	saved = idem_store_images_begin();
	PG_TRY();
	{
		found = index_getnext_slot(scan, ForwardScanDirection, st->slot);
	}
	PG_FINALLY();
	{
		idem_store_images_end(saved);
	}
	PG_END_TRY();
	index_endscan(scan);
	if (found)
		store_take_row(st);
	else
		st->found = false;
	return found;
}

/*
 * Where the row st holds lives: its address, the transaction that wrote
 * it and the file of the table, for idem_store_still_visible
 */
void
idem_store_row_version(IdemStore *st, IdemRowVersion *version)
{
	Assert(st->found);
	version->tid = st->slot->tts_tid;
	version->xmin = st->xmin;
	version->filenode = IDEM_REL_FILENUMBER(st->heap);
	version->checked = checked[st->which];
	version->recent = InvalidBuffer;
}

/*
 * Is the row version read earlier (idem_store_row_version) still the row
 * the active snapshot sees of its key?  A key has at most one version
 * visible to a snapshot, so if that one is visible it is the row an index
 * probe would find; a version is named by its address and the transaction
 * that wrote it (an address is reused only after its row is dead to every
 * transaction).  Only the table is opened, not its index, and the buffer
 * that held the row last time is tried first (ReadRecentBuffer: no lookup
 * in the buffer table, and a page in a buffer is a page of the table).
 * False, without reading the row, when the table was checked again since
 * (its shape may have changed) or when the address is no longer one of the
 * table: it was in a file that TRUNCATE, CLUSTER or VACUUM FULL has since
 * replaced, or in a page that VACUUM truncated.
 */
bool
idem_store_still_visible(IdemTable which, IdemRowVersion *version)
{
	Relation	heap;
	BlockNumber block = ItemPointerGetBlockNumber(&version->tid);
	Buffer		buf;
	bool		visible = false;

	heap = store_open_heap(which, AccessShareLock);
	if (heap == NULL)
		return false;
	if (version->checked == checked[which] &&
		checked[which] == invalidations[which] &&
		version->filenode == IDEM_REL_FILENUMBER(heap))
	{
		if (BufferIsValid(version->recent) &&
			ReadRecentBuffer(IDEM_REL_LOCATOR(heap), MAIN_FORKNUM, block, version->recent))
			buf = version->recent;
		else if (block < RelationGetNumberOfBlocks(heap))
			buf = version->recent = ReadBuffer(heap, block);
		else
			buf = InvalidBuffer;
		if (BufferIsValid(buf))
		{
			visible = idem_core_fetch_pinned(heap, buf, &version->tid,
											 GetActiveSnapshot(), version->xmin);
			ReleaseBuffer(buf);
		}
	}
	table_close(heap, NoLock);
	return visible;
}

/* Tell the expiry map when the row version just written expires */
static void
store_note_expiry(IdemStore *st, Datum *values)
{
	AttrNumber	expires = idem_store_shapes[st->which].expires;

	if (expires != 0)
		idem_expiry_note(st->heap, &st->written, DatumGetTimestampTz(values[expires - 1]));
}

/* Insert a new row (the key lock is held and no row exists) */
void
idem_store_insert(IdemStore *st, Datum *values, bool *nulls)
{
	HeapTuple	tup = heap_form_tuple(RelationGetDescr(st->heap), values, nulls);
	int			saved = idem_store_images_begin();

	PG_TRY();
	{
		heap_insert(st->heap, tup, GetCurrentCommandId(true), 0, NULL);
		idem_core_insert_index_entries(st->heap, tup, IDEM_INDEX_INSERT, NULL);
	}
	PG_FINALLY();
	{
		idem_store_images_end(saved);
	}
	PG_END_TRY();
	st->written = tup->t_self;
	store_note_expiry(st, values);
	heap_freetuple(tup);
	/* later calls of this transaction, even in this statement, see it */
	CommandCounterIncrement();
}

/* The columns whose new value differs from the found row's */
static Bitmapset *
store_modified_columns(IdemStore *st, Datum *values, bool *nulls)
{
	TupleDesc	desc = RelationGetDescr(st->heap);
	Bitmapset  *modified = NULL;
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (nulls[i] != st->nulls[i] ||
			(!nulls[i] && !datumIsEqual(values[i], st->values[i], att->attbyval, att->attlen)))
			modified = bms_add_member(modified, i + 1);
	}
	return modified;
}

/*
 * The heap update of the row at otid and, once it is done, the index
 * entries the new version needs; the status of the heap update
 */
static TM_Result
store_update_logged(IdemStore *st, ItemPointer otid, HeapTuple tup, Bitmapset *modified)
{
	IdemIndexUpdate index_entries;
	TM_Result	result = idem_core_update(st->heap, otid, tup, &index_entries);

	if (result == TM_Ok && index_entries != IDEM_INDEX_NONE)
		idem_core_insert_index_entries(st->heap, tup, index_entries, modified);
	return result;
}

/*
 * Replace the found row with new values.  Completing a claim changes no
 * indexed column, so with the table's fillfactor it is a HOT update.
 */
void
idem_store_update(IdemStore *st, Datum *values, bool *nulls)
{
	HeapTuple	tup = heap_form_tuple(RelationGetDescr(st->heap), values, nulls);
	Bitmapset  *volatile modified = store_modified_columns(st, values, nulls);
	ItemPointerData otid = st->slot->tts_tid;
	volatile TM_Result result;
	int			saved;

	/* values may point into the slot's buffer: it is released only now */
	ExecClearTuple(st->slot);
	st->found = false;

	saved = idem_store_images_begin();
	PG_TRY();
	{
		result = store_update_logged(st, &otid, tup, modified);
	}
	PG_FINALLY();
	{
		idem_store_images_end(saved);
	}
	PG_END_TRY();
	if (result == TM_Updated || result == TM_Deleted)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update"),
				 errdetail("A row of idem.%s was changed by a statement outside idem.",
						   idem_store_heap_names[st->which])));
	if (result != TM_Ok)
		elog(ERROR, "unexpected heap_update status %u on idem.%s",
			 result, idem_store_heap_names[st->which]);

	st->written = tup->t_self;
	store_note_expiry(st, values);
	bms_free(modified);
	heap_freetuple(tup);
	CommandCounterIncrement();
}

/*
 * Delete the found row (the key lock is held, so no other transaction
 * writes it)
 */
void
idem_store_delete(IdemStore *st)
{
	ItemPointerData tid = st->slot->tts_tid;
	int			saved;

	ExecClearTuple(st->slot);
	st->found = false;
	saved = idem_store_images_begin();
	PG_TRY();
	{
		simple_heap_delete(st->heap, &tid);
	}
	PG_FINALLY();
	{
		idem_store_images_end(saved);
	}
	PG_END_TRY();
	CommandCounterIncrement();
}

/* Has the open table this column (one a later version added)? */
bool
idem_store_has_column(IdemStore *st, int column)
{
	return column < RelationGetDescr(st->heap)->natts;
}

/* A new fencing token: unique across every claim ever made in the database */
int64
idem_store_next_token(void)
{
	store_resolve();
	return nextval_internal(oids.token_seq, false);
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
