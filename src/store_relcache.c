/*
 * store_relcache.c
 *		Store: the OIDs of idem's relations in this database, resolved once
 *		and kept until a relcache invalidation, and the check of a table's
 *		shape, run once per change of the table.
 *
 * May call: the tables' shape and its checks (store_shape.c) and the
 * server's catalogs.  Opening a table here is "resolve, lock, resolve
 * again if an invalidation came in", as RangeVarGetRelidExtended does.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "idem.h"
#include "store.h"
#include "store_internal.h"

StoreOids	idem_store_oids;
static bool callback_registered = false;

static const char *store_lookup(void);

/*
 * Relcache invalidations of each table (or of its two indexes) seen so far,
 * and how many had been seen when the table last passed idem_store_check_table.
 * Every ALTER TABLE, CREATE TRIGGER, CREATE RULE, CREATE POLICY or foreign
 * key to a table invalidates its relcache entry, so the check runs once per
 * change of the table, not on every call.
 */
uint64		idem_store_invalidations[IDEM_NTABLES] = {1, 1, 1};
uint64		idem_store_checked[IDEM_NTABLES] = {0, 0, 0};

/*
 * oids_generation is bumped whenever the cached OIDs are forgotten, so
 * that a caller can tell whether they were while it waited for a lock
 * (idem_store_open_heap); resolving is true while idem_store_resolve looks them up,
 * when any invalidation may concern a relation it has not filled in yet.
 */
static uint64 oids_generation = 0;
static bool resolving = false;

/* Forget the cached OIDs, and checks, when one of the relations changes or goes */
static void
store_relcache_callback(Datum arg, Oid relid)
{
	int			i;

	if (!OidIsValid(relid) || relid == idem_store_oids.token_seq || resolving)
		idem_store_oids.valid = false;
	for (i = 0; i < IDEM_NTABLES; i++)
		if (!OidIsValid(relid) ||
			relid == idem_store_oids.heap[i] || relid == idem_store_oids.pkey[i] ||
			(OidIsValid(idem_store_oids.expires[i]) && relid == idem_store_oids.expires[i]))
		{
			idem_store_oids.valid = false;
			idem_store_invalidations[i]++;
		}
	if (!idem_store_oids.valid)
		oids_generation++;
}

/*
 * Resolve the OIDs of idem's relations, once per backend and invalidation.
 * The catalog reads may take in invalidations: one that arrives meanwhile
 * leaves them unsettled (idem_store_oids.valid false), to be looked up again by the
 * next call.  idem_store_open_heap settles them under the table's lock.  A
 * relation found missing while invalidations arrived may have been looked
 * for in a schema dropped and created again meanwhile (DROP and CREATE
 * EXTENSION in another session): it is looked up again, as
 * RangeVarGetRelidExtended does, and is reported missing only from a
 * lookup that no invalidation disturbed.
 */
void
idem_store_resolve(void)
{
	uint64		generation;
	const char *volatile missing;

	if (idem_store_oids.valid)
		return;
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		generation = oids_generation;
		resolving = true;
		PG_TRY();
		{
			missing = store_lookup();
		}
		PG_FINALLY();
		{
			resolving = false;
		}
		PG_END_TRY();
		if (missing == NULL || generation == oids_generation)
			break;
	}
	if (missing == NULL)
		idem_store_oids.valid = (generation == oids_generation);
	else if (strcmp(missing, "idem") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_SCHEMA),
				 errmsg("schema \"idem\" does not exist"),
				 errhint("Run CREATE EXTENSION idem in this database; if another session is dropping it and creating it again, retry the call.")));
	else
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"idem.%s\" does not exist", missing),
				 errhint("If another session is dropping the idem extension and creating it again, retry the call; else idem is not installed correctly in this database: DROP and CREATE EXTENSION idem.")));
}

/*
 * Look up the OIDs of idem's relations (idem_store_resolve); answers the name of
 * one that is missing ("idem": the schema), or NULL if none is
 */
static const char *
store_lookup(void)
{
	Oid			nsp;
	int			i;

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(store_relcache_callback, (Datum) 0);
		callback_registered = true;
	}
	nsp = get_namespace_oid("idem", true);
	if (!OidIsValid(nsp))
		return "idem";
	for (i = 0; i < IDEM_NTABLES; i++)
	{
		idem_store_oids.heap[i] = get_relname_relid(idem_store_heap_names[i], nsp);
		idem_store_oids.pkey[i] = InvalidOid;
		/* before ALTER EXTENSION UPDATE to 1.3 there is no sources table */
		if (i == IDEM_SOURCES && !OidIsValid(idem_store_oids.heap[i]))
			continue;
		if (!OidIsValid(idem_store_oids.heap[i]))
			return idem_store_heap_names[i];
		idem_store_oids.pkey[i] = get_relname_relid(idem_store_pkey_names[i], nsp);
		if (!OidIsValid(idem_store_oids.pkey[i]))
			return idem_store_pkey_names[i];
	}
	idem_store_oids.token_seq = get_relname_relid("token_seq", nsp);
	if (!OidIsValid(idem_store_oids.token_seq))
		return "token_seq";
	idem_store_oids.outside_write = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
													CStringGetDatum("expiry_outside_write"),
													PointerGetDatum(buildoidvector(NULL, 0)),
													ObjectIdGetDatum(nsp));
	/*
	 * Before 1.6, which drops them and adds that function, the purge scans
	 * the indexes on expires_at; from 1.6 it sweeps (purge_sweep.c), and an
	 * index of that name is a user's, like any other.
	 */
	for (i = 0; i < IDEM_NTABLES; i++)
	{
		idem_store_oids.expires[i] = InvalidOid;
		if (OidIsValid(idem_store_oids.heap[i]) && idem_store_expires_names[i] != NULL &&
			!OidIsValid(idem_store_oids.outside_write))
		{
			idem_store_oids.expires[i] = get_relname_relid(idem_store_expires_names[i], nsp);
			if (!OidIsValid(idem_store_oids.expires[i]))
				return idem_store_expires_names[i];
		}
	}
	return NULL;
}

