/*
 * claim.c
 *		idem_claim, idem_complete, idem_fail, idem_checkpoint and idem_lookup.
 *
 * A key's row moves through these states:
 *
 *	 (none) --claim--> processing --complete--> completed
 *						   |	 \---fail(final)--> failed
 *						   |---fail(retryable)--> released --claim--> processing
 *						   \---lease runs out, claim--> processing (attempt + 1)
 *
 * A row past its expires_at counts as absent.  Every attempt gets a new
 * fencing token, so the worker of an earlier attempt can no longer finish,
 * fail or checkpoint the key.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "idem.h"
#include "store.h"

PG_FUNCTION_INFO_V1(idem_claim);
PG_FUNCTION_INFO_V1(idem_complete);
PG_FUNCTION_INFO_V1(idem_fail);
PG_FUNCTION_INFO_V1(idem_checkpoint);
PG_FUNCTION_INFO_V1(idem_lookup);

/* Largest fingerprint accepted: room for any hash, not for a payload */
#define IDEM_MAX_FINGERPRINT_BYTES	255

/* When nothing better is known, the wait an in_progress answer suggests */
#define IDEM_DEFAULT_RETRY_AFTER_SECS	1

/* Columns of idem_claim's result */
enum
{
	CLAIM_STATUS,
	CLAIM_TOKEN,
	CLAIM_ATTEMPT,
	CLAIM_RESPONSE,
	CLAIM_CHECKPOINT,
	CLAIM_CHECKPOINT_DATA,
	CLAIM_RETRY_AFTER,
	CLAIM_NATTS
};

/* What a finishing call does to the attempt */
typedef enum FinishKind
{
	FINISH_COMPLETE,
	FINISH_FAIL_FINAL,
	FINISH_RELEASE,
	FINISH_CHECKPOINT
} FinishKind;

/* Is the row's state this one? */
static inline bool
state_is(IdemStore *st, const char *state)
{
	text	   *t = DatumGetTextPP(st->values[KEYS_STATE]);

	return VARSIZE_ANY_EXHDR(t) == strlen(state) &&
		memcmp(VARDATA_ANY(t), state, strlen(state)) == 0;
}

/* Has the found row expired, so that it counts as absent? */
static inline bool
row_expired(IdemStore *st, TimestampTz now)
{
	return DatumGetTimestampTz(st->values[KEYS_EXPIRES_AT]) <= now;
}

/* Are both fingerprints given, and different? */
static bool
fingerprint_differs(IdemStore *st, bytea *fp)
{
	bytea	   *stored;

	if (fp == NULL || st->nulls[KEYS_FINGERPRINT])
		return false;
	stored = DatumGetByteaPP(st->values[KEYS_FINGERPRINT]);
	return VARSIZE_ANY_EXHDR(stored) != VARSIZE_ANY_EXHDR(fp) ||
		memcmp(VARDATA_ANY(stored), VARDATA_ANY(fp), VARSIZE_ANY_EXHDR(fp)) != 0;
}

/* An interval of the microseconds from now to until (at least zero) */
static Datum
interval_until(TimestampTz now, TimestampTz until)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = until > now ? until - now : 0;
	return IntervalPGetDatum(iv);
}

/* Refuse writes where PostgreSQL would: read-only transactions, standbys */
static void
claim_check_writable(const char *fname)
{
	PreventCommandIfReadOnly(fname);
	PreventCommandDuringRecovery(fname);
}

/* The checked fingerprint argument, or NULL when none is given */
static bytea *
claim_arg_fingerprint(FunctionCallInfo fcinfo, int argno)
{
	bytea	   *fp;

	if (PG_ARGISNULL(argno))
		return NULL;
	fp = PG_GETARG_BYTEA_PP(argno);
	if (VARSIZE_ANY_EXHDR(fp) > IDEM_MAX_FINGERPRINT_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("fingerprint is too long"),
				 errdetail("It is %zu bytes; the limit is %d.",
						   VARSIZE_ANY_EXHDR(fp), IDEM_MAX_FINGERPRINT_BYTES),
				 errhint("Pass a hash of the request, such as idem_fingerprint(request).")));
	return fp;
}

/* Build idem_claim's result row */
static Datum
claim_result(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	return HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
}

/*
 * Write a new attempt into the row of (scope, key): a fresh row when there
 * is none or it expired, else the next attempt of the row, which keeps its
 * fingerprint, creation time and last checkpoint.
 */
