/*
 * purge.h
 *		Removing expired keys and deliveries: one batch (purge.c), the sweep
 *		of a table and the purge's deletes (purge_sweep.c), and the launcher
 *		and workers that run batches in the background (purge_worker.c).
 */
#ifndef IDEM_PURGE_H
#define IDEM_PURGE_H

#include "idem.h"
#include "store.h"

/* One purge batch in the current transaction, and its setting (purge.c) */
extern int	idem_purge_batch_size;

extern void idem_purge_init(void);
extern int64 idem_purge_batch(int64 limit);

/* The sweep of a table and the purge's deletes (purge_sweep.c) */
extern void idem_sweep_init(void);
extern bool idem_sweep_delete_expired(IdemStore *st);
extern bool idem_sweep_delete_expired_tid(IdemStore *st, ItemPointer tid,
										  text *a, text *b);
extern TimestampTz idem_sweep_purgeable_at(IdemStore *st, HeapTuple tup);
extern int64 idem_sweep(IdemStore *st, TimestampTz now, int64 limit);
extern void idem_sweep_backlog(IdemStore *st, TimestampTz now, int64 *expired,
							   TimestampTz *oldest);
extern int64 idem_sweep_order(TimestampTz now, int64 limit);

/* Purge launcher and workers, and their settings (purge_worker.c) */
extern int	idem_purge_interval_secs;
extern char *idem_database;

extern void idem_purge_worker_init(void);
extern void idem_purge_worker_shmem_request(void);
extern void idem_purge_worker_shmem_startup(void);
extern void idem_purge_worker_register(void);

#endif							/* IDEM_PURGE_H */
