/*
 * claim.c
 *		idem_claim and idem_lookup; the calls that finish an attempt
 *		(idem_complete, idem_fail, idem_checkpoint, idem_http_respond) are in
 *		claim_finish.c.
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
 *
 * A claim of a key that has no row is pending: it holds the key lock and
 * writes its row later.  Which lock, under which resource owner, and what a
 * rollback undoes is the protocol stated at the top of claim_memory.c.
 *
 * May call: the claim memory (claim_memory.c), the store (store.h:
 * rows and key locks), the counters (stats.c) and the argument checks
 * (input.c).  It defines idem.ttl and idem.lease (idem_claim_init).
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "claim.h"
#include "claim_memory.h"
#include "idem.h"
#include "input.h"
#include "stats.h"
#include "store.h"

PG_FUNCTION_INFO_V1(idem_claim);
PG_FUNCTION_INFO_V1(idem_lookup);

int			idem_ttl_secs = 24 * 60 * 60;
int			idem_lease_secs = 60;

/* Define idem.ttl and idem.lease, which a claim takes when given none (_PG_init) */
void
idem_claim_init(void)
{
	DefineCustomIntVariable("idem.ttl",
							"How long an idempotency key is kept.",
							"A key past its expiry counts as absent and is purged.",
							&idem_ttl_secs, 24 * 60 * 60, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("idem.lease",
							"How long a committed processing claim is honoured.",
							"After it, the next claim takes the key over.",
							&idem_lease_secs, 60, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
}

/* Largest fingerprint accepted: room for any hash, not for a payload */
#define IDEM_MAX_FINGERPRINT_BYTES	255

/*
 * Claims of new keys one transaction keeps pending, each holding its key
 * lock to the end of the transaction; claims beyond are written at once.
 * At most a quarter of max_locks_per_transaction, which sizes the shared
 * lock table.
 */
#define IDEM_MAX_PENDING_CLAIMS		Min(16, max_locks_per_xact / 4)

/* When nothing better is known, the wait an in_progress answer suggests */
#define IDEM_DEFAULT_RETRY_AFTER_SECS	1

/* Are both fingerprints given, and different? */
static bool
fingerprint_differs(IdemStore *st, bytea *fp)
{
	return fp != NULL && !st->nulls[KEYS_FINGERPRINT] &&
		!idem_column_equals(st, KEYS_FINGERPRINT, fp);
}

/* An interval of the microseconds from now to until (at least zero) */
static Datum
interval_until(TimestampTz now, TimestampTz until)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = until > now ? until - now : 0;
	return IntervalPGetDatum(iv);
}

/* The checked fingerprint argument, or NULL when none is given */
bytea *
idem_claim_arg_fingerprint(FunctionCallInfo fcinfo, int argno)
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

/*
 * Let st hold a pending claim's row, built in values and nulls, as if it
 * had been read: the calls that need the row use it without writing it.
 */
void
idem_claim_pending_as_found(IdemStore *st, IdemClaim *claim, Datum *values, bool *nulls)
{
	idem_claim_memory_row(claim, values, nulls);
	st->values = values;
	st->nulls = nulls;
	st->found = st->own = true;
}

/*
 * Claim a key that has no live row, under the key lock.  If it has no row
 * at all, the claim is pending: its row is written once, when the claim is
 * finished (or when the transaction commits), and until then the key lock,
 * kept to the end of the transaction, does what the row's uncommitted xmin
 * does for a row written at once: another claimer waits for this
 * transaction.  A claim and its completion in one transaction so write one
 * row instead of writing it and then updating it.  Past a few pending
 * claims the rows are written at once, so that a transaction claiming many
 * keys does not fill the shared lock table.  Returns whether the key lock
 * must be kept.
 */
static bool
claim_fresh(IdemStore *st, IdemFetch fetched, text *scope, text *key,
			bytea *fp, int64 token, TimestampTz now, TimestampTz lease_until,
			TimestampTz expires_at, Datum *values, bool *nulls)
{
	bool		pending = (fetched == IDEM_FETCH_NONE &&
						   idem_claim_memory_pending_made() < IDEM_MAX_PENDING_CLAIMS);
	IdemClaim  *claim = idem_claim_memory_add(scope, key, pending);
	MemoryContext oldcontext = MemoryContextSwitchTo(TopTransactionContext);

	claim->token = token;
	claim->fingerprint = fp != NULL ? (bytea *) PG_DETOAST_DATUM_COPY(PointerGetDatum(fp)) : NULL;
	claim->created_at = now;
	claim->lease_until = lease_until;
	claim->expires_at = Max(expires_at, lease_until);
	MemoryContextSwitchTo(oldcontext);

	idem_claim_memory_row(claim, values, nulls);
	if (pending)
		return true;
	/* a row that expired is replaced in place */
	if (fetched == IDEM_FETCH_FOUND)
		idem_store_update(st, values, nulls);
	else
		idem_store_insert(st, values, nulls);
	idem_claim_memory_written(claim, st);
	return false;
}

/*
 * Write the next attempt into the live row of (scope, key), whose lease ran
 * out or whose last attempt was released: it keeps its fingerprint,
 * creation time and last checkpoint.
 */
static void
claim_next_attempt(IdemStore *st, text *scope, text *key, bytea *fp,
				   int64 token, TimestampTz lease_until, Datum *values, bool *nulls)
{
	TimestampTz old_expiry = DatumGetTimestampTz(st->values[KEYS_EXPIRES_AT]);
	IdemClaim  *claim;

	memcpy(values, st->values, sizeof(Datum) * KEYS_NATTS);
	memcpy(nulls, st->nulls, sizeof(bool) * KEYS_NATTS);
	values[KEYS_STATE] = CStringGetTextDatum("processing");
	values[KEYS_TOKEN] = Int64GetDatum(token);
	values[KEYS_ATTEMPT] = Int32GetDatum(DatumGetInt32(st->values[KEYS_ATTEMPT]) + 1);
	values[KEYS_LEASE_UNTIL] = TimestampTzGetDatum(lease_until);
	values[KEYS_EXPIRES_AT] = TimestampTzGetDatum(Max(old_expiry, lease_until));
	nulls[KEYS_STATE] = nulls[KEYS_TOKEN] = nulls[KEYS_LEASE_UNTIL] = false;
	if (nulls[KEYS_FINGERPRINT] && fp != NULL)
	{
		values[KEYS_FINGERPRINT] = PointerGetDatum(fp);
		nulls[KEYS_FINGERPRINT] = false;
	}
	nulls[KEYS_RESPONSE] = nulls[KEYS_COMPLETED_AT] = true;
	nulls[KEYS_HTTP_STATUS] = nulls[KEYS_BODY] = true;

	/* the result row reads the checkpoint after the update frees the buffer */
	if (!nulls[KEYS_CHECKPOINT])
		values[KEYS_CHECKPOINT] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[KEYS_CHECKPOINT]));
	if (!nulls[KEYS_CHECKPOINT_DATA])
		values[KEYS_CHECKPOINT_DATA] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[KEYS_CHECKPOINT_DATA]));
	idem_store_update(st, values, nulls);

	claim = idem_claim_memory_add(scope, key, false);
	claim->token = token;
	idem_claim_memory_written(claim, st);
}

