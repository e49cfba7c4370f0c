/*
 * store.h
 *		Direct access to idem's tables, for the rest of idem: rows (store.c),
 *		key locks (store_lock.c), what the relation cache answers
 *		(store_relcache.c) and the compression of the page images of idem's
 *		writes (store_wal.c).  The expiry map has store_expiry.h, what
 *		mirrors core store_core.h, and the files of the store share
 *		store_internal.h.
 *
 * The claim path does not go through SPI or the executor: one index probe,
 * one heap insert or update, under a short per-key lock.  See store.c.
 */
#ifndef IDEM_STORE_H
#define IDEM_STORE_H

#include "idem.h"

#include "access/genam.h"
#include "access/htup.h"
#include "access/tableam.h"
#include "nodes/bitmapset.h"
#include "storage/buf.h"
#include "executor/tuptable.h"
#include "utils/rel.h"
#include "utils/snapshot.h"
#include "utils/timestamp.h"

typedef enum IdemTable
{
	IDEM_KEYS,
	IDEM_WEBHOOKS,
	IDEM_SOURCES,				/* from 1.3: idem.webhook_sources */
	IDEM_NTABLES
} IdemTable;

/*
 * Columns of idem.keys, in the order idem--1.0.sql creates them; 1.4 adds
 * the response as sent (idem--1.3--1.4.sql).  Until ALTER EXTENSION UPDATE
 * the table has the first KEYS_NATTS_1_0 only, and a row read from it has
 * the others null.
 */
enum
{
	KEYS_SCOPE,
	KEYS_KEY,
	KEYS_STATE,
	KEYS_TOKEN,
	KEYS_ATTEMPT,
	KEYS_FINGERPRINT,
	KEYS_LEASE_UNTIL,
	KEYS_CHECKPOINT,
	KEYS_CHECKPOINT_DATA,
	KEYS_RESPONSE,
	KEYS_CREATED_AT,
	KEYS_COMPLETED_AT,
	KEYS_EXPIRES_AT,
	KEYS_NATTS_1_0,
	/* 1.4 */
	KEYS_HTTP_STATUS = KEYS_NATTS_1_0,
	KEYS_BODY,
	KEYS_NATTS
};

/* Columns of idem.webhooks */
enum
{
	WEBHOOKS_SOURCE,
	WEBHOOKS_EVENT_ID,
	WEBHOOKS_RECEIVED_AT,
	WEBHOOKS_EXPIRES_AT,
	WEBHOOKS_NATTS
};

/* Columns of idem.webhook_sources (idem--1.2--1.3.sql) */
enum
{
	SOURCES_SOURCE,
	SOURCES_SCHEME,
	SOURCES_SECRETS,
	SOURCES_TOLERANCE,
	SOURCES_ALLOWED_IPS,
	SOURCES_TTL,
	SOURCES_UPDATED_AT,
	SOURCES_NATTS
};

#define IDEM_MAX_NATTS KEYS_NATTS

/* An open table and, after a fetch, its current row for one key */
typedef struct IdemStore
{
	IdemTable	which;
	Relation	heap;
	Relation	pkey;
	IndexScanDesc scan;			/* primary key probe, reused by every fetch */
	SnapshotData dirty;			/* its snapshot */
	TupleTableSlot *slot;
	bool		found;
	TransactionId xmin;			/* the transaction that wrote the found row */
	bool		own;			/* ... is this one */
	Datum	   *values;			/* the found row, deformed (slot memory) */
	bool	   *nulls;
	Datum		padded_values[IDEM_MAX_NATTS];	/* ... when the table lacks */
	bool		padded_nulls[IDEM_MAX_NATTS];	/* columns of a later version */
	ItemPointerData written;	/* where the last insert or update put the row */
} IdemStore;

/* One version of a row: see idem_store_still_visible */
typedef struct IdemRowVersion
{
	ItemPointerData tid;
	TransactionId xmin;
	Oid			filenode;
	uint64		checked;		/* the table's check it was read under */
	Buffer		recent;			/* the buffer it was last seen in, or invalid */
} IdemRowVersion;

typedef enum IdemFetch
{
	IDEM_FETCH_NONE,			/* no row for the key */
	IDEM_FETCH_FOUND,			/* st->values holds the newest row */
	IDEM_FETCH_BUSY				/* nowait, and another transaction writes it */
} IdemFetch;

/* Is the state of the idem.keys row in st this one? */
static inline bool
idem_store_state_is(IdemStore *st, const char *state)
{
	text	   *t = DatumGetTextPP(st->values[KEYS_STATE]);

	return VARSIZE_ANY_EXHDR(t) == strlen(state) &&
		memcmp(VARDATA_ANY(t), state, strlen(state)) == 0;
}

/* The compression of the page images of idem's writes (store_wal.c) */
extern void idem_store_wal_init(void);
extern int	idem_store_images_begin(void);
extern void idem_store_images_end(int saved);
extern void idem_store_open(IdemStore *st, IdemTable which, bool write);
extern void idem_store_close(IdemStore *st);
extern bool idem_store_lock(IdemTable which, text *a, text *b, bool nowait);
extern void idem_store_unlock(IdemTable which, text *a, text *b);
extern bool idem_store_lock_held(IdemTable which, text *a, text *b);
extern void idem_store_lock_object(text *source, text *object);
extern Oid	idem_store_table_oid(IdemTable which);
extern IdemFetch idem_store_fetch(IdemStore *st, text *a, text *b, bool nowait,
								  bool locked);
extern bool idem_store_fetch_visible(IdemStore *st, text *a, text *b);
extern bool idem_store_fetch_own(IdemStore *st, ItemPointer tid, Oid filenode);
extern void idem_store_row_version(IdemStore *st, IdemRowVersion *version);
extern bool idem_store_still_visible(IdemTable which, IdemRowVersion *version);
extern void idem_store_insert(IdemStore *st, Datum *values, bool *nulls);
extern void idem_store_update(IdemStore *st, Datum *values, bool *nulls);
extern void idem_store_delete(IdemStore *st);
extern bool idem_store_has_column(IdemStore *st, int column);
extern int64 idem_store_next_token(void);
extern bool idem_store_has_expires_index(IdemStore *st);
extern Relation idem_store_open_expires(IdemStore *st);
extern TransactionId idem_store_outside_writes_seen(IdemStore *st);

#endif							/* IDEM_STORE_H */
