/*-------------------------------------------------------------------------
 *
 * remote_commands.c
 *		Commands on a remote connection of async_fdw: sending, waiting,
 *		reading results, cancelling, and reporting remote errors.
 *
 * One command at a time is in flight on a connection.  Whoever sent it (its
 * owner) reads its results; when someone else needs the connection, the owner
 * is asked to read them (its drain function), and results whose owner is gone
 * are read and thrown away.  Every result goes through afdw_get_result
 * (afdw_pop_result), which hands it to the session layer through its result
 * hook (AfdwSessionHooks: remote_xact.c follows the savepoint that wraps a
 * scan's command, prepared_statements.c a PREPARE), and a snapshot export
 * riding ahead of the command through its export hook (shared_snapshot.c). A
 * write the session deferred for its COMMIT is sent first, alone, before any
 * other command (afdw_send_query).  The lines of a COPY TO STDOUT are read
 * here too, for a stream (afdw_get_copy_line) or to throw them away, and the
 * data of a bulk load's COPY FROM STDIN sent (afdw_await_copy_in,
 * afdw_put_copy, afdw_copy_done, afdw_copy_result), the connection
 * non-blocking while it runs so that a full socket is waited on like any other
 * wait.  Waits serve interrupts and watch for postmaster death; the waits of
 * cleanup have a deadline, and under EXPLAIN ANALYZE their time is summed for
 * the scans (afdw_wait_time).  This file reads and writes the sockets of open
 * connections, and cuts those whose session is not to be trusted any more
 * (break_connection); connection_pool.c only checks idle ones, and
 * connection_setup.c waits on handshakes.
 *
 * This is the wire layer, with connection_setup.c, connection_pool.c,
 * connection_budget.c and connection_state.c: it calls nothing above it.
 *
 * Neighbours: connection_pool.c and connection_setup.c open and close the
 * connections; remote_xact.c, shared_snapshot.c and twophase.c send their
 * commands through this file; the scan files (scan_commands.c,
 * copy_stream.c, scan.c) run their queries with it, and the write files
 * (modify_rows.c, direct_modify.c, truncate.c) their statements and loads,
 * through async_fdw.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>
#include <sys/socket.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "utils/timestamp.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

/* The first size of a batch's line buffer (AfdwLines). */
#define AFDW_LINES_INITIAL	8192

int			afdw_timed_scans = 0;
instr_time	afdw_wait_time;

static bool discard_copy_data(AfdwConn *entry, TimestampTz deadline);
static void break_connection(AfdwConn *entry, const char *violation);
static void refuse_copy_in(AfdwConn *entry, ExecStatusType status);
static void wait_writable(AfdwConn *conn, const char *sql);
static void flush_copy(AfdwConn *conn, bool all, const char *sql);
static afdw_noreturn void copy_failed(AfdwConn *conn, const char *sql);
static void send_deferred(AfdwConn *conn);
static PGresult *command_done(AfdwConn *conn);

/*
 * afdw_send_query
 *		Send SQL with NPARAMS text parameters, without waiting.  The caller
 *		reads the results.
 */
void
afdw_send_query(AfdwConn *conn, const char *sql, int nparams,
				const char *const *values)
{
	int			ok;

	/* afdw_connection_ready ends a handshake before any command. */
	if (conn->connecting != NULL)
		elog(ERROR, "connection to server \"%s\" used while being opened",
			 NameStr(conn->servername));
	afdw_make_idle(conn);
	/* A write kept for the COMMIT goes first, alone (remote_xact.c). */
	if (conn->deferred != NULL)
		send_deferred(conn);
	if (nparams > 0)
		ok = PQsendQueryParams(conn->conn, sql, nparams, NULL, values,
							   NULL, NULL, 0);
	else
		ok = PQsendQuery(conn->conn, sql);

	if (!ok)
		afdw_report_remote_error(NULL, conn, sql);
	afdw_set_in_flight(conn, AFDW_IN_FLIGHT_PLAIN);
	conn->owner = NULL;
	conn->wrap = AFDW_WRAP_NONE;
}

/*
 * afdw_send_cleanup
 *		Send SQL on ENTRY, idle, without waiting and never raising an error:
 *		a command of cleanup (an ABORT, a COMMIT or ROLLBACK PREPARED),
 *		whose answer afdw_wait_cleanup reads.  False if it could not be
 *		sent (the connection is then to be dropped).
 */
bool
afdw_send_cleanup(AfdwConn *entry, const char *sql)
{
	Assert(entry->in_flight == AFDW_IN_FLIGHT_NONE);
	if (!PQsendQuery(entry->conn, sql))
		return false;
	afdw_set_in_flight(entry, AFDW_IN_FLIGHT_PLAIN);
	entry->owner = NULL;
	entry->drain = NULL;
	return true;
}

/*
 * send_deferred
 *		Send CONN's deferred write (afdw_defer_write, remote_xact.c) now and
 *		wait for it, raising its remote error: another command is to follow it.
 */
static void
send_deferred(AfdwConn *conn)
{
	/* In the caller's memory, which an error frees. */
	char	   *sql = pstrdup(conn->deferred);

	pfree(conn->deferred);
	conn->deferred = NULL;
	afdw_run_command(conn, sql);
	pfree(sql);
}

/*
 * afdw_wait_result
 *		Wait for the results of the command in flight and return the one
 *		that matters: the first error, or else the last result, but for the
 *		success of a COMMIT that rode after the command's statement
 *		(afdw_send_final_write), which leaves the statement's result.
 *
 * The wait reacts to interrupts and postmaster death; a query cancel here
 * leaves the remote query running, and the abort callback cancels it.
 */
