/*
 * claim_memory.c
 *		What this backend remembers of the claims its current transaction made.
 *
 * idem_complete, idem_fail and idem_checkpoint without a token are allowed
 * only in the transaction that made the claim: this is how a call knows.  A
 * claim made in a subtransaction that rolls back is forgotten with it, so a
 * claim undone by ROLLBACK TO SAVEPOINT cannot be completed.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "idem.h"

/* scope, a zero byte, key: text holds no zero byte, so this is unambiguous */
#define CLAIM_NAME_BYTES	(2 * IDEM_MAX_KEY_BYTES + 2)

typedef struct ClaimEntry
{
	char		name[CLAIM_NAME_BYTES];	/* hash key */
	int64		token;
	SubTransactionId subid;		/* subtransaction that made the claim */
} ClaimEntry;

/* Claims of the current transaction; NULL when it has made none */
static HTAB *claims = NULL;

/* Fill name with the hash key of (scope, key) */
static void
claim_name(text *scope, text *key, char *name)
{
	Size		slen = VARSIZE_ANY_EXHDR(scope);
	Size		klen = VARSIZE_ANY_EXHDR(key);

	Assert(slen <= IDEM_MAX_KEY_BYTES && klen <= IDEM_MAX_KEY_BYTES);
	memset(name, 0, CLAIM_NAME_BYTES);
	memcpy(name, VARDATA_ANY(scope), slen);
	memcpy(name + slen + 1, VARDATA_ANY(key), klen);
}

/* Forget everything when the transaction ends, however it ends */
static void
claim_memory_xact_callback(XactEvent event, void *arg)
{
	/* the table lives in TopTransactionContext and goes with it */
	claims = NULL;
}

/* Forget the claims of a subtransaction that rolls back; hand up the rest */
static void
claim_memory_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							  SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS status;
	ClaimEntry *entry;

	if (claims == NULL)
		return;
	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;

	hash_seq_init(&status, claims);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			entry->subid = parentSubid;
		else
			hash_search(claims, entry->name, HASH_REMOVE, NULL);
	}
}

/* Register the transaction callbacks, once per backend */
void
idem_claim_memory_init(void)
{
	RegisterXactCallback(claim_memory_xact_callback, NULL);
	RegisterSubXactCallback(claim_memory_subxact_callback, NULL);
}

/* Remember that the current (sub)transaction claimed (scope, key) */
void
idem_claim_memory_add(text *scope, text *key, int64 token)
{
	char		name[CLAIM_NAME_BYTES];
	ClaimEntry *entry;

	if (claims == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = CLAIM_NAME_BYTES;
		ctl.entrysize = sizeof(ClaimEntry);
		ctl.hcxt = TopTransactionContext;
		claims = hash_create("idem claims of this transaction", 16, &ctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	claim_name(scope, key, name);
	entry = hash_search(claims, name, HASH_ENTER, NULL);
	entry->token = token;
	entry->subid = GetCurrentSubTransactionId();
}

/* The token of this transaction's claim of (scope, key), if it made one */
bool
idem_claim_memory_find(text *scope, text *key, int64 *token)
{
	char		name[CLAIM_NAME_BYTES];
	ClaimEntry *entry;

	if (claims == NULL)
		return false;
	claim_name(scope, key, name);
	entry = hash_search(claims, name, HASH_FIND, NULL);
	if (entry == NULL)
		return false;
	*token = entry->token;
	return true;
}
