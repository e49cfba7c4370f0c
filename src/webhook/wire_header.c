/*
 * wire_header.c
 *		Wire format, first layer of the webhook code: slices of the request,
 *		its headers, the lists inside a header, unix and ISO 8601 timestamps.
 *
 * May call: the server and libc only.  The request comes from whoever can
 * reach the application's endpoint, so every reader here answers false on
 * anything malformed and never raises an error.
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "webhook/wire.h"

/* Latest accepted unix timestamp: 9999-12-31 23:59:59 UTC */
#define MAX_UNIX_SECS	INT64CONST(253402300799)

/* The bytes of a text datum */
Slice
idem_slice_of_text(text *t)
{
	Slice		s;

	s.data = VARDATA_ANY(t);
	s.len = VARSIZE_ANY_EXHDR(t);
	return s;
}

/* Is the slice exactly the given ASCII word? */
bool
idem_slice_is(Slice s, const char *word)
{
	size_t		len = strlen(word);

	return s.len == len && memcmp(s.data, word, len) == 0;
}

/* Header names are ASCII tokens: fold only A-Z, whatever the locale */
static bool
header_name_equal(const char *a, size_t alen, const char *b)
{
	size_t		blen = strlen(b);

	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++)
	{
		char		ca = a[i];
		char		cb = b[i];

		if (ca >= 'A' && ca <= 'Z')
			ca += 'a' - 'A';
		if (cb >= 'A' && cb <= 'Z')
			cb += 'a' - 'A';
		if (ca != cb)
			return false;
	}
	return true;
}

/* Drop HTTP optional whitespace (spaces, tabs) at both ends */
static Slice
trim_ows(Slice s)
{
	while (s.len > 0 && (s.data[0] == ' ' || s.data[0] == '\t'))
	{
		s.data++;
		s.len--;
	}
	while (s.len > 0 && (s.data[s.len - 1] == ' ' || s.data[s.len - 1] == '\t'))
		s.len--;
	return s;
}

/*
 * Take the next sep-separated element of *rest, trimmed, into *item; false
 * when the list is used up.  Empty elements come back empty: callers skip
 * them, so doubled separators are harmless.
 */
bool
idem_next_element(Slice *rest, char sep, Slice *item)
{
	const char *p;

	if (rest->data == NULL)
		return false;
	p = memchr(rest->data, sep, rest->len);
	if (p == NULL)
	{
		item->data = rest->data;
		item->len = rest->len;
		rest->data = NULL;
		rest->len = 0;
	}
	else
	{
		item->data = rest->data;
		item->len = p - rest->data;
		rest->len -= item->len + 1;
		rest->data = p + 1;
	}
	*item = trim_ows(*item);
	return true;
}

/* Split "name<sep>value" at the first sep, both sides trimmed; false without sep */
bool
idem_split_pair(Slice item, char sep, Slice *name, Slice *value)
{
	const char *p = memchr(item.data, sep, item.len);

	if (p == NULL)
		return false;
	name->data = item.data;
	name->len = p - item.data;
	value->data = p + 1;
	value->len = item.len - name->len - 1;
	*name = trim_ows(*name);
	*value = trim_ows(*value);
	return true;
}

/*
 * Find a header by case-insensitive name in a jsonb object of
 * name -> string.  A non-object, a missing name, a non-string value or a
 * name present twice (in different cases) all count as missing: a request
 * whose headers are ambiguous is not one to trust.  The value is taken as
 * it is, not trimmed: ids and timestamps are signed as sent, and the id the
 * caller dedups on must be the very one that was signed (a padded copy of a
 * captured delivery would otherwise verify under a new dedup key).  The
 * signature lists trim their own entries.
 */
bool
idem_find_header(Jsonb *headers, const char *name, Slice *value)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			found = 0;
	bool		is_string = false;

	if (!JB_ROOT_IS_OBJECT(headers))
		return false;

	it = JsonbIteratorInit(&headers->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		match;

		if (tok != WJB_KEY)
			continue;
		match = header_name_equal(v.val.string.val, v.val.string.len, name);
		/* the key's value; nested containers come back whole */
		tok = JsonbIteratorNext(&it, &v, true);
		if (!match || tok != WJB_VALUE)
			continue;
		found++;
		is_string = (v.type == jbvString);
		if (is_string)
		{
			value->data = v.val.string.val;
			value->len = v.val.string.len;
		}
	}
	return found == 1 && is_string;
}

/* Unix seconds written as plain decimal digits, up to year 9999 */
bool
idem_parse_unix_seconds(Slice s, int64 *secs)
{
	int64		result = 0;

	if (s.len == 0)
		return false;
	for (size_t i = 0; i < s.len; i++)
	{
		if (s.data[i] < '0' || s.data[i] > '9')
			return false;
		result = result * 10 + (s.data[i] - '0');
		if (result > MAX_UNIX_SECS)
			return false;
	}
	*secs = result;
	return true;
}