PGresult *
afdw_wait_result(AfdwConn *conn, const char *sql)
{
	PGresult   *volatile kept = NULL;
	bool		commit_rides = conn->commit_rides;

	PG_TRY();
	{
		for (;;)
		{
			PGresult   *res;
			bool		lost;

			while (!afdw_result_ready(conn))
				afdw_wait_socket(conn, sql);

			res = afdw_get_result(conn);
			if (res == NULL)
				break;

			/*
			 * Rows of a COPY nobody reads any more: only an abandoned
			 * command (afdw_make_idle, without SQL) may be a stream.  The
			 * callers that name their command sent no COPY, or have read
			 * its CopyOutResponse already.
			 */
			if (PQresultStatus(res) == PGRES_COPY_OUT)
			{
				PQclear(res);
				if (sql != NULL)
					afdw_protocol_violation(conn,
											gettext_noop("It answered with CopyOutResponse to a query that is not a COPY."),
											sql);
				afdw_discard_copy(conn, sql);
				continue;
			}

			lost = afdw_result_lost(conn, res);
			if (kept != NULL &&
				(PQresultStatus(kept) == PGRES_FATAL_ERROR ||
				 (commit_rides && PQresultStatus(res) == PGRES_COMMAND_OK &&
				  strcmp(PQcmdStatus(res), "COMMIT") == 0)))
				PQclear(res);
			else
			{
				PQclear(kept);
				kept = res;
			}
			if (lost)
				break;
		}
	}
	PG_CATCH();
	{
		PQclear(kept);
		PG_RE_THROW();
	}
	PG_END_TRY();

	afdw_set_idle(conn);
	return kept;
}

/*
 * afdw_run_query
 *		Run SQL and return its result, raising any remote error.
 */
PGresult *
afdw_run_query(AfdwConn *conn, const char *sql, int nparams,
			   const char *const *values)
{
	afdw_send_query(conn, sql, nparams, values);
	return afdw_command_result(conn, sql);
}

/*
 * afdw_rows_changed
 *		The number of rows a write's result RES changed: the rows it
 *		returned (RETURNING), else its command tag's count.
 */
uint64
afdw_rows_changed(const PGresult *res)
{
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		return (uint64) PQntuples(res);
	return (uint64) strtoul(PQcmdTuples((PGresult *) res), NULL, 10);
}

/*
 * afdw_command_result
 *		Wait for the result of SQL, sent on CONN, and return it, raising a
 *		remote error.
 */
PGresult *
afdw_command_result(AfdwConn *conn, const char *sql)
{
	PGresult   *res = afdw_wait_result(conn, sql);

	if (res == NULL ||
		(PQresultStatus(res) != PGRES_TUPLES_OK &&
		 PQresultStatus(res) != PGRES_COMMAND_OK))
		afdw_report_remote_error(res, conn, sql);
	return res;
}

/*
 * afdw_run_command
 *		Run SQL, which returns no rows, raising any remote error.
 */
void
afdw_run_command(AfdwConn *conn, const char *sql)
{
	PQclear(afdw_run_query(conn, sql, 0, NULL));
}

/*
 * poll_readable
 *		wait_readable without a wait set: poll SOCK for at most TIMEOUT
 *		milliseconds (-1: no limit), and at most 100 at a time, reporting a
 *		pending interrupt as the latch (the caller serves it).
 */
static int
poll_readable(pgsocket sock, long timeout)
{
	struct pollfd pfd;
	int			slice = (timeout < 0 || timeout > 100) ? 100 : (int) timeout;
	int			rc;

	pfd.fd = sock;
	pfd.events = POLLIN;
	pfd.revents = 0;
	rc = poll(&pfd, 1, slice);
	if (rc > 0)
		return WL_SOCKET_READABLE;
	if (InterruptPending)
		return WL_LATCH_SET;
	return (timeout >= 0 && slice >= timeout) ? WL_TIMEOUT : 0;
}

/*
 * wait_readable
 *		Wait until ENTRY's socket is readable, the latch is set or TIMEOUT
 *		milliseconds (-1: no limit) pass; returns the WL_ flags of what
 *		happened.  The backend exits if the postmaster dies.
 */
static int
wait_readable(AfdwConn *entry, long timeout)
{
	pgsocket	sock = PQsocket(entry->conn);
	WaitEvent	event;

	/* A broken connection: reading from it tells what happened. */
	if (sock == PGINVALID_SOCKET)
		return WL_SOCKET_READABLE;
	if (entry->waitset != NULL && entry->waitset_sock != sock)
	{
		FreeWaitEventSet(entry->waitset);
		entry->waitset = NULL;
	}
	if (entry->waitset == NULL)
	{
		WaitEventSet *set;

		/*
		 * A wait set costs a file descriptor.  Without one to spare beyond
		 * one for the executor (the connections took them), poll the
		 * socket, briefly, so that interrupts are served between polls; an
		 * error here could come during abort cleanup, where it must not.
		 */
		if (!AcquireExternalFD())
			return poll_readable(sock, timeout);
		if (!AcquireExternalFD())
		{
			/* The last one is left for the executor's own waits. */
			ReleaseExternalFD();
			return poll_readable(sock, timeout);
		}
		ReleaseExternalFD();
		ReleaseExternalFD();
		set = afdw_create_wait_set(false, afdw_conn_cxt, 3);

		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		/* A single-user backend has no postmaster to watch. */
		if (IsUnderPostmaster)
			AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		AddWaitEventToSet(set, WL_SOCKET_READABLE, sock, NULL, NULL);
		entry->waitset = set;
		entry->waitset_sock = sock;
	}
	/* Cleanup (a timeout) reads the answers of transaction commands. */
	if (WaitEventSetWait(entry->waitset, timeout, &event, 1,
						 afdw_wait_event(timeout >= 0 ||
										 entry->in_flight == AFDW_IN_FLIGHT_COMMIT ||
										 entry->xact_state != AFDW_XACT_KNOWN ?
										 AFDW_WAIT_COMMIT :
										 entry->in_flight == AFDW_IN_FLIGHT_COPY_IN ?
										 AFDW_WAIT_COPY_ROOM :
										 AFDW_WAIT_RESULT)) == 0)
		return WL_TIMEOUT;
	return event.events;
}

