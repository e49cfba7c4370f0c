/*
 * loadgen.c
 *		The load generator of bench/seeds: one payment (a ledger insert and a
 *		balance update) made safe to retry by one of several designs, sent by
 *		many concurrent clients, with a share of retries.  It speaks to
 *		PostgreSQL with libpq and to Redis with hiredis, so every design is
 *		measured by the same client, end to end.
 *
 * Designs (--design):
 *	 redis		the Redis-lock design: SET key PROCESSING NX EX ttl, the payment
 *				in its own transaction, SET key SUCCESS:<charge> EX 86400 (or
 *				FAILED:<error>); a retry reads the key and replays, or polls
 *				while it says PROCESSING
 *	 dedupe		a dedupe table: BEGIN, INSERT ... ON CONFLICT DO NOTHING, the
 *				payment, UPDATE with the response, COMMIT
 *	 dedupe1	the best hand-written record, in one statement, autocommit:
 *				INSERT ... ON CONFLICT DO NOTHING RETURNING of a row like
 *				idem's (table dedupe1: idem.keys's columns and primary key),
 *				completed with the charge id drawn first from the ledger's
 *				sequence, beside the payment; a conflict reads the stored
 *				response (in the same statement if its snapshot sees it,
 *				else with a SELECT after it)
 *	 idem5		idem in-transaction: BEGIN, idem_claim, the payment,
 *				idem_complete, COMMIT
 *	 idem1		idem in one statement (doc/usage.md), autocommit
 *	 idem2p		idem two-phase: the claim commits with a lease, the gateway
 *				call, then BEGIN, the payment, idem_complete with the token,
 *				COMMIT
 *	 nodedup	the payment alone: no protection, the limit
 *
 * A request picks a new key, or (--retry-seq) a key finished before, or
 * (--retry-dup) a key another client is working on right now.  A request's
 * latency runs from its first send to its answer, waits and retries
 * included.  One line of key=value pairs goes to standard output.
 *
 * --check reads the ledger and the design's store after a run and counts
 * double charges (keys with more than one ledger row) and lost results
 * (keys with a ledger row whose stored result is missing or names no charge
 * of the key).  --recover retries the keys a killed run had started but not
 * answered, as its callers would.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include <hiredis/hiredis.h>
#include <libpq-fe.h>

typedef enum Design
{
	D_REDIS,
	D_DEDUPE,
	D_DEDUPE1,
	D_IDEM5,
	D_IDEM1,
	D_IDEM2P,
	D_NODEDUP
} Design;

static const char *const design_names[] = {"redis", "dedupe", "dedupe1", "idem5", "idem1", "idem2p", "nodedup"};

/* What one try of a request came to */
typedef enum Outcome
{
	OUT_NEW,					/* this try did the payment */
	OUT_REPLAY,					/* answered from a stored result */
	OUT_FAILED,					/* answered from a stored failure */
	OUT_WAIT,					/* the key is being worked on: ask again later */
	OUT_RETRY					/* an error: reconnect if needed, then try again */
} Outcome;

static struct
{
	const char *pg;				/* libpq connection string */
	const char *redis_host;
	int			redis_port;
	Design		design;
	int			clients;
	double		seconds;
	double		retry_seq;		/* share of requests retrying a finished key */
	double		retry_dup;		/* share duplicating a key in flight */
	int			accounts;
	const char *prefix;			/* keys are <prefix>-<n> */
	int			ttl;			/* the Redis lock's EX, and idem2p's lease (s) */
	int			poll_ms;		/* a caller told "processing" asks again after */
	double		slow_share;		/* share of gateway calls that are slow */
	int			slow_ms;		/* how slow */
	long		kill_after;		/* SIGKILL this process after that many commits */
	const char *journal;		/* directory of the request journals */
	double		patience;		/* seconds a caller keeps retrying a request */
	bool		verify_acked;	/* check every acknowledged payment is booked */
	bool		check;
	const char *recover;		/* journal directory of a killed run */
	long		max_keys;
} opt = {
	.pg = "host=127.0.0.1 dbname=seeds user=postgres",
	.redis_host = "127.0.0.1",
	.redis_port = 6379,
	.design = D_IDEM1,
	.clients = 32,
	.seconds = 10,
	.retry_seq = 0.10,
	.retry_dup = 0.05,
	.accounts = 1000,
	.prefix = "k",
	.ttl = 60,
	.poll_ms = 2,
	.patience = 120,
	.max_keys = 1 << 22,
};

/* One latency sample: microseconds, and whether the request was a new key */
typedef struct Sample
{
	uint32_t	us;
	uint8_t		fresh;
} Sample;

typedef struct Client
{
	int			id;
	unsigned int seed;
	PGconn	   *pg;
	redisContext *rd;
	Sample	   *lat;
	size_t		nlat;
	size_t		caplat;
	int64_t    *acked;			/* charges acknowledged as new payments */
	size_t		nacked;
	size_t		capacked;
	int			journal_fd;
	/* counters of requests answered before the stop */
	long		requests;
	long		fresh;
	long		replays;
	long		failed;
	long		waits;			/* "processing" / in_progress answers polled */
	long		retries;		/* errors retried */
	long		gaveup;			/* requests without an answer in time */
	long		wrong;			/* replays naming another charge */
	long		stale;			/* idem2p completions refused (ID001, ID003) */
	/* the key of the current request, as text */
	char		key[96];
	char		errmsg[256];
} Client;

static atomic_bool stop_flag;
static atomic_long next_key;
static atomic_long commits;
static _Atomic int64_t *inflight;	/* per client: the new key it works on */
static _Atomic int64_t *charge_of;	/* per key number: its charge, once known */
static atomic_int errors_printed;

/* Finished keys, for sequential retries */
#define RING 8192
static int64_t ring[RING];
static long ring_count;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_barrier_t start_barrier;

