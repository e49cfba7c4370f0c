/*
 * store_expiry.h
 *		The purge's expiry map in shared memory (store_expiry.c): what the
 *		store notes of each write, and the slots and ranges that the sweep
 *		(purge_sweep.c) reads and sets under the protocol stated at the top
 *		of store_expiry.c.
 */
#ifndef IDEM_STORE_EXPIRY_H
#define IDEM_STORE_EXPIRY_H

#include "store.h"

#include "port/atomics.h"
#include "storage/spin.h"

#define EXPIRY_RANGE_BLOCKS	256		/* 2 MB, about 9,000 keys */
#define EXPIRY_RANGES		8192	/* 16 GB of a table */
#define EXPIRY_TABLES		8

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

/*
 * Does the map know that range (its spinlock held) holds nothing
 * purgeable at now, in the table's epoch?
 */
static inline bool
idem_expiry_range_known_empty(ExpiryRange *range, uint64 epoch, TimestampTz now)
{
	return range->epoch == epoch && range->min > now;
}

extern void idem_expiry_shmem_request(void);
extern void idem_expiry_shmem_startup(void);
extern void idem_expiry_note(Relation heap, ItemPointer tid, TimestampTz expires);
extern void idem_expiry_forget(Relation heap);
extern ExpiryTable *idem_expiry_find(Relation heap);
extern bool idem_expiry_serves(IdemStore *st, TransactionId *trigger);
extern ExpiryTable *idem_expiry_take(IdemStore *st, uint64 *epoch);

#endif							/* IDEM_STORE_EXPIRY_H */
