/*
 * purge.h
 *		Removing expired keys and deliveries: one batch (purge.c), and the
 *		launcher and workers that run batches in the background
 *		(purge_worker.c).
 */
#ifndef IDEM_PURGE_H
#define IDEM_PURGE_H

#include "idem.h"

/* One purge batch in the current transaction (purge.c) */
extern int64 idem_purge_batch(int64 limit);

/* Purge launcher and workers (purge_worker.c) */
extern void idem_purge_worker_shmem_request(void);
extern void idem_purge_worker_shmem_startup(void);
extern void idem_purge_worker_register(void);

#endif							/* IDEM_PURGE_H */