/*
 * Is the timestamp within tolerance of the wall clock, in either direction?
 * A negative tolerance_usecs means no check.  Both sides stay far from
 * int64 overflow: secs is bounded by year 9999 and the clock by the
 * timestamp range.
 */
bool
idem_timestamp_acceptable(int64 secs, double tolerance_usecs)
{
	int64		now_unix_usecs;
	int64		diff;

	if (tolerance_usecs < 0)
		return true;
	now_unix_usecs = GetCurrentTimestamp() +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
	diff = now_unix_usecs - secs * USECS_PER_SEC;
	if (diff < 0)
		diff = -diff;
	return (double) diff <= tolerance_usecs;
}

/*
 * A unix time in milliseconds, in plain digits (more than three), into
 * whole seconds: the digits but the last three, read as
 * idem_parse_unix_seconds reads them
 */
bool
idem_parse_unix_millis(Slice s, int64 *secs)
{
	Slice		whole = s;

	if (s.len <= 3)
		return false;
	for (size_t i = s.len - 3; i < s.len; i++)
		if (s.data[i] < '0' || s.data[i] > '9')
			return false;
	whole.len = s.len - 3;
	return idem_parse_unix_seconds(whole, secs);
}

/*
 * A header's value that is a unix time in milliseconds, in plain digits
 * (Airwallex's x-timestamp, Alipay's alipay-timestamp), within the
 * tolerance; false if missing, malformed or stale.  *value is the header's
 * text, which the schemes sign.
 */
bool
idem_find_unix_millis(Jsonb *headers, const char *name, double tolerance_usecs, Slice *value)
{
	int64		unix_secs;

	return idem_find_header(headers, name, value) &&
		idem_parse_unix_millis(*value, &unix_secs) &&
		idem_timestamp_acceptable(unix_secs, tolerance_usecs);
}

/* n decimal digits at s, into *value; false if they are not all digits */
static bool
parse_digits(const char *s, int n, int *value)
{
	*value = 0;
	for (int i = 0; i < n; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		*value = *value * 10 + (s[i] - '0');
	}
	return true;
}

/* Days from 1970-01-01 to a date of the proleptic Gregorian calendar */
int64
idem_days_since_epoch(int year, int month, int day)
{
	/* a year starting in March puts February, and its leap day, last */
	int64		y = year - (month <= 2);
	int64		m = month <= 2 ? month + 9 : month - 3;

	return 365 * y + y / 4 - y / 100 + y / 400 + (153 * m + 2) / 5 + day - 1 - 719468;
}

/*
 * An ISO 8601 date and time as RFC 3339 writes it, into unix seconds:
 * "YYYY-MM-DDTHH:MM:SS", then optional fractional seconds (dropped), then
 * "Z" or an offset "+HH:MM" or "-HH:MM".  Years 1970 to 9999, real dates
 * only, no leap second; anything else is false.
 */
bool
idem_parse_iso8601(Slice s, int64 *secs)
{
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	const char *p = s.data;
	const char *end = s.data + s.len;
	int			year,
				month,
				day,
				hour,
				minute,
				second,
				off_h = 0,
				off_m = 0;
	int			sign = 0;

	if (s.len < 20 ||
		!parse_digits(p, 4, &year) || p[4] != '-' ||
		!parse_digits(p + 5, 2, &month) || p[7] != '-' ||
		!parse_digits(p + 8, 2, &day) || p[10] != 'T' ||
		!parse_digits(p + 11, 2, &hour) || p[13] != ':' ||
		!parse_digits(p + 14, 2, &minute) || p[16] != ':' ||
		!parse_digits(p + 17, 2, &second))
		return false;
	p += 19;
	if (*p == '.')
	{
		p++;
		if (p == end || *p < '0' || *p > '9')
			return false;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < end && *p == 'Z')
		p++;
	else if (end - p == 6 && (*p == '+' || *p == '-') &&
			 parse_digits(p + 1, 2, &off_h) && p[3] == ':' &&
			 parse_digits(p + 4, 2, &off_m) && off_h < 24 && off_m < 60)
	{
		sign = *p == '+' ? 1 : -1;
		p += 6;
	}
	if (p != end || year < 1970 || month < 1 || month > 12 || day < 1 ||
		day > mdays[month - 1] || hour > 23 || minute > 59 || second > 59 ||
		(month == 2 && day == 29 &&
		 !(year % 4 == 0 && (year % 100 != 0 || year % 400 == 0))))
		return false;

	*secs = idem_days_since_epoch(year, month, day) * SECS_PER_DAY + hour * SECS_PER_HOUR + minute * SECS_PER_MINUTE +
		second - sign * (off_h * SECS_PER_HOUR + off_m * SECS_PER_MINUTE);
	return true;
}
