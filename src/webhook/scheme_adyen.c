/*
 * scheme_adyen.c
 *		Scheme: Adyen, whose notification items carry the HMAC-SHA256 of
 *		some of their fields inside them; and the event id of an item.
 *
 * May call: the wire format (wire.h: the quiet JSON parse, codecs) and the
 * crypto (crypto.h).  Anything that is not a well-formed notification item
 * is false, never an error; only a secret that is not hex raises one.
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "lib/stringinfo.h"

#include "webhook/scheme.h"

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
								 * for idem_json_container_end */
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

/* Parse the payload into p, by the parser */
static bool
adyen_parse_once(Slice payload, AdyenParse *p)
{
	JsonSemAction sem;

	memset(p, 0, sizeof(AdyenParse));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = p;
	sem.object_start = adyen_object_start;
	sem.object_end = idem_json_container_end;
	sem.array_start = adyen_array_start;
	sem.array_end = idem_json_container_end;
	sem.object_field_start = adyen_field_start;
	sem.object_field_end = adyen_field_end;
	sem.array_element_start = adyen_element_start;
	sem.scalar = adyen_scalar;
	return idem_json_parse_quietly(payload, &sem);
}

/* Did two parses find the same fields, with the same values? */
static bool
adyen_same_fields(const AdyenValue *a, const AdyenValue *b)
{
	for (int f = 0; f < ADYEN_NFIELDS; f++)
		if (a[f].count != b[f].count || a[f].kind != b[f].kind ||
			(a[f].text == NULL) != (b[f].text == NULL) ||
			(a[f].text != NULL && strcmp(a[f].text, b[f].text) != 0))
			return false;
	return true;
}

/*
 * Parse the payload into p.  A \u0000 escape anywhere fails the parse, so
 * the payload is then read around it (idem_json_nul_escapes_as): as long
 * as no field the item uses holds a NUL, it is read as it stands.
 */
static bool
adyen_parse(Slice payload, AdyenParse *p)
{
	Slice		one,
				two;
	AdyenParse *other;

	if (adyen_parse_once(payload, p))
		return true;
	if (!idem_json_nul_escapes_as(payload, '1', &one) ||
		!idem_json_nul_escapes_as(payload, '2', &two) ||
		!adyen_parse_once(one, p))
		return false;
	other = palloc(sizeof(AdyenParse));
	return adyen_parse_once(two, other) &&
		p->root_is_object == other->root_is_object &&
		p->root_members == other->root_members &&
		p->wrappers == other->wrappers &&
		p->wrapper_is_object == other->wrapper_is_object &&
		adyen_same_fields(p->direct, other->direct) &&
		adyen_same_fields(p->wrapped, other->wrapped);
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
idem_adyen_event_id(const VerifyScheme *scheme, const VerifyRequest *req,
					Slice *id)
{
	static const AdyenField fields[] = {ADYEN_PSP_REFERENCE, ADYEN_EVENT_CODE, ADYEN_SUCCESS};
	AdyenParse	parse;
	const AdyenValue *item;
	StringInfoData buf;

	if (!adyen_parse(req->payload, &parse) || (item = adyen_item(&parse)) == NULL)
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
	return idem_adyen_hex_key(secret, "adyen");
}

/*
 * The HMAC key of an Adyen scheme (scheme: its name, for the message): the
 * secret as Adyen's Customer Area shows it, hexadecimal digits, two a byte
 */
VerifyMacKey *
idem_adyen_hex_key(Slice secret, const char *scheme)
{
	size_t		len = secret.len / 2;
	uint8	   *bytes = idem_verify_secret_alloc(Max(len, 1));

	/* exactly two digits a byte: an odd count is refused too */
	if (!idem_decode_hex(secret, bytes, len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret is not a hexadecimal key"),
				 errdetail("An HMAC key of the \"%s\" scheme is an even number of hexadecimal digits, as Adyen's Customer Area shows it.",
						   scheme),
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
