/*
 * store_core.c
 *		What the store does as PostgreSQL's own code does it: index
 *		maintenance after a heap write, the visibility check of a fetched
 *		row, the heap update with the index work it leaves to do, a page
 *		read by the purge's sweep, and the choice of how the page images
 *		of idem's own writes are compressed.
 *
 * Each function names the core function it follows in every version idem
 * builds against (15, 17, 18 and 19), and says where those differ, so that
 * a new major version is one diff of this file (and of compat.h).  Nothing
 * here knows idem's tables; the store (store.c, store_wal.c) and the
 * purge's sweep (purge_sweep.c) call in.
 *
 * May call: PostgreSQL's own code only.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "nodes/bitmapset.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "idem.h"
#include "store.h"
#include "store_core.h"

/*
 * Follows heap_fetch (access/heap/heapam.c) from after its ReadBuffer, on a
 * buffer the caller has pinned: is the tuple at tid visible to snapshot,
 * and written by xmin?  The pin is the caller's to release.
 *   15: heap_fetch calls TestForOldSnapshot once the page is locked;
 *   17, 18, 19: old_snapshot_threshold is gone, and that call with it.
 */
bool
idem_core_fetch_pinned(Relation heap, Buffer buffer, ItemPointer tid,
					   Snapshot snapshot, TransactionId xmin)
{
	Page		page;
	OffsetNumber offnum = ItemPointerGetOffsetNumber(tid);
	ItemId		lp;
	HeapTupleData tuple;
	bool		valid = false;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buffer);
#if PG_VERSION_NUM < 170000
	TestForOldSnapshot(snapshot, heap, page);
#endif
	if (offnum >= FirstOffsetNumber && offnum <= PageGetMaxOffsetNumber(page) &&
		ItemIdIsNormal(lp = PageGetItemId(page, offnum)))
	{
		tuple.t_self = *tid;
		tuple.t_data = (HeapTupleHeader) PageGetItem(page, lp);
		tuple.t_len = ItemIdGetLength(lp);
		tuple.t_tableOid = RelationGetRelid(heap);
		valid = HeapTupleSatisfiesVisibility(&tuple, snapshot, buffer);
		if (valid)
			PredicateLockTID(heap, &tuple.t_self, snapshot,
							 HeapTupleHeaderGetXmin(tuple.t_data));
		HeapCheckForSerializableConflictOut(valid, heap, &tuple, buffer, snapshot);
		valid = valid && TransactionIdEquals(HeapTupleHeaderGetXmin(tuple.t_data), xmin);
	}
	LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	return valid;
}

/*
 * Follows ExecInsertIndexTuples (executor/execIndexing.c): add the index
 * entries of a new heap tuple.  With an update, modified says which columns
 * changed (index_unchanged_by_update's hint, which lets a btree delete old
 * duplicates first), and entries go only where the update asks
 * (IDEM_INDEX_SUMMARIZING: the summarizing indexes alone).
 *   15: every update that is not HOT inserts into every index;
 *   17, 18: a HOT update that changed a column of a summarizing (BRIN)
 *   index inserts into those indexes only (onlySummarizing), and what an
 *   access method keeps between inserts is released after them, as
 *   ExecCloseIndices does with index_insert_cleanup;
 *   19: the same per-index steps, with 18's booleans update, noDupErr and
 *   onlySummarizing folded into one flags word (EIIT_IS_UPDATE,
 *   EIIT_NO_DUPE_ERROR, EIIT_ONLY_SUMMARIZING) that comes before the slot:
 *   ExecInsertIndexTuples(resultRelInfo, estate, flags, slot,
 *   arbiterIndexes, specConflict).  which stands for that word here:
 *   IDEM_INDEX_INSERT is 0, IDEM_INDEX_ALL EIIT_IS_UPDATE, and
 *   IDEM_INDEX_SUMMARIZING EIIT_IS_UPDATE | EIIT_ONLY_SUMMARIZING (idem never
 *   inserts speculatively: no EIIT_NO_DUPE_ERROR).
 * idem's tables take only plain indexes: an expression, partial or
 * exclusion index that a DBA added is refused rather than left stale.
 */
void
idem_core_insert_index_entries(Relation heap, HeapTuple tup,
							   IdemIndexUpdate which, Bitmapset *modified)
{
	List	   *indexes = RelationGetIndexList(heap);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(heap),
													&TTSOpsHeapTuple);
	bool		update = which != IDEM_INDEX_INSERT;
	ListCell   *lc;

	ExecStoreHeapTuple(tup, slot, false);
	foreach(lc, indexes)
	{
		Relation	ind = index_open(lfirst_oid(lc), RowExclusiveLock);
		IndexInfo  *ii = BuildIndexInfo(ind);
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];
		bool		unchanged = false;
		int			i;

		if (ii->ii_Expressions != NIL || ii->ii_Predicate != NIL ||
			ii->ii_ExclusionOps != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("idem cannot maintain index \"%s\"", RelationGetRelationName(ind)),
					 errhint("Drop it: idem's tables take only plain indexes on columns.")));
#if PG_VERSION_NUM >= 160000
		if (which == IDEM_INDEX_SUMMARIZING && !ii->ii_Summarizing)
		{
			index_close(ind, NoLock);
			continue;
		}
#endif
		if (!ii->ii_ReadyForInserts)
		{
			index_close(ind, NoLock);
			continue;
		}
		if (update)
		{
			unchanged = true;
			for (i = 0; i < ii->ii_NumIndexAttrs; i++)
				if (bms_is_member(ii->ii_IndexAttrNumbers[i], modified))
					unchanged = false;
		}
		FormIndexDatum(ii, slot, NULL, values, isnull);
		index_insert(ind, values, isnull, &tup->t_self, heap,
					 ind->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
					 unchanged, ii);
