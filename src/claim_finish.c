/*
 * claim_finish.c
 *		idem_complete, idem_fail, idem_checkpoint, idem_http_respond and
 *		idem_http_respond_retryable: the calls that finish or advance the
 *		attempt a claim took.
 *
 * Each checks that the caller owns the key's current attempt (by its token,
 * or as the transaction that claimed it) and writes the row's new state;
 * the states a key's row moves through are drawn at the top of claim.c.
 *
 * May call: what claim.c shares of a key's row (claim.h), the claim
 * memory (claim_memory.c), the store (store.h), the counters (stats.c) and
 * the argument checks (input.c).
 */
#include "postgres.h"

#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "claim.h"
#include "claim_memory.h"
#include "idem.h"
#include "input.h"
#include "stats.h"
#include "store.h"

PG_FUNCTION_INFO_V1(idem_complete);
PG_FUNCTION_INFO_V1(idem_fail);
PG_FUNCTION_INFO_V1(idem_checkpoint);
PG_FUNCTION_INFO_V1(idem_http_respond);
PG_FUNCTION_INFO_V1(idem_http_respond_retryable);
PG_FUNCTION_INFO_V1(idem_check_replay);

/* What a finishing call does to the attempt */
typedef enum FinishKind
{
	FINISH_COMPLETE,
	FINISH_FAIL_FINAL,
	FINISH_RELEASE,
	FINISH_CHECKPOINT
} FinishKind;

/* The arguments idem_complete, idem_fail and idem_checkpoint share */
typedef struct FinishArgs
{
	text	   *key;
	text	   *scope;
	bool		has_token;		/* given, or known from the claim memory */
	int64		token;
	IdemClaim  *mine;			/* this transaction's claim of the key */
	IdemClaim  *claim;			/* the same, if the call is about it */
	bool		payload_null;
	Datum		payload;		/* response, error or checkpoint data */
	int16		http_status;	/* the idem_http_respond calls'; 0 for the others */
	text	   *body;			/* ... and its body, or NULL */
} FinishArgs;

/*
 * Read and check the shared arguments: key first, then the payload (its
 * size, and a jsonb's text, which a replay prints), scope and token at the
 * positions of the function.
 */
static void
finish_args(FunctionCallInfo fcinfo, int payload_argno, const char *payload_what,
			bool payload_is_jsonb, int scope_argno, int token_argno, FinishArgs *args)
{
	args->key = idem_arg_key(fcinfo, 0, "key");
	args->scope = idem_arg_scope(fcinfo, scope_argno, "scope");
	args->payload_null = PG_ARGISNULL(payload_argno);
	args->payload = args->payload_null ? (Datum) 0 : PG_GETARG_DATUM(payload_argno);
	if (!args->payload_null)
	{
		idem_check_value_size(args->payload, payload_what);
		if (payload_is_jsonb)
			idem_check_json_prints(args->payload, payload_what);
	}
	args->has_token = !PG_ARGISNULL(token_argno);
	args->token = args->has_token ? PG_GETARG_INT64(token_argno) : 0;
	args->http_status = 0;
	args->body = NULL;
}

/*
 * Look the key up in this transaction's claim memory, once: without a token,
 * the claim this transaction made supplies it.  args->claim is set only when
 * the call is about that claim (no token, or its token).
 */
static void
finish_recall_claim(FinishArgs *args)
{
	IdemClaim  *claim = idem_claim_memory_find(args->scope, args->key);

	args->mine = claim;
	args->claim = NULL;
	if (claim != NULL && (!args->has_token || args->token == claim->token))
	{
		args->claim = claim;
		args->token = claim->token;
		args->has_token = true;
	}
}

/*
 * Read the row of a claim this transaction made, by the address the claim
 * memory keeps, if the call is about that claim and the row is still the one
 * the claim wrote.  That is the in-transaction way of using a key, and it
 * then needs neither an index probe nor the key lock.
 */
