/*
 * stats.h
 *		Operator counters in shared memory (stats.c).
 */
#ifndef IDEM_STATS_H
#define IDEM_STATS_H

#include "idem.h"

#include "datatype/timestamp.h"

typedef enum IdemCounter
{
	IDEM_STAT_CLAIMED,
	IDEM_STAT_COMPLETED,
	IDEM_STAT_FAILED,
	IDEM_STAT_REPLAYED,
	IDEM_STAT_IN_PROGRESS,
	IDEM_STAT_MISMATCHED,
	IDEM_STAT_WEBHOOKS_NEW,
	IDEM_STAT_WEBHOOKS_DUPLICATE,
	IDEM_STAT_PURGED,
	/* 1.3 */
	IDEM_STAT_TAKEN_OVER,
	IDEM_STAT_STALE_TOKENS,
	IDEM_STAT_WEBHOOKS_REJECTED,
	IDEM_STAT_NCOUNTERS
} IdemCounter;

/* The counters idem.stats_1_0() shows: those up to purged */
#define IDEM_STAT_NCOUNTERS_1_0		(IDEM_STAT_PURGED + 1)

extern void idem_stats_shmem_request(void);
extern void idem_stats_shmem_startup(void);
extern void idem_stats_count(IdemCounter counter, int64 n);
extern void idem_stats_note_purge(TimestampTz when);

#endif							/* IDEM_STATS_H */
