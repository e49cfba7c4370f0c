/*
 * wire.h
 *		The wire format of webhook deliveries: slices of the request, its
 *		headers, hex and base64, forms, JSON members and timestamps.
 *
 * The lowest layer of the webhook code (wire_*.c): it may call the server
 * and libc, never the crypto (crypto.h), a scheme (scheme.h) or an entry
 * point (entry.h).  What it reads comes from whoever can reach the
 * application's endpoint, so every reader answers false (or NULL, or -1) on
 * anything malformed and lets the caller decide.  None raises an error but
 * for what no request can cause: running out of memory, and the server's
 * own conversion between encodings (wire_form.c says why).  The request's
 * bytes are read through Slices, never copied into C strings.
 */
#ifndef IDEM_WEBHOOK_WIRE_H
#define IDEM_WEBHOOK_WIRE_H

#include "idem.h"

#include "common/jsonapi.h"
#include "utils/jsonb.h"

/* Length of a SHA-256 digest, and so of an HMAC-SHA256; of an HMAC-SHA512 */
#define VERIFY_MAC_LEN		32
#define VERIFY_MAC512_LEN	64

/* A run of bytes of the request or of the secret; not NUL-terminated */
typedef struct Slice
{
	const char *data;
	size_t		len;
} Slice;

/* Slices, headers, lists and timestamps (wire_header.c) */
extern Slice idem_slice_of_text(text *t);
extern bool idem_slice_is(Slice s, const char *word);
extern bool idem_next_element(Slice *rest, char sep, Slice *item);
extern bool idem_split_pair(Slice item, char sep, Slice *name, Slice *value);
extern bool idem_find_header(Jsonb *headers, const char *name, Slice *value);
extern bool idem_parse_unix_seconds(Slice s, int64 *secs);
extern bool idem_timestamp_acceptable(int64 secs, double tolerance_usecs);
extern bool idem_parse_unix_millis(Slice s, int64 *secs);
extern bool idem_find_unix_millis(Jsonb *headers, const char *name,
								  double tolerance_usecs, Slice *value);
extern int64 idem_days_since_epoch(int year, int month, int day);
extern bool idem_parse_iso8601(Slice s, int64 *secs);

/* Hex, base64 and CRC-32 (wire_codec.c) */
extern int	idem_hex_value(char c);
extern bool idem_decode_hex(Slice s, uint8 *out, size_t outlen);
extern char *idem_encode_hex(const uint8 *in, size_t len);
extern ssize_t idem_base64_decode_canonical(Slice text, uint8 *out);
extern bool idem_decode_b64_mac(Slice s, uint8 *mac);
extern uint32 idem_crc32(Slice s);

/*
 * Forms (wire_form.c): application/x-www-form-urlencoded bodies, as the
 * Chinese gateways send their notifications.  Names and values are decoded
 * ("+" is a space, "%XX" a byte) and sorted by name, bytewise.
 */
typedef struct FormParam
{
	Slice		name;
	Slice		value;
} FormParam;

typedef struct Form
{
	FormParam  *params;			/* sorted by name, no name twice */
	int			nparams;
	bool		literal_non_ascii;	/* bytes above 0x7F not %-encoded */
} Form;

extern bool idem_form_decode_charset(Slice body, const char *charset_param,
									 Form *form);
extern bool idem_form_get(const Form *form, const char *name, Slice *value);
extern bool idem_url_unescape(Slice raw, Slice *out);
extern Slice idem_form_signed_string(const Form *form, const char *const *skip,
									 bool skip_empty);

/* JSON (wire_json.c) */
extern bool idem_json_parse_quietly(Slice json, JsonSemAction *sem);
extern IdemJsonAction idem_json_container_end(void *state);
extern bool idem_json_nul_escapes_as(Slice json, char n, Slice *copy);
extern bool idem_json_member_string(Slice json, const char *name,
									Slice *value);
extern bool idem_json_object_strings(Slice json, const char *const *names,
									 Slice *values);
extern bool idem_json_path_scalar(Slice json, const char *const *path,
								  Slice *value);

#endif							/* IDEM_WEBHOOK_WIRE_H */
