/*-------------------------------------------------------------------------
 *
 * xact_callbacks.c
 *		The end of async_fdw's remote transactions and savepoints, with the
 *		local ones: the transaction callbacks, commit, and cleanup after an
 *		abort.
 *
 * At the local pre-commit every remote transaction is committed: the
 * COMMITs of many connections overlap, the write held for the COMMIT goes
 * with it, and the COMMIT of a transaction that only read is not waited
 * for (its answer is read before the connection's next use).  After an
 * abort, what runs is cancelled everywhere at once and every connection is
 * rolled back within one deadline; one that cannot be is dropped.  A
 * subtransaction's end releases or rolls back its remote savepoints.
 *
 * Neighbours: remote_xact.c opens the remote transactions (and registers these
 * callbacks, given at load time by afdw_xact_callbacks_init, at its first
 * connection; it notes whether the local transaction used one) and keeps what
 * each connection holds for its transaction, which this file forgets;
 * twophase.c prepares the writers before the COMMIT and ends the prepared
 * transactions after it; remote_commands.c sends and waits; connection_pool.c
 * drops the connections left in an unknown state.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

static bool abort_remote(AfdwConn *entry, const char *sql, TimestampTz deadline);
static bool abort_send(AfdwConn *entry, const char *sql, TimestampTz deadline);
static bool abort_wait(AfdwConn *entry, TimestampTz deadline);
static void wait_commit(AfdwConn *entry, HASH_SEQ_STATUS *scan);
static void check_remote_states(void);
static void xact_callback(XactEvent event, void *arg);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);

/*
 * afdw_xact_callbacks_init
 *		Give remote_xact.c the transaction callbacks, which it registers at
 *		the first connection taken (at load time, from _PG_init).
 */
void
afdw_xact_callbacks_init(void)
{
	afdw_set_xact_callbacks(xact_callback, subxact_callback);
}

/*
 * check_remote_states
 *		Fail the commit, before any remote COMMIT or PREPARE is sent, if the
 *		state of a remote transaction is not known, or if one that wrote has
 *		failed.
 *
 * Not known: a cleanup was cut short (the rollback of a savepoint whose
 * command in flight could not be cancelled in time, a second cancel), so
 * the remote transaction may still hold what the rollback was to undo, a
 * write that arrived after the cancel; postgres_fdw fails the commit
 * there too (08000).  Failed: a command of it failed in a local
 * subtransaction that caught the error (or was cancelled outside a
 * savepoint of its own), and took the transaction's writes on that server
 * with it; its COMMIT would be a ROLLBACK.  A failure within the savepoint
 * of a scan's command is not one: that savepoint is rolled back before the
 * COMMIT.
 */
static void
check_remote_states(void)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;

	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn == NULL || entry->xact_depth == 0)
			continue;
		if (entry->xact_state == AFDW_XACT_LOST)
		{
			hash_seq_term(&scan);
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_EXCEPTION),
					 errmsg("lost connection to server \"%s\"",
							NameStr(entry->servername)),
					 errdetail("A change of the remote transaction's state was cut short (the rollback of a savepoint, say), or its session broke: what the remote transaction holds is not known."),
					 errhint("Roll back the local transaction and retry.")));
		}
		if (entry->role != AFDW_ROLE_WROTE)
			continue;
		afdw_make_idle(entry);
		if (entry->xact_depth == 0 ||
			PQtransactionStatus(entry->conn) != PQTRANS_INERROR ||
			(entry->savepoint_op != NULL &&
			 strncmp(entry->savepoint_op, "RELEASE", 7) != 0))
			continue;
		hash_seq_term(&scan);
		ereport(ERROR,
				(errcode(ERRCODE_TRANSACTION_ROLLBACK),
				 errmsg("remote transaction on server \"%s\" failed before its commit",
						NameStr(entry->servername)),
				 errdetail("A command of the transaction failed on that server in a subtransaction that caught the error, and the transaction's writes there were lost with it.")));
	}
}