/*
 * Whether a query cancel leaves cleanup waits to their deadline
 * (afdw_cleanup_past_cancel).
 */
static bool past_cancel = false;

/*
 * afdw_cleanup_past_cancel
 *		While ON, a query cancel no longer ends a cleanup wait early (a
 *		termination still does); the setting before, to restore it.
 *
 * For the COMMIT PREPAREDs after the local commit: the commit fence is
 * held until they have answered, and a cancel, which can no longer undo
 * the commit, must not let readers in before.
 */
bool
afdw_cleanup_past_cancel(bool on)
{
	bool		before = past_cancel;

	past_cancel = on;
	return before;
}

/*
 * cleanup_interrupted
 *		Whether cleanup waiting with interrupts held off (while aborting)
 *		should give up: a query cancel (unless afdw_cleanup_past_cancel
 *		says otherwise) or a termination came meanwhile, or the backend is
 *		exiting, which ends the remote sessions anyway.
 */
static bool
cleanup_interrupted(void)
{
	return (QueryCancelPending && !past_cancel) || ProcDiePending ||
		proc_exit_inprogress;
}

/*
 * wait_for_input
 *		Wait until ENTRY's socket is readable and read what came, at most
 *		until DEADLINE (-1: no limit); false on timeout or when the
 *		connection broke.
 *
 * Interrupts are served.  Where they are held off (while aborting), a
 * cancel or termination ends a wait with a DEADLINE at once, with false.
 */
static bool
wait_for_input(AfdwConn *entry, TimestampTz deadline)
{
	long		wait = -1;
	int			rc;
	bool		timed = (afdw_timed_scans > 0);
	instr_time	start;
	instr_time	end;

	if (deadline >= 0)
	{
		if (cleanup_interrupted())
			return false;
		wait = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (wait <= 0)
			return false;
	}
	/* Two clock readings per wait, and only under EXPLAIN ANALYZE. */
	INSTR_TIME_SET_ZERO(start);
	if (timed)
		INSTR_TIME_SET_CURRENT(start);
	rc = wait_readable(entry, wait);
	if (timed)
	{
		INSTR_TIME_SET_CURRENT(end);
		INSTR_TIME_ACCUM_DIFF(afdw_wait_time, end, start);
	}
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (deadline >= 0 && cleanup_interrupted())
			return false;
	}
	return !(rc & WL_SOCKET_READABLE) || PQconsumeInput(entry->conn);
}

/*
 * afdw_wait_socket
 *		Wait until CONN's socket is readable and read what came, reacting to
 *		interrupts and postmaster death.
 */
void
afdw_wait_socket(AfdwConn *conn, const char *sql)
{
	if (!wait_for_input(conn, -1))
		afdw_report_remote_error(NULL, conn, sql);
}

/*
 * afdw_wait_socket_until
 *		afdw_wait_socket, at most until DEADLINE: false if it passed first.
 */
bool
afdw_wait_socket_until(AfdwConn *conn, const char *sql, TimestampTz deadline)
{
	if (wait_for_input(conn, deadline))
		return true;
	/* A cancel noticed first is served here. */
	CHECK_FOR_INTERRUPTS();
	if (GetCurrentTimestamp() >= deadline)
		return false;
	afdw_report_remote_error(NULL, conn, sql);
}

/* What cleanup_next read of the command in flight. */
typedef enum CleanupRead
{
	CLEANUP_DONE,				/* a result that succeeded, or an export */
	CLEANUP_FAILED,				/* a result that failed */
	CLEANUP_END,				/* the command's end: nothing in flight */
	CLEANUP_STUCK				/* the deadline passed or the connection broke */
} CleanupRead;

/*
 * cleanup_next
 *		Wait at most until DEADLINE for the next result of the command in
 *		flight on ENTRY and throw it away, raising no error: what came.  A
 *		failed result's SQLSTATE goes to FAILED_STATE (6 bytes) when it is
 *		not NULL.  A snapshot export's result is kept (a rollback to a
 *		savepoint leaves the transaction running); a COPY's rows are read
 *		to their end.
 */
static CleanupRead
cleanup_next(AfdwConn *entry, TimestampTz deadline, char *failed_state)
{
	PGresult   *res;
	bool		is_export;
	ExecStatusType status;

	while (!afdw_result_ready(entry))
	{
		if (!wait_for_input(entry, deadline))
			return CLEANUP_STUCK;
	}
	res = afdw_pop_result(entry, &is_export);
	if (is_export)
	{
		(void) afdw_session_hooks->export(entry, res, false);
		return CLEANUP_DONE;
	}
	if (res == NULL)
	{
		afdw_set_idle(entry);
		return CLEANUP_END;
	}
	status = PQresultStatus(res);
	if (status == PGRES_COPY_OUT)
	{
		PQclear(res);
		return discard_copy_data(entry, deadline) ? CLEANUP_DONE : CLEANUP_STUCK;
	}
	if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

		if (failed_state != NULL)
			strlcpy(failed_state, state != NULL ? state : "", 6);
		PQclear(res);
		return CLEANUP_FAILED;
	}
	PQclear(res);
	return CLEANUP_DONE;
}

/*
 * afdw_wait_cleanup
 *		Wait at most until DEADLINE for the results of the command in flight,
 *		without raising errors for them; true if it succeeded.  When a
 *		result failed and FAILED_STATE is not NULL, the first failed
 *		result's SQLSTATE goes there (6 bytes; empty if none was read).
 *
 * Used while aborting, when an error must not be thrown and interrupts are
 * held off (a cancel then ends the wait with false), and for the answer to
 * a COMMIT, where interrupts are served.  Once the last result is read,
 * nothing is in flight any more; a wait cut short leaves the command in
 * flight.
 */