/*
 * The OID that one of idem's tables has now, or InvalidOid if there is none
 * (a transaction may drop the extension and create it again).
 */
Oid
idem_store_table_oid(IdemTable which)
{
	Oid			nsp;

	if (idem_store_oids.valid)
		return idem_store_oids.heap[which];
	nsp = get_namespace_oid("idem", true);
	return OidIsValid(nsp) ? get_relname_relid(idem_store_heap_names[which], nsp) : InvalidOid;
}


/*
 * Check, once per change of the table, that the table st has open is as
 * idem--1.0.sql created it and has nothing that idem would bypass.
 */
void
idem_store_check_table(IdemStore *st, LOCKMODE lockmode)
{
	/* invalidations that arrive while checking make the next call check again */
	uint64		seen = idem_store_invalidations[st->which];

	idem_store_check_columns(st->heap, st->which);
	idem_store_check_indexes(st, idem_store_oids.expires[st->which], lockmode);
	idem_store_check_bypassed(st->heap, st->which, idem_store_oids.outside_write);
	idem_store_checked[st->which] = seen;
}

/*
 * Has the table st has open an index on expires_at (before 1.6), which the
 * purge then scans?
 */
bool
idem_store_has_expires_index(IdemStore *st)
{
	return OidIsValid(idem_store_oids.expires[st->which]);
}

/*
 * Does a statement that writes the table st has open without idem fire
 * idem.expiry_outside_write, as idem--1.5--1.6.sql set it up (after each
 * INSERT or UPDATE statement, whatever session_replication_role)?  Only
 * then may the purge skip what the expiry map says holds nothing.  Answers
 * the transaction that last changed the trigger (ENABLE and DISABLE do),
 * or InvalidTransactionId: the map forgets the table when that changes, as
 * writes may have gone unseen meanwhile.
 */
TransactionId
idem_store_outside_writes_seen(IdemStore *st)
{
	Relation	rel;
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tup;
	TransactionId seen = InvalidTransactionId;

	if (!OidIsValid(idem_store_oids.outside_write))
		return InvalidTransactionId;
	rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&skey, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(RelationGetRelid(st->heap)));
	scan = systable_beginscan(rel, TriggerRelidNameIndexId, true, NULL, 1, &skey);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_trigger trig = (Form_pg_trigger) GETSTRUCT(tup);

		if (trig->tgfoid == idem_store_oids.outside_write &&
			trig->tgenabled == TRIGGER_FIRES_ALWAYS &&
			!TRIGGER_FOR_ROW(trig->tgtype) && TRIGGER_FOR_AFTER(trig->tgtype) &&
			TRIGGER_FOR_INSERT(trig->tgtype) && TRIGGER_FOR_UPDATE(trig->tgtype))
			seen = HeapTupleHeaderGetXmin(tup->t_data);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return seen;
}

/* Open the expires_at index of the table st has open (purge scans it) */
Relation
idem_store_open_expires(IdemStore *st)
{
	return index_open(idem_store_oids.expires[st->which], RowExclusiveLock);
}

/*
 * Open table which under lockmode, with the OIDs of its indexes resolved
 * while the lock is held; NULL if the table does not exist (before the
 * update that creates it).  As RangeVarGetRelidExtended does: resolve,
 * lock, and if an invalidation came in meanwhile, resolve again under the
 * lock, keeping it if the table is still the one locked.  An update that
 * drops or replaces one of idem's relations holds the table's ACCESS
 * EXCLUSIVE lock (1.6 drops the expires_at indexes): a claim that waited
 * behind it must not go on with the OIDs it had before.
 */
Relation
idem_store_open_heap(IdemTable which, LOCKMODE lockmode)
{
	for (;;)
	{
		uint64		generation;
		bool		settled;
		Oid			relid;
		Relation	heap;

		CHECK_FOR_INTERRUPTS();
		idem_store_resolve();
		if (!OidIsValid(idem_store_oids.heap[which]))
		{
			/* created since it was looked up: ALTER EXTENSION UPDATE, here or elsewhere */
			idem_store_oids.valid = false;
			idem_store_resolve();
			if (!OidIsValid(idem_store_oids.heap[which]))
				return NULL;
		}
		relid = idem_store_oids.heap[which];
		settled = idem_store_oids.valid;
		generation = oids_generation;
		heap = try_table_open(relid, lockmode);
		if (heap == NULL)
		{
			/* dropped meanwhile: look again */
			idem_store_oids.valid = false;
			continue;
		}
		if (settled && generation == oids_generation)
			return heap;
		/* what is looked up now, under the lock, stays so until it ends */
		idem_store_oids.valid = false;
		idem_store_resolve();
		if (idem_store_oids.heap[which] == relid)
			return heap;
		table_close(heap, lockmode);
	}
}