static void
claim_write_attempt(IdemStore *st, IdemFetch fetched, TimestampTz now,
					text *scope, text *key, bytea *fp, int64 token,
					TimestampTz lease_until, TimestampTz expires_at,
					Datum *out, bool *outnulls)
{
	Datum		values[KEYS_NATTS];
	bool		nulls[KEYS_NATTS];
	bool		fresh = (fetched != IDEM_FETCH_FOUND || row_expired(st, now));

	if (fresh)
	{
		memset(nulls, true, sizeof(nulls));
		values[KEYS_SCOPE] = PointerGetDatum(scope);
		values[KEYS_KEY] = PointerGetDatum(key);
		values[KEYS_ATTEMPT] = Int32GetDatum(1);
		values[KEYS_CREATED_AT] = TimestampTzGetDatum(now);
		values[KEYS_EXPIRES_AT] = TimestampTzGetDatum(Max(expires_at, lease_until));
		nulls[KEYS_SCOPE] = nulls[KEYS_KEY] = nulls[KEYS_ATTEMPT] = false;
		nulls[KEYS_CREATED_AT] = nulls[KEYS_EXPIRES_AT] = false;
		if (fp != NULL)
		{
			values[KEYS_FINGERPRINT] = PointerGetDatum(fp);
			nulls[KEYS_FINGERPRINT] = false;
		}
	}
	else
	{
		TimestampTz old_expiry = DatumGetTimestampTz(st->values[KEYS_EXPIRES_AT]);

		memcpy(values, st->values, sizeof(values));
		memcpy(nulls, st->nulls, sizeof(nulls));
		values[KEYS_ATTEMPT] = Int32GetDatum(DatumGetInt32(st->values[KEYS_ATTEMPT]) + 1);
		values[KEYS_EXPIRES_AT] = TimestampTzGetDatum(Max(old_expiry, lease_until));
		if (nulls[KEYS_FINGERPRINT] && fp != NULL)
		{
			values[KEYS_FINGERPRINT] = PointerGetDatum(fp);
			nulls[KEYS_FINGERPRINT] = false;
		}
		nulls[KEYS_RESPONSE] = nulls[KEYS_COMPLETED_AT] = true;
	}
	values[KEYS_STATE] = CStringGetTextDatum("processing");
	values[KEYS_TOKEN] = Int64GetDatum(token);
	values[KEYS_LEASE_UNTIL] = TimestampTzGetDatum(lease_until);
	nulls[KEYS_STATE] = nulls[KEYS_TOKEN] = nulls[KEYS_LEASE_UNTIL] = false;

	out[CLAIM_STATUS] = CStringGetTextDatum("claimed");
	out[CLAIM_TOKEN] = Int64GetDatum(token);
	out[CLAIM_ATTEMPT] = values[KEYS_ATTEMPT];
	outnulls[CLAIM_STATUS] = outnulls[CLAIM_TOKEN] = outnulls[CLAIM_ATTEMPT] = false;
	if (!nulls[KEYS_CHECKPOINT])
	{
		out[CLAIM_CHECKPOINT] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[KEYS_CHECKPOINT]));
		outnulls[CLAIM_CHECKPOINT] = false;
	}
	if (!nulls[KEYS_CHECKPOINT_DATA])
	{
		out[CLAIM_CHECKPOINT_DATA] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[KEYS_CHECKPOINT_DATA]));
		outnulls[CLAIM_CHECKPOINT_DATA] = false;
	}

	if (fetched == IDEM_FETCH_FOUND)
		idem_store_update(st, values, nulls);
	else
		idem_store_insert(st, values, nulls);
}

/*
 * idem_claim(key, fingerprint, scope, lease, ttl, nowait): take the key for
 * a new attempt, or say why not (completed, failed, in_progress, mismatch).
 */