bool
afdw_wait_cleanup(AfdwConn *entry, TimestampTz deadline, bool ignore_errors,
				  char *failed_state)
{
	bool		ok = true;
	char		state[6];

	if (failed_state != NULL)
		failed_state[0] = '\0';

	/* The answer may be in already: then there is no need to wait. */
	if (!afdw_result_ready(entry) && !PQconsumeInput(entry->conn))
		return false;

	for (;;)
	{
		switch (cleanup_next(entry, deadline, state))
		{
			case CLEANUP_DONE:
				break;
			case CLEANUP_FAILED:
				if (ok && failed_state != NULL && !ignore_errors)
					strlcpy(failed_state, state, 6);
				ok = ok && ignore_errors;
				break;
			case CLEANUP_END:
				return ok;
			case CLEANUP_STUCK:
				return false;
		}
	}
}

/*
 * afdw_cleanup_step
 *		Wait at most until DEADLINE for the next result of the command in
 *		flight on ENTRY, and throw it away as afdw_wait_cleanup does; false
 *		if the deadline passed or the connection broke first.  The caller
 *		follows the command through the session hooks, result by result.
 */
bool
afdw_cleanup_step(AfdwConn *entry, TimestampTz deadline)
{
	if (!afdw_result_ready(entry) && !PQconsumeInput(entry->conn))
		return false;
	return cleanup_next(entry, deadline, NULL) != CLEANUP_STUCK;
}

/*
 * afdw_result_ready
 *		Whether afdw_get_result would return without blocking.
 */
bool
afdw_result_ready(AfdwConn *conn)
{
	return conn->held_result != NULL || !PQisBusy(conn->conn);
}

/*
 * command_done
 *		An empty command result for CONN, standing for a result that this
 *		file took in (a snapshot export, the row that followed it).
 */
