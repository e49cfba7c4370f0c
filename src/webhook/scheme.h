/*
 * scheme.h
 *		The signature schemes of webhook senders, and the one registry of
 *		them that idem_webhook_verify, idem_webhook_receive and the sources
 *		all read.
 *
 * The third layer (scheme_*.c): a scheme may call the wire format (wire.h)
 * and the crypto (crypto.h), and a scheme of its family; never an entry
 * point (entry.h).  Each scheme turns the configured secret into a key
 * (prepare: 22023 if it cannot be one, before the request is looked at),
 * checks a request with that key (verify: true or false, never an error)
 * and says where the event id of a verified request is (event_id: false,
 * never an error, when it is missing).
 */
#ifndef IDEM_WEBHOOK_SCHEME_H
#define IDEM_WEBHOOK_SCHEME_H

#include "webhook/crypto.h"

/* The request as idem_webhook_verify or idem_webhook_receive received it */
typedef struct VerifyRequest
{
	Slice		payload;		/* the raw body */
	Jsonb	   *headers;		/* name -> string */
	double		tolerance_usecs;	/* -1: no timestamp check */
} VerifyRequest;

typedef struct VerifyScheme VerifyScheme;

/* A scheme, as the registry (scheme_registry.c) describes it */
struct VerifyScheme
{
	const char *name;
	void	   *(*prepare) (Slice secret);
	bool		(*verify) (void *key, const VerifyRequest *req);
	bool		timestamped;	/* the signature covers a timestamp */
	/* the event id of a verified request, read where id_name says */
	bool		(*event_id) (const VerifyScheme *scheme,
							 const VerifyRequest *req, Slice *id);
	const char *id_name;		/* the member, header or form parameter */
	const char *id_charset;		/* a form's: the parameter naming its charset */
};

/* The registry (scheme_registry.c) */
extern const VerifyScheme *idem_verify_scheme(Slice name);
extern const char *idem_verify_scheme_names(void);

/*
 * A signature header of Stripe's shape: name=value elements separated by
 * sep, one timestamp element and one or more MAC elements, each the hex
 * HMAC-SHA256 of "<timestamp><joiner><payload>"
 */
typedef struct TimestampedMacs
{
	const char *header;
	char		sep;
	const char *ts_name;
	const char *mac_name;
	const char *joiner;
} TimestampedMacs;

/* Stripe, Standard Webhooks and Svix (scheme_stripe.c) */
extern bool idem_verify_timestamped_macs(const TimestampedMacs *format,
										 const VerifyMacKey *key,
										 const VerifyRequest *req);
extern void *idem_stripe_prepare(Slice secret);
extern bool idem_stripe_verify(void *key, const VerifyRequest *req);
extern void *idem_standard_prepare(Slice secret);
extern void *idem_svix_prepare(Slice secret);
extern bool idem_standard_verify(void *key, const VerifyRequest *req);

/* The MAC of the body in one header (scheme_body_mac.c) */
extern void *idem_github_prepare(Slice secret);
extern void *idem_shopify_prepare(Slice secret);
extern void *idem_razorpay_prepare(Slice secret);
extern void *idem_checkout_prepare(Slice secret);
extern void *idem_adyen_platform_prepare(Slice secret);
extern void *idem_square_prepare(Slice secret);
extern void *idem_paystack_prepare(Slice secret);
extern void *idem_airwallex_prepare(Slice secret);
extern bool idem_body_mac_verify(void *key, const VerifyRequest *req);

/* Paddle Billing (scheme_paddle.c) */
extern void *idem_paddle_prepare(Slice secret);
extern bool idem_paddle_verify(void *key, const VerifyRequest *req);

/* Adyen (scheme_adyen.c) */
extern void *idem_adyen_prepare(Slice secret);
extern VerifyMacKey *idem_adyen_hex_key(Slice secret, const char *scheme);
extern bool idem_adyen_verify(void *key, const VerifyRequest *req);
extern bool idem_adyen_event_id(const VerifyScheme *scheme,
								const VerifyRequest *req, Slice *id);

/* The form-based gateways, Alipay and UnionPay (scheme_form.c) */
extern void *idem_alipay_prepare(Slice secret);
extern bool idem_alipay_verify(void *key, const VerifyRequest *req);
extern bool idem_alipay_keys_verify(void *key, const EVP_MD *md, const Slice *parts,
									int nparts, const uint8 *sig, size_t siglen);
extern void *idem_unionpay_prepare(Slice secret);
extern bool idem_unionpay_verify(void *key, const VerifyRequest *req);

/* Alipay's API v3 signed messages (scheme_alipay_v3.c) */
extern bool idem_alipay_v3_verify(void *key, const VerifyRequest *req);

/* Antom, Alipay's global gateway (scheme_antom.c) */
extern void *idem_antom_prepare(Slice secret);
extern bool idem_antom_verify(void *key, const VerifyRequest *req);

/* WeChat Pay (scheme_wechatpay.c) */
extern void *idem_wechatpay_prepare(Slice secret);
extern bool idem_wechatpay_verify(void *key, const VerifyRequest *req);

/* Mercado Pago (scheme_mercadopago.c) */
extern void *idem_mercadopago_prepare(Slice secret);
extern bool idem_mercadopago_verify(void *key, const VerifyRequest *req);

/* PayPal (scheme_paypal.c) */
extern void *idem_paypal_prepare(Slice secret);
extern bool idem_paypal_verify(void *key, const VerifyRequest *req);

#endif							/* IDEM_WEBHOOK_SCHEME_H */
