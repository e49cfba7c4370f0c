/*
 * verify.h
 *		What the signature schemes of idem_webhook_verify share.
 *
 * Each scheme is a pair of functions in the table of webhook_verify.c: one
 * turns the configured secret into a key (raising 22023 if it cannot be
 * one, before the request is looked at), the other checks a request with
 * that key and answers true or false, never an error.  The request's bytes
 * are read through Slices, never copied into C strings.
 */
#ifndef IDEM_VERIFY_H
#define IDEM_VERIFY_H

#include "idem.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "utils/jsonb.h"

#include <openssl/evp.h>
#include <openssl/x509.h>

/* Length of a SHA-256 digest, and so of an HMAC-SHA256 */
#define VERIFY_MAC_LEN		32

/* A run of bytes of the request or of the secret; not NUL-terminated */
typedef struct Slice
{
	const char *data;
	size_t		len;
} Slice;

/* The request as idem_webhook_verify received it */
typedef struct VerifyRequest
{
	Slice		payload;		/* the raw body */
	Jsonb	   *headers;		/* name -> string */
	double		tolerance_usecs;	/* -1: no timestamp check */
} VerifyRequest;

/* A scheme: its name, how its secret becomes a key, how a request is checked */
typedef struct VerifyScheme
{
	const char *name;
	void	   *(*prepare) (Slice secret);
	bool		(*verify) (void *key, const VerifyRequest *req);
} VerifyScheme;

/*
 * A signature header of Stripe's shape: name=value elements separated by
 * sep, one timestamp element and one or more MAC elements, each the hex
 * HMAC-SHA256 of "<timestamp><joiner><payload>"
 */
typedef struct TimestampedMacs
{
	const char *header;
	char		sep;
	const char *ts_name;
	const char *mac_name;
	const char *joiner;
} TimestampedMacs;

/* The table of schemes and the arguments naming them (webhook_verify.c) */
extern const VerifyScheme *idem_verify_scheme(Slice name);
extern const char *idem_verify_scheme_names(void);
extern const VerifyScheme *idem_verify_scheme_arg(FunctionCallInfo fcinfo, int argno);
extern Slice idem_verify_secret_arg(FunctionCallInfo fcinfo, int argno);
extern double idem_verify_tolerance_usecs(const Interval *iv, bool null_skips);

/* Bytes and headers (verify_util.c) */
extern Slice idem_slice_of_text(text *t);
extern bool idem_slice_is(Slice s, const char *word);
extern bool idem_next_element(Slice *rest, char sep, Slice *item);
extern bool idem_split_pair(Slice item, char sep, Slice *name, Slice *value);
extern bool idem_find_header(Jsonb *headers, const char *name, Slice *value);
extern bool idem_parse_unix_seconds(Slice s, int64 *secs);
extern bool idem_timestamp_acceptable(int64 secs, double tolerance_usecs);
extern bool idem_decode_hex(Slice s, uint8 *out, size_t outlen);
extern uint8 *idem_decode_base64(Slice s, size_t *len);
extern bool idem_decode_b64_mac(Slice s, uint8 *mac);
extern bool idem_mac_equal(const uint8 *a, const uint8 *b, size_t len);

/*
 * Secrets and OpenSSL objects of one call (verify_util.c).  What a scheme
 * makes from the secret or the request is handed over here; the entry point
 * wipes and frees all of it when the call ends, error or not.
 */
extern void *idem_verify_secret_alloc(size_t len);
extern void idem_verify_track(void *object, void (*release) (void *));
extern void idem_verify_track_pkey(EVP_PKEY *key);
extern void idem_verify_release_all(void);

/*
 * A key prepared to be kept past the call (a webhook source's): what its
 * preparation tracked is taken over, and released when the key is dropped.
 */
typedef struct VerifyHeld VerifyHeld;
extern int	idem_verify_tracked_mark(void);
extern VerifyHeld *idem_verify_hold(int mark);
extern void idem_verify_held_release(VerifyHeld *held);

/* Cryptography, all from OpenSSL's libcrypto (verify_util.c) */
typedef struct VerifyMacKey VerifyMacKey;
extern VerifyMacKey *idem_verify_mac_key(const uint8 *key, size_t len);
extern void idem_verify_mac(const VerifyMacKey *key, const Slice *parts,
							int nparts, uint8 *mac);
extern unsigned int idem_verify_digest(const EVP_MD *md, const Slice *parts,
									   int nparts, unsigned char *out);
extern EVP_PKEY *idem_verify_public_key(Slice der);
extern bool idem_verify_signature(EVP_PKEY *key, const EVP_MD *md,
								  const Slice *parts, int nparts,
								  const uint8 *sig, size_t siglen);
extern bool idem_verify_timestamped_macs(const TimestampedMacs *format,
										 const VerifyMacKey *key,
										 const VerifyRequest *req);

/* HMAC-SHA256 schemes with a shared secret (verify_hmac.c) */
extern void *idem_github_prepare(Slice secret);
extern void *idem_shopify_prepare(Slice secret);
extern void *idem_razorpay_prepare(Slice secret);
extern void *idem_checkout_prepare(Slice secret);
extern bool idem_body_mac_verify(void *key, const VerifyRequest *req);
extern void *idem_paddle_prepare(Slice secret);
extern bool idem_paddle_verify(void *key, const VerifyRequest *req);
extern void *idem_adyen_prepare(Slice secret);
extern bool idem_adyen_verify(void *key, const VerifyRequest *req);
extern bool idem_adyen_event_id(Slice payload, Slice *id);
extern bool idem_json_member_string(Slice json, const char *name,
									Slice *value);

/*
 * PEM (verify_util.c): the blocks of a text and the objects they hold,
 * read with OpenSSL; a block read in an earlier call is not decoded again.
 */
typedef enum VerifyPemStatus
{
	VERIFY_PEM_BLOCK,			/* a block was read */
	VERIFY_PEM_NONE,			/* no block is left */
	VERIFY_PEM_MALFORMED		/* a BEGIN line starts something unreadable */
} VerifyPemStatus;

typedef struct VerifyPemBlock
{
	Slice		before;			/* the text before the BEGIN line */
	const char *label;			/* "CERTIFICATE", "PUBLIC KEY"... */
	X509	   *cert;			/* a CERTIFICATE block's certificate */
	EVP_PKEY   *key;			/* a PUBLIC KEY or RSA PUBLIC KEY block's key */
} VerifyPemBlock;

extern VerifyPemStatus idem_verify_pem_next(Slice *rest,
											VerifyPemBlock *block);
extern STACK_OF(X509) *idem_verify_pem_certificates(Slice text);
extern void idem_verify_track_certificate(X509 *cert);

/*
 * Forms (verify_util.c): application/x-www-form-urlencoded bodies, as the
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
extern Slice idem_form_signed_string(const Form *form, const char *const *skip,
									 bool skip_empty);

/* Schemes of the form-based gateways, Alipay and UnionPay (verify_form.c) */
extern void *idem_alipay_prepare(Slice secret);
extern bool idem_alipay_verify(void *key, const VerifyRequest *req);
extern void *idem_unionpay_prepare(Slice secret);
extern bool idem_unionpay_verify(void *key, const VerifyRequest *req);

/* WeChat Pay (verify_wechatpay.c) */
extern void *idem_wechatpay_prepare(Slice secret);
extern bool idem_wechatpay_verify(void *key, const VerifyRequest *req);

#endif							/* IDEM_VERIFY_H */
