/*
 * idem.c
 *		Module entry point: settings, shared memory hooks, the purge worker.
 *
 * Every SQL function works when the library is loaded on demand.  Only the
 * counters, the purge worker and the purge's expiry map (without which a
 * purge reads whole tables) need shared_preload_libraries = 'idem'; in
 * binary-upgrade mode (pg_upgrade) the purge worker is not registered.
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include "claim_memory.h"
#include "idem.h"
#include "purge.h"
#include "stats.h"
#include "store.h"
#include "store_expiry.h"

PG_MODULE_MAGIC;

int			idem_ttl_secs = 24 * 60 * 60;
int			idem_lease_secs = 60;
int			idem_webhook_ttl_secs = 7 * 24 * 60 * 60;
int			idem_max_response_kb = 1024;
int			idem_purge_interval_secs = 60;
int			idem_purge_batch_size = 10000;
char	   *idem_database = NULL;

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

/* Define the idem.* settings */
static void
idem_define_settings(void)
{
	DefineCustomIntVariable("idem.ttl",
							"How long an idempotency key is kept.",
							"A key past its expiry counts as absent and is purged.",
							&idem_ttl_secs, 24 * 60 * 60, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("idem.lease",
							"How long a committed processing claim is honoured.",
							"After it, the next claim takes the key over.",
							&idem_lease_secs, 60, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("idem.webhook_ttl",
							"How long a webhook or message id is kept.",
							NULL,
							&idem_webhook_ttl_secs, 7 * 24 * 60 * 60, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("idem.max_response_size",
							"Largest response, error or checkpoint data stored.",
							NULL,
							&idem_max_response_kb, 1024, 1, MAX_KILOBYTES / 1024 * 1024,
							PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("idem.purge_interval",
							"Pause of the purge worker between passes; 0 pauses it.",
							NULL,
							&idem_purge_interval_secs, 60, 0, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("idem.purge_batch_size",
							"Rows a purge deletes per transaction.",
							NULL,
							&idem_purge_batch_size, 10000, 1, INT_MAX,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	/* PostgreSQL refuses PGC_POSTMASTER settings from a library loaded later */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomStringVariable("idem.database",
								   "Database in which the purge worker runs.",
								   NULL,
								   &idem_database, "postgres",
								   PGC_POSTMASTER, 0, NULL, NULL, NULL);
}

/* Module load */
void
_PG_init(void)
{
	idem_define_settings();
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
