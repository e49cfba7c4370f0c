/*
 * wire_codec.c
 *		Wire format: hex and canonical base64, as signatures and keys are
 *		written in headers and secrets, and the CRC-32 of a body.
 *
 * May call: libc, palloc for an encoding, and the server's CRC-32.  Every
 * decoder answers false (or -1) on anything that is not exactly the
 * encoding and never raises an error.
 */
#include "postgres.h"

#include "utils/pg_crc.h"

#include "webhook/wire.h"

/* Value of one hex digit, or -1 */
int
idem_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Exactly 2 * outlen hex digits into out; anything else is false */
bool
idem_decode_hex(Slice s, uint8 *out, size_t outlen)
{
	if (s.len != outlen * 2)
		return false;
	for (size_t i = 0; i < outlen; i++)
	{
		int			hi = idem_hex_value(s.data[2 * i]);
		int			lo = idem_hex_value(s.data[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8) ((hi << 4) | lo);
	}
	return true;
}

/* The len bytes of in as 2 * len lower-case hex digits, in a new string */
char *
idem_encode_hex(const uint8 *in, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	char	   *out = palloc(2 * len + 1);

	for (size_t i = 0; i < len; i++)
	{
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 0xf];
	}
	out[2 * len] = '\0';
	return out;
}

/*
 * Decode canonical padded standard base64 into out, which has room for
 * the bytes (3 for every 4 characters, less the padding); their number, or
 * -1 if text is not exactly that: a length not a multiple of 4, a
 * character outside the alphabet, "=" anywhere but one or two at the end,
 * or stray low bits in the last character before the padding.  A signature
 * has one accepted spelling, and a secret mangled that way fails on the
 * first call instead of making every delivery's signature mismatch.
 * (pg_b64_decode accepts all of these, and whitespace.)
 */
ssize_t
idem_base64_decode_canonical(Slice text, uint8 *out)
{
	/* the value of each character of the alphabet; -1 for any other byte */
	static int8 value[256];
	static bool ready = false;
	const unsigned char *p = (const unsigned char *) text.data;
	size_t		pad;
	size_t		groups;
	uint8	   *o = out;

	if (!ready)
	{
		static const char alphabet[] =
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

		memset(value, -1, sizeof(value));
		for (int i = 0; i < 64; i++)
			value[(unsigned char) alphabet[i]] = (int8) i;
		ready = true;
	}
	if (text.len == 0 || text.len % 4 != 0)
		return -1;
	pad = p[text.len - 1] != '=' ? 0 : p[text.len - 2] != '=' ? 1 : 2;
	groups = text.len / 4;
	for (size_t g = 0; g < groups; g++, p += 4)
	{
		bool		last = (g == groups - 1);
		int			a = value[p[0]];
		int			b = value[p[1]];
		int			c = (last && pad == 2) ? 0 : value[p[2]];
		int			d = (last && pad >= 1) ? 0 : value[p[3]];
		uint32		v;

		if ((a | b | c | d) < 0)
			return -1;
		v = ((uint32) a << 18) | ((uint32) b << 12) | ((uint32) c << 6) | (uint32) d;
		*o++ = (uint8) (v >> 16);
		if (last && pad == 2)
		{
			if ((v & 0xFFFF) != 0)
				return -1;
			break;
		}
		*o++ = (uint8) (v >> 8);
		if (last && pad == 1)
		{
			if ((v & 0xFF) != 0)
				return -1;
			break;
		}
		*o++ = (uint8) v;
	}
	return o - out;
}

/* Exactly the canonical padded base64 of a 32-byte MAC */
bool
idem_decode_b64_mac(Slice s, uint8 *mac)
{
	uint8		buf[VERIFY_MAC_LEN + 1];

	if (s.len != 44 || idem_base64_decode_canonical(s, buf) != VERIFY_MAC_LEN)
		return false;
	memcpy(mac, buf, VERIFY_MAC_LEN);
	return true;
}

/*
 * The CRC-32 of s as zlib's crc32() computes it (ISO-HDLC, Ethernet's),
 * which is the server's "traditional" CRC-32, not its "legacy" one (which
 * differs).  A checksum, not cryptography: a sender that signs it signs
 * the checksum of its body.
 */
uint32
idem_crc32(Slice s)
{
	pg_crc32	crc;

	INIT_TRADITIONAL_CRC32(crc);
	COMP_TRADITIONAL_CRC32(crc, s.data, s.len);
	FIN_TRADITIONAL_CRC32(crc);
	return crc;
}
