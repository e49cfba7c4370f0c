/*
 * purge_worker.c
 *		Background workers that delete expired keys and webhook ids.
 *
 * With shared_preload_libraries = 'idem', the postmaster starts one
 * "idem purge launcher".  It is connected to no database, so it never stands
 * in the way of DROP DATABASE, ALTER DATABASE ... RENAME or CREATE DATABASE
 * ... TEMPLATE.  Every idem.purge_interval (counted from the end of the last
 * pass) it starts a dynamic "idem purge worker", waits for it to exit, and
 * sleeps again; 0 pauses it until a reload.  Only that worker connects to
 * idem.database, and only for the length of one pass.
 *
 * The worker runs one batch of idem.purge_batch_size rows per transaction
 * until a batch comes back short, then exits.  Short transactions keep it
 * from holding anything a claim would wait for; idem_purge_batch() itself
 * skips rows that a live transaction holds.  It runs no SQL: it looks the
 * extension up in the catalog and calls the C purge directly, so no function
 * or operator anyone creates can stand in for idem_purge() or make the call
 * ambiguous.
 *
 * A failed batch is logged and its transaction rolled back; the pass ends
 * and the next one comes at the next interval.  A worker that dies (FATAL,
 * say because idem.database does not exist, or pg_terminate_backend) is not
 * restarted: the launcher starts a new one at the next interval.  The
 * launcher itself is restarted by the postmaster IDEM_LAUNCHER_RESTART_SECS
 * after it exits, and with every other process after a crash.  When no
 * background worker slot is free, the launcher says so and tries again at
 * the next interval.
 *
 * Binary-upgrade mode (pg_upgrade) registers neither: idem.c does not call
 * idem_purge_worker_register() then.
 *
 * May call: one purge batch (purge.c) and the server's background
 * workers.  It defines idem.purge_interval and idem.database
 * (idem_purge_worker_init).
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "idem.h"
#include "purge.h"

#define IDEM_LAUNCHER_NAME			"idem purge launcher"
#define IDEM_WORKER_NAME			"idem purge worker"

int			idem_purge_interval_secs = 60;
char	   *idem_database = NULL;

/* Define idem.purge_interval and idem.database (_PG_init) */
void
idem_purge_worker_init(void)
{
	DefineCustomIntVariable("idem.purge_interval",
							"Pause of the purge worker between passes; 0 pauses it.",
							NULL,
							&idem_purge_interval_secs, 60, 0, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	/* PostgreSQL refuses PGC_POSTMASTER settings from a library loaded later */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomStringVariable("idem.database",
								   "Database in which the purge worker runs.",
								   NULL,
								   &idem_database, "postgres",
								   PGC_POSTMASTER, 0, NULL, NULL, NULL);
}

/* Seconds before the postmaster starts an exited launcher again */
#define IDEM_LAUNCHER_RESTART_SECS	5

/* What idem_purge_worker_batch() returns besides a row count */
#define IDEM_BATCH_NO_EXTENSION		(-1)
#define IDEM_BATCH_FAILED			(-2)

pg_noreturn PGDLLEXPORT void idem_purge_launcher_main(Datum main_arg);
pg_noreturn PGDLLEXPORT void idem_purge_worker_main(Datum main_arg);

/*
 * What passes remember across worker processes: whether "waiting for
 * extension" was already logged.  Starts at 0 with every server start.
 */
typedef struct IdemPurgeShared
{
	pg_atomic_uint32 missing_reported;
} IdemPurgeShared;

static IdemPurgeShared *purge_shared = NULL;

/* Launcher: the worker of the pass under way, ended if the launcher exits */
static BackgroundWorkerHandle *running_pass = NULL;

/* Worker: memory of the pass */
static MemoryContext pass_context = NULL;

/* Reserve the shared state; called from the request hook */
void
idem_purge_worker_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(IdemPurgeShared)));
}

/* Create or attach to the shared state; called from the startup hook */
void
idem_purge_worker_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	purge_shared = ShmemInitStruct("idem purge", sizeof(IdemPurgeShared), &found);
	if (!found)
		pg_atomic_init_u32(&purge_shared->missing_reported, 0);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Describe one of idem's background processes: both attach to shared memory
 * and initialise a database connection (the launcher's to no database),
 * once recovery has finished
 */
static void
purge_worker_describe(BackgroundWorker *worker, const char *function,
					  const char *name, int restart_secs, pid_t notify_pid)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = restart_secs;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "idem");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker->bgw_name, BGW_MAXLEN, "%s", name);
	snprintf(worker->bgw_type, BGW_MAXLEN, "%s", name);
	worker->bgw_main_arg = (Datum) 0;
	worker->bgw_notify_pid = notify_pid;
}

