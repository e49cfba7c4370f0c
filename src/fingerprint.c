/*
 * fingerprint.c
 *		Canonical JSON, request fingerprints and deterministic keys.
 *
 * idem_canonical writes a jsonb value as compact JSON that another language
 * can reproduce byte for byte (doc/fingerprints.md): keys in jsonb's stored
 * order, no whitespace, PostgreSQL's own string escaping and numbers without
 * insignificant trailing zeros.  idem_fingerprint is the SHA-256 of that
 * text, and idem_key the SHA-256 of a netstring encoding of its parts.
 *
 * All hashing goes through PostgreSQL's common/cryptohash.h, so the result
 * does not depend on pgcrypto being installed and follows the server's
 * choice of implementation (OpenSSL or the built-in one).
 *
 * May call: the server's hashing (common/cryptohash.h) and jsonb code only.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "fingerprint.h"

/*
 * The canonical text is fed to the hash in pieces of about this size, so a
 * fingerprint of a large document never holds all of its text at once.
 */
#define IDEM_CANONICAL_FLUSH	8192

/* Canonical text goes into buf; when hash is set, buf is drained into it */
typedef struct CanonicalSink
{
	StringInfo	buf;
	IdemSha256 *hash;
} CanonicalSink;

/* Start a SHA-256 computation */
void
idem_sha256_init(IdemSha256 *h)
{
	h->ctx = pg_cryptohash_create(PG_SHA256);
	if (h->ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	if (pg_cryptohash_init(h->ctx) < 0)
		idem_sha256_fail(h);
}

/* Add bytes to a SHA-256 computation */
void
idem_sha256_update(IdemSha256 *h, const void *data, size_t len)
{
	if (pg_cryptohash_update(h->ctx, (const uint8 *) data, len) < 0)
		idem_sha256_fail(h);
}

/* Finish a SHA-256 computation into out[IDEM_SHA256_LEN] and free it */
void
idem_sha256_final(IdemSha256 *h, uint8 *out)
{
	if (pg_cryptohash_final(h->ctx, out, IDEM_SHA256_LEN) < 0)
		idem_sha256_fail(h);
	pg_cryptohash_free(h->ctx);
	h->ctx = NULL;
}

/*
 * Report a failure of the hash implementation.  The context is left to the
 * resource owner, which frees it at abort (OpenSSL) or with the memory
 * context (built-in).
 */
void
idem_sha256_fail(IdemSha256 *h)
{
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("could not compute a SHA-256 hash: %s",
					pg_cryptohash_error(h->ctx))));
}

/*
 * Hash len bytes of text in the database encoding as UTF-8, so that keys and
 * fingerprints do not depend on the encoding the database happens to use.
 * In a UTF-8 or SQL_ASCII database this hashes the bytes as they are.
 */
static void
sha256_update_utf8(IdemSha256 *h, const char *s, int len)
{
	char	   *utf8 = pg_server_to_any(s, len, PG_UTF8);

	if (utf8 == s)
		idem_sha256_update(h, s, len);
	else
	{
		idem_sha256_update(h, utf8, strlen(utf8));
		pfree(utf8);
	}
}

/* Write len bytes of a jsonb string as a JSON string literal */
static void
canonical_string(StringInfo buf, const char *s, int len, StringInfo scratch)
{
	/*
	 * escape_json wants a NUL-terminated string and jsonb's are not; a
	 * reused scratch buffer avoids a palloc for every string.  jsonb
	 * cannot hold \u0000, so the copy is never cut short.
	 */
	resetStringInfo(scratch);
	appendBinaryStringInfo(scratch, s, len);
	escape_json(buf, scratch->data);
}

