/*
 * fuzz_form.c
 *		Fuzz target: application/x-www-form-urlencoded bodies in the charset
 *		they name (wire_form.c), as Alipay (charset=) and UnionPay
 *		(encoding=) send them, GBK included.
 *
 * Input: a first byte of options (bits 0-1: the database encoding, UTF8,
 * SQL_ASCII, EUC_CN or LATIN1; bit 2: the charset parameter is "encoding"
 * rather than "charset"; bit 3: the signed string skips empty values),
 * then the body, which must be text the database could hold.  Checked:
 * the parameters come sorted, once each, and each is found by name; the
 * signed string is as long as its parameters; and, whenever no character
 * has to be converted, the form is exactly what a plain decoding made here
 * gives.
 */
#include "fuzz.h"

/* The database encodings, by the low bits of the first byte */
static const int encodings[] = {PG_UTF8, PG_SQL_ASCII, PG_EUC_CN, PG_LATIN1};

/* Order of names: bytewise, a prefix first */
static int
name_cmp(Slice a, Slice b)
{
	int			c = memcmp(a.data, b.data, Min(a.len, b.len));

	if (c != 0)
		return c;
	return a.len < b.len ? -1 : a.len > b.len ? 1 : 0;
}

/* Percent-decoding as read here; false on a bad escape */
static bool
unescape(Slice in, Slice *out)
{
	char	   *o = palloc(in.len + 1);

	out->data = o;
	for (size_t i = 0; i < in.len; i++)
	{
		if (in.data[i] == '+')
			*o++ = ' ';
		else if (in.data[i] == '%')
		{
			char		hex[3] = {0, 0, 0};
			char	   *end;

			if (in.len - i < 3 || !isxdigit((unsigned char) in.data[i + 1]) ||
				!isxdigit((unsigned char) in.data[i + 2]))
				return false;
			hex[0] = in.data[i + 1];
			hex[1] = in.data[i + 2];
			*o++ = (char) strtol(hex, &end, 16);
			i += 2;
		}
		else
			*o++ = in.data[i];
	}
	out->len = o - out->data;
	return true;
}

/* Sort parameters by name (insertion: the decoding here is for checking only) */
static void
sort_params(FormParam *params, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && name_cmp(params[j - 1].name, params[j].name) > 0; j--)
		{
			FormParam	t = params[j];

			params[j] = params[j - 1];
			params[j - 1] = t;
		}
}

/*
 * The form decoded here with no conversion; false for a body idem must
 * refuse whatever the charset (bad escape, empty or repeated name, too many
 * pieces)
 */
static bool
plain_decode(Slice body, Form *form)
{
	size_t		pieces = 1;
	size_t		start = 0;
	int			n = 0;

	for (size_t i = 0; i < body.len; i++)
		pieces += body.data[i] == '&';
	if (pieces > 100000)
		return false;
	form->params = palloc(pieces * sizeof(FormParam));
	form->literal_non_ascii = false;
	for (size_t i = 0; i < body.len; i++)
		form->literal_non_ascii |= (body.data[i] & 0x80) != 0;
	while (start < body.len)
	{
		const char *amp = memchr(body.data + start, '&', body.len - start);
		size_t		stop = amp ? (size_t) (amp - body.data) : body.len;
		Slice		piece = {body.data + start, stop - start};
		const char *eq = memchr(piece.data, '=', piece.len);
		Slice		name = {piece.data, eq ? (size_t) (eq - piece.data) : piece.len};
		Slice		value = {eq ? eq + 1 : "", eq ? piece.len - name.len - 1 : 0};

		start = stop + 1;
		if (piece.len == 0)
			continue;
		if (name.len == 0 || !unescape(name, &form->params[n].name) ||
			!unescape(value, &form->params[n].value))
			return false;
		n++;
	}
	sort_params(form->params, n);
	for (int i = 1; i < n; i++)
		if (name_cmp(form->params[i - 1].name, form->params[i].name) == 0)
			return false;
	form->nparams = n;
	return true;
}

