/*
 * http.c
 *		idem_http_claim: a claim answered as HTTP, in the terms of the IETF
 *		Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header).
 *
 * The mapping lives here once, so that every service, in whatever language,
 * passes the answer through instead of writing its own:
 *
 *	 claimed		no answer: do the work, then idem_http_respond
 *	 completed		the stored status and body, byte for byte
 *	 failed			the same (a final failure, such as a declined card)
 *	 in_progress	409, Retry-After
 *	 mismatch		422
 *	 bad_key		400: no Idempotency-Key, an empty one or one too long
 *
 * 409, 422 and 400 come with an RFC 9457 problem body.  A key finished by
 * idem_complete or idem_fail, which keep no HTTP status, replays as 200 or
 * 400 with the text of its jsonb response.
 *
 * A duplicate of a request still in flight (an uncommitted claim of the
 * key) waits for it at most `wait`, in the lock manager as idem_claim
 * waits, where pg_locks shows it.  The wait runs in a subtransaction with
 * a lock timeout at the deadline; when the timeout fires, the
 * subtransaction is rolled back and the answer is in_progress, so the
 * caller's transaction goes on.  The session's lock_timeout does not apply
 * to it; a statement_timeout that would end the statement first ends the
 * wait at that moment instead, with the same answer; a cancel cancels.
 * Only a claim that has to wait pays for the subtransaction: the first try
 * never waits.
 *
 * May call: the claim of claim.c (claim.h), the claim memory
 * (claim_memory.c), the counters (stats.c) and the argument checks
 * (input.c); never the store directly.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/resowner.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "claim.h"
#include "claim_memory.h"
#include "idem.h"
#include "input.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(idem_http_claim);

/* Columns of idem_http_claim's result */
enum
{
	HTTP_STATUS,
	HTTP_HTTP_STATUS,
	HTTP_BODY,
	HTTP_CONTENT_TYPE,
	HTTP_RETRY_AFTER,
	HTTP_TOKEN,
	HTTP_ATTEMPT,
	HTTP_CHECKPOINT,
	HTTP_CHECKPOINT_DATA,
	HTTP_NATTS
};

/* The problem bodies (RFC 9457) of the answers that are not replays */
#define HTTP_PROBLEM(title, status, detail) \
	"{\"type\":\"about:blank\",\"title\":\"" title "\",\"status\":" #status \
	",\"detail\":\"" detail "\"}"

static const char *const problem_bad_key =
HTTP_PROBLEM("Idempotency-Key is missing or invalid", 400,
			 "This operation is idempotent: send an Idempotency-Key header of 1 to 255 bytes.");
static const char *const problem_in_progress =
HTTP_PROBLEM("A request is outstanding for this Idempotency-Key", 409,
			 "Retry after the time in Retry-After.");
static const char *const problem_mismatch =
HTTP_PROBLEM("Idempotency-Key is already used", 422,
			 "This Idempotency-Key was used with another request; send a new key for a new request.");

/* Whole seconds to wait, rounded up and at least 1, from an interval */
static int32
http_retry_seconds(Interval *iv)
{
	int64		usecs = iv->time + (int64) iv->day * USECS_PER_DAY;

	if (usecs <= USECS_PER_SEC)
		return 1;
	return (int32) Min((usecs + USECS_PER_SEC - 1) / USECS_PER_SEC, PG_INT32_MAX);
}

/*
 * Claim the key, waiting for another transaction that holds it until
 * deadline at the latest; false if the time ran out first (nothing of the
 * try is left).  Any other error, a cancel among them, is raised as it
 * is.
 *
 * The deadline is a LOCK_TIMEOUT enabled once for the whole claim, which
 * may wait more than once (for the key lock, then for the transaction that
 * wrote the row).  Each lock wait of core (ProcSleep) enables LOCK_TIMEOUT
 * itself from lock_timeout when that is set, replacing the deadline, and
 * disables it when the wait ends; so lock_timeout is 0 during the claim,
 * set as a function's SET clause sets it, and the session's value comes
 * back however the subtransaction ends.
 *
 * The timeout may fire just as the lock is granted: its cancel is then
 * pending when the claim returns.  It is taken here, while its indicator
 * still says that it is the lock timeout and the try can be rolled back;
 * with the indicator cleared, it would cancel the caller's next statement
 * as a user's cancel, aborting the transaction.
 *
 * A statement_timeout due before the deadline moves the deadline to it:
 * both timeouts then fire together, and ProcessInterrupts reports the lock
 * timeout of two with the same finish time, so the answer is 409 and the
 * transaction goes on, where the statement timeout would abort it.
 */