/*
 * commit_all
 *		Send COMMIT on every connection in a remote transaction, then wait
 *		for all the answers, so that commits of many servers overlap; a
 *		server whose parallel_commit is false is committed alone, the next
 *		COMMIT sent after its answer.
 */
static void
commit_all(void)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	StringInfoData sql;
	List	   *deferred = NIL;
	List	   *writers = NIL;
	int			nwritten = 0;
	bool		fenced;
	ListCell   *lc;

	/* Nothing is committed if a server's writes are lost already. */
	check_remote_states();

	/* Two-phase commit, where it is needed, prepares the writers first. */
	afdw_twophase_prepare();

	/*
	 * A write kept for the COMMIT (afdw_defer_write) rides with it only if
	 * no other connection wrote: else its error would come when the other
	 * servers have committed their part of the statement.  Send it first.
	 */
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn == NULL || entry->xact_depth == 0 ||
			entry->role != AFDW_ROLE_WROTE)
			continue;
		nwritten++;
		writers = lappend(writers, entry);
		if (entry->deferred != NULL)
			deferred = lappend(deferred, entry);
	}

	/*
	 * Commits on several servers without two-phase commit go under the
	 * commit fence too (those of two-phase commit took it with their
	 * PREPAREs): held until every COMMIT has answered, below.
	 */
	fenced = !afdw_fence_holding();
	afdw_fence_commit(writers, true);
	fenced = fenced && afdw_fence_holding();
	list_free(writers);
	if (nwritten > 1)
	{
		List	   *sent = NIL;
		ListCell   *lc2;

		/* All of them at once, then their answers. */
		foreach(lc, deferred)
		{
			entry = (AfdwConn *) lfirst(lc);
			sent = lappend(sent, pstrdup(entry->deferred));
			pfree(entry->deferred);
			entry->deferred = NULL;
			afdw_send_query(entry, (char *) llast(sent), 0, NULL);
		}
		forboth(lc, deferred, lc2, sent)
		{
			entry = (AfdwConn *) lfirst(lc);
			PQclear(afdw_command_result(entry, (char *) lfirst(lc2)));
		}
	}
	list_free(deferred);

	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn == NULL || entry->xact_depth == 0)
			continue;
		afdw_make_idle(entry);
		/* The results read may end with the COMMIT that rode along. */
		if (entry->xact_depth == 0)
			continue;
		afdw_forget_closes(entry);
		afdw_xact_changing(entry);

		/*
		 * A failed scan's savepoint is rolled back first.  Statements no
		 * longer used go after the COMMIT, whose answer is not waited for
		 * and whose outcome they cannot change.
		 */
		initStringInfo(&sql);
		/* A deferred write goes in the same message, before the COMMIT. */
		if (entry->deferred != NULL)
		{
			appendStringInfo(&sql, "%s; ", entry->deferred);
			entry->deferred_sent = entry->deferred;
			entry->deferred = NULL;
		}
		if (entry->savepoint_op != NULL &&
			strncmp(entry->savepoint_op, "RELEASE", 7) != 0)
			appendStringInfo(&sql, "%s; ", entry->savepoint_op);
		afdw_forget_savepoint_op(entry, 0);
		appendStringInfoString(&sql, "COMMIT TRANSACTION");
		if (!IsolationIsSerializable())
			afdw_append_deallocs(entry, &sql);
		afdw_append_idle_setting(entry, &sql);
		afdw_send_query(entry, sql.data, 0, NULL);
		pfree(sql.data);

		/*
		 * parallel_commit false: this server's COMMIT is over before the
		 * next one is sent, as postgres_fdw commits by default.
		 */
		if (!entry->parallel_commit)
		{
			wait_commit(entry, &scan);
			continue;
		}

		/*
		 * A REPEATABLE READ transaction that only read has nothing to lose
		 * at COMMIT: its answer is read before the
		 * connection's next use, off the critical path.  SERIALIZABLE ones
		 * may fail to commit, so they are waited for, and so are those
		 * holding row locks (SELECT ... FOR UPDATE), which must be free for
		 * others once the local COMMIT has returned, and those that wrote,
		 * whose COMMIT may fail (a deferred constraint) and must be durable
		 * before the local one is.
		 */
		if (!IsolationIsSerializable() && !entry->locks_rows &&
			entry->role != AFDW_ROLE_WROTE)
		{
			afdw_set_in_flight(entry, AFDW_IN_FLIGHT_COMMIT);
			afdw_xact_changed(entry);
			entry->xact_depth = 0;
		}
	}

	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn == NULL || entry->xact_depth == 0 ||
			entry->in_flight == AFDW_IN_FLIGHT_COMMIT)
			continue;
		wait_commit(entry, &scan);
	}
	if (fenced)
		afdw_fence_leave();
}