/* Fill idem_claim's result for a claim, from the row it wrote or will write */
static void
claim_taken(Datum *values, bool *nulls, Datum *out, bool *outnulls)
{
	out[CLAIM_STATUS] = CStringGetTextDatum("claimed");
	out[CLAIM_TOKEN] = values[KEYS_TOKEN];
	out[CLAIM_ATTEMPT] = values[KEYS_ATTEMPT];
	outnulls[CLAIM_STATUS] = outnulls[CLAIM_TOKEN] = outnulls[CLAIM_ATTEMPT] = false;
	out[CLAIM_CHECKPOINT] = values[KEYS_CHECKPOINT];
	outnulls[CLAIM_CHECKPOINT] = nulls[KEYS_CHECKPOINT];
	out[CLAIM_CHECKPOINT_DATA] = values[KEYS_CHECKPOINT_DATA];
	outnulls[CLAIM_CHECKPOINT_DATA] = nulls[KEYS_CHECKPOINT_DATA];
}

/* What a claim answers, given the row it read */
typedef enum ClaimDecision
{
	DECIDE_MISMATCH,			/* a live row for another request */
	DECIDE_REPLAY,				/* completed or failed: replay it */
	DECIDE_IN_PROGRESS,			/* a live attempt holds the key */
	DECIDE_TAKE					/* no live attempt: claim it */
} ClaimDecision;

