/*
 * store_core.h
 *		What the store and the purge's sweep do as PostgreSQL's own code
 *		does it (store_core.c).
 */
#ifndef IDEM_STORE_CORE_H
#define IDEM_STORE_CORE_H

#include "idem.h"

#include "access/tableam.h"
#include "nodes/bitmapset.h"
#include "storage/buf.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

/* Which index entries a new row version needs (store_core.c) */
typedef enum IdemIndexUpdate
{
	IDEM_INDEX_INSERT,			/* a new row: every index */
	IDEM_INDEX_ALL,				/* an update that is not HOT: every index */
	IDEM_INDEX_SUMMARIZING,		/* a HOT update: the summarizing indexes only */
	IDEM_INDEX_NONE				/* a HOT update: none */
} IdemIndexUpdate;

extern bool idem_core_fetch_pinned(Relation heap, Buffer buffer, ItemPointer tid,
								   Snapshot snapshot, TransactionId xmin);
extern void idem_core_insert_index_entries(Relation heap, HeapTuple tup,
										   IdemIndexUpdate which, Bitmapset *modified);
extern TM_Result idem_core_update(Relation heap, ItemPointer otid, HeapTuple tup,
								  IdemIndexUpdate *which);
extern void idem_core_page_prepare(Relation heap, Buffer buffer);
extern bool idem_core_page_next(Relation heap, Buffer buffer, Snapshot snapshot,
								OffsetNumber *off, HeapTuple tup);
extern int	idem_core_wal_compression_set(int method);
extern void idem_core_wal_compression_reset(int saved);

#endif							/* IDEM_STORE_CORE_H */