static bool
finish_own_claim(IdemStore *st, FinishArgs *args)
{
	if (args->claim == NULL ||
		!idem_store_fetch_own(st, &args->claim->tid, args->claim->filenode))
		return false;
	if (DatumGetInt64(st->values[KEYS_TOKEN]) == args->token &&
		idem_column_equals(st, KEYS_KEY, args->key) &&
		idem_column_equals(st, KEYS_SCOPE, args->scope))
		return true;
	ExecClearTuple(st->slot);
	st->found = false;
	return false;
}

/*
 * Check that the caller owns the current attempt of the found row: with its
 * token, or without one in the transaction that made the claim.
 */
static void
finish_check_owner(IdemStore *st, IdemFetch fetched, TimestampTz now,
				   FinishArgs *args, const char *fname)
{
	text	   *key = args->key;
	text	   *scope = args->scope;
	int64		token = args->token;
	int64		current;

	if (fetched != IDEM_FETCH_FOUND || idem_row_expired(st, now))
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_NO_CLAIM),
				 errmsg("%s: key \"%s\" has no claim", fname, text_to_cstring(key)),
				 errdetail("No live row exists for this key in scope \"%s\".", text_to_cstring(scope)),
				 errhint("Call idem_claim first.")));
	if (idem_store_state_is(st, "completed") || idem_store_state_is(st, "failed"))
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_ALREADY_FINISHED),
				 errmsg("%s: key \"%s\" is already finished", fname, text_to_cstring(key)),
				 errdetail("Its state is %s.", TextDatumGetCString(st->values[KEYS_STATE]))));
	if (!args->has_token)
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_TOKEN_REQUIRED),
				 errmsg("%s: key \"%s\" was not claimed in this transaction", fname, text_to_cstring(key)),
				 errhint("Pass the token that idem_claim returned.")));
	current = DatumGetInt64(st->values[KEYS_TOKEN]);
	if (idem_store_state_is(st, "released") || token != current)
	{
		/* counters are not transactional: this one outlives the error */
		idem_stats_count(IDEM_STAT_STALE_TOKENS, 1);
		ereport(ERROR,
				(errcode(ERRCODE_IDEM_STALE_TOKEN),
				 errmsg("%s: token %lld does not hold key \"%s\"", fname,
						(long long) token, text_to_cstring(key)),
				 errdetail("The attempt of this token was released or taken over; the key is at attempt %d.",
						   DatumGetInt32(st->values[KEYS_ATTEMPT]))));
	}
}

/*
 * Shared body of idem_complete, idem_fail and idem_checkpoint: lock the key,
 * check the caller owns the attempt, and write the row's new state.
 */
