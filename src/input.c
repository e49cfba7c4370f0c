/*
 * input.c
 *		Checks of the arguments every SQL entry point shares.
 *
 * Each check runs before anything is locked or written, so a call that
 * errors here has written nothing.
 */
#include "postgres.h"

#include "access/detoast.h"
#include "utils/fmgrprotos.h"

#include "idem.h"

/* A key or event id: not NULL, 1 to 255 bytes */
text *
idem_arg_key(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *t;
	Size		len;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	if (len > IDEM_MAX_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", what),
				 errdetail("It is %zu bytes; the limit is %d.", len, IDEM_MAX_KEY_BYTES)));
	return t;
}

/* A scope or source: not NULL, at most 255 bytes, may be empty */
text *
idem_arg_scope(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *t;
	Size		len;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what),
				 errhint("Use the empty string for the default %s.", what)));
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len > IDEM_MAX_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("%s is too long", what),
				 errdetail("It is %zu bytes; the limit is %d.", len, IDEM_MAX_KEY_BYTES)));
	return t;
}

/*
 * from + an interval argument (a lease or a ttl), or from + the setting when
 * the argument is NULL.  The interval must be positive.
 */
TimestampTz
idem_arg_interval_from(FunctionCallInfo fcinfo, int argno, const char *what,
					   int default_secs, TimestampTz from)
{
	Interval   *iv;
	TimestampTz result;

	if (PG_ARGISNULL(argno))
		return from + (TimestampTz) default_secs * USECS_PER_SEC;

	iv = PG_GETARG_INTERVAL_P(argno);
	/* double: months and days of a hostile interval overflow int64 */
	if ((double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY +
		(double) iv->day * USECS_PER_DAY + (double) iv->time <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", what)));

	result = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													 TimestampTzGetDatum(from),
													 IntervalPGetDatum(iv)));
	if (TIMESTAMP_NOT_FINITE(result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("%s is too long", what)));

	/*
	 * Months and days of opposite signs can pass the check above and still
	 * end in the past: '-12 months +360 days' is positive in 30-day months
	 * but five days back on the calendar.  A ttl like that would let a
	 * completed payment be charged again at once.
	 */
	if (result <= from)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", what),
				 errdetail("Added to the current time, it ends at or before the current time.")));
	return result;
}

/* A response, error or checkpoint data: at most idem.max_response_size */
void
idem_check_json_size(Datum jsonb, const char *what)
{
	Size		size = toast_raw_datum_size(jsonb);

	if (size > (Size) idem_max_response_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s is too large", what),
				 errdetail("It is %zu bytes; idem.max_response_size is %d kB.",
						   size, idem_max_response_kb)));
}