/*
 * wait_commit
 *		Read the answer to ENTRY's COMMIT, raising its failure (SCAN, the
 *		caller's scan of the connections, is ended first).
 */
static void
wait_commit(AfdwConn *entry, HASH_SEQ_STATUS *scan)
{
	PGresult   *res = afdw_wait_result(entry, "COMMIT TRANSACTION");

	if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		/* A deferred write's error names the write. */
		char	   *sql = entry->deferred_sent ?
			pstrdup(entry->deferred_sent) : "COMMIT TRANSACTION";

		hash_seq_term(scan);
		afdw_drop_deferred(entry);
		afdw_report_remote_error(res, entry, sql);
	}
	PQclear(res);
	afdw_drop_deferred(entry);
	afdw_xact_changed(entry);
	entry->xact_depth = 0;
}

/*
 * abort_all
 *		Roll back every remote transaction, never raising an error: cancel
 *		what runs everywhere at once, then clean up one connection after the
 *		other, all within one deadline; the ABORTs of servers whose
 *		parallel_abort is true are sent together, and their answers read
 *		after the others'.  A connection that cannot be cleaned up is
 *		marked to be dropped.
 */
static void
abort_all(void)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	TimestampTz deadline;
	List	   *sent = NIL;
	ListCell   *lc;

	/*
	 * After an error in the cleanup of an error, try nothing that could
	 * fail again: the connections are dropped.
	 */
	if (in_error_recursion_trouble())
	{
		hash_seq_init(&scan, afdw_conn_hash);
		while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
		{
			if (entry->conn != NULL && entry->xact_depth > 0)
				afdw_xact_lost(entry);
		}
		return;
	}

	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn != NULL && entry->xact_depth > 0 &&
			entry->xact_state == AFDW_XACT_KNOWN)
			afdw_cancel(entry);
	}

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   AFDW_CLEANUP_TIMEOUT_MS);
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		StringInfoData sql;

		/* A deferred write was never sent: there is nothing to roll back. */
		afdw_drop_deferred(entry);
		if (entry->conn == NULL || entry->xact_depth == 0)
			continue;
		/* Statements no longer used go after the end of the transaction. */
		initStringInfo(&sql);
		appendStringInfoString(&sql, "ABORT TRANSACTION");
		afdw_append_deallocs(entry, &sql);
		afdw_append_idle_setting(entry, &sql);
		if (entry->parallel_abort)
		{
			/* Sent now, its answer read with the others' below. */
			if (abort_send(entry, sql.data, deadline))
				sent = lappend(sent, entry);
			else
				afdw_xact_lost(entry);
		}
		else if (!abort_remote(entry, sql.data, deadline))
			afdw_xact_lost(entry);
		pfree(sql.data);
	}
	foreach(lc, sent)
	{
		entry = (AfdwConn *) lfirst(lc);
		if (!abort_wait(entry, deadline))
			afdw_xact_lost(entry);
	}
	list_free(sent);
}