/*
 * Decide from the row read.  Every answer but DECIDE_TAKE is final until the
 * row expires or the lease runs out, so it may be given from a read made
 * without the key lock; DECIDE_TAKE is acted on only under the lock.
 */
static ClaimDecision
claim_decide(IdemStore *st, IdemFetch fetched, bytea *fp, TimestampTz now)
{
	if (fetched == IDEM_FETCH_BUSY)
		return DECIDE_IN_PROGRESS;
	if (fetched == IDEM_FETCH_NONE || idem_row_expired(st, now))
		return DECIDE_TAKE;
	if (fingerprint_differs(st, fp))
		return DECIDE_MISMATCH;
	if (idem_store_state_is(st, "completed") || idem_store_state_is(st, "failed"))
		return DECIDE_REPLAY;
	/* a live attempt; also one of this very transaction, which must not run twice */
	if (idem_store_state_is(st, "processing") &&
		(st->own || DatumGetTimestampTz(st->values[KEYS_LEASE_UNTIL]) > now))
		return DECIDE_IN_PROGRESS;
	return DECIDE_TAKE;
}

/* Fill the answer of a claim that writes nothing */
static IdemCounter
claim_answer(ClaimDecision decision, IdemStore *st, TimestampTz now,
			 IdemClaimAnswer *answer)
{
	Datum	   *out = answer->values;
	bool	   *outnulls = answer->nulls;
	TimestampTz retry_at = now + IDEM_DEFAULT_RETRY_AFTER_SECS * USECS_PER_SEC;

	switch (decision)
	{
		case DECIDE_MISMATCH:
			out[CLAIM_STATUS] = CStringGetTextDatum("mismatch");
			outnulls[CLAIM_STATUS] = false;
			return IDEM_STAT_MISMATCHED;
		case DECIDE_REPLAY:
			out[CLAIM_STATUS] = datumCopy(st->values[KEYS_STATE], false, -1);
			out[CLAIM_ATTEMPT] = st->values[KEYS_ATTEMPT];
			outnulls[CLAIM_STATUS] = outnulls[CLAIM_ATTEMPT] = false;
			if (!st->nulls[KEYS_RESPONSE])
			{
				out[CLAIM_RESPONSE] = PointerGetDatum(PG_DETOAST_DATUM_COPY(st->values[KEYS_RESPONSE]));
				outnulls[CLAIM_RESPONSE] = false;
			}
			if (!st->nulls[KEYS_HTTP_STATUS])
				answer->http_status = DatumGetInt16(st->values[KEYS_HTTP_STATUS]);
			if (!st->nulls[KEYS_BODY])
				answer->body = DatumGetTextPCopy(st->values[KEYS_BODY]);
			return IDEM_STAT_REPLAYED;
		case DECIDE_IN_PROGRESS:
			/* an uncommitted claim (nowait) has no lease to tell yet */
			if (st->found)
			{
				out[CLAIM_ATTEMPT] = st->values[KEYS_ATTEMPT];
				outnulls[CLAIM_ATTEMPT] = false;
				retry_at = DatumGetTimestampTz(st->values[KEYS_LEASE_UNTIL]);
			}
			out[CLAIM_STATUS] = CStringGetTextDatum("in_progress");
			out[CLAIM_RETRY_AFTER] = interval_until(now, retry_at);
			outnulls[CLAIM_STATUS] = outnulls[CLAIM_RETRY_AFTER] = false;
			return IDEM_STAT_IN_PROGRESS;
		case DECIDE_TAKE:
			break;
	}
	elog(ERROR, "claim decision %d writes", (int) decision);
	return IDEM_STAT_CLAIMED;	/* keep compiler quiet */
}

