/*
 * input.c
 *		Checks of the arguments every SQL entry point shares.
 *
 * Each check runs before anything is locked or written, so a call that
 * errors here has written nothing.  And the result row they build.
 *
 * May call: the server only.  It defines idem.max_response_size
 * (idem_input_init).
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "common/int.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "idem.h"
#include "input.h"

int			idem_max_response_kb = 1024;

/* Define idem.max_response_size, which idem_check_value_size applies (_PG_init) */
void
idem_input_init(void)
{
	DefineCustomIntVariable("idem.max_response_size",
							"Largest response, error or checkpoint data stored.",
							NULL,
							&idem_max_response_kb, 1024, 1, MAX_KILOBYTES / 1024 * 1024,
							PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);
}

/* A text argument: not NULL, at most 255 bytes, and not empty if need be */
static text *
input_text(FunctionCallInfo fcinfo, int argno, const char *what, bool may_be_empty)
{
	text	   *t;
	Size		len;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what),
				 may_be_empty ? errhint("Use the empty string for the default %s.", what) : 0));
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0 && !may_be_empty)
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

/* A key or event id: not NULL, 1 to 255 bytes */
text *
idem_arg_key(FunctionCallInfo fcinfo, int argno, const char *what)
{
	return input_text(fcinfo, argno, what, false);
}

/* Would idem_arg_key accept this argument? For calls that answer, not raise */
bool
idem_arg_key_valid(FunctionCallInfo fcinfo, int argno)
{
	Size		len;

	if (PG_ARGISNULL(argno))
		return false;
	len = VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(argno));
	return len > 0 && len <= IDEM_MAX_KEY_BYTES;
}

/* A scope or source: not NULL, at most 255 bytes, may be empty */
text *
idem_arg_scope(FunctionCallInfo fcinfo, int argno, const char *what)
{
	return input_text(fcinfo, argno, what, true);
}

/*
 * from + iv, which must end inside timestamptz's range: a row holding a
 * time past 294276-12-31 could be written, but no dump of it restored and
 * no subscriber sent it.  Days and months go through timestamptz_pl_interval
 * (calendar arithmetic in the session's time zone, which refuses an end out
 * of range itself); the duration is added last, with its own check.
 */
TimestampTz
idem_after(TimestampTz from, const Interval *iv, const char *what)
{
	TimestampTz result = from;

	if (iv->month != 0 || iv->day != 0)
	{
		Interval	calendar = *iv;

		calendar.time = 0;
		result = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
														 TimestampTzGetDatum(from),
														 IntervalPGetDatum(&calendar)));
	}
	if (pg_add_s64_overflow(result, iv->time, &result) || !IS_VALID_TIMESTAMP(result))
	{
		if (iv->time > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("%s is too long", what),
					 errdetail("Added to the current time, it ends after the last timestamp, 294276-12-31 23:59:59.999999 UTC.")));
		result = DT_NOBEGIN;	/* before the beginning: not positive */
	}

	/*
	 * Months and days of opposite signs can pass the caller's check and still
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

/*
 * A lease or ttl argument, or the setting when it is NULL.  It must be
 * positive and must not run past the end of time; both are checked now, so
 * that a bad interval fails before anything is written.  The caller adds it
 * to the clock when it writes (a claim may wait for another one first).
 */
Interval *
idem_arg_interval(FunctionCallInfo fcinfo, int argno, const char *what,
				  int default_secs)
{
	Interval   *iv;
	TimestampTz now = GetCurrentTimestamp();

	if (PG_ARGISNULL(argno))
	{
		iv = palloc0(sizeof(Interval));
		iv->time = (TimeOffset) default_secs * USECS_PER_SEC;
		return iv;
	}
	iv = PG_GETARG_INTERVAL_P(argno);
	/* '1 month -30 days' is positive or not depending on the date: ask the calendar */
	if ((iv->month <= 0 && iv->day <= 0 && iv->time <= 0) ||
		idem_after(now, iv, what) <= now)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", what)));
	return iv;
}

