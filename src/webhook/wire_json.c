/*
 * wire_json.c
 *		Wire format: JSON bodies read without ever raising an error, the
 *		string member of the root object that holds an event id, a string or
 *		number down a path of members, and objects of strings.
 *
 * May call: the server's JSON parser (only on text it cannot raise an error
 * for, see json_safe_to_parse) and the hex reader of wire_codec.c.
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "webhook/wire.h"

/*
 * Nesting a JSON body may have.  The server's JSON parser recurses once per
 * level and raises an error when the stack runs short, which the request
 * must never cause; a wrapped Adyen notification item is three levels deep.
 */
#define JSON_MAX_DEPTH	64

/*
 * A container ends.  Shared by the parses that read JSON (the member search
 * here, Adyen's item): the state of each starts with its depth, an int.
 */
IdemJsonAction
idem_json_container_end(void *state)
{
	(*(int *) state)--;
	IDEM_JSON_GO_ON;
}

/*
 * Can the server's JSON parser read this text without raising an error?
 * It raises one where the nesting outgrows the stack, and where a \u
 * escape names a character the database encoding does not have; it answers
 * an error code for everything else.  So: nested at most max_depth deep,
 * and, unless the database is UTF-8, no \u escape beyond ASCII.  Counted
 * outside strings, as the parser counts up to the first error it finds.
 */
static bool
json_safe_to_parse(Slice json, int max_depth)
{
	bool		utf8 = GetDatabaseEncoding() == PG_UTF8;
	int			depth = 0;
	bool		in_string = false;

	for (size_t i = 0; i < json.len; i++)
	{
		char		c = json.data[i];

		if (in_string)
		{
			if (c == '"')
				in_string = false;
			else if (c == '\\' && i + 1 < json.len)
			{
				Slice		hex = {json.data + i + 2, 4};
				uint8		code[2];

				/* \u0000 to \u007F are ASCII: any other is not */
				if (!utf8 && json.data[i + 1] == 'u' && i + 5 < json.len &&
					(!idem_decode_hex(hex, code, 2) || code[0] != 0 || code[1] > 0x7F))
					return false;
				i++;
			}
		}
		else if (c == '"')
			in_string = true;
		else if (c == '{' || c == '[')
		{
			if (++depth > max_depth)
				return false;
		}
		else if (c == '}' || c == ']')
			depth--;
	}
	return true;
}

/*
 * Parse json with the server's JSON parser and the actions of sem; false,
 * never an error, for JSON that is not well formed (the parser answers an
 * error code) or that json_safe_to_parse refuses.
 */
bool
idem_json_parse_quietly(Slice json, JsonSemAction *sem)
{
	JsonLexContext *lex;

	if (json.len > PG_INT32_MAX || !json_safe_to_parse(json, JSON_MAX_DEPTH))
		return false;
	lex = idem_json_lex_context(unconstify(char *, json.data),
									   (int) json.len,
									   GetDatabaseEncoding(), true);
	return pg_parse_json(lex, sem) == JSON_SUCCESS;
}

/*
 * idem_json_parse_quietly with these actions over state, the containers'
 * ends idem_json_container_end's (the state starts with its depth)
 */
static bool
json_parse_actions(Slice json, void *state, json_struct_action object_start,
				   json_struct_action array_start, json_ofield_action field_start,
				   json_scalar_action scalar)
{
	JsonSemAction sem;

	memset(&sem, 0, sizeof(sem));
	sem.semstate = state;
	sem.object_start = object_start;
	sem.object_end = idem_json_container_end;
	sem.array_start = array_start;
	sem.array_end = idem_json_container_end;
	sem.object_field_start = field_start;
	sem.scalar = scalar;
	return idem_json_parse_quietly(json, &sem);
}

