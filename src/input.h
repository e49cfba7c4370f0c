/*
 * input.h
 *		Input checks and the result row shared by the SQL entry points
 *		(input.c).
 */
#ifndef IDEM_INPUT_H
#define IDEM_INPUT_H

#include "idem.h"

#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "fmgr.h"

/*
 * The most bytes a replayed body or response holds as text, below the 1 GB
 * that one value in memory can take, leaving room for the rest of the
 * replay's row
 */
#define IDEM_MAX_REPLAY_TEXT	(1023 * 1024 * 1024)

/* Settings (input.c) */
extern int	idem_max_response_kb;

extern void idem_input_init(void);
extern text *idem_arg_key(FunctionCallInfo fcinfo, int argno, const char *what);
extern bool idem_arg_key_valid(FunctionCallInfo fcinfo, int argno);
extern text *idem_arg_scope(FunctionCallInfo fcinfo, int argno, const char *what);
extern Interval *idem_arg_interval(FunctionCallInfo fcinfo, int argno,
								   const char *what, int default_secs);
extern TimestampTz idem_after(TimestampTz from, const Interval *iv, const char *what);
extern void idem_check_value_size(Datum value, const char *what);
extern void idem_check_json_prints(Datum jsonb, const char *what);
extern void idem_check_writable(const char *fname);
extern TupleDesc idem_call_result_desc(FunctionCallInfo fcinfo);
extern Datum idem_result_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls);

#endif							/* IDEM_INPUT_H */
