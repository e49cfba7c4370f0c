/*
 * store_shape.c
 *		The shape of idem's tables, and the checks that refuse a table that
 *		is not as its install script created it.
 *
 * store.c reads and writes idem's tables without the executor, so it relies
 * on their columns and indexes being exactly those of the install scripts,
 * and would bypass any trigger, rule, CHECK constraint or row-level security
 * policy added to them.  The relation cache (store_relcache.c) runs these
 * checks once per change of a table (idem_store_check_table).
 *
 * May call: the server's catalogs only.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_rewrite.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "store.h"
#include "store_internal.h"

/* The names the install scripts give idem's tables and their indexes */
const char *const idem_store_heap_names[IDEM_NTABLES] = {"keys", "webhooks", "webhook_sources"};
const char *const idem_store_pkey_names[IDEM_NTABLES] = {"keys_pkey", "webhooks_pkey",
"webhook_sources_pkey"};
const char *const idem_store_expires_names[IDEM_NTABLES] = {"keys_expires_at_idx",
"webhooks_expires_at_idx", NULL};

static const StoreColumn keys_columns[KEYS_NATTS] = {
	[KEYS_SCOPE] = {"scope", TEXTOID, true, true},
	[KEYS_KEY] = {"key", TEXTOID, true, true},
	[KEYS_STATE] = {"state", TEXTOID, true, false},
	[KEYS_TOKEN] = {"token", INT8OID, true, false},
	[KEYS_ATTEMPT] = {"attempt", INT4OID, true, false},
	[KEYS_FINGERPRINT] = {"fingerprint", BYTEAOID, false, false},
	[KEYS_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID, false, false},
	[KEYS_CHECKPOINT] = {"checkpoint", TEXTOID, false, false},
	[KEYS_CHECKPOINT_DATA] = {"checkpoint_data", JSONBOID, false, false},
	[KEYS_RESPONSE] = {"response", JSONBOID, false, false},
	[KEYS_CREATED_AT] = {"created_at", TIMESTAMPTZOID, true, false},
	[KEYS_COMPLETED_AT] = {"completed_at", TIMESTAMPTZOID, false, false},
	[KEYS_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID, true, false},
	[KEYS_HTTP_STATUS] = {"http_status", INT2OID, false, false},
	[KEYS_BODY] = {"body", TEXTOID, false, false},
};

static const StoreColumn webhooks_columns[WEBHOOKS_NATTS] = {
	[WEBHOOKS_SOURCE] = {"source", TEXTOID, true, true},
	[WEBHOOKS_EVENT_ID] = {"event_id", TEXTOID, true, true},
	[WEBHOOKS_RECEIVED_AT] = {"received_at", TIMESTAMPTZOID, true, false},
	[WEBHOOKS_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID, true, false},
};

static const StoreColumn sources_columns[SOURCES_NATTS] = {
	[SOURCES_SOURCE] = {"source", TEXTOID, true, true},
	[SOURCES_SCHEME] = {"scheme", TEXTOID, true, false},
	[SOURCES_SECRETS] = {"secrets", TEXTARRAYOID, true, false},
	[SOURCES_TOLERANCE] = {"tolerance", INTERVALOID, true, false},
	[SOURCES_ALLOWED_IPS] = {"allowed_ips", CIDRARRAYOID, false, false},
	[SOURCES_TTL] = {"ttl", INTERVALOID, false, false},
	[SOURCES_UPDATED_AT] = {"updated_at", TIMESTAMPTZOID, true, false},
};

/* Each table's shape, by IdemTable */
const StoreShape idem_store_shapes[IDEM_NTABLES] = {
	{keys_columns, KEYS_NATTS, KEYS_NATTS_1_0, 2, {KEYS_KEY + 1, KEYS_SCOPE + 1},
	KEYS_EXPIRES_AT + 1},
	{webhooks_columns, WEBHOOKS_NATTS, WEBHOOKS_NATTS, 2,
	{WEBHOOKS_EVENT_ID + 1, WEBHOOKS_SOURCE + 1}, WEBHOOKS_EXPIRES_AT + 1},
	{sources_columns, SOURCES_NATTS, SOURCES_NATTS, 1, {SOURCES_SOURCE + 1}, 0},
};

/* Refuse table which, not as idem--1.0.sql made it: detail says how */
static void
store_refuse_shape(IdemTable which, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("table \"idem.%s\" is not as the idem extension created it",
					idem_store_heap_names[which]),
			 errdetail_internal("%s", detail),
			 errhint("Undo the change: idem reads and writes its tables directly, with the columns and indexes of its install script.")));
}

