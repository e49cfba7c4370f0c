/*
 * claim_memory.c
 *		What this backend remembers of the claims its current transaction made.
 *
 * idem_complete, idem_fail and idem_checkpoint without a token are allowed
 * only in the transaction that made the claim: this is how a call knows.  A
 * claim made in a subtransaction that rolls back is forgotten with it, and
 * if it had replaced a claim of the same key made before the savepoint, that
 * one is remembered again, as the row itself is back to it.
 *
 * A pending claim (a key that had no row, see claim.c) keeps here what its
 * row will hold until the row is written: by the call that finishes the
 * claim, by another call that needs the row, or just before the transaction
 * commits.  If the subtransaction that wrote it rolls back, it is pending
 * again.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "idem.h"

/* The name of a claim: scope, a zero byte, key (text holds no zero byte) */
typedef struct ClaimName
{
	uint32		len;
	char		data[FLEXIBLE_ARRAY_MEMBER];
} ClaimName;

/* A claim, and the ones it replaced in enclosing subtransactions */
typedef struct ClaimEntry
{
	ClaimName  *name;			/* hash key: a pointer, hashed by content */
	IdemClaim	claim;
	SubTransactionId subid;		/* subtransaction that made the claim */
	bool		made_pending;	/* took the key lock it keeps (counted) */
	struct ClaimEntry *replaced;	/* the claim before it, if any */
} ClaimEntry;

/* Claims of the current transaction; NULL when it has made none */
static HTAB *claims = NULL;

/*
 * Pending claims made by this transaction and not rolled back: each holds
 * its key lock to the end of the transaction, even once its row is written
 */
static int	pending_made = 0;

/* Hash a ClaimName pointer by the bytes it points to */
static uint32
claim_name_hash(const void *key, Size keysize)
{
	const ClaimName *name = *(ClaimName *const *) key;

	return hash_bytes((const unsigned char *) name->data, name->len);
}

/* Compare two ClaimName pointers by the bytes they point to */
static int
claim_name_match(const void *key1, const void *key2, Size keysize)
{
	const ClaimName *a = *(ClaimName *const *) key1;
	const ClaimName *b = *(ClaimName *const *) key2;

	if (a->len != b->len)
		return 1;
	return memcmp(a->data, b->data, a->len);
}

/* The name of (scope, key), allocated in the current memory context */
static ClaimName *
claim_name(text *scope, text *key)
{
	Size		slen = VARSIZE_ANY_EXHDR(scope);
	Size		klen = VARSIZE_ANY_EXHDR(key);
	ClaimName  *name = palloc(offsetof(ClaimName, data) + slen + 1 + klen);

	name->len = slen + 1 + klen;
	memcpy(name->data, VARDATA_ANY(scope), slen);
	name->data[slen] = '\0';
	memcpy(name->data + slen + 1, VARDATA_ANY(key), klen);
	return name;
}

/*
 * Before the transaction commits (or is prepared), write the rows of the
 * claims still pending: they commit as claims in progress, with their lease.
 * Whatever the end, forget everything after it.
 */
static void
claim_memory_xact_callback(XactEvent event, void *arg)
{
	HASH_SEQ_STATUS status;
	ClaimEntry *entry;

	if (event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE)
	{
		/* a transaction that dropped idem has nowhere to write them */
		if (claims == NULL || !OidIsValid(get_namespace_oid("idem", true)))
			return;
		hash_seq_init(&status, claims);
		while ((entry = hash_seq_search(&status)) != NULL)
			if (entry->claim.pending)
				idem_claim_write_pending(&entry->claim);
		return;
	}
	/* the table lives in TopTransactionContext and goes with it */
	claims = NULL;
	pending_made = 0;
}

/*
 * A subtransaction ended: rename the writes it made to its parent's if it
 * committed; if it rolled back, a pending claim whose row it wrote is
 * pending again.  Goes through the claims it replaced too.
 */
static void
claim_memory_note_writes(ClaimEntry *entry, SubTransactionId mySubid,
						 SubTransactionId parentSubid, bool commit)
{
	for (; entry != NULL; entry = entry->replaced)
	{
		if (entry->claim.written_by != mySubid)
			continue;
		if (commit)
			entry->claim.written_by = parentSubid;
		else
		{
			entry->claim.pending = true;
			entry->claim.written_by = InvalidSubTransactionId;
		}
	}
}

