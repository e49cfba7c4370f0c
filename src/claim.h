/*
 * claim.h
 *		A claim of a key, as idem_claim and idem_http_claim make it (claim.c),
 *		and what claim.c and claim_finish.c share about a key's row.
 */
#ifndef IDEM_CLAIM_H
#define IDEM_CLAIM_H

#include "idem.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "utils/timestamp.h"

#include "stats.h"
#include "store.h"

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

/* What a claim answers: idem_claim's columns, and a replay's stored response */
typedef struct IdemClaimAnswer
{
	Datum		values[CLAIM_NATTS];
	bool		nulls[CLAIM_NATTS];
	int			http_status;	/* a replay's, as idem_http_respond stored it; 0: none */
	text	   *body;			/* the same: its body as sent; NULL: none */
	IdemCounter counted;		/* the counter the answer adds to */
} IdemClaimAnswer;

/* Settings (claim.c) */
extern int	idem_ttl_secs;
extern int	idem_lease_secs;

extern void idem_claim_init(void);
extern bytea *idem_claim_arg_fingerprint(FunctionCallInfo fcinfo, int argno);
extern void idem_claim_key(text *key, bytea *fp, text *scope, const Interval *lease,
						   const Interval *ttl, bool nowait, IdemClaimAnswer *answer);

/* an IdemClaim (claim_memory.h): a claim this transaction made */
struct IdemClaim;

extern void idem_claim_pending_as_found(IdemStore *st, struct IdemClaim *claim,
										Datum *values, bool *nulls);

/*
 * Has the found row expired, so that it counts as absent?  Never a row this
 * transaction wrote: its claim is as live as the transaction, whatever its
 * ttl, and claiming the key again in it must not start a second attempt.
 */
static inline bool
idem_row_expired(IdemStore *st, TimestampTz now)
{
	return !st->own && DatumGetTimestampTz(st->values[KEYS_EXPIRES_AT]) <= now;
}

/* Do the column's value (text or bytea) and v hold the same bytes? */
static inline bool
idem_column_equals(IdemStore *st, int column, struct varlena *v)
{
	struct varlena *stored = PG_DETOAST_DATUM_PACKED(st->values[column]);

	return VARSIZE_ANY_EXHDR(stored) == VARSIZE_ANY_EXHDR(v) &&
		memcmp(VARDATA_ANY(stored), VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v)) == 0;
}

#endif							/* IDEM_CLAIM_H */