/* Write one scalar: string, number, boolean or null */
static void
canonical_scalar(StringInfo buf, JsonbValue *v, StringInfo scratch)
{
	switch (v->type)
	{
		case jbvString:
			canonical_string(buf, v->val.string.val, v->val.string.len, scratch);
			break;
		case jbvNumeric:
			{
				/*
				 * numeric_normalize drops trailing fractional zeros and a
				 * bare decimal point, so values that compare equal print
				 * alike (100.00 -> 100).  numeric has no -0 and jsonb no NaN
				 * or infinity.
				 */
				char	   *num = numeric_normalize(v->val.numeric);

				appendStringInfoString(buf, num);
				pfree(num);
			}
			break;
		case jbvBool:
			appendStringInfoString(buf, v->val.boolean ? "true" : "false");
			break;
		case jbvNull:
			appendStringInfoString(buf, "null");
			break;
		default:
			elog(ERROR, "unexpected jsonb value type: %d", (int) v->type);
	}
}

/* Hand the text gathered so far to the hash and empty the buffer */
static void
canonical_flush(CanonicalSink *sink)
{
	if (sink->hash == NULL || sink->buf->len == 0)
		return;
	sha256_update_utf8(sink->hash, sink->buf->data, sink->buf->len);
	resetStringInfo(sink->buf);
}

/*
 * Walk the jsonb with its iterator and write the canonical text.  The
 * iterator keeps its own stack on the heap, so nesting depth costs no C
 * stack.  One flag is enough to place commas: a comma goes before any key,
 * element or value that follows a complete item at the same level.
 */
static void
canonical_write(CanonicalSink *sink, Jsonb *jb)
{
	StringInfo	buf = sink->buf;
	StringInfoData scratch;
	JsonbIterator *it;
	JsonbIteratorToken tok;
	JsonbValue	v;
	bool		need_comma = false;
	bool		raw_scalar = false;

	initStringInfo(&scratch);
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		CHECK_FOR_INTERRUPTS();
		switch (tok)
		{
			case WJB_BEGIN_ARRAY:
				/* a top-level scalar is stored as a one-element array */
				if (v.val.array.rawScalar)
				{
					raw_scalar = true;
					break;
				}
				if (need_comma)
					appendStringInfoChar(buf, ',');
				appendStringInfoChar(buf, '[');
				need_comma = false;
				break;
			case WJB_BEGIN_OBJECT:
				if (need_comma)
					appendStringInfoChar(buf, ',');
				appendStringInfoChar(buf, '{');
				need_comma = false;
				break;
			case WJB_KEY:
				if (need_comma)
					appendStringInfoChar(buf, ',');
				canonical_string(buf, v.val.string.val, v.val.string.len, &scratch);
				appendStringInfoChar(buf, ':');
				need_comma = false;
				break;
			case WJB_VALUE:
			case WJB_ELEM:
				if (need_comma)
					appendStringInfoChar(buf, ',');
				canonical_scalar(buf, &v, &scratch);
				need_comma = true;
				break;
			case WJB_END_ARRAY:
				if (!raw_scalar)
					appendStringInfoChar(buf, ']');
				need_comma = true;
				break;
			case WJB_END_OBJECT:
				appendStringInfoChar(buf, '}');
				need_comma = true;
				break;
			default:
				elog(ERROR, "unexpected jsonb iterator token: %d", (int) tok);
		}
		/* only between tokens: a multibyte character is never split */
		if (sink->hash != NULL && buf->len >= IDEM_CANONICAL_FLUSH)
			canonical_flush(sink);
	}
	pfree(scratch.data);
}

/* Append the canonical text of jb to buf */
void
idem_canonical_append(StringInfo buf, Jsonb *jb)
{
	CanonicalSink sink = {buf, NULL};

	canonical_write(&sink, jb);
}

/* The fingerprint of jb: SHA-256 of its canonical text as UTF-8 */
void
idem_fingerprint_jsonb(Jsonb *jb, uint8 *out)
{
	StringInfoData buf;
	IdemSha256	hash;
	CanonicalSink sink;

	initStringInfo(&buf);
	idem_sha256_init(&hash);
	sink.buf = &buf;
	sink.hash = &hash;
	canonical_write(&sink, jb);
	canonical_flush(&sink);
	idem_sha256_final(&hash, out);
	pfree(buf.data);
}

