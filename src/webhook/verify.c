/*
 * verify.c
 *		Entry point: idem_webhook_verify, which checks the signature of an
 *		incoming webhook in one of the schemes of the registry.
 *
 * May call: every layer below (scheme.h, crypto.h, wire.h) and the
 * configuration helpers of config.c.  Headers and payload come from
 * whoever can reach the application's endpoint, so any defect in them
 * (missing, malformed, forged, stale) is a plain false and never an error:
 * an error would let a stranger decide whether the caller's transaction
 * aborts.  Only what the application configures (scheme, secret,
 * tolerance) raises errors, and those are raised before the request is
 * looked at, so a misconfiguration shows up on the first call whatever the
 * request holds.  Error messages never quote the secret.  Nothing is
 * written.
 *
 * The scheme turns the secret into its key (prepare) and then checks the
 * request (verify); the secrets and OpenSSL objects both make are wiped and
 * freed when the call ends, on every path (crypto_secret.c).
 */
#include "postgres.h"

#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "webhook/entry.h"

/* The tolerance argument in microseconds; -1 for NULL (no check) */
static double
tolerance_usecs_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		return -1;
	return idem_verify_tolerance_usecs(PG_GETARG_INTERVAL_P(argno), true);
}

PG_FUNCTION_INFO_V1(idem_webhook_verify);

/*
 * idem_webhook_verify(scheme, secret, payload, headers, tolerance): true when
 * the headers carry a valid, fresh signature of payload under secret.
 */
Datum
idem_webhook_verify(PG_FUNCTION_ARGS)
{
	/* configuration first: these errors must not depend on the request */
	const VerifyScheme *scheme = idem_verify_scheme_arg(fcinfo, 0);
	Slice		secret = idem_verify_secret_arg(fcinfo, 1);
	VerifyRequest req;
	volatile bool result = false;

	req.tolerance_usecs = tolerance_usecs_arg(fcinfo, 4);
	PG_TRY();
	{
		void	   *key = scheme->prepare(secret);

		if (!PG_ARGISNULL(2) && !PG_ARGISNULL(3))
		{
			req.payload = idem_slice_of_text(PG_GETARG_TEXT_PP(2));
			req.headers = PG_GETARG_JSONB_P(3);
			result = scheme->verify(key, &req);
		}
	}
	PG_FINALLY();
	{
		idem_verify_release_all();
	}
	PG_END_TRY();
	PG_RETURN_BOOL(result);
}
