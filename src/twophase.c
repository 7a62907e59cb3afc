/*-------------------------------------------------------------------------
 *
 * twophase.c
 *		Atomic commit across servers: two-phase commit of the remote
 *		transactions that wrote, and the recovery of those left in doubt.
 *
 * Under async_fdw.two_phase_commit (off, auto or on; auto by default; a
 * server's option two_phase_commit replaces it for that server, see
 * wants_two_phase), a local transaction that wrote through more than one
 * connection, or through one and to local tables too (auto), or through
 * any (on), prepares its remote transactions at pre-commit, if every
 * server written can (its max_prepared_transactions is not 0; under auto
 * one that cannot makes the whole transaction commit as postgres_fdw does,
 * under on it is an error): each written one gets a
 * global identifier naming this coordinator (its system identifier), the
 * database, the local transaction and the user mapping
 * (afdw_<system>_<database>_<xid>_<user mapping>), recorded in the table
 * async_fdw_prepared_xacts within the local transaction, and PREPARE
 * TRANSACTION goes to every written server at once (with a held write of
 * a single statement, in the same message).  A failed PREPARE fails the
 * local transaction, whose abort rolls back the prepared ones.  Once the
 * local transaction has committed, COMMIT PREPARED goes to every server
 * at once; a failure then is only logged: recovery finishes the work.
 * Remote transactions that only read are committed as before, without
 * the extra round trip.
 *
 * Recovery (async_fdw_recover_prepared_transactions) lists on every
 * async_fdw server the prepared transactions this database's coordinator
 * left, and decides by the record: one whose row exists committed locally
 * (COMMIT PREPARED), one whose local transaction is still in progress is
 * left, any other aborted (ROLLBACK PREPARED); the rows of a server's
 * transactions no longer prepared there are deleted, if they committed
 * before the listing (a later one may name a transaction prepared after it).
 *
 * Recovery decides with enums (AfdwLocalState, AfdwRecoveryAction) and
 * hands each outcome to a callback: the SQL function words it into a row
 * (local_state_word, action_word: the only place the words live), the
 * worker counts it.
 *
 * Neighbours: xact.c calls afdw_twophase_prepare at the start of its
 * pre-commit and the end functions from its transaction callback;
 * twophase_worker.c calls afdw_recovery_servers and afdw_recover_prepared;
 * option.c says which servers are ours (afdw_server_is_ours);
 * pool.c lends the connections; remote.c sends and waits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "catalog/pg_user_mapping.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "async_fdw.h"
#include "connection_internal.h"

/* How long the end of the prepared transactions may wait for servers. */
#define AFDW_FINISH_TIMEOUT_MS	30000

/* async_fdw.two_phase_commit (AfdwTwoPhase, async_fdw.h). */
static const struct config_enum_entry two_phase_options[] = {
	{"off", AFDW_2PC_OFF, false},
	{"auto", AFDW_2PC_AUTO, false},
	{"on", AFDW_2PC_ON, false},
	{NULL, 0, false}
};

static int	two_phase_commit = AFDW_2PC_AUTO;

/*
 * async_fdw.debug_two_phase_pause: a developer setting, for tests that
 * crash a server at a given moment of a two-phase commit: where the
 * backend pauses for AFDW_DEBUG_PAUSE_MS (see debug_pause_at).  Off outside
 * such tests.
 */
typedef enum AfdwDebugPause
{
	AFDW_PAUSE_OFF,
	AFDW_PAUSE_AFTER_PREPARE,	/* remote PREPAREs done, local commit not */
	AFDW_PAUSE_BEFORE_COMMIT_PREPARED,	/* local commit done, COMMIT
										 * PREPAREDs not sent */
	AFDW_PAUSE_RECOVERY_AFTER_LISTING	/* recovery listed the first
										 * server's prepared transactions */
} AfdwDebugPause;

#define AFDW_DEBUG_PAUSE_MS		30000

static const struct config_enum_entry debug_pause_options[] = {
	{"off", AFDW_PAUSE_OFF, false},
	{"after_prepare", AFDW_PAUSE_AFTER_PREPARE, false},
	{"before_commit_prepared", AFDW_PAUSE_BEFORE_COMMIT_PREPARED, false},
	{"recovery_after_listing", AFDW_PAUSE_RECOVERY_AFTER_LISTING, false},
	{NULL, 0, false}
};

static int	debug_pause = AFDW_PAUSE_OFF;

/* Where the records live: the extension's table and its owner. */
typedef struct RecordTable
{
	char	   *name;			/* schema-qualified, quoted */
	Oid			owner;
	Oid			relid;
} RecordTable;

/*
 * The table as the last two-phase commit of this backend found it (name in
 * TopMemoryContext; relid InvalidOid: not known), forgotten when the
 * relation changes; and the identifiers of the remote transactions this
 * backend committed since, whose records its next two-phase commit
 * deletes, so that the table does not grow between recoveries.
 */
static RecordTable cached_table = {NULL, InvalidOid, InvalidOid};
static List *finished_gids = NIL;

/*
 * Whether this transaction sent PREPAREs: the end of every other
 * transaction returns at once, without looking at the connections.
 */
static bool prepares_sent = false;

/*
 * The servers auto committed without two-phase commit because they cannot
 * prepare, already logged once by this backend (in TopMemoryContext).
 */
static List *logged_servers = NIL;

