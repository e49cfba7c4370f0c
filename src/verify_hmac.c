/*
 * verify_hmac.c
 *		The schemes of idem_webhook_verify whose signature is an HMAC-SHA256
 *		under a shared secret: GitHub, Shopify, Razorpay and Checkout.com,
 *		which put the MAC of the body in one header; Paddle Billing, which
 *		lists MACs of the timestamp and the body beside the timestamp; and
 *		Adyen, whose notification items carry the MAC of some of their
 *		fields inside them.
 *
 * The MAC is computed with OpenSSL's libcrypto (idem_verify_mac) and compared
 * in constant time (idem_mac_equal).  As everywhere in idem_webhook_verify,
 * anything wrong with the request is false, never an error.
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"

#include "verify.h"

/* How a MAC is written in its header */
typedef enum MacEncoding
{
	MAC_HEX,					/* 64 hex digits, either case */
	MAC_BASE64					/* canonical padded standard base64 */
} MacEncoding;

/* One header holding the MAC of the body, after a fixed prefix */
typedef struct BodyMacFormat
{
	const char *header;
	const char *prefix;
	MacEncoding encoding;
} BodyMacFormat;

/* The key of a body-MAC scheme: the HMAC key and where the MAC is */
typedef struct BodyMacKey
{
	VerifyMacKey *mac;
	const BodyMacFormat *format;
} BodyMacKey;

/* GitHub: X-Hub-Signature-256: sha256=<hex> (the SHA-1 header is not read) */
static const BodyMacFormat github_format = {"x-hub-signature-256", "sha256=", MAC_HEX};

/* Shopify: X-Shopify-Hmac-Sha256: <base64> */
static const BodyMacFormat shopify_format = {"x-shopify-hmac-sha256", "", MAC_BASE64};

/* Razorpay: X-Razorpay-Signature: <hex> */
static const BodyMacFormat razorpay_format = {"x-razorpay-signature", "", MAC_HEX};

/* Checkout.com: Cko-Signature: <hex> */
static const BodyMacFormat checkout_format = {"cko-signature", "", MAC_HEX};

/*
 * The key of a body-MAC scheme: each of these senders keys its HMAC with
 * the secret's text as given, so any non-empty secret is a key.
 */
static void *
body_mac_key(Slice secret, const BodyMacFormat *format)
{
	BodyMacKey *key = palloc(sizeof(BodyMacKey));

	key->mac = idem_verify_mac_key((const uint8 *) secret.data, secret.len);
	key->format = format;
	return key;
}

/* GitHub's webhook secret */
void *
idem_github_prepare(Slice secret)
{
	return body_mac_key(secret, &github_format);
}

/* Shopify's app client secret */
void *
idem_shopify_prepare(Slice secret)
{
	return body_mac_key(secret, &shopify_format);
}

/* Razorpay's webhook secret */
void *
idem_razorpay_prepare(Slice secret)
{
	return body_mac_key(secret, &razorpay_format);
}

/* Checkout.com's signature key */
void *
idem_checkout_prepare(Slice secret)
{
	return body_mac_key(secret, &checkout_format);
}

/*
 * A body-MAC scheme: the header, taken as it is, must be the prefix exactly
 * (case and all, nothing around it) followed by the MAC of the raw body in
 * the scheme's encoding.  One header, one MAC: these senders have no list.
 */
bool
idem_body_mac_verify(void *k, const VerifyRequest *req)
{
	BodyMacKey *key = k;
	size_t		prefix_len = strlen(key->format->prefix);
	Slice		value;
	uint8		expected[VERIFY_MAC_LEN];
	uint8		given[VERIFY_MAC_LEN];
	bool		decoded;
	bool		matched;

	if (!idem_find_header(req->headers, key->format->header, &value))
		return false;
	if (value.len < prefix_len ||
		memcmp(value.data, key->format->prefix, prefix_len) != 0)
		return false;
	value.data += prefix_len;
	value.len -= prefix_len;
	if (key->format->encoding == MAC_HEX)
		decoded = idem_decode_hex(value, given, VERIFY_MAC_LEN);
	else
		decoded = idem_decode_b64_mac(value, given);
	if (!decoded)
		return false;

	idem_verify_mac(key->mac, &req->payload, 1, expected);
	matched = idem_mac_equal(expected, given, VERIFY_MAC_LEN);
	explicit_bzero(expected, sizeof(expected));
	return matched;
}

