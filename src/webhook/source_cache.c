/*
 * source_cache.c
 *		Entry points' helper: a webhook source's configuration as the
 *		statement's snapshot sees its row, kept per backend with its secrets
 *		prepared.
 *
 * May call: the registry of schemes (scheme.h) and the layers below it,
 * the configuration helpers of config.c, and the store (store.c).  The
 * source's row is read with the statement's snapshot: a change of a source
 * is seen by the next statement of any session once it commits.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "store.h"
#include "webhook/entry.h"

/*
 * Sources read in earlier calls, each with the version of its row it was
 * read from (store.c), and checked against the table at every call: the
 * copy is used only while that version is still the one the statement's
 * snapshot sees, so a change is seen exactly when a read of the row would
 * see it.  Checking costs a look at one heap tuple instead of an index
 * probe, copying the row, taking its arrays apart and preparing its
 * secrets (decoding them, setting up HMAC keys, reading PEM).  Only the
 * prepared keys are kept, not the secrets' text; they are wiped when an
 * entry is dropped.
 */
#define CACHED_SOURCES	8

typedef struct CachedSource
{
	MemoryContext cxt;			/* holds all of it; NULL: a free entry */
	text	   *name;
	IdemRowVersion version;
	WebhookSource src;
	uint64		used;			/* when it was last used, to evict the oldest */
} CachedSource;

static CachedSource cached_sources[CACHED_SOURCES];
static uint64 cached_sources_clock = 0;

/* Drop a cached source, its keys wiped */
static void
source_forget(CachedSource *e)
{
	for (int i = 0; i < e->src.nsecrets; i++)
		if (e->src.held[i] != NULL)
			idem_verify_held_release(e->src.held[i]);
	MemoryContextDelete(e->cxt);
	e->cxt = NULL;
}

/*
 * Prepare the secrets of an array into src->keys, in the current memory
 * context, each key kept past the call with what it holds; the array's
 * copy is wiped.  An error (a secret its scheme refuses) releases them.
 */
static void
source_prepare_keys(ArrayType *secrets, WebhookSource *src)
{
	Datum	   *texts;
	bool	   *nulls;
	int			n;

	deconstruct_array(secrets, TEXTOID, -1, false, TYPALIGN_INT, &texts, &nulls, &n);
	src->keys = palloc0(Max(n, 1) * sizeof(void *));
	src->held = palloc0(Max(n, 1) * sizeof(VerifyHeld *));
	src->nsecrets = 0;
	PG_TRY();
	{
		for (int i = 0; i < n; i++)
		{
			int			mark = idem_verify_tracked_mark();

			src->keys[i] = src->scheme->prepare(idem_slice_of_text(DatumGetTextPP(texts[i])));
			src->held[i] = idem_verify_hold(mark);
			src->nsecrets = i + 1;
		}
	}
	PG_CATCH();
	{
		for (int i = 0; i < src->nsecrets; i++)
			idem_verify_held_release(src->held[i]);
		idem_verify_release_all();
		explicit_bzero(secrets, VARSIZE(secrets));
		PG_RE_THROW();
	}
	PG_END_TRY();
	explicit_bzero(secrets, VARSIZE(secrets));
}

/*
 * Copy the row st holds into *src, in the current memory context: the
 * scheme, the secrets prepared, the tolerance, the allowed networks and
 * the ttl
 */
static void
source_copy_row(IdemStore *st, WebhookSource *src)
{
	char	   *scheme = TextDatumGetCString(st->values[SOURCES_SCHEME]);

	src->scheme = idem_verify_scheme((Slice) {scheme, strlen(scheme)});
	if (src->scheme == NULL)
		elog(ERROR, "webhook source has unknown scheme \"%s\"", scheme);
	src->tolerance_usecs =
		idem_verify_tolerance_usecs(DatumGetIntervalP(st->values[SOURCES_TOLERANCE]), false);
	src->nets = NULL;
	src->net_nulls = NULL;
	src->nnets = 0;
	if (!st->nulls[SOURCES_ALLOWED_IPS])
		deconstruct_array(DatumGetArrayTypePCopy(st->values[SOURCES_ALLOWED_IPS]),
						  CIDROID, -1, false, TYPALIGN_INT,
						  &src->nets, &src->net_nulls, &src->nnets);
	src->ttl_default = st->nulls[SOURCES_TTL];
	if (!src->ttl_default)
		src->ttl = *DatumGetIntervalP(st->values[SOURCES_TTL]);
	/* last: what it holds is released only by receive_forget */
	source_prepare_keys(DatumGetArrayTypePCopy(st->values[SOURCES_SECRETS]), src);
}

/*
 * The source's configuration as the statement's snapshot sees its row,
 * into *src (pointing into the cache, valid for this call); false if there
 * is no such source
 */
bool
idem_webhook_source_read(text *source, WebhookSource *src)
{
	CachedSource *entry = NULL;
	CachedSource *victim = &cached_sources[0];
	IdemStore	st;
	bool		found;
	MemoryContext cxt;
	MemoryContext oldcxt;

	for (int i = 0; i < CACHED_SOURCES; i++)
	{
		CachedSource *e = &cached_sources[i];

		if (e->cxt != NULL && VARSIZE_ANY_EXHDR(e->name) == VARSIZE_ANY_EXHDR(source) &&
			memcmp(VARDATA_ANY(e->name), VARDATA_ANY(source), VARSIZE_ANY_EXHDR(source)) == 0)
			entry = e;
		else if (e->cxt == NULL || (victim->cxt != NULL && e->used < victim->used))
			victim = e;
	}
	if (entry != NULL && idem_store_still_visible(IDEM_SOURCES, &entry->version))
	{
		entry->used = ++cached_sources_clock;
		*src = entry->src;
	}
	else
	{
		if (entry != NULL)
			source_forget(entry);
		else
			entry = victim;

		/* read into memory of the call's, kept only once it is complete */
		cxt = AllocSetContextCreate(CurrentMemoryContext, "idem webhook source",
									ALLOCSET_SMALL_SIZES);
		idem_store_open(&st, IDEM_SOURCES, false);
		found = idem_store_fetch_visible(&st, source, NULL);
		if (found)
		{
			text	   *name = MemoryContextAlloc(cxt, VARSIZE_ANY(source));

			memcpy(name, source, VARSIZE_ANY(source));
			oldcxt = MemoryContextSwitchTo(cxt);
			source_copy_row(&st, src);
			MemoryContextSwitchTo(oldcxt);
			/* nothing below raises an error: the keys are the entry's now */
			if (entry->cxt != NULL)
				source_forget(entry);
			idem_store_row_version(&st, &entry->version);
			entry->name = name;
			entry->src = *src;
			entry->used = ++cached_sources_clock;
			MemoryContextSetParent(cxt, TopMemoryContext);
			entry->cxt = cxt;
		}
		idem_store_close(&st);
		if (!found)
		{
			MemoryContextDelete(cxt);
			return false;
		}
	}
	if (src->ttl_default)
	{
		memset(&src->ttl, 0, sizeof(Interval));
		src->ttl.time = (TimeOffset) idem_webhook_ttl_secs * USECS_PER_SEC;
	}
	return true;
}
