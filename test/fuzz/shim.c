/*
 * shim.c
 *		The server functions that idem's webhook readers call, implemented
 *		for the fuzz targets, which run them outside the server.
 *
 * Stood in for here (test/fuzz/README says why each is not the server's
 * own code):
 *   - memory contexts: palloc and its family on malloc, one chunk per
 *     allocation, so that AddressSanitizer sees every chunk's bounds.  Each
 *     input allocates in one context that fuzz_end frees whole, as the
 *     server frees a function call's memory; TopMemoryContext (idem's key
 *     caches) lives as long as the run.
 *   - ereport and elog: an ERROR stops the run with its message.  The
 *     readers promise never to raise one for anything a request holds, so
 *     reaching ereport(ERROR) from any input is a finding.  A target that
 *     feeds a configuration (a secret), which may raise 22023 by design,
 *     says so with fuzz_allow_error and catches it with PG_TRY.
 *   - the database encoding, and conversion between encodings: glibc's
 *     iconv, behind FindDefaultConversionProc and
 *     pg_do_encoding_conversion_buf with the server's contract.
 *   - jsonb containers: the server's on-disk layout, written by a minimal
 *     encoder and read by a minimal iterator and key lookup.
 *   - lists (lappend), the clock (fixed), detoasting (nothing is toasted),
 *     jsonb_in (for idem_wechatpay_decrypt's result) and the table of
 *     CRC-32.
 * Real: libpgcommon's JSON parser, StringInfo, hashing, psprintf and
 * encoding verification; libpgport; OpenSSL's libcrypto.
 */
#include "postgres.h"

#include <errno.h>
#include <iconv.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "catalog/namespace.h"
#include "common/jsonapi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "nodes/memnodes.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/pg_crc.h"
#include "utils/timestamp.h"

#include "webhook/crypto.h"

#include "fuzz.h"

/* ---------------------------------------------------------------- */
/* Failing */
/* ---------------------------------------------------------------- */

/* Stop the run with a message: a finding */
void
fuzz_fail(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "idem fuzz: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	abort();
}

/* An Assert() of idem's that fails (idem is built with its assertions on) */
void
ExceptionalCondition(const char *conditionName, const char *errorType,
					 const char *fileName, int lineNumber)
{
	fuzz_fail("%s(\"%s\") failed at %s:%d", errorType, conditionName,
			  fileName, lineNumber);
}

/* ---------------------------------------------------------------- */
/* Memory contexts */
/* ---------------------------------------------------------------- */

/*
 * A chunk: its links in its context's list, its size, and, just before the
 * memory handed out, its context (where the server keeps it too)
 */
typedef struct FuzzChunk
{
	struct FuzzChunk *prev;
	struct FuzzChunk *next;
	Size		size;
	MemoryContext context;
} FuzzChunk;

StaticAssertDecl(sizeof(FuzzChunk) % MAXIMUM_ALIGNOF == 0,
				 "chunk header keeps alignment");

/* A context: the server's header (never read) and its chunks */
typedef struct FuzzContext
{
	MemoryContextData header;
	FuzzChunk	chunks;			/* list head */
} FuzzContext;

static FuzzContext top_context;
static FuzzContext input_context;

MemoryContext TopMemoryContext = &top_context.header;
MemoryContext CurrentMemoryContext = &input_context.header;
MemoryContext ErrorContext = &input_context.header;

/* The FuzzContext of a context idem passes */
static FuzzContext *
fuzz_context(MemoryContext context)
{
	if (context != &top_context.header && context != &input_context.header)
		fuzz_fail("allocation in an unknown memory context %p", (void *) context);
	return (FuzzContext *) context;
}

/* The chunk of a pointer handed out */
static FuzzChunk *
chunk_of(void *pointer)
{
	return (FuzzChunk *) ((char *) pointer - sizeof(FuzzChunk));
}

/* Allocate in a context, as MemoryContextAllocExtended does */
void *
MemoryContextAllocExtended(MemoryContext context, Size size, int flags)
{
	FuzzContext *cx = fuzz_context(context);
	FuzzChunk  *chunk;
	void	   *pointer;

	if (((flags & MCXT_ALLOC_HUGE) != 0 && !AllocHugeSizeIsValid(size)) ||
		((flags & MCXT_ALLOC_HUGE) == 0 && !AllocSizeIsValid(size)))
		elog(ERROR, "invalid memory alloc request size %zu", size);
	chunk = malloc(sizeof(FuzzChunk) + size);
	if (chunk == NULL)
	{
		if ((flags & MCXT_ALLOC_NO_OOM) != 0)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Failed on request of size %zu.", size)));
	}
	chunk->size = size;
	chunk->context = context;
	chunk->prev = &cx->chunks;
	chunk->next = cx->chunks.next;
	if (chunk->next != NULL)
		chunk->next->prev = chunk;
	cx->chunks.next = chunk;
	pointer = (char *) chunk + sizeof(FuzzChunk);
	if ((flags & MCXT_ALLOC_ZERO) != 0)
		memset(pointer, 0, size);
	return pointer;
}

/* MemoryContextAlloc */
void *
MemoryContextAlloc(MemoryContext context, Size size)
{
	return MemoryContextAllocExtended(context, size, 0);
}

/* MemoryContextAllocZero */
void *
MemoryContextAllocZero(MemoryContext context, Size size)
{
	return MemoryContextAllocExtended(context, size, MCXT_ALLOC_ZERO);
}

/* MemoryContextAllocZeroAligned */
void *
MemoryContextAllocZeroAligned(MemoryContext context, Size size)
{
	return MemoryContextAllocExtended(context, size, MCXT_ALLOC_ZERO);
}

/* MemoryContextAllocHuge */
void *
MemoryContextAllocHuge(MemoryContext context, Size size)
{
	return MemoryContextAllocExtended(context, size, MCXT_ALLOC_HUGE);
}

/* palloc */
void *
palloc(Size size)
{
	return MemoryContextAllocExtended(CurrentMemoryContext, size, 0);
}

/* palloc0 */
void *
palloc0(Size size)
{
	return MemoryContextAllocExtended(CurrentMemoryContext, size, MCXT_ALLOC_ZERO);
}

/* palloc_extended */
void *
palloc_extended(Size size, int flags)
{
	return MemoryContextAllocExtended(CurrentMemoryContext, size, flags);
}