PG_FUNCTION_INFO_V1(async_fdw_recover_prepared_transactions);

static bool record_table(RecordTable *tbl, bool missing_ok);
static void forget_table(Datum arg, Oid relid);
static void record_prepared(List *gids, List *entries);
static bool wants_two_phase(List *writers);
static void learn_can_prepare(List *writers);
static afdw_noreturn void refuse_two_phase(AfdwConn *entry, const char *detail);
static afdw_noreturn void report_prepare_error(PGresult *res, AfdwConn *entry,
								 const char *sql);
static void recover_server_caught(Oid serverid, const char *servername,
								  RecordTable *tbl, bool dry_run, bool first,
								  AfdwRecoveryReport report, void *arg);

/*
 * afdw_twophase_init
 *		Define async_fdw.two_phase_commit.
 */
void
afdw_twophase_init(void)
{
	DefineCustomEnumVariable("async_fdw.two_phase_commit",
							 "When remote transactions are committed with two-phase commit.",
							 "auto: when a transaction wrote to more than one remote server, or to one and to local tables, and every server written can prepare (else as postgres_fdw commits); on: whenever it wrote to a remote server, an error if one cannot prepare; off: never. The server option two_phase_commit overrides it for a server.",
							 &two_phase_commit,
							 AFDW_2PC_AUTO,
							 two_phase_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("async_fdw.debug_two_phase_pause",
							 "Developer setting: pauses up to 30 s at a step of two-phase commit or of its recovery, for crash tests; a reload, cancel or termination ends the pause.",
							 NULL,
							 &debug_pause,
							 AFDW_PAUSE_OFF,
							 debug_pause_options,
							 PGC_SUSET,
							 GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
}

/*
 * debug_pause_at
 *		Pause up to AFDW_DEBUG_PAUSE_MS if async_fdw.debug_two_phase_pause
 *		says so at step AT: a crash test kills a server meanwhile.  A reload
 *		(SIGHUP) ends the pause, which is how tests go on at once.
 *
 * The pause serves interrupts as any wait does: where an error may be
 * raised (CAN_ERROR: before the local commit, and in recovery), a cancel
 * or a termination ends it with its error.  After the local commit, where
 * no error may be raised and interrupts are held off, either only ends the
 * pause, and is served once the commit is over.  Postmaster death ends the
 * backend.
 */
static void
debug_pause_at(AfdwDebugPause at, bool can_error)
{
	TimestampTz end;

	if (debug_pause != (int) at)
		return;
	for (const struct config_enum_entry *opt = debug_pause_options; opt->name; opt++)
	{
		if (opt->val == (int) at)
			elog(LOG, "async_fdw: pausing two-phase commit (%s)", opt->name);
	}
	end = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), AFDW_DEBUG_PAUSE_MS);
	for (;;)
	{
		long		left;

		if (can_error)
			CHECK_FOR_INTERRUPTS();
		else if (ProcDiePending || QueryCancelPending)
			break;
		if (ConfigReloadPending)
			break;				/* left set: the backend reloads as usual */
		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), end);
		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * prefix_of
 *		The start of the global identifiers of this coordinator's database:
 *		afdw_<system identifier>_<database>_.
 */
static char *
prefix_of(void)
{
	return psprintf("afdw_" UINT64_FORMAT "_%u_", GetSystemIdentifier(),
					MyDatabaseId);
}

/*
 * afdw_twophase_prepare
 *		At pre-commit: if the transaction needs two-phase commit, record and
 *		prepare every remote transaction that wrote, all at once; a failure
 *		is raised (the local transaction then aborts, and with it the
 *		prepared ones: afdw_twophase_end).
 */
void
afdw_twophase_prepare(void)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	List	   *writers = NIL;
	List	   *gids = NIL;
	List	   *sqls = NIL;
	ListCell   *lc;
	ListCell   *lc2;
	char	   *prefix;
	FullTransactionId fxid;

	if (afdw_conn_hash == NULL)
		return;
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn != NULL && entry->xact_depth > 0 &&
			entry->role == AFDW_ROLE_WROTE)
			writers = lappend(writers, entry);
	}
	if (writers == NIL || !wants_two_phase(writers))
	{
		list_free(writers);
		return;
	}

	/* The records first: they commit or vanish with the local transaction. */
	fxid = GetTopFullTransactionId();
	prefix = prefix_of();
	foreach(lc, writers)
	{
		entry = (AfdwConn *) lfirst(lc);
		gids = lappend(gids, psprintf("%s" UINT64_FORMAT "_%u", prefix,
									  U64FromFullTransactionId(fxid),
									  entry->key.umid));
	}
	record_prepared(gids, writers);

	/*
	 * The local transaction's id must outlive a crash before any server
	 * holds a transaction named after it.  Its records are not flushed
	 * before its commit otherwise: a crash after the PREPAREs would lose the
	 * id, restart would hand it to a new transaction, recovery would see
	 * the prepared ones as in progress (left, not rolled back), and a new
	 * transaction with that id writing to the same server would collide
	 * with their identifiers.  Flushed, the id is never given again.
	 */
	XLogFlush(XactLastRecEnd);

	/* Then every PREPARE at once, a held write ahead of its own. */
	forboth(lc, writers, lc2, gids)
	{
		StringInfoData sql;

		entry = (AfdwConn *) lfirst(lc);
		afdw_make_idle(entry);
		initStringInfo(&sql);
		if (entry->deferred != NULL)
		{
			appendStringInfo(&sql, "%s; ", entry->deferred);
			pfree(entry->deferred);
			entry->deferred = NULL;
		}
		if (entry->savepoint_op != NULL &&
			strncmp(entry->savepoint_op, "RELEASE", 7) != 0)
			appendStringInfo(&sql, "%s; ", entry->savepoint_op);
		appendStringInfo(&sql, "PREPARE TRANSACTION %s",
						 quote_literal_cstr((char *) lfirst(lc2)));
		/* From now on its abort is a ROLLBACK PREPARED, whatever comes. */
		entry->prepared_gid = MemoryContextStrdup(afdw_conn_cxt, (char *) lfirst(lc2));
		prepares_sent = true;
		afdw_xact_changing(entry);
		afdw_send_query(entry, sql.data, 0, NULL);
		sqls = lappend(sqls, sql.data);
	}
	forboth(lc, writers, lc2, sqls)
	{
		PGresult   *res;

		entry = (AfdwConn *) lfirst(lc);
		res = afdw_wait_result(entry, (char *) lfirst(lc2));
		if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
			report_prepare_error(res, entry, (char *) lfirst(lc2));
		PQclear(res);
		entry->can_prepare = 1;
		/* The remote session is outside any transaction now. */
		afdw_xact_changed(entry);
		afdw_reset_xact_state(entry, 1);
	}
	debug_pause_at(AFDW_PAUSE_AFTER_PREPARE, true);
}

