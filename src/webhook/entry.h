/*
 * entry.h
 *		The entry points of the webhook code: idem_webhook_verify (verify.c),
 *		idem_webhook_receive (receive.c), the sources (source.c) and their
 *		per-backend cache (source_cache.c), the dedup record idem_webhook
 *		(record.c) and idem_wechatpay_decrypt (wechatpay_decrypt.c).
 *
 * The top layer: it may call every layer below (scheme.h, crypto.h,
 * wire.h) and the rest of idem (store, stats, input); nothing below calls
 * it.
 */
#ifndef IDEM_WEBHOOK_ENTRY_H
#define IDEM_WEBHOOK_ENTRY_H

#include "webhook/scheme.h"

#include "datatype/timestamp.h"
#include "fmgr.h"

/* The arguments that configure a check (config.c) */
extern const VerifyScheme *idem_verify_scheme_arg(FunctionCallInfo fcinfo, int argno);
extern Slice idem_verify_secret_arg(FunctionCallInfo fcinfo, int argno);
extern double idem_verify_tolerance_usecs(const Interval *iv, bool null_skips);

/* A source's row, copied out of the table (source_cache.c) */
typedef struct WebhookSource
{
	const VerifyScheme *scheme;
	void	  **keys;			/* each secret, prepared by its scheme */
	VerifyHeld **held;			/* what preparing each took over */
	int			nsecrets;
	double		tolerance_usecs;
	Datum	   *nets;			/* allowed_ips; NULL: any address */
	bool	   *net_nulls;
	int			nnets;
	bool		ttl_default;	/* no ttl of its own: idem.webhook_ttl, now */
	Interval	ttl;
} WebhookSource;

extern bool idem_webhook_source_read(text *source, WebhookSource *src);

/* The record of a delivery (record.c), and the setting of how long it is kept */
extern int	idem_webhook_ttl_secs;

extern void idem_webhook_record_init(void);
extern bool idem_webhook_record(text *source, text *event_id, const Interval *ttl);

#endif							/* IDEM_WEBHOOK_ENTRY_H */