static PGresult *
command_done(AfdwConn *conn)
{
	PGresult   *res = PQmakeEmptyPGresult(conn->conn, PGRES_COMMAND_OK);

	if (res == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return res;
}

/*
 * afdw_pop_result
 *		The next result of CONN's command in flight (a result held back
 *		first), or NULL at the end; *IS_EXPORT tells whether it is the
 *		result of the snapshot export riding ahead of the command.  Any
 *		other result but a command's ends the wait for the export: after a
 *		failed transaction start it never comes.
 */
PGresult *
afdw_pop_result(AfdwConn *conn, bool *is_export)
{
	PGresult   *res;

	*is_export = false;
	if (conn->held_result != NULL)
	{
		res = conn->held_result;
		conn->held_result = NULL;
		return res;
	}
	res = PQgetResult(conn->conn);
	if (res != NULL && PQresultStatus(res) == PGRES_COPY_IN &&
		conn->in_flight == AFDW_IN_FLIGHT_COPY_AWAITED)
	{
		/* The COPY FROM STDIN that afdw_send_write sent: data may go. */
		afdw_set_in_flight(conn, AFDW_IN_FLIGHT_COPY_IN);
	}
	else if (res != NULL && (PQresultStatus(res) == PGRES_COPY_IN ||
							 PQresultStatus(res) == PGRES_COPY_BOTH))
		refuse_copy_in(conn, PQresultStatus(res));
	else if (conn->pad_pending && !conn->export_pending)
	{
		/*
		 * The wide row that followed the export (shared_snapshot.c): it stands for
		 * the statement's result, as a command's.  An error in its place
		 * is the transaction's, and is kept.
		 */
		conn->pad_pending = false;
		if (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK)
		{
			PQclear(res);
			res = command_done(conn);
		}
	}
	else if (conn->marker_pending &&
			 (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK))
	{
		/*
		 * The marker's row, which says the snapshot is taken (shared_snapshot.c),
		 * as a command's result; the wide row that pushed it out follows.
		 * After an error neither comes.
		 */
		conn->marker_pending = false;
		if (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK)
		{
			PQclear(res);
			res = command_done(conn);
			conn->pad_pending = true;
		}
	}
	afdw_session_hooks->result(conn, res);
	if (conn->export_pending &&
		(res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK))
	{
		conn->export_pending = false;
		*is_export = (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK);
		/* After a failed export the rest of the string does not run. */
		conn->pad_pending = *is_export;
	}
	return res;
}

/*
 * afdw_get_result
 *		PQgetResult for CONN: the next result of its command in flight, or
 *		NULL at the end.  The result of a snapshot export riding ahead of
 *		the command is taken in here and shows as a command result.
 */
PGresult *
afdw_get_result(AfdwConn *conn)
{
	bool		is_export;
	PGresult   *res = afdw_pop_result(conn, &is_export);

	if (!is_export)
		return res;
	(void) afdw_session_hooks->export(conn, res, true);
	return command_done(conn);
}

/*
 * afdw_set_owner
 *		Record who reads the results of the command in flight on CONN.
 */
void
afdw_set_owner(AfdwConn *conn, void *owner, AfdwDrainFn drain)
{
	Assert(conn->in_flight != AFDW_IN_FLIGHT_NONE);
	conn->owner = owner;
	conn->drain = drain;
}

/*
 * afdw_set_in_flight
 *		Note that the command in flight on CONN is now STATE (see
 *		AfdwInFlight); each state is entered from those listed.
 */
void
afdw_set_in_flight(AfdwConn *conn, AfdwInFlight state)
{
#ifdef USE_ASSERT_CHECKING
	switch (state)
	{
		case AFDW_IN_FLIGHT_NONE:
			/* From any: every result of the command is read. */
			break;
		case AFDW_IN_FLIGHT_PLAIN:
			/*
			 * From none: a command is sent (afdw_send_query sends a deferred
			 * write first, alone, and waits for it).  From any other kind:
			 * its answer is read now (a COMMIT's), a COPY's data is over, or
			 * it failed or was abandoned.
			 */
			Assert(conn->in_flight != AFDW_IN_FLIGHT_PLAIN);
			break;
		case AFDW_IN_FLIGHT_COMMIT:
		case AFDW_IN_FLIGHT_COPY_AWAITED:
			/* Just sent. */
			Assert(conn->in_flight == AFDW_IN_FLIGHT_PLAIN);
			break;
		case AFDW_IN_FLIGHT_COPY_IN:
			Assert(conn->in_flight == AFDW_IN_FLIGHT_COPY_AWAITED);
			break;
	}
#endif
	conn->in_flight = state;
}

/*
 * afdw_forget_in_flight
 *		CONN's remote session is gone, or a new one is being opened: nothing
 *		is in flight on it any more, and no result is held back.
 */
void
afdw_forget_in_flight(AfdwConn *conn)
{
	if (conn->held_result != NULL)
	{
		PQclear(conn->held_result);
		conn->held_result = NULL;
	}
	conn->export_pending = false;
	conn->pad_pending = false;
	conn->marker_pending = false;
	conn->owner = NULL;
	conn->drain = NULL;
	conn->in_flight = AFDW_IN_FLIGHT_NONE;
}

/*
 * afdw_expect_marker
 *		The next command sent on CONN opens its remote transaction with the
 *		row that marks its snapshot taken (shared_snapshot.c), which
 *		afdw_pop_result is to tell apart.
 */
void
afdw_expect_marker(AfdwConn *conn)
{
	Assert(conn->in_flight == AFDW_IN_FLIGHT_NONE && !conn->export_pending &&
		   !conn->marker_pending);
	conn->marker_pending = true;
}

/*
 * afdw_expect_export
 *		The next command sent on CONN starts with a snapshot export
 *		(shared_snapshot.c), whose result afdw_pop_result is to tell apart.
 */
void
afdw_expect_export(AfdwConn *conn)
{
	Assert(conn->in_flight == AFDW_IN_FLIGHT_NONE && !conn->export_pending &&
		   !conn->pad_pending);
	conn->export_pending = true;
}

/*
 * afdw_set_idle
 *		Note that every result of the command on CONN has been read: what
 *		it was is over too (a COPY whose CopyInResponse never came did not
 *		begin).
 */
void
afdw_set_idle(AfdwConn *conn)
{
	conn->owner = NULL;
	conn->drain = NULL;
	afdw_set_in_flight(conn, AFDW_IN_FLIGHT_NONE);
}

/*
 * afdw_forget_owner
 *		OWNER is going away: whatever it left in flight on CONN will be
 *		read and thrown away before the next use.
 */
void
afdw_forget_owner(AfdwConn *conn, void *owner)
{
	if (conn->owner == owner)
	{
		conn->owner = NULL;
		conn->drain = NULL;
	}
}

/*
 * afdw_is_owner
 *		True if OWNER's command is the one in flight on CONN.
 */
bool
afdw_is_owner(AfdwConn *conn, void *owner)
{
	return conn->in_flight != AFDW_IN_FLIGHT_NONE && conn->owner == owner;
}

/*
 * afdw_conn_owner
 *		The owner of the command in flight on CONN, or NULL.
 */
void *
afdw_conn_owner(AfdwConn *conn)
{
	return conn->in_flight != AFDW_IN_FLIGHT_NONE ? conn->owner : NULL;
}

/*
 * afdw_is_busy
 *		True if a command on CONN still has results to be read.
 */
bool
afdw_is_busy(AfdwConn *conn)
{
	return conn->in_flight != AFDW_IN_FLIGHT_NONE;
}

/*
 * afdw_make_idle
 *		Make CONN ready for a new command: let the owner of the command in
 *		flight read its results, or read and discard them if it is gone.
 */
void
afdw_make_idle(AfdwConn *conn)
{
	if (conn->in_flight == AFDW_IN_FLIGHT_NONE)
		return;

	if (conn->owner != NULL)
	{
		conn->drain(conn->owner);
		Assert(conn->in_flight == AFDW_IN_FLIGHT_NONE);
	}
	else
	{
		PGresult   *res = afdw_wait_result(conn, NULL);

		afdw_set_idle(conn);
		PQclear(res);
	}
}

/*
 * afdw_cancel
 *		Ask the remote server to cancel the command running on CONN, if
 *		any, without waiting for the effect, so that the cancels of many
 *		connections run at once.
 */
void
afdw_cancel(AfdwConn *conn)
{
	PGcancel   *cancel;
	char		errbuf[256];

	if (conn->conn == NULL || PQtransactionStatus(conn->conn) != PQTRANS_ACTIVE)
		return;
	cancel = PQgetCancel(conn->conn);
	if (cancel != NULL)
	{
		(void) PQcancel(cancel, errbuf, sizeof(errbuf));
		PQfreeCancel(cancel);
	}
}

/*
 * afdw_consume_input
 *		Read what has arrived on CONN's socket, without waiting; a broken
 *		connection raises an error naming SQL.
 */
void
afdw_consume_input(AfdwConn *conn, const char *sql)
{
	if (!PQconsumeInput(conn->conn))
		afdw_report_remote_error(NULL, conn, sql);
}

/*
 * afdw_get_copy_line
 *		The next line of the COPY TO STDOUT running on CONN (for SQL): its
 *		length, with *LINE pointing at it in libpq's memory, followed by a
 *		zero byte (the caller frees it with PQfreemem); 0 when no whole line
 *		has arrived yet and BLOCK is false; -1 when the data is over or
 *		failed, and the COPY's final result follows through afdw_get_result.
 *
 * Without BLOCK, nothing is read from the socket: the caller decides when
 * to read more (afdw_consume_input) or wait (afdw_wait_socket), so that a
 * batch of lines costs no system call beyond those that bring them.  With
 * BLOCK, the socket is waited on as afdw_wait_socket does.
 */
int
afdw_get_copy_line(AfdwConn *conn, char **line, bool block, const char *sql)
{
	for (;;)
	{
		int			len = PQgetCopyData(conn->conn, line, 1);

		if (len > 0)
			return len;
		if (len < 0)
			return -1;
		if (!block)
			return 0;
		afdw_wait_socket(conn, sql);
	}
}

/*
 * add_line
 *		Copy LINE, LEN bytes followed by a zero byte, into LINES.  LINE is
 *		libpq's when OWNED_BY_LIBPQ: given back before an error.
 */
static inline void
add_line(AfdwLines *lines, const char *line, int len, bool owned_by_libpq)
{
	Size		start = MAXALIGN(lines->used);
	Size		need = start + (Size) len + 1;

	Assert(lines->n < lines->max);
	if (unlikely(need > lines->size))
	{
		Size		newsize = Max(lines->size * 2, AFDW_LINES_INITIAL);
		char	   *newbuf;

		while (newsize < need)
			newsize *= 2;
		newbuf = MemoryContextAllocExtended(lines->cxt, newsize,
											MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
		if (newbuf == NULL)
		{
			if (owned_by_libpq)
				PQfreemem((void *) line);
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("A batch of rows of foreign table \"%s\" needed %zu bytes.",
							   lines->table, newsize)));
		}
		if (lines->used > 0)
			memcpy(newbuf, lines->buf, lines->used);
		if (lines->buf != NULL)
			pfree(lines->buf);
		lines->buf = newbuf;
		lines->size = newsize;
	}
	memcpy(lines->buf + start, line, (Size) len);
	lines->buf[start + len] = '\0';
	lines->offs[lines->n] = start;
	lines->lens[lines->n++] = len;
	lines->used = need;
}