/* pfree: unlink the chunk from its context and free it */
void
pfree(void *pointer)
{
	FuzzChunk  *chunk = chunk_of(pointer);

	(void) fuzz_context(chunk->context);
	chunk->prev->next = chunk->next;
	if (chunk->next != NULL)
		chunk->next->prev = chunk->prev;
	free(chunk);
}

/* repalloc_extended: a new chunk in the same context, the old one freed */
void *
repalloc_extended(void *pointer, Size size, int flags)
{
	FuzzChunk  *chunk = chunk_of(pointer);
	void	   *copy;

	copy = MemoryContextAllocExtended(chunk->context, size, flags);
	if (copy == NULL)
		return NULL;
	memcpy(copy, pointer, Min(size, chunk->size));
	pfree(pointer);
	return copy;
}

/* repalloc */
void *
repalloc(void *pointer, Size size)
{
	return repalloc_extended(pointer, size, 0);
}

/* repalloc_huge */
void *
repalloc_huge(void *pointer, Size size)
{
	return repalloc_extended(pointer, size, MCXT_ALLOC_HUGE);
}

/* MemoryContextStrdup */
char *
MemoryContextStrdup(MemoryContext context, const char *string)
{
	size_t		len = strlen(string) + 1;
	char	   *copy = MemoryContextAlloc(context, len);

	memcpy(copy, string, len);
	return copy;
}

/* pstrdup */
char *
pstrdup(const char *in)
{
	return MemoryContextStrdup(CurrentMemoryContext, in);
}

/* pnstrdup */
char *
pnstrdup(const char *in, Size len)
{
	char	   *copy;

	len = strnlen(in, len);
	copy = palloc(len + 1);
	memcpy(copy, in, len);
	copy[len] = '\0';
	return copy;
}

/* Free every chunk of the per-input context */
static void
reset_input_context(void)
{
	FuzzChunk  *chunk = input_context.chunks.next;

	while (chunk != NULL)
	{
		FuzzChunk  *next = chunk->next;

		free(chunk);
		chunk = next;
	}
	input_context.chunks.next = NULL;
}

/* ---------------------------------------------------------------- */
/* Errors */
/* ---------------------------------------------------------------- */

sigjmp_buf *PG_exception_stack = NULL;
ErrorContextCallback *error_context_stack = NULL;

/* The error being reported */
static struct
{
	int			elevel;
	int			sqlerrcode;
	char		message[1024];
	char		detail[1024];
} report;

/* The SQLSTATE that a caller's PG_TRY catches; 0 for none */
static int	allowed_error = 0;

/* The SQLSTATE of the last error caught */
static int	last_error = 0;

/* The five characters of a SQLSTATE */
static const char *
sqlstate(int code)
{
	static char buf[6];

	for (int i = 0; i < 5; i++)
	{
		buf[i] = PGUNSIXBIT(code);
		code >>= 6;
	}
	buf[5] = '\0';
	return buf;
}

/* An ereport starts: only ERROR and above are kept */
bool
errstart(int elevel, const char *domain)
{
	if (elevel < ERROR)
		return false;
	memset(&report, 0, sizeof(report));
	report.elevel = elevel;
	report.sqlerrcode = ERRCODE_INTERNAL_ERROR;
	return true;
}

/* errstart for an elevel known to be ERROR or above */
bool
errstart_cold(int elevel, const char *domain)
{
	return errstart(elevel, domain);
}

/*
 * An ereport(ERROR) ends: caught by the caller's PG_TRY when the target
 * allows its SQLSTATE, else the run stops with its message: no input may
 * make a reader raise an error.
 */
void
errfinish(const char *filename, int lineno, const char *funcname)
{
	if (report.elevel < ERROR)
		return;
	if (report.sqlerrcode == allowed_error && allowed_error != 0 &&
		PG_exception_stack != NULL)
	{
		last_error = report.sqlerrcode;
		siglongjmp(*PG_exception_stack, 1);
	}
	fuzz_fail("ereport(ERROR) reached at %s:%d (%s): SQLSTATE %s: %s%s%s",
			  filename, lineno, funcname ? funcname : "?",
			  sqlstate(report.sqlerrcode), report.message,
			  report.detail[0] ? "\nDETAIL: " : "", report.detail);
}

/* PG_RE_THROW, PG_FINALLY's end: on to the next PG_TRY out */
void
pg_re_throw(void)
{
	if (PG_exception_stack == NULL)
		fuzz_fail("an error was re-thrown outside every PG_TRY: SQLSTATE %s: %s",
				  sqlstate(report.sqlerrcode), report.message);
	siglongjmp(*PG_exception_stack, 1);
}

/* FlushErrorState: the caught error is handled */
void
FlushErrorState(void)
{
	memset(&report, 0, sizeof(report));
}

/* errcode */
int
errcode(int sqlerrcode)
{
	report.sqlerrcode = sqlerrcode;
	return 0;
}

/* errmsg */
int
errmsg(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(report.message, sizeof(report.message), fmt, ap);
	va_end(ap);
	return 0;
}

/* errmsg_internal (elog's) */
int
errmsg_internal(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(report.message, sizeof(report.message), fmt, ap);
	va_end(ap);
	return 0;
}

/* errdetail */
int
errdetail(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(report.detail, sizeof(report.detail), fmt, ap);
	va_end(ap);
	return 0;
}

/* errhint: not shown */
int
errhint(const char *fmt,...)
{
	return 0;
}

/* Allow (and catch) errors of one SQLSTATE, or none */
void
fuzz_allow_error(int sqlerrcode)
{
	allowed_error = sqlerrcode;
	last_error = 0;
}

/* The SQLSTATE of the last error a PG_TRY caught, 0 if none */
int
fuzz_last_error(void)
{
	return last_error;
}

/* ---------------------------------------------------------------- */
/* Encodings */
/* ---------------------------------------------------------------- */

static int	database_encoding = PG_UTF8;

/* GetDatabaseEncoding: the encoding the target set for this input */
int
GetDatabaseEncoding(void)
{
	return database_encoding;
}

/* iconv's name of an encoding this shim converts, or NULL */
static const char *
iconv_name(int encoding)
{
	switch (encoding)
	{
		case PG_UTF8:
			return "UTF-8";
		case PG_GBK:
			return "GBK";
		case PG_GB18030:
			return "GB18030";
		case PG_EUC_CN:
			return "EUC-CN";
		case PG_LATIN1:
			return "ISO-8859-1";
	}
	return NULL;
}

