/*
 * idem.h
 *		Declarations shared by the files of the idem extension.
 */
#ifndef IDEM_H
#define IDEM_H

#include "postgres.h"

/* the differences between the server versions idem builds against */
#include "compat.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "storage/itemptr.h"
#include "utils/timestamp.h"

/*
 * The extension's own SQLSTATEs (class ID, free in the SQL standard and in
 * PostgreSQL).  doc/api.md lists them; applications match on them.
 */
#define ERRCODE_IDEM_STALE_TOKEN		MAKE_SQLSTATE('I','D','0','0','1')
#define ERRCODE_IDEM_NO_CLAIM			MAKE_SQLSTATE('I','D','0','0','2')
#define ERRCODE_IDEM_ALREADY_FINISHED	MAKE_SQLSTATE('I','D','0','0','3')
#define ERRCODE_IDEM_TOKEN_REQUIRED		MAKE_SQLSTATE('I','D','0','0','4')

/* Limits of the contract */
#define IDEM_MAX_KEY_BYTES		255

/* Settings (idem.c) */
extern int	idem_ttl_secs;
extern int	idem_lease_secs;
extern int	idem_webhook_ttl_secs;
extern int	idem_max_response_kb;
extern int	idem_purge_interval_secs;
extern int	idem_purge_batch_size;
extern char *idem_database;

/* Input checks and the result row shared by the SQL entry points (input.c) */
extern text *idem_arg_key(FunctionCallInfo fcinfo, int argno, const char *what);
extern text *idem_arg_scope(FunctionCallInfo fcinfo, int argno, const char *what);
extern Interval *idem_arg_interval(FunctionCallInfo fcinfo, int argno,
								   const char *what, int default_secs);
extern TimestampTz idem_after(TimestampTz from, const Interval *iv, const char *what);
extern void idem_check_json_size(Datum jsonb, const char *what);
extern void idem_check_writable(const char *fname);
extern Datum idem_result_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls);

/* Webhook deliveries (webhook.c) */
extern bool idem_webhook_record(text *source, text *event_id, const Interval *ttl);

/* Operator counters in shared memory (stats.c) */
typedef enum IdemCounter
{
	IDEM_STAT_CLAIMED,
	IDEM_STAT_COMPLETED,
	IDEM_STAT_FAILED,
	IDEM_STAT_REPLAYED,
	IDEM_STAT_IN_PROGRESS,
	IDEM_STAT_MISMATCHED,
	IDEM_STAT_WEBHOOKS_NEW,
	IDEM_STAT_WEBHOOKS_DUPLICATE,
	IDEM_STAT_PURGED,
	/* 1.3 */
	IDEM_STAT_TAKEN_OVER,
	IDEM_STAT_STALE_TOKENS,
	IDEM_STAT_WEBHOOKS_REJECTED,
	IDEM_STAT_NCOUNTERS
} IdemCounter;

/* The counters idem.stats_1_0() shows: those up to purged */
#define IDEM_STAT_NCOUNTERS_1_0		(IDEM_STAT_PURGED + 1)

extern void idem_stats_shmem_request(void);
extern void idem_stats_shmem_startup(void);
extern void idem_stats_count(IdemCounter counter, int64 n);
extern void idem_stats_note_purge(TimestampTz when);

/* One purge batch in the current transaction (purge.c) */
extern int64 idem_purge_batch(int64 limit);

/* Purge launcher and workers (purge_worker.c) */
extern void idem_purge_worker_shmem_request(void);
extern void idem_purge_worker_shmem_startup(void);
extern void idem_purge_worker_register(void);

/*
 * What this transaction remembers of a claim it made (claim_memory.c).  A
 * claim of a key that had no row is "pending": its row is written only when
 * the claim is finished, or before the transaction commits, and until then
 * the claim holds the key lock (the protocol is stated in claim_memory.c).
 */
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
								 * idem_claim_memory_check_finished */
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
extern void idem_claim_memory_written(IdemClaim *claim, struct IdemStore *st);
extern int	idem_claim_memory_pending_made(void);
extern void idem_claim_memory_row(IdemClaim *claim, Datum *values, bool *nulls);
extern void idem_claim_memory_write(IdemClaim *claim);

/*
 * Fingerprints, deterministic keys and ISO 4217 currencies (fingerprint.c,
 * payment_key.c, currency.c).  doc/fingerprints.md states the formats.
 */
#include "common/cryptohash.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"

#define IDEM_SHA256_LEN			32

typedef struct IdemSha256
{
	pg_cryptohash_ctx *ctx;
} IdemSha256;

extern void idem_sha256_init(IdemSha256 *h);
extern void idem_sha256_update(IdemSha256 *h, const void *data, size_t len);
extern void idem_sha256_final(IdemSha256 *h, uint8 *out);
pg_noreturn extern void idem_sha256_fail(IdemSha256 *h);
extern void idem_canonical_append(StringInfo buf, Jsonb *jb);
extern void idem_fingerprint_jsonb(Jsonb *jb, uint8 *out);
extern void idem_key_hex(int nparts, const char *const *parts, const int *lens,
						 char *hex);

/* Minor units of a currency that ISO 4217 gives none (gold, XDR, ...) */
#define IDEM_CURRENCY_NO_MINOR_UNIT	(-1)
extern bool idem_currency_minor_units(const char *code, int *minor_units);

#endif							/* IDEM_H */
