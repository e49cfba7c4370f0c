/*
 * pending.c
 *		TEMPORARY stand-ins so that the library loads and CREATE EXTENSION works
 *		while the real files are written.  Each owner deletes its block; the
 *		file must be gone before anything is released.
 */
#include "postgres.h"

#include "idem.h"