#if PG_VERSION_NUM >= 170000
		/* what the access method kept for further inserts (BRIN's pins) */
		index_insert_cleanup(ind, ii);
#endif
		index_close(ind, NoLock);
	}
	ExecDropSingleTupleTableSlot(slot);
	list_free(indexes);
}

/*
 * Follows simple_heap_update (access/heap/heapam.c): heap_update of the row
 * at otid with this command's id, waiting for no one (the caller holds the
 * key lock), and the index entries the new version then needs.
 *   15: heap_update marks the new tuple heap-only when the update is HOT,
 *   and then no index takes an entry;
 *   17, 18: heap_update says so itself (update_indexes): none, all, or
 *   only the summarizing indexes;
 *   19: heap_update takes an options word (TABLE_UPDATE_* of
 *   access/tableam.h) after the command id; simple_heap_update passes none
 *   (0: the update is decoded by logical decoding as before).
 */
TM_Result
idem_core_update(Relation heap, ItemPointer otid, HeapTuple tup,
				 IdemIndexUpdate *which)
{
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	result;
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes = TU_None;

#if PG_VERSION_NUM >= 190000
	result = heap_update(heap, otid, tup, GetCurrentCommandId(true), 0,
						 InvalidSnapshot, true, &tmfd, &lockmode, &update_indexes);
#else
	result = heap_update(heap, otid, tup, GetCurrentCommandId(true),
						 InvalidSnapshot, true, &tmfd, &lockmode, &update_indexes);
#endif
	*which = update_indexes == TU_All ? IDEM_INDEX_ALL :
		update_indexes == TU_Summarizing ? IDEM_INDEX_SUMMARIZING : IDEM_INDEX_NONE;
#else
	result = heap_update(heap, otid, tup, GetCurrentCommandId(true),
						 InvalidSnapshot, true, &tmfd, &lockmode);
	*which = HeapTupleIsHeapOnly(tup) ? IDEM_INDEX_NONE : IDEM_INDEX_ALL;
#endif
	return result;
}

/*
 * Follows heapgetpage (15) and heap_prepare_pagescan (17, 18, 19) in
 * access/heap/heapam.c, for a page the caller has pinned and share-locked:
 * the next normal tuple after *off (InvalidOffsetNumber: the first), set up
 * in *tup as those functions do, or false when there is none.  Visibility
 * is the caller's.
 *   15: heapgetpage calls TestForOldSnapshot once the page is locked;
 *   17, 18, 19: old_snapshot_threshold is gone, and that call with it.
 */
bool
idem_core_page_next(Relation heap, Buffer buffer, Snapshot snapshot,
					OffsetNumber *off, HeapTuple tup)
{
	Page		page = BufferGetPage(buffer);
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);
	OffsetNumber offnum;

#if PG_VERSION_NUM < 170000
	if (*off == InvalidOffsetNumber)
		TestForOldSnapshot(snapshot, heap, page);
#endif
	for (offnum = OffsetNumberNext(*off); offnum <= maxoff; offnum++)
	{
		ItemId		lp = PageGetItemId(page, offnum);

		if (!ItemIdIsNormal(lp))
			continue;
		tup->t_data = (HeapTupleHeader) PageGetItem(page, lp);
		tup->t_len = ItemIdGetLength(lp);
		tup->t_tableOid = RelationGetRelid(heap);
		ItemPointerSet(&tup->t_self, BufferGetBlockNumber(buffer), offnum);
		*off = offnum;
		return true;
	}
	*off = maxoff;
	return false;
}

/*
 * Follows the start of heapgetpage (15) and heap_prepare_pagescan (17, 18,
 * 19): prune the pinned page if it is worth it, before it is locked to be
 * read.
 *   15, 17, 18: heap_page_prune_opt(relation, buffer);
 *   19: heap_page_prune_opt also takes the scan's visibility map buffer,
 *   which it pins (the scan releases it at its end), and whether the scan
 *   only reads the relation (SO_HINT_REL_READ_ONLY), when pruning may also
 *   set the page all-visible.  The sweep deletes what it finds: not read
 *   only; and the pin is released here, each page being prepared alone.
 */
void
idem_core_page_prepare(Relation heap, Buffer buffer)
{
#if PG_VERSION_NUM >= 190000
	Buffer		vmbuffer = InvalidBuffer;

	heap_page_prune_opt(heap, buffer, &vmbuffer, false);
	if (BufferIsValid(vmbuffer))
		ReleaseBuffer(vmbuffer);
#else
	heap_page_prune_opt(heap, buffer);
#endif
}

/*
 * Follows XLogRecordAssemble (access/transam/xloginsert.c), which compresses
 * each full-page image it adds to a record with the method in wal_compression
 * at that moment: make method (a WalCompression; negative: leave it) the one
 * for the records written until idem_core_wal_compression_reset, and return
 * the method to put back then.  Replay reads the method from each image, so records with
 * and without compression mix freely.
 *   15, 17, 18, 19: wal_compression is an int holding a WalCompression,
 *   with no assign hook; XLogCompressBackupBlock raises an error for a
 *   method the server was built without, which idem.wal_compression never
 *   offers.
 */
int
idem_core_wal_compression_set(int method)
{
	int			saved = wal_compression;

	if (method >= 0)
		wal_compression = method;
	return saved;
}

/* Put back the method that idem_core_wal_compression_set returned */
void
idem_core_wal_compression_reset(int saved)
{
	wal_compression = saved;
}
