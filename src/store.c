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
 *
 * May call: the key locks (store_lock.c), the relation cache
 * (store_relcache.c), the tables' shape (store_shape.c), the compression
 * of page images (store_wal.c), what mirrors core (store_core.c) and the
 * purge's expiry map (store_expiry.c), which each write tells when the
 * row version it wrote expires.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/sequence.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"

#include "idem.h"
#include "store.h"
#include "store_core.h"
#include "store_expiry.h"
#include "store_internal.h"

/*
 * Open a table and its primary key to write one key, or only to read it
 * (which works on a standby too).
 */
void
idem_store_open(IdemStore *st, IdemTable which, bool write)
{
	LOCKMODE	lockmode = write ? RowExclusiveLock : AccessShareLock;

	st->which = which;
	st->heap = idem_store_open_heap(which, lockmode);
	if (st->heap == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"idem.%s\" does not exist", idem_store_heap_names[which]),
				 errhint("Run ALTER EXTENSION idem UPDATE.")));
	st->pkey = index_open(idem_store_oids.pkey[which], lockmode);
	if (idem_store_checked[which] != idem_store_invalidations[which])
		idem_store_check_table(st, lockmode);
	st->slot = table_slot_create(st->heap, NULL);
	/* the scan a fetch begins on it reads its type there and then */
	InitDirtySnapshot(st->dirty);
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
	version->checked = idem_store_checked[st->which];
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

	heap = idem_store_open_heap(which, AccessShareLock);
	if (heap == NULL)
		return false;
	if (version->checked == idem_store_checked[which] &&
		idem_store_checked[which] == idem_store_invalidations[which] &&
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
	idem_store_resolve();
	return nextval_internal(idem_store_oids.token_seq, false);
}