/* Seconds on the monotonic clock */
static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sleep for ms milliseconds */
static void
sleep_ms(double ms)
{
	struct timespec ts;

	ts.tv_sec = (time_t) (ms / 1000);
	ts.tv_nsec = (long) ((ms - ts.tv_sec * 1000) * 1e6);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Uniform in [0, 1) from the client's own generator */
static double
rnd(Client *c)
{
	return rand_r(&c->seed) / ((double) RAND_MAX + 1);
}

/* Print an error, at most a few of them per run */
static void
report_error(Client *c, const char *what, const char *msg)
{
	if (atomic_fetch_add(&errors_printed, 1) < 8)
		fprintf(stderr, "loadgen %s client %d: %s: %s\n", design_names[opt.design], c->id, what,
				msg ? msg : "(no message)");
}

/* The account a key pays into: the same for every try of the key */
static int
account_of(int64_t n)
{
	return (int) ((uint64_t) n * 2654435761u % (uint64_t) opt.accounts) + 1;
}

/* The amount of a key's payment */
static int
amount_of(int64_t n)
{
	return 1 + (int) (n % 97);
}

/* --- PostgreSQL ----------------------------------------------------------- */

static const char *const statements[][2] = {
	{"pay",
		"WITH pay AS (INSERT INTO ledger (k, account, amount) VALUES ($1, $2, $3) RETURNING id), "
		"     bal AS (UPDATE accounts SET balance = balance + $3 WHERE id = $2) "
	"SELECT id FROM pay"},
	{"idem1",
		"WITH c AS (SELECT * FROM idem_claim($1, $4::bytea)), "
		"     pay AS (INSERT INTO ledger (k, account, amount) "
		"             SELECT $1, $2, $3 FROM c WHERE c.status = 'claimed' "
		"             RETURNING id, idem_complete($1, jsonb_build_object('charge', id))), "
		"     bal AS (UPDATE accounts SET balance = balance + $3 "
		"             WHERE id = $2 AND EXISTS (SELECT FROM pay)) "
		"SELECT c.status, coalesce(c.response, (SELECT jsonb_build_object('charge', id) FROM pay)) "
	"FROM c"},
	{"claim", "SELECT status, response FROM idem_claim($1, $2::bytea)"},
	{"claim2p", "SELECT status, response, token FROM idem_claim($1, $2::bytea, lease => $3::interval)"},
	{"complete", "SELECT idem_complete($1, jsonb_build_object('charge', $2::bigint))"},
	{"complete2p", "SELECT idem_complete($1, jsonb_build_object('charge', $2::bigint), token => $3::bigint)"},
	{"dd_ins", "INSERT INTO dedupe (k, status) VALUES ($1, 'processing') ON CONFLICT DO NOTHING RETURNING 1"},
	{"dd_get", "SELECT status, response FROM dedupe WHERE k = $1"},
	{"dd_done", "UPDATE dedupe SET status = 'completed', response = jsonb_build_object('charge', $2::bigint) WHERE k = $1"},

	/*
	 * dedupe1: a first writer inserts its record and pays; a duplicate in
	 * flight waits on the primary key (ON CONFLICT waits for the inserter's
	 * transaction), then inserts nothing.  The last column is the stored
	 * response when this statement's snapshot sees it (a retry of a payment
	 * finished before), NULL when the record committed after it began.
	 */
	{"d1",
		"WITH id AS (SELECT nextval('ledger_id_seq') AS id), "
		"     r AS (INSERT INTO dedupe1 (scope, key, state, token, attempt, fingerprint, response, "
		"                                created_at, completed_at, expires_at) "
		"           SELECT '', $1, 'completed', 0, 1, $4::bytea, jsonb_build_object('charge', id.id), "
		"                  now(), now(), now() + interval '1 day' FROM id "
		"           ON CONFLICT DO NOTHING RETURNING 1), "
		"     pay AS (INSERT INTO ledger (id, k, account, amount) "
		"             SELECT id.id, $1, $2, $3 FROM id, r RETURNING id), "
		"     bal AS (UPDATE accounts SET balance = balance + $3 "
		"             WHERE id = $2 AND EXISTS (SELECT FROM pay)) "
		"SELECT (SELECT id FROM pay), "
		"       (SELECT d.response FROM dedupe1 d "
		"        WHERE d.key = $1 AND d.scope = '' AND NOT EXISTS (SELECT FROM pay))"},
	{"d1_get", "SELECT state, response FROM dedupe1 WHERE key = $1 AND scope = ''"},
};

/* Connect to PostgreSQL and prepare the statements; false when it cannot */
static bool
pg_connect(Client *c)
{
	size_t		i;

	if (c->pg)
		PQfinish(c->pg);
	c->pg = PQconnectdb(opt.pg);
	if (PQstatus(c->pg) != CONNECTION_OK)
	{
		snprintf(c->errmsg, sizeof(c->errmsg), "%s", PQerrorMessage(c->pg));
		PQfinish(c->pg);
		c->pg = NULL;
		return false;
	}
	for (i = 0; i < sizeof(statements) / sizeof(statements[0]); i++)
	{
		PGresult   *r = PQprepare(c->pg, statements[i][0], statements[i][1], 0, NULL);
		bool		ok = PQresultStatus(r) == PGRES_COMMAND_OK;

		if (!ok)
			snprintf(c->errmsg, sizeof(c->errmsg), "prepare %s: %s", statements[i][0],
					 PQresultErrorMessage(r));
		PQclear(r);
		if (!ok)
		{
			PQfinish(c->pg);
			c->pg = NULL;
			return false;
		}
	}
	return true;
}

/*
 * Run a prepared statement; NULL on an error, whose message is kept in
 * c->errmsg and whose SQLSTATE in sqlstate (when given)
 */
static PGresult *
pg_run(Client *c, const char *name, int n, const char *const *vals, char *sqlstate)
{
	PGresult   *r;
	ExecStatusType st;

	if (sqlstate)
		sqlstate[0] = '\0';
	if (c->pg == NULL)
		return NULL;
	r = PQexecPrepared(c->pg, name, n, vals, NULL, NULL, 0);
	st = PQresultStatus(r);
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
		return r;
	snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s", name,
			 r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
	if (sqlstate && r && PQresultErrorField(r, PG_DIAG_SQLSTATE))
		snprintf(sqlstate, 6, "%s", PQresultErrorField(r, PG_DIAG_SQLSTATE));
	PQclear(r);
	return NULL;
}

/* Run a simple command (BEGIN, COMMIT, ROLLBACK); false on an error */
static bool
pg_cmd(Client *c, const char *sql)
{
	PGresult   *r;
	bool		ok;

	if (c->pg == NULL)
		return false;
	r = PQexec(c->pg, sql);
	ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s", sql,
				 r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
	PQclear(r);
	return ok;
}

/*
 * After an error: roll back if the connection lives, else drop it so that
 * the next try connects again
 */
static Outcome
pg_abort(Client *c, const char *what)
{
	if (c->pg && PQstatus(c->pg) == CONNECTION_OK)
	{
		report_error(c, what, c->errmsg);
		if (PQtransactionStatus(c->pg) != PQTRANS_IDLE)
			pg_cmd(c, "ROLLBACK");
	}
	else if (c->pg)
	{
		PQfinish(c->pg);
		c->pg = NULL;
	}
	return OUT_RETRY;
}

/* The charge id in a response {"charge": N}; -1 when there is none */
static int64_t
charge_in(const char *json)
{
	const char *p = json ? strstr(json, "\"charge\"") : NULL;

	if (p == NULL)
		return -1;
	p += strlen("\"charge\"");
	while (*p == ' ' || *p == ':')
		p++;
	return strtoll(p, NULL, 10);
}

/* --- Redis ---------------------------------------------------------------- */

/* Connect to Redis; false when it cannot */
static bool
redis_connect(Client *c)
{
	struct timeval tv = {5, 0};

	if (c->rd)
		redisFree(c->rd);
	c->rd = redisConnectWithTimeout(opt.redis_host, opt.redis_port, tv);
	if (c->rd == NULL || c->rd->err)
	{
		snprintf(c->errmsg, sizeof(c->errmsg), "redis: %s", c->rd ? c->rd->errstr : "out of memory");
		if (c->rd)
			redisFree(c->rd);
		c->rd = NULL;
		return false;
	}
	redisSetTimeout(c->rd, tv);
	return true;
}

/* A Redis command; NULL when Redis cannot be reached (the context is dropped) */
static redisReply *
redis_run(Client *c, const char *fmt, ...)
{
	va_list		ap;
	redisReply *r;

	if (c->rd == NULL)
		return NULL;
	va_start(ap, fmt);
	r = redisvCommand(c->rd, fmt, ap);
	va_end(ap);
	if (r == NULL)
	{
		snprintf(c->errmsg, sizeof(c->errmsg), "redis: %s", c->rd->errstr);
		redisFree(c->rd);
		c->rd = NULL;
	}
	return r;
}

/*
 * Did a command fail: no reply (Redis unreachable), or an error reply
 * (LOADING while Redis reads its append-only file after a restart, say),
 * which a client library raises as an exception?  The reply is freed then.
 */
static bool
redis_failed(Client *c, redisReply *r)
{
	if (r == NULL)
		return true;
	if (r->type != REDIS_REPLY_ERROR)
		return false;
	snprintf(c->errmsg, sizeof(c->errmsg), "redis: %s", r->str);
	freeReplyObject(r);
	return true;
}

/* --- the payment and the designs ----------------------------------------- */

/* The call to the gateway: slow for a share of the calls */
static void
gateway(Client *c)
{
	if (opt.slow_share > 0 && rnd(c) < opt.slow_share)
		sleep_ms(opt.slow_ms);
}

/* Count a commit of a payment; the process kills itself at --kill-after */
static void
committed(void)
{
	if (opt.kill_after > 0 && atomic_fetch_add(&commits, 1) + 1 == opt.kill_after)
		kill(getpid(), SIGKILL);
}

/* The payment statement: ledger row and balance; its charge id, or -1 */
static int64_t
payment(Client *c, int64_t n, const char *account, const char *amount)
{
	const char *vals[3] = {c->key, account, amount};
	PGresult   *r = pg_run(c, "pay", 3, vals, NULL);
	int64_t		id;

	if (r == NULL)
		return -1;
	id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return id;
}

/* The Redis-lock design */
static Outcome
try_redis(Client *c, int64_t n, const char *account, const char *amount, int64_t *charge)
{
	redisReply *r;
	int64_t		id;

	r = redis_run(c, "SET %s PROCESSING NX EX %d", c->key, opt.ttl);
	if (redis_failed(c, r))
		return OUT_RETRY;
	if (r->type == REDIS_REPLY_NIL)
	{
		/* taken: replay, or told "processing" */
		freeReplyObject(r);
		r = redis_run(c, "GET %s", c->key);
		if (redis_failed(c, r))
			return OUT_RETRY;
		if (r->type == REDIS_REPLY_STRING && strncmp(r->str, "SUCCESS:", 8) == 0)
		{
			*charge = strtoll(r->str + 8, NULL, 10);
			freeReplyObject(r);
			return OUT_REPLAY;
		}
		if (r->type == REDIS_REPLY_STRING && strncmp(r->str, "FAILED:", 7) == 0)
		{
			freeReplyObject(r);
			return OUT_FAILED;
		}
		freeReplyObject(r);
		return OUT_WAIT;		/* PROCESSING, or gone meanwhile: ask again */
	}
	freeReplyObject(r);

	gateway(c);
	id = payment(c, n, account, amount);
	if (id < 0)
	{
		/*
		 * The database failed, or could not be reached: the outcome is not
		 * known, so no FAILED:<error> (that is for a declined payment, which
		 * this load has none of).  Release the lock and answer an error: the
		 * caller retries.
		 */
		r = redis_run(c, "DEL %s", c->key);
		if (r)
			freeReplyObject(r);
		return pg_abort(c, "payment");
	}
	committed();
	r = redis_run(c, "SET %s SUCCESS:%" PRId64 " EX 86400", c->key, id);
	if (redis_failed(c, r))
		return OUT_RETRY;		/* the caller gets an error, and retries */
	freeReplyObject(r);
	*charge = id;
	return OUT_NEW;
}

/*
 * The rest of a claimed request, in its open transaction: the gateway call,
 * the payment, the statement that stores the response ($1 key, $2 charge),
 * COMMIT
 */
static Outcome
pay_and_store(Client *c, int64_t n, const char *account, const char *amount,
			  const char *store, int64_t *charge)
{
	char		idbuf[32];
	const char *vals[2] = {c->key, idbuf};
	PGresult   *r;
	int64_t		id;

	gateway(c);
	id = payment(c, n, account, amount);
	if (id < 0)
		return pg_abort(c, "payment");
	snprintf(idbuf, sizeof(idbuf), "%" PRId64, id);
	r = pg_run(c, store, 2, vals, NULL);
	if (r == NULL)
		return pg_abort(c, store);
	PQclear(r);
	if (!pg_cmd(c, "COMMIT"))
		return pg_abort(c, "commit");
	committed();
	*charge = id;
	return OUT_NEW;
}

/* The dedupe-table design */
static Outcome
try_dedupe(Client *c, int64_t n, const char *account, const char *amount, int64_t *charge)
{
	const char *vals[1] = {c->key};
	PGresult   *r;

	if (!pg_cmd(c, "BEGIN"))
		return pg_abort(c, "begin");
	r = pg_run(c, "dd_ins", 1, vals, NULL);
	if (r == NULL)
		return pg_abort(c, "insert");
	if (PQntuples(r) == 0)
	{
		/* the key was there: read what it left */
		PQclear(r);
		r = pg_run(c, "dd_get", 1, vals, NULL);
		if (r == NULL)
			return pg_abort(c, "select");
		if (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "completed") == 0)
		{
			*charge = charge_in(PQgetvalue(r, 0, 1));
			PQclear(r);
			pg_cmd(c, "COMMIT");
			return OUT_REPLAY;
		}
		PQclear(r);
		pg_cmd(c, "COMMIT");
		return OUT_WAIT;
	}
	PQclear(r);
	return pay_and_store(c, n, account, amount, "dd_done", charge);
}