/*
 * afdw_add_line
 *		Copy LINE, LEN bytes in memory of our own (a spilled row), into
 *		LINES.
 */
void
afdw_add_line(AfdwLines *lines, const char *line, int len)
{
	add_line(lines, line, len, false);
}

/*
 * afdw_read_copy_lines
 *		Add the lines of the COPY TO STDOUT running on CONN (for SQL) that
 *		have arrived to LINES, until it is full: AFDW_COPY_LINES when lines
 *		were added and more may follow, AFDW_COPY_NONE when LINES is empty,
 *		none has arrived and BLOCK is false, AFDW_COPY_END when the data is
 *		over or failed (the COPY's final result follows through
 *		afdw_get_result).
 *
 * Lines are read from the socket only as the batch needs them, so that TCP
 * flow control keeps the remote server from running far ahead; the socket
 * is read (and, with BLOCK, waited on) only while LINES is empty.  One
 * call per batch, not per line: the loop is the per-row path of a stream.
 */
AfdwCopyRead
afdw_read_copy_lines(AfdwConn *conn, AfdwLines *lines, bool block,
					 const char *sql)
{
	bool		consumed = false;

	for (;;)
	{
		char	   *buf = NULL;
		int			len = PQgetCopyData(conn->conn, &buf, 1);

		if (len > 0)
		{
			add_line(lines, buf, len, true);
			PQfreemem(buf);
			lines->received += len;
			if (lines->n >= lines->max)
				return AFDW_COPY_LINES;
			continue;
		}
		if (len < 0)
			return AFDW_COPY_END;
		if (lines->n > 0)
			return AFDW_COPY_LINES;
		if (!consumed)
		{
			afdw_consume_input(conn, sql);
			consumed = true;
			continue;
		}
		if (!block)
			return AFDW_COPY_NONE;
		afdw_wait_socket(conn, sql);
	}
}

/*
 * afdw_socket
 *		CONN's socket, for a wait set of the executor.
 */
pgsocket
afdw_socket(AfdwConn *conn)
{
	return PQsocket(conn->conn);
}

/*
 * afdw_discard_copy
 *		Read and drop the rest of the COPY TO STDOUT running on CONN (for
 *		SQL), serving interrupts; the COPY's final result follows.
 */
void
afdw_discard_copy(AfdwConn *conn, const char *sql)
{
	if (!discard_copy_data(conn, -1))
		afdw_report_remote_error(NULL, conn, sql);
}

/*
 * discard_copy_data
 *		Read and drop the rest of a COPY TO STDOUT, waiting at most until
 *		DEADLINE (-1: forever, reacting to interrupts); false if it could
 *		not be read to its end.
 */
static bool
discard_copy_data(AfdwConn *entry, TimestampTz deadline)
{
	PGconn	   *conn = entry->conn;

	for (;;)
	{
		char	   *buf = NULL;
		int			len = PQgetCopyData(conn, &buf, 1);

		if (len > 0)
		{
			PQfreemem(buf);
			continue;
		}
		if (len < 0)
			return true;		/* end of the data, or failure: results follow */
		if (!wait_for_input(entry, deadline))
			return false;
	}
}

/*
 * break_connection
 *		Stop trusting ENTRY's remote session, whose state is unknown: cut
 *		the connection (the server sees it close, libpq at its next read),
 *		so that nothing waits on the session any more, and keep it from
 *		being used again in this transaction; the end of the transaction
 *		drops it.  VIOLATION, if not NULL, says what the server did wrong.
 */
static void
break_connection(AfdwConn *entry, const char *violation)
{
	pgsocket	sock = PQsocket(entry->conn);

	if (violation != NULL && entry->violation == NULL)
		entry->violation = violation;
	afdw_session_hooks->lost(entry);
	if (sock != PGINVALID_SOCKET)
		(void) shutdown(sock, SHUT_RDWR);
}

/*
 * refuse_copy_in
 *		The server answered with CopyInResponse or CopyBothResponse (STATUS) to
 *		a command that is no COPY FROM STDIN of afdw_send_write's, so the
 *		server is not speaking the protocol.  Get libpq out of its COPY IN
 *		state, in which it would return the same result forever, and cut the
 *		connection.
 */
static void
refuse_copy_in(AfdwConn *entry, ExecStatusType status)
{
	(void) PQputCopyEnd(entry->conn, "async_fdw sent no COPY FROM STDIN");
	break_connection(entry, status == PGRES_COPY_BOTH ?
					 gettext_noop("It answered with CopyBothResponse, which async_fdw never asks for.") :
					 gettext_noop("It answered with CopyInResponse to a command that is not a COPY FROM STDIN."));
}

