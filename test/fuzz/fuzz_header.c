/*
 * fuzz_header.c
 *		Fuzz target: the header lookup, the lists inside a header and unix
 *		timestamps (wire_header.c).
 *
 * Input: a first byte of options (bits 0-1: the list separator, bits 2-3:
 * the tolerance), a line naming the header sought, and the headers as the
 * application passes them, JSON text (made jsonb as the server would).
 * Checked against readings made here independently: the lookup (a name
 * once, in any case, with a string value), the timestamp (digits, at most
 * year 9999) and its tolerance, and the shape of every list element.
 */
#include "fuzz.h"

#include "datatype/timestamp.h"

/* The separators of the lists idem reads: Stripe's, Paddle's, Standard Webhooks', pairs' */
static const char separators[] = {',', ';', ' ', '='};

/* Tolerances: none, zero, five minutes, more than the timestamp range */
static const double tolerances[] = {-1, 0, 300e6, 1e18};

/* The root members of the headers, as read here */
typedef struct Members
{
	int			depth;
	bool		root_is_object;
	int			n;
	char	   *names[64];
	bool		is_string[64];
	char	   *values[64];
	char	   *field;			/* the root member being read */
	bool		overflow;
} Members;

/* A container starts: only the root's kind is noted */
static IdemJsonAction
members_start(void *state, bool is_object)
{
	Members    *m = state;

	if (m->depth == 1 && m->field != NULL && m->n < lengthof(m->names))
	{
		m->names[m->n] = m->field;
		m->is_string[m->n] = false;
		m->values[m->n++] = NULL;
	}
	else if (m->depth == 1 && m->field != NULL)
		m->overflow = true;
	if (m->depth == 0)
		m->root_is_object = is_object;
	m->depth++;
	IDEM_JSON_GO_ON;
}

/* An object starts */
static IdemJsonAction
members_object_start(void *state)
{
	return members_start(state, true);
}

/* An array starts */
static IdemJsonAction
members_array_start(void *state)
{
	return members_start(state, false);
}

/* A container ends */
static IdemJsonAction
members_end(void *state)
{
	((Members *) state)->depth--;
	IDEM_JSON_GO_ON;
}

/* A member starts */
static IdemJsonAction
members_field(void *state, char *fname, bool isnull)
{
	Members    *m = state;

	if (m->depth == 1)
		m->field = fname;
	IDEM_JSON_GO_ON;
}

/* A scalar: a root member's value */
static IdemJsonAction
members_scalar(void *state, char *token, JsonTokenType type)
{
	Members    *m = state;

	if (m->depth != 1 || !m->root_is_object)
		IDEM_JSON_GO_ON;
	if (m->n == lengthof(m->names))
	{
		m->overflow = true;
		IDEM_JSON_GO_ON;
	}
	m->names[m->n] = m->field;
	m->is_string[m->n] = (type == JSON_TOKEN_STRING);
	m->values[m->n++] = token;
	IDEM_JSON_GO_ON;
}

/* ASCII case-insensitive equality of two NUL-terminated names */
static bool
names_match(const char *a, const char *b)
{
	for (;; a++, b++)
	{
		char		ca = (*a >= 'A' && *a <= 'Z') ? *a + 32 : *a;
		char		cb = (*b >= 'A' && *b <= 'Z') ? *b + 32 : *b;

		if (ca != cb)
			return false;
		if (ca == '\0')
			return true;
	}
}

/*
 * The header as read here: the root members, a name given twice in the
 * same case keeping its last value (as jsonb does), and the one whose name
 * matches in any case, if there is exactly one and it is a string.  -1 when
 * this reading cannot tell (too many members).
 */
static int
expected_header(Slice json, const char *name, char **value)
{
	Members    *m = palloc0(sizeof(Members));
	JsonSemAction sem;
	JsonLexContext *lex;
	int			found = 0;

	memset(&sem, 0, sizeof(sem));
	sem.semstate = m;
	sem.object_start = members_object_start;
	sem.object_end = members_end;
	sem.array_start = members_array_start;
	sem.array_end = members_end;
	sem.object_field_start = members_field;
	sem.scalar = members_scalar;
	lex = idem_json_lex_context(unconstify(char *, json.data), (int) json.len,
								PG_UTF8, true);
	if (__real_pg_parse_json(lex, &sem) != JSON_SUCCESS)
		fuzz_fail("the headers parsed once and not twice");
	if (m->overflow)
		return -1;
	if (!m->root_is_object)
		return 0;
	for (int i = 0; i < m->n; i++)
	{
		bool		later = false;

		if (!names_match(m->names[i], name))
			continue;
		for (int j = i + 1; j < m->n; j++)
			later |= strcmp(m->names[i], m->names[j]) == 0;
		if (later)
			continue;
		if (++found == 1)
			*value = m->is_string[i] ? m->values[i] : NULL;
	}
	return found == 1 && *value != NULL;
}

