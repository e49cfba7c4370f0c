/*
 * idem.h
 *		What every file of the idem extension shares: the server version
 *		differences, the extension's SQLSTATEs and limits.  Each module
 *		declares the rest in its own header, its settings too: it defines
 *		them in its own Init function (idem_claim_init in claim.c, say),
 *		which _PG_init (idem.c) calls.
 */
#ifndef IDEM_H
#define IDEM_H

#include "postgres.h"

/* the differences between the server versions idem builds against */
#include "compat.h"

/*
 * The extension's own SQLSTATEs (class ID, free in the SQL standard and in
 * PostgreSQL).  doc/api.md lists them; applications match on them.
 */
#define ERRCODE_IDEM_STALE_TOKEN		MAKE_SQLSTATE('I','D','0','0','1')
#define ERRCODE_IDEM_NO_CLAIM			MAKE_SQLSTATE('I','D','0','0','2')
#define ERRCODE_IDEM_ALREADY_FINISHED	MAKE_SQLSTATE('I','D','0','0','3')
#define ERRCODE_IDEM_TOKEN_REQUIRED		MAKE_SQLSTATE('I','D','0','0','4')

/* Limits of the contract */
#define IDEM_MAX_KEY_BYTES		255

#endif							/* IDEM_H */
