/*
 * config.c
 *		Entry points' helpers: the arguments that configure a webhook check
 *		(the scheme, the secret, the tolerance), checked before the request
 *		is looked at.
 *
 * May call: the registry of schemes (scheme.h) and the layers below it.
 * Unlike everything the request holds, a bad configuration raises an
 * error, so that it shows up on the first call whatever the request holds.
 * Error messages never quote the secret.
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "webhook/entry.h"

/*
 * A tolerance in microseconds, a month counting as 30 days; an error if it
 * is negative (whose hint says NULL skips the check if null_skips).  Done
 * in double: a huge interval must not overflow.
 */
double
idem_verify_tolerance_usecs(const Interval *iv, bool null_skips)
{
	double		usecs;

	usecs = (double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY +
		(double) iv->day * USECS_PER_DAY + (double) iv->time;
	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tolerance must not be negative"),
				 null_skips ? errhint("Use NULL to skip the timestamp check.") : 0));
	return usecs;
}

/*
 * The scheme named by a text argument, or an error: NULL is 22004, an
 * unknown name 22023
 */
const VerifyScheme *
idem_verify_scheme_arg(FunctionCallInfo fcinfo, int argno)
{
	text	   *name;
	const VerifyScheme *scheme;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("webhook signature scheme must not be null")));
	name = PG_GETARG_TEXT_PP(argno);
	scheme = idem_verify_scheme(idem_slice_of_text(name));
	if (scheme == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown webhook signature scheme \"%s\"",
						text_to_cstring(name)),
				 errhint("The schemes are %s.", idem_verify_scheme_names())));
	return scheme;
}

/*
 * The secret argument, checked to be present and not empty (22004, 22023);
 * what it must be beyond that is the scheme's prepare's to say.
 */
Slice
idem_verify_secret_arg(FunctionCallInfo fcinfo, int argno)
{
	Slice		secret;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("webhook secret must not be null")));
	secret = idem_slice_of_text(PG_GETARG_TEXT_PP(argno));
	if (secret.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret must not be empty")));
	return secret;
}