/*
 * report_prepare_error
 *		Raise the failure of SQL, the PREPARE on ENTRY; a server that cannot
 *		prepare at all gets an error that says how to make it.
 */
static void
report_prepare_error(PGresult *res, AfdwConn *entry, const char *sql)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

	if (state != NULL && strcmp(state, "55000") == 0 && msg != NULL &&
		strstr(msg, "prepared transactions are disabled") != NULL)
	{
		PQclear(res);
		entry->can_prepare = 0;
		refuse_two_phase(entry, NULL);
	}
	afdw_report_remote_error(res, entry, sql);
}

/*
 * refuse_two_phase
 *		Raise that ENTRY's server, which cannot prepare, was to take part in
 *		a two-phase commit that on requires; DETAIL, if not NULL, says why
 *		instead of the default.
 */
static void
refuse_two_phase(AfdwConn *entry, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("server \"%s\" cannot take part in a two-phase commit",
					NameStr(entry->servername)),
			 detail ? errdetail_internal("%s", detail) :
			 errdetail("Its max_prepared_transactions is 0, and two_phase_commit is on for this transaction."),
			 errhint("Set max_prepared_transactions on the remote server, or set async_fdw.two_phase_commit (or the server option two_phase_commit) to auto or off to commit without it.")));
}

/*
 * mode_of
 *		The two-phase commit mode of ENTRY's server: its option
 *		two_phase_commit if set, else the session's setting.
 */
static int
mode_of(AfdwConn *entry)
{
	return entry->two_phase >= 0 ? entry->two_phase : two_phase_commit;
}

/*
 * wants_two_phase
 *		Whether the remote transactions of WRITERS, the connections that
 *		wrote, are to be prepared: the rule README's "Two-phase commit"
 *		states.  Each server's mode is mode_of's.  One server on: all of
 *		them, and every one must be able to prepare (else an error), and
 *		none may be off.  Else one server off: none.  Else (all auto): all
 *		of them if more than one server wrote, or one and local tables, and
 *		every one can prepare; if one cannot, none (the commit is then
 *		postgres_fdw's: each remote transaction, then the local one), and
 *		the first time for a server, a LOG line says so.
 */
