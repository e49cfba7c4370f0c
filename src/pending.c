/*
 * pending.c
 *		TEMPORARY stand-ins so that the library loads and CREATE EXTENSION works
 *		while the real files are written.  Each owner deletes its block; the
 *		file must be gone before anything is released.
 */
#include "postgres.h"

#include "idem.h"

/* ---- owner: core ---- */

PG_FUNCTION_INFO_V1(idem_claim);
Datum idem_claim(PG_FUNCTION_ARGS) { elog(ERROR, "idem_claim is not written yet"); PG_RETURN_NULL(); }
/* end idem_claim */

PG_FUNCTION_INFO_V1(idem_complete);
Datum idem_complete(PG_FUNCTION_ARGS) { elog(ERROR, "idem_complete is not written yet"); PG_RETURN_NULL(); }
/* end idem_complete */

PG_FUNCTION_INFO_V1(idem_fail);
Datum idem_fail(PG_FUNCTION_ARGS) { elog(ERROR, "idem_fail is not written yet"); PG_RETURN_NULL(); }
/* end idem_fail */

PG_FUNCTION_INFO_V1(idem_checkpoint);
Datum idem_checkpoint(PG_FUNCTION_ARGS) { elog(ERROR, "idem_checkpoint is not written yet"); PG_RETURN_NULL(); }
/* end idem_checkpoint */

PG_FUNCTION_INFO_V1(idem_lookup);
Datum idem_lookup(PG_FUNCTION_ARGS) { elog(ERROR, "idem_lookup is not written yet"); PG_RETURN_NULL(); }
/* end idem_lookup */

PG_FUNCTION_INFO_V1(idem_webhook);
Datum idem_webhook(PG_FUNCTION_ARGS) { elog(ERROR, "idem_webhook is not written yet"); PG_RETURN_NULL(); }
/* end idem_webhook */

PG_FUNCTION_INFO_V1(idem_purge);
Datum idem_purge(PG_FUNCTION_ARGS) { elog(ERROR, "idem_purge is not written yet"); PG_RETURN_NULL(); }
/* end idem_purge */

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
