/*-------------------------------------------------------------------------
 *
 * twophase_worker.c
 *		The background worker that recovers, every
 *		async_fdw.recovery_interval, the remote transactions two-phase
 *		commit left prepared, when async_fdw is in shared_preload_libraries.
 *
 * A static launcher, connected to no database, reads the shared catalog
 * pg_database each round and, for each database that accepts connections
 * and is no template, starts a short-lived dynamic worker and waits for it
 * to exit before the next: one extra process at a time.  The worker
 * connects to its database as the bootstrap superuser, and, if async_fdw
 * 1.2 or later is installed there, runs its recovery function once per
 * async_fdw server, each in a transaction of its own with a time limit,
 * logs what it finished and exits.  A server that cannot be reached, or
 * does not answer in time, is left to the next round; the other servers
 * and databases are recovered all the same.  The launcher restarts
 * after a crash; async_fdw.recovery_interval = 0 keeps it idle until a
 * reload sets another interval.
 *
 * Why a process per database: a backend connects to one database for its
 * life, and the records of two-phase commit are per database.  Why not
 * connect the launcher to a database: any may be dropped or renamed.
 * Templates are skipped: while a worker is connected to one, CREATE
 * DATABASE from it waits, then fails.
 *
 * Neighbours: async_fdw.c calls afdw_recovery_worker_init from _PG_init;
 * the worker calls the SQL function of twophase.c
 * (async_fdw_recover_prepared_transactions), and only through SQL, so that
 * a database without the extension's 1.2 objects is left alone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
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
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "async_fdw.h"

/* Seconds before the postmaster starts a launcher that failed again. */
#define AFDW_LAUNCHER_RESTART_S	10

/* How often the launcher looks whether its worker is done, at least. */
#define AFDW_WORKER_POLL_MS		1000

/* The least time a worker gives one server (see recover_server_in_worker). */
#define AFDW_SERVER_MIN_TIMEOUT_MS	10000

/* A database the launcher visits. */
typedef struct RecoveryDb
{
	Oid			oid;
	NameData	name;
} RecoveryDb;

/* async_fdw.recovery_interval, in milliseconds; 0: no recovery. */
static int	recovery_interval = 60000;

/* The launcher's lists of databases, emptied each round. */
static MemoryContext launcher_cxt = NULL;

/* Entry points the postmaster looks up by name: not static. */
PGDLLEXPORT void afdw_recovery_launcher_main(Datum arg);
PGDLLEXPORT void afdw_recovery_worker_main(Datum arg);

static void recovery_round(void);
static List *list_databases(void);
static bool recover_database(RecoveryDb *db);
static void fill_worker(BackgroundWorker *w, const char *function);
static void recover_server_in_worker(const char *schema, const char *server,
									 int64 *counts);

/*
 * afdw_recovery_worker_init
 *		Define async_fdw.recovery_interval and, when async_fdw is being
 *		preloaded, register the launcher.
 */