/* A one-statement design's statement ($1 key, $2 account, $3 amount, $4 fp) */
static PGresult *
one_statement(Client *c, const char *name, const char *account, const char *amount, const char *fp)
{
	const char *vals[4] = {c->key, account, amount, fp};

	return pg_run(c, name, 4, vals, NULL);
}

/* The one-statement hand-written record, autocommit */
static Outcome
try_dedupe1(Client *c, int64_t n, const char *account, const char *amount,
			const char *fp, int64_t *charge)
{
	const char *key[1] = {c->key};
	PGresult   *r = one_statement(c, "d1", account, amount, fp);
	Outcome		o = OUT_WAIT;

	if (r == NULL)
		return pg_abort(c, "statement");
	if (!PQgetisnull(r, 0, 0))
	{
		*charge = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		PQclear(r);
		committed();
		return OUT_NEW;
	}
	if (!PQgetisnull(r, 0, 1))
	{
		*charge = charge_in(PQgetvalue(r, 0, 1));
		PQclear(r);
		return OUT_REPLAY;
	}
	/* the record committed after the statement began: read it now */
	PQclear(r);
	r = pg_run(c, "d1_get", 1, key, NULL);
	if (r == NULL)
		return pg_abort(c, "select");
	/* no completed record (gone meanwhile): ask again */
	if (PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "completed") == 0)
	{
		*charge = charge_in(PQgetvalue(r, 0, 1));
		o = OUT_REPLAY;
	}
	PQclear(r);
	return o;
}