/* Refuse writes where PostgreSQL would: read-only transactions, standbys */
void
idem_check_writable(const char *fname)
{
	PreventCommandIfReadOnly(fname);
	PreventCommandDuringRecovery(fname);
}

/*
 * A value's own bytes, as idem.max_response_size counts them: a text's
 * octets, a jsonb's binary form, uncompressed and without PostgreSQL's
 * varlena header
 */
static Size
value_bytes(Datum value)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(value);

	if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
		return toast_raw_datum_size(value) - VARHDRSZ;
	return VARSIZE_ANY_EXHDR(v);
}

/*
 * A response, error, checkpoint data or body: at most
 * idem.max_response_size, and at most IDEM_MAX_REPLAY_TEXT, so that a
 * replay's result row fits in memory whatever the setting
 */
void
idem_check_value_size(Datum value, const char *what)
{
	Size		size = value_bytes(value);

	if (size > (Size) idem_max_response_kb * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s is too large", what),
				 errdetail("It is %zu bytes; idem.max_response_size is %d kB.",
						   size, idem_max_response_kb)));
	if (size > IDEM_MAX_REPLAY_TEXT)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s is too large to replay", what),
				 errdetail("It is %zu bytes; a replay holds at most %d MB.",
						   size, IDEM_MAX_REPLAY_TEXT / (1024 * 1024))));
}

/*
 * The most bytes of text one byte of jsonb prints as: an array element
 * that is a numeric of one digit with the largest weight and scale is 14
 * bytes of jsonb (its JEntry, a 10-byte numeric) and 147459 of text
 * ("-1", 131068 zeros, ".", 16383 zeros, ", ").  Nothing prints longer
 * for its size.
 */
#define JSON_TEXT_PER_BYTE	10600

/* The length of a jsonb scalar's text, as JsonbToCString prints it */
static Size
json_scalar_text_len(JsonbValue *v)
{
	Size		len = 2;		/* quotes */
	char	   *num;

	switch (v->type)
	{
		case jbvNull:
			return 4;
		case jbvBool:
			return 5;
		case jbvNumeric:
			num = DatumGetCString(DirectFunctionCall1(numeric_out,
													  NumericGetDatum(v->val.numeric)));
			len = strlen(num);
			pfree(num);
			return len;
		case jbvString:
			/* as escape_json escapes */
			for (int i = 0; i < v->val.string.len; i++)
			{
				unsigned char c = (unsigned char) v->val.string.val[i];

				len += (c == '"' || c == '\\' || c == '\b' || c == '\f' ||
						c == '\n' || c == '\r' || c == '\t') ? 2 : c < ' ' ? 6 : 1;
			}
			return len;
		default:
			elog(ERROR, "unexpected jsonb scalar type %d", (int) v->type);
	}
	return 0;					/* keep compiler quiet */
}

/*
 * A jsonb value that a replay prints (idem_http_claim as its body, a
 * client reading idem_claim's response): its text must fit in memory.  A
 * value of up to IDEM_MAX_REPLAY_TEXT / JSON_TEXT_PER_BYTE bytes (about
 * 100 kB) always does; a larger one is read through, counting its text
 * from above (each token as if it had a separator).
 */
void
idem_check_json_prints(Datum jsonb, const char *what)
{
	Jsonb	   *jb;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	Size		len = 0;

	if (value_bytes(jsonb) <= IDEM_MAX_REPLAY_TEXT / JSON_TEXT_PER_BYTE)
		return;
	jb = DatumGetJsonbP(jsonb);
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		len += 2;				/* a bracket, ", " or ": " */
		if (tok == WJB_KEY || tok == WJB_VALUE || tok == WJB_ELEM)
			len += json_scalar_text_len(&v);
		if (len > IDEM_MAX_REPLAY_TEXT)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("%s is too large to replay", what),
					 errdetail("As jsonb prints it, its text is over %d MB, the most a replay holds.",
							   IDEM_MAX_REPLAY_TEXT / (1024 * 1024))));
	}
}

