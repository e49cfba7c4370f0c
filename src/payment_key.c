/*
 * payment_key.c
 *		idem_payment_key: a deterministic idempotency key for a payment.
 *
 * The same payment must give the same key however the caller spells it
 * ('usd' or 'USD', 100 or 100.00), and two different payments must never
 * share one.  So each field is brought to one written form first, and
 * anything that cannot be written so (an unknown currency, a fraction of a
 * minor unit) is an error rather than a silent rounding: a rounded amount
 * would give two different payments the same key.
 *
 * May call: the key hash of fingerprint.c, the currencies of currency.c
 * and the argument checks (input.c).
 */
#include "postgres.h"

#include "datatype/timestamp.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/numeric.h"

#include "currency.h"
#include "fingerprint.h"
#include "input.h"

#define PAYMENT_KEY_PREFIX			"PAY_IDEM_"
#define MAX_ORDER_ID_CHARS			64
#define MAX_AMOUNT					"999999999.99"

/* Error unless argument argno is non-NULL */
static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
}

/* A numeric constant from its text */
static Numeric
numeric_const(const char *s)
{
	return DatumGetNumeric(DirectFunctionCall3(numeric_in,
											   CStringGetDatum(s),
											   ObjectIdGetDatum(InvalidOid),
											   Int32GetDatum(-1)));
}

/* The currency argument upper-cased, checked, with its minor units */
static char *
payment_currency(text *t, int *minor_units)
{
	int			len = VARSIZE_ANY_EXHDR(t);
	char	   *code = text_to_cstring(t);
	int			i;

	/* ASCII only: a locale's idea of upper case must not change the key */
	for (i = 0; i < len; i++)
		code[i] = pg_ascii_toupper((unsigned char) code[i]);

	if (len != 3 || !idem_currency_minor_units(code, minor_units))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("currency \"%s\" is not an active ISO 4217 code", code),
				 errhint("Use a three-letter code such as USD, EUR or JPY.")));
	if (*minor_units == IDEM_CURRENCY_NO_MINOR_UNIT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("currency \"%s\" cannot be used for a payment", code),
				 errdetail("ISO 4217 gives it no minor unit (precious metals, "
						   "units of account and testing codes have none).")));
	return code;
}

/*
 * The amount written with exactly the currency's minor units: USD 100 is
 * "100.00", JPY 100.00 is "100", KWD 1.5 is "1.500".
 */
static char *
payment_amount(Numeric amount, const char *currency, int minor_units)
{
	Datum		rounded;

	if (numeric_is_nan(amount))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("amount must be a number"),
				 errdetail("NaN is not an amount.")));

	/* numeric_cmp orders -Infinity and Infinity beyond every finite value */
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(amount),
										  NumericGetDatum(numeric_const("0")))) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("amount must be greater than zero")));
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(amount),
										  NumericGetDatum(numeric_const(MAX_AMOUNT)))) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("amount is too large"),
				 errdetail("The largest amount is %s.", MAX_AMOUNT)));

	/*
	 * Rounding sets the scale to the minor units; if it also changed the
	 * value, the amount had a non-zero digit the currency cannot express.
	 */
	rounded = DirectFunctionCall2(numeric_round, NumericGetDatum(amount),
								  Int32GetDatum(minor_units));
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, rounded,
										  NumericGetDatum(amount))) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("amount has more decimal places than %s allows", currency),
				 errdetail("%s has %d decimal place%s; the amount is %s.",
						   currency, minor_units, minor_units == 1 ? "" : "s",
						   DatumGetCString(DirectFunctionCall1(numeric_out,
															   NumericGetDatum(amount))))));
	return DatumGetCString(DirectFunctionCall1(numeric_out, rounded));
}

/* The date as YYYY-MM-DD, whatever DateStyle says */
static char *
payment_date(DateADT date)
{
	int			year,
				month,
				day;

	if (DATE_NOT_FINITE(date))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("request_date must be a finite date")));
	j2date(date + POSTGRES_EPOCH_JDATE, &year, &month, &day);
	/* four digits, AD: the written form stays one fixed width */
	if (year < 1 || year > 9999)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("request_date is out of range"),
				 errdetail("The year must be between 1 and 9999.")));
	return psprintf("%04d-%02d-%02d", year, month, day);
}

PG_FUNCTION_INFO_V1(idem_payment_key);

/*
 * idem_payment_key(merchant_id text, merchant_order_id text, amount numeric,
 *                  currency text, request_date date) returns text
 */
Datum
idem_payment_key(PG_FUNCTION_ARGS)
{
	text	   *merchant_id;
	text	   *order_id;
	int			order_len;
	int			minor_units;
	char	   *currency;
	char	   *amount;
	char	   *date;
	const char *parts[5];
	int			lens[5];
	char		hex[2 * IDEM_SHA256_LEN + 1];

	/* NULL, empty and at most 255 bytes, as for every key */
	merchant_id = idem_arg_key(fcinfo, 0, "merchant_id");

	require_arg(fcinfo, 1, "merchant_order_id");
	order_id = PG_GETARG_TEXT_PP(1);
	order_len = VARSIZE_ANY_EXHDR(order_id);
	if (order_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("merchant_order_id must not be empty")));
	if (pg_mbstrlen_with_len(VARDATA_ANY(order_id), order_len) > MAX_ORDER_ID_CHARS)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("merchant_order_id is too long"),
				 errdetail("It is %d characters; the limit is %d.",
						   pg_mbstrlen_with_len(VARDATA_ANY(order_id), order_len),
						   MAX_ORDER_ID_CHARS)));

	require_arg(fcinfo, 2, "amount");
	require_arg(fcinfo, 3, "currency");
	require_arg(fcinfo, 4, "request_date");

	/* the currency first: it decides how the amount is written */
	currency = payment_currency(PG_GETARG_TEXT_PP(3), &minor_units);
	amount = payment_amount(PG_GETARG_NUMERIC(2), currency, minor_units);
	date = payment_date(PG_GETARG_DATEADT(4));

	parts[0] = VARDATA_ANY(merchant_id);
	lens[0] = VARSIZE_ANY_EXHDR(merchant_id);
	parts[1] = VARDATA_ANY(order_id);
	lens[1] = order_len;
	parts[2] = amount;
	lens[2] = strlen(amount);
	parts[3] = currency;
	lens[3] = strlen(currency);
	parts[4] = date;
	lens[4] = strlen(date);
	idem_key_hex(5, parts, lens, hex);

	PG_RETURN_TEXT_P(cstring_to_text(psprintf("%s%s", PAYMENT_KEY_PREFIX, hex)));
}
