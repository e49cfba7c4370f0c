/*
 * wechatpay_decrypt.c
 *		Entry point: idem_wechatpay_decrypt, the plaintext of the encrypted
 *		"resource" of a WeChat Pay APIv3 notification.
 *
 * The resource is {"algorithm": "AEAD_AES_256_GCM", "ciphertext": <base64 of
 * the ciphertext and its 16-byte tag>, "nonce": <12 characters>,
 * "associated_data": <text>}, encrypted with the merchant's APIv3 key: the 32
 * bytes of the key as the merchant set it, used as they are.  The
 * decryption is OpenSSL's AES-256-GCM (EVP AEAD interface).
 *
 * The key is the application's configuration: a NULL key or one that is not
 * 32 bytes is an error, raised before the resource is read.  The resource
 * comes from the request: anything wrong with it (missing or mistyped
 * fields, bad base64, a tag that does not authenticate, a plaintext that is
 * not JSON) is NULL, never an error; what an authenticated plaintext holds
 * is the key holder's (plaintext_jsonb says which errors it may raise).  The plaintext buffers are wiped when
 * the call ends, on every path.
 *
 * May call: the wire format (wire.h) and the crypto (crypto.h).
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include <openssl/evp.h>

#include "webhook/entry.h"

/* Bytes of the APIv3 key, of the nonce and of the GCM tag */
#define WECHATPAY_KEY_LEN		32
#define WECHATPAY_NONCE_LEN		12
#define WECHATPAY_TAG_LEN		16

/* The one algorithm of APIv3 resources */
#define WECHATPAY_ALGORITHM		"AEAD_AES_256_GCM"

/* Free an EVP_CIPHER_CTX, which wipes its key schedule (for idem_verify_track) */
static void
release_cipher_ctx(void *p)
{
	EVP_CIPHER_CTX_free((EVP_CIPHER_CTX *) p);
}

/* Wipe and free a NUL-terminated copy of the plaintext (for idem_verify_track) */
static void
release_cstring(void *p)
{
	explicit_bzero(p, strlen(p));
	pfree(p);
}

/*
 * The string field name of the resource object into *value; false when it
 * is absent or not a string
 */
static bool
string_field(Jsonb *resource, const char *name, Slice *value)
{
	JsonbValue	v;

	if (getKeyJsonValueFromContainer(&resource->root, name, strlen(name), &v) == NULL ||
		v.type != jbvString)
		return false;
	value->data = v.val.string.val;
	value->len = v.val.string.len;
	return true;
}

/*
 * AES-256-GCM decryption of ciphertext (tag at its end) under key, nonce and
 * associated data, into memory wiped when the call ends and NUL-terminated;
 * NULL if it does not authenticate
 */
static char *
aes_256_gcm_open(const uint8 *key, Slice nonce, Slice aad,
				 const uint8 *ciphertext, size_t len, size_t *plainlen)
{
	size_t		bodylen = len - WECHATPAY_TAG_LEN;
	EVP_CIPHER_CTX *ctx;
	char	   *plain;
	int			outlen = 0;
	int			finallen = 0;
	bool		ok;

	Assert(len >= WECHATPAY_TAG_LEN && len <= PG_INT32_MAX);
	Assert(nonce.len == WECHATPAY_NONCE_LEN);
	plain = idem_verify_secret_alloc(bodylen + 1);
	ctx = EVP_CIPHER_CTX_new();
	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	idem_verify_track(ctx, release_cipher_ctx);

	ok = EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, WECHATPAY_NONCE_LEN, NULL) == 1 &&
		EVP_DecryptInit_ex(ctx, NULL, NULL, key, (const unsigned char *) nonce.data) == 1;
	if (ok && aad.len > 0)
	{
		int			aadlen;

		ok = EVP_DecryptUpdate(ctx, NULL, &aadlen, (const unsigned char *) aad.data,
							   (int) aad.len) == 1;
	}
	if (ok && bodylen > 0)
		ok = EVP_DecryptUpdate(ctx, (unsigned char *) plain, &outlen, ciphertext,
							   (int) bodylen) == 1;
	ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, WECHATPAY_TAG_LEN,
								   unconstify(uint8 *, ciphertext + bodylen)) == 1;
	/* the tag is checked here; nothing decrypted counts before it is */
	ok = ok && EVP_DecryptFinal_ex(ctx, (unsigned char *) plain + outlen, &finallen) == 1;
	if (!ok)
		return NULL;
	*plainlen = (size_t) outlen + finallen;
	Assert(*plainlen == bodylen);
	return plain;
}