/* The made-up OID of the conversion proc from one encoding to another */
#define CONVERSION_PROC(from, to)	((Oid) (900000 + (from) * 100 + (to)))

/*
 * FindDefaultConversionProc: as the server's catalog has them for these
 * encodings, a default conversion between UTF-8 and each of the others,
 * none between two others (EUC_CN to GBK goes through UTF-8)
 */
Oid
FindDefaultConversionProc(int32 for_encoding, int32 to_encoding)
{
	if (for_encoding == to_encoding ||
		(for_encoding != PG_UTF8 && to_encoding != PG_UTF8) ||
		iconv_name(for_encoding) == NULL || iconv_name(to_encoding) == NULL)
		return InvalidOid;
	return CONVERSION_PROC(for_encoding, to_encoding);
}

/* An iconv descriptor from one encoding to another, opened once */
static iconv_t
converter(int from, int to)
{
	static iconv_t cds[_PG_LAST_ENCODING_][_PG_LAST_ENCODING_];
	static bool opened[_PG_LAST_ENCODING_][_PG_LAST_ENCODING_];

	if (!opened[from][to])
	{
		cds[from][to] = iconv_open(iconv_name(to), iconv_name(from));
		if (cds[from][to] == (iconv_t) -1)
			fuzz_fail("iconv cannot convert %s to %s", iconv_name(from), iconv_name(to));
		opened[from][to] = true;
	}
	return cds[from][to];
}

/*
 * pg_do_encoding_conversion_buf: the server's contract.  The input is cut
 * so that the worst case fits the output; whole characters are converted
 * and the output NUL-terminated; with noError, the conversion stops before
 * a character that is invalid, incomplete or has no equivalent, and the
 * number of input bytes converted is the answer.
 */
int
pg_do_encoding_conversion_buf(Oid proc, int src_encoding, int dest_encoding,
							  unsigned char *src, int srclen,
							  unsigned char *dest, int destlen, bool noError)
{
	iconv_t		cd;
	char	   *in = (char *) src;
	size_t		inleft;
	char	   *out = (char *) dest;
	size_t		outleft;

	if (proc != CONVERSION_PROC(src_encoding, dest_encoding))
		fuzz_fail("conversion proc %u does not convert %s to %s", proc,
				  pg_encoding_to_char(src_encoding), pg_encoding_to_char(dest_encoding));
	if ((Size) srclen >= ((destlen - 1) / (Size) MAX_CONVERSION_GROWTH))
		srclen = ((destlen - 1) / (Size) MAX_CONVERSION_GROWTH);
	cd = converter(src_encoding, dest_encoding);
	iconv(cd, NULL, NULL, NULL, NULL);
	inleft = srclen;
	outleft = destlen - 1;
	if (iconv(cd, &in, &inleft, &out, &outleft) == (size_t) -1)
	{
		if (errno == E2BIG)
			fuzz_fail("conversion from %s to %s grew more than MAX_CONVERSION_GROWTH",
					  pg_encoding_to_char(src_encoding), pg_encoding_to_char(dest_encoding));
		if (!noError)
			ereport(ERROR,
					(errcode(ERRCODE_UNTRANSLATABLE_CHARACTER),
					 errmsg("character cannot be converted from \"%s\" to \"%s\"",
							pg_encoding_to_char(src_encoding),
							pg_encoding_to_char(dest_encoding))));
	}
	*out = '\0';
	return in - (char *) src;
}

/* pg_verify_mbstr: libpgcommon's check, raising as the server does */
bool
pg_verify_mbstr(int encoding, const char *mbstr, int len, bool noError)
{
	if (pg_encoding_verifymbstr(encoding, mbstr, len) == len)
		return true;
	if (noError)
		return false;
	ereport(ERROR,
			(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
			 errmsg("invalid byte sequence for encoding \"%s\"",
					pg_encoding_to_char(encoding))));
	return false;
}

/*
 * pg_any_to_server: text in the database encoding is checked and given
 * back as it is.  Converting to another database encoding is not stood in
 * for (the targets that reach it run in UTF-8).
 */
char *
pg_any_to_server(const char *s, int len, int encoding)
{
	if (len <= 0)
		return unconstify(char *, s);
	if (encoding != database_encoding && encoding != PG_SQL_ASCII)
		fuzz_fail("pg_any_to_server from %s to %s is not stood in for",
				  pg_encoding_to_char(encoding),
				  pg_encoding_to_char(database_encoding));
	(void) pg_verify_mbstr(database_encoding, s, len, false);
	return unconstify(char *, s);
}

/* Could the server hold these bytes as text in that encoding? */
bool
fuzz_valid_text(const char *data, size_t len, int encoding)
{
	return len <= MaxAllocSize && memchr(data, '\0', len) == NULL &&
		pg_encoding_verifymbstr(encoding, data, (int) len) == (int) len;
}

/* ---------------------------------------------------------------- */
/* The JSON parser, checked */
/* ---------------------------------------------------------------- */

/*
 * libpgcommon's parser is the frontend build of the server's: where the
 * server's lexer converts a \u escape beyond ASCII to a database encoding
 * other than UTF-8 (which raises an error when the character has no
 * equivalent there), this one answers JSON_UNICODE_HIGH_ESCAPE.  idem
 * promises (wire_json.c, json_safe_to_parse) never to hand the server's
 * parser such text, so that answer is a finding.
 */
JsonParseErrorType
__wrap_pg_parse_json(JsonLexContext *lex, JsonSemAction *sem)
{
	JsonParseErrorType result = __real_pg_parse_json(lex, sem);

	if (result == JSON_UNICODE_HIGH_ESCAPE)
		fuzz_fail("the server's JSON lexer would convert a \\u escape beyond ASCII to %s, which can raise an error",
				  pg_encoding_to_char(lex->input_encoding));
	return result;
}

/* ---------------------------------------------------------------- */
/* jsonb */
/* ---------------------------------------------------------------- */

/* A JSON value as the encoder below takes it */
typedef struct FuzzJson
{
	enum
	{
		FJ_NULL, FJ_STRING, FJ_NUMBER, FJ_TRUE, FJ_FALSE, FJ_OBJECT, FJ_ARRAY
	}			kind;
	char	   *string;			/* a string's bytes */
	int			len;
	int			n;				/* members or elements */
	int			cap;
	char	  **keys;			/* an object's member names */
	int		   *keylens;
	struct FuzzJson **children;
} FuzzJson;

