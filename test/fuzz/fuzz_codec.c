/*
 * fuzz_codec.c
 *		Fuzz target: hex and canonical base64 (wire_codec.c), and the base64
 *		of secrets and signatures (idem_decode_base64, crypto_secret.c).
 *
 * Input: the text to decode, all of it.  Each decoder writes into a buffer
 * of exactly the size its contract gives, so that AddressSanitizer sees a
 * byte too many, and is checked against a reading made here: hex digit by
 * digit, and base64 as the text that libpgcommon's encoder gives back for
 * what its (lenient) decoder reads.
 */
#include "fuzz.h"

#include "common/base64.h"

#include "webhook/crypto.h"

/* Hex digit value, as read here */
static int
hex_digit(unsigned char c)
{
	static const char digits[] = "0123456789abcdef";
	const char *p;

	if (c >= 'A' && c <= 'F')
		c += 'a' - 'A';
	p = c != '\0' ? strchr(digits, c) : NULL;
	return p != NULL ? (int) (p - digits) : -1;
}

/*
 * The canonical decoding of text as read here: the bytes whose standard
 * padded base64 is exactly the text; -1 if there are none
 */
static int
canonical_base64(Slice text, uint8 *out, int outlen)
{
	int			n;
	char	   *again;

	if (text.len == 0 || text.len % 4 != 0 || text.len > 1 << 20)
		return -1;
	n = pg_b64_decode(text.data, (int) text.len, (char *) out, outlen);
	if (n < 0)
		return -1;
	again = palloc(pg_b64_enc_len(n) + 1);
	if (pg_b64_encode((const char *) out, n, again, pg_b64_enc_len(n)) != (int) text.len ||
		memcmp(again, text.data, text.len) != 0)
		return -1;
	return n;
}

/* One input */
int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	Slice		s = {(const char *) data, size};
	size_t		outlen = size / 4 * 3;
	uint8	   *out;
	uint8	   *want;
	ssize_t		n;
	int			expected;
	uint8		mac[VERIFY_MAC_LEN];
	uint8	   *decoded;
	size_t		declen = 0;

	if (size > 1 << 20)
		return 0;
	fuzz_begin(PG_UTF8);

	for (size_t i = 0; i < size; i++)
		if (idem_hex_value((char) data[i]) != hex_digit(data[i]))
			fuzz_fail("idem_hex_value(0x%02x) disagrees", data[i]);

	/* hex: exactly two digits a byte, into a buffer of that many bytes */
	out = palloc(Max(size / 2, 1));
	if (size % 2 == 0)
	{
		bool		ok = true;

		for (size_t i = 0; i < size; i++)
			ok &= hex_digit(data[i]) >= 0;
		if (idem_decode_hex(s, out, size / 2) != ok)
			fuzz_fail("idem_decode_hex disagrees");
		for (size_t i = 0; ok && i < size / 2; i++)
			if (out[i] != (hex_digit(data[2 * i]) << 4 | hex_digit(data[2 * i + 1])))
				fuzz_fail("idem_decode_hex decoded byte %zu wrong", i);
	}
	if (size > 0 && idem_decode_hex(s, out, (size - 1) / 2))
		fuzz_fail("idem_decode_hex took text of another length");

	/* base64: into a buffer of 3 bytes for every 4 characters */
	out = palloc(Max(outlen, 1));
	want = palloc(Max(outlen, 1) + 3);
	n = idem_base64_decode_canonical(s, out);
	expected = canonical_base64(s, want, (int) outlen + 3);
	if (n != expected)
		fuzz_fail("idem_base64_decode_canonical answers %zd, expected %d", n, expected);
	if (n > 0 && memcmp(out, want, n) != 0)
		fuzz_fail("idem_base64_decode_canonical decoded other bytes");

	if (idem_decode_b64_mac(s, mac) != (expected == VERIFY_MAC_LEN && size == 44))
		fuzz_fail("idem_decode_b64_mac disagrees");
	if (expected == VERIFY_MAC_LEN && size == 44 && memcmp(mac, want, VERIFY_MAC_LEN) != 0)
		fuzz_fail("idem_decode_b64_mac decoded other bytes");

	decoded = idem_decode_base64(s, &declen);
	if ((decoded != NULL) != (expected > 0))
		fuzz_fail("idem_decode_base64 disagrees");
	if (decoded != NULL && (declen != (size_t) expected || memcmp(decoded, want, declen) != 0))
		fuzz_fail("idem_decode_base64 decoded other bytes");

	fuzz_end();
	return 0;
}