void
afdw_recovery_worker_init(void)
{
	BackgroundWorker w;

	DefineCustomIntVariable("async_fdw.recovery_interval",
							"Sets how often the background worker recovers the remote transactions two-phase commit left prepared.",
							"0 turns the worker off. Only with async_fdw in shared_preload_libraries.",
							&recovery_interval,
							60000,
							0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	if (!process_shared_preload_libraries_in_progress)
		return;
	fill_worker(&w, "afdw_recovery_launcher_main");
	w.bgw_restart_time = AFDW_LAUNCHER_RESTART_S;
	snprintf(w.bgw_name, BGW_MAXLEN, "async_fdw recovery launcher");
	snprintf(w.bgw_type, BGW_MAXLEN, "async_fdw recovery launcher");
	RegisterBackgroundWorker(&w);
}

/*
 * fill_worker
 *		The parts common to the launcher and the workers: async_fdw's
 *		FUNCTION, with a database connection, on a primary only (a standby
 *		cannot finish a prepared transaction's records).
 */
static void
fill_worker(BackgroundWorker *w, const char *function)
{
	memset(w, 0, sizeof(BackgroundWorker));
	w->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w->bgw_start_time = BgWorkerStart_RecoveryFinished;
	snprintf(w->bgw_library_name, BGW_MAXLEN, "async_fdw");
	snprintf(w->bgw_function_name, BGW_MAXLEN, "%s", function);
}

/*
 * afdw_recovery_launcher_main
 *		The launcher: a round over the databases every
 *		async_fdw.recovery_interval, counted from the end of the last one
 *		(a slow round does not run into the next); the first one interval
 *		after the start, so that a server start opens no remote connection
 *		(a round opens one to every server).
 */
void
afdw_recovery_launcher_main(Datum arg pg_attribute_unused())
{
	TimestampTz last_end = GetCurrentTimestamp();

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	launcher_cxt = AllocSetContextCreate(TopMemoryContext,
										 "async_fdw recovery launcher",
										 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		long		timeout = -1;
		int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;

		CHECK_FOR_INTERRUPTS();

		/*
		 * Exit code 1, so that the postmaster starts it again unless it is
		 * shutting down: to stop the recovery, set the interval to 0.
		 */
		if (ShutdownRequestPending)
			proc_exit(1);
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		if (recovery_interval > 0)
		{
			TimestampTz now = GetCurrentTimestamp();
			TimestampTz due = TimestampTzPlusMilliseconds(last_end, recovery_interval);

			if (now >= due)
			{
				recovery_round();
				last_end = GetCurrentTimestamp();
				continue;		/* a signal may have come meanwhile */
			}
			timeout = TimestampDifferenceMilliseconds(now, due);
			events |= WL_TIMEOUT;
		}

		(void) WaitLatch(MyLatch, events, timeout,
						 afdw_wait_event(AFDW_WAIT_RECOVERY));
		ResetLatch(MyLatch);
	}
}

/*
 * recovery_round
 *		Recover every database in turn; stop early at shutdown or when no
 *		worker can be started (the next round tries again).
 */
static void
recovery_round(void)
{
	List	   *dbs;
	ListCell   *lc;

	MemoryContextReset(launcher_cxt);
	dbs = list_databases();
	foreach(lc, dbs)
	{
		if (ShutdownRequestPending || !recover_database((RecoveryDb *) lfirst(lc)))
			break;
	}
}

/*
 * list_databases
 *		The databases to visit, read from pg_database (a shared catalog, so
 *		readable without a database), in launcher_cxt.
 */
static List *
list_databases(void)
{
	List	   *dbs = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database form = (Form_pg_database) GETSTRUCT(tup);
		RecoveryDb *db;
		MemoryContext old;

		if (!form->datallowconn || form->datistemplate)
			continue;
		old = MemoryContextSwitchTo(launcher_cxt);
		db = palloc(sizeof(RecoveryDb));
		db->oid = form->oid;
		namestrcpy(&db->name, NameStr(form->datname));
		dbs = lappend(dbs, db);
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return dbs;
}

/*
 * recover_database
 *		Start the worker of database DB and wait for it to exit; false if it
 *		could not start or the launcher is asked to stop.  Whether the
 *		worker succeeded does not matter here: it logs its own error.
 */
static bool
recover_database(RecoveryDb *db)
{
	BackgroundWorker w;
	BackgroundWorkerHandle *handle;

	fill_worker(&w, "afdw_recovery_worker_main");
	w.bgw_restart_time = BGW_NEVER_RESTART;
	w.bgw_main_arg = ObjectIdGetDatum(db->oid);
	w.bgw_notify_pid = MyProcPid;
	snprintf(w.bgw_name, BGW_MAXLEN, "async_fdw recovery worker for database \"%s\"",
			 NameStr(db->name));
	snprintf(w.bgw_type, BGW_MAXLEN, "async_fdw recovery worker");
	if (!RegisterDynamicBackgroundWorker(&w, &handle))
	{
		ereport(LOG,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start the async_fdw recovery worker for database \"%s\"",
						NameStr(db->name)),
				 errhint("Raise max_worker_processes.")));
		return false;
	}

	/* bgw_notify_pid: the postmaster sets our latch when it starts and ends. */
	for (;;)
	{
		pid_t		pid;

		if (GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED)
			break;
		if (ShutdownRequestPending)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 AFDW_WORKER_POLL_MS, afdw_wait_event(AFDW_WAIT_RECOVERY));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	pfree(handle);
	return true;
}

/*
 * afdw_recovery_worker_main
 *		A worker: recover the database whose OID is ARG, if async_fdw 1.2 or
 *		later is installed there, one server after the other, and log what
 *		was finished.
 */
