/*
 * pending.c
 *		TEMPORARY no-op stand-ins for stats.c and purge_worker.c, so that the
 *		library loads while those are written.  Must be deleted when they land.
 */
#include "postgres.h"

#include "idem.h"

void idem_stats_shmem_request(void) {}
void idem_stats_shmem_startup(void) {}
void idem_stats_count(IdemCounter counter, int64 n) {}
void idem_stats_note_purge(TimestampTz when) {}
void idem_purge_worker_register(void) {}