/*
 * The descriptor of the row that the function being called returns (its
 * OUT parameters), read from its pg_proc row, in the current memory
 * context.  Another session may have dropped the function since this
 * statement looked it up (DROP EXTENSION idem, seen at the first lock the
 * call takes): that is 42883, as for any function that does not exist, not
 * the catalog's internal error.  A retry plans the statement again.
 */
TupleDesc
idem_call_result_desc(FunctionCallInfo fcinfo)
{
	Oid			fn_oid = fcinfo->flinfo->fn_oid;
	HeapTuple	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	TupleDesc	tupdesc;

	if (!HeapTupleIsValid(proctup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function of extension \"idem\" was dropped during the call"),
				 errdetail("Another session dropped the extension, or dropped and created it again, after this statement looked up the function (OID %u).", fn_oid),
				 errhint("Retry the call: a prepared statement is planned again with the functions that exist now.")));
	tupdesc = build_function_result_tupdesc_t(proctup);
	ReleaseSysCache(proctup);
	if (tupdesc == NULL)
		elog(ERROR, "return type must be a row type");
	return tupdesc;
}

/*
 * The result descriptors of idem's functions that return a row, by
 * function OID, kept for the backend's life: a statement that calls one in
 * FROM gets a new FmgrInfo each time, and building the descriptor reads
 * the catalog, which would cost more than many a call's own work.  A
 * change of pg_proc (CREATE OR REPLACE FUNCTION, ALTER EXTENSION UPDATE)
 * forgets them all.
 */
#define RESULT_DESCS	8

typedef struct ResultDesc
{
	Oid			fn_oid;			/* InvalidOid: a free entry */
	TupleDesc	tupdesc;		/* blessed, in TopMemoryContext */
} ResultDesc;

static ResultDesc result_descs[RESULT_DESCS];
static bool result_descs_watched = false;

/* Forget the result descriptors (a syscache callback on pg_proc) */
static void
result_descs_forget(Datum arg, int cacheid, uint32 hashvalue)
{
	for (int i = 0; i < RESULT_DESCS; i++)
	{
		if (result_descs[i].tupdesc != NULL)
			FreeTupleDesc(result_descs[i].tupdesc);
		result_descs[i].fn_oid = InvalidOid;
		result_descs[i].tupdesc = NULL;
	}
}

/* The blessed result descriptor of the function being called */
static TupleDesc
result_desc(FunctionCallInfo fcinfo)
{
	Oid			fn_oid = fcinfo->flinfo->fn_oid;
	ResultDesc *slot = NULL;
	TupleDesc	tupdesc;
	MemoryContext oldcontext;

	for (int i = 0; i < RESULT_DESCS; i++)
	{
		if (result_descs[i].fn_oid == fn_oid && OidIsValid(fn_oid))
			return result_descs[i].tupdesc;
		if (slot == NULL && !OidIsValid(result_descs[i].fn_oid))
			slot = &result_descs[i];
	}
	if (!result_descs_watched)
	{
		CacheRegisterSyscacheCallback(PROCOID, result_descs_forget, (Datum) 0);
		result_descs_watched = true;
	}
	/* built in the call's memory; only the descriptor is kept */
	oldcontext = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	tupdesc = BlessTupleDesc(idem_call_result_desc(fcinfo));
	MemoryContextSwitchTo(oldcontext);
	if (slot != NULL && OidIsValid(fn_oid))
	{
		oldcontext = MemoryContextSwitchTo(TopMemoryContext);
		slot->tupdesc = CreateTupleDescCopy(tupdesc);
		MemoryContextSwitchTo(oldcontext);
		slot->fn_oid = fn_oid;
	}
	return tupdesc;
}

/*
 * A row of the function's composite result, with the descriptor of
 * result_desc
 */
Datum
idem_result_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	return HeapTupleGetDatum(heap_form_tuple(result_desc(fcinfo), values, nulls));
}