void
afdw_recovery_worker_main(Datum arg)
{
	char	   *dbname;
	char	   *schema = NULL;
	List	   *servers = NIL;
	ListCell   *lc;
	int64		counts[3] = {0, 0, 0};
	int			rc;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* No user: the bootstrap superuser, who may read every record. */
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), InvalidOid, 0);

	/* Names resolve in pg_catalog only: we run as a superuser. */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "async_fdw recovery of prepared transactions");
	dbname = MemoryContextStrdup(TopMemoryContext, get_database_name(MyDatabaseId));

	/* The function of the extension itself (pg_depend), not a namesake. */
	rc = SPI_execute("SELECT pg_catalog.quote_ident(n.nspname)"
					 " FROM pg_catalog.pg_extension e"
					 " JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace"
					 " JOIN pg_catalog.pg_depend d"
					 "   ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass"
					 "  AND d.refobjid = e.oid AND d.deptype = 'e'"
					 "  AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass"
					 " JOIN pg_catalog.pg_proc p ON p.oid = d.objid"
					 " WHERE e.extname = 'async_fdw'"
					 "   AND p.proname = 'async_fdw_recover_prepared_transactions'"
					 "   AND p.pronamespace = e.extnamespace",
					 true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up extension async_fdw: %s",
			 SPI_result_code_string(rc));
	if (SPI_processed > 0)
	{
		schema = MemoryContextStrdup(TopMemoryContext,
									 SPI_getvalue(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1));

		/* async_fdw's servers, as the budget function (1.1) lists them. */
		rc = SPI_execute(psprintf("SELECT server_name FROM %s.async_fdw_connection_budget()"
								  " ORDER BY 1", schema), true, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "could not list the servers of async_fdw: %s",
				 SPI_result_code_string(rc));
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			servers = lappend(servers, SPI_getvalue(SPI_tuptable->vals[i],
													SPI_tuptable->tupdesc, 1));
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();

	foreach(lc, servers)
		recover_server_in_worker(schema, (char *) lfirst(lc), counts);
	pgstat_report_activity(STATE_IDLE, NULL);

	/*
	 * Only what changed, and what could not be finished: such a remote
	 * transaction holds its locks on the shard until a later round.
	 */
	if (counts[0] > 0 || counts[1] > 0 || counts[2] > 0)
		ereport(LOG,
				(errmsg("recovery of the prepared remote transactions of database \"%s\": " INT64_FORMAT " committed, " INT64_FORMAT " rolled back, " INT64_FORMAT " not finished",
						dbname, counts[0], counts[1], counts[2]),
				 counts[2] > 0 ?
				 errhint("Run async_fdw_recover_prepared_transactions() in that database to see why.") : 0));
	proc_exit(0);
}

/*
 * recover_server_in_worker
 *		Recover server SERVER through the function in schema SCHEMA, in a
 *		transaction of its own that may last Max(recovery_interval,
 *		AFDW_SERVER_MIN_TIMEOUT_MS); add to COUNTS what was committed, rolled
 *		back and not finished.
 *
 * Why a time limit: a server that accepts connections and never answers
 * (and has no connect_timeout) would hold the worker, and with it every
 * later server and database, for good.  The limit is a statement timeout:
 * the function reports it as that server's failure.  Any other error
 * (the server dropped meanwhile) is logged and counts as not finished.
 */
static void
recover_server_in_worker(const char *schema, const char *server, int64 *counts)
{
	MemoryContext cxt = CurrentMemoryContext;
	char	   *sql;

	sql = psprintf("SELECT count(*) FILTER (WHERE action = 'committed'),"
				   " count(*) FILTER (WHERE action = 'rolled back'),"
				   " count(*) FILTER (WHERE starts_with(action, 'failed'))"
				   " FROM %s.async_fdw_recover_prepared_transactions(false, %s)",
				   schema, quote_literal_cstr(server));
	PG_TRY();
	{
		int			rc;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, sql);
		enable_timeout_after(STATEMENT_TIMEOUT,
							 Max(recovery_interval, AFDW_SERVER_MIN_TIMEOUT_MS));
		rc = SPI_execute(sql, false, 0);
		disable_timeout(STATEMENT_TIMEOUT, false);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "could not run async_fdw_recover_prepared_transactions: %s",
				 SPI_result_code_string(rc));
		for (int i = 0; i < 3; i++)
		{
			bool		isnull;

			counts[i] += DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
													 SPI_tuptable->tupdesc, i + 1,
													 &isnull));
		}
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		disable_timeout(STATEMENT_TIMEOUT, false);
		EmitErrorReport();
		AbortCurrentTransaction();
		FlushErrorState();
		RESUME_INTERRUPTS();
		MemoryContextSwitchTo(cxt);
		counts[2]++;
	}
	PG_END_TRY();
	pfree(sql);
}