/*
 * json with each \u0000 escape written as \u000<n> instead, into *copy;
 * false if it has none.  The server's parser refuses to decode \u0000
 * (text holds no NUL), wherever it stands, though RFC 8259 allows it.  A
 * reader that parses the copies for n = 1 and n = 2 and finds the same
 * values in both found values that hold no NUL, as the text itself would
 * give them; a value that differs held one.
 */
bool
idem_json_nul_escapes_as(Slice json, char n, Slice *copy)
{
	char	   *out = NULL;
	bool		in_string = false;

	for (size_t i = 0; i < json.len; i++)
	{
		if (json.data[i] == '"')
			in_string = !in_string;
		else if (in_string && json.data[i] == '\\' && i + 1 < json.len)
		{
			if (json.len - i >= 6 && memcmp(json.data + i + 1, "u0000", 5) == 0)
			{
				if (out == NULL)
				{
					out = palloc(json.len);
					memcpy(out, json.data, json.len);
				}
				out[i + 5] = n;
			}
			i++;
		}
	}
	if (out == NULL)
		return false;
	copy->data = out;
	copy->len = json.len;
	return true;
}

/* A reader of one value of JSON text, arg saying which (json_read_around_nul) */
typedef bool (*JsonValueReader) (Slice json, const void *arg, Slice *value);

/*
 * The value read from json; if that fails, the value read alike from its
 * two copies with each \u0000 escape written otherwise, if they agree
 * (idem_json_nul_escapes_as): a \u0000 anywhere fails the server's parse
 */
static bool
json_read_around_nul(Slice json, JsonValueReader read, const void *arg, Slice *value)
{
	Slice		one,
				two,
				other;

	if (read(json, arg, value))
		return true;
	return idem_json_nul_escapes_as(json, '1', &one) &&
		idem_json_nul_escapes_as(json, '2', &two) &&
		read(one, arg, value) && read(two, arg, &other) &&
		value->len == other.len && memcmp(value->data, other.data, value->len) == 0;
}

/* The search of idem_json_member_string: one member of the root object */
typedef struct MemberSearch
{
	int			depth;			/* first, for idem_json_container_end */
	const char *name;
	bool		root_is_object;
	bool		at_member;		/* the current value is the member sought */
	int			count;			/* values of that name found */
	char	   *text;			/* the last one, if a string */
} MemberSearch;

/*
 * A container starts: one more level.  At the root, only an object will
 * do; as the member sought, it is a value that is no string.
 */
static void
member_enter(MemberSearch *m, bool is_object)
{
	if (m->depth == 0)
		m->root_is_object = is_object;
	else if (m->depth == 1 && m->at_member)
	{
		m->count++;
		m->text = NULL;
	}
	m->depth++;
}

/* An object starts */
static IdemJsonAction
member_object_start(void *state)
{
	member_enter(state, true);
	IDEM_JSON_GO_ON;
}

/* An array starts */
static IdemJsonAction
member_array_start(void *state)
{
	member_enter(state, false);
	IDEM_JSON_GO_ON;
}

/* A member starts: is it, at the root, the one sought? */
static IdemJsonAction
member_field_start(void *state, char *fname, bool isnull)
{
	MemberSearch *m = state;

	if (m->depth == 1)
		m->at_member = strcmp(fname, m->name) == 0;
	IDEM_JSON_GO_ON;
}

/* A scalar: kept if it is the member sought */
static IdemJsonAction
member_scalar(void *state, char *token, JsonTokenType type)
{
	MemberSearch *m = state;

	if (m->depth == 1 && m->at_member)
	{
		m->count++;
		m->text = type == JSON_TOKEN_STRING ? token : NULL;
	}
	IDEM_JSON_GO_ON;
}