Datum
idem_claim(PG_FUNCTION_ARGS)
{
	text	   *key = idem_arg_key(fcinfo, 0, "key");
	bytea	   *fp = claim_arg_fingerprint(fcinfo, 1);
	text	   *scope = idem_arg_scope(fcinfo, 2, "scope");
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz lease_until = idem_arg_interval_from(fcinfo, 3, "lease", idem_lease_secs, now);
	TimestampTz expires_at = idem_arg_interval_from(fcinfo, 4, "ttl", idem_ttl_secs, now);
	bool		nowait = PG_ARGISNULL(5) ? false : PG_GETARG_BOOL(5);
	Datum		out[CLAIM_NATTS];
	bool		outnulls[CLAIM_NATTS];
	IdemStore	st;
	IdemFetch	fetched;
	IdemCounter counted;

	claim_check_writable("idem_claim()");
	memset(outnulls, true, sizeof(outnulls));

	if (!idem_store_lock(IDEM_KEYS, scope, key, nowait))
	{
		/* an uncommitted claim of another transaction is deciding this key */
		out[CLAIM_STATUS] = CStringGetTextDatum("in_progress");
		out[CLAIM_RETRY_AFTER] = interval_until(0, IDEM_DEFAULT_RETRY_AFTER_SECS * USECS_PER_SEC);
		outnulls[CLAIM_STATUS] = outnulls[CLAIM_RETRY_AFTER] = false;
		idem_stats_count(IDEM_STAT_IN_PROGRESS, 1);
		PG_RETURN_DATUM(claim_result(fcinfo, out, outnulls));
	}

	idem_store_open(&st, IDEM_KEYS, true);
	fetched = idem_store_fetch(&st, scope, key, nowait);
	/* the clock may have moved while the fetch waited */
	if (fetched != IDEM_FETCH_NONE)
		now = Max(now, GetCurrentTimestamp());

	if (fetched == IDEM_FETCH_BUSY)
	{
		out[CLAIM_STATUS] = CStringGetTextDatum("in_progress");
		out[CLAIM_RETRY_AFTER] = interval_until(0, IDEM_DEFAULT_RETRY_AFTER_SECS * USECS_PER_SEC);
		outnulls[CLAIM_STATUS] = outnulls[CLAIM_RETRY_AFTER] = false;
		counted = IDEM_STAT_IN_PROGRESS;
	}
	else if (fetched == IDEM_FETCH_FOUND && !row_expired(&st, now) &&
			 fingerprint_differs(&st, fp))
	{
		out[CLAIM_STATUS] = CStringGetTextDatum("mismatch");
		outnulls[CLAIM_STATUS] = false;
		counted = IDEM_STAT_MISMATCHED;
	}
	else if (fetched == IDEM_FETCH_FOUND && !row_expired(&st, now) &&
			 (state_is(&st, "completed") || state_is(&st, "failed")))
	{
		out[CLAIM_STATUS] = datumCopy(st.values[KEYS_STATE], false, -1);
		out[CLAIM_ATTEMPT] = st.values[KEYS_ATTEMPT];
		outnulls[CLAIM_STATUS] = outnulls[CLAIM_ATTEMPT] = false;
		if (!st.nulls[KEYS_RESPONSE])
		{
			out[CLAIM_RESPONSE] = PointerGetDatum(PG_DETOAST_DATUM_COPY(st.values[KEYS_RESPONSE]));
			outnulls[CLAIM_RESPONSE] = false;
		}
		counted = IDEM_STAT_REPLAYED;
	}
	else if (fetched == IDEM_FETCH_FOUND && !row_expired(&st, now) &&
			 state_is(&st, "processing") &&
			 (st.own || DatumGetTimestampTz(st.values[KEYS_LEASE_UNTIL]) > now))
	{
		/* a live attempt; also one of this very transaction, which must not run twice */
		out[CLAIM_STATUS] = CStringGetTextDatum("in_progress");
		out[CLAIM_ATTEMPT] = st.values[KEYS_ATTEMPT];
		out[CLAIM_RETRY_AFTER] = interval_until(now, DatumGetTimestampTz(st.values[KEYS_LEASE_UNTIL]));
		outnulls[CLAIM_STATUS] = outnulls[CLAIM_ATTEMPT] = outnulls[CLAIM_RETRY_AFTER] = false;
		counted = IDEM_STAT_IN_PROGRESS;
	}
	else
	{
		int64		token = idem_store_next_token();

		claim_write_attempt(&st, fetched, now, scope, key, fp, token,
							lease_until, expires_at, out, outnulls);
		idem_claim_memory_add(scope, key, token);
		counted = IDEM_STAT_CLAIMED;
	}

	idem_store_close(&st);
	idem_store_unlock(IDEM_KEYS, scope, key);
	idem_stats_count(counted, 1);
	PG_RETURN_DATUM(claim_result(fcinfo, out, outnulls));
}

/*
 * Check that the caller owns the current attempt of the found row: with its
 * token, or without one in the transaction that made the claim.
 */
