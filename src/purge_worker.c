/*
 * purge_worker.c
 *		Background worker that deletes expired keys and webhook ids.
 *
 * With shared_preload_libraries = 'idem', one worker connects to
 * idem.database and calls idem_purge() every idem.purge_interval, one batch
 * of idem.purge_batch_size rows per transaction, until a batch comes back
 * short.  Short transactions keep the worker from holding anything a claim
 * would wait for; idem_purge() itself skips rows that a live transaction
 * holds.
 *
 * A failed batch is logged and its transaction rolled back; the worker then
 * waits for the next interval rather than exiting, so that a persistent
 * error costs one log line per interval instead of a restart loop.  A crash
 * (or anything FATAL) ends the process and the postmaster starts it again
 * after IDEM_WORKER_RESTART_SECS.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idem.h"

#define IDEM_WORKER_NAME			"idem purge worker"

/* Seconds before the postmaster starts a crashed worker again */
#define IDEM_WORKER_RESTART_SECS	5

/* What idem_purge_batch() returns besides a row count */
#define IDEM_BATCH_NO_EXTENSION		(-1)
#define IDEM_BATCH_FAILED			(-2)

/* Finds the extension's schema, so that search_path does not matter */
#define IDEM_FIND_SCHEMA_SQL \
	"SELECT n.nspname FROM pg_catalog.pg_extension e" \
	" JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace" \
	" WHERE e.extname = 'idem'"

PGDLLEXPORT void idem_purge_worker_main(Datum main_arg) pg_attribute_noreturn();

/* Memory of one pass, reset after it */
static MemoryContext pass_context = NULL;

/* Whether "extension not installed" was already logged */
static bool missing_reported = false;

/* Register the worker; only possible while the postmaster preloads us */
void
idem_purge_worker_register(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = IDEM_WORKER_RESTART_SECS;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "idem");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "idem_purge_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, IDEM_WORKER_NAME);
	snprintf(worker.bgw_type, BGW_MAXLEN, IDEM_WORKER_NAME);
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;

	RegisterBackgroundWorker(&worker);
}

/* Tell the log which database an error of the worker was about */
static void
idem_purge_error_context(void *arg)
{
	errcontext("idem purge worker purging database \"%s\"", idem_database);
}

/*
 * One transaction: find the extension, delete up to batch_size expired rows.
 * Returns the rows deleted, or IDEM_BATCH_NO_EXTENSION.
 */
static int64
idem_purge_batch(int batch_size)
{
	int64		deleted = IDEM_BATCH_NO_EXTENSION;
	int			ret;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "SELECT idem_purge($1)");

	ret = SPI_execute(IDEM_FIND_SCHEMA_SQL, true, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed: error code %d", ret);

	if (SPI_processed > 0)
	{
		char	   *schema;
		char	   *sql;
		Oid			argtypes[1] = {INT4OID};
		Datum		args[1];
		Datum		result;
		bool		isnull;

		schema = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		sql = psprintf("SELECT %s.idem_purge($1)", quote_identifier(schema));
		args[0] = Int32GetDatum(batch_size);

		ret = SPI_execute_with_args(sql, 1, argtypes, args, NULL, false, 1);
		if (ret != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "idem_purge() returned no row: error code %d", ret);

		result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
							   &isnull);
		deleted = isnull ? 0 : DatumGetInt64(result);
	}

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);

	return deleted;
}

/*
 * Run one batch and survive its ERROR: report it, roll back, and let the
 * caller wait for the next interval.  FATAL and worse still end the process.
 */
static int64
idem_purge_batch_guarded(int batch_size)
{
	volatile int64 deleted = IDEM_BATCH_FAILED;
	ErrorContextCallback errcallback;

	errcallback.callback = idem_purge_error_context;
	errcallback.arg = NULL;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	PG_TRY();
	{
		deleted = idem_purge_batch(batch_size);
	}
	PG_CATCH();
	{
		/* As the apply worker does when it survives an error */
		HOLD_INTERRUPTS();
		EmitErrorReport();
		AbortOutOfAnyTransaction();
		FlushErrorState();
		RESUME_INTERRUPTS();

		pgstat_report_activity(STATE_IDLE, NULL);
		deleted = IDEM_BATCH_FAILED;
	}
	PG_END_TRY();

	/* Committing or aborting left us in TopMemoryContext */
	MemoryContextSwitchTo(pass_context);
	error_context_stack = errcallback.previous;
	return deleted;
}

/* Apply a pending reload of the configuration file */
static void
idem_purge_reload_if_asked(void)
{
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/* Delete batches until none is left, or the interval says pause */
static void
idem_purge_pass(void)
{
	MemoryContextSwitchTo(pass_context);

	for (;;)
	{
		int			batch_size = idem_purge_batch_size;
		int64		deleted = idem_purge_batch_guarded(batch_size);

		if (deleted == IDEM_BATCH_NO_EXTENSION)
		{
			/* Expected until CREATE EXTENSION runs: say it once */
			ereport(missing_reported ? DEBUG1 : LOG,
					(errmsg("idem purge worker is waiting for extension \"idem\" to be created in database \"%s\"",
							idem_database)));
			missing_reported = true;
			break;
		}
		missing_reported = false;

		/* A short batch means nothing expired is left (or it failed) */
		if (deleted < batch_size)
			break;

		CHECK_FOR_INTERRUPTS();
		idem_purge_reload_if_asked();
		if (idem_purge_interval_secs == 0)
			break;
	}

	MemoryContextSwitchTo(TopMemoryContext);
	MemoryContextReset(pass_context);
}

/* Entry point of the worker process */
void
idem_purge_worker_main(Datum main_arg)
{
	TimestampTz last_pass = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* A database that does not exist is FATAL here; the postmaster retries */
	BackgroundWorkerInitializeConnection(idem_database, NULL, 0);

	/*
	 * Purging must neither fail nor make claims fail with serialization
	 * errors because a database defaults to SERIALIZABLE; each row's own
	 * check in idem_purge() is what keeps live rows safe.
	 */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);

	pass_context = AllocSetContextCreate(TopMemoryContext,
										 "idem purge worker",
										 ALLOCSET_DEFAULT_SIZES);

	ereport(LOG,
			(errmsg("idem purge worker started in database \"%s\"", idem_database)));

	for (;;)
	{
		int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;
		long		timeout = -1;

		CHECK_FOR_INTERRUPTS();
		idem_purge_reload_if_asked();

		/*
		 * The next pass is due one interval after the end of the last one,
		 * computed afresh each time so that a reload that shortens the
		 * interval, or ends a pause, takes effect at once.
		 */
		if (idem_purge_interval_secs > 0)
		{
			TimestampTz due;

			due = TimestampTzPlusMilliseconds(last_pass,
											  (int64) idem_purge_interval_secs * 1000);
			if (last_pass == 0 || GetCurrentTimestamp() >= due)
			{
				idem_purge_pass();
				last_pass = GetCurrentTimestamp();
				due = TimestampTzPlusMilliseconds(last_pass,
												  (int64) idem_purge_interval_secs * 1000);
			}
			timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), due);
			events |= WL_TIMEOUT;
		}

		(void) WaitLatch(MyLatch, events, timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