static bool
wants_two_phase(List *writers)
{
	ListCell   *lc;
	AfdwConn   *on = NULL;
	AfdwConn   *off = NULL;
	AfdwConn   *unable = NULL;

	foreach(lc, writers)
	{
		AfdwConn   *entry = (AfdwConn *) lfirst(lc);
		int			mode = mode_of(entry);

		if (mode == AFDW_2PC_ON && on == NULL)
			on = entry;
		else if (mode == AFDW_2PC_OFF && off == NULL)
			off = entry;
	}
	if (on != NULL)
	{
		if (off != NULL)
			refuse_two_phase(off,
							 psprintf(_("Its two_phase_commit is off, and that of server \"%s\", also written by this transaction, is on."),
									  NameStr(on->servername)));
		/* Known to be unable; unknown ones fail at PREPARE, as clearly. */
		foreach(lc, writers)
		{
			AfdwConn   *entry = (AfdwConn *) lfirst(lc);

			if (entry->can_prepare == 0)
				refuse_two_phase(entry, NULL);
		}
		return true;
	}
	if (off != NULL)
		return false;

	/* All auto: is atomicity at stake? */
	if (list_length(writers) < 2 &&
		!TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return false;
	learn_can_prepare(writers);
	foreach(lc, writers)
	{
		AfdwConn   *entry = (AfdwConn *) lfirst(lc);
		MemoryContext old;

		if (entry->can_prepare != 0)
			continue;
		if (unable == NULL)
			unable = entry;
		if (list_member_oid(logged_servers, entry->serverid))
			continue;
		old = MemoryContextSwitchTo(TopMemoryContext);
		logged_servers = lappend_oid(logged_servers, entry->serverid);
		MemoryContextSwitchTo(old);
		ereport(LOG,
				(errmsg("server \"%s\" cannot take part in a two-phase commit: transactions that write to it commit without one",
						NameStr(entry->servername)),
				 errdetail("Its max_prepared_transactions is 0. Under two_phase_commit auto, such a transaction commits each remote transaction and then the local one, as postgres_fdw does."),
				 errhint("Set max_prepared_transactions on the remote server for atomic commits, or set two_phase_commit to on to refuse commits without it.")));
	}
	return unable == NULL;
}

/*
 * learn_can_prepare
 *		Find out whether the servers of WRITERS whose sessions do not know
 *		yet can prepare, asking all of them at once: one round trip, once
 *		per session.  A server that does not answer stays unknown (treated
 *		as able: its PREPARE then says).
 *
 * The question goes ahead of a held write (which stays for the PREPARE or
 * the COMMIT) and after the end of a failed scan's savepoint (which the
 * question then ends, so that it runs in a usable transaction).
 */
static void
learn_can_prepare(List *writers)
{
	ListCell   *lc;
	List	   *asked = NIL;

	foreach(lc, writers)
	{
		AfdwConn   *entry = (AfdwConn *) lfirst(lc);
		char	   *held;
		StringInfoData sql;

		if (entry->can_prepare >= 0)
			continue;
		afdw_make_idle(entry);
		initStringInfo(&sql);
		if (entry->savepoint_op != NULL &&
			strncmp(entry->savepoint_op, "RELEASE", 7) != 0)
		{
			appendStringInfo(&sql, "%s; ", entry->savepoint_op);
			pfree(entry->savepoint_op);
			entry->savepoint_op = NULL;
		}
		appendStringInfoString(&sql, "SELECT pg_catalog.current_setting('max_prepared_transactions')");
		held = entry->deferred;
		entry->deferred = NULL;
		afdw_send_query(entry, sql.data, 0, NULL);
		entry->deferred = held;
		asked = lappend(asked, entry);
		pfree(sql.data);
	}
	foreach(lc, asked)
	{
		AfdwConn   *entry = (AfdwConn *) lfirst(lc);
		PGresult   *res = afdw_wait_result(entry, "SELECT pg_catalog.current_setting('max_prepared_transactions')");

		if (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK &&
			PQntuples(res) == 1 && PQnfields(res) == 1)
			entry->can_prepare = (atoi(PQgetvalue(res, 0, 0)) > 0) ? 1 : 0;
		PQclear(res);
	}
	list_free(asked);
}

/*
 * afdw_twophase_end
 *		After the local transaction: COMMIT PREPARED (COMMITTED) or ROLLBACK
 *		PREPARED on every connection that prepared, all at once.  Never
 *		raises an error: what cannot be finished is logged, and left to
 *		recovery.
 */
void
afdw_twophase_end(bool committed)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	TimestampTz deadline;
	const char *verb = committed ? "COMMIT PREPARED" : "ROLLBACK PREPARED";

	if (!prepares_sent)
		return;
	prepares_sent = false;
	if (committed)
		debug_pause_at(AFDW_PAUSE_BEFORE_COMMIT_PREPARED, false);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   AFDW_FINISH_TIMEOUT_MS);

	/* What a PREPARE cut short still returns is read first. */
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		char	   *sql;

		if (entry->prepared_gid == NULL)
			continue;
		afdw_xact_changing(entry);
		if (entry->conn == NULL || PQstatus(entry->conn) != CONNECTION_OK ||
			(afdw_is_busy(entry) &&
			 !afdw_wait_cleanup(entry, deadline, true, NULL)))
			continue;
		sql = psprintf("%s %s", verb, quote_literal_cstr(entry->prepared_gid));
		(void) afdw_send_cleanup(entry, sql);
		pfree(sql);
	}

	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		bool		ok;
		char		state[6] = "";

		if (entry->prepared_gid == NULL)
			continue;
		/* Rolled back: a PREPARE that failed left nothing to roll back. */
		ok = afdw_is_busy(entry) &&
			afdw_wait_cleanup(entry, deadline, !committed, state);

		/*
		 * Committed, and the server no longer has it: a recovery, which
		 * saw the local commit, finished it first.
		 */
		if (!ok && committed && strcmp(state, "42704") == 0)
			ok = true;
		if (ok)
		{
			/* Every result was read: nothing is in flight any more. */
			afdw_xact_changed(entry);
			if (committed)
			{
				/* Kept past this transaction: in TopMemoryContext. */
				MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

				finished_gids = lappend(finished_gids, pstrdup(entry->prepared_gid));
				MemoryContextSwitchTo(old);
			}
		}
		else if (committed)
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not commit prepared transaction \"%s\" on server \"%s\"",
							entry->prepared_gid, NameStr(entry->servername)),
					 errdetail("The local transaction committed; the remote transaction stays prepared until recovery commits it."),
					 errhint("Run async_fdw_recover_prepared_transactions(), or preload async_fdw so that its worker does.")));
		pfree(entry->prepared_gid);
		entry->prepared_gid = NULL;
	}
}

/*
 * record_table
 *		Find the table of records (async_fdw 1.2 and later) and its owner;
 *		false if there is none and MISSING_OK.  Within SPI.
 */
