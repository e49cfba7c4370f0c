/*
 * webhook.h
 *		Webhook deliveries (webhook.c).  The signature schemes and the
 *		readers of requests are in verify.h.
 */
#ifndef IDEM_WEBHOOK_H
#define IDEM_WEBHOOK_H

#include "idem.h"

#include "datatype/timestamp.h"

extern bool idem_webhook_record(text *source, text *event_id, const Interval *ttl);

#endif							/* IDEM_WEBHOOK_H */
