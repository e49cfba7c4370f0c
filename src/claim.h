/*
 * claim.h
 *		A claim of a key, as idem_claim and idem_http_claim make it (claim.c).
 */
#ifndef IDEM_CLAIM_H
#define IDEM_CLAIM_H

#include "idem.h"

#include "datatype/timestamp.h"
#include "fmgr.h"

#include "stats.h"

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

extern bytea *idem_claim_arg_fingerprint(FunctionCallInfo fcinfo, int argno);
extern void idem_claim_key(text *key, bytea *fp, text *scope, const Interval *lease,
						   const Interval *ttl, bool nowait, IdemClaimAnswer *answer);

#endif							/* IDEM_CLAIM_H */