/*
 * The plaintext as jsonb, or NULL if it is not valid UTF-8 JSON.  JSON that
 * jsonb cannot hold raises jsonb's own error, as for any text brought into
 * the database: 22P05 for a character its encoding lacks, 22003 for a
 * number beyond numeric, 54001 for nesting beyond the stack.  Only a sender
 * holding the APIv3 key can produce a plaintext at all.
 */
static Jsonb *
plaintext_jsonb(char *plain, size_t len)
{
	char	   *str;
	JsonLexContext *lex;
	JsonParseErrorType parsed;

	if (!pg_verify_mbstr(PG_UTF8, plain, (int) len, true))
		return NULL;
	str = pg_any_to_server(plain, (int) len, PG_UTF8);
	if (str != plain)
		idem_verify_track(str, release_cstring);

	/* the server's JSON parser, which reports a syntax error instead of raising it */
	lex = idem_json_lex_context(str, strlen(str), GetDatabaseEncoding(), true);
	parsed = pg_parse_json(lex, &nullSemAction);
	/* the lexer's copy of the last string it read */
	if (lex->strval != NULL)
		explicit_bzero(lex->strval->data, lex->strval->maxlen);
	if (parsed != JSON_SUCCESS)
		return NULL;
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(str)));
}

/*
 * Decrypt the resource under the 32-byte key: NULL for anything wrong with
 * it.  associated_data may be absent or null (the official SDKs read it as
 * empty); the other three fields are required.
 */
static Jsonb *
wechatpay_open(const uint8 *key, Jsonb *resource)
{
	Slice		algorithm;
	Slice		encoded;
	Slice		nonce;
	Slice		aad = {"", 0};
	JsonbValue	v;
	uint8	   *ciphertext;
	size_t		len;
	char	   *plain;
	size_t		plainlen;

	if (!JB_ROOT_IS_OBJECT(resource) || JB_ROOT_IS_SCALAR(resource))
		return NULL;
	if (!string_field(resource, "algorithm", &algorithm) ||
		!idem_slice_is(algorithm, WECHATPAY_ALGORITHM) ||
		!string_field(resource, "ciphertext", &encoded) ||
		!string_field(resource, "nonce", &nonce) ||
		nonce.len != WECHATPAY_NONCE_LEN)
		return NULL;
	if (getKeyJsonValueFromContainer(&resource->root, "associated_data",
									 strlen("associated_data"), &v) != NULL &&
		v.type != jbvNull && !string_field(resource, "associated_data", &aad))
		return NULL;

	ciphertext = idem_decode_base64(encoded, &len);
	if (ciphertext == NULL || len < WECHATPAY_TAG_LEN || len > PG_INT32_MAX)
		return NULL;
	plain = aes_256_gcm_open(key, nonce, aad, ciphertext, len, &plainlen);
	if (plain == NULL)
		return NULL;
	return plaintext_jsonb(plain, plainlen);
}

PG_FUNCTION_INFO_V1(idem_wechatpay_decrypt);

/*
 * idem_wechatpay_decrypt(api_v3_key, resource): the plaintext of a WeChat
 * Pay notification's resource, as jsonb; NULL when it does not decrypt.
 */
Datum
idem_wechatpay_decrypt(PG_FUNCTION_ARGS)
{
	text	   *key;
	Jsonb	   *volatile result = NULL;

	/* configuration first: these errors must not depend on the resource */
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("api_v3_key must not be null")));
	key = PG_GETARG_TEXT_PP(0);
	if (VARSIZE_ANY_EXHDR(key) != WECHATPAY_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("api_v3_key must be %d bytes", WECHATPAY_KEY_LEN),
				 errdetail("The key given is %zu bytes long.",
						   (size_t) VARSIZE_ANY_EXHDR(key)),
				 errhint("The APIv3 key is the 32-character key set in the merchant platform, not the merchant's private key, certificate or APIv2 key.")));
	if (PG_ARGISNULL(1))
		PG_RETURN_NULL();

	PG_TRY();
	{
		result = wechatpay_open((const uint8 *) VARDATA_ANY(key),
								PG_GETARG_JSONB_P(1));
	}
	PG_FINALLY();
	{
		idem_verify_release_all();
	}
	PG_END_TRY();
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(result);
}
