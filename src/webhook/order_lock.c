/*
 * order_lock.c
 *		Entry point: idem.webhook_order_lock, the lock that idem_webhook_order
 *		(PL/pgSQL, idem--1.6--1.7.sql) takes to serialize the deliveries for
 *		one gateway object of a source.
 *
 * May call: the store's locks (store.h).
 */
#include "postgres.h"

#include "fmgr.h"

#include "idem.h"
#include "store.h"

PG_FUNCTION_INFO_V1(idem_webhook_order_lock);

/*
 * idem.webhook_order_lock(source, object): take the lock of one gateway
 * object of a source, in a lock space of idem's own (pg_advisory_lock
 * calls cannot take it)
 */
Datum
idem_webhook_order_lock(PG_FUNCTION_ARGS)
{
	idem_store_lock_object(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1));
	PG_RETURN_VOID();
}
