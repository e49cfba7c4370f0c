/*
 * wire_form.c
 *		Wire format: application/x-www-form-urlencoded bodies, as the Chinese
 *		gateways send their notifications, decoded in the charset the form
 *		names.
 *
 * May call: the server (its encoding conversions) and the hex reader of
 * wire_codec.c.  A malformed form is false, never an error.  Two things
 * here can still raise one, and only on the server's side: running out of
 * memory, and the server's own conversion between encodings (looking up
 * the conversion in the catalog, or a conversion function failing outside
 * what it reports as unconvertible), which no request can make happen.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "mb/pg_wchar.h"
#include "utils/memutils.h"

#include "webhook/wire.h"

/*
 * Most parameters a form may have: a gateway's notification has a few
 * dozen, and a cap keeps a hostile body from costing more than its size.
 */
#define FORM_MAX_PARAMS		100000

/* Bytes of literal text a form decoder converts at once */
#define FORM_CONVERT_CHUNK	65536

/*
 * Append the characters src[0..n), whole characters of encoding from, to
 * *out in encoding to, advancing *out; false if one of them has no
 * equivalent there.  Goes through UTF-8 when the two encodings have no
 * conversion of their own (EUC_CN to GBK, say).  *out must have room for
 * what the conversion gives, at most MAX_CONVERSION_GROWTH bytes a byte.
 */
static bool
convert_chars(const char *src, size_t n, int from, int to, char **out)
{
	Oid			proc = FindDefaultConversionProc(from, to);
	int			buflen = FORM_CONVERT_CHUNK * MAX_CONVERSION_GROWTH + 8;
	char	   *buf;
	bool		ok = true;

	if (!OidIsValid(proc))
	{
		char	   *utf8;
		char	   *end;

		if (from == PG_UTF8 || to == PG_UTF8)
			return false;
		end = utf8 = palloc_extended(n * MAX_CONVERSION_GROWTH + 1, MCXT_ALLOC_HUGE);
		ok = convert_chars(src, n, from, PG_UTF8, &end) &&
			convert_chars(utf8, end - utf8, PG_UTF8, to, out);
		pfree(utf8);
		return ok;
	}
	buf = palloc(buflen);
	while (n > 0)
	{
		int			chunk = (int) Min(n, FORM_CONVERT_CHUNK);
		int			done;
		size_t		outlen;

		/* stops before a character it cannot convert, or one cut by the chunk */
		done = pg_do_encoding_conversion_buf(proc, from, to,
											 (unsigned char *) src, chunk,
											 (unsigned char *) buf, buflen, true);
		if (done <= 0)
		{
			ok = false;
			break;
		}
		outlen = strlen(buf);
		memcpy(*out, buf, outlen);
		*out += outlen;
		src += done;
		n -= done;
	}
	pfree(buf);
	return ok;
}

/*
 * Decode one name or value of a form to *out, advancing it: "+" is a space
 * and "%XX" the byte XX, taken as they are; bytes above 0x7F that are not
 * %-encoded are characters of the database encoding (from), converted to
 * the form's encoding (to).  False on a "%" without two hex digits after
 * it, or a character the form's encoding lacks.
 */
static bool
form_unescape(Slice raw, int from, int to, char **out)
{
	const char *p = raw.data;
	const char *end = raw.data + raw.len;
	char	   *o = *out;

	/* bytes above 0x7F are copied as they are too when nothing converts */
	bool		copy_high = (from == to || from == PG_SQL_ASCII);

	while (p < end)
	{
		const char *run = p;
		unsigned char c;

		/* a run of bytes copied as they are, at once */
		while (p < end && *p != '+' && *p != '%' &&
			   (copy_high || (unsigned char) *p < 0x80))
			p++;
		if (p > run)
		{
			memcpy(o, run, p - run);
			o += p - run;
		}
		if (p == end)
			break;
		c = (unsigned char) *p;
		if (c == '+')
		{
			*o++ = ' ';
			p++;
		}
		else if (c == '%')
		{
			int			hi;
			int			lo;

			if (end - p < 3 || (hi = idem_hex_value(p[1])) < 0 ||
				(lo = idem_hex_value(p[2])) < 0)
				return false;
			*o++ = (char) ((hi << 4) | lo);
			p += 3;
		}
		else
		{
			/* in a server encoding every byte of a multibyte character is above 0x7F */
			run = p;
			while (p < end && (unsigned char) *p >= 0x80)
				p++;
			if (!convert_chars(run, p - run, from, to, &o))
				return false;
		}
	}
	*out = o;
	return true;
}