/* Past the JSON whitespace (space, tab, newline, carriage return) at p */
static inline const char *
json_skip_space(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* What may follow a number or a literal in JSON */
static inline bool
json_delimiter(const char *p, const char *end)
{
	return p == end || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' ||
		*p == ',' || *p == '}' || *p == ']';
}

/*
 * Skip a JSON string without escapes at *p (its opening quote), of
 * printable ASCII; its contents into *s.  False for anything else.
 */
static inline bool
json_plain_string(const char **p, const char *end, Slice *s)
{
	/* the bytes that may stand in such a string: printable ASCII but " and \ */
	static bool plain[256];
	static bool ready = false;
	const char *q = *p + 1;

	if (!ready)
	{
		for (int c = 0x20; c <= 0x7E; c++)
			plain[c] = (c != '"' && c != '\\');
		ready = true;
	}
	s->data = q;
	while (q < end && plain[(unsigned char) *q])
		q++;
	if (q == end || *q != '"')
		return false;
	s->len = q - s->data;
	*p = q + 1;
	return true;
}

/* Skip a JSON number at *p, as RFC 8259 writes it; false if it is not one */
static inline bool
json_plain_number(const char **p, const char *end)
{
	const char *q = *p;

	if (q < end && *q == '-')
		q++;
	if (q < end && *q == '0')
		q++;
	else if (q < end && *q >= '1' && *q <= '9')
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	else
		return false;
	if (q < end && *q == '.')
	{
		if (++q == end || *q < '0' || *q > '9')
			return false;
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E'))
	{
		if (++q < end && (*q == '+' || *q == '-'))
			q++;
		if (q == end || *q < '0' || *q > '9')
			return false;
		while (q < end && *q >= '0' && *q <= '9')
			q++;
	}
	*p = q;
	return json_delimiter(q, end);
}

/*
 * idem_json_member_string's common case, without the server's parser: JSON of
 * printable ASCII without a backslash (so no escapes, and nothing the
 * encoding or the parser could object to), nested at most JSON_MAX_DEPTH
 * deep, well formed as RFC 8259 says, whose root object has the member
 * once, a string.  True, with *value pointing into json, only then; false
 * when it cannot tell, and the server's parser decides.  Everything
 * accepted here the server's parser accepts too, and finds the same value.
 */
static bool
json_member_fast(Slice json, const char *name, Slice *value)
{
	enum
	{
		S_VALUE,				/* a value */
		S_VALUE_OR_CLOSE,		/* the first value of an array, or "]" */
		S_KEY,					/* a member's name */
		S_KEY_OR_CLOSE,			/* the first member's name, or "}" */
		S_AFTER					/* "," or the end of a container or the text */
	}			state = S_VALUE;
	bool		is_object[JSON_MAX_DEPTH];
	int			depth = 0;
	bool		root_is_object = false;
	bool		target = false; /* the next value is the member sought */
	int			found = 0;
	size_t		namelen = strlen(name);
	const char *p = json.data;
	const char *end = json.data + json.len;
	Slice		s;

	for (;;)
	{
		char		c;

		p = json_skip_space(p, end);
		if (p == end)
			return state == S_AFTER && depth == 0 && root_is_object && found == 1;
		c = *p;
		if ((c == '}' && state == S_KEY_OR_CLOSE) ||
			(c == ']' && state == S_VALUE_OR_CLOSE) ||
			((c == '}' || c == ']') && state == S_AFTER && depth > 0))
		{
			if (is_object[depth - 1] != (c == '}'))
				return false;
			depth--;
			p++;
			state = S_AFTER;
			continue;
		}
		switch (state)
		{
			case S_KEY:
			case S_KEY_OR_CLOSE:
				if (c != '"' || !json_plain_string(&p, end, &s))
					return false;
				p = json_skip_space(p, end);
				if (p == end || *p != ':')
					return false;
				p++;
				target = (depth == 1 && s.len == namelen && memcmp(s.data, name, namelen) == 0);
				state = S_VALUE;
				break;
			case S_VALUE:
			case S_VALUE_OR_CLOSE:
				if (c == '"')
				{
					if (!json_plain_string(&p, end, &s))
						return false;
					if (target)
					{
						if (found++ > 0)
							return false;
						*value = s;
					}
				}
				else if (target)
					return false;	/* not a string: the parser says no */
				else if (c == '{' || c == '[')
				{
					if (depth == JSON_MAX_DEPTH)
						return false;
					if (depth == 0)
						root_is_object = (c == '{');
					is_object[depth++] = (c == '{');
					p++;
					state = c == '{' ? S_KEY_OR_CLOSE : S_VALUE_OR_CLOSE;
					continue;
				}
				else if (c == 't' || c == 'f' || c == 'n')
				{
					const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
					size_t		len = strlen(word);

					if ((size_t) (end - p) < len || memcmp(p, word, len) != 0 ||
						!json_delimiter(p + len, end))
						return false;
					p += len;
				}
				else if (!json_plain_number(&p, end))
					return false;
				target = false;
				state = S_AFTER;
				break;
			case S_AFTER:
				if (depth == 0 || c != ',')
					return false;
				p++;
				state = is_object[depth - 1] ? S_KEY : S_VALUE;
				break;
		}
	}
}

/*
 * The string value of member name (a C string) of the root object of json,
 * by the parser
 */
static bool
json_member_parsed(Slice json, const void *name, Slice *value)
{
	MemberSearch m;

	memset(&m, 0, sizeof(m));
	m.name = name;
	if (!json_parse_actions(json, &m, member_object_start, member_array_start,
							member_field_start, member_scalar) ||
		!m.root_is_object || m.count != 1 || m.text == NULL)
		return false;
	value->data = m.text;
	value->len = strlen(m.text);
	return true;
}

/*
 * The string value of member name of the root object of json: false,
 * never an error, if json is not well formed, its root is not an object,
 * or the member is absent, given twice, not a string or holds a NUL
 */
bool
idem_json_member_string(Slice json, const char *name, Slice *value)
{
	return json_member_fast(json, name, value) ||
		json_read_around_nul(json, json_member_parsed, name, value);
}

/* Members a path of idem_json_path_scalar may name */
#define JSON_PATH_MAX	4

/* The search of idem_json_path_scalar: one value down a path of members */
typedef struct PathSearch
{
	int			depth;			/* first, for idem_json_container_end */
	const char *const *path;
	int			npath;
	bool		root_is_object;
	bool		on[JSON_PATH_MAX + 1];	/* the member read at depth d is path[d-1] */
	int			seen[JSON_PATH_MAX];	/* times path[i] was met where it is sought */
	char	   *text;			/* the value, if a string or a number */
} PathSearch;

/* A container starts: nothing in it is on the path until a member says so */
static void
path_enter(PathSearch *s, bool is_object)
{
	if (s->depth == 0)
		s->root_is_object = is_object;
	s->depth++;
	if (s->depth <= s->npath)
		s->on[s->depth] = false;
}

/* An object starts */
static IdemJsonAction
path_object_start(void *state)
{
	path_enter(state, true);
	IDEM_JSON_GO_ON;
}

/* An array starts */
static IdemJsonAction
path_array_start(void *state)
{
	path_enter(state, false);
	IDEM_JSON_GO_ON;
}

/* A member starts: the path's next name, under the members before it? */
static IdemJsonAction
path_field_start(void *state, char *fname, bool isnull)
{
	PathSearch *s = state;
	int			d = s->depth;

	if (d >= 1 && d <= s->npath)
	{
		s->on[d] = (d == 1 || s->on[d - 1]) && strcmp(fname, s->path[d - 1]) == 0;
		if (s->on[d])
			s->seen[d - 1]++;
	}
	IDEM_JSON_GO_ON;
}

/* A scalar: kept if it is the path's last member, a string or a number */
static IdemJsonAction
path_scalar(void *state, char *token, JsonTokenType type)
{
	PathSearch *s = state;

	if (s->depth == s->npath && s->on[s->depth])
		s->text = (type == JSON_TOKEN_STRING || type == JSON_TOKEN_NUMBER) ? token : NULL;
	IDEM_JSON_GO_ON;
}

/*
 * The value down path (a NULL-terminated list of names) in json, by the
 * parser (idem_json_path_scalar)
 */
static bool
json_path_parsed(Slice json, const void *path, Slice *value)
{
	PathSearch	s;

	memset(&s, 0, sizeof(s));
	s.path = path;
	while (s.path[s.npath] != NULL)
		s.npath++;
	Assert(s.npath >= 1 && s.npath <= JSON_PATH_MAX);
	if (!json_parse_actions(json, &s, path_object_start, path_array_start,
							path_field_start, path_scalar) ||
		!s.root_is_object || s.text == NULL)
		return false;
	for (int i = 0; i < s.npath; i++)
		if (s.seen[i] != 1)
			return false;
	value->data = s.text;
	value->len = strlen(s.text);
	return true;
}

/*
 * The value down path (a NULL-terminated list of member names, from the
 * root object, JSON_PATH_MAX at most) of json, a string or a number (its
 * text as written): false, never an error, if json is not well formed,
 * its root is not an object, a member of the path is absent, given twice
 * where it is sought, or not an object but the last, or the value is
 * another kind or holds a NUL.  A \u0000 elsewhere is read around.
 */
bool
idem_json_path_scalar(Slice json, const char *const *path, Slice *value)
{
	return json_read_around_nul(json, json_path_parsed, path, value);
}

/* The reading of idem_json_object_strings */
typedef struct ObjectStrings
{
	int			depth;			/* first, for idem_json_container_end */
	const char *const *names;
	Slice	   *values;
	int			member;			/* index in names of the current member */
	bool		root_is_object;
	bool		ok;
} ObjectStrings;

/* A container starts: only the root may be one, an object */
static IdemJsonAction
strings_object_start(void *state)
{
	ObjectStrings *o = state;

	if (o->depth == 0)
		o->root_is_object = true;
	else
		o->ok = false;
	o->depth++;
	IDEM_JSON_GO_ON;
}

/* An array starts: never one of the members */
static IdemJsonAction
strings_array_start(void *state)
{
	ObjectStrings *o = state;

	o->ok = false;
	o->depth++;
	IDEM_JSON_GO_ON;
}

/* A member starts: one of the names, not seen before */
static IdemJsonAction
strings_field_start(void *state, char *fname, bool isnull)
{
	ObjectStrings *o = state;

	o->member = -1;
	for (int i = 0; o->names[i] != NULL; i++)
		if (strcmp(fname, o->names[i]) == 0)
			o->member = i;
	if (o->member < 0 || o->values[o->member].data != NULL)
		o->ok = false;
	IDEM_JSON_GO_ON;
}

/* A scalar: a member's string value */
static IdemJsonAction
strings_scalar(void *state, char *token, JsonTokenType type)
{
	ObjectStrings *o = state;

	if (o->depth != 1 || type != JSON_TOKEN_STRING || o->member < 0)
		o->ok = false;
	else
	{
		o->values[o->member].data = token;
		o->values[o->member].len = strlen(token);
	}
	IDEM_JSON_GO_ON;
}

/*
 * Read json as an object of string members, each named in names (a
 * NULL-terminated list) and given at most once, into values (one a name,
 * { NULL, 0 } for a member not given): false, never an error, for
 * anything else (not well formed, another root, another member, a value
 * that is not a string, a \u0000 escape).  For a configuration such as a
 * secret, where a misspelt member must not go unnoticed.
 */
bool
idem_json_object_strings(Slice json, const char *const *names, Slice *values)
{
	ObjectStrings o;

	memset(&o, 0, sizeof(o));
	o.names = names;
	o.values = values;
	o.member = -1;
	o.ok = true;
	for (int i = 0; names[i] != NULL; i++)
	{
		values[i].data = NULL;
		values[i].len = 0;
	}
	return json_parse_actions(json, &o, strings_object_start, strings_array_start,
							  strings_field_start, strings_scalar) &&
		o.root_is_object && o.ok;
}