static bool
http_claim_until(text *key, bytea *fp, text *scope, const Interval *lease,
				 const Interval *ttl, TimestampTz deadline, IdemClaimAnswer *answer)
{
	MemoryContext caller_context = CurrentMemoryContext;
	ResourceOwner caller_owner = CurrentResourceOwner;
	volatile bool claimed_in_time = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(caller_context);
	PG_TRY();
	{
		int			guc_level = NewGUCNestLevel();

		(void) set_config_option("lock_timeout", "0", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		enable_timeout_at(LOCK_TIMEOUT, deadline);
		idem_claim_key(key, fp, scope, lease, ttl, false, answer);
		disable_timeout(LOCK_TIMEOUT, true);
		/* a deadline that fired as the lock came raises lock_not_available */
		CHECK_FOR_INTERRUPTS();
		AtEOXact_GUC(true, guc_level);
		/* the claim, its lock and its memory become the caller's */
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller_context);
		CurrentResourceOwner = caller_owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		disable_timeout(LOCK_TIMEOUT, false);
		MemoryContextSwitchTo(caller_context);
		edata = CopyErrorData();
		FlushErrorState();
		/* restores lock_timeout too */
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller_context);
		CurrentResourceOwner = caller_owner;
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			ReThrowError(edata);
		FreeErrorData(edata);
		claimed_in_time = false;
	}
	PG_END_TRY();
	return claimed_in_time;
}

/* Set the answer's status, HTTP status, body and content type */
static void
http_set(Datum *out, bool *outnulls, const char *status, int http_status,
		 text *body, const char *content_type)
{
	out[HTTP_STATUS] = CStringGetTextDatum(status);
	out[HTTP_HTTP_STATUS] = Int32GetDatum(http_status);
	out[HTTP_BODY] = PointerGetDatum(body);
	out[HTTP_CONTENT_TYPE] = CStringGetTextDatum(content_type);
	outnulls[HTTP_STATUS] = outnulls[HTTP_HTTP_STATUS] = outnulls[HTTP_CONTENT_TYPE] = false;
	outnulls[HTTP_BODY] = (body == NULL);
}

/* Fill idem_http_claim's result from a claim's answer */
static void
http_from_claim(IdemClaimAnswer *answer, Datum *out, bool *outnulls)
{
	char	   *status = TextDatumGetCString(answer->values[CLAIM_STATUS]);
	text	   *body = answer->body;

	out[HTTP_TOKEN] = answer->values[CLAIM_TOKEN];
	outnulls[HTTP_TOKEN] = answer->nulls[CLAIM_TOKEN];
	out[HTTP_ATTEMPT] = answer->values[CLAIM_ATTEMPT];
	outnulls[HTTP_ATTEMPT] = answer->nulls[CLAIM_ATTEMPT];
	out[HTTP_CHECKPOINT] = answer->values[CLAIM_CHECKPOINT];
	outnulls[HTTP_CHECKPOINT] = answer->nulls[CLAIM_CHECKPOINT];
	out[HTTP_CHECKPOINT_DATA] = answer->values[CLAIM_CHECKPOINT_DATA];
	outnulls[HTTP_CHECKPOINT_DATA] = answer->nulls[CLAIM_CHECKPOINT_DATA];

	/* the counter a claim adds to says which answer it is */
	switch (answer->counted)
	{
		case IDEM_STAT_CLAIMED:
			out[HTTP_STATUS] = answer->values[CLAIM_STATUS];
			outnulls[HTTP_STATUS] = false;
			break;
		case IDEM_STAT_REPLAYED:
			/*
			 * completed or failed; a key finished by idem_complete or
			 * idem_fail has no body: its jsonb's text
			 */
			if (body == NULL && !answer->nulls[CLAIM_RESPONSE])
				body = cstring_to_text(JsonbToCString(NULL,
													  &DatumGetJsonbP(answer->values[CLAIM_RESPONSE])->root,
													  -1));
			http_set(out, outnulls, status,
					 answer->http_status != 0 ? answer->http_status :
					 strcmp(status, "completed") == 0 ? 200 : 400,
					 body, "application/json");
			break;
		case IDEM_STAT_IN_PROGRESS:
			http_set(out, outnulls, status, 409, cstring_to_text(problem_in_progress),
					 "application/problem+json");
			out[HTTP_RETRY_AFTER] =
				Int32GetDatum(http_retry_seconds(DatumGetIntervalP(answer->values[CLAIM_RETRY_AFTER])));
			outnulls[HTTP_RETRY_AFTER] = false;
			break;
		case IDEM_STAT_MISMATCHED:
			http_set(out, outnulls, status, 422, cstring_to_text(problem_mismatch),
					 "application/problem+json");
			break;
		default:
			elog(ERROR, "claim answered with counter %d", (int) answer->counted);
	}
}