/*
 * When a subtransaction rolls back, forget its claims and remember again
 * those they replaced; when it commits, its claims become its parent's.
 */
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
		if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			claim_memory_note_writes(entry, mySubid, parentSubid, true);
			if (entry->subid != mySubid)
				continue;
			entry->subid = parentSubid;
			/*
			 * A claim the parent made and this one replaced is gone for good;
			 * a key lock it took is the parent's, as this one's now is.
			 */
			if (entry->replaced != NULL && entry->replaced->subid == parentSubid)
			{
				entry->made_pending |= entry->replaced->made_pending;
				entry->replaced = entry->replaced->replaced;
			}
			continue;
		}
		/* the rollback released the key locks these claims took */
		while (entry->subid == mySubid && entry->replaced != NULL)
		{
			ClaimEntry *before = entry->replaced;

			if (entry->made_pending)
				pending_made--;
			entry->claim = before->claim;
			entry->subid = before->subid;
			entry->made_pending = before->made_pending;
			entry->replaced = before->replaced;
		}
		if (entry->subid == mySubid)
		{
			if (entry->made_pending)
				pending_made--;
			hash_search(claims, &entry->name, HASH_REMOVE, NULL);
		}
		else
			claim_memory_note_writes(entry, mySubid, parentSubid, false);
	}
}

/* Register the transaction callbacks, once per backend */
void
idem_claim_memory_init(void)
{
	RegisterXactCallback(claim_memory_xact_callback, NULL);
	RegisterSubXactCallback(claim_memory_subxact_callback, NULL);
}

/* A copy of a text in the current memory context */
static text *
claim_text_copy(text *t)
{
	Size		len = VARSIZE_ANY_EXHDR(t);
	text	   *copy = palloc(VARHDRSZ + len);

	SET_VARSIZE(copy, VARHDRSZ + len);
	memcpy(VARDATA(copy), VARDATA_ANY(t), len);
	return copy;
}

/*
 * Remember that the current (sub)transaction claimed (scope, key), with its
 * row written or pending.  The caller fills in the rest of the claim
 * returned (it lasts to transaction end: what it points to must too).
 */
IdemClaim *
idem_claim_memory_add(text *scope, text *key, bool pending)
{
	MemoryContext oldcontext = MemoryContextSwitchTo(TopTransactionContext);
	ClaimName  *name = claim_name(scope, key);
	ClaimEntry *entry;
	bool		found;

	if (claims == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(ClaimName *);
		ctl.entrysize = sizeof(ClaimEntry);
		ctl.hash = claim_name_hash;
		ctl.match = claim_name_match;
		ctl.hcxt = TopTransactionContext;
		claims = hash_create("idem claims of this transaction", 16, &ctl,
							 HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	}
	entry = hash_search(claims, &name, HASH_ENTER, &found);
	if (found)
		pfree(name);			/* the entry keeps its own copy */
	if (found && entry->subid != GetCurrentSubTransactionId())
	{
		/* keep the claim this one replaces, for a rollback to the savepoint */
		ClaimEntry *before = palloc(sizeof(ClaimEntry));

		*before = *entry;
		entry->replaced = before;
		entry->made_pending = pending;
	}
	else if (!found)
	{
		entry->replaced = NULL;
		entry->made_pending = pending;
	}
	else
		entry->made_pending |= pending; /* both locks go with this subxact */
	entry->subid = GetCurrentSubTransactionId();
	memset(&entry->claim, 0, sizeof(IdemClaim));
	entry->claim.scope = claim_text_copy(scope);
	entry->claim.key = claim_text_copy(key);
	entry->claim.written_by = InvalidSubTransactionId;
	entry->claim.pending = pending;
	ItemPointerSetInvalid(&entry->claim.tid);
	if (pending)
		pending_made++;
	MemoryContextSwitchTo(oldcontext);
	return &entry->claim;
}

/* This transaction's claim of (scope, key), or NULL */
IdemClaim *
idem_claim_memory_find(text *scope, text *key)
{
	ClaimName  *name;
	ClaimEntry *entry;

	if (claims == NULL)
		return NULL;
	name = claim_name(scope, key);
	entry = hash_search(claims, &name, HASH_FIND, NULL);
	pfree(name);
	return entry != NULL ? &entry->claim : NULL;
}

/*
 * The claim's row was written at tid: the first write of a pending claim,
 * or a later one that moved it.  A move in a subtransaction that rolls back
 * leaves a stale tid, which is harmless: the row found there is checked.
 */
void
idem_claim_memory_written(IdemClaim *claim, ItemPointer tid)
{
	if (claim->pending)
	{
		claim->pending = false;
		claim->written_by = GetCurrentSubTransactionId();
	}
	claim->tid = *tid;
}

/* How many key locks this transaction's pending claims hold */
int
idem_claim_memory_pending_made(void)
{
	return pending_made;
}
