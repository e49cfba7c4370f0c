/*
 * fingerprint.h
 *		Fingerprints and deterministic keys (fingerprint.c), which
 *		payment_key.c builds on; currencies have their own header
 *		(currency.h).  doc/fingerprints.md states the formats.
 */
#ifndef IDEM_FINGERPRINT_H
#define IDEM_FINGERPRINT_H

#include "idem.h"

#include "common/cryptohash.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"

#define IDEM_SHA256_LEN			32

typedef struct IdemSha256
{
	pg_cryptohash_ctx *ctx;
} IdemSha256;

extern void idem_sha256_init(IdemSha256 *h);
extern void idem_sha256_update(IdemSha256 *h, const void *data, size_t len);
extern void idem_sha256_final(IdemSha256 *h, uint8 *out);
pg_noreturn extern void idem_sha256_fail(IdemSha256 *h);
extern void idem_canonical_append(StringInfo buf, Jsonb *jb);
extern void idem_fingerprint_jsonb(Jsonb *jb, uint8 *out);
extern void idem_key_hex(int nparts, const char *const *parts, const int *lens,
						 char *hex);

#endif							/* IDEM_FINGERPRINT_H */