/*
 * Take the key for a new attempt, or say why not (completed, failed,
 * in_progress, mismatch); with nowait, never wait for another transaction.
 * The caller counts the answer.
 *
 * The key lock is tried first, without waiting: a claim of a new key then
 * reads the key once, under the lock.  If another transaction holds the
 * lock, the key is read without it: replays, mismatches and live attempts,
 * which no writer can take back, are answered from that read, so a storm of
 * retries of a finished payment is answered in parallel; only a claim that
 * will write waits for the lock and reads again under it.
 */
void
idem_claim_key(text *key, bytea *fp, text *scope, const Interval *lease,
			   const Interval *ttl, bool nowait, IdemClaimAnswer *answer)
{
	TimestampTz now;
	IdemStore	st;
	IdemFetch	fetched;
	ClaimDecision decision;
	IdemClaim  *mine;
	bool		locked;
	bool		keep_lock = false;

	idem_check_writable("idem_claim()");
	memset(answer, 0, sizeof(*answer));
	memset(answer->nulls, true, sizeof(answer->nulls));

	/* a claim this transaction made and has not written: the read needs it */
	mine = idem_claim_memory_find(scope, key);
	if (mine != NULL && mine->pending)
		idem_claim_memory_write(mine);

	idem_store_open(&st, IDEM_KEYS, true);
	locked = idem_store_lock(IDEM_KEYS, scope, key, true);
	fetched = idem_store_fetch(&st, scope, key, nowait, locked);
	/* after the fetch: it may have waited for another transaction */
	now = GetCurrentTimestamp();
	decision = claim_decide(&st, fetched, fp, now);

	if (decision == DECIDE_TAKE && !locked)
	{
		ExecClearTuple(st.slot);
		locked = idem_store_lock(IDEM_KEYS, scope, key, nowait);
		if (!locked)
		{
			/* another transaction is deciding this key right now */
			st.found = false;
			decision = DECIDE_IN_PROGRESS;
		}
		else
		{
			fetched = idem_store_fetch(&st, scope, key, nowait, true);
			now = Max(now, GetCurrentTimestamp());
			decision = claim_decide(&st, fetched, fp, now);
		}
	}

	if (decision == DECIDE_TAKE)
	{
		Datum		values[KEYS_NATTS];
		bool		nulls[KEYS_NATTS];
		/* from the time of the write: the claim may have waited for another */
		TimestampTz lease_until = idem_after(now, lease, "lease");
		TimestampTz expires_at = idem_after(now, ttl, "ttl");
		int64		token = idem_store_next_token();

		if (fetched == IDEM_FETCH_FOUND && !idem_row_expired(&st, now))
		{
			/* the lease ran out, or the attempt was released */
			claim_next_attempt(&st, scope, key, fp, token, lease_until, values, nulls);
			idem_stats_count(IDEM_STAT_TAKEN_OVER, 1);
		}
		else
			keep_lock = claim_fresh(&st, fetched, scope, key, fp, token, now,
									lease_until, expires_at, values, nulls);
		claim_taken(values, nulls, answer->values, answer->nulls);
		answer->counted = IDEM_STAT_CLAIMED;
	}
	else
		answer->counted = claim_answer(decision, &st, now, answer);

	idem_store_close(&st);
	if (locked && !keep_lock)
		idem_store_unlock(IDEM_KEYS, scope, key);
}

/*
 * A replayed body as jsonb.  idem_http_respond stores only bodies jsonb
 * reads; before 1.7 it checked them with json, which accepts what jsonb
 * refuses (\u0000, a number beyond numeric), and idem_keys_import did not
 * check them.  Such a body replays as a JSON string of its text, so that
 * the key keeps answering as it was finished.
 *
 * jsonb_in has no soft errors on every version idem builds against, so its
 * error is caught in a subtransaction, which releases whatever the error
 * left.  Nothing of idem's is open here: the claim has closed the table
 * and released the key lock.  Only the errors of bad input fall back;
 * others (a cancel, memory) are raised.
 */
