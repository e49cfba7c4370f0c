/*
 * fuzz_keys.c
 *		Fuzz target: PEM blocks, DER public keys and certificate chains as
 *		crypto_key.c reads them, with its per-backend caches, and the
 *		secrets made of them (Alipay's keys, UnionPay's and WeChat Pay's
 *		certificates).
 *
 * Input: a first byte choosing what is read from the rest:
 *   0  PEM blocks one after the other (idem_verify_pem_next), read twice:
 *      the second reading comes from the cache and must give the same
 *      blocks, objects and places
 *   1  a certificate chain (idem_verify_pem_certificates, as UnionPay's
 *      signPubKeyCert is read)
 *   2  a DER SubjectPublicKeyInfo (two bytes of length first), read twice
 *      and checked against OpenSSL's d2i_PUBKEY, then used to check the
 *      signature in the bytes after it
 *   3  an Alipay, WeChat Pay or UnionPay secret (the second byte says
 *      which), prepared as a webhook source's is: a configuration, which
 *      may be refused with 22023 but nothing else
 */
#include "fuzz.h"

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "utils/elog.h"

#include "webhook/scheme.h"

/* Blocks read in one pass at most */
#define MAX_BLOCKS	64

/* A block as one pass read it */
typedef struct Block
{
	VerifyPemStatus status;
	size_t		before_start;	/* offsets into the text */
	size_t		before_len;
	const char *label;
	X509	   *cert;
	EVP_PKEY   *key;
	size_t		rest_start;
} Block;

/* Read the text's PEM blocks, one after the other, into blocks; how many */
static int
read_blocks(Slice text, Block *blocks)
{
	Slice		rest = text;
	int			n = 0;

	while (n < MAX_BLOCKS)
	{
		VerifyPemBlock block;
		Block	   *b = &blocks[n++];
		const char *at = rest.data;

		b->status = idem_verify_pem_next(&rest, &block);
		if (block.before.data != at || block.before.len > text.len - (at - text.data))
			fuzz_fail("the text before a block is not where the reading was");
		b->before_start = block.before.data - text.data;
		b->before_len = block.before.len;
		b->label = block.label;
		b->cert = block.cert;
		b->key = block.key;
		b->rest_start = rest.data != NULL ? (size_t) (rest.data - text.data) : text.len;
		if (rest.len > text.len || b->rest_start + rest.len != text.len ||
			b->rest_start < (size_t) (at - text.data))
			fuzz_fail("the rest of the text is not after the block");
		if (b->status != VERIFY_PEM_BLOCK)
			break;
		if (block.cert != NULL && block.key != NULL)
			fuzz_fail("a block gave a certificate and a key");
		if (block.label == NULL)
			fuzz_fail("a block without a label");
		if (rest.data == at)
			fuzz_fail("a block was read without advancing");
	}
	return n;
}

/* Free what a pass's blocks hold */
static void
free_blocks(Block *blocks, int n)
{
	for (int i = 0; i < n; i++)
	{
		X509_free(blocks[i].cert);
		EVP_PKEY_free(blocks[i].key);
	}
}

/* Mode 0: the blocks, read twice, the same each time */
static void
pem_blocks(Slice text)
{
	Block		first[MAX_BLOCKS];
	Block		second[MAX_BLOCKS];
	int			n1 = read_blocks(text, first);
	int			n2 = read_blocks(text, second);

	if (n1 != n2)
		fuzz_fail("the text gave %d blocks, then %d", n1, n2);
	for (int i = 0; i < n1; i++)
	{
		Block	   *a = &first[i];
		Block	   *b = &second[i];

		if (a->status != b->status || a->before_start != b->before_start ||
			a->before_len != b->before_len || a->rest_start != b->rest_start)
			fuzz_fail("block %d was read in another place the second time", i);
		if ((a->label == NULL) != (b->label == NULL) ||
			(a->label != NULL && strcmp(a->label, b->label) != 0))
			fuzz_fail("block %d had another label the second time", i);
		if ((a->cert == NULL) != (b->cert == NULL) ||
			(a->cert != NULL && X509_cmp(a->cert, b->cert) != 0))
			fuzz_fail("block %d had another certificate the second time", i);
		if ((a->key == NULL) != (b->key == NULL) ||
			(a->key != NULL && EVP_PKEY_eq(a->key, b->key) != 1))
			fuzz_fail("block %d had another key the second time", i);
	}
	free_blocks(first, n1);
	free_blocks(second, n2);
}

