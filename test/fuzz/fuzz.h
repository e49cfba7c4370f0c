/*
 * fuzz.h
 *		What the fuzz targets of test/fuzz share: the stand-ins for the
 *		server (shim.c) and the helpers that turn a fuzzer's bytes into what
 *		the server would hand idem (text, jsonb).
 *
 * The targets link the same source files as the extension, compiled
 * outside the server; shim.c implements the few server functions they call
 * (memory contexts, ereport, encoding conversion, jsonb containers, lists,
 * the clock).  test/fuzz/README says what is real and what is stood in for.
 */
#ifndef IDEM_FUZZ_H
#define IDEM_FUZZ_H

#include "postgres.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "utils/jsonb.h"

#include "webhook/wire.h"

/*
 * The wall clock of every target: fixed, so that a run is reproducible.
 * 2023-11-14 22:15:00 UTC, a few minutes after the timestamps of the
 * tests' vectors (1700000000).
 */
#define FUZZ_NOW_UNIX	INT64CONST(1700000100)

/* The fuzzer's entry points (libFuzzer) */
extern int	LLVMFuzzerInitialize(int *argc, char ***argv);
extern int	LLVMFuzzerTestOneInput(const uint8 *data, size_t size);

/* One input: the database encoding it runs in, then everything freed */
extern void fuzz_begin(int db_encoding);
extern void fuzz_end(void);

/*
 * An ereport(ERROR) with this SQLSTATE is caught by the caller's PG_TRY
 * instead of stopping the run (0: none is); the SQLSTATE of the last one
 */
extern void fuzz_allow_error(int sqlerrcode);
extern int	fuzz_last_error(void);

/* Text as the server hands it to a function: a varlena with a 4-byte header */
extern text *fuzz_text(const char *data, size_t len);

/* Could the server hold these bytes as text in that encoding (valid, no NUL)? */
extern bool fuzz_valid_text(const char *data, size_t len, int encoding);

/*
 * jsonb as the server would make it from JSON text (jsonb_in) or from
 * name/string pairs (jsonb_build_object; a value whose data is NULL is
 * null), in its on-disk layout; NULL when the text is not JSON the server
 * would take
 */
extern Jsonb *fuzz_jsonb_from_json(const char *json, size_t len, int encoding);
extern Jsonb *fuzz_jsonb_object(int npairs, const Slice *names,
								const Slice *values);

/* The real JSON parser of libpgcommon, under the check shim.c puts on it */
extern JsonParseErrorType __real_pg_parse_json(JsonLexContext *lex,
											   JsonSemAction *sem);

/* The next line of *rest (without its newline); false when it is used up */
extern bool fuzz_next_line(Slice *rest, Slice *line);

/* A NUL-terminated copy, palloc'd */
extern char *fuzz_cstring(Slice s);

/* A file read whole, malloc'd and NUL-terminated; the run stops if it cannot be */
extern char *fuzz_read_file(const char *path, size_t *len);

/* A key of test/fuzz/keys, read once (the fixed keys of the targets) */
extern Slice fuzz_key(const char *name);

/* Stop the run with a message: a finding of the target itself */
pg_noreturn extern void fuzz_fail(const char *fmt,...) pg_attribute_printf(1, 2);

#endif							/* IDEM_FUZZ_H */