/*
 * The key of nparts byte strings as 64 lowercase hex digits plus a NUL in
 * hex.  Each part is hashed as a netstring, "<length>:<bytes>,", with the
 * length in decimal bytes of its UTF-8 form; that makes the encoding
 * unambiguous whatever the parts contain.
 */
void
idem_key_hex(int nparts, const char *const *parts, const int *lens, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	IdemSha256	hash;
	uint8		digest[IDEM_SHA256_LEN];
	int			i;

	idem_sha256_init(&hash);
	for (i = 0; i < nparts; i++)
	{
		char	   *utf8 = pg_server_to_any(parts[i], lens[i], PG_UTF8);
		size_t		len = (utf8 == parts[i]) ? (size_t) lens[i] : strlen(utf8);
		char		prefix[32];
		int			n;

		n = snprintf(prefix, sizeof(prefix), "%zu:", len);
		idem_sha256_update(&hash, prefix, n);
		idem_sha256_update(&hash, utf8, len);
		idem_sha256_update(&hash, ",", 1);
		if (utf8 != parts[i])
			pfree(utf8);
	}
	idem_sha256_final(&hash, digest);

	for (i = 0; i < IDEM_SHA256_LEN; i++)
	{
		hex[2 * i] = digits[digest[i] >> 4];
		hex[2 * i + 1] = digits[digest[i] & 0x0f];
	}
	hex[2 * IDEM_SHA256_LEN] = '\0';
}

PG_FUNCTION_INFO_V1(idem_canonical);

/* idem_canonical(request jsonb) returns text */
Datum
idem_canonical(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = PG_GETARG_JSONB_P(0);
	StringInfoData buf;
	text	   *result;

	initStringInfo(&buf);
	idem_canonical_append(&buf, jb);
	result = cstring_to_text_with_len(buf.data, buf.len);
	pfree(buf.data);
	PG_RETURN_TEXT_P(result);
}

PG_FUNCTION_INFO_V1(idem_fingerprint);

/* idem_fingerprint(request jsonb) returns bytea */
Datum
idem_fingerprint(PG_FUNCTION_ARGS)
{
	Jsonb	   *jb = PG_GETARG_JSONB_P(0);
	bytea	   *result = (bytea *) palloc(VARHDRSZ + IDEM_SHA256_LEN);

	SET_VARSIZE(result, VARHDRSZ + IDEM_SHA256_LEN);
	idem_fingerprint_jsonb(jb, (uint8 *) VARDATA(result));
	PG_RETURN_BYTEA_P(result);
}

PG_FUNCTION_INFO_V1(idem_key);

/* idem_key(VARIADIC parts text[]) returns text */
Datum
idem_key(PG_FUNCTION_ARGS)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	const char **parts;
	int		   *lens;
	char		hex[2 * IDEM_SHA256_LEN + 1];
	int			i;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("parts must not be null")));
	arr = PG_GETARG_ARRAYTYPE_P(0);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parts must be a one-dimensional array"),
				 errdetail("The array has %d dimensions.", ARR_NDIM(arr))));
	if (ARR_NDIM(arr) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parts must not be empty"),
				 errdetail("A key is made of at least one part.")));

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &nelems);
	parts = palloc(sizeof(char *) * nelems);
	lens = palloc(sizeof(int) * nelems);
	for (i = 0; i < nelems; i++)
	{
		text	   *t;

		/* a NULL part has no bytes to encode; skipping it would be ambiguous */
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("part %d of the key must not be null", i + 1)));
		t = DatumGetTextPP(elems[i]);
		parts[i] = VARDATA_ANY(t);
		lens[i] = VARSIZE_ANY_EXHDR(t);
	}

	idem_key_hex(nelems, parts, lens, hex);
	PG_RETURN_TEXT_P(cstring_to_text(hex));
}