/*
 * finish_in_flight
 *		Read and discard what the command on CONN (cancelled by the caller)
 *		still returns; true if the connection is idle in its transaction
 *		afterwards.
 */
static bool
finish_in_flight(AfdwConn *entry, TimestampTz deadline)
{
	/* An error read ahead for the owner of a command that is over. */
	if (entry->held_result != NULL)
	{
		PQclear(entry->held_result);
		entry->held_result = NULL;
	}
	if (PQtransactionStatus(entry->conn) != PQTRANS_ACTIVE)
		return true;
	/* A COPY FROM STDIN cut short is failed first, which ends it. */
	if (entry->in_flight == AFDW_IN_FLIGHT_COPY_IN &&
		!afdw_copy_abandon(entry, deadline))
		return false;
	(void) afdw_wait_cleanup(entry, deadline, true, NULL);
	return PQtransactionStatus(entry->conn) != PQTRANS_ACTIVE;
}

/*
 * abort_remote
 *		Cancel what runs on ENTRY and send SQL (ABORT or ROLLBACK TO), never
 *		raising an error, waiting at most until DEADLINE; false if the
 *		connection must be dropped.
 */
static bool
abort_remote(AfdwConn *entry, const char *sql, TimestampTz deadline)
{
	return abort_send(entry, sql, deadline) && abort_wait(entry, deadline);
}

/*
 * abort_send
 *		abort_remote's first half: end what was in flight on ENTRY and send
 *		SQL; false if the connection must be dropped.
 */
static bool
abort_send(AfdwConn *entry, const char *sql, TimestampTz deadline)
{
	/* A transaction command that was cut short left an unknown state. */
	if (entry->xact_state != AFDW_XACT_KNOWN ||
		PQstatus(entry->conn) != CONNECTION_OK)
		return false;

	afdw_xact_changing(entry);
	/* The rollback ends the savepoint of the command in flight too. */
	entry->wrap = AFDW_WRAP_NONE;
	if (!finish_in_flight(entry, deadline))
		return false;
	afdw_set_idle(entry);
	return afdw_send_cleanup(entry, sql);
}

/*
 * abort_wait
 *		abort_remote's second half: read the answer to what abort_send sent
 *		on ENTRY; false if the connection must be dropped.
 */
static bool
abort_wait(AfdwConn *entry, TimestampTz deadline)
{
	if (!afdw_wait_cleanup(entry, deadline, false, NULL))
		return false;
	afdw_xact_changed(entry);
	return true;
}

/*
 * xact_callback
 *		Commit or roll back the remote transactions with the local one.
 */
static void
xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	TimestampTz now;

	if (!afdw_xact_got_connection())
		return;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			/* A failure here aborts the local transaction. */
			commit_all();
			return;

		case XACT_EVENT_PRE_PREPARE:
			hash_seq_init(&scan, afdw_conn_hash);
			while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
			{
				if (entry->conn != NULL && entry->xact_depth > 0)
				{
					hash_seq_term(&scan);
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot prepare a transaction that has used async_fdw foreign tables"),
							 errdetail("Server \"%s\" was used in this transaction.",
									   NameStr(entry->servername)),
							 errhint("Commit or roll back the transaction instead.")));
				}
			}
			return;

		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			abort_all();
			afdw_twophase_end(false);
			break;

		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			afdw_twophase_end(true);
			break;

		case XACT_EVENT_PREPARE:
			break;
	}

	/* The local transaction is over: so is every remote one. */
	now = GetCurrentTimestamp();
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		entry->nusers = 0;
		if (entry->conn == NULL)
			continue;

		/*
		 * Its remote idle time starts now if this transaction used it;
		 * else it runs on from the transaction that last did, as the
		 * server's timer does (near_idle_timeout, connection_pool.c).
		 */
		if (entry->idle_since == 0)
			entry->idle_since = now;
		/* Pre-commit ended every remote transaction. */
		Assert(event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
			   entry->xact_depth == 0);
		afdw_reset_xact_state(entry, 1);
		/* Results nobody read: the remote state is unknown. */
		if (entry->export_pending || entry->held_result != NULL)
		{
			afdw_disconnect_entry(entry);
			continue;
		}
		if (entry->in_flight == AFDW_IN_FLIGHT_COMMIT && entry->keep &&
			!entry->invalidated)
			continue;
		if (entry->in_flight != AFDW_IN_FLIGHT_NONE ||
			entry->xact_state != AFDW_XACT_KNOWN || entry->invalidated ||
			!entry->keep || PQstatus(entry->conn) != CONNECTION_OK ||
			PQtransactionStatus(entry->conn) != PQTRANS_IDLE)
			afdw_disconnect_entry(entry);
	}

	afdw_trim_idle_pools();
	afdw_xact_forget_use();
	afdw_forget_snapshots();
}