static bool
record_table(RecordTable *tbl, bool missing_ok)
{
	int			rc;
	bool		isnull;

	rc = SPI_execute("SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname), c.relowner, c.oid"
					 " FROM pg_catalog.pg_extension e"
					 " JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace"
					 " JOIN pg_catalog.pg_class c ON c.relnamespace = e.extnamespace"
					 " WHERE e.extname = 'async_fdw' AND c.relname = 'async_fdw_prepared_xacts'",
					 true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not look up async_fdw_prepared_xacts: %s",
			 SPI_result_code_string(rc));
	if (SPI_processed == 0)
	{
		if (missing_ok)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("two-phase commit needs version 1.2 of extension \"async_fdw\""),
				 errhint("Run ALTER EXTENSION async_fdw UPDATE, or set async_fdw.two_phase_commit to off.")));
	}
	tbl->name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	tbl->owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 2, &isnull));
	tbl->relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 3, &isnull));
	return true;
}

/*
 * forget_table
 *		Relcache invalidation: the cached record table (see cached_table) is
 *		forgotten when it, or every relation, changes.
 */
static void
forget_table(Datum arg pg_attribute_unused(), Oid relid)
{
	if (relid == InvalidOid || relid == cached_table.relid)
		cached_table.relid = InvalidOid;
}

/*
 * record_prepared
 *		Insert a row for each identifier of GIDS (of the connections
 *		ENTRIES) into the records, in the local transaction, as the table's
 *		owner: nobody else may write it.
 */
static void
record_prepared(List *gids, List *entries)
{
	static bool callback_registered = false;
	StringInfoData sql;
	Oid			save_userid;
	int			save_sec;
	ListCell   *lc;
	ListCell   *lc2;
	int			rc;

	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (!OidIsValid(cached_table.relid))
	{
		RecordTable tbl;

		record_table(&tbl, false);
		if (cached_table.name != NULL)
			pfree(cached_table.name);
		cached_table.name = MemoryContextStrdup(TopMemoryContext, tbl.name);
		cached_table.owner = tbl.owner;
		cached_table.relid = tbl.relid;
		if (!callback_registered)
		{
			CacheRegisterRelcacheCallback(forget_table, (Datum) 0);
			callback_registered = true;
		}
	}

	/* The records of this backend's finished ones go in the same statement. */
	initStringInfo(&sql);
	if (finished_gids != NIL)
	{
		appendStringInfo(&sql, "WITH done AS (DELETE FROM %s WHERE gid IN (",
						 cached_table.name);
		foreach(lc, finished_gids)
			appendStringInfo(&sql, "%s%s", lc == list_head(finished_gids) ? "" : ", ",
							 quote_literal_cstr((char *) lfirst(lc)));
		appendStringInfoString(&sql, ")) ");
		list_free_deep(finished_gids);
		finished_gids = NIL;
	}
	appendStringInfo(&sql, "INSERT INTO %s (gid, server_id, user_mapping_id) VALUES ",
					 cached_table.name);
	forboth(lc, gids, lc2, entries)
	{
		AfdwConn   *entry = (AfdwConn *) lfirst(lc2);

		appendStringInfo(&sql, "%s(%s, %u, %u)", lc == list_head(gids) ? "" : ", ",
						 quote_literal_cstr((char *) lfirst(lc)),
						 entry->serverid, entry->key.umid);
	}
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(cached_table.owner, save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	rc = SPI_execute(sql.data, false, 0);
	SetUserIdAndSecContext(save_userid, save_sec);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "could not record prepared transactions: %s",
			 SPI_result_code_string(rc));
	PopActiveSnapshot();
	SPI_finish();
}

/*
 * mapping_of
 *		The user mapping whose OID is UMID, as GetUserMapping gives it.
 */
static UserMapping *
mapping_of(Oid umid)
{
	HeapTuple	tp = SearchSysCache1(USERMAPPINGOID, ObjectIdGetDatum(umid));
	Form_pg_user_mapping um;
	UserMapping *user;

	if (!HeapTupleIsValid(tp))
		return NULL;
	um = (Form_pg_user_mapping) GETSTRUCT(tp);
	user = GetUserMapping(um->umuser, um->umserver);
	ReleaseSysCache(tp);
	return user;
}

/*
 * server_of_mapping
 *		The server of user mapping UMID; InvalidOid if it is gone.
 */
static Oid
server_of_mapping(Oid umid)
{
	HeapTuple	tp = SearchSysCache1(USERMAPPINGOID, ObjectIdGetDatum(umid));
	Oid			serverid;

	if (!HeapTupleIsValid(tp))
		return InvalidOid;
	serverid = ((Form_pg_user_mapping) GETSTRUCT(tp))->umserver;
	ReleaseSysCache(tp);
	return serverid;
}

/*
 * run_finishing
 *		Run SQL (COMMIT or ROLLBACK PREPARED) on CONN; NULL on success, else
 *		the error's message, its SQLSTATE in *SQLERRCODE.  A failure is
 *		caught: recovery goes on.
 */
static char *
run_finishing(AfdwConn *conn, const char *sql, int *sqlerrcode)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char	   *volatile failure = NULL;

	*sqlerrcode = 0;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		afdw_run_command(conn, sql);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		failure = edata->message;
		*sqlerrcode = edata->sqlerrcode;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return failure;
}

/*
 * finish_prepared
 *		COMMIT PREPARED (COMMIT) or ROLLBACK PREPARED the remote transaction
 *		GID of user mapping UMID; what came of it, the reason of a failure in
 *		*FAILURE.
 */