/* Paddle Billing keys its HMAC with the endpoint secret key as given */
void *
idem_paddle_prepare(Slice secret)
{
	return idem_verify_mac_key((const uint8 *) secret.data, secret.len);
}

/*
 * Paddle Billing: Paddle-Signature is "ts=<unix>;h1=<hex>[;h1=<hex>...]",
 * the MAC is over "<ts>:<payload>"; while a secret is rotated Paddle sends
 * one h1 per active secret.  Stripe's shape with other names.
 */
bool
idem_paddle_verify(void *key, const VerifyRequest *req)
{
	static const TimestampedMacs format = {"paddle-signature", ';', "ts", "h1", ":"};

	return idem_verify_timestamped_macs(&format, key, req);
}

/*
 * Adyen: the notification item signs itself.  The MAC is over eight of its
 * fields joined by ":" (absent ones empty), in this order, and sits in
 * additionalData.hmacSignature.  The last entries are the containers,
 * whose own kind is checked.
 */
typedef enum AdyenField
{
	ADYEN_PSP_REFERENCE,
	ADYEN_ORIGINAL_REFERENCE,
	ADYEN_MERCHANT_ACCOUNT,
	ADYEN_MERCHANT_REFERENCE,
	ADYEN_VALUE,
	ADYEN_CURRENCY,
	ADYEN_EVENT_CODE,
	ADYEN_SUCCESS,
	ADYEN_SIGNED = ADYEN_SUCCESS + 1,	/* the signed fields come first */
	ADYEN_SIGNATURE = ADYEN_SIGNED,
	ADYEN_AMOUNT,
	ADYEN_ADDITIONAL_DATA,
	ADYEN_NFIELDS
} AdyenField;

/* Where each field is in the item: a member, or a member of a member */
static const char *const adyen_paths[ADYEN_NFIELDS][2] = {
	{"pspReference", NULL},
	{"originalReference", NULL},
	{"merchantAccountCode", NULL},
	{"merchantReference", NULL},
	{"amount", "value"},
	{"amount", "currency"},
	{"eventCode", NULL},
	{"success", NULL},
	{"additionalData", "hmacSignature"},
	{"amount", NULL},
	{"additionalData", NULL},
};

/* The member that wraps an item in Adyen's notificationItems array */
#define ADYEN_WRAPPER	"NotificationRequestItem"

/*
 * Nesting the payload may have.  The server's JSON parser recurses once per
 * level and raises an error when the stack runs short, which the request
 * must never cause; a wrapped notification item is three levels deep.
 */
#define ADYEN_MAX_DEPTH	64

/* What the JSON holds at one field's place */
typedef enum AdyenKind
{
	ADYEN_ABSENT = 0,
	ADYEN_NULL,
	ADYEN_STRING,
	ADYEN_OTHER_SCALAR,			/* number, true, false: their text */
	ADYEN_OBJECT,
	ADYEN_ARRAY
} AdyenKind;

/* A field as found: how often, what kind, and a scalar's text */
typedef struct AdyenValue
{
	int			count;			/* more than one: ambiguous */
	AdyenKind	kind;
	char	   *text;			/* scalars; NULL otherwise */
} AdyenValue;

/*
 * The state of the parse.  The item is the root object, or the object in
 * the root's only member NotificationRequestItem: both readings are
 * collected at once and the root's members decide at the end.
 */
typedef struct AdyenParse
{
	int			depth;			/* containers around the current value; first,
								 * for json_container_end */
	char	   *path[4];		/* path[d]: the member name at depth d, or
								 * NULL for an array element */
	bool		root_is_object;
	int			root_members;
	int			wrappers;		/* root members named NotificationRequestItem */
	bool		wrapper_is_object;
	AdyenValue	direct[ADYEN_NFIELDS];	/* the root as the item */
	AdyenValue	wrapped[ADYEN_NFIELDS]; /* the wrapped object as the item */
} AdyenParse;