/*
 * subxact_callback
 *		Release or roll back the remote savepoint of the subtransaction that
 *		ends.
 */
static void
subxact_callback(SubXactEvent event,
				 SubTransactionId mySubid pg_attribute_unused(),
				 SubTransactionId parentSubid pg_attribute_unused(),
				 void *arg pg_attribute_unused())
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	int			curlevel;
	TimestampTz deadline = 0;
	bool		trouble = false;

	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB &&
		event != SUBXACT_EVENT_ABORT_SUB)
		return;
	if (!afdw_xact_got_connection())
		return;

	/* The cleanups of all connections share one deadline. */
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		trouble = in_error_recursion_trouble();
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   AFDW_CLEANUP_TIMEOUT_MS);
	}

	curlevel = GetCurrentTransactionNestLevel();
	afdw_twophase_subxact_end(curlevel, event == SUBXACT_EVENT_PRE_COMMIT_SUB);
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		char		sql[200];

		if (entry->conn == NULL || entry->xact_depth < curlevel)
			continue;
		if (entry->xact_depth > curlevel)
		{
			/* Never an error while aborting: that could recurse. */
			elog(event == SUBXACT_EVENT_ABORT_SUB ? WARNING : ERROR,
				 "remote savepoint level %d outlived its subtransaction",
				 entry->xact_depth);
			afdw_xact_lost(entry);
			entry->xact_depth = curlevel;
		}

		if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
		{
			afdw_make_idle(entry);
			/* A stream's savepoint, possibly failed, is ended first. */
			if (entry->savepoint_op != NULL && entry->savepoint_level >= curlevel)
				snprintf(sql, sizeof(sql), "%s; RELEASE SAVEPOINT s%d",
						 entry->savepoint_op, curlevel);
			else
				snprintf(sql, sizeof(sql), "RELEASE SAVEPOINT s%d", curlevel);
			afdw_forget_savepoint_op(entry, curlevel);
			afdw_xact_changing(entry);
			afdw_run_command(entry, sql);
			afdw_xact_changed(entry);
			afdw_cursors_to_level(entry, curlevel - 1);
			afdw_writes_to_level(entry, curlevel - 1);
		}
		else if (trouble)
		{
			/* After an error in error cleanup, try nothing: drop it later. */
			afdw_xact_lost(entry);
		}
		else
		{
			bool		cancelled;

			snprintf(sql, sizeof(sql),
					 "ROLLBACK TO SAVEPOINT s%d; RELEASE SAVEPOINT s%d",
					 curlevel, curlevel);
			/*
			 * What was in flight is cancelled, once the savepoints sent
			 * ahead of it are taken; its owner finds out at its next use.
			 * On failure the connection stays marked for disconnection.
			 */
			cancelled = afdw_cancel_opened(entry, deadline);
			afdw_reset_xact_state(entry, curlevel);
			if (cancelled)
				(void) abort_remote(entry, sql, deadline);
			else
				afdw_xact_lost(entry);
		}
		entry->xact_depth--;
	}
}
