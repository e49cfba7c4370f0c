/*
 * scheme_antom.c
 *		Scheme: Antom, Alipay's global acquiring gateway, whose notifications
 *		carry an RSA signature (SHA256withRSA) over the notification path, the
 *		client id, the request time and the body.
 *
 * May call: the wire format (wire.h), the crypto (crypto.h) and the Alipay
 * scheme's keys (scheme_form.c): Antom signs with what its SDKs call the
 * Alipay public key.  Anything wrong with the request is false, never an
 * error.
 */
#include "postgres.h"

#include "webhook/scheme.h"

/* The path Antom signs, and its public keys */
typedef struct AntomKey
{
	Slice		path;
	void	   *keys;			/* an Alipay key (scheme_form.c) */
} AntomKey;

/*
 * An Antom secret: the notification URL's path as Antom signs it (the
 * request line's, "/" first, query included, no whitespace) on the first
 * line, then Antom's public key, PEM or the bare base64 the dashboard shows
 * (22023 for anything else)
 */
void *
idem_antom_prepare(Slice secret)
{
	AntomKey   *key = palloc(sizeof(AntomKey));
	const char *nl = memchr(secret.data, '\n', secret.len);
	Slice		rest;

	key->path.data = secret.data;
	key->path.len = nl != NULL ? nl - secret.data : 0;
	if (key->path.len > 0 && key->path.data[key->path.len - 1] == '\r')
		key->path.len--;
	if (nl == NULL || key->path.len == 0 || key->path.data[0] != '/')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret is not a notification path and a public key"),
				 errdetail("A secret of the \"antom\" scheme is the path of the notification URL as Antom signs it (\"/\" first), a line break, then Antom's public key."),
				 errhint("Antom signs the path with the body: a path that differs in any character fails every delivery.")));
	for (size_t i = 0; i < key->path.len; i++)
		if (key->path.data[i] == ' ' || key->path.data[i] == '\t')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("webhook secret is not a notification path and a public key"),
					 errdetail("The notification path of an \"antom\" secret holds no space or tab.")));
	key->path.data = pnstrdup(key->path.data, key->path.len);
	rest.data = nl + 1;
	rest.len = secret.len - (rest.data - secret.data);
	key->keys = idem_alipay_prepare(rest);
	return key;
}

/*
 * The signature of Antom's signature header, "algorithm=RSA256,
 * keyVersion=<n>,signature=<URL-encoded base64>": each element once, the
 * algorithm RSA256, the signature decoded; NULL if anything is wrong
 */
static uint8 *
antom_signature(Slice header, size_t *siglen)
{
	Slice		rest = header;
	Slice		item;
	Slice		algorithm = {NULL, 0};
	Slice		version = {NULL, 0};
	Slice		signature = {NULL, 0};
	Slice		decoded;

	while (idem_next_element(&rest, ',', &item))
	{
		Slice		name;
		Slice		value;
		Slice	   *slot;

		if (item.len == 0)
			continue;
		if (!idem_split_pair(item, '=', &name, &value))
			return NULL;
		if (idem_slice_is(name, "algorithm"))
			slot = &algorithm;
		else if (idem_slice_is(name, "keyVersion"))
			slot = &version;
		else if (idem_slice_is(name, "signature"))
			slot = &signature;
		else
			continue;
		if (slot->data != NULL)
			return NULL;
		*slot = value;
	}
	if (algorithm.data == NULL || !idem_slice_is(algorithm, "RSA256") ||
		signature.data == NULL || !idem_url_unescape(signature, &decoded))
		return NULL;
	return idem_decode_base64(decoded, siglen);
}

/*
 * Antom's notification: the headers signature, client-id and request-time;
 * signed, "POST <path>\n<client-id>.<request-time>.<body>", with SHA256withRSA
 * by one of the keys.  The request time is signed, not checked against the
 * clock (its format is the sender's).
 */
bool
idem_antom_verify(void *k, const VerifyRequest *req)
{
	AntomKey   *key = k;
	Slice		header;
	Slice		parts[8] = {{"POST ", 5}, {NULL, 0}, {"\n", 1}, {NULL, 0}, {".", 1}, {NULL, 0},
	{".", 1}, {NULL, 0}};
	uint8	   *sig;
	size_t		siglen;

	if (!idem_find_header(req->headers, "signature", &header) ||
		!idem_find_header(req->headers, "client-id", &parts[3]) ||
		!idem_find_header(req->headers, "request-time", &parts[5]) ||
		(sig = antom_signature(header, &siglen)) == NULL)
		return false;
	parts[1] = key->path;
	parts[7] = req->payload;
	return idem_alipay_keys_verify(key->keys, EVP_sha256(), parts, lengthof(parts), sig, siglen);
}
