/*
 * claim_memory.h
 *		What this transaction remembers of a claim it made (claim_memory.c).
 *
 * A claim of a key that had no row is "pending": its row is written only
 * when the claim is finished, or before the transaction commits, and until
 * then the claim holds the key lock (the protocol is stated in
 * claim_memory.c).
 */
#ifndef IDEM_CLAIM_MEMORY_H
#define IDEM_CLAIM_MEMORY_H

#include "idem.h"

#include "datatype/timestamp.h"
#include "storage/itemptr.h"

typedef struct IdemClaim
{
	text	   *scope;			/* copies, for writing a pending row */
	text	   *key;
	int64		token;
	ItemPointerData tid;		/* where the claim's row is, once written */
	Oid			filenode;		/* in which file of idem.keys tid is */
	bool		pending;		/* its row is not written yet */
	bool		must_finish;	/* made outside a transaction block for a
								 * request finished in it: see
								 * claim_memory_check_finished */
	SubTransactionId written_by;	/* the subtransaction that wrote it, if pending before */
	/* what a pending claim's row will hold */
	bytea	   *fingerprint;	/* NULL: none given */
	TimestampTz created_at;
	TimestampTz lease_until;
	TimestampTz expires_at;
} IdemClaim;

/* an IdemStore (store.h): what claims are written through */
struct IdemStore;

extern void idem_claim_memory_init(void);
extern IdemClaim *idem_claim_memory_add(text *scope, text *key, bool pending);
extern IdemClaim *idem_claim_memory_find(text *scope, text *key);
extern void idem_claim_memory_must_finish(text *scope, text *key);
extern void idem_claim_memory_written(IdemClaim *claim, struct IdemStore *st);
extern int	idem_claim_memory_pending_made(void);
extern void idem_claim_memory_row(IdemClaim *claim, Datum *values, bool *nulls);
extern void idem_claim_memory_write(IdemClaim *claim);

#endif							/* IDEM_CLAIM_MEMORY_H */