static void
finish_attempt(FinishKind kind, FinishArgs *args, text *phase,
			   const Interval *lease, const char *fname)
{
	text	   *key = args->key;
	text	   *scope = args->scope;
	Datum		payload = args->payload;
	bool		payload_null = args->payload_null;
	bool		locked = false;
	bool		pending;
	TimestampTz now;
	TimestampTz lease_until;
	Datum		values[KEYS_NATTS];
	bool		nulls[KEYS_NATTS];
	Datum		pending_values[KEYS_NATTS];
	bool		pending_nulls[KEYS_NATTS];
	IdemStore	st;
	IdemFetch	fetched;

	idem_check_writable(fname);
	finish_recall_claim(args);
	idem_store_open(&st, IDEM_KEYS, true);
	pending = (args->mine != NULL && args->mine->pending);
	if (pending)
	{
		/*
		 * The row is this transaction's to write, under the key lock it
		 * holds: written now, finished, if the call is about that claim.
		 */
		idem_claim_pending_as_found(&st, args->mine, pending_values, pending_nulls);
		fetched = IDEM_FETCH_FOUND;
	}
	else if (finish_own_claim(&st, args))
	{
		/* this transaction's claim, where it left it: no lock to take */
		fetched = IDEM_FETCH_FOUND;
	}
	else
	{
		/* the same order as idem_claim: table first, then the key lock */
		idem_store_lock(IDEM_KEYS, scope, key, false);
		fetched = idem_store_fetch(&st, scope, key, false, true);
		locked = true;
	}
	/* after the fetch: it may have waited for another transaction */
	now = GetCurrentTimestamp();
	finish_check_owner(&st, fetched, now, args, fname);

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
			/* a checkpoint extends the lease, never shortens it */
			lease_until = idem_after(now, lease, "lease");
			if (!nulls[KEYS_LEASE_UNTIL])
				lease_until = Max(lease_until, DatumGetTimestampTz(st.values[KEYS_LEASE_UNTIL]));
			values[KEYS_LEASE_UNTIL] = TimestampTzGetDatum(lease_until);
			nulls[KEYS_LEASE_UNTIL] = false;
			if (lease_until > DatumGetTimestampTz(st.values[KEYS_EXPIRES_AT]))
				values[KEYS_EXPIRES_AT] = TimestampTzGetDatum(lease_until);
			break;
	}
	/* an HTTP answer: replayed if final, kept for operators if released */
	if (args->http_status != 0)
	{
		if (!idem_store_has_column(&st, KEYS_BODY))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s needs idem 1.4", fname),
					 errhint("Run ALTER EXTENSION idem UPDATE.")));
		values[KEYS_HTTP_STATUS] = Int16GetDatum(args->http_status);
		nulls[KEYS_HTTP_STATUS] = false;
		values[KEYS_BODY] = PointerGetDatum(args->body);
		nulls[KEYS_BODY] = (args->body == NULL);
	}
	if (pending)
		idem_store_insert(&st, values, nulls);
	else
		idem_store_update(&st, values, nulls);
	if (args->claim != NULL)
		idem_claim_memory_written(args->claim, &st);
	idem_store_close(&st);
	if (locked)
		idem_store_unlock(IDEM_KEYS, scope, key);
}

/* idem_complete(key, response, scope, token): finish the attempt */
Datum
idem_complete(PG_FUNCTION_ARGS)
{
	FinishArgs	args;

	finish_args(fcinfo, 1, "response", true, 2, 3, &args);
	finish_attempt(FINISH_COMPLETE, &args, NULL, NULL, "idem_complete");
	idem_stats_count(IDEM_STAT_COMPLETED, 1);
	PG_RETURN_VOID();
}

/* idem_fail(key, error, retryable, scope, token): release or finish as failed */
Datum
idem_fail(PG_FUNCTION_ARGS)
{
	FinishArgs	args;

	finish_args(fcinfo, 1, "error", true, 3, 4, &args);
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("retryable must not be null")));
	finish_attempt(PG_GETARG_BOOL(2) ? FINISH_RELEASE : FINISH_FAIL_FINAL, &args,
				   NULL, NULL, "idem_fail");
	idem_stats_count(IDEM_STAT_FAILED, 1);
	PG_RETURN_VOID();
}

/* The context of an error in a body that jsonb refuses: why it is checked */
static void
respond_body_context(void *arg)
{
	errcontext("%s", (const char *) arg);
}

/*
 * Refuse a body that idem_claim could not replay: it reads the body with
 * jsonb_in, which refuses what json accepts and jsonb cannot hold (\u0000,
 * a \u escape the database encoding has not, a number beyond numeric).
 * jsonb_in's own error is raised, with its SQLSTATE.  One parse, as 1.6's
 * check with json_in was; the jsonb made is checked as a response is.
 */
static void
respond_check_body(text *body, const char *why)
{
	ErrorContextCallback context;
	Datum		jsonb;

	context.callback = respond_body_context;
	context.arg = unconstify(char *, why);
	context.previous = error_context_stack;
	error_context_stack = &context;
	jsonb = DirectFunctionCall1(jsonb_in, CStringGetDatum(text_to_cstring(body)));
	error_context_stack = context.previous;
	idem_check_json_prints(jsonb, "body");
	pfree(DatumGetPointer(jsonb));
}