static void
finish_check_owner(IdemStore *st, IdemFetch fetched, TimestampTz now,
				   text *scope, text *key, bool has_token, int64 token,
				   const char *fname)
{
	int64		current;

	if (fetched != IDEM_FETCH_FOUND || row_expired(st, now))
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_NO_CLAIM),
				 errmsg("%s: key \"%s\" has no claim", fname, text_to_cstring(key)),
				 errdetail("No live row exists for this key in scope \"%s\".", text_to_cstring(scope)),
				 errhint("Call idem_claim first.")));
	if (state_is(st, "completed") || state_is(st, "failed"))
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_ALREADY_FINISHED),
				 errmsg("%s: key \"%s\" is already finished", fname, text_to_cstring(key)),
				 errdetail("Its state is %s.", TextDatumGetCString(st->values[KEYS_STATE]))));
	if (!has_token && !idem_claim_memory_find(scope, key, &token))
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_TOKEN_REQUIRED),
				 errmsg("%s: key \"%s\" was not claimed in this transaction", fname, text_to_cstring(key)),
				 errhint("Pass the token that idem_claim returned.")));
	current = DatumGetInt64(st->values[KEYS_TOKEN]);
	if (state_is(st, "released") || token != current)
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_STALE_TOKEN),
				 errmsg("%s: token %lld does not hold key \"%s\"", fname,
						(long long) token, text_to_cstring(key)),
				 errdetail("The attempt of this token was released or taken over; the key is at attempt %d.",
						   DatumGetInt32(st->values[KEYS_ATTEMPT]))));
}

/*
 * Shared body of idem_complete, idem_fail and idem_checkpoint: lock the key,
 * check the caller owns the attempt, and write the row's new state.
 */
static void
finish_attempt(FinishKind kind, text *key, text *scope, bool has_token,
			   int64 token, Datum payload, bool payload_null,
			   text *phase, TimestampTz lease_until, const char *fname)
{
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[KEYS_NATTS];
	bool		nulls[KEYS_NATTS];
	IdemStore	st;
	IdemFetch	fetched;

	claim_check_writable(fname);
	idem_store_lock(IDEM_KEYS, scope, key, false);
	idem_store_open(&st, IDEM_KEYS, true);
	fetched = idem_store_fetch(&st, scope, key, false);
	now = Max(now, GetCurrentTimestamp());
	finish_check_owner(&st, fetched, now, scope, key, has_token, token, fname);

	memcpy(values, st.values, sizeof(values));
	memcpy(nulls, st.nulls, sizeof(nulls));
	switch (kind)
	{
		case FINISH_COMPLETE:
		case FINISH_FAIL_FINAL:
			values[KEYS_STATE] = CStringGetTextDatum(kind == FINISH_COMPLETE ? "completed" : "failed");
			values[KEYS_COMPLETED_AT] = TimestampTzGetDatum(now);
			nulls[KEYS_COMPLETED_AT] = false;
			nulls[KEYS_LEASE_UNTIL] = true;
			values[KEYS_RESPONSE] = payload;
			nulls[KEYS_RESPONSE] = payload_null;
			break;
		case FINISH_RELEASE:
			/* the error is kept for operators; the next claim clears it */
			values[KEYS_STATE] = CStringGetTextDatum("released");
			nulls[KEYS_LEASE_UNTIL] = true;
			values[KEYS_RESPONSE] = payload;
			nulls[KEYS_RESPONSE] = payload_null;
			break;
		case FINISH_CHECKPOINT:
			values[KEYS_CHECKPOINT] = PointerGetDatum(phase);
			nulls[KEYS_CHECKPOINT] = false;
			values[KEYS_CHECKPOINT_DATA] = payload;
			nulls[KEYS_CHECKPOINT_DATA] = payload_null;
			values[KEYS_LEASE_UNTIL] = TimestampTzGetDatum(lease_until);
			nulls[KEYS_LEASE_UNTIL] = false;
			if (lease_until > DatumGetTimestampTz(st.values[KEYS_EXPIRES_AT]))
				values[KEYS_EXPIRES_AT] = TimestampTzGetDatum(lease_until);
			break;
	}
	idem_store_update(&st, values, nulls);
	idem_store_close(&st);
	idem_store_unlock(IDEM_KEYS, scope, key);
}

/* The optional token argument */
static bool
finish_arg_token(FunctionCallInfo fcinfo, int argno, int64 *token)
{
	if (PG_ARGISNULL(argno))
		return false;
	*token = PG_GETARG_INT64(argno);
	return true;
}

/* The optional jsonb payload argument, size-checked */
static bool
finish_arg_json(FunctionCallInfo fcinfo, int argno, const char *what, Datum *value)
{
	if (PG_ARGISNULL(argno))
		return false;
	*value = PG_GETARG_DATUM(argno);
	idem_check_json_size(*value, what);
	return true;
}