/* Check the access method and columns of a table against its install script */
void
idem_store_check_columns(Relation heap, IdemTable which)
{
	const StoreShape *shape = &idem_store_shapes[which];
	TupleDesc	desc = RelationGetDescr(heap);
	int			i;

	if (heap->rd_rel->relam != HEAP_TABLE_AM_OID)
		store_refuse_shape(which, psprintf(_("It uses access method \"%s\", not heap."),
										   get_am_name(heap->rd_rel->relam)));
	for (i = 0; i < Min(desc->natts, shape->natts); i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const StoreColumn *col = &shape->columns[i];

		if (att->attisdropped)
			store_refuse_shape(which, psprintf(_("Column %d, \"%s\", was dropped."),
											   i + 1, col->name));
		if (strcmp(NameStr(att->attname), col->name) != 0)
			store_refuse_shape(which, psprintf(_("Column %d is \"%s\", not \"%s\"."),
											   i + 1, NameStr(att->attname), col->name));
		if (att->atttypid != col->type)
			store_refuse_shape(which, psprintf(_("Column \"%s\" has type %s, not %s."),
											   col->name, format_type_be(att->atttypid),
											   format_type_be(col->type)));
		if (col->bytewise && att->attcollation != C_COLLATION_OID)
			store_refuse_shape(which, psprintf(_("Column \"%s\" has collation \"%s\", not \"C\"."),
											   col->name, get_collation_name(att->attcollation)));
		if (col->notnull && !att->attnotnull)
			store_refuse_shape(which, psprintf(_("Column \"%s\" is not NOT NULL."), col->name));
	}
	if (desc->natts < shape->min_natts || desc->natts > shape->natts)
		store_refuse_shape(which, psprintf(_("It has %d columns, not %d."),
										   desc->natts, shape->natts));
}

/*
 * Is ind a btree index of heap on exactly the columns attnums, without a
 * predicate, unique if asked, in collation "C" if asked?
 */
static bool
store_index_is(Relation ind, Relation heap, const AttrNumber *attnums, int n,
			   bool unique, bool bytewise)
{
	int			i;

	if (ind->rd_rel->relam != BTREE_AM_OID ||
		ind->rd_index->indrelid != RelationGetRelid(heap) ||
		IndexRelationGetNumberOfAttributes(ind) != n ||
		(unique && !ind->rd_index->indisunique) ||
		!heap_attisnull(ind->rd_indextuple, Anum_pg_index_indpred, NULL))
		return false;
	for (i = 0; i < n; i++)
		if (ind->rd_index->indkey.values[i] != attnums[i] ||
			(bytewise && ind->rd_indcollation[i] != C_COLLATION_OID))
			return false;
	return true;
}

/*
 * Check the primary key and the expires_at index (expires_oid, if there is
 * one) of the table st has open
 */
void
idem_store_check_indexes(IdemStore *st, Oid expires_oid, LOCKMODE lockmode)
{
	const StoreShape *shape = &idem_store_shapes[st->which];
	const StoreColumn *cols = shape->columns;
	Relation	expires;
	bool		ok;

	if (!store_index_is(st->pkey, st->heap, shape->pkey, shape->npkey, true, true))
		store_refuse_shape(st->which,
						   psprintf(_("Index \"idem.%s\" is not a unique btree index on (%s%s%s) in collation \"C\"."),
									idem_store_pkey_names[st->which],
									cols[shape->pkey[0] - 1].name,
									shape->npkey > 1 ? ", " : "",
									shape->npkey > 1 ? cols[shape->pkey[1] - 1].name : ""));
	/* 1.6 drops it: the purge sweeps the table (purge_sweep.c) */
	if (shape->expires == 0 || !OidIsValid(expires_oid))
		return;
	expires = index_open(expires_oid, lockmode);
	ok = store_index_is(expires, st->heap, &shape->expires, 1, false, false);
	index_close(expires, NoLock);
	if (!ok)
		store_refuse_shape(st->which,
						   psprintf(_("Index \"idem.%s\" is not a btree index on (%s)."),
									idem_store_expires_names[st->which],
									cols[shape->expires - 1].name));
}