/*
 * idem_http_claim(key, fingerprint, scope, wait, lease, ttl): claim the key
 * of an HTTP request and say what to answer if it is not this request's to
 * do; a duplicate of a request in flight waits for it at most `wait` (NULL:
 * as long as it takes)
 */
Datum
idem_http_claim(PG_FUNCTION_ARGS)
{
	Datum		out[HTTP_NATTS];
	bool		outnulls[HTTP_NATTS];
	IdemClaimAnswer answer;
	text	   *key;
	bytea	   *fp;
	text	   *scope;
	Interval   *wait;
	Interval   *lease;
	Interval   *ttl;
	TimestampTz deadline = 0;

	memset(outnulls, true, sizeof(outnulls));
	if (!idem_arg_key_valid(fcinfo, 0))
	{
		http_set(out, outnulls, "bad_key", 400, cstring_to_text(problem_bad_key),
				 "application/problem+json");
		PG_RETURN_DATUM(idem_result_row(fcinfo, out, outnulls));
	}
	key = idem_arg_key(fcinfo, 0, "key");
	fp = idem_claim_arg_fingerprint(fcinfo, 1);
	scope = idem_arg_scope(fcinfo, 2, "scope");
	wait = PG_ARGISNULL(3) ? NULL : PG_GETARG_INTERVAL_P(3);
	lease = idem_arg_interval(fcinfo, 4, "lease", idem_lease_secs);
	ttl = idem_arg_interval(fcinfo, 5, "ttl", idem_ttl_secs);
	if (wait != NULL)
	{
		if (wait->time < 0 || wait->day < 0 || wait->month < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("wait must not be negative")));
		deadline = GetCurrentTimestamp();
		if (wait->time != 0 || wait->day != 0 || wait->month != 0)
			deadline = idem_after(deadline, wait, "wait");
	}

	/*
	 * A bounded wait tries first without waiting: most claims are answered
	 * so.  Only a request in flight, which has no attempt to tell yet (a
	 * committed attempt's lease is not waited for), is waited for.
	 */
	idem_claim_key(key, fp, scope, lease, ttl, wait != NULL, &answer);
	if (wait != NULL && answer.counted == IDEM_STAT_IN_PROGRESS &&
		answer.nulls[CLAIM_ATTEMPT] && GetCurrentTimestamp() < deadline)
	{
		IdemClaimAnswer waited;

		if (get_timeout_active(STATEMENT_TIMEOUT))
			deadline = Min(deadline, get_timeout_finish_time(STATEMENT_TIMEOUT));
		if (http_claim_until(key, fp, scope, lease, ttl, deadline, &waited))
			answer = waited;
	}

	/*
	 * Without a lease, the request is to be finished in this transaction:
	 * outside a transaction block that is the statement's own, which must
	 * not commit the claim unfinished (claim_memory.c says why).
	 */
	if (answer.counted == IDEM_STAT_CLAIMED && PG_ARGISNULL(4) && !IsTransactionBlock())
		idem_claim_memory_must_finish(scope, key);
	http_from_claim(&answer, out, outnulls);
	idem_stats_count(answer.counted, 1);
	PG_RETURN_DATUM(idem_result_row(fcinfo, out, outnulls));
}