/* The field at path[first..depth] (the item's members from first), or -1 */
static int
adyen_field_at(AdyenParse *p, int first)
{
	int			len = p->depth - first + 1;

	if (len < 1 || len > 2 || p->path[first] == NULL ||
		(len == 2 && p->path[first + 1] == NULL))
		return -1;
	for (int f = 0; f < ADYEN_NFIELDS; f++)
	{
		if (strcmp(p->path[first], adyen_paths[f][0]) != 0)
			continue;
		if (len == 1 && adyen_paths[f][1] == NULL)
			return f;
		if (len == 2 && adyen_paths[f][1] != NULL &&
			strcmp(p->path[first + 1], adyen_paths[f][1]) == 0)
			return f;
	}
	return -1;
}

/* Is the current place inside the root's member NotificationRequestItem? */
static bool
adyen_in_wrapper(const AdyenParse *p)
{
	return p->depth >= 1 && p->path[1] != NULL &&
		strcmp(p->path[1], ADYEN_WRAPPER) == 0;
}

/* Count one more value for a field, keeping the last */
static void
adyen_count(AdyenValue *value, AdyenKind kind, char *text)
{
	value->count++;
	value->kind = kind;
	value->text = text;
}

/*
 * Record a value of the given kind at the current place, under both
 * readings; true if it is one of the fields (text is then kept)
 */
static bool
adyen_note(AdyenParse *p, AdyenKind kind, char *text)
{
	int			f;
	bool		kept = false;

	if (p->depth == 1 && kind == ADYEN_OBJECT && adyen_in_wrapper(p))
		p->wrapper_is_object = true;
	if (p->depth >= lengthof(p->path))
		return false;
	if ((f = adyen_field_at(p, 1)) >= 0)
	{
		adyen_count(&p->direct[f], kind, text);
		kept = true;
	}
	if (p->depth >= 2 && adyen_in_wrapper(p) && (f = adyen_field_at(p, 2)) >= 0)
	{
		adyen_count(&p->wrapped[f], kind, text);
		kept = true;
	}
	return kept;
}

/* A container starts: note its kind where it stands, then go in */
static void
adyen_container_start(AdyenParse *p, AdyenKind kind)
{
	if (p->depth == 0 && kind == ADYEN_OBJECT)
		p->root_is_object = true;
	adyen_note(p, kind, NULL);
	p->depth++;
	if (p->depth < lengthof(p->path))
		p->path[p->depth] = NULL;
}

/* An object starts */
static IdemJsonAction
adyen_object_start(void *state)
{
	adyen_container_start(state, ADYEN_OBJECT);
	IDEM_JSON_GO_ON;
}

/* An array starts */
static IdemJsonAction
adyen_array_start(void *state)
{
	adyen_container_start(state, ADYEN_ARRAY);
	IDEM_JSON_GO_ON;
}

/*
 * A container ends.  Shared by the parses of this file: the state of each
 * starts with its depth.
 */
static IdemJsonAction
json_container_end(void *state)
{
	(*(int *) state)--;
	IDEM_JSON_GO_ON;
}

/* A member of an object starts: its name is the path at this depth */
static IdemJsonAction
adyen_field_start(void *state, char *fname, bool isnull)
{
	AdyenParse *p = state;

	if (p->depth == 1)
	{
		p->root_members++;
		if (strcmp(fname, ADYEN_WRAPPER) == 0)
			p->wrappers++;
	}
	if (p->depth < lengthof(p->path))
		p->path[p->depth] = fname;
	IDEM_JSON_GO_ON;
}

/* A member ends: its name is no longer needed */
static IdemJsonAction
adyen_field_end(void *state, char *fname, bool isnull)
{
	AdyenParse *p = state;

	if (p->depth < lengthof(p->path))
		p->path[p->depth] = NULL;
	pfree(fname);
	IDEM_JSON_GO_ON;
}