/* What idem_claim's status means to the caller (not "claimed") */
static Outcome
idem_answer(const char *status, const char *response, int64_t *charge)
{
	if (strcmp(status, "completed") == 0)
	{
		*charge = charge_in(response);
		return OUT_REPLAY;
	}
	if (strcmp(status, "failed") == 0)
		return OUT_FAILED;
	return OUT_WAIT;			/* in_progress */
}

/* idem in-transaction: BEGIN, claim, payment, complete, COMMIT */
static Outcome
try_idem5(Client *c, int64_t n, const char *account, const char *amount,
		  const char *fp, int64_t *charge)
{
	const char *vals[2] = {c->key, fp};
	PGresult   *r;

	if (!pg_cmd(c, "BEGIN"))
		return pg_abort(c, "begin");
	r = pg_run(c, "claim", 2, vals, NULL);
	if (r == NULL)
		return pg_abort(c, "claim");
	if (strcmp(PQgetvalue(r, 0, 0), "claimed") != 0)
	{
		Outcome		o = idem_answer(PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), charge);

		PQclear(r);
		pg_cmd(c, "COMMIT");
		return o;
	}
	PQclear(r);
	return pay_and_store(c, n, account, amount, "complete", charge);
}

/* idem in one statement, autocommit */
static Outcome
try_idem1(Client *c, int64_t n, const char *account, const char *amount,
		  const char *fp, int64_t *charge)
{
	PGresult   *r = one_statement(c, "idem1", account, amount, fp);
	Outcome		o;

	if (r == NULL)
		return pg_abort(c, "statement");
	if (strcmp(PQgetvalue(r, 0, 0), "claimed") == 0)
	{
		/* no response: the insert, and so the completion, wrote nothing */
		if (PQgetisnull(r, 0, 1))
			report_error(c, "statement", "claimed but nothing booked");
		*charge = charge_in(PQgetvalue(r, 0, 1));
		o = OUT_NEW;
		committed();
	}
	else
		o = idem_answer(PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), charge);
	PQclear(r);
	return o;
}

/* idem two-phase: the claim commits with a lease, the gateway, then complete */
static Outcome
try_idem2p(Client *c, int64_t n, const char *account, const char *amount,
		   const char *fp, int64_t *charge)
{
	char		lease[32];
	char		idbuf[32];
	char		token[32];
	char		sqlstate[6];
	const char *vals[3] = {c->key, fp, lease};
	PGresult   *r;
	int64_t		id;

	snprintf(lease, sizeof(lease), "%d s", opt.ttl);
	r = pg_run(c, "claim2p", 3, vals, NULL);
	if (r == NULL)
		return pg_abort(c, "claim");
	if (strcmp(PQgetvalue(r, 0, 0), "claimed") != 0)
	{
		Outcome		o = idem_answer(PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), charge);

		PQclear(r);
		return o;
	}
	snprintf(token, sizeof(token), "%s", PQgetvalue(r, 0, 2));
	PQclear(r);
	gateway(c);
	if (!pg_cmd(c, "BEGIN"))
		return pg_abort(c, "begin");
	id = payment(c, n, account, amount);
	if (id < 0)
		return pg_abort(c, "payment");
	snprintf(idbuf, sizeof(idbuf), "%" PRId64, id);
	vals[1] = idbuf;
	vals[2] = token;
	r = pg_run(c, "complete2p", 3, vals, sqlstate);
	if (r == NULL)
	{
		if (strcmp(sqlstate, "ID001") == 0 || strcmp(sqlstate, "ID003") == 0)
		{
			/*
			 * The lease ran out and another attempt took the key over (stale
			 * token), or has even finished it: stop, booking nothing
			 */
			c->stale++;
			pg_cmd(c, "ROLLBACK");
			return OUT_WAIT;
		}
		return pg_abort(c, "complete");
	}
	PQclear(r);
	if (!pg_cmd(c, "COMMIT"))
		return pg_abort(c, "commit");
	committed();
	*charge = id;
	return OUT_NEW;
}

