/*
 * store_wal.c
 *		Store: the setting idem.wal_compression, and the compression of the
 *		page images that idem's own writes log, which it governs.
 *
 * May call: what mirrors core (store_core.c), which sets the server's
 * compression of page images for the writes that follow.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "utils/guc.h"

#include "idem.h"
#include "store.h"
#include "store_core.h"

/*
 * idem.wal_compression: how the full-page images of idem's own writes are
 * compressed in the WAL, whatever wal_compression says for the rest; -1
 * (inherit) leaves them to wal_compression.  Random inserts into the primary
 * keys make most of a payment's page images.  lz4, the default, logs about
 * 70% of their bytes for no CPU a payment shows; zstd about 50%, for up to
 * 16% more CPU a payment once checkpoints come and go, which a hand-written
 * table does not pay (doc/performance.md).  The values are
 * wal_compression's (the methods this server was built with, and the same
 * hidden aliases of on and off), and inherit.
 */
#define STORE_WAL_INHERIT	(-1)

static const struct config_enum_entry wal_compression_options[] = {
	{"inherit", STORE_WAL_INHERIT, false},
	{"off", WAL_COMPRESSION_NONE, false},
	{"pglz", WAL_COMPRESSION_PGLZ, false},
#ifdef USE_LZ4
	{"lz4", WAL_COMPRESSION_LZ4, false},
#endif
#ifdef USE_ZSTD
	{"zstd", WAL_COMPRESSION_ZSTD, false},
#endif
	{"on", WAL_COMPRESSION_PGLZ, true},
	{"true", WAL_COMPRESSION_PGLZ, true},
	{"yes", WAL_COMPRESSION_PGLZ, true},
	{"1", WAL_COMPRESSION_PGLZ, true},
	{"false", WAL_COMPRESSION_NONE, true},
	{"no", WAL_COMPRESSION_NONE, true},
	{"0", WAL_COMPRESSION_NONE, true},
	{NULL, 0, false}
};

#if defined(USE_LZ4)
#define STORE_WAL_DEFAULT	WAL_COMPRESSION_LZ4
#elif defined(USE_ZSTD)
#define STORE_WAL_DEFAULT	WAL_COMPRESSION_ZSTD
#else
#define STORE_WAL_DEFAULT	STORE_WAL_INHERIT
#endif

static int	wal_images = STORE_WAL_DEFAULT;

/* Define idem.wal_compression (_PG_init) */
void
idem_store_wal_init(void)
{
	DefineCustomEnumVariable("idem.wal_compression",
							 "Compression of the full-page images that idem's own writes log.",
							 "inherit leaves them to wal_compression, which governs the rest of the WAL.",
							 &wal_images, STORE_WAL_DEFAULT, wal_compression_options,
							 PGC_SUSET, 0, NULL, NULL, NULL);
}

/*
 * Log the page images of the writes that follow as idem.wal_compression
 * says; returns what idem_store_images_end must put back, which the caller
 * does in PG_FINALLY, so that no other write of the session is affected.
 */
int
idem_store_images_begin(void)
{
	return idem_core_wal_compression_set(wal_images);
}

/* End what idem_store_images_begin started */
void
idem_store_images_end(int saved)
{
	idem_core_wal_compression_reset(saved);
}