/*
 * A URL-encoded value decoded ("+" a space, "%XX" the byte XX, other bytes
 * as they are) into *out, newly allocated; false on a "%" without two hex
 * digits after it
 */
bool
idem_url_unescape(Slice raw, Slice *out)
{
	char	   *buf = palloc(raw.len + 1);
	char	   *end = buf;

	if (!form_unescape(raw, GetDatabaseEncoding(), GetDatabaseEncoding(), &end))
	{
		pfree(buf);
		return false;
	}
	out->data = buf;
	out->len = end - buf;
	return true;
}

/* Order form parameters by name, bytewise, a prefix first */
static int
form_param_cmp(const void *a, const void *b)
{
	const Slice *x = &((const FormParam *) a)->name;
	const Slice *y = &((const FormParam *) b)->name;
	int			c = memcmp(x->data, y->data, Min(x->len, y->len));

	if (c != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
}

/*
 * Decode an application/x-www-form-urlencoded body into form: its
 * parameters ("name=value", "&"-separated; a name alone has an empty
 * value; empty pieces between "&" are skipped), decoded by form_unescape
 * into encoding, and sorted by name.  False, never an error, on a
 * malformed %-escape, an empty name, a name given twice (which of the two
 * the signer meant is unknowable), a character encoding lacks, or more
 * than FORM_MAX_PARAMS pieces.  Sorting once keeps a body of many
 * parameters O(n log n).
 */
static bool
form_decode(Slice body, int encoding, Form *form)
{
	int			db = GetDatabaseEncoding();
	size_t		npieces = 1;
	size_t		buflen;
	char	   *o;
	Slice		rest = body;
	int			n = 0;
	uint8		high = 0;

	form->params = NULL;
	form->nparams = 0;

	for (const char *q = body.data, *end = body.data + body.len;
		 (q = memchr(q, '&', end - q)) != NULL; q++)
	{
		if (++npieces > FORM_MAX_PARAMS)
			return false;
	}
	for (size_t i = 0; i < body.len; i++)
		high |= (uint8) body.data[i];
	form->literal_non_ascii = (high & 0x80) != 0;
	if (body.len == 0)
		return true;

	buflen = body.len + 1;
	if (form->literal_non_ascii && encoding != db)
		buflen = body.len * MAX_CONVERSION_GROWTH + 1;
	o = palloc_extended(buflen, MCXT_ALLOC_HUGE);
	form->params = palloc(npieces * sizeof(FormParam));

	while (rest.len > 0)
	{
		const char *amp = memchr(rest.data, '&', rest.len);
		Slice		piece = {rest.data, amp ? (size_t) (amp - rest.data) : rest.len};
		const char *eq;
		Slice		name;
		Slice		value = {"", 0};
		FormParam  *param = &form->params[n];

		rest.data += piece.len + (amp ? 1 : 0);
		rest.len -= piece.len + (amp ? 1 : 0);
		if (piece.len == 0)
			continue;
		eq = memchr(piece.data, '=', piece.len);
		name.data = piece.data;
		name.len = eq ? (size_t) (eq - piece.data) : piece.len;
		if (eq)
		{
			value.data = eq + 1;
			value.len = piece.len - name.len - 1;
		}
		if (name.len == 0)
			return false;
		param->name.data = o;
		if (!form_unescape(name, db, encoding, &o))
			return false;
		param->name.len = o - param->name.data;
		param->value.data = o;
		if (!form_unescape(value, db, encoding, &o))
			return false;
		param->value.len = o - param->value.data;
		n++;
	}

	qsort(form->params, n, sizeof(FormParam), form_param_cmp);
	for (int i = 1; i < n; i++)
		if (form_param_cmp(&form->params[i - 1], &form->params[i]) == 0)
			return false;
	form->nparams = n;
	return true;
}

/* The database encoding of a form's charset name, or -1 for another */
static int
form_charset(Slice name)
{
	static const struct
	{
		const char *name;
		int			encoding;
	}			charsets[] = {
		{"UTF-8", PG_UTF8}, {"UTF8", PG_UTF8},
		/* GB2312 is a subset of GBK, and encoded alike */
		{"GBK", PG_GBK}, {"GB2312", PG_GBK},
	};

	for (int i = 0; i < lengthof(charsets); i++)
		if (name.len == strlen(charsets[i].name) &&
			pg_strncasecmp(name.data, charsets[i].name, name.len) == 0)
			return charsets[i].encoding;
	return -1;
}

/*
 * Decode a form in the charset its parameter charset_param names (UTF-8
 * when it is absent or empty; UTF-8 or GBK, in any case, else false).  The
 * %-encoded bytes are already in that charset; characters sent unencoded
 * are converted to it from the database encoding, which they arrived in.
 */
bool
idem_form_decode_charset(Slice body, const char *charset_param, Form *form)
{
	int			db = GetDatabaseEncoding();
	int			encoding = PG_UTF8;
	Slice		charset;

	if (!form_decode(body, db, form))
		return false;
	if (idem_form_get(form, charset_param, &charset) && charset.len > 0)
	{
		encoding = form_charset(charset);
		if (encoding < 0)
			return false;
	}
	if (encoding == db || db == PG_SQL_ASCII || !form->literal_non_ascii)
		return true;
	return form_decode(body, encoding, form);
}

/* The decoded value of a form's parameter; false if it has none */
bool
idem_form_get(const Form *form, const char *name, Slice *value)
{
	FormParam	key;
	FormParam  *found;

	if (form->nparams == 0)
		return false;
	key.name.data = name;
	key.name.len = strlen(name);
	found = bsearch(&key, form->params, form->nparams, sizeof(FormParam),
					form_param_cmp);
	if (found == NULL)
		return false;
	*value = found->value;
	return true;
}

/*
 * The string a gateway signs: "name=value" of every parameter, in order,
 * joined by "&", the names of skip (NULL-terminated) left out, and the
 * empty values too when skip_empty.
 */
Slice
idem_form_signed_string(const Form *form, const char *const *skip,
						bool skip_empty)
{
	bool	   *keep = palloc(Max(form->nparams, 1) * sizeof(bool));
	size_t		len = 0;
	char	   *buf;
	char	   *p;
	Slice		result;

	for (int i = 0; i < form->nparams; i++)
	{
		const FormParam *param = &form->params[i];

		keep[i] = !(skip_empty && param->value.len == 0);
		for (const char *const *s = skip; keep[i] && *s != NULL; s++)
			keep[i] = !idem_slice_is(param->name, *s);
		if (keep[i])
			len += param->name.len + param->value.len + 2;
	}
	p = buf = palloc_extended(len + 1, MCXT_ALLOC_HUGE);
	for (int i = 0; i < form->nparams; i++)
	{
		const FormParam *param = &form->params[i];

		if (!keep[i])
			continue;
		if (p != buf)
			*p++ = '&';
		memcpy(p, param->name.data, param->name.len);
		p += param->name.len;
		*p++ = '=';
		memcpy(p, param->value.data, param->value.len);
		p += param->value.len;
	}
	pfree(keep);
	result.data = buf;
	result.len = p - buf;
	return result;
}