/* A new node of a kind */
static FuzzJson *
json_node(int kind)
{
	FuzzJson   *node = palloc0(sizeof(FuzzJson));

	node->kind = kind;
	return node;
}

/* Add a member (key != NULL) or an element to a container */
static void
json_add(FuzzJson *parent, char *key, int keylen, FuzzJson *child)
{
	if (parent->n == parent->cap)
	{
		int			cap = Max(4, parent->cap * 2);

		parent->children = parent->children ?
			repalloc(parent->children, cap * sizeof(FuzzJson *)) :
			palloc(cap * sizeof(FuzzJson *));
		parent->keys = parent->keys ? repalloc(parent->keys, cap * sizeof(char *)) :
			palloc(cap * sizeof(char *));
		parent->keylens = parent->keylens ? repalloc(parent->keylens, cap * sizeof(int)) :
			palloc(cap * sizeof(int));
		parent->cap = cap;
	}
	parent->keys[parent->n] = key;
	parent->keylens[parent->n] = keylen;
	parent->children[parent->n] = child;
	parent->n++;
}

/* Nesting the builder takes (libpgcommon's parser checks no stack depth) */
#define BUILD_MAX_DEPTH		256

/* The state of a parse into FuzzJson nodes */
typedef struct JsonBuild
{
	FuzzJson   *root;
	FuzzJson   *stack[BUILD_MAX_DEPTH];
	int			depth;
	char	   *key;			/* the member whose value comes next */
} JsonBuild;

/* A value is complete: the root, or a child of the open container */
static void
build_attach(JsonBuild *b, FuzzJson *node)
{
	if (b->depth == 0)
		b->root = node;
	else
	{
		FuzzJson   *parent = b->stack[b->depth - 1];

		if (parent->kind == FJ_OBJECT)
			json_add(parent, b->key, strlen(b->key), node);
		else
			json_add(parent, NULL, 0, node);
	}
}

/* A container starts */
static void
build_open(JsonBuild *b, int kind)
{
	FuzzJson   *node = json_node(kind);

	build_attach(b, node);
	b->stack[b->depth++] = node;
}

/* An object starts */
static IdemJsonAction
build_object_start(void *state)
{
	build_open(state, FJ_OBJECT);
	IDEM_JSON_GO_ON;
}

/* An array starts */
static IdemJsonAction
build_array_start(void *state)
{
	build_open(state, FJ_ARRAY);
	IDEM_JSON_GO_ON;
}

/* A container ends */
static IdemJsonAction
build_end(void *state)
{
	((JsonBuild *) state)->depth--;
	IDEM_JSON_GO_ON;
}

/* A member's name */
static IdemJsonAction
build_field(void *state, char *fname, bool isnull)
{
	((JsonBuild *) state)->key = fname;
	IDEM_JSON_GO_ON;
}

/* A scalar */
static IdemJsonAction
build_scalar(void *state, char *token, JsonTokenType type)
{
	FuzzJson   *node;

	switch (type)
	{
		case JSON_TOKEN_STRING:
			node = json_node(FJ_STRING);
			node->string = token;
			node->len = strlen(token);
			break;
		case JSON_TOKEN_NUMBER:
			node = json_node(FJ_NUMBER);
			break;
		case JSON_TOKEN_TRUE:
			node = json_node(FJ_TRUE);
			break;
		case JSON_TOKEN_FALSE:
			node = json_node(FJ_FALSE);
			break;
		default:
			node = json_node(FJ_NULL);
			break;
	}
	build_attach(state, node);
	IDEM_JSON_GO_ON;
}