/* No protection: the payment alone */
static Outcome
try_nodedup(Client *c, int64_t n, const char *account, const char *amount, int64_t *charge)
{
	int64_t		id = payment(c, n, account, amount);

	if (id < 0)
		return pg_abort(c, "payment");
	committed();
	*charge = id;
	return OUT_NEW;
}

/* One try of key n by the chosen design */
static Outcome
try_once(Client *c, int64_t n, int64_t *charge)
{
	char		account[16];
	char		amount[16];
	char		fp[40];

	snprintf(account, sizeof(account), "%d", account_of(n));
	snprintf(amount, sizeof(amount), "%d", amount_of(n));
	/* the request's fingerprint: what it pays, and where */
	snprintf(fp, sizeof(fp), "\\x%08x%08x", account_of(n), amount_of(n));

	if (c->pg == NULL && !pg_connect(c))
		return OUT_RETRY;
	if (opt.design == D_REDIS && c->rd == NULL && !redis_connect(c))
		return OUT_RETRY;
	switch (opt.design)
	{
		case D_REDIS:
			return try_redis(c, n, account, amount, charge);
		case D_DEDUPE:
			return try_dedupe(c, n, account, amount, charge);
		case D_DEDUPE1:
			return try_dedupe1(c, n, account, amount, fp, charge);
		case D_IDEM5:
			return try_idem5(c, n, account, amount, fp, charge);
		case D_IDEM1:
			return try_idem1(c, n, account, amount, fp, charge);
		case D_IDEM2P:
			return try_idem2p(c, n, account, amount, fp, charge);
		case D_NODEDUP:
			return try_nodedup(c, n, account, amount, charge);
	}
	return OUT_RETRY;
}

/* Append a line to the client's journal, if there is one */
static void
journal(Client *c, const char *fmt, ...)
{
	char		line[128];
	va_list		ap;
	int			len;

	if (c->journal_fd < 0)
		return;
	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (write(c->journal_fd, line, len) != len)
		report_error(c, "journal", strerror(errno));
}

/*
 * A whole request for key n, as its caller sees it: tries until an answer
 * (waiting poll_ms after "processing", a little longer after an error) or
 * until its patience runs out.  Returns the final outcome.
 */
static Outcome
request(Client *c, int64_t n, int64_t *charge, double *latency)
{
	double		t0 = now_s();
	double		deadline = t0 + opt.patience;
	Outcome		o;

	snprintf(c->key, sizeof(c->key), "%s-%" PRId64, opt.prefix, n);
	for (;;)
	{
		o = try_once(c, n, charge);
		if (o == OUT_NEW || o == OUT_REPLAY || o == OUT_FAILED)
			break;
		if (now_s() > deadline)
		{
			c->gaveup++;
			break;
		}
		if (o == OUT_WAIT)
		{
			c->waits++;
			sleep_ms(opt.poll_ms);
		}
		else
		{
			c->retries++;
			sleep_ms(50);
		}
	}
	*latency = now_s() - t0;
	return o;
}

/* Keep a latency sample */
static void
add_sample(Client *c, double secs, bool fresh)
{
	if (c->nlat == c->caplat)
	{
		c->caplat = c->caplat ? c->caplat * 2 : 4096;
		c->lat = realloc(c->lat, c->caplat * sizeof(Sample));
	}
	c->lat[c->nlat].us = (uint32_t) (secs * 1e6);
	c->lat[c->nlat].fresh = fresh;
	c->nlat++;
}

/* Keep the charge of a payment acknowledged as new */
static void
add_acked(Client *c, int64_t charge)
{
	if (c->nacked == c->capacked)
	{
		c->capacked = c->capacked ? c->capacked * 2 : 4096;
		c->acked = realloc(c->acked, c->capacked * sizeof(int64_t));
	}
	c->acked[c->nacked++] = charge;
}

/* Pick the key of the next request: a new one, a finished one or one in flight */
static int64_t
pick_key(Client *c, bool *fresh)
{
	double		u = rnd(c);
	int64_t		n = 0;

	*fresh = false;
	if (u < opt.retry_dup)
	{
		int			start = rand_r(&c->seed) % opt.clients;

		for (int i = 0; i < opt.clients && n == 0; i++)
		{
			int			j = (start + i) % opt.clients;

			if (j != c->id)
				n = atomic_load(&inflight[j]);
		}
	}
	if (n == 0 && u < opt.retry_dup + opt.retry_seq)
	{
		pthread_mutex_lock(&ring_lock);
		if (ring_count > 0)
			n = ring[rand_r(&c->seed) % (ring_count < RING ? ring_count : RING)];
		pthread_mutex_unlock(&ring_lock);
	}
	if (n == 0)
	{
		n = atomic_fetch_add(&next_key, 1) + 1;
		*fresh = true;
	}
	return n;
}

/* A client: requests until the stop */
static void *
client_main(void *arg)
{
	Client	   *c = arg;

	pthread_barrier_wait(&start_barrier);
	while (!atomic_load(&stop_flag))
	{
		bool		fresh;
		int64_t		n = pick_key(c, &fresh);
		int64_t		charge = -1;
		double		latency;
		Outcome		o;

		if (fresh)
			atomic_store(&inflight[c->id], n);
		journal(c, "S %" PRId64 "\n", n);
		o = request(c, n, &charge, &latency);
		atomic_store(&inflight[c->id], 0);
		if (o == OUT_NEW || o == OUT_REPLAY)
			journal(c, "A %" PRId64 " %" PRId64 "\n", n, charge);
		if (o == OUT_NEW)
		{
			add_acked(c, charge);
			if (n < opt.max_keys)
				atomic_store(&charge_of[n], charge);
			pthread_mutex_lock(&ring_lock);
			ring[ring_count++ % RING] = n;
			pthread_mutex_unlock(&ring_lock);
		}
		else if (o == OUT_REPLAY && n < opt.max_keys)
		{
			int64_t		known = atomic_load(&charge_of[n]);

			if (known != 0 && known != charge)
				c->wrong++;
		}
		if (atomic_load(&stop_flag))
			break;				/* answered after the stop: not counted */
		if (o == OUT_NEW || o == OUT_REPLAY || o == OUT_FAILED)
		{
			c->requests++;
			c->fresh += o == OUT_NEW;
			c->replays += o == OUT_REPLAY;
			c->failed += o == OUT_FAILED;
			add_sample(c, latency, fresh);
		}
	}
	return NULL;
}

