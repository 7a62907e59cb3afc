/*-------------------------------------------------------------------------
 *
 * twophase.c
 *		Atomic commit across servers: two-phase commit of the remote
 *		transactions that wrote, and its records.
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
 * The recovery of transactions left in doubt is twophase_recovery.c's: it reads
 * the records through afdw_twophase_records_name and lists the
 * identifiers that start with afdw_twophase_gid_prefix.
 *
 * Neighbours: xact_callbacks.c calls afdw_twophase_prepare at the start of its
 * pre-commit and the end functions from its transaction callback;
 * twophase_recovery.c reads the records' name, the identifiers' prefix and its
 * test pause here; connection_pool.c lends the connections; remote_commands.c
 * sends and waits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

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
 * A replicated foreign table this transaction wrote (afdw_twophase_require),
 * InvalidOid if none: its copies change together only with two-phase
 * commit, which the transaction then requires, whatever the settings say.
 */
static Oid	replicated_written = InvalidOid;
static int	replicated_level = 0;	/* the outermost local nesting level
									 * that holds such a write */

/*
 * The servers auto committed without two-phase commit because they cannot
 * prepare, already logged once by this backend (in TopMemoryContext).
 */
static List *logged_servers = NIL;

static bool record_table(RecordTable *tbl, bool missing_ok);
static void forget_table(Datum arg, Oid relid);
static void record_prepared(List *gids, List *entries);
static bool wants_two_phase(List *writers);
static bool replicas_need_two_phase(List *writers);
static void learn_can_prepare(List *writers);
static afdw_noreturn void refuse_two_phase(AfdwConn *entry, const char *detail);
static afdw_noreturn void report_prepare_error(PGresult *res, AfdwConn *entry,
								 const char *sql);

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
 * afdw_twophase_gid_prefix
 *		prefix_of, for recovery: the start of the identifiers it lists.
 */
char *
afdw_twophase_gid_prefix(void)
{
	return prefix_of();
}

/*
 * afdw_twophase_pause_recovery
 *		The test pause of recovery (see debug_pause_at), once it has listed
 *		the first server's prepared transactions.
 */
void
afdw_twophase_pause_recovery(void)
{
	debug_pause_at(AFDW_PAUSE_RECOVERY_AFTER_LISTING, true);
}

/*
 * afdw_twophase_require
 *		The current transaction wrote to RELID, a replicated foreign table
 *		(replica_writes.c): it must commit with two-phase commit on every
 *		server it wrote to, else fail (wants_two_phase).
 */
void
afdw_twophase_require(Oid relid)
{
	int			level = GetCurrentTransactionNestLevel();

	if (!OidIsValid(replicated_written) || level < replicated_level)
	{
		replicated_written = relid;
		replicated_level = level;
	}
}

/*
 * afdw_twophase_subxact_end
 *		The local subtransaction at LEVEL ends, COMMITTED (released) or
 *		rolled back: the writes to replicated tables it held are its
 *		parent's, or undone, and then no longer require two-phase commit.
 */
void
afdw_twophase_subxact_end(int level, bool committed)
{
	if (!OidIsValid(replicated_written) || replicated_level < level)
		return;
	if (committed)
		replicated_level = level - 1;
	else
		replicated_written = InvalidOid;
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
		replicated_written = InvalidOid;
		return;
	}
	replicated_written = InvalidOid;

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

	/* The COMMIT PREPAREDs of several servers go under the commit fence. */
	afdw_fence_commit(writers, false);
	list_free(writers);
}

/*
 * afdw_fence_commit
 *		The connections WRITERS are about to commit: if they are on more
 *		than one server, hold the commit fence on the committers' side
 *		(waiting for readers taking snapshots to be done, which a cancel
 *		ends with an error), and with PUBLISH_NOW record the commit's
 *		number for each server (else afdw_twophase_end does, just before
 *		its COMMIT PREPAREDs); or note that the commit goes unfenced.  Held
 *		until the commits have answered (afdw_twophase_end, xact_callbacks.c).
 */