static AfdwRecoveryAction
finish_prepared(const char *gid, Oid umid, bool commit, const char **failure)
{
	UserMapping *user = mapping_of(umid);
	AfdwConn   *conn;
	int			sqlerrcode = 0;
	char	   *cmd;

	if (user == NULL)
		return AFDW_RECOVERY_LEFT_NO_MAPPING;
	cmd = psprintf("%s %s", commit ? "COMMIT PREPARED" : "ROLLBACK PREPARED",
				   quote_literal_cstr(gid));
	conn = afdw_connection_ready(afdw_acquire_connection(user));
	*failure = (conn->xact_depth > 0) ?
		"its connection is in a transaction" :
		run_finishing(conn, cmd, &sqlerrcode);
	afdw_release_connection(conn);
	pfree(cmd);

	/*
	 * Gone or busy: its own session finished it after the listing, or is
	 * finishing it now; that is no failure.
	 */
	if (*failure == NULL)
		return commit ? AFDW_RECOVERY_COMMITTED : AFDW_RECOVERY_ROLLED_BACK;
	if (sqlerrcode == ERRCODE_UNDEFINED_OBJECT)
		return AFDW_RECOVERY_FINISHED_BY_SESSION;
	if (sqlerrcode == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
		return AFDW_RECOVERY_LEFT_FINISHING;
	return AFDW_RECOVERY_FAILED;
}

/*
 * action_finished
 *		Whether after ACTION the remote transaction is no longer prepared,
 *		so that its record may go.
 */
static bool
action_finished(AfdwRecoveryAction action)
{
	switch (action)
	{
		case AFDW_RECOVERY_COMMITTED:
		case AFDW_RECOVERY_ROLLED_BACK:
		case AFDW_RECOVERY_FINISHED_BY_SESSION:
			return true;
		case AFDW_RECOVERY_LEFT:
		case AFDW_RECOVERY_WOULD_COMMIT:
		case AFDW_RECOVERY_WOULD_ROLL_BACK:
		case AFDW_RECOVERY_LEFT_NO_MAPPING:
		case AFDW_RECOVERY_LEFT_FINISHING:
		case AFDW_RECOVERY_FAILED:
			return false;
	}
	return false;
}

/*
 * recover_server
 *		Recover the prepared transactions this database left on server
 *		SERVERID (SERVERNAME), reading the records of table TBL; REPORT gets
 *		one outcome per remote transaction.  FIRST: the first server of the
 *		call (the only one the debug pause stops at).
 */
static void
recover_server(Oid serverid, const char *servername, RecordTable *tbl,
			   bool dry_run, bool first, AfdwRecoveryReport report, void *arg)
{
	char	   *prefix = prefix_of();
	List	   *mappings = NIL;
	List	   *remaining = NIL;
	AfdwConn   *conn = NULL;
	UserMapping *user;
	PGresult   *res;
	StringInfoData sql;
	SPIPlanPtr	plan;
	Oid			argtypes[1] = {TEXTOID};
	Snapshot	before_listing;
	int			rc;

	/* Any mapping of the server can list them; the records name theirs. */
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT oid FROM pg_catalog.pg_user_mapping WHERE umserver = %u"
					 " ORDER BY umuser = %u DESC, umuser = 0 DESC, oid", serverid, GetUserId());
	rc = SPI_execute(sql.data, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not list user mappings: %s", SPI_result_code_string(rc));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		mappings = lappend_oid(mappings,
							   DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															  SPI_tuptable->tupdesc, 1, &isnull)));
	}
	if (mappings == NIL)
		return;

	/*
	 * The prepared transactions of this coordinator's database.  The
	 * mapping may have been dropped since the listing (whose snapshot is
	 * older than the catalog's): then there is nothing to list either.
	 */
	user = mapping_of(linitial_oid(mappings));
	if (user == NULL)
		return;
	conn = afdw_connection_ready(afdw_acquire_connection(user));
	if (conn->xact_depth > 0)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot recover prepared transactions in a transaction that used server \"%s\"",
						servername),
				 errhint("Call async_fdw_recover_prepared_transactions() in a transaction of its own.")));
	resetStringInfo(&sql);
	appendStringInfo(&sql, "SELECT gid FROM pg_catalog.pg_prepared_xacts"
					 " WHERE pg_catalog.starts_with(gid, %s) AND database = pg_catalog.current_database()",
					 quote_literal_cstr(prefix));
	/*
	 * A record that this snapshot sees belongs to a transaction that
	 * committed locally, so prepared everywhere, before the listing: if the
	 * listing lacks its identifier, it was finished, and the record may go.
	 * A record committed after it may name a transaction prepared after the
	 * listing, still to be committed: it stays.
	 */
	before_listing = RegisterSnapshot(GetLatestSnapshot());
	res = afdw_run_query(conn, sql.data, 0, NULL);
	afdw_release_connection(conn);
	if (first)
		debug_pause_at(AFDW_PAUSE_RECOVERY_AFTER_LISTING, true);

	plan = SPI_prepare(psprintf("SELECT 1 FROM %s WHERE gid = $1", tbl->name), 1, argtypes);
	if (plan == NULL)
		elog(ERROR, "could not prepare the record lookup: %s",
			 SPI_result_code_string(SPI_result));

	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *gid = PQgetvalue(res, i, 0);
		uint64		xid64;
		Oid			umid;
		TransactionId xid;
		AfdwRecoveryOutcome out = {servername, gid, AFDW_LOCAL_ABORTED,
		AFDW_RECOVERY_LEFT, NULL};
		Datum		gidarg[1];

		if (sscanf(gid + strlen(prefix), UINT64_FORMAT "_%u", &xid64, &umid) != 2)
			continue;			/* not of the form async_fdw gives */
		/* Another server object may reach the same remote database. */
		if (server_of_mapping(umid) != serverid &&
			OidIsValid(server_of_mapping(umid)))
			continue;
		xid = XidFromFullTransactionId(FullTransactionIdFromU64(xid64));

		/*
		 * In progress first, then the record with a snapshot taken after:
		 * a transaction that ended in between is seen as it ended.
		 */
		/*
		 * At or past the next identifier: assigned before a crash that lost
		 * it (nothing made it durable, so it did not commit).  The procarray
		 * would call it in progress until a later identifier completes.
		 */
		if (FullTransactionIdFollowsOrEquals(FullTransactionIdFromU64(xid64),
											 ReadNextFullTransactionId()))
			out.state = AFDW_LOCAL_ABORTED;
		else if (TransactionIdIsInProgress(xid))
			out.state = AFDW_LOCAL_IN_PROGRESS;
		else
		{
			gidarg[0] = CStringGetTextDatum(gid);
			rc = SPI_execute_snapshot(plan, gidarg, NULL, GetLatestSnapshot(),
									  InvalidSnapshot, true, false, 1);
			if (rc != SPI_OK_SELECT)
				elog(ERROR, "could not look up a record: %s",
					 SPI_result_code_string(rc));
			out.state = (SPI_processed > 0) ? AFDW_LOCAL_COMMITTED : AFDW_LOCAL_ABORTED;
		}

		if (out.state == AFDW_LOCAL_IN_PROGRESS)
			out.action = AFDW_RECOVERY_LEFT;
		else if (dry_run)
			out.action = (out.state == AFDW_LOCAL_COMMITTED) ?
				AFDW_RECOVERY_WOULD_COMMIT : AFDW_RECOVERY_WOULD_ROLL_BACK;
		else
			out.action = finish_prepared(gid, umid, out.state == AFDW_LOCAL_COMMITTED,
										 &out.failure);
		if (!action_finished(out.action))
			remaining = lappend(remaining, pstrdup(gid));
		report(&out, arg);
	}
	PQclear(res);

	/* The records of transactions no longer prepared there are done. */
	if (!dry_run)
	{
		ListCell   *lc;

		resetStringInfo(&sql);
		appendStringInfo(&sql, "DELETE FROM %s WHERE server_id = %u", tbl->name, serverid);
		foreach(lc, remaining)
			appendStringInfo(&sql, "%s%s", lc == list_head(remaining) ?
							 " AND gid NOT IN (" : ", ",
							 quote_literal_cstr((char *) lfirst(lc)));
		if (remaining != NIL)
			appendStringInfoChar(&sql, ')');
		plan = SPI_prepare(sql.data, 0, NULL);
		if (plan == NULL)
			elog(ERROR, "could not prepare the deletion of records: %s",
				 SPI_result_code_string(SPI_result));
		rc = SPI_execute_snapshot(plan, NULL, NULL, before_listing,
								  InvalidSnapshot, false, false, 0);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "could not delete records: %s", SPI_result_code_string(rc));
	}
	UnregisterSnapshot(before_listing);
}

