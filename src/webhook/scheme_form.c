/*
 * scheme_form.c
 *		Schemes: the gateways that notify with a signed form
 *		(application/x-www-form-urlencoded): Alipay and UnionPay.
 *
 * Both sign the form's parameters, decoded, sorted by name and joined as
 * "k=v&k=v" (wire_form.c decodes the form and builds that string), with
 * RSA PKCS#1 v1.5.  Alipay signs with the key whose public half is the
 * configured secret; UnionPay puts its signing certificate in the form,
 * and the secret is the certificates it must chain to.  As everywhere in
 * idem_webhook_verify, only the secret can raise an error; anything in the
 * request is a plain false.  Headers are not read: a form carries its
 * signature in itself.
 *
 * May call: the wire format (wire.h) and the crypto (crypto.h).
 */
#include "postgres.h"

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "webhook/scheme.h"

/* Alipay's sign_type for SHA256withRSA and for the legacy SHA1withRSA */
#define ALIPAY_SIGN_TYPE_RSA2	"RSA2"
#define ALIPAY_SIGN_TYPE_RSA	"RSA"

/* The only UnionPay version and signMethod whose notifications carry their certificate */
#define UNIONPAY_VERSION		"5.1.0"
#define UNIONPAY_SIGN_METHOD	"01"

/* What UnionPay's signing certificates name in the third "@" field of their CN */
#define UNIONPAY_COMPANY		"中国银联股份有限公司"

/* Alipay's public keys: any one may have signed (rotation) */
typedef struct AlipayKey
{
	EVP_PKEY  **keys;
	int			nkeys;
} AlipayKey;

pg_noreturn static void alipay_bad_secret(const char *detail, const char *hint);

/* The configuration error of an Alipay secret that is not a public key */
static void
alipay_bad_secret(const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("webhook secret is not an Alipay public key"),
			 errdetail("%s", detail),
			 hint ? errhint("%s", hint) : 0));
}

/* Release the keys of an AlipayKey (for idem_verify_track) */
static void
alipay_release_keys(void *p)
{
	AlipayKey  *key = p;

	for (int i = 0; i < key->nkeys; i++)
		EVP_PKEY_free(key->keys[i]);
	key->nkeys = 0;
}

/*
 * Keep an Alipay key, freed with the others when the call ends (so a
 * secret may hold any number); it must be RSA
 */
static void
alipay_add_key(AlipayKey *key, EVP_PKEY *pkey)
{
	key->keys[key->nkeys++] = pkey;
	if (!EVP_PKEY_is_a(pkey, "RSA"))
		alipay_bad_secret("Alipay signs with RSA (RSA2 is SHA256withRSA, RSA is SHA1withRSA); this key is of another type.",
						  NULL);
}

/* How many PEM blocks begin in the text (an upper bound: some may be malformed) */
static int
pem_block_count(Slice text)
{
	static const char begin[] = "-----BEGIN ";
	const char *p = text.data;
	const char *end = text.data + text.len;
	int			n = 0;

	while ((size_t) (end - p) >= sizeof(begin) - 1 &&
		   (p = memchr(p, '-', end - p - (sizeof(begin) - 2))) != NULL)
	{
		if (memcmp(p, begin, sizeof(begin) - 1) == 0)
			n++;
		p++;
	}
	return n;
}

/*
 * An Alipay secret: PEM, one or more "PUBLIC KEY" (SubjectPublicKeyInfo)
 * or "RSA PUBLIC KEY" (PKCS#1) blocks; or else the bare base64 of one
 * SubjectPublicKeyInfo, as the Alipay console shows it, whitespace (line
 * breaks included) anywhere being ignored.  Every key must be RSA.
 */
