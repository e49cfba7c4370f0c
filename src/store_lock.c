/*
 * store_lock.c
 *		Store: the key locks, one heavyweight lock per key, which make
 *		"read, decide, write" of a key atomic.
 *
 * May call: the server's lock manager only.  Who holds a key lock, and
 * for how long, is the protocol stated at the top of claim_memory.c.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/resowner.h"

#include "idem.h"
#include "store.h"

/*
 * locktag_field4 of idem's key locks.  PostgreSQL's own advisory locks use 1
 * and 2 there, so these never meet pg_advisory_lock() calls; in pg_locks they
 * show as locktype advisory with objsubid 7649 (keys), 7650 (webhooks) or
 * 7651 (webhook sources); 7652 is the lock of a gateway object
 * (idem_store_lock_object).
 */
static const uint16 lock_fields[IDEM_NTABLES] = {0x1DE1, 0x1DE2, 0x1DE3};
#define OBJECT_LOCK_FIELD	0x1DE4

/*
 * The lock tag of a two-part name in the lock space field (locktag_field4):
 * a 64-bit hash of both parts (b is NULL for a name of one part)
 */
static void
locktag_of(LOCKTAG *tag, uint16 field, text *a, text *b)
{
	uint64		h;

	h = hash_bytes_extended((const unsigned char *) VARDATA_ANY(a),
							VARSIZE_ANY_EXHDR(a), 0x1DE0);
	if (b != NULL)
		h = hash_bytes_extended((const unsigned char *) VARDATA_ANY(b),
								VARSIZE_ANY_EXHDR(b), h);
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h, field);
}

/* The lock tag of one key of a table (b is NULL for a key of one column) */
static void
store_locktag(LOCKTAG *tag, IdemTable which, text *a, text *b)
{
	locktag_of(tag, lock_fields[which], a, b);
}

/*
 * Take the lock of tag; with nowait, return false if another holds it.  The
 * lock belongs to the current subtransaction's resource owner, whatever
 * portal or function the call runs in: claim_memory.c states why.  An error
 * while the owner is switched aborts that (sub)transaction, whose clean-up
 * sets CurrentResourceOwner again.
 */
static bool
lock_in_subtransaction(LOCKTAG *tag, bool nowait)
{
	ResourceOwner caller_owner = CurrentResourceOwner;
	LockAcquireResult result;

	CurrentResourceOwner = CurTransactionResourceOwner;
	result = LockAcquire(tag, ExclusiveLock, false, nowait);
	CurrentResourceOwner = caller_owner;
	return result != LOCKACQUIRE_NOT_AVAIL;
}

/* Take the key lock; with nowait, return false if another holds it */
bool
idem_store_lock(IdemTable which, text *a, text *b, bool nowait)
{
	LOCKTAG		tag;

	store_locktag(&tag, which, a, b);
	return lock_in_subtransaction(&tag, nowait);
}

/* Release the key lock taken by idem_store_lock in this subtransaction */
void
idem_store_unlock(IdemTable which, text *a, text *b)
{
	ResourceOwner caller_owner = CurrentResourceOwner;
	LOCKTAG		tag;

	store_locktag(&tag, which, a, b);
	CurrentResourceOwner = CurTransactionResourceOwner;
	LockRelease(&tag, ExclusiveLock, false);
	CurrentResourceOwner = caller_owner;
}

/* Does this backend hold the key lock (under any resource owner)? */
bool
idem_store_lock_held(IdemTable which, text *a, text *b)
{
	LOCKTAG		tag;

	store_locktag(&tag, which, a, b);
	return idem_lock_held_by_me(&tag, ExclusiveLock);
}

/*
 * Take the lock of one gateway object of a webhook source, which
 * serializes idem_webhook_order's deliveries for it, waiting for another
 * holder.  Kept to the end of the transaction, or of the subtransaction
 * that took it if that rolls back (its writes go with it), as the key
 * locks are.
 */
void
idem_store_lock_object(text *source, text *object)
{
	LOCKTAG		tag;

	locktag_of(&tag, OBJECT_LOCK_FIELD, source, object);
	(void) lock_in_subtransaction(&tag, false);
}
