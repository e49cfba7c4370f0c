/*
 * claim_memory.c
 *		What this backend remembers of the claims its current transaction
 *		made, and the protocol of pending claims, which this file owns.
 *
 * idem_complete, idem_fail and idem_checkpoint without a token are allowed
 * only in the transaction that made the claim: the memory is how a call
 * knows.  A claim made in a subtransaction that rolls back is forgotten with
 * it, and if it had replaced a claim of the same key made before the
 * savepoint, that one is remembered again, as the row itself is back to it.
 *
 * The pending-claim protocol
 * --------------------------
 * A claim of a key that has no row writes none (claim.c): it is "pending".
 * This memory keeps what its row will hold, and its key lock stands in for
 * the row a second claimer would otherwise wait on.  Five rules keep exactly
 * one claimer per live attempt, and a sixth keeps an HTTP request's claim
 * from committing without its work:
 *
 * 1. The lock.  Each key lock is an ExclusiveLock on an advisory tag of the
 *    key (store_lock.c), taken under CurTransactionResourceOwner: the resource
 *    owner of the subtransaction that is current when the call runs, never
 *    the owner of the portal (a cursor's FETCH), SPI call or PL/pgSQL block
 *    the call happens to run under.  A pending claim keeps its lock to the
 *    end of the transaction, also once its row is written; every other call
 *    releases the lock it took before it returns.
 *
 * 2. The owner and the memory move together.  A claim is recorded with the
 *    subtransaction that made it (ClaimEntry.subid), the one whose resource
 *    owner holds its lock:
 *    - subtransaction commit (RELEASE, an exception block left without an
 *      error): the owner hands its locks to the parent's, and
 *      claim_memory_subxact_callback makes the claims the parent's;
 *    - subtransaction abort (ROLLBACK TO, an error an exception block
 *      catches): the owner releases its locks, and the callback forgets its
 *      claims, so a claim rolled back with its savepoint is gone, lock
 *      included;
 *    - portal abort or drop (a FETCH that fails, CLOSE, the end of a
 *      statement): releases the portal's own resources only, which never
 *      hold a key lock, so a claim outlives the cursor that made it exactly
 *      as it outlives the statement;
 *    - transaction end: before commit (or PREPARE), the rows of the claims
 *      still pending are written, as processing with their lease; the
 *      top-level owner releases the locks after the commit is visible to
 *      others, so a claimer that waited on a lock reads the row.  An abort
 *      releases the locks and writes nothing; the memory goes either way.
 *
 * 3. The row.  A pending claim's row is written once: by the call that
 *    finishes the claim (in its final state), by another call that must read
 *    the key (idem_claim of the same key), or before commit.  The
 *    subtransaction current then is noted (IdemClaim.written_by); if it rolls
 *    back, the row is gone and the claim is pending again.  Its lock stays:
 *    it belongs to the claim's own subtransaction, that one or an ancestor.
 *
 * 4. The limit.  At most IDEM_MAX_PENDING_CLAIMS (claim.c) claims of a
 *    transaction are made pending (pending_made counts those not rolled
 *    back); beyond, a claim writes its row at once and releases its lock,
 *    and the row's uncommitted xmin makes a second claimer wait instead.
 *
 * 5. The table.  A claim is remembered together with the OID of the
 *    idem.keys it was made on.  If the transaction drops idem (and perhaps
 *    creates it again), those claims are neither found nor written: their
 *    rows would have gone with the table, and the new table's tokens come
 *    from a new sequence.
 *
 * 6. The finish.  A claim that idem_http_claim made outside a transaction
 *    block and without a lease belongs to a request that was to be finished
 *    in that very transaction (must_finish): if it is still in progress
 *    before commit, the commit is refused, so that no claim commits as
 *    processing without its work.
 *
 * claim_memory_check() asserts rules 1, 2 and 4 in builds with assertions.
 *
 * May call: the store only (store.h: rows, key locks, the relation cache).
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "claim_memory.h"
#include "idem.h"
#include "store.h"

/*
 * The name of a claim: the OID of the idem.keys it was made on, then scope,
 * a zero byte and key (text holds no zero byte)
 */
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

/* A claim of this transaction was marked must_finish (rule 6) */
static bool must_finish_made = false;

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

/*
 * The name of (scope, key) on the idem.keys there is now, allocated in the
 * current memory context
 */