void *
idem_alipay_prepare(Slice secret)
{
	AlipayKey  *key = palloc0(sizeof(AlipayKey));
	int			nblocks = pem_block_count(secret);

	/* room for a key a block, and so no allocation between parsing and keeping */
	key->keys = palloc(Max(nblocks, 1) * sizeof(EVP_PKEY *));
	idem_verify_track(key, alipay_release_keys);
	if (nblocks > 0)
	{
		Slice		rest = secret;
		VerifyPemBlock block;
		VerifyPemStatus status;

		while ((status = idem_verify_pem_next(&rest, &block)) == VERIFY_PEM_BLOCK)
		{
			if (block.cert != NULL)
			{
				X509_free(block.cert);
				alipay_bad_secret("An \"alipay\" secret holds public keys, not certificates.",
								  "Take the public key out of Alipay's certificate with \"openssl x509 -pubkey -noout\".");
			}
			if (block.key == NULL)
				break;
			Assert(key->nkeys < nblocks);
			alipay_add_key(key, block.key);
		}
		if (status != VERIFY_PEM_NONE || key->nkeys == 0)
			alipay_bad_secret("An \"alipay\" secret in PEM holds \"PUBLIC KEY\" or \"RSA PUBLIC KEY\" blocks, well formed, and nothing else.",
							  NULL);
	}
	else
	{
		/* the bare base64 of a SubjectPublicKeyInfo, whitespace dropped */
		char	   *b64 = palloc(secret.len + 1);
		Slice		compact = {b64, 0};
		uint8	   *der;
		size_t		derlen = 0;
		EVP_PKEY   *pkey = NULL;

		for (size_t i = 0; i < secret.len; i++)
		{
			char		c = secret.data[i];

			if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
				b64[compact.len++] = c;
		}
		der = idem_decode_base64(compact, &derlen);
		if (der != NULL)
		{
			Slice		spki = {(const char *) der, derlen};

			pkey = idem_verify_public_key(spki);
		}
		pfree(b64);
		if (pkey == NULL)
			alipay_bad_secret("An \"alipay\" secret is Alipay's public key: PEM (\"-----BEGIN PUBLIC KEY-----\"), or the bare base64 the Alipay console shows.",
							  "Copy the key again, whole; line breaks and spaces in it do not matter.");
		EVP_PKEY_up_ref(pkey);	/* idem_verify_public_key tracks one reference */
		alipay_add_key(key, pkey);
	}
	return key;
}

/*
 * Alipay's asynchronous notification (notify_url): sign is the base64
 * signature, sign_type says which: RSA2 is SHA256withRSA, RSA the legacy
 * SHA1withRSA; anything else, or none, is false.  Signed: every parameter
 * but sign and sign_type and those with an empty value, decoded, sorted
 * by name, "k=v" joined by "&", in the form's charset.  Any key may match.
 */
bool
idem_alipay_verify(void *k, const VerifyRequest *req)
{
	static const char *const skip[] = {"sign", "sign_type", NULL};
	AlipayKey  *key = k;
	Form		form;
	Slice		sign;
	Slice		sign_type;
	const EVP_MD *md;
	uint8	   *sig;
	size_t		siglen;
	Slice		content;

	if (!idem_form_decode_charset(req->payload, "charset", &form))
		return false;
	if (!idem_form_get(&form, "sign", &sign) || !idem_form_get(&form, "sign_type", &sign_type))
		return false;
	if (idem_slice_is(sign_type, ALIPAY_SIGN_TYPE_RSA2))
		md = EVP_sha256();
	else if (idem_slice_is(sign_type, ALIPAY_SIGN_TYPE_RSA))
		md = EVP_sha1();
	else
		return false;
	sig = idem_decode_base64(sign, &siglen);
	if (sig == NULL)
		return false;

	content = idem_form_signed_string(&form, skip, true);
	return idem_alipay_keys_verify(key, md, &content, 1, sig, siglen);
}

/*
 * Does sig sign the concatenated parts (RSA, PKCS#1 v1.5 with md) under one
 * of the keys of an Alipay secret?  Every key is tried.
 */
bool
idem_alipay_keys_verify(void *k, const EVP_MD *md, const Slice *parts, int nparts,
						const uint8 *sig, size_t siglen)
{
	AlipayKey  *key = k;
	bool		matched = false;

	for (int i = 0; i < key->nkeys; i++)
		matched |= idem_verify_signature(key->keys[i], md, parts, nparts, sig, siglen);
	return matched;
}

/* The hint of a UnionPay secret's configuration errors */
#define UNIONPAY_SECRET_HINT \
	"Use UnionPay's root and intermediate certificates (the SDK's acp_prod_root.cer and acp_prod_middle.cer), in PEM."

/*
 * A UnionPay secret: its root and intermediate certificates, PEM, one or
 * several, in any order.  The self-signed ones are the trust anchors, the
 * others intermediates a chain may go through; at least one root.
 */