void
afdw_fence_commit(List *writers, bool publish_now)
{
	ListCell   *lc;
	Oid			first = InvalidOid;
	bool		several = false;

	foreach(lc, writers)
	{
		AfdwConn   *entry = (AfdwConn *) lfirst(lc);

		if (!OidIsValid(first))
			first = entry->serverid;
		else if (entry->serverid != first)
			several = true;
	}
	if (!several || afdw_fence_holding())
		return;
	if (!afdw_fence_active())
	{
		afdw_fence_note_unfenced();
		return;
	}
	(void) afdw_fence_enter(AFDW_FENCE_COMMITTER, -1);
	if (publish_now)
	{
		foreach(lc, writers)
			afdw_fence_publish(((AfdwConn *) lfirst(lc))->serverid);
	}
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

	if (OidIsValid(replicated_written))
		return replicas_need_two_phase(writers);
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
 * replicas_need_two_phase
 *		wants_two_phase for a transaction that wrote to a replicated table:
 *		every server of WRITERS must prepare, whatever its mode, so that all
 *		copies commit or none; one that cannot, or whose two_phase_commit
 *		is off, fails the commit (and the transaction rolls back).
 */
static bool
replicas_need_two_phase(List *writers)
{
	ListCell   *lc;
	char	   *relname = get_rel_name(replicated_written);

	learn_can_prepare(writers);
	foreach(lc, writers)
	{
		AfdwConn   *entry = (AfdwConn *) lfirst(lc);

		if (mode_of(entry) == AFDW_2PC_OFF || entry->can_prepare == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("server \"%s\" cannot take part in a two-phase commit",
							NameStr(entry->servername)),
					 errdetail("The transaction changed replicated foreign table \"%s\", whose copies change together only by two-phase commit, and %s.",
							   relname ? relname : "?",
							   mode_of(entry) == AFDW_2PC_OFF ?
							   _("this server's two_phase_commit is off") :
							   _("this server's max_prepared_transactions is 0")),
					 errhint("Set max_prepared_transactions on every server holding a copy, and leave two_phase_commit at auto or on for them.")));
	}
	return true;
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
	bool		past_cancel;
	const char *verb = committed ? "COMMIT PREPARED" : "ROLLBACK PREPARED";

	replicated_written = InvalidOid;
	if (!prepares_sent)
	{
		afdw_fence_leave();
		return;
	}
	prepares_sent = false;
	if (committed)
		debug_pause_at(AFDW_PAUSE_BEFORE_COMMIT_PREPARED, false);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   AFDW_FINISH_TIMEOUT_MS);

	/*
	 * Committed, the fence is held until every server has answered or the
	 * deadline has passed: a cancel, which cannot undo the commit any more,
	 * does not cut the waits short, or a reader let in meanwhile would see
	 * the transaction on some servers only.  A termination still does: the
	 * backend exits, and what it left prepared waits for recovery.
	 */
	past_cancel = afdw_cleanup_past_cancel(committed);

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
		/* Readers that check their snapshots must see it first. */
		if (committed)
			afdw_fence_publish(entry->serverid);
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
	/* Every server has answered, or is left to recovery. */
	(void) afdw_cleanup_past_cancel(past_cancel);
	afdw_fence_leave();
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
 * afdw_twophase_records_name
 *		For recovery: the schema-qualified, quoted name of the table of
 *		records; NULL if there is none (async_fdw 1.2, which keeps them, is
 *		not installed in this database).  Within SPI.
 */
char *
afdw_twophase_records_name(void)
{
	RecordTable tbl;

	if (!record_table(&tbl, true))
		return NULL;
	return tbl.name;
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
	/* Forgotten once deleted: a failed statement deleted none of them. */
	list_free_deep(finished_gids);
	finished_gids = NIL;
	PopActiveSnapshot();
	SPI_finish();
}
