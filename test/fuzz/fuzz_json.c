/*
 * fuzz_json.c
 *		Fuzz target: the JSON readers of the body: the event id member
 *		(wire_json.c, its fast path and the server's parser behind it) and
 *		Adyen's notification item, its event id and its signature
 *		(scheme_adyen.c, under the fixed key of test/fuzz/keys/adyen).
 *
 * Input: a first byte of options (bits 0-1: the database encoding, UTF8,
 * SQL_ASCII, EUC_CN or LATIN1; bits 2-3: the member sought), then the body,
 * which must be text the database could hold.  The member is checked
 * against a reading made here with libpgcommon's parser: a root object
 * holding the member once, a string without \u0000 (allowed elsewhere),
 * nested at most 64 deep and, outside UTF-8, without \u escapes beyond
 * ASCII (which idem refuses rather than let the server's lexer raise an
 * error converting them).
 */
#include "fuzz.h"

#include "webhook/scheme.h"

/* The database encodings, by the low bits of the first byte */
static const int encodings[] = {PG_UTF8, PG_SQL_ASCII, PG_EUC_CN, PG_LATIN1};

/* The members sought: the schemes' event ids, and one of Adyen's */
static const char *const members[] = {"id", "event_id", "pspReference", "notify_id"};

/* The reading made here */
typedef struct Reading
{
	int			depth;
	int			max_depth;
	bool		root_is_object;
	const char *name;
	bool		at_member;
	int			count;
	char	   *value;			/* the last one, if a string */
} Reading;

/* A container starts */
static IdemJsonAction
reading_start(void *state, bool is_object)
{
	Reading    *r = state;

	if (r->depth == 0)
		r->root_is_object = is_object;
	else if (r->depth == 1 && r->at_member)
	{
		r->count++;
		r->value = NULL;
	}
	if (++r->depth > r->max_depth)
		r->max_depth = r->depth;
	IDEM_JSON_GO_ON;
}

/* An object starts */
static IdemJsonAction
reading_object_start(void *state)
{
	return reading_start(state, true);
}

/* An array starts */
static IdemJsonAction
reading_array_start(void *state)
{
	return reading_start(state, false);
}

/* A container ends */
static IdemJsonAction
reading_end(void *state)
{
	((Reading *) state)->depth--;
	IDEM_JSON_GO_ON;
}

/* A member starts */
static IdemJsonAction
reading_field(void *state, char *fname, bool isnull)
{
	Reading    *r = state;

	if (r->depth == 1)
		r->at_member = strcmp(fname, r->name) == 0;
	IDEM_JSON_GO_ON;
}

/* A scalar */
static IdemJsonAction
reading_scalar(void *state, char *token, JsonTokenType type)
{
	Reading    *r = state;

	if (r->depth == 1 && r->at_member)
	{
		r->count++;
		r->value = type == JSON_TOKEN_STRING ? token : NULL;
	}
	IDEM_JSON_GO_ON;
}

/* Depth the reading here follows (libpgcommon's parser checks no stack) */
#define READING_MAX_DEPTH	1000

/*
 * The text with each \u0000 escape written as the escape of a control
 * character that the text does not escape otherwise (libpgcommon's parser,
 * like the server's, refuses to decode \u0000, which RFC 8259 allows):
 * that character, 0 when the text has no \u0000, -1 when every one is
 * taken
 */