void *
idem_unionpay_prepare(Slice secret)
{
	VerifyRoots *key = palloc0(sizeof(VerifyRoots));

	switch (idem_verify_roots_read(secret, key))
	{
		case VERIFY_ROOTS_OK:
			break;
		case VERIFY_ROOTS_MALFORMED:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("webhook secret is not UnionPay's certificates"),
					 errdetail("A \"unionpay\" secret holds \"CERTIFICATE\" blocks in PEM, well formed, and nothing else."),
					 errhint(UNIONPAY_SECRET_HINT)));
			break;
		case VERIFY_ROOTS_NONE:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("webhook secret holds no root certificate"),
					 errdetail("A \"unionpay\" secret holds UnionPay's self-signed root certificate, where chains end, and its intermediate certificates."),
					 errhint(UNIONPAY_SECRET_HINT)));
			break;
	}
	return key;
}

/*
 * Does a CN name UnionPay the way its SDK checks it: the third of its
 * "@"-separated fields is exactly the company's name?
 */
static bool
unionpay_cn_names_company(const char *cn, size_t len)
{
	const char *end = cn + len;
	const char *field = cn;
	const char *at;

	for (int i = 0; i < 2; i++)
	{
		at = memchr(field, '@', end - field);
		if (at == NULL)
			return false;
		field = at + 1;
	}
	at = memchr(field, '@', end - field);
	if (at == NULL)
		at = end;
	return (size_t) (at - field) == strlen(UNIONPAY_COMPANY) &&
		memcmp(field, UNIONPAY_COMPANY, at - field) == 0;
}

/*
 * UnionPay's backend notification (全渠道, version 5.1.0, signMethod 01):
 * signPubKeyCert is the signer's certificate in PEM, signature the base64
 * SHA256withRSA signature of the lowercase hex SHA-256 of the signed
 * string: every parameter but signature, decoded, sorted by name, "k=v"
 * joined by "&", in the form's encoding.  Other versions and sign methods
 * (5.0.0 named its certificate by certId; 11 and 12 are keyed hashes) are
 * false.
 */
bool
idem_unionpay_verify(void *k, const VerifyRequest *req)
{
	static const char *const skip[] = {"signature", NULL};
	VerifyRoots *key = k;
	Form		form;
	Slice		value;
	Slice		signature;
	Slice		pem;
	X509	   *cert;
	Slice		cn;
	EVP_PKEY   *pkey;
	uint8	   *sig;
	size_t		siglen;
	Slice		content;
	uint8		digest[EVP_MAX_MD_SIZE];
	unsigned int digestlen;
	char		hex[2 * EVP_MAX_MD_SIZE];
	Slice		signed_hex;

	if (!idem_form_decode_charset(req->payload, "encoding", &form))
		return false;
	if (!idem_form_get(&form, "version", &value) || !idem_slice_is(value, UNIONPAY_VERSION) ||
		!idem_form_get(&form, "signMethod", &value) || !idem_slice_is(value, UNIONPAY_SIGN_METHOD) ||
		!idem_form_get(&form, "signature", &signature) ||
		!idem_form_get(&form, "signPubKeyCert", &pem))
		return false;
	sig = idem_decode_base64(signature, &siglen);
	if (sig == NULL)
		return false;

	/*
	 * exactly one certificate, UnionPay's: it chains to the configured roots
	 * (through the configured intermediates), every certificate of the chain
	 * valid now, and its subject has one CN, which names the company.  No
	 * purpose or key usage is required of it, and revocation is not checked
	 * (nor does the SDK).
	 */
	cert = idem_verify_chain_pem(key, pem, 1, (int64) time(NULL));
	if (cert == NULL || !idem_verify_certificate_cn(cert, &cn) ||
		!unionpay_cn_names_company(cn.data, cn.len))
		return false;
	pkey = X509_get0_pubkey(cert);
	if (pkey == NULL || !EVP_PKEY_is_a(pkey, "RSA"))
		return false;

	content = idem_form_signed_string(&form, skip, false);
	digestlen = idem_verify_digest(EVP_sha256(), &content, 1, digest);
	if (digestlen == 0)
		return false;
	for (unsigned int i = 0; i < digestlen; i++)
	{
		hex[2 * i] = "0123456789abcdef"[digest[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[digest[i] & 0xf];
	}
	signed_hex.data = hex;
	signed_hex.len = 2 * digestlen;
	return idem_verify_signature(pkey, EVP_sha256(), &signed_hex, 1, sig, siglen);
}