/* idem_complete(key, response, scope, token): finish the attempt */
Datum
idem_complete(PG_FUNCTION_ARGS)
{
	text	   *key = idem_arg_key(fcinfo, 0, "key");
	text	   *scope = idem_arg_scope(fcinfo, 2, "scope");
	Datum		response = (Datum) 0;
	bool		has_response = finish_arg_json(fcinfo, 1, "response", &response);
	int64		token = 0;
	bool		has_token = finish_arg_token(fcinfo, 3, &token);

	finish_attempt(FINISH_COMPLETE, key, scope, has_token, token,
				   response, !has_response, NULL, 0, "idem_complete");
	idem_stats_count(IDEM_STAT_COMPLETED, 1);
	PG_RETURN_VOID();
}

/* idem_fail(key, error, retryable, scope, token): release or finish as failed */
Datum
idem_fail(PG_FUNCTION_ARGS)
{
	text	   *key = idem_arg_key(fcinfo, 0, "key");
	text	   *scope = idem_arg_scope(fcinfo, 3, "scope");
	Datum		error = (Datum) 0;
	bool		has_error = finish_arg_json(fcinfo, 1, "error", &error);
	int64		token = 0;
	bool		has_token = finish_arg_token(fcinfo, 4, &token);
	bool		retryable;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("retryable must not be null")));
	retryable = PG_GETARG_BOOL(2);

	finish_attempt(retryable ? FINISH_RELEASE : FINISH_FAIL_FINAL, key, scope,
				   has_token, token, error, !has_error, NULL, 0, "idem_fail");
	idem_stats_count(IDEM_STAT_FAILED, 1);
	PG_RETURN_VOID();
}

/* idem_checkpoint(key, phase, data, scope, token, lease): record progress */
Datum
idem_checkpoint(PG_FUNCTION_ARGS)
{
	text	   *key = idem_arg_key(fcinfo, 0, "key");
	text	   *phase = idem_arg_key(fcinfo, 1, "phase");
	text	   *scope = idem_arg_scope(fcinfo, 3, "scope");
	Datum		data = (Datum) 0;
	bool		has_data = finish_arg_json(fcinfo, 2, "data", &data);
	int64		token = 0;
	bool		has_token = finish_arg_token(fcinfo, 4, &token);
	TimestampTz lease_until = idem_arg_interval_from(fcinfo, 5, "lease", idem_lease_secs,
													 GetCurrentTimestamp());

	finish_attempt(FINISH_CHECKPOINT, key, scope, has_token, token,
				   data, !has_data, phase, lease_until, "idem_checkpoint");
	PG_RETURN_VOID();
}

/* idem_lookup(key, scope): the key's row as this snapshot sees it, for operators */
Datum
idem_lookup(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;

	if (SRF_IS_FIRSTCALL())
	{
		text	   *key = idem_arg_key(fcinfo, 0, "key");
		text	   *scope = idem_arg_scope(fcinfo, 1, "scope");
		MemoryContext oldcontext;
		TupleDesc	tupdesc;
		IdemStore	st;

		funcctx = SRF_FIRSTCALL_INIT();
		oldcontext = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		tupdesc = BlessTupleDesc(tupdesc);

		idem_store_open(&st, IDEM_KEYS, false);
		if (idem_store_fetch_visible(&st, scope, key) &&
			!row_expired(&st, GetCurrentTimestamp()))
		{
			static const int cols[] = {KEYS_STATE, KEYS_ATTEMPT, KEYS_FINGERPRINT,
				KEYS_LEASE_UNTIL, KEYS_CHECKPOINT, KEYS_CREATED_AT,
			KEYS_COMPLETED_AT, KEYS_EXPIRES_AT};
			Datum		values[lengthof(cols)];
			bool		nulls[lengthof(cols)];
			int			i;

			for (i = 0; i < lengthof(cols); i++)
			{
				values[i] = st.values[cols[i]];
				nulls[i] = st.nulls[cols[i]];
			}
			funcctx->user_fctx = heap_form_tuple(tupdesc, values, nulls);
			funcctx->max_calls = 1;
		}
		idem_store_close(&st);
		MemoryContextSwitchTo(oldcontext);
	}

	funcctx = SRF_PERCALL_SETUP();
	if (funcctx->call_cntr < funcctx->max_calls)
		SRF_RETURN_NEXT(funcctx, HeapTupleGetDatum((HeapTuple) funcctx->user_fctx));
	SRF_RETURN_DONE(funcctx);
}