static ClaimName *
claim_name(text *scope, text *key)
{
	Oid			table = idem_store_table_oid(IDEM_KEYS);
	Size		slen = VARSIZE_ANY_EXHDR(scope);
	Size		klen = VARSIZE_ANY_EXHDR(key);
	ClaimName  *name = palloc(offsetof(ClaimName, data) + sizeof(Oid) + slen + 1 + klen);
	char	   *p = name->data;

	name->len = sizeof(Oid) + slen + 1 + klen;
	memcpy(p, &table, sizeof(Oid));
	p += sizeof(Oid);
	memcpy(p, VARDATA_ANY(scope), slen);
	p[slen] = '\0';
	memcpy(p + slen + 1, VARDATA_ANY(key), klen);
	return name;
}

/* Was the claim of this entry made on the idem.keys there is now? */
static bool
claim_on_current_table(ClaimEntry *entry)
{
	Oid			table;

	memcpy(&table, entry->name->data, sizeof(Oid));
	return OidIsValid(table) && table == idem_store_table_oid(IDEM_KEYS);
}

#ifdef USE_ASSERT_CHECKING
/*
 * Assert the protocol: every claim that took a key lock (its replaced ones
 * included) still holds it, and pending_made counts exactly those.
 */
static void
claim_memory_check(void)
{
	HASH_SEQ_STATUS status;
	ClaimEntry *entry;
	int			locks = 0;

	if (claims == NULL)
	{
		Assert(pending_made == 0);
		return;
	}
	hash_seq_init(&status, claims);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		ClaimEntry *e;

		for (e = entry; e != NULL; e = e->replaced)
		{
			/* a claim is pending only if it took its lock */
			Assert(!e->claim.pending || e->made_pending);
			if (e->made_pending)
			{
				locks++;
				Assert(idem_store_lock_held(IDEM_KEYS, e->claim.scope, e->claim.key));
			}
		}
	}
	Assert(locks == pending_made);
}
#else
#define claim_memory_check() ((void) 0)
#endif

/*
 * The row of a claim of a key that had no live row, in values and nulls:
 * the row a pending claim will write, or the one written at once.
 */
void
idem_claim_memory_row(IdemClaim *claim, Datum *values, bool *nulls)
{
	memset(nulls, true, sizeof(bool) * KEYS_NATTS);
	values[KEYS_SCOPE] = PointerGetDatum(claim->scope);
	values[KEYS_KEY] = PointerGetDatum(claim->key);
	values[KEYS_STATE] = CStringGetTextDatum("processing");
	values[KEYS_TOKEN] = Int64GetDatum(claim->token);
	values[KEYS_ATTEMPT] = Int32GetDatum(1);
	values[KEYS_LEASE_UNTIL] = TimestampTzGetDatum(claim->lease_until);
	values[KEYS_CREATED_AT] = TimestampTzGetDatum(claim->created_at);
	values[KEYS_EXPIRES_AT] = TimestampTzGetDatum(claim->expires_at);
	nulls[KEYS_SCOPE] = nulls[KEYS_KEY] = nulls[KEYS_STATE] = false;
	nulls[KEYS_TOKEN] = nulls[KEYS_ATTEMPT] = nulls[KEYS_LEASE_UNTIL] = false;
	nulls[KEYS_CREATED_AT] = nulls[KEYS_EXPIRES_AT] = false;
	if (claim->fingerprint != NULL)
	{
		values[KEYS_FINGERPRINT] = PointerGetDatum(claim->fingerprint);
		nulls[KEYS_FINGERPRINT] = false;
	}
}

/* Write the row of a pending claim of this transaction, now (rule 3) */
void
idem_claim_memory_write(IdemClaim *claim)
{
	Datum		values[KEYS_NATTS];
	bool		nulls[KEYS_NATTS];
	IdemStore	st;

	Assert(claim->pending);
	idem_store_open(&st, IDEM_KEYS, true);
	idem_claim_memory_row(claim, values, nulls);
	idem_store_insert(&st, values, nulls);
	idem_claim_memory_written(claim, &st);
	idem_store_close(&st);
}

/* Mark this transaction's claim of (scope, key) as one to finish in it (rule 6) */
void
idem_claim_memory_must_finish(text *scope, text *key)
{
	IdemClaim  *claim = idem_claim_memory_find(scope, key);

	if (claim == NULL)
		return;
	claim->must_finish = true;
	must_finish_made = true;
}

/*
 * Is a claim that must be finished in its transaction (must_finish) still
 * in progress?  Pending, or its row, as this transaction left it, says so.
 */
static bool
claim_unfinished(IdemClaim *claim)
{
	IdemStore	st;
	bool		unfinished;

	if (claim->pending)
		return true;
	idem_store_open(&st, IDEM_KEYS, false);
	unfinished = idem_store_fetch_own(&st, &claim->tid, claim->filenode) &&
		DatumGetInt64(st.values[KEYS_TOKEN]) == claim->token &&
		idem_store_state_is(&st, "processing");
	idem_store_close(&st);
	return unfinished;
}

