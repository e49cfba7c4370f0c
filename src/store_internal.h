/*
 * store_internal.h
 *		What the files of the store share (store.c, store_relcache.c,
 *		store_shape.c), and the purge's sweep, which reads the tables' pages
 *		itself: the shape of idem's tables as their install scripts create
 *		them, the checks against it, and the relation cache.  Not for the
 *		rest of idem, which goes through store.h.
 */
#ifndef IDEM_STORE_INTERNAL_H
#define IDEM_STORE_INTERNAL_H

#include "store.h"

#include "storage/lockdefs.h"

/* A column as idem--1.0.sql creates it */
typedef struct StoreColumn
{
	const char *name;
	Oid			type;
	bool		notnull;
	bool		bytewise;		/* collation "C": the key lookups compare bytes */
} StoreColumn;

/* A table as its install script creates it: columns and the indexes idem scans */
typedef struct StoreShape
{
	const StoreColumn *columns;
	int			natts;
	int			min_natts;		/* before the update that added the last ones */
	int			npkey;			/* columns of the primary key */
	AttrNumber	pkey[2];		/* (key, scope), (event_id, source) or (source) */
	AttrNumber	expires;		/* expires_at, which the purge reads; 0: none */
} StoreShape;

/* The names the install scripts give idem's tables and their indexes */
extern const char *const idem_store_heap_names[IDEM_NTABLES];
extern const char *const idem_store_pkey_names[IDEM_NTABLES];
extern const char *const idem_store_expires_names[IDEM_NTABLES];	/* NULL: none */

extern const StoreShape idem_store_shapes[IDEM_NTABLES];

extern void idem_store_check_columns(Relation heap, IdemTable which);
extern void idem_store_check_indexes(IdemStore *st, Oid expires_oid, LOCKMODE lockmode);
extern void idem_store_check_bypassed(Relation heap, IdemTable which, Oid outside_write);

/* The OIDs of idem's relations in this database, resolved once and cached */
typedef struct StoreOids
{
	bool		valid;
	Oid			heap[IDEM_NTABLES];
	Oid			pkey[IDEM_NTABLES];
	Oid			expires[IDEM_NTABLES];	/* InvalidOid: none (from 1.6, or sources) */
	Oid			token_seq;
	Oid			outside_write;	/* trigger function idem.expiry_outside_write (1.6) */
} StoreOids;

/* The relation cache (store_relcache.c) */
extern StoreOids idem_store_oids;
extern uint64 idem_store_invalidations[IDEM_NTABLES];
extern uint64 idem_store_checked[IDEM_NTABLES];

extern void idem_store_resolve(void);
extern Relation idem_store_open_heap(IdemTable which, LOCKMODE lockmode);
extern void idem_store_check_table(IdemStore *st, LOCKMODE lockmode);

#endif							/* IDEM_STORE_INTERNAL_H */