/* Unix seconds as read here: digits only, at most 9999-12-31 23:59:59 */
static bool
expected_seconds(Slice s, int64 *secs)
{
	int64		v = 0;

	if (s.len == 0)
		return false;
	for (size_t i = 0; i < s.len; i++)
	{
		if (s.data[i] < '0' || s.data[i] > '9')
			return false;
		if (v > INT64CONST(253402300799))
			return false;
		v = v * 10 + (s.data[i] - '0');
	}
	if (v > INT64CONST(253402300799))
		return false;
	*secs = v;
	return true;
}

/* |v| */
static int64
i64abs(int64 v)
{
	return v < 0 ? -v : v;
}

/* Is c HTTP optional whitespace? */
static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* Is s inside [start, start + len) and trimmed of optional whitespace? */
static void
check_piece(Slice s, const char *start, size_t len, const char *what)
{
	if (s.len > 0 && (s.data < start || s.data + s.len > start + len))
		fuzz_fail("%s lies outside the header value", what);
	if (s.len > 0 && (is_ows(s.data[0]) || is_ows(s.data[s.len - 1])))
		fuzz_fail("%s is not trimmed", what);
}

/* Walk the header value as a list, checking every element and its name=value split */
static void
check_list(Slice value, char sep)
{
	Slice		rest = value;
	Slice		item;
	size_t		elements = 0;
	size_t		separators_seen = 0;

	for (size_t i = 0; i < value.len; i++)
		separators_seen += value.data[i] == sep;
	while (idem_next_element(&rest, sep, &item))
	{
		Slice		name;
		Slice		val;
		bool		has_eq = item.len > 0 && memchr(item.data, '=', item.len) != NULL;

		elements++;
		check_piece(item, value.data, value.len, "a list element");
		if (item.len > 0 && memchr(item.data, sep, item.len) != NULL)
			fuzz_fail("a list element holds its separator");
		if (idem_split_pair(item, '=', &name, &val) != has_eq)
			fuzz_fail("idem_split_pair disagrees on whether the element has '='");
		if (has_eq)
		{
			check_piece(name, item.data, item.len, "a name");
			check_piece(val, item.data, item.len, "a value");
			if (name.len > 0 && memchr(name.data, '=', name.len) != NULL)
				fuzz_fail("a name holds '='");
		}
		if (elements > value.len + 1)
			fuzz_fail("the list does not end");
	}
	if (elements != separators_seen + 1)
		fuzz_fail("%zu elements for %zu separators", elements, separators_seen);
}

/* One input */
int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	Slice		rest = {(const char *) data + 1, size - 1};
	Slice		name_line;
	char	   *name;
	Jsonb	   *headers;
	Slice		value;
	char	   *expected_value = NULL;
	int			expected;
	bool		found;

	if (size < 1 || !fuzz_next_line(&rest, &name_line) || rest.data == NULL)
		return 0;
	fuzz_begin(PG_UTF8);
	name = fuzz_cstring(name_line);
	if (!fuzz_valid_text(rest.data, rest.len, PG_UTF8) ||
		(headers = fuzz_jsonb_from_json(rest.data, rest.len, PG_UTF8)) == NULL)
	{
		fuzz_end();
		return 0;
	}

	found = idem_find_header(headers, name, &value);
	expected = expected_header(rest, name, &expected_value);
	if (expected >= 0 && found != (expected == 1))
		fuzz_fail("idem_find_header(\"%s\") answers %d, expected %d", name, found, expected);
	if (found && expected == 1 &&
		(value.len != strlen(expected_value) || memcmp(value.data, expected_value, value.len) != 0))
		fuzz_fail("idem_find_header(\"%s\") found another value", name);

	if (found)
	{
		int64		secs = -1;
		int64		want = -1;
		bool		parsed = idem_parse_unix_seconds(value, &secs);
		double		tolerance = tolerances[(data[0] >> 2) & 3];

		if (parsed != expected_seconds(value, &want) || (parsed && secs != want))
			fuzz_fail("idem_parse_unix_seconds disagrees");
		if (parsed)
		{
			int64		diff = (FUZZ_NOW_UNIX - secs) * USECS_PER_SEC;

			if (idem_timestamp_acceptable(secs, tolerance) !=
				(tolerance < 0 || (double) i64abs(diff) <= tolerance))
				fuzz_fail("idem_timestamp_acceptable disagrees for %lld", (long long) secs);
		}
		check_list(value, separators[data[0] & 3]);
	}
	fuzz_end();
	return 0;
}
