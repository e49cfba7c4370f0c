/*
 * scheme_paddle.c
 *		Scheme: Paddle Billing, whose signature header lists HMAC-SHA256s of
 *		the timestamp and the body beside the timestamp, in Stripe's shape.
 *
 * May call: the crypto (crypto.h) and the reader of Stripe's shape
 * (scheme_stripe.c).
 */
#include "postgres.h"

#include "webhook/scheme.h"

/* Paddle Billing keys its HMAC with the endpoint secret key as given */
void *
idem_paddle_prepare(Slice secret)
{
	return idem_verify_mac_key((const uint8 *) secret.data, secret.len);
}

/*
 * Paddle Billing: Paddle-Signature is "ts=<unix>;h1=<hex>[;h1=<hex>...]",
 * the MAC is over "<ts>:<payload>"; while a secret is rotated Paddle sends
 * one h1 per active secret.  Stripe's shape with other names.
 */
bool
idem_paddle_verify(void *key, const VerifyRequest *req)
{
	static const TimestampedMacs format = {"paddle-signature", ';', "ts", "h1", ":"};

	return idem_verify_timestamped_macs(&format, key, req);
}