/* Compare two samples by latency */
static int
cmp_sample(const void *a, const void *b)
{
	uint32_t	x = ((const Sample *) a)->us;
	uint32_t	y = ((const Sample *) b)->us;

	return (x > y) - (x < y);
}

/* The p-th quantile of sorted samples (only the new-key ones if fresh_only) */
static uint32_t
quantile(Sample *s, size_t n, double p, bool fresh_only)
{
	size_t		m = 0;
	size_t		want;
	size_t		i;

	for (i = 0; i < n; i++)
		m += !fresh_only || s[i].fresh;
	if (m == 0)
		return 0;
	want = (size_t) (p * (m - 1) + 0.5);
	for (i = 0; i < n; i++)
	{
		if (fresh_only && !s[i].fresh)
			continue;
		if (want-- == 0)
			return s[i].us;
	}
	return 0;
}

/* CPU time of this process so far, in microseconds */
static double
cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* How many acknowledged payments have no ledger row (checked in batches) */
static long
acked_missing(Client *clients)
{
	Client		checker = {.id = -1, .journal_fd = -1};
	long		missing = 0;

	if (!pg_connect(&checker))
	{
		fprintf(stderr, "loadgen: cannot check acknowledged payments: %s\n", checker.errmsg);
		return -1;
	}
	for (int i = 0; i < opt.clients; i++)
	{
		Client	   *c = &clients[i];

		for (size_t from = 0; from < c->nacked; from += 10000)
		{
			size_t		to = from + 10000 < c->nacked ? from + 10000 : c->nacked;
			size_t		cap = (to - from) * 21 + 3;
			char	   *arr = malloc(cap);
			size_t		len = 0;
			const char *vals[1];
			PGresult   *r;

			arr[len++] = '{';
			for (size_t k = from; k < to; k++)
				len += snprintf(arr + len, cap - len, "%s%" PRId64, k > from ? "," : "", c->acked[k]);
			arr[len++] = '}';
			arr[len] = '\0';
			vals[0] = arr;
			r = PQexecParams(checker.pg,
							 "SELECT count(*) FROM unnest($1::bigint[]) a(id) "
							 "WHERE NOT EXISTS (SELECT FROM ledger l WHERE l.id = a.id)",
							 1, NULL, vals, NULL, NULL, 0);
			if (PQresultStatus(r) == PGRES_TUPLES_OK)
				missing += atol(PQgetvalue(r, 0, 0));
			else
				fprintf(stderr, "loadgen: check of acknowledged payments: %s", PQresultErrorMessage(r));
			PQclear(r);
			free(arr);
		}
	}
	PQfinish(checker.pg);
	return missing;
}

/* Start the clients, let them run, and print the run's line */
static int
run_load(void)
{
	Client	   *clients = calloc(opt.clients, sizeof(Client));
	pthread_t  *threads = calloc(opt.clients, sizeof(pthread_t));
	double		t0,
				t1,
				cpu0,
				cpu1;
	Sample	   *all;
	size_t		nall = 0;
	long		tot[9] = {0};

	inflight = calloc(opt.clients, sizeof(*inflight));
	charge_of = calloc(opt.max_keys, sizeof(*charge_of));
	pthread_barrier_init(&start_barrier, NULL, opt.clients + 1);
	for (int i = 0; i < opt.clients; i++)
	{
		Client	   *c = &clients[i];

		c->id = i;
		c->seed = (unsigned int) (i * 7919 + getpid());
		c->journal_fd = -1;
		if (opt.journal)
		{
			char		path[512];

			snprintf(path, sizeof(path), "%s/client-%d", opt.journal, i);
			c->journal_fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		}
		if (!pg_connect(c) || (opt.design == D_REDIS && !redis_connect(c)))
		{
			fprintf(stderr, "loadgen: client %d cannot connect: %s\n", i, c->errmsg);
			return 1;
		}
	}
	for (int i = 0; i < opt.clients; i++)
		pthread_create(&threads[i], NULL, client_main, &clients[i]);
	pthread_barrier_wait(&start_barrier);
	t0 = now_s();
	cpu0 = cpu_us();
	sleep_ms(opt.seconds * 1000);
	atomic_store(&stop_flag, true);
	t1 = now_s();
	cpu1 = cpu_us();
	for (int i = 0; i < opt.clients; i++)
		pthread_join(threads[i], NULL);

	for (int i = 0; i < opt.clients; i++)
		nall += clients[i].nlat;
	all = malloc((nall + 1) * sizeof(Sample));
	nall = 0;
	for (int i = 0; i < opt.clients; i++)
	{
		Client	   *c = &clients[i];

		memcpy(all + nall, c->lat, c->nlat * sizeof(Sample));
		nall += c->nlat;
		tot[0] += c->requests;
		tot[1] += c->fresh;
		tot[2] += c->replays;
		tot[3] += c->failed;
		tot[4] += c->waits;
		tot[5] += c->retries;
		tot[6] += c->gaveup;
		tot[7] += c->wrong;
		tot[8] += c->stale;
	}
	qsort(all, nall, sizeof(Sample), cmp_sample);
	printf("design=%s clients=%d seconds=%.2f requests=%ld rps=%.1f p50_us=%u p99_us=%u "
		   "p50_new_us=%u p99_new_us=%u new=%ld replays=%ld failed=%ld waits=%ld retries=%ld "
		   "gaveup=%ld wrong_replays=%ld stale=%ld client_cpu_us_per_req=%.1f",
		   design_names[opt.design], opt.clients, t1 - t0, tot[0], tot[0] / (t1 - t0),
		   quantile(all, nall, 0.50, false), quantile(all, nall, 0.99, false),
		   quantile(all, nall, 0.50, true), quantile(all, nall, 0.99, true),
		   tot[1], tot[2], tot[3], tot[4], tot[5], tot[6], tot[7], tot[8],
		   tot[0] ? (cpu1 - cpu0) / tot[0] : 0.0);
	if (opt.verify_acked)
		printf(" acked_missing=%ld", acked_missing(clients));
	printf("\n");
	fflush(stdout);
	/* leave without closing: the connections go with the process */
	_exit(0);
}

