/*
 * compat.h
 *		Every difference between the PostgreSQL versions idem builds
 *		against, in one place: 15, 17, 18 and 19 (the versions the test
 *		matrix runs; see README.md).  The rest of src/ is written against the
 *		names below and never tests PG_VERSION_NUM itself, except the
 *		functions of store_core.c that follow a core function whose body
 *		changed between versions.
 */
#ifndef IDEM_COMPAT_H
#define IDEM_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 200000
#error "idem builds against PostgreSQL 15, 17, 18 and 19"
#endif

#include "common/jsonapi.h"
#include "storage/lock.h"

/*
 * Functions that never return.  18 has pg_noreturn, written before the
 * declaration, and no longer pg_attribute_noreturn(); GCC and Clang take
 * the attribute in that place on every version.
 */
#if PG_VERSION_NUM < 180000 && !defined(pg_noreturn)
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * The physical file of a relation: a RelFileNode (relNode) in 15, a
 * RelFileLocator (relNumber) from 16 on.
 */
#if PG_VERSION_NUM >= 160000
#define IDEM_REL_LOCATOR(rel)		((rel)->rd_locator)
#define IDEM_REL_FILENUMBER(rel)	((rel)->rd_locator.relNumber)
#else
#define IDEM_REL_LOCATOR(rel)		((rel)->rd_node)
#define IDEM_REL_FILENUMBER(rel)	((rel)->rd_node.relNode)
#endif

/* LockHeldByMe: exactly this mode (17 added the orstronger argument) */
#if PG_VERSION_NUM >= 170000
#define idem_lock_held_by_me(tag, mode)		LockHeldByMe(tag, mode, false)
#else
#define idem_lock_held_by_me(tag, mode)		LockHeldByMe(tag, mode)
#endif

/*
 * index_beginscan: 18 added the instrumentation argument (none here), 19
 * the scan's flags (ScanOptions of access/tableam.h, which the caller
 * includes): SO_NONE, as idem's scans go on to write what they find and so
 * are not SO_HINT_REL_READ_ONLY.
 */
#if PG_VERSION_NUM >= 190000
#define idem_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan(heap, index, snapshot, NULL, nkeys, norderbys, SO_NONE)
#elif PG_VERSION_NUM >= 180000
#define idem_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan(heap, index, snapshot, NULL, nkeys, norderbys)
#else
#define idem_index_beginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan(heap, index, snapshot, nkeys, norderbys)
#endif

/*
 * heap_delete: 19 replaced the last argument, changingPart (false here), by
 * an options word (TABLE_DELETE_* of access/tableam.h) after the command
 * id; 0 is a plain delete, decoded by logical decoding as before.
 */
#if PG_VERSION_NUM >= 190000
#define idem_heap_delete(rel, tid, cid, crosscheck, wait, tmfd) \
	heap_delete(rel, tid, cid, 0, crosscheck, wait, tmfd)
#else
#define idem_heap_delete(rel, tid, cid, crosscheck, wait, tmfd) \
	heap_delete(rel, tid, cid, crosscheck, wait, tmfd, false)
#endif

/*
 * The JSON parser: from 16 on its semantic actions answer a
 * JsonParseErrorType (JSON_SUCCESS to go on); from 17 on a lexer context is
 * made in memory the caller may pass (NULL: palloc'd).  An action is
 * declared "static IdemJsonAction f(...)" and ends with IDEM_JSON_GO_ON.
 */
#if PG_VERSION_NUM >= 160000
typedef JsonParseErrorType IdemJsonAction;
#define IDEM_JSON_GO_ON		return JSON_SUCCESS
#else
typedef void IdemJsonAction;
#define IDEM_JSON_GO_ON		return
#endif

#if PG_VERSION_NUM >= 170000
#define idem_json_lex_context(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen(NULL, json, len, encoding, need_escapes)
#else
#define idem_json_lex_context(json, len, encoding, need_escapes) \
	makeJsonLexContextCstringLen(json, len, encoding, need_escapes)
#endif

#endif							/* IDEM_COMPAT_H */