static int
mark_nul_escapes(Slice json, char **marked)
{
	static const char hex[] = "0123456789abcdef";
	char	   *copy = palloc(json.len + 1);
	int			mark = 0;
	bool		in_string = false;
	bool		any = false;

	for (int c = 1; c < 0x20 && mark == 0; c++)
	{
		char		escape[7];

		snprintf(escape, sizeof(escape), "\\u%04x", c);
		mark = c;
		for (size_t i = 0; i + 6 <= json.len; i++)
			if (pg_strncasecmp(json.data + i, escape, 6) == 0)
				mark = 0;
	}
	memcpy(copy, json.data, json.len);
	copy[json.len] = '\0';
	for (size_t i = 0; i < json.len; i++)
	{
		if (copy[i] == '"')
			in_string = !in_string;
		else if (in_string && copy[i] == '\\')
		{
			if (json.len - i >= 6 && memcmp(copy + i + 1, "u0000", 5) == 0)
			{
				any = true;
				copy[i + 4] = hex[mark >> 4];
				copy[i + 5] = hex[mark & 0xf];
			}
			i++;
		}
	}
	*marked = copy;
	return !any ? 0 : mark == 0 ? -1 : mark;
}

/*
 * The member as read here: 1 with its value, 0 where idem must answer
 * false, -1 when this reading cannot tell.  A \u0000 escape anywhere but
 * in the member's value is allowed.
 */
static int
expected_member(Slice json, int encoding, const char *name, Slice *value)
{
	Reading		r;
	JsonSemAction sem;
	JsonLexContext *lex;
	int			depth = 0;
	bool		in_string = false;
	char	   *marked;
	int			mark = mark_nul_escapes(json, &marked);

	if (mark < 0)
		return -1;

	/* deeper than idem reads: no need to parse */
	for (size_t i = 0; i < json.len; i++)
	{
		if (in_string && json.data[i] == '\\')
			i++;
		else if (json.data[i] == '"')
			in_string = !in_string;
		else if (!in_string && (json.data[i] == '{' || json.data[i] == '['))
		{
			if (++depth > READING_MAX_DEPTH)
				return 0;
		}
		else if (!in_string && (json.data[i] == '}' || json.data[i] == ']'))
			depth--;
	}
	memset(&r, 0, sizeof(r));
	r.name = name;
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &r;
	sem.object_start = reading_object_start;
	sem.object_end = reading_end;
	sem.array_start = reading_array_start;
	sem.array_end = reading_end;
	sem.object_field_start = reading_field;
	sem.scalar = reading_scalar;
	lex = idem_json_lex_context(marked, (int) json.len, encoding, true);
	if (__real_pg_parse_json(lex, &sem) != JSON_SUCCESS ||
		r.max_depth > 64 || !r.root_is_object || r.count != 1 || r.value == NULL ||
		(mark != 0 && strchr(r.value, mark) != NULL))
		return 0;
	value->data = r.value;
	value->len = strlen(r.value);
	return 1;
}

/* One input */
int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	int			db;
	const char *name;
	Slice		body;
	Slice		value;
	Slice		want;
	bool		found;
	int			expected;
	Slice		adyen_name = {"adyen", 5};
	const VerifyScheme *adyen = idem_verify_scheme(adyen_name);
	VerifyRequest req;
	Slice		id;

	if (size < 1)
		return 0;
	db = encodings[data[0] & 3];
	name = members[(data[0] >> 2) & 3];
	body.data = (const char *) data + 1;
	body.len = size - 1;
	if (!fuzz_valid_text(body.data, body.len, db))
		return 0;
	fuzz_begin(db);

	found = idem_json_member_string(body, name, &value);
	expected = expected_member(body, db, name, &want);
	if (expected >= 0 && found != (expected == 1))
		fuzz_fail("idem_json_member_string(\"%s\") answers %d, expected %d",
				  name, found, expected);
	if (found && expected == 1 &&
		(value.len != want.len || memcmp(value.data, want.data, want.len) != 0))
		fuzz_fail("idem_json_member_string(\"%s\") found another value", name);

	/* Adyen's item: its event id, and its signature under the fixed key */
	req.payload = body;
	req.headers = fuzz_jsonb_object(0, NULL, NULL);
	req.tolerance_usecs = -1;
	if (adyen->event_id(adyen, &req, &id) && id.len == 0)
		fuzz_fail("an empty Adyen event id");
	(void) adyen->verify(adyen->prepare(fuzz_key("adyen")), &req);

	fuzz_end();
	return 0;
}