/* --- after a run: double charges and lost results ------------------------- */

/* Count double charges and lost results of the keys <prefix>-* */
static int
run_check(void)
{
	Client		c = {.id = -1, .journal_fd = -1};
	char		like[128];
	const char *vals[1] = {like};
	PGresult   *r;
	long		keys,
				doubles,
				extra,
				lost = 0;

	snprintf(like, sizeof(like), "%s-%%", opt.prefix);
	if (!pg_connect(&c))
	{
		fprintf(stderr, "loadgen: %s\n", c.errmsg);
		return 1;
	}
	r = PQexecParams(c.pg,
					 "SELECT count(*), count(*) FILTER (WHERE n > 1), coalesce(sum(n - 1), 0) "
					 "FROM (SELECT k, count(*) AS n FROM ledger WHERE k LIKE $1 GROUP BY k) s",
					 1, NULL, vals, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "loadgen: %s", PQresultErrorMessage(r));
		return 1;
	}
	keys = atol(PQgetvalue(r, 0, 0));
	doubles = atol(PQgetvalue(r, 0, 1));
	extra = atol(PQgetvalue(r, 0, 2));
	PQclear(r);

	if (opt.design == D_REDIS)
	{
		/* every booked key must have SUCCESS:<one of its charges> in Redis */
		int			i,
					rows;

		if (!redis_connect(&c))
		{
			fprintf(stderr, "loadgen: %s\n", c.errmsg);
			return 1;
		}
		r = PQexecParams(c.pg,
						 "SELECT k, ',' || string_agg(id::text, ',') || ',' FROM ledger "
						 "WHERE k LIKE $1 GROUP BY k",
						 1, NULL, vals, NULL, NULL, 0);
		rows = PQntuples(r);
		for (i = 0; i < rows; i += 1000)
		{
			int			j,
						end = i + 1000 < rows ? i + 1000 : rows;

			for (j = i; j < end; j++)
				redisAppendCommand(c.rd, "GET %s", PQgetvalue(r, j, 0));
			for (j = i; j < end; j++)
			{
				redisReply *rep;
				char		want[40];

				if (redisGetReply(c.rd, (void **) &rep) != REDIS_OK)
				{
					fprintf(stderr, "loadgen: redis: %s\n", c.rd->errstr);
					return 1;
				}
				if (rep->type != REDIS_REPLY_STRING || strncmp(rep->str, "SUCCESS:", 8) != 0)
					lost++;
				else
				{
					snprintf(want, sizeof(want), ",%s,", rep->str + 8);
					if (strstr(PQgetvalue(r, j, 1), want) == NULL)
						lost++;
				}
				freeReplyObject(rep);
			}
		}
		PQclear(r);
	}
	else if (opt.design != D_NODEDUP)
	{
		const char *sql = opt.design == D_DEDUPE ?
			"SELECT count(*) FROM (SELECT k, array_agg(id) AS ids FROM ledger WHERE k LIKE $1 GROUP BY k) l "
			"LEFT JOIN dedupe d USING (k) "
			"WHERE d.status IS DISTINCT FROM 'completed' "
			"   OR NOT ((d.response->>'charge')::bigint = ANY (l.ids))" :
			opt.design == D_DEDUPE1 ?
			"SELECT count(*) FROM (SELECT k, array_agg(id) AS ids FROM ledger WHERE k LIKE $1 GROUP BY k) l "
			"LEFT JOIN dedupe1 d ON d.key = l.k AND d.scope = '' "
			"WHERE d.state IS DISTINCT FROM 'completed' "
			"   OR NOT ((d.response->>'charge')::bigint = ANY (l.ids))" :
			"SELECT count(*) FROM (SELECT k, array_agg(id) AS ids FROM ledger WHERE k LIKE $1 GROUP BY k) l "
			"LEFT JOIN idem.keys ik ON ik.key = l.k AND ik.scope = '' "
			"WHERE ik.state IS DISTINCT FROM 'completed' "
			"   OR NOT ((ik.response->>'charge')::bigint = ANY (l.ids))";

		r = PQexecParams(c.pg, sql, 1, NULL, vals, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
		{
			fprintf(stderr, "loadgen: %s", PQresultErrorMessage(r));
			return 1;
		}
		lost = atol(PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	printf("design=%s keys_booked=%ld double_charged_keys=%ld extra_charges=%ld lost_results=%ld\n",
		   design_names[opt.design], keys, doubles, extra, opt.design == D_NODEDUP ? 0 : lost);
	return 0;
}

/* --- after a kill: the callers retry what was not answered --------------- */

/* Retry every key the journals show started and not answered */
static int
run_recover(void)
{
	DIR		   *d = opendir(opt.recover);
	struct dirent *e;
	int64_t    *open_keys = NULL;
	size_t		nopen = 0,
				cap = 0;
	long		fresh = 0,
				replays = 0,
				failed = 0,
				gaveup = 0;
	Client		c = {.id = 0, .journal_fd = -1};

	if (d == NULL)
	{
		perror(opt.recover);
		return 1;
	}
	while ((e = readdir(d)) != NULL)
	{
		char		path[768];
		FILE	   *f;
		char		kind;
		int64_t		n,
					ch,
					pending = 0;

		if (strncmp(e->d_name, "client-", 7) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", opt.recover, e->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		/* a client runs one request at a time: the last S without its A */
		while (fscanf(f, " %c %" SCNd64, &kind, &n) == 2)
		{
			if (kind == 'S')
				pending = n;
			else if (fscanf(f, " %" SCNd64, &ch) == 1 && n == pending)
				pending = 0;
		}
		fclose(f);
		if (pending)
		{
			if (nopen == cap)
			{
				cap = cap ? cap * 2 : 64;
				open_keys = realloc(open_keys, cap * sizeof(int64_t));
			}
			open_keys[nopen++] = pending;
		}
	}
	closedir(d);
	c.seed = getpid();
	for (size_t i = 0; i < nopen; i++)
	{
		int64_t		charge;
		double		latency;
		Outcome		o = request(&c, open_keys[i], &charge, &latency);

		fresh += o == OUT_NEW;
		replays += o == OUT_REPLAY;
		failed += o == OUT_FAILED;
		gaveup += !(o == OUT_NEW || o == OUT_REPLAY || o == OUT_FAILED);
	}
	printf("design=%s retried=%zu paid_again=%ld replayed=%ld failed=%ld gaveup=%ld waits=%ld\n",
		   design_names[opt.design], nopen, fresh, replays, failed, gaveup, c.waits);
	return 0;
}

/* Compare two doubles */
static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* The median round trip of n PINGs to Redis and n empty queries to PostgreSQL */
static int
run_ping(int n)
{
	Client		c = {.id = -1, .journal_fd = -1};
	double	   *pg = calloc(n, sizeof(double));
	double	   *rd = calloc(n, sizeof(double));

	if (!pg_connect(&c) || !redis_connect(&c))
	{
		fprintf(stderr, "loadgen: %s\n", c.errmsg);
		return 1;
	}
	for (int i = 0; i < n; i++)
	{
		double		t = now_s();
		PGresult   *r = PQexec(c.pg, "");
		redisReply *rep;

		pg[i] = now_s() - t;
		PQclear(r);
		t = now_s();
		rep = redis_run(&c, "PING");
		rd[i] = now_s() - t;
		if (rep == NULL)
			return 1;
		freeReplyObject(rep);
		sleep_ms(1);
	}
	qsort(pg, n, sizeof(double), cmp_double);
	qsort(rd, n, sizeof(double), cmp_double);
	printf("rtt_pg_us=%.0f rtt_redis_us=%.0f\n", pg[n / 2] * 1e6, rd[n / 2] * 1e6);
	return 0;
}

/* Print the usage and leave */
static void
usage(void)
{
	fprintf(stderr,
			"usage: loadgen --design redis|dedupe|dedupe1|idem5|idem1|idem2p|nodedup [options]\n"
			"  --pg CONNINFO --redis HOST:PORT --clients N --seconds S --prefix P\n"
			"  --retry-seq F --retry-dup F --accounts N --ttl S --poll-ms MS --patience S\n"
			"  --slow-share F --slow-ms MS --kill-after N --journal DIR --verify-acked\n"
			"  --check (count double charges and lost results of <prefix>-*)\n"
			"  --recover DIR (retry what a killed run left unanswered)\n"
			"  --ping N (median round trip to both servers)\n");
	exit(2);
}

/* Read the options and do what they ask */
int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"pg", required_argument, NULL, 'p'},
		{"redis", required_argument, NULL, 'r'},
		{"design", required_argument, NULL, 'd'},
		{"clients", required_argument, NULL, 'c'},
		{"seconds", required_argument, NULL, 's'},
		{"retry-seq", required_argument, NULL, 'q'},
		{"retry-dup", required_argument, NULL, 'u'},
		{"accounts", required_argument, NULL, 'a'},
		{"prefix", required_argument, NULL, 'x'},
		{"ttl", required_argument, NULL, 't'},
		{"poll-ms", required_argument, NULL, 'o'},
		{"patience", required_argument, NULL, 'P'},
		{"slow-share", required_argument, NULL, 'w'},
		{"slow-ms", required_argument, NULL, 'W'},
		{"kill-after", required_argument, NULL, 'k'},
		{"journal", required_argument, NULL, 'j'},
		{"verify-acked", no_argument, NULL, 'v'},
		{"check", no_argument, NULL, 'C'},
		{"recover", required_argument, NULL, 'R'},
		{"ping", required_argument, NULL, 'i'},
		{NULL, 0, NULL, 0}
	};
	int			ch;
	int			ping = 0;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1)
	{
		switch (ch)
		{
			case 'p':
				opt.pg = optarg;
				break;
			case 'r':
				{
					char	   *colon = strrchr(optarg, ':');

					if (colon == NULL)
						usage();
					*colon = '\0';
					opt.redis_host = optarg;
					opt.redis_port = atoi(colon + 1);
					break;
				}
			case 'd':
				{
					size_t		i;

					for (i = 0; i < sizeof(design_names) / sizeof(design_names[0]); i++)
						if (strcmp(optarg, design_names[i]) == 0)
							break;
					if (i == sizeof(design_names) / sizeof(design_names[0]))
						usage();
					opt.design = (Design) i;
					break;
				}
			case 'c':
				opt.clients = atoi(optarg);
				break;
			case 's':
				opt.seconds = atof(optarg);
				break;
			case 'q':
				opt.retry_seq = atof(optarg);
				break;
			case 'u':
				opt.retry_dup = atof(optarg);
				break;
			case 'a':
				opt.accounts = atoi(optarg);
				break;
			case 'x':
				opt.prefix = optarg;
				break;
			case 't':
				opt.ttl = atoi(optarg);
				break;
			case 'o':
				opt.poll_ms = atoi(optarg);
				break;
			case 'P':
				opt.patience = atof(optarg);
				break;
			case 'w':
				opt.slow_share = atof(optarg);
				break;
			case 'W':
				opt.slow_ms = atoi(optarg);
				break;
			case 'k':
				opt.kill_after = atol(optarg);
				break;
			case 'j':
				opt.journal = optarg;
				break;
			case 'v':
				opt.verify_acked = true;
				break;
			case 'C':
				opt.check = true;
				break;
			case 'R':
				opt.recover = optarg;
				break;
			case 'i':
				ping = atoi(optarg);
				break;
			default:
				usage();
		}
	}
	if (opt.clients < 1 || opt.clients > 1000 || opt.accounts < 1)
		usage();
	signal(SIGPIPE, SIG_IGN);
	if (ping > 0)
		return run_ping(ping);
	if (opt.check)
		return run_check();
	if (opt.recover)
		return run_recover();
	return run_load();
}