/*
 * Read the arguments of the idem_http_respond calls (key, http_status, body,
 * scope, token), the status between lowest and 599 (why: why not lower),
 * and return the status.  body_why: the context of an error in the body.
 */
static int16
respond_args(FunctionCallInfo fcinfo, int32 lowest, const char *why,
			 const char *body_why, FinishArgs *args)
{
	int32		http_status;

	finish_args(fcinfo, 2, "body", false, 3, 4, args);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("http_status must not be null")));
	http_status = PG_GETARG_INT32(1);
	if (http_status < lowest || http_status > 599)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("http_status must be between %d and 599", lowest),
				 errdetail("It is %d; %s.", http_status, why)));
	if (!args->payload_null)
	{
		args->body = PG_GETARG_TEXT_P(2);
		respond_check_body(args->body, body_why);
		args->payload_null = true;
	}
	args->http_status = (int16) http_status;
	return args->http_status;
}

/*
 * idem_http_respond(key, http_status, body, scope, token): finish the
 * attempt with the HTTP response exactly as the application sends it, to
 * be replayed byte for byte: completed below 400, failed (final) from 400
 */
Datum
idem_http_respond(PG_FUNCTION_ARGS)
{
	FinishArgs	args;
	int16		http_status;

	http_status = respond_args(fcinfo, 200, "an interim (1xx) answer is not a response to replay",
							   "idem_http_respond checks the body as jsonb, which is how idem_claim replays it",
							   &args);
	finish_attempt(http_status < 400 ? FINISH_COMPLETE : FINISH_FAIL_FINAL, &args,
				   NULL, NULL, "idem_http_respond");
	idem_stats_count(http_status < 400 ? IDEM_STAT_COMPLETED : IDEM_STAT_FAILED, 1);
	PG_RETURN_VOID();
}

/*
 * idem_http_respond_retryable(key, http_status, body, scope, token): end the
 * attempt with a transient failure the application answers now (400 to
 * 599: a gateway down, say), released as idem_fail(retryable => true)
 * releases it, so that the next request with the key runs again.  The
 * status and body are kept for operators until then, never replayed.
 */
Datum
idem_http_respond_retryable(PG_FUNCTION_ARGS)
{
	FinishArgs	args;

	respond_args(fcinfo, 400, "only a failure can be retried",
				 "idem_http_respond_retryable checks the body as idem_http_respond does",
				 &args);
	finish_attempt(FINISH_RELEASE, &args, NULL, NULL, "idem_http_respond_retryable");
	idem_stats_count(IDEM_STAT_FAILED, 1);
	PG_RETURN_VOID();
}

/* idem_checkpoint(key, phase, data, scope, token, lease): record progress */
Datum
idem_checkpoint(PG_FUNCTION_ARGS)
{
	FinishArgs	args;
	text	   *phase;
	Interval   *lease;

	finish_args(fcinfo, 2, "data", true, 3, 4, &args);
	phase = idem_arg_key(fcinfo, 1, "phase");
	lease = idem_arg_interval(fcinfo, 5, "lease", idem_lease_secs);
	finish_attempt(FINISH_CHECKPOINT, &args, phase, lease, "idem_checkpoint");
	PG_RETURN_VOID();
}

/*
 * idem.check_replay(value, what): refuse a jsonb value whose text a replay
 * could not hold, as the calls above refuse it; idem_keys_import checks
 * what it writes with it
 */
Datum
idem_check_replay(PG_FUNCTION_ARGS)
{
	idem_check_json_prints(PG_GETARG_DATUM(0), text_to_cstring(PG_GETARG_TEXT_PP(1)));
	PG_RETURN_VOID();
}
