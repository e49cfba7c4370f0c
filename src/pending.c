/*
 * pending.c
 *		TEMPORARY stand-ins so that the library loads and CREATE EXTENSION works
 *		while the real files are written.  Each owner deletes its block; the
 *		file must be gone before anything is released.
 */
#include "postgres.h"

#include "idem.h"

/* ops: stats.c and purge_worker.c */
void idem_stats_shmem_request(void) {}
void idem_stats_shmem_startup(void) {}
void idem_stats_count(IdemCounter counter, int64 n) {}
void idem_stats_note_purge(TimestampTz when) {}
void idem_purge_worker_register(void) {}

/* ---- owner: core ---- */








/* ---- owner: fingerprint ---- */

PG_FUNCTION_INFO_V1(idem_canonical);
Datum idem_canonical(PG_FUNCTION_ARGS) { elog(ERROR, "idem_canonical is not written yet"); PG_RETURN_NULL(); }
/* end idem_canonical */

PG_FUNCTION_INFO_V1(idem_fingerprint);
Datum idem_fingerprint(PG_FUNCTION_ARGS) { elog(ERROR, "idem_fingerprint is not written yet"); PG_RETURN_NULL(); }
/* end idem_fingerprint */

PG_FUNCTION_INFO_V1(idem_key);
Datum idem_key(PG_FUNCTION_ARGS) { elog(ERROR, "idem_key is not written yet"); PG_RETURN_NULL(); }
/* end idem_key */

PG_FUNCTION_INFO_V1(idem_payment_key);
Datum idem_payment_key(PG_FUNCTION_ARGS) { elog(ERROR, "idem_payment_key is not written yet"); PG_RETURN_NULL(); }
/* end idem_payment_key */

/* ---- owner: verify ---- */

PG_FUNCTION_INFO_V1(idem_webhook_verify);
Datum idem_webhook_verify(PG_FUNCTION_ARGS) { elog(ERROR, "idem_webhook_verify is not written yet"); PG_RETURN_NULL(); }
/* end idem_webhook_verify */

/* ---- owner: ops ---- */

PG_FUNCTION_INFO_V1(idem_stats_1_0);
Datum idem_stats_1_0(PG_FUNCTION_ARGS) { elog(ERROR, "idem_stats_1_0 is not written yet"); PG_RETURN_NULL(); }
/* end idem_stats_1_0 */

PG_FUNCTION_INFO_V1(idem_stats_reset);
Datum idem_stats_reset(PG_FUNCTION_ARGS) { elog(ERROR, "idem_stats_reset is not written yet"); PG_RETURN_NULL(); }
/* end idem_stats_reset */