/*
 * recover_server_caught
 *		recover_server, with its failure (a server that cannot be reached)
 *		reported as a row instead of ending the recovery of the others.
 */
static void
recover_server_caught(Oid serverid, const char *servername, RecordTable *tbl,
					  bool dry_run, bool first, AfdwRecoveryReport report,
					  void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		recover_server(serverid, servername, tbl, dry_run, first, report, arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		AfdwRecoveryOutcome out = {servername, NULL, AFDW_LOCAL_ABORTED,
		AFDW_RECOVERY_FAILED, NULL};

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		out.failure = edata->message;
		report(&out, arg);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

/*
 * list_servers
 *		The async_fdw servers of this database (afdw_server_is_ours), by
 *		name: their OIDs into *OIDS, their names into *NAMES.  Within SPI.
 */
static void
list_servers(List **oids, List **names)
{
	int			rc;

	rc = SPI_execute("SELECT oid, srvname FROM pg_catalog.pg_foreign_server"
					 " ORDER BY srvname", true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not list servers: %s", SPI_result_code_string(rc));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			serverid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															  SPI_tuptable->tupdesc,
															  1, &isnull));

		if (!afdw_server_is_ours(serverid))
			continue;
		*oids = lappend_oid(*oids, serverid);
		*names = lappend(*names, SPI_getvalue(SPI_tuptable->vals[i],
											  SPI_tuptable->tupdesc, 2));
	}
}

/*
 * afdw_recovery_servers
 *		The names of the servers the recovery worker visits (in the caller's
 *		memory context): every async_fdw server of this database, by name;
 *		none if async_fdw 1.2, which keeps the records, is not installed
 *		here.  Needs an active snapshot.
 */
List *
afdw_recovery_servers(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	RecordTable tbl;
	List	   *oids = NIL;
	List	   *names = NIL;
	List	   *result = NIL;
	ListCell   *lc;

	SPI_connect();
	if (record_table(&tbl, true))
		list_servers(&oids, &names);
	foreach(lc, names)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		result = lappend(result, pstrdup((char *) lfirst(lc)));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return result;
}