static Datum
claim_body_as_jsonb(text *body)
{
	MemoryContext caller_context = CurrentMemoryContext;
	ResourceOwner caller_owner = CurrentResourceOwner;
	char	   *cstr = text_to_cstring(body);
	volatile Datum result = (Datum) 0;
	volatile bool parsed = true;
	JsonbValue	string;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(caller_context);
	PG_TRY();
	{
		result = DirectFunctionCall1(jsonb_in, CStringGetDatum(cstr));
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller_context);
		CurrentResourceOwner = caller_owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(caller_context);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller_context);
		CurrentResourceOwner = caller_owner;
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_PROGRAM_LIMIT_EXCEEDED)
			ReThrowError(edata);
		FreeErrorData(edata);
		parsed = false;
	}
	PG_END_TRY();
	if (parsed)
		return result;

	string.type = jbvString;
	string.val.string.val = VARDATA_ANY(body);
	string.val.string.len = VARSIZE_ANY_EXHDR(body);
	return JsonbPGetDatum(JsonbValueToJsonb(&string));
}

/*
 * idem_claim(key, fingerprint, scope, lease, ttl, nowait): take the key for
 * a new attempt, or say why not.  A key finished by idem_http_respond
 * replays its body as jsonb.
 */
Datum
idem_claim(PG_FUNCTION_ARGS)
{
	text	   *key = idem_arg_key(fcinfo, 0, "key");
	bytea	   *fp = idem_claim_arg_fingerprint(fcinfo, 1);
	text	   *scope = idem_arg_scope(fcinfo, 2, "scope");
	Interval   *lease = idem_arg_interval(fcinfo, 3, "lease", idem_lease_secs);
	Interval   *ttl = idem_arg_interval(fcinfo, 4, "ttl", idem_ttl_secs);
	bool		nowait = PG_ARGISNULL(5) ? false : PG_GETARG_BOOL(5);
	IdemClaimAnswer answer;

	idem_claim_key(key, fp, scope, lease, ttl, nowait, &answer);
	if (answer.body != NULL && answer.nulls[CLAIM_RESPONSE])
	{
		answer.values[CLAIM_RESPONSE] = claim_body_as_jsonb(answer.body);
		answer.nulls[CLAIM_RESPONSE] = false;
	}
	idem_stats_count(answer.counted, 1);
	PG_RETURN_DATUM(idem_result_row(fcinfo, answer.values, answer.nulls));
}

/*
 * idem_lookup(key, scope): the key's row as this snapshot sees it, for
 * operators; a claim this transaction made and has not written yet is shown
 * as its row will be.
 */
Datum
idem_lookup(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;

	/*
	 * The claims this transaction has not written yet are in the leader's
	 * memory only; 1.2 marks the function PARALLEL RESTRICTED, earlier
	 * versions let a parallel plan run it in a worker, which would miss them.
	 */
	if (IsParallelWorker())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem_lookup() cannot run in a parallel worker"),
				 errdetail("A claim whose row is not written yet is known only to the backend that made it."),
				 errhint("Under idem 1.0 or 1.1, run ALTER EXTENSION idem UPDATE, which marks idem_lookup() PARALLEL RESTRICTED; a function that calls it must not be PARALLEL SAFE either.")));

	if (SRF_IS_FIRSTCALL())
	{
		text	   *key = idem_arg_key(fcinfo, 0, "key");
		text	   *scope = idem_arg_scope(fcinfo, 1, "scope");
		MemoryContext oldcontext;
		TupleDesc	tupdesc;
		IdemStore	st;
		IdemClaim  *mine = idem_claim_memory_find(scope, key);
		Datum		pending_values[KEYS_NATTS];
		bool		pending_nulls[KEYS_NATTS];
		bool		found;

		funcctx = SRF_FIRSTCALL_INIT();
		oldcontext = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		tupdesc = BlessTupleDesc(idem_call_result_desc(fcinfo));

		idem_store_open(&st, IDEM_KEYS, false);
		if (mine != NULL && mine->pending)
		{
			idem_claim_pending_as_found(&st, mine, pending_values, pending_nulls);
			found = true;
		}
		else
			found = idem_store_fetch_visible(&st, scope, key);
		if (found && !idem_row_expired(&st, GetCurrentTimestamp()))
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