/*
 * afdw_result_lost
 *		Whether RES, a result of CONN, is an error of libpq's own (it has no
 *		SQLSTATE): the session is lost or out of step, and libpq may wait
 *		for an end that never comes.  If so, the connection is cut, and the
 *		caller reads no further result.
 */
bool
afdw_result_lost(AfdwConn *conn, PGresult *res)
{
	if (PQresultStatus(res) != PGRES_FATAL_ERROR ||
		PQresultErrorField(res, PG_DIAG_SQLSTATE) != NULL)
		return false;
	break_connection(conn, NULL);
	return true;
}

/*
 * afdw_protocol_violation
 *		The server answered SQL on CONN in a way the protocol does not allow
 *		there (DETAIL says how): cut the connection and raise the error.
 *
 * DETAIL is a whole sentence marked with gettext_noop, translated when the
 * error is raised: it is kept as the connection's violation, and every
 * later error on the connection repeats it.
 */
void
afdw_protocol_violation(AfdwConn *conn, const char *detail, const char *sql)
{
	break_connection(conn, detail);
	afdw_report_remote_error(NULL, conn, sql);
}

/*
 * afdw_report_remote_error
 *		Raise the error RES (or, without one, the connection's) as a local
 *		error carrying the remote SQLSTATE, message, detail, hint and context.
 *
 * RES is freed.  A failure of the connection itself, which has no SQLSTATE,
 * names the server.
 */
void
afdw_report_remote_error(PGresult *res, AfdwConn *conn, const char *sql)
{
	const char *f_sqlstate = NULL;
	char	   *primary = NULL;
	char	   *detail = NULL;
	char	   *hint = NULL;
	char	   *context = NULL;
	char	   *connmsg;
	bool		fatal = false;

	if (conn->violation != NULL)
	{
		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("protocol violation by server \"%s\"",
						NameStr(conn->servername)),
				 errdetail("%s", _(conn->violation)),
				 sql ? errcontext("remote SQL command: %s", sql) : 0));
	}

#define COPY_FIELD(f) \
	(PQresultErrorField(res, (f)) ? pstrdup(PQresultErrorField(res, (f))) : NULL)

	if (res != NULL)
	{
		const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);

		/* A FATAL error ends the remote session: report the lost session. */
		fatal = severity != NULL &&
			(strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0);
		f_sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (f_sqlstate != NULL)
			f_sqlstate = pstrdup(f_sqlstate);
		primary = COPY_FIELD(PG_DIAG_MESSAGE_PRIMARY);
		detail = COPY_FIELD(PG_DIAG_MESSAGE_DETAIL);
		hint = COPY_FIELD(PG_DIAG_MESSAGE_HINT);
		context = COPY_FIELD(PG_DIAG_CONTEXT);
		PQclear(res);
	}
#undef COPY_FIELD

	connmsg = pchomp(PQerrorMessage(conn->conn));

	/*
	 * Without a SQLSTATE, the error is libpq's: the connection failed, or
	 * the server sent what libpq could not make sense of (or an error that
	 * no server sends): nothing more is to be expected of the session.
	 */
	if (f_sqlstate == NULL || fatal || PQstatus(conn->conn) != CONNECTION_OK)
	{
		break_connection(conn, NULL);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost connection to server \"%s\"",
						NameStr(conn->servername)),
				 errdetail_internal("%s", primary ? primary : connmsg),
				 sql ? errcontext("remote SQL command: %s", sql) : 0));
	}

	ereport(ERROR,
			(errcode(MAKE_SQLSTATE(f_sqlstate[0], f_sqlstate[1], f_sqlstate[2],
								   f_sqlstate[3], f_sqlstate[4])),
			 errmsg_internal("%s", primary ? primary : connmsg),
			 detail ? errdetail_internal("%s", detail) : 0,
			 hint ? errhint("%s", hint) : 0,
			 context ? errcontext("%s", context) : 0,
			 sql ? errcontext("remote SQL command: %s", sql) : 0));
	pg_unreachable();
}

/*
 * wait_writable
 *		Wait until CONN's socket can take more data (or has some to read,
 *		which is read), serving interrupts, and checking for the
 *		postmaster's death between slices of at most 100 ms.  Needs no file
 *		descriptor, unlike a wait set.
 */
static void
wait_writable(AfdwConn *conn, const char *sql)
{
	struct pollfd pfd;
	bool		timed = (afdw_timed_scans > 0);
	instr_time	start;
	instr_time	end;

	pfd.fd = PQsocket(conn->conn);
	if (pfd.fd == PGINVALID_SOCKET)
		afdw_report_remote_error(NULL, conn, sql);
	pfd.events = POLLOUT | POLLIN;
	pfd.revents = 0;
	INSTR_TIME_SET_ZERO(start);
	if (timed)
		INSTR_TIME_SET_CURRENT(start);
	while (poll(&pfd, 1, 100) == 0 || (pfd.revents == 0 && errno == EINTR))
	{
		CHECK_FOR_INTERRUPTS();
		if (IsUnderPostmaster && !PostmasterIsAlive())
			ereport(FATAL,
					(errcode(ERRCODE_ADMIN_SHUTDOWN),
					 errmsg("terminating connection due to unexpected postmaster exit")));
	}
	if (timed)
	{
		INSTR_TIME_SET_CURRENT(end);
		INSTR_TIME_ACCUM_DIFF(afdw_wait_time, end, start);
	}
	CHECK_FOR_INTERRUPTS();
	if ((pfd.revents & (POLLIN | POLLERR | POLLHUP)) && !PQconsumeInput(conn->conn))
		afdw_report_remote_error(NULL, conn, sql);
}