/*
 * afdw_recover_prepared
 *		Recover, on every async_fdw server of this database or on the one
 *		whose OID is ONLY, the remote transactions two-phase commit left
 *		prepared (see the banner); with DRY_RUN, only find out what would be
 *		done.  REPORT (with ARG) gets each outcome, a server that cannot be
 *		reached as one outcome of its own.  False if async_fdw 1.2, which
 *		keeps the records, is not installed in this database: nothing was
 *		done.  Needs an active snapshot.
 */
bool
afdw_recover_prepared(Oid only, bool dry_run, AfdwRecoveryReport report,
					  void *arg)
{
	RecordTable tbl;
	List	   *servers = NIL;
	List	   *names = NIL;
	ListCell   *lc;
	ListCell   *lc2;
	int			rc;

	SPI_connect();
	if (!record_table(&tbl, true))
	{
		SPI_finish();
		return false;
	}
	if (OidIsValid(only))
	{
		ForeignServer *server = GetForeignServer(only);

		if (!afdw_server_is_ours(only))
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("server \"%s\" is not an async_fdw server",
							server->servername),
					 errhint("Name a server of a foreign-data wrapper whose handler is async_fdw_handler, or none for all.")));
		servers = list_make1_oid(only);
		names = list_make1(server->servername);
	}
	else
		list_servers(&servers, &names);
	forboth(lc, servers, lc2, names)
		recover_server_caught(lfirst_oid(lc), (char *) lfirst(lc2), &tbl,
							  dry_run, lc == list_head(servers), report, arg);

	/* The records of servers dropped since: nothing can reach them. */
	if (!dry_run)
	{
		rc = SPI_execute(psprintf("DELETE FROM %s WHERE server_id NOT IN"
								  " (SELECT oid FROM pg_catalog.pg_foreign_server)",
								  tbl.name), false, 0);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "could not delete records: %s", SPI_result_code_string(rc));
	}
	SPI_finish();
	return true;
}

/*
 * local_state_word
 *		STATE as the column local_state shows it.
 */
static const char *
local_state_word(AfdwLocalState state)
{
	switch (state)
	{
		case AFDW_LOCAL_ABORTED:
			return "aborted";
		case AFDW_LOCAL_IN_PROGRESS:
			return "in progress";
		case AFDW_LOCAL_COMMITTED:
			return "committed";
	}
	elog(ERROR, "unknown local state %d", (int) state);
	return NULL;				/* keep the compiler quiet */
}

/*
 * action_word
 *		ACTION as the column action shows it (a failure's reason follows
 *		"failed: ").
 */
static const char *
action_word(AfdwRecoveryAction action)
{
	switch (action)
	{
		case AFDW_RECOVERY_LEFT:
			return "left";
		case AFDW_RECOVERY_WOULD_COMMIT:
			return "would commit";
		case AFDW_RECOVERY_WOULD_ROLL_BACK:
			return "would roll back";
		case AFDW_RECOVERY_COMMITTED:
			return "committed";
		case AFDW_RECOVERY_ROLLED_BACK:
			return "rolled back";
		case AFDW_RECOVERY_FINISHED_BY_SESSION:
			return "finished by its session";
		case AFDW_RECOVERY_LEFT_NO_MAPPING:
			return "left: its user mapping is gone";
		case AFDW_RECOVERY_LEFT_FINISHING:
			return "left: its session is finishing it";
		case AFDW_RECOVERY_FAILED:
			return "failed";
	}
	elog(ERROR, "unknown recovery action %d", (int) action);
	return NULL;				/* keep the compiler quiet */
}

/*
 * put_row
 *		AfdwRecoveryReport of the SQL function: OUTCOME as a row of the
 *		result set ARG, in words.
 */
static void
put_row(const AfdwRecoveryOutcome *outcome, void *arg)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	const char *action = action_word(outcome->action);

	values[0] = CStringGetTextDatum(outcome->server);
	if (outcome->gid != NULL)
	{
		values[1] = CStringGetTextDatum(outcome->gid);
		values[2] = CStringGetTextDatum(local_state_word(outcome->state));
	}
	else
		nulls[1] = nulls[2] = true;
	if (outcome->action == AFDW_RECOVERY_FAILED)
		action = psprintf("%s: %s", action, outcome->failure);
	values[3] = CStringGetTextDatum(action);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * async_fdw_recover_prepared_transactions
 *		SQL-callable: afdw_recover_prepared over every async_fdw server of
 *		this database or the one named SERVER; with DRY_RUN, only say what
 *		would be done.  One row per remote transaction: server, identifier,
 *		local state, action.
 *
 * Not strict: SERVER is NULL by default, for all servers.
 */
Datum
async_fdw_recover_prepared_transactions(PG_FUNCTION_ARGS)
{
	bool		dry_run;
	Oid			only = InvalidOid;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dry_run must not be null")));
	dry_run = PG_GETARG_BOOL(0);
	if (!PG_ARGISNULL(1))
		only = GetForeignServerByName(text_to_cstring(PG_GETARG_TEXT_PP(1)),
									  false)->serverid;

	InitMaterializedSRF(fcinfo, 0);
	(void) afdw_recover_prepared(only, dry_run, put_row, rsinfo);
	PG_RETURN_VOID();
}