/* Is the nesting of the JSON text (outside strings) at most max? */
static bool
nesting_at_most(const char *json, size_t len, int max)
{
	int			depth = 0;
	bool		in_string = false;

	for (size_t i = 0; i < len; i++)
	{
		char		c = json[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if ((c == '{' || c == '[') && ++depth > max)
			return false;
		else if (c == '}' || c == ']')
			depth--;
	}
	return true;
}

/* JSON text parsed into nodes; NULL when it is not JSON */
static FuzzJson *
json_parse(const char *json, size_t len, int encoding)
{
	JsonBuild  *b;
	JsonSemAction sem;
	JsonLexContext *lex;

	if (len > PG_INT32_MAX || !nesting_at_most(json, len, BUILD_MAX_DEPTH - 1))
		return NULL;
	b = palloc0(sizeof(JsonBuild));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = b;
	sem.object_start = build_object_start;
	sem.object_end = build_end;
	sem.array_start = build_array_start;
	sem.array_end = build_end;
	sem.object_field_start = build_field;
	sem.scalar = build_scalar;
	lex = idem_json_lex_context(unconstify(char *, json), (int) len, encoding, true);
	if (__real_pg_parse_json(lex, &sem) != JSON_SUCCESS)
		return NULL;
	return b->root;
}

/* A growing buffer of the encoder */
typedef struct JsonbBuf
{
	char	   *data;
	int			len;
	int			cap;
} JsonbBuf;

/* Room for n more bytes; the offset where they go */
static int
buf_reserve(JsonbBuf *buf, int n)
{
	int			at = buf->len;

	if (buf->len + n > buf->cap)
	{
		int			cap = Max(64, buf->cap);

		while (cap < buf->len + n)
			cap *= 2;
		buf->data = buf->data ? repalloc(buf->data, cap) : palloc(cap);
		buf->cap = cap;
	}
	buf->len += n;
	return at;
}

/* Append bytes */
static void
buf_append(JsonbBuf *buf, const void *data, int n)
{
	int			at = buf_reserve(buf, n);

	memcpy(buf->data + at, data, n);
}

/* Pad with zeroes to a multiple of 4; how many were added */
static int
buf_pad(JsonbBuf *buf)
{
	int			pad = INTALIGN(buf->len) - buf->len;
	int			at = buf_reserve(buf, pad);

	memset(buf->data + at, 0, pad);
	return pad;
}

static void encode_value(JsonbBuf *buf, JEntry *header, FuzzJson *node);

/*
 * Member order in a jsonb object: shorter names first, then bytewise; of
 * two equal names the later one first (the one the server keeps)
 */
static int
member_cmp(const void *a, const void *b, void *arg)
{
	FuzzJson   *obj = arg;
	int			i = *(const int *) a;
	int			j = *(const int *) b;

	if (obj->keylens[i] != obj->keylens[j])
		return obj->keylens[i] < obj->keylens[j] ? -1 : 1;
	if (obj->keylens[i] > 0)
	{
		int			c = memcmp(obj->keys[i], obj->keys[j], obj->keylens[i]);

		if (c != 0)
			return c;
	}
	return i > j ? -1 : i < j ? 1 : 0;
}

/* The JEntry of child i among the children written so far */
static JEntry
child_entry(JEntry meta, int *totallen, int i)
{
	*totallen += JBE_OFFLENFLD(meta);
	if (*totallen > JENTRY_OFFLENMASK)
		fuzz_fail("jsonb too large for the encoder");
	if (i % JB_OFFSET_STRIDE == 0)
		meta = (meta & JENTRY_TYPEMASK) | *totallen | JENTRY_HAS_OFF;
	return meta;
}

/*
 * A container as convertJsonbArray and convertJsonbObject write it: padding
 * to 4 bytes, the header, the JEntries (an offset every JB_OFFSET_STRIDE,
 * lengths between), then the children's data.  An object's members are
 * sorted, and of a name given twice the last value kept, as jsonb_in does.
 */
static void
encode_container(JsonbBuf *buf, JEntry *header, FuzzJson *node, bool raw_scalar)
{
	int			base = buf->len;
	int			n = node->n;
	int		   *order = palloc(Max(n, 1) * sizeof(int));
	int			kept = 0;
	uint32		head;
	int			entries;
	int			totallen = 0;

	buf_pad(buf);
	if (node->kind == FJ_OBJECT)
	{
		for (int i = 0; i < n; i++)
			order[i] = i;
		qsort_arg(order, n, sizeof(int), member_cmp, node);
		for (int i = 0; i < n; i++)
		{
			int			a = order[i];

			if (kept > 0)
			{
				int			b = order[kept - 1];

				if (node->keylens[a] == node->keylens[b] &&
					memcmp(node->keys[a], node->keys[b], node->keylens[a]) == 0)
					continue;
			}
			order[kept++] = a;
		}
		head = kept | JB_FOBJECT;
		buf_append(buf, &head, sizeof(head));
		entries = buf_reserve(buf, 2 * kept * sizeof(JEntry));
		for (int i = 0; i < kept; i++)
		{
			JEntry		meta = JENTRY_ISSTRING | node->keylens[order[i]];

			buf_append(buf, node->keys[order[i]], node->keylens[order[i]]);
			meta = child_entry(meta, &totallen, i);
			memcpy(buf->data + entries + i * sizeof(JEntry), &meta, sizeof(JEntry));
		}
		for (int i = 0; i < kept; i++)
		{
			JEntry		meta;

			encode_value(buf, &meta, node->children[order[i]]);
			meta = child_entry(meta, &totallen, i + kept);
			memcpy(buf->data + entries + (i + kept) * sizeof(JEntry), &meta, sizeof(JEntry));
		}
	}
	else
	{
		head = n | JB_FARRAY | (raw_scalar ? JB_FSCALAR : 0);
		buf_append(buf, &head, sizeof(head));
		entries = buf_reserve(buf, n * sizeof(JEntry));
		for (int i = 0; i < n; i++)
		{
			JEntry		meta;

			encode_value(buf, &meta, node->children[i]);
			meta = child_entry(meta, &totallen, i);
			memcpy(buf->data + entries + i * sizeof(JEntry), &meta, sizeof(JEntry));
		}
	}
	pfree(order);
	*header = JENTRY_ISCONTAINER | (buf->len - base);
}

/*
 * A value as convertJsonbValue writes it.  A number is written as the
 * numeric zero: idem never reads numbers out of jsonb.
 */
static void
encode_value(JsonbBuf *buf, JEntry *header, FuzzJson *node)
{
	switch (node->kind)
	{
		case FJ_NULL:
			*header = JENTRY_ISNULL;
			break;
		case FJ_TRUE:
			*header = JENTRY_ISBOOL_TRUE;
			break;
		case FJ_FALSE:
			*header = JENTRY_ISBOOL_FALSE;
			break;
		case FJ_STRING:
			buf_append(buf, node->string, node->len);
			*header = JENTRY_ISSTRING | node->len;
			break;
		case FJ_NUMBER:
			{
				/* a 4-byte varlena header and NUMERIC_SHORT, sign and weight 0 */
				struct
				{
					int32		vl_len_;
					uint16		n_header;
				}			zero;
				int			len = VARHDRSZ + sizeof(uint16);
				int			pad = buf_pad(buf);

				SET_VARSIZE(&zero, len);
				zero.n_header = 0x8000;
				buf_append(buf, &zero, len);
				*header = JENTRY_ISNUMERIC | (pad + len);
				break;
			}
		case FJ_OBJECT:
		case FJ_ARRAY:
			encode_container(buf, header, node, false);
			break;
	}
}

/* The jsonb of a value: a scalar at the root is a one-element raw-scalar array */
static Jsonb *
encode_jsonb(FuzzJson *root)
{
	JsonbBuf	buf = {NULL, 0, 0};
	JEntry		header;

	buf_reserve(&buf, VARHDRSZ);
	if (root->kind == FJ_OBJECT || root->kind == FJ_ARRAY)
		encode_container(&buf, &header, root, false);
	else
	{
		FuzzJson	wrap = {.kind = FJ_ARRAY};

		json_add(&wrap, NULL, 0, root);
		encode_container(&buf, &header, &wrap, true);
	}
	SET_VARSIZE(buf.data, buf.len);
	return (Jsonb *) buf.data;
}

/* jsonb of JSON text, as jsonb_in makes it; NULL if it is not JSON */
Jsonb *
fuzz_jsonb_from_json(const char *json, size_t len, int encoding)
{
	FuzzJson   *root = json_parse(json, len, encoding);

	return root != NULL ? encode_jsonb(root) : NULL;
}

/*
 * jsonb of a flat object of strings (a value whose data is NULL: null);
 * NULL if one is not text the server could hold
 */
Jsonb *
fuzz_jsonb_object(int npairs, const Slice *names, const Slice *values)
{
	FuzzJson   *obj = json_node(FJ_OBJECT);

	for (int i = 0; i < npairs; i++)
	{
		FuzzJson   *value = json_node(values[i].data ? FJ_STRING : FJ_NULL);

		if (!fuzz_valid_text(names[i].data, names[i].len, PG_UTF8) ||
			(values[i].data != NULL &&
			 !fuzz_valid_text(values[i].data, values[i].len, PG_UTF8)))
			return NULL;
		value->string = unconstify(char *, values[i].data);
		value->len = values[i].len;
		json_add(obj, unconstify(char *, names[i].data), names[i].len, value);
	}
	return encode_jsonb(obj);
}

/* getJsonbOffset: the offset of child index, from the nearest stored offset */
uint32
getJsonbOffset(const JsonbContainer *jc, int index)
{
	uint32		offset = 0;

	for (int i = index - 1; i >= 0; i--)
	{
		offset += JBE_OFFLENFLD(jc->children[i]);
		if (JBE_HAS_OFF(jc->children[i]))
			break;
	}
	return offset;
}

/* getJsonbLength: the length of child index */
uint32
getJsonbLength(const JsonbContainer *jc, int index)
{
	if (JBE_HAS_OFF(jc->children[index]))
		return JBE_OFFLENFLD(jc->children[index]) - getJsonbOffset(jc, index);
	return JBE_OFFLENFLD(jc->children[index]);
}

/* A child of a container as a JsonbValue (fillJsonbValue) */
static void
fill_value(JsonbContainer *container, int index, char *base, uint32 offset,
		   JsonbValue *result)
{
	JEntry		entry = container->children[index];

	if (JBE_ISNULL(entry))
		result->type = jbvNull;
	else if (JBE_ISSTRING(entry))
	{
		result->type = jbvString;
		result->val.string.val = base + offset;
		result->val.string.len = getJsonbLength(container, index);
	}
	else if (JBE_ISNUMERIC(entry))
	{
		result->type = jbvNumeric;
		result->val.numeric = (Numeric) (base + INTALIGN(offset));
	}
	else if (JBE_ISBOOL_TRUE(entry) || JBE_ISBOOL_FALSE(entry))
	{
		result->type = jbvBool;
		result->val.boolean = JBE_ISBOOL_TRUE(entry);
	}
	else
	{
		result->type = jbvBinary;
		result->val.binary.data = (JsonbContainer *) (base + INTALIGN(offset));
		result->val.binary.len = getJsonbLength(container, index) -
			(INTALIGN(offset) - offset);
	}
}

/* JsonbIteratorInit: an iterator over one container */
JsonbIterator *
JsonbIteratorInit(JsonbContainer *container)
{
	JsonbIterator *it = palloc0(sizeof(JsonbIterator));

	it->container = container;
	it->nElems = JsonContainerSize(container);
	it->children = container->children;
	if (JsonContainerIsArray(container))
	{
		it->dataProper = (char *) it->children + it->nElems * sizeof(JEntry);
		it->isScalar = JsonContainerIsScalar(container);
		it->state = JBI_ARRAY_START;
	}
	else
	{
		it->dataProper = (char *) it->children + it->nElems * sizeof(JEntry) * 2;
		it->state = JBI_OBJECT_START;
	}
	return it;
}

/*
 * JsonbIteratorNext, for the one level idem reads (skipNested: a nested
 * container is a value, jbvBinary)
 */
JsonbIteratorToken
JsonbIteratorNext(JsonbIterator **itp, JsonbValue *val, bool skipNested)
{
	JsonbIterator *it = *itp;

	if (!skipNested)
		fuzz_fail("JsonbIteratorNext into nested containers is not stood in for");
	if (it == NULL)
		return WJB_DONE;
	switch (it->state)
	{
		case JBI_ARRAY_START:
			val->type = jbvArray;
			val->val.array.nElems = it->nElems;
			val->val.array.rawScalar = it->isScalar;
			it->curIndex = 0;
			it->curDataOffset = 0;
			it->curValueOffset = 0;
			it->state = JBI_ARRAY_ELEM;
			return WJB_BEGIN_ARRAY;
		case JBI_ARRAY_ELEM:
			if (it->curIndex >= it->nElems)
			{
				pfree(it);
				*itp = NULL;
				return WJB_END_ARRAY;
			}
			fill_value(it->container, it->curIndex, it->dataProper,
					   it->curDataOffset, val);
			JBE_ADVANCE_OFFSET(it->curDataOffset, it->children[it->curIndex]);
			it->curIndex++;
			return WJB_ELEM;
		case JBI_OBJECT_START:
			val->type = jbvObject;
			val->val.object.nPairs = it->nElems;
			it->curIndex = 0;
			it->curDataOffset = 0;
			it->curValueOffset = getJsonbOffset(it->container, it->nElems);
			it->state = JBI_OBJECT_KEY;
			return WJB_BEGIN_OBJECT;
		case JBI_OBJECT_KEY:
			if (it->curIndex >= it->nElems)
			{
				pfree(it);
				*itp = NULL;
				return WJB_END_OBJECT;
			}
			fill_value(it->container, it->curIndex, it->dataProper,
					   it->curDataOffset, val);
			if (val->type != jbvString)
				fuzz_fail("jsonb object key is not a string");
			it->state = JBI_OBJECT_VALUE;
			return WJB_KEY;
		case JBI_OBJECT_VALUE:
			it->state = JBI_OBJECT_KEY;
			fill_value(it->container, it->curIndex + it->nElems, it->dataProper,
					   it->curValueOffset, val);
			JBE_ADVANCE_OFFSET(it->curDataOffset, it->children[it->curIndex]);
			JBE_ADVANCE_OFFSET(it->curValueOffset,
							   it->children[it->curIndex + it->nElems]);
			it->curIndex++;
			return WJB_VALUE;
	}
	fuzz_fail("invalid jsonb iterator state");
}

/* getKeyJsonValueFromContainer: binary search of an object's member names */
JsonbValue *
getKeyJsonValueFromContainer(JsonbContainer *container, const char *keyVal,
							 int keyLen, JsonbValue *res)
{
	int			count = JsonContainerSize(container);
	char	   *base = (char *) (container->children + count * 2);
	int			low = 0;
	int			high = count;

	if (!JsonContainerIsObject(container))
		fuzz_fail("getKeyJsonValueFromContainer on a container that is not an object");
	while (low < high)
	{
		int			middle = low + (high - low) / 2;
		char	   *candidate = base + getJsonbOffset(container, middle);
		int			len = getJsonbLength(container, middle);
		int			diff;

		if (len != keyLen)
			diff = len > keyLen ? 1 : -1;
		else
			diff = memcmp(candidate, keyVal, len);
		if (diff == 0)
		{
			int			index = middle + count;

			if (res == NULL)
				res = palloc(sizeof(JsonbValue));
			fill_value(container, index, base, getJsonbOffset(container, index), res);
			return res;
		}
		if (diff < 0)
			low = middle + 1;
		else
			high = middle;
	}
	return NULL;
}

/*
 * jsonb_in, for idem_wechatpay_decrypt's result: JSON in the database
 * encoding.  The server's raises an error on text that is not JSON; idem
 * calls it only on text its own parse accepted, so here that is a finding.
 */
Datum
jsonb_in(PG_FUNCTION_ARGS)
{
	char	   *json = PG_GETARG_CSTRING(0);
	Jsonb	   *jb = fuzz_jsonb_from_json(json, strlen(json), database_encoding);

	if (jb == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s", "json")));
	PG_RETURN_JSONB_P(jb);
}

/* ---------------------------------------------------------------- */
/* fmgr, text, lists, the clock */
/* ---------------------------------------------------------------- */

/* pg_detoast_datum: the targets make no toasted or compressed values */
struct varlena *
pg_detoast_datum(struct varlena *datum)
{
	if (VARATT_IS_EXTENDED(datum))
		fuzz_fail("a toasted or short value reached pg_detoast_datum");
	return datum;
}

/* pg_detoast_datum_packed */
struct varlena *
pg_detoast_datum_packed(struct varlena *datum)
{
	if (VARATT_IS_COMPRESSED(datum) || VARATT_IS_EXTERNAL(datum))
		fuzz_fail("a toasted value reached pg_detoast_datum_packed");
	return datum;
}

/* DirectFunctionCall1Coll */
Datum
DirectFunctionCall1Coll(PGFunction func, Oid collation, Datum arg1)
{
	LOCAL_FCINFO(fcinfo, 1);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, NULL, 1, collation, NULL, NULL);
	fcinfo->args[0].value = arg1;
	fcinfo->args[0].isnull = false;
	result = (*func) (fcinfo);
	if (fcinfo->isnull)
		elog(ERROR, "function %p returned NULL", (void *) func);
	return result;
}

/* text_to_cstring */
char *
text_to_cstring(const text *t)
{
	text	   *tunpacked = pg_detoast_datum_packed(unconstify(text *, t));
	int			len = VARSIZE_ANY_EXHDR(tunpacked);
	char	   *result = palloc(len + 1);

	memcpy(result, VARDATA_ANY(tunpacked), len);
	result[len] = '\0';
	return result;
}

/* Text as the server hands it to a function */
text *
fuzz_text(const char *data, size_t len)
{
	text	   *t = palloc(VARHDRSZ + len);

	SET_VARSIZE(t, VARHDRSZ + len);
	memcpy(VARDATA(t), data, len);
	return t;
}

/* lappend, for lists of pointers */
List *
lappend(List *list, void *datum)
{
	if (list == NIL)
	{
		list = palloc(offsetof(List, initial_elements) + 4 * sizeof(ListCell));
		list->type = T_List;
		list->length = 0;
		list->max_length = 4;
		list->elements = list->initial_elements;
	}
	else if (list->length == list->max_length)
	{
		ListCell   *cells = palloc(2 * list->max_length * sizeof(ListCell));

		memcpy(cells, list->elements, list->length * sizeof(ListCell));
		if (list->elements != list->initial_elements)
			pfree(list->elements);
		list->elements = cells;
		list->max_length *= 2;
	}
	list->elements[list->length++].ptr_value = datum;
	return list;
}

/* GetCurrentTimestamp: the fixed clock of the targets */
TimestampTz
GetCurrentTimestamp(void)
{
	return (FUZZ_NOW_UNIX -
			(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY) *
		USECS_PER_SEC;
}

/*
 * pg_crc32_table: the server's table of CRC-32 (src/backend/utils/hash/
 * pg_crc.c, not in libpgcommon), the reflected polynomial 0xEDB88320
 */
const uint32 pg_crc32_table[256] = {
	0x00000000, 0x77073096, 0xEE0E612C, 0x990951BA, 0x076DC419, 0x706AF48F,
	0xE963A535, 0x9E6495A3, 0x0EDB8832, 0x79DCB8A4, 0xE0D5E91E, 0x97D2D988,
	0x09B64C2B, 0x7EB17CBD, 0xE7B82D07, 0x90BF1D91, 0x1DB71064, 0x6AB020F2,
	0xF3B97148, 0x84BE41DE, 0x1ADAD47D, 0x6DDDE4EB, 0xF4D4B551, 0x83D385C7,
	0x136C9856, 0x646BA8C0, 0xFD62F97A, 0x8A65C9EC, 0x14015C4F, 0x63066CD9,
	0xFA0F3D63, 0x8D080DF5, 0x3B6E20C8, 0x4C69105E, 0xD56041E4, 0xA2677172,
	0x3C03E4D1, 0x4B04D447, 0xD20D85FD, 0xA50AB56B, 0x35B5A8FA, 0x42B2986C,
	0xDBBBC9D6, 0xACBCF940, 0x32D86CE3, 0x45DF5C75, 0xDCD60DCF, 0xABD13D59,
	0x26D930AC, 0x51DE003A, 0xC8D75180, 0xBFD06116, 0x21B4F4B5, 0x56B3C423,
	0xCFBA9599, 0xB8BDA50F, 0x2802B89E, 0x5F058808, 0xC60CD9B2, 0xB10BE924,
	0x2F6F7C87, 0x58684C11, 0xC1611DAB, 0xB6662D3D, 0x76DC4190, 0x01DB7106,
	0x98D220BC, 0xEFD5102A, 0x71B18589, 0x06B6B51F, 0x9FBFE4A5, 0xE8B8D433,
	0x7807C9A2, 0x0F00F934, 0x9609A88E, 0xE10E9818, 0x7F6A0DBB, 0x086D3D2D,
	0x91646C97, 0xE6635C01, 0x6B6B51F4, 0x1C6C6162, 0x856530D8, 0xF262004E,
	0x6C0695ED, 0x1B01A57B, 0x8208F4C1, 0xF50FC457, 0x65B0D9C6, 0x12B7E950,
	0x8BBEB8EA, 0xFCB9887C, 0x62DD1DDF, 0x15DA2D49, 0x8CD37CF3, 0xFBD44C65,
	0x4DB26158, 0x3AB551CE, 0xA3BC0074, 0xD4BB30E2, 0x4ADFA541, 0x3DD895D7,
	0xA4D1C46D, 0xD3D6F4FB, 0x4369E96A, 0x346ED9FC, 0xAD678846, 0xDA60B8D0,
	0x44042D73, 0x33031DE5, 0xAA0A4C5F, 0xDD0D7CC9, 0x5005713C, 0x270241AA,
	0xBE0B1010, 0xC90C2086, 0x5768B525, 0x206F85B3, 0xB966D409, 0xCE61E49F,
	0x5EDEF90E, 0x29D9C998, 0xB0D09822, 0xC7D7A8B4, 0x59B33D17, 0x2EB40D81,
	0xB7BD5C3B, 0xC0BA6CAD, 0xEDB88320, 0x9ABFB3B6, 0x03B6E20C, 0x74B1D29A,
	0xEAD54739, 0x9DD277AF, 0x04DB2615, 0x73DC1683, 0xE3630B12, 0x94643B84,
	0x0D6D6A3E, 0x7A6A5AA8, 0xE40ECF0B, 0x9309FF9D, 0x0A00AE27, 0x7D079EB1,
	0xF00F9344, 0x8708A3D2, 0x1E01F268, 0x6906C2FE, 0xF762575D, 0x806567CB,
	0x196C3671, 0x6E6B06E7, 0xFED41B76, 0x89D32BE0, 0x10DA7A5A, 0x67DD4ACC,
	0xF9B9DF6F, 0x8EBEEFF9, 0x17B7BE43, 0x60B08ED5, 0xD6D6A3E8, 0xA1D1937E,
	0x38D8C2C4, 0x4FDFF252, 0xD1BB67F1, 0xA6BC5767, 0x3FB506DD, 0x48B2364B,
	0xD80D2BDA, 0xAF0A1B4C, 0x36034AF6, 0x41047A60, 0xDF60EFC3, 0xA867DF55,
	0x316E8EEF, 0x4669BE79, 0xCB61B38C, 0xBC66831A, 0x256FD2A0, 0x5268E236,
	0xCC0C7795, 0xBB0B4703, 0x220216B9, 0x5505262F, 0xC5BA3BBE, 0xB2BD0B28,
	0x2BB45A92, 0x5CB36A04, 0xC2D7FFA7, 0xB5D0CF31, 0x2CD99E8B, 0x5BDEAE1D,
	0x9B64C2B0, 0xEC63F226, 0x756AA39C, 0x026D930A, 0x9C0906A9, 0xEB0E363F,
	0x72076785, 0x05005713, 0x95BF4A82, 0xE2B87A14, 0x7BB12BAE, 0x0CB61B38,
	0x92D28E9B, 0xE5D5BE0D, 0x7CDCEFB7, 0x0BDBDF21, 0x86D3D2D4, 0xF1D4E242,
	0x68DDB3F8, 0x1FDA836E, 0x81BE16CD, 0xF6B9265B, 0x6FB077E1, 0x18B74777,
	0x88085AE6, 0xFF0F6A70, 0x66063BCA, 0x11010B5C, 0x8F659EFF, 0xF862AE69,
	0x616BFFD3, 0x166CCF45, 0xA00AE278, 0xD70DD2EE, 0x4E048354, 0x3903B3C2,
	0xA7672661, 0xD06016F7, 0x4969474D, 0x3E6E77DB, 0xAED16A4A, 0xD9D65ADC,
	0x40DF0B66, 0x37D83BF0, 0xA9BCAE53, 0xDEBB9EC5, 0x47B2CF7F, 0x30B5FFE9,
	0xBDBDF21C, 0xCABAC28A, 0x53B39330, 0x24B4A3A6, 0xBAD03605, 0xCDD70693,
	0x54DE5729, 0x23D967BF, 0xB3667A2E, 0xC4614AB8, 0x5D681B02, 0x2A6F2B94,
	0xB40BBE37, 0xC30C8EA1, 0x5A05DF1B, 0x2D02EF8D
};

/* ---------------------------------------------------------------- */
/* Inputs */
/* ---------------------------------------------------------------- */

/* One input starts, in a database of that encoding */
void
fuzz_begin(int db_encoding)
{
	database_encoding = db_encoding;
	CurrentMemoryContext = &input_context.header;
}

/*
 * One input ends: what it tracked is released, as the entry points do
 * when a call ends, and its memory freed
 */
void
fuzz_end(void)
{
	idem_verify_release_all();
	reset_input_context();
	allowed_error = 0;
}

/* The next line of *rest, without its newline */
bool
fuzz_next_line(Slice *rest, Slice *line)
{
	const char *nl;

	if (rest->data == NULL)
		return false;
	nl = memchr(rest->data, '\n', rest->len);
	line->data = rest->data;
	if (nl == NULL)
	{
		line->len = rest->len;
		rest->data = NULL;
		rest->len = 0;
	}
	else
	{
		line->len = nl - rest->data;
		rest->len -= line->len + 1;
		rest->data = nl + 1;
	}
	return true;
}

/* A NUL-terminated copy */
char *
fuzz_cstring(Slice s)
{
	char	   *copy = palloc(s.len + 1);

	memcpy(copy, s.data, s.len);
	copy[s.len] = '\0';
	return copy;
}

/* A whole file, malloc'd and NUL-terminated */
char *
fuzz_read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *data;
	long		n;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
		fseek(f, 0, SEEK_SET) != 0)
		fuzz_fail("cannot read %s: %m", path);
	data = malloc(n + 1);
	if (data == NULL || fread(data, 1, n, f) != (size_t) n)
		fuzz_fail("cannot read %s: %m", path);
	fclose(f);
	data[n] = '\0';
	*len = n;
	return data;
}

/*
 * The key file of that name, read once: from the directory in
 * IDEM_FUZZ_KEYS, or else test/fuzz/keys of the tree the target was built
 * from
 */
Slice
fuzz_key(const char *name)
{
	static struct
	{
		const char *name;
		Slice		key;
	}			keys[32];
	static int	nkeys = 0;
	const char *dir = getenv("IDEM_FUZZ_KEYS");
	char		path[MAXPGPATH];
	size_t		len;

	for (int i = 0; i < nkeys; i++)
		if (strcmp(keys[i].name, name) == 0)
			return keys[i].key;
	if (nkeys == lengthof(keys))
		fuzz_fail("too many key files");
	snprintf(path, sizeof(path), "%s/%s", dir ? dir : FUZZ_KEYS_DIR, name);
	keys[nkeys].name = name;
	keys[nkeys].key.data = fuzz_read_file(path, &len);
	keys[nkeys].key.len = len;
	return keys[nkeys++].key;
}
