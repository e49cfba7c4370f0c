/*
 * currency.h
 *		The active ISO 4217 currency codes and their minor units
 *		(currency.c), for the payment keys of payment_key.c.
 */
#ifndef IDEM_CURRENCY_H
#define IDEM_CURRENCY_H

#include "idem.h"

/* Minor units of a currency that ISO 4217 gives none (gold, XDR, ...) */
#define IDEM_CURRENCY_NO_MINOR_UNIT	(-1)
extern bool idem_currency_minor_units(const char *code, int *minor_units);

#endif							/* IDEM_CURRENCY_H */
