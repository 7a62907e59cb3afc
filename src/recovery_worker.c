/*-------------------------------------------------------------------------
 *
 * recovery_worker.c
 *		The background worker that recovers, every
 *		async_fdw.recovery_interval, the remote transactions two-phase
 *		commit left prepared, when async_fdw is in shared_preload_libraries.
 *
 * A static launcher, connected to no database, reads the shared catalog
 * pg_database each round and, for each database that accepts connections
 * and is no template, starts a short-lived dynamic worker and waits for it
 * to exit before the next: one extra process at a time.  The worker
 * connects to its database as the bootstrap superuser, and, if async_fdw
 * 1.2 or later is installed there, recovers each async_fdw server in a
 * transaction of its own with a time limit, logs what it finished and
 * exits.  A server that cannot be reached, or
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
 * the worker calls the recovery of twophase_recovery.c (afdw_recovery_servers,
 * afdw_recover_prepared), the core of async_fdw_recover_prepared_transactions,
 * and counts its outcomes as they come, not its words; a database without
 * the extension's 1.2 objects (its table of records) is left alone.
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

/* What a worker finished, and what it could not, in its database. */
typedef struct RecoveryCounts
{
	int64		committed;
	int64		rolled_back;
	int64		not_finished;
} RecoveryCounts;

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
static void recover_server_in_worker(const char *server, RecoveryCounts *counts);
static void count_outcome(const AfdwRecoveryOutcome *outcome, void *arg);

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
	List	   *servers;
	ListCell   *lc;
	RecoveryCounts counts = {0, 0, 0};
	MemoryContext old;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* No user: the bootstrap superuser, who may read every record. */
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), InvalidOid, 0);

	/* Names resolve in pg_catalog only: we run as a superuser. */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "async_fdw recovery of prepared transactions");
	old = MemoryContextSwitchTo(TopMemoryContext);
	dbname = get_database_name(MyDatabaseId);
	servers = afdw_recovery_servers();
	MemoryContextSwitchTo(old);
	PopActiveSnapshot();
	CommitTransactionCommand();

	foreach(lc, servers)
		recover_server_in_worker((char *) lfirst(lc), &counts);
	pgstat_report_activity(STATE_IDLE, NULL);

	/*
	 * Only what changed, and what could not be finished: such a remote
	 * transaction holds its locks on the shard until a later round.
	 */
	if (counts.committed > 0 || counts.rolled_back > 0 || counts.not_finished > 0)
		ereport(LOG,
				(errmsg("recovery of the prepared remote transactions of database \"%s\": " INT64_FORMAT " committed, " INT64_FORMAT " rolled back, " INT64_FORMAT " not finished",
						dbname, counts.committed, counts.rolled_back,
						counts.not_finished),
				 counts.not_finished > 0 ?
				 errhint("Run async_fdw_recover_prepared_transactions() in that database to see why.") : 0));
	proc_exit(0);
}

/*
 * count_outcome
 *		AfdwRecoveryReport of the worker: count OUTCOME into the
 *		RecoveryCounts ARG.  Every action is named, so that a new one must
 *		be placed here.
 */
static void
count_outcome(const AfdwRecoveryOutcome *outcome, void *arg)
{
	RecoveryCounts *counts = (RecoveryCounts *) arg;

	switch (outcome->action)
	{
		case AFDW_RECOVERY_COMMITTED:
			counts->committed++;
			break;
		case AFDW_RECOVERY_ROLLED_BACK:
			counts->rolled_back++;
			break;
		case AFDW_RECOVERY_FAILED:
			counts->not_finished++;
			break;
		case AFDW_RECOVERY_LEFT:
		case AFDW_RECOVERY_WOULD_COMMIT:
		case AFDW_RECOVERY_WOULD_ROLL_BACK:
		case AFDW_RECOVERY_FINISHED_BY_SESSION:
		case AFDW_RECOVERY_LEFT_NO_MAPPING:
		case AFDW_RECOVERY_LEFT_FINISHING:
			break;
	}
}

/*
 * recover_server_in_worker
 *		Recover server SERVER, in a transaction of its own that may last
 *		Max(recovery_interval, AFDW_SERVER_MIN_TIMEOUT_MS); add to COUNTS
 *		what was committed, rolled back and not finished, once the
 *		transaction has committed.
 *
 * Why a time limit: a server that accepts connections and never answers
 * (and has no connect_timeout) would hold the worker, and with it every
 * later server and database, for good.  The limit is a statement timeout:
 * the recovery reports it as that server's failure.  Any other error (the
 * server dropped meanwhile) is logged and counts as not finished.
 */
static void
recover_server_in_worker(const char *server, RecoveryCounts *counts)
{
	MemoryContext cxt = CurrentMemoryContext;
	RecoveryCounts these = {0, 0, 0};

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING,
							   psprintf("async_fdw recovery of the prepared transactions of server \"%s\"",
										server));
		enable_timeout_after(STATEMENT_TIMEOUT,
							 Max(recovery_interval, AFDW_SERVER_MIN_TIMEOUT_MS));
		(void) afdw_recover_prepared(GetForeignServerByName(server, false)->serverid,
									 false, count_outcome, &these);
		disable_timeout(STATEMENT_TIMEOUT, false);
		PopActiveSnapshot();
		CommitTransactionCommand();
		counts->committed += these.committed;
		counts->rolled_back += these.rolled_back;
		counts->not_finished += these.not_finished;
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
		counts->not_finished++;
	}
	PG_END_TRY();
}