/* The name of rule ruleid */
static char *
store_rule_name(Oid ruleid)
{
	Relation	rewrite = table_open(RewriteRelationId, AccessShareLock);
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *name = "?";

	ScanKeyInit(&skey, Anum_pg_rewrite_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ruleid));
	scan = systable_beginscan(rewrite, RewriteOidIndexId, true, NULL, 1, &skey);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		name = pstrdup(NameStr(((Form_pg_rewrite) GETSTRUCT(tup))->rulename));
	systable_endscan(scan);
	table_close(rewrite, AccessShareLock);
	return name;
}

/* The schema-qualified name of relation relid, quoted as needed */
static char *
store_qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* Refuse a table with a trigger: a foreign key's is named by its constraint */
static void
store_refuse_trigger(Relation heap, IdemTable which, Trigger *trig)
{
	HeapTuple	tup = NULL;
	Form_pg_constraint con;
	char	   *conname;
	Oid			from;
	Oid			to;

	if (OidIsValid(trig->tgconstraint))
		tup = SearchSysCache1(CONSTROID, ObjectIdGetDatum(trig->tgconstraint));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem does not support trigger \"%s\" on table \"idem.%s\"",
						trig->tgname, idem_store_heap_names[which]),
				 errdetail("idem reads and writes its tables directly: it would never fire the trigger."),
				 errhint("Drop the trigger.")));
	con = (Form_pg_constraint) GETSTRUCT(tup);
	if (con->contype != CONSTRAINT_FOREIGN)
	{
		ReleaseSysCache(tup);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem does not support trigger \"%s\" on table \"idem.%s\"",
						trig->tgname, idem_store_heap_names[which]),
				 errdetail("idem reads and writes its tables directly: it would never fire the trigger of constraint \"%s\".",
						   NameStr(con->conname)),
				 errhint("Drop the constraint.")));
	}
	conname = pstrdup(NameStr(con->conname));
	from = con->conrelid;
	to = con->confrelid;
	ReleaseSysCache(tup);
	if (from == RelationGetRelid(heap))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem does not support foreign key \"%s\" from table \"idem.%s\" to table \"%s\"",
						conname, idem_store_heap_names[which], store_qualified_name(to)),
				 errdetail("idem writes its tables directly: it would never check the foreign key."),
				 errhint("Drop the constraint.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("idem does not support foreign key \"%s\" from table \"%s\" to table \"idem.%s\"",
					conname, store_qualified_name(from), idem_store_heap_names[which]),
			 errdetail("idem deletes expired rows directly: it would leave rows of table \"%s\" referring to rows that are gone.",
					   store_qualified_name(from)),
			 errhint("Drop the constraint.")));
}

/*
 * Refuse a table with anything that idem, which writes without the
 * executor, would bypass: triggers (foreign keys in either direction are
 * triggers on it too), CHECK constraints, rules and row-level security.
 * The one kind of trigger allowed is idem's own: after each statement, it
 * calls outside_write (idem.expiry_outside_write), for the writes that do
 * not go through idem.
 */
void
idem_store_check_bypassed(Relation heap, IdemTable which, Oid outside_write)
{
	TupleConstr *constr = RelationGetDescr(heap)->constr;
	int			i;

	for (i = 0; heap->trigdesc != NULL && i < heap->trigdesc->numtriggers; i++)
	{
		Trigger    *trig = &heap->trigdesc->triggers[i];

		if (!OidIsValid(outside_write) || trig->tgfoid != outside_write ||
			TRIGGER_FOR_ROW(trig->tgtype) || !TRIGGER_FOR_AFTER(trig->tgtype))
			store_refuse_trigger(heap, which, trig);
	}
	if (constr != NULL && constr->num_check > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem does not support check constraint \"%s\" on table \"idem.%s\"",
						constr->check[0].ccname, idem_store_heap_names[which]),
				 errdetail("idem writes its tables directly: it would never check the constraint."),
				 errhint("Drop the constraint.")));
	if (heap->rd_rules != NULL && heap->rd_rules->numLocks > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem does not support rule \"%s\" on table \"idem.%s\"",
						store_rule_name(heap->rd_rules->rules[0]->ruleId),
						idem_store_heap_names[which]),
				 errdetail("idem reads and writes its tables directly: it would never apply the rule."),
				 errhint("Drop the rule.")));
	if (heap->rd_rel->relrowsecurity)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("idem does not support row-level security on table \"idem.%s\"",
						idem_store_heap_names[which]),
				 errdetail("idem reads and writes its tables directly: no policy would limit what its functions read or write."),
				 errhint("Disable row-level security on the table, and grant EXECUTE on idem's functions only to roles that may use every scope.")));
}