/* An array element starts: no name in the path */
static IdemJsonAction
adyen_element_start(void *state, bool isnull)
{
	AdyenParse *p = state;

	if (p->depth < lengthof(p->path))
		p->path[p->depth] = NULL;
	IDEM_JSON_GO_ON;
}

/* A scalar: kept if it is one of the fields, freed otherwise */
static IdemJsonAction
adyen_scalar(void *state, char *token, JsonTokenType type)
{
	AdyenKind	kind;

	if (type == JSON_TOKEN_NULL)
		kind = ADYEN_NULL;
	else if (type == JSON_TOKEN_STRING)
		kind = ADYEN_STRING;
	else
		kind = ADYEN_OTHER_SCALAR;
	if (!adyen_note(state, kind, kind == ADYEN_NULL ? NULL : token) &&
		token != NULL)
		pfree(token);
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
static bool
json_parse_quietly(Slice json, JsonSemAction *sem)
{
	JsonLexContext *lex;

	if (json.len > PG_INT32_MAX || !json_safe_to_parse(json, ADYEN_MAX_DEPTH))
		return false;
	lex = idem_json_lex_context(unconstify(char *, json.data),
									   (int) json.len,
									   GetDatabaseEncoding(), true);
	return pg_parse_json(lex, sem) == JSON_SUCCESS;
}

/* Parse the payload into p */
static bool
adyen_parse(Slice payload, AdyenParse *p)
{
	JsonSemAction sem;

	memset(p, 0, sizeof(AdyenParse));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = p;
	sem.object_start = adyen_object_start;
	sem.object_end = json_container_end;
	sem.array_start = adyen_array_start;
	sem.array_end = json_container_end;
	sem.object_field_start = adyen_field_start;
	sem.object_field_end = adyen_field_end;
	sem.array_element_start = adyen_element_start;
	sem.scalar = adyen_scalar;
	return json_parse_quietly(payload, &sem);
}

/* The search of idem_json_member_string: one member of the root object */
typedef struct MemberSearch
{
	int			depth;			/* first, for json_container_end */
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
 * encoding or the parser could object to), nested at most ADYEN_MAX_DEPTH
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
	bool		is_object[ADYEN_MAX_DEPTH];
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
					if (depth == ADYEN_MAX_DEPTH)
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
 * The string value of member name of the root object of json: false,
 * never an error, if json is not well formed, its root is not an object,
 * or the member is absent, given twice or not a string
 */
bool
idem_json_member_string(Slice json, const char *name, Slice *value)
{
	MemberSearch m;
	JsonSemAction sem;

	if (json_member_fast(json, name, value))
		return true;
	memset(&m, 0, sizeof(m));
	m.name = name;
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &m;
	sem.object_start = member_object_start;
	sem.object_end = json_container_end;
	sem.array_start = member_array_start;
	sem.array_end = json_container_end;
	sem.object_field_start = member_field_start;
	sem.scalar = member_scalar;
	if (!json_parse_quietly(json, &sem) || !m.root_is_object || m.count != 1 ||
		m.text == NULL)
		return false;
	value->data = m.text;
	value->len = strlen(m.text);
	return true;
}

/*
 * The item's fields, if they make a notification item: every field at
 * most once, the signed ones scalars or null, amount and additionalData
 * objects or null, and the signature a string.  The root is the item, or
 * wraps it as its only member NotificationRequestItem.
 */
static const AdyenValue *
adyen_item(const AdyenParse *p)
{
	const AdyenValue *item;

	if (!p->root_is_object)
		return NULL;
	if (p->wrappers == 0)
		item = p->direct;
	else if (p->wrappers == 1 && p->root_members == 1 && p->wrapper_is_object)
		item = p->wrapped;
	else
		return NULL;

	for (int f = 0; f < ADYEN_NFIELDS; f++)
	{
		AdyenKind	kind = item[f].kind;

		if (item[f].count > 1)
			return NULL;
		if (f == ADYEN_AMOUNT || f == ADYEN_ADDITIONAL_DATA)
		{
			if (kind != ADYEN_ABSENT && kind != ADYEN_NULL && kind != ADYEN_OBJECT)
				return NULL;
		}
		else if (kind == ADYEN_OBJECT || kind == ADYEN_ARRAY)
			return NULL;
	}
	if (item[ADYEN_SIGNATURE].kind != ADYEN_STRING)
		return NULL;
	return item;
}

/*
 * The event id of an Adyen notification item: "pspReference:eventCode:
 * success"; false, never an error, if the payload is no item or lacks one
 * of the three
 */
bool
idem_adyen_event_id(Slice payload, Slice *id)
{
	static const AdyenField fields[] = {ADYEN_PSP_REFERENCE, ADYEN_EVENT_CODE, ADYEN_SUCCESS};
	AdyenParse	parse;
	const AdyenValue *item;
	StringInfoData buf;

	if (!adyen_parse(payload, &parse) || (item = adyen_item(&parse)) == NULL)
		return false;
	initStringInfo(&buf);
	for (int i = 0; i < lengthof(fields); i++)
	{
		const char *text = item[fields[i]].text;

		if (text == NULL || text[0] == '\0')
			return false;
		appendStringInfo(&buf, "%s%s", i > 0 ? ":" : "", text);
	}
	id->data = buf.data;
	id->len = buf.len;
	return true;
}

/*
 * Adyen's HMAC key is shown as hex in the Customer Area; the MAC is keyed
 * with the bytes it spells
 */
void *
idem_adyen_prepare(Slice secret)
{
	size_t		len = secret.len / 2;
	uint8	   *bytes = idem_verify_secret_alloc(Max(len, 1));

	/* exactly two digits a byte: an odd count is refused too */
	if (!idem_decode_hex(secret, bytes, len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret is not a hexadecimal key"),
				 errdetail("An HMAC key of the \"adyen\" scheme is an even number of hexadecimal digits, as Adyen's Customer Area shows it."),
				 errhint("Check for stray whitespace or a truncated key.")));
	return idem_verify_mac_key(bytes, len);
}

/*
 * Adyen: the payload is one NotificationRequestItem (the item itself, as
 * Adyen's libraries take it, or {"NotificationRequestItem": item}, an
 * element of the notification's notificationItems as it comes); the MAC
 * is over pspReference:originalReference:merchantAccountCode:
 * merchantReference:amount.value:amount.currency:eventCode:success, each
 * a string's text or a number's or boolean's as written, absent or null
 * empty, and additionalData.hmacSignature holds its base64.  There is no
 * timestamp, so the tolerance does not apply; headers are not read.
 * Anything that is not such an item, bad JSON included, is false.
 */
bool
idem_adyen_verify(void *k, const VerifyRequest *req)
{
	VerifyMacKey *key = k;
	AdyenParse	parse;
	const AdyenValue *item;
	Slice		parts[2 * ADYEN_SIGNED - 1];
	uint8		expected[VERIFY_MAC_LEN];
	uint8		given[VERIFY_MAC_LEN];
	Slice		signature;
	bool		matched;

	if (!adyen_parse(req->payload, &parse) || (item = adyen_item(&parse)) == NULL)
		return false;
	signature.data = item[ADYEN_SIGNATURE].text;
	signature.len = strlen(signature.data);
	if (!idem_decode_b64_mac(signature, given))
		return false;

	for (int f = 0; f < ADYEN_SIGNED; f++)
	{
		const char *text = item[f].text != NULL ? item[f].text : "";

		if (f > 0)
		{
			parts[2 * f - 1].data = ":";
			parts[2 * f - 1].len = 1;
		}
		parts[2 * f].data = text;
		parts[2 * f].len = strlen(text);
	}
	idem_verify_mac(key, parts, lengthof(parts), expected);
	matched = idem_mac_equal(expected, given, VERIFY_MAC_LEN);
	explicit_bzero(expected, sizeof(expected));
	return matched;
}
