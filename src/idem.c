/*
 * idem.c
 *		Module entry point: _PG_init, which has each module define its
 *		settings, sets the shared memory hooks and registers the purge
 *		launcher.
 *
 * May call: each module's Init function (claim.c, input.c, webhook/record.c,
 * purge.c, purge_worker.c, store_wal.c, purge_sweep.c, claim_memory.c) and
 * the shared memory of the counters (stats.c), the purge launcher
 * (purge_worker.c) and the expiry map (store_expiry.c).  Nothing calls it.
 *
 * Every SQL function works when the library is loaded on demand.  Only the
 * counters, the purge worker and the purge's expiry map (without which a
 * purge reads whole tables) need shared_preload_libraries = 'idem'; in
 * binary-upgrade mode (pg_upgrade) the purge worker is not registered.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include "claim.h"
#include "claim_memory.h"
#include "idem.h"
#include "input.h"
#include "purge.h"
#include "stats.h"
#include "store.h"
#include "store_expiry.h"
#include "webhook/entry.h"

PG_MODULE_MAGIC;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

/* Ask for the shared memory of the counters, the worker and the expiry map */
static void
idem_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	idem_stats_shmem_request();
	idem_purge_worker_shmem_request();
	idem_expiry_shmem_request();
}

/* Attach to, or create, the counters, the worker's state and the expiry map */
static void
idem_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	idem_stats_shmem_startup();
	idem_purge_worker_shmem_startup();
	idem_expiry_shmem_startup();
}

/* Module load */
void
_PG_init(void)
{
	/* each module's settings */
	idem_claim_init();
	idem_input_init();
	idem_webhook_record_init();
	idem_purge_init();
	idem_purge_worker_init();
	idem_store_wal_init();
	idem_sweep_init();
	idem_claim_memory_init();
	/* last: it drops the values set for idem.* names not defined by then */
	MarkGUCPrefixReserved("idem");

	if (!process_shared_preload_libraries_in_progress)
		return;

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = idem_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = idem_shmem_startup;

	/*
	 * pg_upgrade's servers must run nothing of their own: a worker would
	 * connect to a database that pg_upgrade is about to drop or fill.
	 */
	if (!IsBinaryUpgrade)
		idem_purge_worker_register();
}