/* The encoding a charset name selects here, or -1 */
static int
charset_encoding(Slice name)
{
	if (name.len == 0 ||
		(name.len == 5 && pg_strncasecmp(name.data, "utf-8", 5) == 0) ||
		(name.len == 4 && pg_strncasecmp(name.data, "utf8", 4) == 0))
		return PG_UTF8;
	if ((name.len == 3 && pg_strncasecmp(name.data, "gbk", 3) == 0) ||
		(name.len == 6 && pg_strncasecmp(name.data, "gb2312", 6) == 0))
		return PG_GBK;
	return -1;
}

/* One input */
int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	int			db;
	const char *charset_param;
	bool		skip_empty;
	Slice		body;
	Form		form;
	Form		plain;
	bool		decoded;
	bool		plain_ok;
	int			expected = -1;	/* -1: a conversion; no plain answer */
	static const char *const skip[] = {"sign", "sign_type", "signature", NULL};
	Slice		signed_string;
	size_t		length = 0;
	int			kept = 0;

	if (size < 1)
		return 0;
	db = encodings[data[0] & 3];
	charset_param = (data[0] & 4) ? "encoding" : "charset";
	skip_empty = (data[0] & 8) != 0;
	body.data = (const char *) data + 1;
	body.len = size - 1;
	if (!fuzz_valid_text(body.data, body.len, db))
		return 0;
	fuzz_begin(db);

	decoded = idem_form_decode_charset(body, charset_param, &form);

	/* what the plain decoding says, where no conversion is involved */
	plain_ok = plain_decode(body, &plain);
	if (!plain_ok)
		expected = 0;
	else
	{
		Slice		charset = {"", 0};
		int			encoding;

		for (int i = 0; i < plain.nparams; i++)
			if (idem_slice_is(plain.params[i].name, charset_param))
				charset = plain.params[i].value;
		encoding = charset_encoding(charset);
		if (encoding < 0)
			expected = 0;
		else if (encoding == db || db == PG_SQL_ASCII || !plain.literal_non_ascii)
			expected = 1;
	}
	if (expected >= 0 && decoded != (expected == 1))
		fuzz_fail("idem_form_decode_charset answers %d, expected %d", decoded, expected);
	if (!decoded)
	{
		fuzz_end();
		return 0;
	}

	if (form.nparams < 0 || (form.nparams > 0 && form.params == NULL))
		fuzz_fail("a form with %d parameters", form.nparams);
	for (int i = 0; i < form.nparams; i++)
	{
		FormParam  *p = &form.params[i];
		Slice		found;

		if (p->name.len == 0)
			fuzz_fail("parameter %d has an empty name", i);
		if (i > 0 && name_cmp(form.params[i - 1].name, p->name) >= 0)
			fuzz_fail("parameters %d and %d are not in order", i - 1, i);
		if (memchr(p->name.data, '\0', p->name.len) == NULL)
		{
			char	   *name = fuzz_cstring(p->name);

			if (!idem_form_get(&form, name, &found) ||
				found.data != p->value.data || found.len != p->value.len)
				fuzz_fail("parameter %d is not found by its name", i);
		}
		if (expected == 1 &&
			(name_cmp(p->name, plain.params[i].name) != 0 ||
			 name_cmp(p->value, plain.params[i].value) != 0))
			fuzz_fail("parameter %d is not what the plain decoding gives", i);
		if (!(skip_empty && p->value.len == 0) &&
			!idem_slice_is(p->name, "sign") && !idem_slice_is(p->name, "sign_type") &&
			!idem_slice_is(p->name, "signature"))
		{
			length += p->name.len + 1 + p->value.len;
			kept++;
		}
	}
	if (expected == 1 && form.nparams != plain.nparams)
		fuzz_fail("%d parameters, the plain decoding gives %d", form.nparams, plain.nparams);

	signed_string = idem_form_signed_string(&form, skip, skip_empty);
	if (signed_string.len != length + (kept > 0 ? kept - 1 : 0))
		fuzz_fail("the signed string is %zu bytes, its parameters make %zu",
				  signed_string.len, length + (kept > 0 ? kept - 1 : 0));
	fuzz_end();
	return 0;
}
