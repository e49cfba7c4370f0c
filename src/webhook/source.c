/*
 * source.c
 *		Entry points of webhook sources: idem_webhook_source_set,
 *		idem_webhook_source_drop.
 *
 * A source is the configuration of one sender of webhooks: its signature
 * scheme, its secrets (several while one is rotated), the tolerance of the
 * signed timestamps, the addresses deliveries may come from and how long
 * delivery ids are kept.  The rows live in idem.webhook_sources, which only
 * the extension's owner may read; these functions read and write it
 * directly through store.c, so a role needs only EXECUTE on them.  Each
 * backend keeps the sources idem_webhook_receive read (source_cache.c),
 * checked at every call against the row the statement's snapshot sees, so
 * a change is seen by the next statement in any session once it commits.
 *
 * Error messages never quote a secret: a secret that cannot be a key of
 * the scheme is refused by the scheme's prepare, whose messages say what is
 * wrong, never what the secret was.
 *
 * May call: the registry of schemes (scheme.h) and the layers below it,
 * the configuration helpers of config.c and the store (store.c).
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inet.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "idem.h"
#include "input.h"
#include "store.h"
#include "webhook/entry.h"

PG_FUNCTION_INFO_V1(idem_webhook_source_set);
PG_FUNCTION_INFO_V1(idem_webhook_source_drop);

/* An argument that must not be NULL (22004) */
static void
source_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
}

/*
 * The elements of an array argument: one dimension or none, no NULL
 * element (22004), at least one element (22023)
 */
static int
source_array_arg(FunctionCallInfo fcinfo, int argno, const char *what,
				 Oid elemtype, Datum **elems)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(argno);
	bool	   *nulls;
	int			n;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign, elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain null", what)));
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	return n;
}

/* Run every secret through the scheme's prepare, which raises 22023 if it cannot be a key */
static void
source_prepare_each(const VerifyScheme *scheme, Datum *secrets, int n)
{
	for (int i = 0; i < n; i++)
	{
		Slice		secret = idem_slice_of_text(DatumGetTextPP(secrets[i]));

		if (secret.len == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("webhook secret must not be empty")));
		(void) scheme->prepare(secret);
		idem_verify_release_all();
	}
}

/*
 * idem_webhook_source_set(source, scheme, secrets, tolerance, allowed_ips,
 * ttl): create or replace the configuration of a source
 */
Datum
idem_webhook_source_set(PG_FUNCTION_ARGS)
{
	text	   *source = idem_arg_scope(fcinfo, 0, "source");
	const VerifyScheme *scheme = idem_verify_scheme_arg(fcinfo, 1);
	Datum	   *secrets;
	Datum	   *ips;
	int			nsecrets;
	Interval   *tolerance;
	Datum		values[SOURCES_NATTS];
	bool		nulls[SOURCES_NATTS] = {false};
	IdemStore	st;
	IdemFetch	fetched;

	source_arg_not_null(fcinfo, 2, "secrets");
	nsecrets = source_array_arg(fcinfo, 2, "secrets", TEXTOID, &secrets);
	source_arg_not_null(fcinfo, 3, "tolerance");
	tolerance = PG_GETARG_INTERVAL_P(3);
	(void) idem_verify_tolerance_usecs(tolerance, false);
	if (!PG_ARGISNULL(4))
		(void) source_array_arg(fcinfo, 4, "allowed_ips", CIDROID, &ips);
	if (!PG_ARGISNULL(5))
		(void) idem_arg_interval(fcinfo, 5, "ttl", idem_webhook_ttl_secs);
	/* what prepare makes is wiped and freed, error or not */
	PG_TRY();
	{
		source_prepare_each(scheme, secrets, nsecrets);
	}
	PG_FINALLY();
	{
		idem_verify_release_all();
	}
	PG_END_TRY();
	idem_check_writable("idem_webhook_source_set()");

	values[SOURCES_SOURCE] = PointerGetDatum(source);
	values[SOURCES_SCHEME] = CStringGetTextDatum(scheme->name);
	/* the arrays flat and detoasted, as the row holds them */
	values[SOURCES_SECRETS] = PointerGetDatum(PG_GETARG_ARRAYTYPE_P(2));
	values[SOURCES_TOLERANCE] = IntervalPGetDatum(tolerance);
	values[SOURCES_ALLOWED_IPS] = PG_ARGISNULL(4) ? (Datum) 0 :
		PointerGetDatum(PG_GETARG_ARRAYTYPE_P(4));
	nulls[SOURCES_ALLOWED_IPS] = PG_ARGISNULL(4);
	values[SOURCES_TTL] = PG_ARGISNULL(5) ? (Datum) 0 : PG_GETARG_DATUM(5);
	nulls[SOURCES_TTL] = PG_ARGISNULL(5);
	values[SOURCES_UPDATED_AT] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());

	/* under the source's lock, after any uncommitted change of it ends */
	idem_store_open(&st, IDEM_SOURCES, true);
	idem_store_lock(IDEM_SOURCES, source, NULL, false);
	fetched = idem_store_fetch(&st, source, NULL, false, true);
	if (fetched == IDEM_FETCH_FOUND)
		idem_store_update(&st, values, nulls);
	else
		idem_store_insert(&st, values, nulls);
	idem_store_unlock(IDEM_SOURCES, source, NULL);
	idem_store_close(&st);
	PG_RETURN_VOID();
}

/* idem_webhook_source_drop(source): true if there was such a source */
Datum
idem_webhook_source_drop(PG_FUNCTION_ARGS)
{
	text	   *source = idem_arg_scope(fcinfo, 0, "source");
	IdemStore	st;
	bool		found;

	idem_check_writable("idem_webhook_source_drop()");
	idem_store_open(&st, IDEM_SOURCES, true);
	idem_store_lock(IDEM_SOURCES, source, NULL, false);
	found = idem_store_fetch(&st, source, NULL, false, true) == IDEM_FETCH_FOUND;
	if (found)
		idem_store_delete(&st);
	idem_store_unlock(IDEM_SOURCES, source, NULL);
	idem_store_close(&st);
	PG_RETURN_BOOL(found);
}