/* Mode 1: a certificate chain */
static void
pem_chain(Slice text)
{
	STACK_OF(X509) *certs = idem_verify_pem_certificates(text);

	if (certs != NULL && sk_X509_num(certs) < 1)
		fuzz_fail("a chain without certificates");
}

/* Mode 2: a DER public key, and a signature checked with it */
static void
der_key(Slice input)
{
	size_t		len;
	Slice		der;
	Slice		sig;
	EVP_PKEY   *key;
	EVP_PKEY   *again;
	EVP_PKEY   *openssl;
	const unsigned char *p;
	Slice		message = {"idem", 4};

	if (input.len < 2)
		return;
	len = ((uint8) input.data[0] << 8 | (uint8) input.data[1]);
	if (len > input.len - 2)
		len = input.len - 2;
	der.data = input.data + 2;
	der.len = len;
	sig.data = der.data + len;
	sig.len = input.len - 2 - len;

	key = idem_verify_public_key(der);
	again = idem_verify_public_key(der);
	p = (const unsigned char *) der.data;
	openssl = der.len > 0 ? d2i_PUBKEY(NULL, &p, (long) der.len) : NULL;
	if (openssl != NULL && p != (const unsigned char *) der.data + der.len)
	{
		EVP_PKEY_free(openssl);
		openssl = NULL;
	}
	ERR_clear_error();
	if ((key == NULL) != (openssl == NULL))
		fuzz_fail("idem_verify_public_key %s a key that d2i_PUBKEY %s",
				  key ? "read" : "refused", key ? "refuses" : "reads");
	if ((key == NULL) != (again == NULL) ||
		(key != NULL && EVP_PKEY_eq(key, again) != 1))
		fuzz_fail("the key read again (from the cache) is another");
	if (key != NULL && EVP_PKEY_eq(key, openssl) != 1)
		fuzz_fail("idem_verify_public_key read another key than d2i_PUBKEY");
	EVP_PKEY_free(openssl);
	if (key == NULL)
		return;

	if (EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA)
	{
		(void) idem_verify_signature(key, EVP_sha256(), &message, 1,
									 (const uint8 *) sig.data, sig.len);
		(void) idem_verify_signature(key, EVP_sha1(), &message, 1,
									 (const uint8 *) sig.data, sig.len);
	}
	else
		(void) idem_verify_signature(key, NULL, &message, 1,
									 (const uint8 *) sig.data, sig.len);
}

/* Mode 3: a secret of a scheme that reads keys, prepared */
static void
secret(uint8 which, Slice text)
{
	static const char *const schemes[] = {"alipay", "wechatpay", "unionpay"};
	Slice		name;
	const VerifyScheme *scheme;

	name.data = schemes[which % lengthof(schemes)];
	name.len = strlen(name.data);
	scheme = idem_verify_scheme(name);
	if (text.len == 0)
		return;
	fuzz_allow_error(ERRCODE_INVALID_PARAMETER_VALUE);
	PG_TRY();
	{
		(void) scheme->prepare(text);
	}
	PG_CATCH();
	{
		FlushErrorState();
	}
	PG_END_TRY();
	fuzz_allow_error(0);
}

/* One input */
int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	Slice		text;

	if (size < 2)
		return 0;
	fuzz_begin(PG_UTF8);
	text.data = (const char *) data + 1;
	text.len = size - 1;
	switch (data[0] % 4)
	{
		case 0:
			pem_blocks(text);
			break;
		case 1:
			pem_chain(text);
			break;
		case 2:
			der_key(text);
			break;
		case 3:
			text.data++;
			text.len--;
			secret(data[1], text);
			break;
	}
	fuzz_end();
	return 0;
}
