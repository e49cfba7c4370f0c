/*
 * fuzz_envelope.c
 *		Fuzz target: the encrypted resource of a WeChat Pay notification,
 *		opened by idem_wechatpay_decrypt (wechatpay_decrypt.c), the SQL
 *		function itself, called as the server calls it, with the fixed
 *		APIv3 key of test/fuzz/keys/wechatpay_api_key.
 *
 * Input: a first byte of options, then
 *   bit 0 clear: the resource, JSON text (made jsonb as the server would)
 *   bit 0 set:   lines: the nonce, the associated data, then the plaintext,
 *                which is encrypted here (OpenSSL's AES-256-GCM, not idem's
 *                code) under the key, so that the fuzzer reaches what idem
 *                does with a plaintext; bit 1 leaves associated_data out,
 *                bit 2 makes it null, bit 3 changes a byte of the
 *                ciphertext or of the tag (bits 5-7 say which), bit 4
 *                names another algorithm.
 * Checked for an encrypted plaintext: idem gives jsonb exactly when the
 * resource is untouched and the plaintext is UTF-8 JSON.
 */
#include "fuzz.h"

#include <openssl/evp.h>

#include "common/base64.h"
#include "fmgr.h"

extern Datum idem_wechatpay_decrypt(PG_FUNCTION_ARGS);

/* AES-256-GCM of plain under key, nonce and aad: ciphertext then tag */
static uint8 *
seal(Slice key, Slice nonce, Slice aad, Slice plain, int *len)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	uint8	   *out = palloc(plain.len + 16);
	int			n = 0;
	int			fin = 0;

	if (ctx == NULL ||
		EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, (int) nonce.len, NULL) != 1 ||
		EVP_EncryptInit_ex(ctx, NULL, NULL, (const uint8 *) key.data,
						   (const uint8 *) nonce.data) != 1 ||
		(aad.len > 0 &&
		 EVP_EncryptUpdate(ctx, NULL, &n, (const uint8 *) aad.data, (int) aad.len) != 1) ||
		EVP_EncryptUpdate(ctx, out, &n, (const uint8 *) plain.data, (int) plain.len) != 1 ||
		EVP_EncryptFinal_ex(ctx, out + n, &fin) != 1 ||
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, out + n + fin) != 1)
		fuzz_fail("AES-256-GCM encryption failed");
	EVP_CIPHER_CTX_free(ctx);
	*len = n + fin + 16;
	return out;
}

/* Is plain what idem can return: UTF-8 that libpgcommon's parser takes as JSON? */
static bool
is_utf8_json(Slice plain)
{
	JsonLexContext *lex;

	if (!fuzz_valid_text(plain.data, plain.len, PG_UTF8))
		return false;
	lex = idem_json_lex_context(fuzz_cstring(plain), (int) plain.len, PG_UTF8, true);
	return __real_pg_parse_json(lex, &nullSemAction) == JSON_SUCCESS;
}

/* One input */
int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	Slice		key = fuzz_key("wechatpay_api_key");
	Slice		rest;
	Jsonb	   *resource;
	int			expected = -1;	/* -1: no expectation */
	LOCAL_FCINFO(fcinfo, 2);
	Datum		result;

	if (size < 1)
		return 0;
	rest.data = (const char *) data + 1;
	rest.len = size - 1;
	fuzz_begin(PG_UTF8);
	if ((data[0] & 1) == 0)
	{
		if (!fuzz_valid_text(rest.data, rest.len, PG_UTF8) ||
			(resource = fuzz_jsonb_from_json(rest.data, rest.len, PG_UTF8)) == NULL)
		{
			fuzz_end();
			return 0;
		}
	}
	else
	{
		Slice		nonce;
		Slice		aad;
		Slice		names[4];
		Slice		values[4];
		int			n = 0;
		uint8	   *sealed;
		int			sealedlen;
		bool		aad_left_out = (data[0] & 6) != 0;

		if (!fuzz_next_line(&rest, &nonce) || !fuzz_next_line(&rest, &aad) ||
			rest.data == NULL || nonce.len == 0 || nonce.len > 64 ||
			rest.len > 1 << 20)
		{
			fuzz_end();
			return 0;
		}
		sealed = seal(key, nonce, aad, rest, &sealedlen);
		if (data[0] & 8)
		{
			/* bits 5-7: a byte of the ciphertext's start or of the tag's end */
			int			k = data[0] >> 5;

			sealed[(k & 1) ? sealedlen - 1 - (k >> 1) : (k >> 1) % sealedlen] ^= 1;
		}
		names[n].data = "algorithm";
		values[n].data = (data[0] & 16) ? "AEAD_AES_128_GCM" : "AEAD_AES_256_GCM";
		values[n++].len = 16;
		names[n].data = "ciphertext";
		values[n].data = palloc(pg_b64_enc_len(sealedlen) + 1);
		values[n].len = pg_b64_encode((const char *) sealed, sealedlen,
									  unconstify(char *, values[n].data),
									  pg_b64_enc_len(sealedlen));
		n++;
		names[n].data = "nonce";
		values[n++] = nonce;
		if ((data[0] & 2) == 0)
		{
			/* bit 2: null, which idem reads as empty */
			names[n].data = "associated_data";
			values[n].data = (data[0] & 4) ? NULL : aad.data;
			values[n++].len = aad.len;
		}
		for (int i = 0; i < n; i++)
			names[i].len = strlen(names[i].data);
		resource = fuzz_jsonb_object(n, names, values);
		if (resource == NULL)
		{
			fuzz_end();
			return 0;
		}
		expected = nonce.len == 12 && (data[0] & 24) == 0 &&
			(!aad_left_out || aad.len == 0) && is_utf8_json(rest);
	}

	InitFunctionCallInfoData(*fcinfo, NULL, 2, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = PointerGetDatum(fuzz_text(key.data, key.len));
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = PointerGetDatum(resource);
	fcinfo->args[1].isnull = false;
	result = idem_wechatpay_decrypt(fcinfo);
	if (expected >= 0 && fcinfo->isnull == (expected == 1))
		fuzz_fail("idem_wechatpay_decrypt gave %s, expected %s",
				  fcinfo->isnull ? "NULL" : "jsonb", expected ? "jsonb" : "NULL");
	if (!fcinfo->isnull && DatumGetPointer(result) == NULL)
		fuzz_fail("idem_wechatpay_decrypt gave a null pointer for jsonb");
	fuzz_end();
	return 0;
}