/*
 * flush_copy
 *		Send what libpq holds of CONN's COPY data; with ALL, everything,
 *		waiting as long as the socket is full, else what the socket takes
 *		now.
 */
static void
flush_copy(AfdwConn *conn, bool all, const char *sql)
{
	for (;;)
	{
		int			rc = PQflush(conn->conn);

		if (rc < 0)
			afdw_report_remote_error(NULL, conn, sql);
		if (rc == 0 || !all)
			return;
		wait_writable(conn, sql);
	}
}

/*
 * copy_failed
 *		The server ended CONN's COPY FROM STDIN early (it failed): raise its
 *		error.
 */
static void
copy_failed(AfdwConn *conn, const char *sql)
{
	PGresult   *res;

	afdw_set_in_flight(conn, AFDW_IN_FLIGHT_PLAIN);
	(void) PQsetnonblocking(conn->conn, 0);
	res = afdw_wait_result(conn, sql);
	afdw_set_idle(conn);
	afdw_report_remote_error(res, conn, sql);
}

/*
 * afdw_await_copy_in
 *		Wait until the COPY FROM STDIN sent by afdw_send_write (SQL) on CONN
 *		takes data, reading the results of the commands before it; raise a
 *		remote error if they or the COPY fail.
 *
 * The connection is then non-blocking, so that the data is sent as the
 * socket takes it and no wait is without a check for interrupts.
 */
void
afdw_await_copy_in(AfdwConn *conn, const char *sql)
{
	for (;;)
	{
		PGresult   *res;

		while (!afdw_result_ready(conn))
			afdw_wait_socket(conn, sql);
		res = afdw_get_result(conn);
		if (res == NULL)
			afdw_protocol_violation(conn,
									gettext_noop("It did not answer a COPY FROM STDIN with CopyInResponse."),
									sql);
		if (PQresultStatus(res) == PGRES_COPY_IN)
		{
			PQclear(res);
			break;
		}
		if (PQresultStatus(res) != PGRES_COMMAND_OK &&
			PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			PGresult   *rest;

			/* The rest of the command is skipped: read its end. */
			afdw_set_in_flight(conn, AFDW_IN_FLIGHT_PLAIN);
			if (!afdw_result_lost(conn, res))
			{
				rest = afdw_wait_result(conn, sql);
				PQclear(rest);
			}
			afdw_set_idle(conn);
			afdw_report_remote_error(res, conn, sql);
		}
		PQclear(res);
	}
	if (PQsetnonblocking(conn->conn, 1) != 0)
		afdw_report_remote_error(NULL, conn, sql);
}

/*
 * afdw_put_copy
 *		Send LEN bytes of COPY data at DATA on CONN, waiting while the
 *		socket is full: the remote server takes the data as fast as it
 *		loads it, which is the flow control.
 */
void
afdw_put_copy(AfdwConn *conn, const char *data, int len, const char *sql)
{
	/* libpq's buffer takes it (it grows as needed)... */
	if (PQputCopyData(conn->conn, data, len) != 1)
		copy_failed(conn, sql);	/* the server failed the COPY: its error
								 * says why */
	/* ... and is emptied before more comes, which bounds the memory. */
	flush_copy(conn, true, sql);
}

/*
 * afdw_copy_open
 *		Whether CONN takes COPY data now.
 */
bool
afdw_copy_open(AfdwConn *conn)
{
	return conn->in_flight == AFDW_IN_FLIGHT_COPY_IN;
}

/*
 * afdw_copy_done
 *		Send the end of the COPY FROM STDIN on CONN (SQL), without waiting
 *		for the answer, which afdw_copy_result reads.
 */
void
afdw_copy_done(AfdwConn *conn, const char *sql)
{
	int			rc;

	while ((rc = PQputCopyEnd(conn->conn, NULL)) == 0)
		wait_writable(conn, sql);
	if (rc < 0)
		copy_failed(conn, sql);
	flush_copy(conn, true, sql);
	afdw_set_in_flight(conn, AFDW_IN_FLIGHT_PLAIN);
	if (PQsetnonblocking(conn->conn, 0) != 0)
		afdw_report_remote_error(NULL, conn, sql);
}

/*
 * afdw_copy_result
 *		The result of the COPY FROM STDIN on CONN (SQL), whose end was sent
 *		(afdw_copy_done): the command tag tells the rows.  A remote error is
 *		raised.
 */
PGresult *
afdw_copy_result(AfdwConn *conn, const char *sql)
{
	PGresult   *res;

	Assert(conn->in_flight != AFDW_IN_FLIGHT_COPY_IN);
	res = afdw_wait_result(conn, sql);
	afdw_set_idle(conn);
	if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
		afdw_report_remote_error(res, conn, sql);
	return res;
}

/*
 * afdw_copy_abandon
 *		Fail the COPY FROM STDIN under way on ENTRY (the statement is being
 *		aborted), never raising an error, waiting at most until DEADLINE
 *		for the socket; false if the connection must be dropped.  The
 *		server's answer is read by the caller.
 */
bool
afdw_copy_abandon(AfdwConn *entry, TimestampTz deadline)
{
	bool		queued = false;

	afdw_set_in_flight(entry, AFDW_IN_FLIGHT_PLAIN);
	for (;;)
	{
		long		wait;
		struct pollfd pfd;
		int			rc;

		if (!queued)
		{
			rc = PQputCopyEnd(entry->conn, "the local statement was aborted");
			if (rc < 0)
				return false;
			queued = (rc == 1);
		}
		if (queued)
		{
			rc = PQflush(entry->conn);
			if (rc < 0)
				return false;
			if (rc == 0)
				break;
		}
		wait = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (wait <= 0 || cleanup_interrupted())
			return false;
		pfd.fd = PQsocket(entry->conn);
		pfd.events = POLLOUT;
		pfd.revents = 0;
		(void) poll(&pfd, 1, (int) Min(wait, 100));
	}
	return PQsetnonblocking(entry->conn, 0) == 0;
}