/* Register the launcher; only possible while the postmaster preloads us */
void
idem_purge_worker_register(void)
{
	BackgroundWorker worker;

	/*
	 * The launcher initialises a connection to no database, as core's
	 * logical replication launcher does: it then shows in pg_stat_activity
	 * and pg_terminate_backend reaches it, yet it holds no database.
	 */
	purge_worker_describe(&worker, "idem_purge_launcher_main", IDEM_LAUNCHER_NAME,
						  IDEM_LAUNCHER_RESTART_SECS, 0);

	RegisterBackgroundWorker(&worker);
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

/* ---- The worker: one pass in idem.database ---- */

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
idem_purge_worker_batch(int batch_size)
{
	int64		deleted = IDEM_BATCH_NO_EXTENSION;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, psprintf("idem_purge(%d)", batch_size));

	/* The catalog, not SQL: nothing a user creates can answer instead */
	if (OidIsValid(get_extension_oid("idem", true)))
		deleted = idem_purge_batch(batch_size);

	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);

	return deleted;
}

/*
 * Run one batch and survive its ERROR: report it, roll back, and end the
 * pass.  FATAL and worse still end the process.
 */
static int64
idem_purge_worker_batch_guarded(int batch_size)
{
	volatile int64 deleted = IDEM_BATCH_FAILED;
	ErrorContextCallback errcallback;

	errcallback.callback = idem_purge_error_context;
	errcallback.arg = NULL;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	PG_TRY();
	{
		deleted = idem_purge_worker_batch(batch_size);
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

/* Delete batches until none is left, one fails, or the interval says pause */
static void
idem_purge_worker_pass(void)
{
	MemoryContextSwitchTo(pass_context);

	for (;;)
	{
		int			batch_size = idem_purge_batch_size;
		int64		deleted = idem_purge_worker_batch_guarded(batch_size);

		if (deleted == IDEM_BATCH_NO_EXTENSION)
		{
			/* Expected until CREATE EXTENSION runs: say it once */
			bool		first = purge_shared == NULL ||
				pg_atomic_exchange_u32(&purge_shared->missing_reported, 1) == 0;

			ereport(first ? LOG : DEBUG1,
					(errmsg("idem purge worker is waiting for extension \"idem\" to be created in database \"%s\"",
							idem_database)));
			break;
		}
		if (purge_shared != NULL)
			pg_atomic_write_u32(&purge_shared->missing_reported, 0);

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

/* Entry point of the worker: one pass, then exit */
void
idem_purge_worker_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/*
	 * A database that does not exist is FATAL here: logged, and the launcher
	 * starts the next worker at the next interval.
	 */
	BackgroundWorkerInitializeConnection(idem_database, NULL, 0);

	/*
	 * Purging must neither fail nor make claims fail with serialization
	 * errors because a database defaults to SERIALIZABLE; each row's own
	 * check in idem_purge_batch() is what keeps live rows safe.
	 */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);

	pass_context = AllocSetContextCreate(TopMemoryContext,
										 "idem purge worker",
										 ALLOCSET_DEFAULT_SIZES);
	idem_purge_worker_pass();
	proc_exit(0);
}

/* ---- The launcher: no database, one worker per interval ---- */

/* On the launcher's exit, end the pass it started: passes do not overlap */
static void
idem_purge_launcher_exit(int code, Datum arg)
{
	if (running_pass != NULL)
		TerminateBackgroundWorker(running_pass);
}

/* Start a worker for one pass and wait until it has exited */
static void
idem_purge_launch_pass(const char *activity)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	BgwHandleStatus status;

	purge_worker_describe(&worker, "idem_purge_worker_main", IDEM_WORKER_NAME,
						  BGW_NEVER_RESTART, MyProcPid);

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("idem purge launcher found no free background worker slot to purge database \"%s\"",
						idem_database),
				 errdetail("The purge is tried again after idem.purge_interval."),
				 errhint("You might need to increase max_worker_processes.")));
		return;
	}

	SetCurrentStatementStartTimestamp();
	pgstat_report_activity(STATE_RUNNING, activity);

	/*
	 * However the worker ends (done, FATAL, terminated, never started), the
	 * pass is over; the worker logged what went wrong.  SIGTERM still ends
	 * the wait, and a reload waits for the end of the pass.
	 */
	running_pass = handle;
	status = WaitForBackgroundWorkerShutdown(handle);
	running_pass = NULL;
	pfree(handle);

	pgstat_report_activity(STATE_IDLE, NULL);
	if (status == BGWH_POSTMASTER_DIED)
		proc_exit(1);
}

/* Entry point of the launcher */
void
idem_purge_launcher_main(Datum main_arg)
{
	TimestampTz last_pass = 0;	/* end of the last pass; 0: none yet */
	char	   *activity;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* No database: only shared catalogs, and nothing DROP DATABASE waits for */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	before_shmem_exit(idem_purge_launcher_exit, (Datum) 0);

	activity = psprintf("idem purge pass in database \"%s\"", idem_database);
	ereport(LOG,
			(errmsg("idem purge launcher started for database \"%s\"", idem_database)));

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
			TimestampTz now = GetCurrentTimestamp();
			TimestampTz due = now;

			if (last_pass != 0)
				due = TimestampTzPlusMilliseconds(last_pass,
												  (int64) idem_purge_interval_secs * 1000);
			if (now >= due)
			{
				idem_purge_launch_pass(activity);
				last_pass = GetCurrentTimestamp();
				continue;
			}
			timeout = TimestampDifferenceMilliseconds(now, due);
			events |= WL_TIMEOUT;
		}

		(void) WaitLatch(MyLatch, events, timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