/*
 * Refuse to commit a claim made outside a transaction block, for a request
 * that was to be finished in the same transaction (idem_http_claim without
 * a lease), and left in progress: it would commit as processing, and the
 * work that was to go with it never happens.  A connection pool does this
 * to a client whose BEGIN it runs as another client's COMMIT or ROLLBACK
 * (pgjdbc's named statements behind pgbouncer, doc/operations.md).
 */
static void
claim_memory_check_finished(void)
{
	HASH_SEQ_STATUS status;
	ClaimEntry *entry;

	hash_seq_init(&status, claims);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (!entry->claim.must_finish || !claim_on_current_table(entry) ||
			!claim_unfinished(&entry->claim))
			continue;
		hash_seq_term(&status);
		ereport(ERROR,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("key \"%s\" was claimed outside a transaction block and not finished",
						text_to_cstring(entry->claim.key)),
				 errdetail("The claim would commit as processing, without the work of its request."),
				 errhint("Run idem_http_claim, the work and idem_http_respond in one transaction, or pass a lease for a two-phase claim.  Behind pgbouncer, see the driver settings in doc/operations.md.")));
	}
}

/*
 * Before the transaction commits (or is prepared), write the rows of the
 * claims still pending: they commit as claims in progress, with their lease.
 * Whatever the end, forget everything after it; the locks go with the
 * top-level resource owner.
 */
static void
claim_memory_xact_callback(XactEvent event, void *arg)
{
	HASH_SEQ_STATUS status;
	ClaimEntry *entry;

	if (event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE)
	{
		bool		snapshot_pushed = false;

		if (claims == NULL)
			return;
		claim_memory_check();
		/* only a transaction that marked a claim reads rows back for it */
		if (must_finish_made)
		{
			PushActiveSnapshot(GetTransactionSnapshot());
			claim_memory_check_finished();
			PopActiveSnapshot();
		}
		hash_seq_init(&status, claims);
		while ((entry = hash_seq_search(&status)) != NULL)
		{
			if (!entry->claim.pending || !claim_on_current_table(entry))
				continue;

			/*
			 * A table with a TOAST relation is written only under a
			 * registered or active snapshot, and by now the last
			 * statement's is gone: take one, as AfterTriggerFireDeferred
			 * does for the deferred triggers that run just before.
			 */
			if (!snapshot_pushed)
			{
				PushActiveSnapshot(GetTransactionSnapshot());
				snapshot_pushed = true;
			}
			idem_claim_memory_write(&entry->claim);
		}
		if (snapshot_pushed)
			PopActiveSnapshot();
		return;
	}
	/* the table lives in TopTransactionContext and goes with it */
	claims = NULL;
	pending_made = 0;
	must_finish_made = false;
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
 * Its resource owner does the same with their key locks (rule 2): this runs
 * before it does.
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
		/* the rollback releases the key locks these claims took */
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
 * row written or pending; a pending claim holds its key lock already, under
 * this subtransaction's resource owner (rule 1).  The caller fills in the
 * rest of the claim returned (it lasts to transaction end: what it points
 * to must too).
 */
IdemClaim *
idem_claim_memory_add(text *scope, text *key, bool pending)
{
	MemoryContext oldcontext = MemoryContextSwitchTo(TopTransactionContext);
	ClaimName  *name = claim_name(scope, key);
	ClaimEntry *entry;
	bool		found;

	Assert(!pending || idem_store_lock_held(IDEM_KEYS, scope, key));
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

/*
 * This transaction's claim of (scope, key) on the idem.keys there is now, or
 * NULL
 */
IdemClaim *
idem_claim_memory_find(text *scope, text *key)
{
	ClaimName  *name;
	ClaimEntry *entry;

	if (claims == NULL)
		return NULL;
	claim_memory_check();
	name = claim_name(scope, key);
	entry = hash_search(claims, &name, HASH_FIND, NULL);
	pfree(name);
	return entry != NULL ? &entry->claim : NULL;
}

/*
 * The claim's row was written where st wrote last: the first write of a
 * pending claim, or a later one that moved it.  A move in a subtransaction
 * that rolls back leaves a stale address, which is harmless: the row found
 * there is checked, and so is the file the address is in.
 */
void
idem_claim_memory_written(IdemClaim *claim, IdemStore *st)
{
	if (claim->pending)
	{
		claim->pending = false;
		claim->written_by = GetCurrentSubTransactionId();
	}
	claim->tid = st->written;
	claim->filenode = IDEM_REL_FILENUMBER(st->heap);
}

/* How many key locks this transaction's pending claims hold */
int
idem_claim_memory_pending_made(void)
{
	return pending_made;
}
