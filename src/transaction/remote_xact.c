/*-------------------------------------------------------------------------
 *
 * remote_xact.c
 *		The remote transactions of async_fdw while they run: opening them,
 *		the savepoint around each scan command, writes, deferred cursor
 *		CLOSEs, and what each connection keeps for its transaction.
 *
 * A connection opens a remote transaction at its first use inside a local
 * one, with savepoints mirroring local subtransactions, and the transaction
 * callbacks end it with the local transaction, whatever happens.  Every
 * command of a scan runs in a savepoint of its own (afdw_send_in_xact,
 * track_wrap), so that a failure the query may never need leaves the
 * remote transaction usable.  Cursors no scan needs are closed with a
 * later command.  Writes run without such a savepoint (afdw_send_write):
 * their failure is the statement's.  The small write of a statement that
 * is its own transaction is held and sent with the COMMIT
 * (afdw_defer_write).  xact_callbacks.c ends the remote transactions with the
 * local one; when a remote transaction or savepoint is over,
 * afdw_reset_xact_state forgets what the connection kept for it.  Scans
 * take their connections here (afdw_acquire_connection,
 * afdw_acquire_writer, afdw_get_connection), which makes the pool and
 * registers the transaction callbacks (xact_callbacks.c, which gives them
 * at load time) at the first one, and notes that the local transaction
 * used a connection: the callbacks have nothing to do in one that did not
 * (afdw_xact_got_connection).
 *
 * This is the session layer's front; the wire below it (connection_setup.c,
 * connection_pool.c, remote_commands.c, connection_budget.c) calls nothing
 * here: what it must tell this layer (each result read, a snapshot export's
 * result, a session gone) goes through the hooks given to afdw_connection_init
 * (session_hooks).
 *
 * Neighbours: connection_pool.c holds the connections (and reads a COMMIT left
 * unread before reusing one); remote_commands.c sends and waits;
 * shared_snapshot.c gives each remote transaction its server's shared
 * snapshot; scan.c sends its commands through afdw_send_in_xact, and
 * modify_rows.c, direct_modify.c and truncate.c theirs through
 * afdw_send_write; truncate.c ends the other remote transactions of a server
 * that only read before its TRUNCATE (afdw_end_read_transactions).
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

/* A cursor of a remote transaction. */
typedef struct RemoteCursor
{
	unsigned int number;		/* it is cN */
	int			level;			/* local nesting level that holds it */
	bool		closing;		/* no scan needs it: to be closed */
} RemoteCursor;

static void append_closes(AfdwConn *entry, StringInfo sql);
static void begin_xact(AfdwConn *conn);
static void start_checked(AfdwConn *entry, bool nested);
static void send_write_at(AfdwConn *conn, const char *sql, bool copy,
						  void *owner, AfdwDrainFn drain, int level);
static void note_write(AfdwConn *conn, int level);
static void set_savepoint_op(AfdwConn *conn, const char *sql, int level);
static void track_wrap(AfdwConn *conn, PGresult *res);
static void note_xact_failed(AfdwConn *conn, PGresult *res);
static void follow_riding_commit(AfdwConn *conn, PGresult *res);
static void session_result(AfdwConn *conn, PGresult *res);
static bool session_export(AfdwConn *conn, PGresult *res, bool raise);
static void session_forget(AfdwConn *entry);
static void session_lost(AfdwConn *entry);

/* What the wire tells this layer (connection_internal.h). */
static const AfdwSessionHooks session_hooks = {
	.result = session_result,
	.export = session_export,
	.forget = session_forget,
	.lost = session_lost,
};

/*
 * The transaction callbacks, which end the remote transactions with the
 * local ones (xact_callbacks.c, which gives them at load time), registered
 * at the first connection taken.
 */
static XactCallback xact_end_callback = NULL;
static SubXactCallback subxact_end_callback = NULL;

/* Whether any connection was used in the current local transaction. */
static bool xact_got_connection = false;

/*
 * afdw_set_xact_callbacks
 *		Keep the transaction callbacks of xact_callbacks.c (given at load
 *		time), for session_start to register at the first connection taken:
 *		a backend that never takes one registers none.
 */
void
afdw_set_xact_callbacks(XactCallback xact, SubXactCallback subxact)
{
	xact_end_callback = xact;
	subxact_end_callback = subxact;
}

/*
 * session_start
 *		A connection is about to be taken in the current local transaction:
 *		make the pool, with what the wire tells this layer, and register the
 *		transaction callbacks, once; and note that the callbacks have work
 *		to do at the transaction's end.
 */
static void
session_start(void)
{
	static bool registered = false;

	if (!registered)
	{
		Assert(xact_end_callback != NULL && subxact_end_callback != NULL);
		afdw_connection_init(&session_hooks);
		RegisterXactCallback(xact_end_callback, NULL);
		RegisterSubXactCallback(subxact_end_callback, NULL);
		registered = true;
	}
	xact_got_connection = true;
}

/*
 * afdw_xact_got_connection
 *		Whether a connection was used in the current local transaction: the
 *		transaction callbacks have work to do at its end only then.
 */
bool
afdw_xact_got_connection(void)
{
	return xact_got_connection;
}

/*
 * afdw_xact_forget_use
 *		The local transaction is over (its callback's last steps): the next
 *		one has used no connection yet.
 */
void
afdw_xact_forget_use(void)
{
	xact_got_connection = false;
}

/*
 * afdw_acquire_connection
 *		A connection of USER's pool for one scan, until
 *		afdw_release_connection (see afdw_pool_acquire); its remote
 *		transaction ends with the local one.
 */
AfdwConn *
afdw_acquire_connection(UserMapping *user)
{
	session_start();
	return afdw_pool_acquire(user);
}

/*
 * afdw_open_connection
 *		A connection of USER's pool, taken like afdw_acquire_connection's
 *		and open; given back when it cannot be opened.  For callers that
 *		hold it only across their own commands, with no cleanup of their
 *		own for an error in the handshake.
 */
AfdwConn *
afdw_open_connection(UserMapping *user)
{
	AfdwConn   *volatile conn = afdw_acquire_connection(user);

	PG_TRY();
	{
		conn = afdw_connection_ready(conn);
	}
	PG_CATCH();
	{
		afdw_release_connection(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return conn;
}

/*
 * afdw_get_connection
 *		A connection of USER's pool with the remote transaction open, for
 *		one-off work such as ANALYZE; release it when done (it is released
 *		when this fails).
 */
AfdwConn *
afdw_get_connection(UserMapping *user)
{
	AfdwConn   *volatile conn = afdw_open_connection(user);

	PG_TRY();
	{
		begin_xact(conn);
	}
	PG_CATCH();
	{
		afdw_release_connection(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return conn;
}

/*
 * afdw_acquire_writer
 *		The connection of USER's pool through which the current local
 *		transaction writes, taken like afdw_acquire_connection's (give it
 *		back with afdw_release_connection), open and ready.
 *
 * The first write of a mapping in a local transaction chooses it: the
 * connection that leads the server's remote transaction when there is one
 * and it exported no snapshot (it needs no import, so it never has to
 * move), else another connection of the pool, which imports the snapshot
 * or leads: a transaction that exported a snapshot cannot be prepared for
 * a two-phase commit, and the writer never exports one.  The scan of an
 * UPDATE's or DELETE's target takes it too, so that the rows it locks are
 * changed on the same remote transaction.
 */
AfdwConn *
afdw_acquire_writer(UserMapping *user)
{
	AfdwConn   *volatile entry;
	AfdwConn   *volatile exporter = NULL;

	session_start();
	entry = afdw_find_writer(user->umid);
	if (entry == NULL)
	{
		entry = afdw_snapshot_leader(user->serverid, user->umid);
		/* One that exported cannot be prepared: another one writes. */
		if (entry != NULL && afdw_snapshot_exporter(entry))
		{
			exporter = entry;
			entry = NULL;
		}
	}
	if (entry != NULL)
		afdw_take_open(entry);
	else
	{
		/*
		 * Held meanwhile, so that the pool hands out another if it can
		 * (and given back whether or not it could be opened).
		 */
		if (exporter != NULL)
			exporter->nusers++;
		PG_TRY();
		{
			entry = afdw_open_connection(user);
		}
		PG_FINALLY();
		{
			if (exporter != NULL)
				exporter->nusers--;
		}
		PG_END_TRY();
	}
	if (entry->role == AFDW_ROLE_READER)
		afdw_set_role(entry, AFDW_ROLE_WRITER);
	return entry;
}

/*
 * session_result
 *		RES is the next result of CONN's command in flight, NULL at its end
 *		(the wire's result hook): follow the savepoint around a scan's
 *		command and a PREPARE riding ahead of it.
 */
static void
session_result(AfdwConn *conn, PGresult *res)
{
	if (conn->opening > 0)
	{
		ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

		/* After a failure the rest of the message does not run. */
		if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
			conn->opening--;
		else
			conn->opening = 0;
	}
	track_wrap(conn, res);
	if (conn->preparing != 0)
		afdw_note_prepare(conn, res);
	if (conn->commit_rides)
		follow_riding_commit(conn, res);
}

/*
 * session_export
 *		RES is the result of the snapshot export that rode ahead of CONN's
 *		command (the wire's export hook): keep it; with RAISE, an unusable
 *		one raises an error, else false is returned.
 */
static bool
session_export(AfdwConn *conn, PGresult *res, bool raise)
{
	if (!raise)
		return afdw_store_export(conn, res);
	afdw_take_export(conn, res);
	return true;
}

/*
 * session_forget
 *		ENTRY's remote session is gone, or a new one is being opened (the
 *		wire's forget hook, the session layer's part of reset_session in
 *		connection_setup.c): its deferred write, its prepared transaction's
 *		name (the transaction is left to recovery), its prepared statements
 *		and its remote transaction are over, and the state of the next one
 *		is known.
 */
static void
session_forget(AfdwConn *entry)
{
	afdw_drop_deferred(entry);
	if (entry->prepared_gid != NULL)
	{
		pfree(entry->prepared_gid);
		entry->prepared_gid = NULL;
	}
	afdw_forget_statements(entry);
	afdw_reset_xact_state(entry, 1);
	entry->xact_state = AFDW_XACT_KNOWN;
}

/*
 * session_lost
 *		ENTRY's remote session was cut (the wire's lost hook): the state of
 *		its remote transaction is not known any more.
 */
static void
session_lost(AfdwConn *entry)
{
	afdw_xact_lost(entry);
}

/*
 * afdw_xact_changing
 *		A command that ends ENTRY's remote transaction or one of its
 *		savepoints is about to be sent: its state is not known until the
 *		answer comes (afdw_xact_changed).
 *
 * From any state: a command may also settle a state that was not known
 * (the ROLLBACK PREPARED of a PREPARE cut short).
 */
void
afdw_xact_changing(AfdwConn *entry)
{
	entry->xact_state = AFDW_XACT_CHANGING;
}

/*
 * afdw_xact_changed
 *		The answer came, a success: the state of ENTRY's remote transaction
 *		is what the caller sets xact_depth to.  A session cut meanwhile
 *		stays lost.
 */
void
afdw_xact_changed(AfdwConn *entry)
{
	Assert(entry->xact_state != AFDW_XACT_KNOWN);
	if (entry->xact_state == AFDW_XACT_CHANGING)
		entry->xact_state = AFDW_XACT_KNOWN;
}

/*
 * afdw_xact_lost
 *		The state of ENTRY's remote transaction is not known: a cleanup
 *		failed or was not tried, or the session was cut.  The connection
 *		cannot be used again in this local transaction, and is dropped at
 *		its end unless a command settles the state first.
 */
void
afdw_xact_lost(AfdwConn *entry)
{
	entry->xact_state = AFDW_XACT_LOST;
}

/*
 * xact_prefix
 *		The commands that must run on ENTRY before the caller's next one so
 *		that it runs in the remote transaction at the local nesting level
 *		LEVEL (the current one, or one of its ancestors when ENTRY has
 *		taken no savepoint past it: see afdw_run_write_at); "" if there are
 *		none.  Counts them as done.
 *
 * A connection's first use in a local transaction opens a REPEATABLE READ
 * (or SERIALIZABLE) transaction in the snapshot that the connections to
 * its server share (afdw_share_snapshot), with the session settings
 * through a transaction pooler.  NESTED is afdw_send_in_xact's.
 */
static char *
xact_prefix(AfdwConn *entry, bool nested, int level, int *nstatements)
{
	StringInfoData sql;

	initStringInfo(&sql);
	xact_got_connection = true;

	/* It ends a savepoint older than any the lines below may take. */
	if (entry->savepoint_op != NULL)
	{
		appendStringInfoString(&sql, entry->savepoint_op);
		pfree(entry->savepoint_op);
		entry->savepoint_op = NULL;
	}

	if (entry->xact_depth == 0 && sql.len == 0 &&
		afdw_snapshot_start_checked(entry))
		start_checked(entry, nested);

	if (entry->xact_depth == 0)
	{
		/* Busy from now on: its end sets idle_since again. */
		entry->idle_since = 0;
		appendStringInfoString(&sql, IsolationIsSerializable() ?
							   "START TRANSACTION ISOLATION LEVEL SERIALIZABLE" :
							   "START TRANSACTION ISOLATION LEVEL REPEATABLE READ");
		afdw_share_snapshot(entry, nested, &sql);
		/* After the snapshot's statements, which must come first. */
		if (entry->pooler == AFDW_POOLER_TRANSACTION)
			afdw_append_xact_settings(&sql);
		entry->xact_depth = 1;
	}

	Assert(level <= GetCurrentTransactionNestLevel());
	for (int l = Max(entry->xact_depth, 1) + 1; l <= level; l++)
		appendStringInfo(&sql, "%sSAVEPOINT s%d", sql.len > 0 ? "; " : "", l);
	entry->xact_depth = Max(entry->xact_depth, level);

	/* Cursors left by ended scans, statements by failed ones. */
	append_closes(entry, &sql);
	afdw_append_deallocs(entry, &sql);

	/* Statements are separated by "; ", which none of them contains. */
	*nstatements = 0;
	if (sql.len > 0)
	{
		*nstatements = 1;
		for (const char *p = sql.data; (p = strstr(p, "; ")) != NULL; p += 2)
			(*nstatements)++;
	}
	return sql.data;
}

/*
 * start_checked
 *		Open ENTRY's remote transaction now, the first of its server in a
 *		local transaction that read other servers before and whose snapshots
 *		must be one (afdw_snapshot_check_wanted): wait until the server has
 *		taken the snapshot, then check it against the commit numbers (see
 *		commit_fence.c; no need to hold the fence).  A round trip of its own,
 *		before the command that needs it.
 */
static void
start_checked(AfdwConn *entry, bool nested)
{
	StringInfoData sql;
	uint64		floor;

	initStringInfo(&sql);
	appendStringInfoString(&sql, IsolationIsSerializable() ?
						   "START TRANSACTION ISOLATION LEVEL SERIALIZABLE" :
						   "START TRANSACTION ISOLATION LEVEL REPEATABLE READ");
	afdw_share_snapshot(entry, nested, &sql);
	/* The first statement that needs a snapshot takes it. */
	appendStringInfoString(&sql, "; SELECT 1");
	if (entry->pooler == AFDW_POOLER_TRANSACTION)
		afdw_append_xact_settings(&sql);
	entry->idle_since = 0;
	entry->xact_depth = 1;
	afdw_run_command(entry, sql.data);
	pfree(sql.data);
	if (afdw_snapshot_floor(&floor))
		afdw_snapshot_check(entry, floor);
}

/*
 * check_xact_failed
 *		Raise the failure of CONN's remote transaction, if it failed (see
 *		AfdwConn): no command can run in it any more.
 */
static void
check_xact_failed(AfdwConn *conn)
{
	if (conn->xact_failed_msg != NULL)
		ereport(ERROR,
				(errcode(MAKE_SQLSTATE(conn->xact_failed_state[0], conn->xact_failed_state[1],
									   conn->xact_failed_state[2], conn->xact_failed_state[3],
									   conn->xact_failed_state[4])),
				 errmsg("remote transaction on server \"%s\" failed earlier in this transaction",
						NameStr(conn->servername)),
				 errdetail_internal("%s", conn->xact_failed_msg),
				 errhint("Roll back the local transaction and retry.")));
}

/*
 * begin_xact
 *		Open the remote transaction (and savepoints) on CONN now.
 */
static void
begin_xact(AfdwConn *conn)
{
	char	   *prefix;
	int			nstatements;

	afdw_make_idle(conn);
	prefix = xact_prefix(conn, true, GetCurrentTransactionNestLevel(),
						  &nstatements);
	if (prefix[0] != '\0')
		afdw_run_command(conn, prefix);
	pfree(prefix);
}

/*
 * afdw_begin_xact_async
 *		Send what opens CONN's remote transaction (and savepoints) now,
 *		without waiting: its server takes its snapshot with the other
 *		servers of the statement (visibility.c), before the scan that needs
 *		it can send its query.  The answers are read with the connection's
 *		next use.
 */
void
afdw_begin_xact_async(AfdwConn *conn)
{
	char	   *prefix;
	int			nstatements;

	afdw_make_idle(conn);
	check_xact_failed(conn);
	prefix = xact_prefix(conn, false, GetCurrentTransactionNestLevel(),
						  &nstatements);
	if (prefix[0] != '\0')
	{
		afdw_send_query(conn, prefix, 0, NULL);
		conn->opening = nstatements;
	}
	pfree(prefix);
}

/*
 * afdw_send_in_xact
 *		Send a scan's SQL (no parameters) in the remote transaction without
 *		waiting, in the savepoint afdw_ra, with whatever opens the
 *		transaction in the same send; OWNER reads the results, through DRAIN
 *		when someone else needs the connection.  NESTED says that the query
 *		runs inside another statement (a function, say), so that more
 *		connections to the server may join the remote transaction later.
 *		LAST says that the scan is its server's only one in the statement
 *		and SQL returns all its rows (or tells that there are more): then,
 *		when SQL opens the remote transaction of a statement that is its
 *		own transaction, the transaction's COMMIT rides in the same send.
 *
 * A failure inside the savepoint is the scan's to report when it needs
 * the rows; the connection rolls the savepoint back with its next command
 * (track_wrap), so that the remote transaction and its exported snapshot
 * stay usable for the rest of the query.
 *
 * With the COMMIT riding along, a lookup costs one round trip: the next
 * statement finds the connection idle, instead of waiting for the answer
 * to a COMMIT sent after the rows came.  The command needs no savepoint
 * then (nothing else runs in its transaction); the transaction ends when
 * the COMMIT's result comes (follow_riding_commit), or, when a statement
 * before it failed, with the local transaction as any other.
 */
void
afdw_send_in_xact(AfdwConn *conn, const char *sql, void *owner, AfdwDrainFn drain,
				  bool nested, bool last)
{
	char	   *prefix;
	StringInfoData full;
	int			nstatements;
	bool		commit;

	afdw_make_idle(conn);
	check_xact_failed(conn);
	commit = (last && !nested && conn->xact_depth == 0 &&
			  conn->savepoint_op == NULL && conn->role == AFDW_ROLE_READER &&
			  !conn->locks_rows && afdw_statement_is_transaction());
	/*
	 * Not when the session's idle timeout is to change (its first
	 * transaction, mostly): that setting follows the COMMIT, and must not be
	 * taken for made when a failure skips both.
	 */
	if (commit && afdw_idle_setting_changes(conn))
		commit = false;
	prefix = xact_prefix(conn, nested, GetCurrentTransactionNestLevel(),
						  &nstatements);
	initStringInfo(&full);
	appendStringInfoString(&full, prefix);
	if (prefix[0] != '\0')
		appendStringInfoString(&full, "; ");
	if (commit)
		appendStringInfo(&full, "%s; COMMIT TRANSACTION", sql);
	else
		appendStringInfo(&full, "SAVEPOINT afdw_ra; %s", sql);
	afdw_send_query(conn, full.data, 0, NULL);
	afdw_set_owner(conn, owner, drain);
	if (commit)
	{
		conn->commit_rides = true;
		conn->wrap = AFDW_WRAP_NONE;
		conn->opening = nstatements;
	}
	else
	{
		/* The SAVEPOINT afdw_ra too: it opens the wrap (track_wrap). */
		conn->opening = nstatements + 1;
		conn->wrap = AFDW_WRAP_PENDING;
		conn->wrap_level = GetCurrentTransactionNestLevel();
	}
	pfree(full.data);
	pfree(prefix);
}

/*
 * follow_riding_commit
 *		RES is the next result of CONN's command that carries the COMMIT of
 *		its remote transaction, NULL at its end: when the COMMIT's comes,
 *		the remote transaction is over (and its snapshot with it); when a
 *		statement before it fails, the COMMIT never runs, and the remote
 *		transaction, failed, ends with the local one.
 */
static void
follow_riding_commit(AfdwConn *conn, PGresult *res)
{
	ExecStatusType status;

	if (res == NULL)
	{
		conn->commit_rides = false;
		return;
	}
	status = PQresultStatus(res);
	if (status == PGRES_COMMAND_OK && strcmp(PQcmdStatus(res), "COMMIT") == 0)
	{
		conn->commit_rides = false;
		conn->xact_depth = 0;
		conn->cursor_number = 0;
		afdw_snapshot_ended(conn);
		return;
	}
	if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
		status != PGRES_COPY_OUT)
	{
		note_xact_failed(conn, res);
		conn->commit_rides = false;
	}
}

/*
 * afdw_send_write
 *		Send SQL, which writes (or starts a COPY FROM STDIN when COPY is
 *		true), on CONN, the writer of its user mapping, in the remote
 *		transaction, with whatever opens the transaction in the same send;
 *		OWNER reads the results (through DRAIN when someone else needs the
 *		connection), or the caller at once when OWNER is NULL.
 *
 * Unlike a scan's command it runs in no savepoint of its own: its failure
 * is the statement's, which fails the local transaction (or the local
 * savepoint, whose remote savepoint is rolled back with it).  From now on
 * every command of the user mapping goes through CONN, and its COMMIT is
 * waited for.
 */
void
afdw_send_write(AfdwConn *conn, const char *sql, bool copy, void *owner,
				AfdwDrainFn drain)
{
	send_write_at(conn, sql, copy, owner, drain,
				  GetCurrentTransactionNestLevel());
}

/*
 * send_write_at
 *		afdw_send_write, the write run in the remote transaction at the
 *		local nesting level LEVEL (see xact_prefix).
 */
static void
send_write_at(AfdwConn *conn, const char *sql, bool copy, void *owner,
			  AfdwDrainFn drain, int level)
{
	char	   *prefix;
	char	   *full;
	int			nstatements;

	Assert(conn->role != AFDW_ROLE_READER);
	afdw_make_idle(conn);
	check_xact_failed(conn);
	prefix = xact_prefix(conn, false, level, &nstatements);
	full = prefix[0] ? psprintf("%s; %s", prefix, sql) : pstrdup(sql);
	afdw_send_query(conn, full, 0, NULL);
	conn->opening = nstatements;
	if (copy)
		afdw_set_in_flight(conn, AFDW_IN_FLIGHT_COPY_AWAITED);
	if (owner != NULL)
		afdw_set_owner(conn, owner, drain);
	note_write(conn, level);
	pfree(full);
	pfree(prefix);
}

/*
 * final_write_commits
 *		Whether the COMMIT may ride with a final write on CONN
 *		(afdw_send_final_write): the statement is its own transaction, the
 *		write opens CONN's remote transaction, and nothing else of the
 *		transaction wrote (locally: it has no transaction ID; remotely: no
 *		other writer, no write kept for the COMMIT) or uses CONN's server.
 */
static bool
final_write_commits(AfdwConn *conn)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	bool		commit;

	afdw_make_idle(conn);
	commit = (afdw_statement_is_transaction() && conn->xact_depth == 0 &&
			  conn->savepoint_op == NULL && conn->deferred == NULL &&
			  conn->xact_failed_msg == NULL &&
			  !TransactionIdIsValid(GetTopTransactionIdIfAny()) &&
			  !afdw_idle_setting_changes(conn));
	if (!commit)
		return false;
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry == conn || entry->conn == NULL)
			continue;
		if ((entry->serverid == conn->serverid &&
			 (entry->nusers > 0 || entry->xact_depth > 0)) ||
			(entry->xact_depth > 0 && entry->role == AFDW_ROLE_WROTE) ||
			entry->deferred != NULL)
			commit = false;
	}
	return commit;
}

/*
 * afdw_send_final_write
 *		afdw_send_write for SQL, a write that its caller knows to be the
 *		statement's last remote work and only write: when the statement is
 *		its own local transaction, SQL opens CONN's remote transaction and
 *		nothing else of the transaction touched CONN's server, wrote or
 *		holds a local transaction ID, the remote COMMIT rides in the same
 *		send (one round trip), and true is returned.  Else it is sent as
 *		afdw_send_write sends it, and false is returned.
 *
 * The COMMIT runs on the remote server as soon as the write succeeds, so
 * the caller must read the write's result (and the COMMIT's) before the
 * statement ends, and nothing that may still fail the local transaction
 * may follow: no local write so far (the local commit of a transaction
 * with no transaction ID cannot fail), no other remote write (which would
 * commit later, or not at all), no other connection of the server (whose
 * snapshot import must run before the export's COMMIT).  A write that
 * fails skips the COMMIT; a COMMIT that fails (a deferred constraint)
 * fails the statement with its error.
 */
bool
afdw_send_final_write(AfdwConn *conn, const char *sql, void *owner,
					  AfdwDrainFn drain)
{
	char	   *with_commit;

	if (!final_write_commits(conn))
	{
		afdw_send_write(conn, sql, false, owner, drain);
		return false;
	}
	with_commit = psprintf("%s; COMMIT TRANSACTION", sql);
	afdw_send_write(conn, with_commit, false, owner, drain);
	conn->commit_rides = true;
	pfree(with_commit);
	return true;
}

/*
 * afdw_run_write
 *		Run SQL, which writes, on CONN (see afdw_send_write) and return its
 *		result, raising a remote error with SQL as the remote query.
 */
PGresult *
afdw_run_write(AfdwConn *conn, const char *sql)
{
	afdw_send_write(conn, sql, false, NULL, NULL);
	return afdw_command_result(conn, sql);
}

/*
 * note_write
 *		CONN, its user mapping's writer, has written at local nesting level
 *		LEVEL.
 */
static void
note_write(AfdwConn *conn, int level)
{
	if (conn->role != AFDW_ROLE_WROTE || level < conn->wrote_level)
		conn->wrote_level = level;
	afdw_set_role(conn, AFDW_ROLE_WROTE);
}

/*
 * afdw_writes_to_level
 *		The local subtransaction at LEVEL + 1 committed: ENTRY's writes it
 *		held are LEVEL's now.
 */
void
afdw_writes_to_level(AfdwConn *entry, int level)
{
	if (entry->role == AFDW_ROLE_WROTE && entry->wrote_level > level)
		entry->wrote_level = level;
}

/*
 * afdw_can_write_at
 *		Whether a write on CONN can still run in the remote transaction as
 *		it stands at LEVEL, an outer local nesting level than the current
 *		one: CONN has taken no remote savepoint past LEVEL.  Such a write
 *		stays when the subtransactions deeper than LEVEL roll back.
 */
bool
afdw_can_write_at(AfdwConn *conn, int level)
{
	afdw_make_idle(conn);
	return conn->xact_depth <= level;
}

/*
 * afdw_run_write_at
 *		afdw_run_write, SQL run in the remote transaction at the local
 *		nesting level LEVEL, which afdw_can_write_at allowed.
 */
PGresult *
afdw_run_write_at(AfdwConn *conn, const char *sql, int level)
{
	Assert(conn->xact_depth <= level);
	send_write_at(conn, sql, false, NULL, NULL, level);
	return afdw_command_result(conn, sql);
}

/*
 * afdw_defer_write
 *		Keep SQL, a write on CONN, to send with the COMMIT of the local
 *		transaction, in one round trip with the start of the remote
 *		transaction and its end; false (nothing done) where that is not
 *		possible.
 *
 * Only a statement that is its own local transaction (no transaction
 * block, no subtransaction) whose write is the first use of CONN in it:
 * the COMMIT follows the statement at once, so the client sees the write's
 * error as the statement's.  Any other command on CONN before then sends
 * the write first, alone (remote_commands.c, afdw_send_query).
 */
bool
afdw_defer_write(AfdwConn *conn, const char *sql)
{
	char	   *prefix;
	int			nstatements;

	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	bool		alone = true;

	Assert(conn->role != AFDW_ROLE_READER);
	if (IsTransactionBlock() || GetCurrentTransactionNestLevel() > 1 ||
		conn->xact_depth > 0 || afdw_is_busy(conn) || conn->deferred != NULL ||
		conn->xact_failed_msg != NULL)
		return false;

	/*
	 * Nothing else of the server in the transaction: its transaction then
	 * needs no snapshot import (which must run before the exporting
	 * connection's COMMIT) and no export.
	 */
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry != conn && entry->serverid == conn->serverid &&
			entry->conn != NULL && (entry->nusers > 0 || entry->xact_depth > 0))
			alone = false;
	}
	if (!alone)
		return false;
	prefix = xact_prefix(conn, false, GetCurrentTransactionNestLevel(),
						  &nstatements);
	conn->deferred = MemoryContextStrdup(afdw_conn_cxt,
										 psprintf("%s%s%s", prefix,
												  prefix[0] ? "; " : "", sql));
	note_write(conn, 1);
	pfree(prefix);
	return true;
}

/*
 * afdw_drop_deferred
 *		Forget ENTRY's deferred write: never sent (its transaction is over
 *		or its session gone; nothing was started remotely for it), or sent
 *		with the COMMIT, whose answer came.
 */
void
afdw_drop_deferred(AfdwConn *entry)
{
	if (entry->deferred_sent != NULL)
	{
		pfree(entry->deferred_sent);
		entry->deferred_sent = NULL;
	}
	if (entry->deferred == NULL)
		return;
	pfree(entry->deferred);
	entry->deferred = NULL;
	entry->xact_depth = 0;
}

/*
 * reader_in_use
 *		Whether ENTRY, in a remote transaction of the current local one,
 *		cannot end it now: a scan holds it, a scan's command is in flight,
 *		one of its cursors is open, it streams or loads; or its remote
 *		transaction must last as long as the local one, because it wrote or
 *		locks rows (LOCKS_HELD says which).  A failed transaction that only
 *		read can end: nothing of it is lost.
 */
static bool
reader_in_use(AfdwConn *entry, bool *locks_held)
{
	*locks_held = entry->role == AFDW_ROLE_WROTE || entry->locks_rows ||
		entry->in_flight == AFDW_IN_FLIGHT_COPY_IN ||
		entry->xact_state != AFDW_XACT_KNOWN;
	if (*locks_held)
		return true;
	if (entry->nusers > 0 || entry->streaming ||
		afdw_conn_owner(entry) != NULL || entry->held_result != NULL)
		return true;
	for (int i = 0; i < entry->ncursors; i++)
	{
		if (!entry->cursors[i].closing)
			return true;
	}
	return false;
}

/*
 * afdw_end_read_transactions
 *		Before WRITER runs WHAT, a statement whose remote lock conflicts
 *		with those of mere reads (TRUNCATE), commit the remote transaction
 *		of every other connection of this backend to the same server, of
 *		any user mapping, that only read in the current local transaction;
 *		fail if one of them cannot end yet.
 *
 * Such a transaction keeps the locks of what it read until it ends, which
 * would be at the local transaction's end: WHAT would wait for it for
 * ever, its own session holding it up.  A transaction that only read
 * loses nothing by ending early, and the local transaction's later work
 * on the server sees the same data: WRITER takes the shared snapshot first
 * (joining while its leader is still there) and leads the server's remote
 * transaction in place of a leader that ended, while the later commands
 * of WRITER's mapping go through WRITER once it wrote
 * (afdw_route_to_writer).  A transaction that wrote or locks rows cannot
 * end before the local one, nor can one that serves a query still
 * running (a cursor, or a scan that calls WHAT row by row): the error
 * says so instead of a wait that would never end.
 */
void
afdw_end_read_transactions(AfdwConn *writer, const char *what)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	List	   *readers = NIL;
	ListCell   *lc;
	TimestampTz now;

	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		bool		locks_held;

		if (entry == writer || entry->conn == NULL ||
			entry->serverid != writer->serverid || entry->xact_depth == 0)
			continue;
		if (reader_in_use(entry, &locks_held))
		{
			hash_seq_term(&scan);
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("cannot run %s on server \"%s\" while another connection of this session to it is in use",
							what, NameStr(writer->servername)),
					 locks_held ?
					 errdetail("A remote transaction of this session on the server wrote or locks rows, and holds its locks until the local transaction ends.") :
					 errdetail("A remote transaction on the server serves a query that is still running (an open cursor, or the scan of a statement that runs %s), and holds the locks of what it read.",
							   what),
					 errhint("Run %s in a transaction of its own, or after the queries of the server are done.",
							 what)));
		}
		readers = lappend(readers, entry);
	}
	if (readers == NIL)
		return;

	if (writer->xact_depth == 0)
		begin_xact(writer);

	/* The COMMITs of all of them overlap. */
	foreach(lc, readers)
	{
		StringInfoData sql;

		entry = (AfdwConn *) lfirst(lc);
		afdw_make_idle(entry);
		initStringInfo(&sql);
		appendStringInfoString(&sql, "COMMIT TRANSACTION");
		afdw_append_idle_setting(entry, &sql);
		afdw_xact_changing(entry);
		afdw_send_query(entry, sql.data, 0, NULL);
		pfree(sql.data);
	}
	now = GetCurrentTimestamp();
	foreach(lc, readers)
	{
		PGresult   *res;

		entry = (AfdwConn *) lfirst(lc);
		res = afdw_wait_result(entry, "COMMIT TRANSACTION");
		if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
			afdw_report_remote_error(res, entry, "COMMIT TRANSACTION");
		PQclear(res);
		afdw_xact_changed(entry);
		afdw_reset_xact_state(entry, 1);
		/* The server's idle timer runs from now (near_idle_timeout). */
		entry->idle_since = now;
		afdw_pass_leadership(entry, writer);
	}
	list_free(readers);
}

/*
 * afdw_note_row_locks
 *		A scan on CONN locks the remote rows it reads: the transaction's
 *		COMMIT is to be waited for.
 */
void
afdw_note_row_locks(AfdwConn *conn)
{
	conn->locks_rows = true;
}

/*
 * afdw_cancel_harmless
 *		Whether a cancel of CONN's command in flight can hit only that
 *		command: not while results of what was sent ahead of it in the same
 *		message are still to come (AfdwConn's opening: the start of the
 *		remote transaction, the savepoints, a deferred CLOSE, the RELEASE of
 *		the previous savepoint, the SAVEPOINT that wraps a scan's command);
 *		cancelled there, they would abort the remote transaction or leave a
 *		savepoint untaken.
 */
bool
afdw_cancel_harmless(AfdwConn *conn)
{
	Assert(conn->wrap != AFDW_WRAP_PENDING || conn->opening > 0 ||
		   PQtransactionStatus(conn->conn) != PQTRANS_ACTIVE);
	return conn->opening == 0;
}

/*
 * afdw_cancel_opened
 *		Cancel ENTRY's command in flight, once what was sent ahead of it has
 *		answered (afdw_cancel_harmless): until then its results are read
 *		and thrown away, at most until DEADLINE.  False if the wait failed,
 *		and nothing was cancelled.
 *
 * For the rollback of a local savepoint: its ROLLBACK TO SAVEPOINT then
 * finds the remote savepoint taken and the transaction around it whole.
 * The statements ahead are quick (a transaction start, a snapshot's export
 * or import, savepoints), and the wait is short.
 */
bool
afdw_cancel_opened(AfdwConn *entry, TimestampTz deadline)
{
	while (entry->opening > 0 &&
		   PQtransactionStatus(entry->conn) == PQTRANS_ACTIVE)
	{
		if (!afdw_cleanup_step(entry, deadline))
			return false;
	}
	afdw_cancel(entry);
	return true;
}

/*
 * track_wrap
 *		Follow RES, the next result of CONN's command in flight, through the
 *		savepoint that wraps a scan's command (see AfdwConn): when the
 *		command fails inside it, have the savepoint rolled back before the
 *		connection's next command; when a statement before it fails, note
 *		that the remote transaction failed.
 */
static void
track_wrap(AfdwConn *conn, PGresult *res)
{
	ExecStatusType status;

	if (conn->wrap == AFDW_WRAP_NONE)
		return;
	if (res == NULL)
	{
		/*
		 * The command succeeded: its savepoint is released with the
		 * connection's next command, or ended by the transaction's end.
		 */
		if (conn->wrap == AFDW_WRAP_OPEN)
			set_savepoint_op(conn, "RELEASE SAVEPOINT afdw_ra", conn->wrap_level);
		conn->wrap = AFDW_WRAP_NONE;
		return;
	}
	status = PQresultStatus(res);
	if (status == PGRES_COPY_OUT)
		return;					/* the COPY's own result comes later */
	if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
	{
		if (conn->wrap == AFDW_WRAP_OPEN)
			set_savepoint_op(conn,
							 "ROLLBACK TO SAVEPOINT afdw_ra; RELEASE SAVEPOINT afdw_ra",
							 conn->wrap_level);
		else
			note_xact_failed(conn, res);
		conn->wrap = AFDW_WRAP_NONE;
		return;
	}
	/*
	 * session_result has counted this result off opening: the last of the
	 * statements sent ahead of the scan's command is the SAVEPOINT.
	 */
	if (conn->wrap == AFDW_WRAP_PENDING && conn->opening == 0)
		conn->wrap = AFDW_WRAP_OPEN;
}

/*
 * note_xact_failed
 *		RES, an error, failed CONN's remote transaction: no command can run
 *		in it any more (check_xact_failed).
 */
static void
note_xact_failed(AfdwConn *conn, PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

	strlcpy(conn->xact_failed_state, state ? state : "08006",
			sizeof(conn->xact_failed_state));
	if (conn->xact_failed_msg != NULL)
		pfree(conn->xact_failed_msg);
	conn->xact_failed_msg = MemoryContextStrdup(afdw_conn_cxt,
												msg ? msg : "unknown failure");
}

/*
 * set_savepoint_op
 *		Have SQL, which ends the savepoint afdw_ra taken at local nesting
 *		level LEVEL, sent first thing with the connection's next command.
 */
static void
set_savepoint_op(AfdwConn *conn, const char *sql, int level)
{
	if (conn->savepoint_op != NULL)
		pfree(conn->savepoint_op);
	conn->savepoint_op = MemoryContextStrdup(afdw_conn_cxt, sql);
	conn->savepoint_level = level;
}

/*
 * afdw_forget_savepoint_op
 *		Drop the pending savepoint command if its level is over.
 */
void
afdw_forget_savepoint_op(AfdwConn *entry, int level)
{
	if (entry->savepoint_op != NULL && entry->savepoint_level >= level)
	{
		pfree(entry->savepoint_op);
		entry->savepoint_op = NULL;
	}
}

/*
 * forget_wrap
 *		The remote transaction ended or the connection was reset: nothing
 *		wraps anything any more, and nothing failed.
 */
static void
forget_wrap(AfdwConn *entry)
{
	entry->wrap = AFDW_WRAP_NONE;
	entry->opening = 0;
	entry->commit_rides = false;
	if (entry->xact_failed_msg != NULL)
	{
		pfree(entry->xact_failed_msg);
		entry->xact_failed_msg = NULL;
	}
}

/*
 * afdw_next_cursor_number
 *		A cursor number unique within the connection's remote transaction.
 */
unsigned int
afdw_next_cursor_number(AfdwConn *conn)
{
	RemoteCursor *cur;

	/* It is declared at the current level, with the command it is for. */
	if (conn->ncursors >= conn->maxcursors)
	{
		int			newmax = Max(conn->maxcursors * 2, 8);

		conn->cursors = conn->cursors == NULL ?
			MemoryContextAlloc(afdw_conn_cxt, sizeof(RemoteCursor) * newmax) :
			repalloc(conn->cursors, sizeof(RemoteCursor) * newmax);
		conn->maxcursors = newmax;
	}
	cur = &conn->cursors[conn->ncursors++];
	cur->number = ++conn->cursor_number;
	cur->level = GetCurrentTransactionNestLevel();
	cur->closing = false;
	return cur->number;
}

/*
 * afdw_close_cursor_later
 *		Cursor CURSOR of CONN is no longer needed: close it with the
 *		connection's next command that opens a cursor, at no extra round
 *		trip, or let the end of the transaction close it.
 */
void
afdw_close_cursor_later(AfdwConn *conn, unsigned int cursor)
{
	/*
	 * The CLOSE is not sent now, but a cursor whose session is gone cannot
	 * be closed: say so now, as the CLOSE would.
	 */
	if (!afdw_connection_alive(conn))
		afdw_report_remote_error(NULL, conn, NULL);

	/* Not found: the rollback of its savepoint closed it. */
	for (int i = 0; i < conn->ncursors; i++)
	{
		if (conn->cursors[i].number == cursor)
			conn->cursors[i].closing = true;
	}
}

/*
 * append_closes
 *		Append to SQL (commands separated by "; ") the CLOSE of every
 *		cursor no scan needs any more, and forget those cursors.
 */
static void
append_closes(AfdwConn *entry, StringInfo sql)
{
	int			kept = 0;

	for (int i = 0; i < entry->ncursors; i++)
	{
		RemoteCursor *cur = &entry->cursors[i];

		if (!cur->closing)
		{
			entry->cursors[kept++] = *cur;
			continue;
		}
		appendStringInfo(sql, "%sCLOSE c%u", sql->len > 0 ? "; " : "",
						 cur->number);
	}
	entry->ncursors = kept;
}

/*
 * forget_cursors_from
 *		The remote savepoint of local level LEVEL is rolled back: so are
 *		the cursors declared at that level or deeper, while those of outer
 *		levels stay open.
 */
static void
forget_cursors_from(AfdwConn *entry, int level)
{
	int			kept = 0;

	for (int i = 0; i < entry->ncursors; i++)
	{
		if (entry->cursors[i].level < level)
			entry->cursors[kept++] = entry->cursors[i];
	}
	entry->ncursors = kept;
}

/*
 * afdw_cursors_to_level
 *		The remote savepoints deeper than LEVEL are released: their cursors
 *		now belong to LEVEL.
 */
void
afdw_cursors_to_level(AfdwConn *entry, int level)
{
	for (int i = 0; i < entry->ncursors; i++)
	{
		if (entry->cursors[i].level > level)
			entry->cursors[i].level = level;
	}
}

/*
 * afdw_forget_closes
 *		The remote transaction is over, and took every cursor with it.
 */
void
afdw_forget_closes(AfdwConn *entry)
{
	entry->ncursors = 0;
}

/*
 * afdw_reset_xact_state
 *		Forget what ENTRY's remote transaction held at local nesting level
 *		LEVEL and deeper, now over: LEVEL 1 when the whole remote
 *		transaction is (ended, or its session gone), the level of a local
 *		subtransaction when the rollback of its remote savepoint ends it.
 *
 * Any level: the owner of the command in flight, the stream, the cursors
 * and the pending savepoint command of those levels, and whether the
 * connection wrote when all its writes were at those levels.  Level 1 also:
 * the transaction's depth and cursor numbers, its row locks, its writes
 * (the writer chosen, and whether it wrote), the savepoint of the last scan
 * command and the failure of the transaction.  A rolled back savepoint
 * leaves these to the transaction (a failure before it, row locks taken
 * outside it, or the writer's place, still count).
 *
 * Not reset here: the command in flight (in_flight, export_pending,
 * held_result) and the health of the session (xact_state, invalidated,
 * violation), by which callers decide whether the connection can be kept;
 * reset_session (connection_setup.c) resets them with the session.
 */
void
afdw_reset_xact_state(AfdwConn *entry, int level)
{
	entry->owner = NULL;
	entry->drain = NULL;
	entry->streaming = false;
	if (level > 1)
	{
		forget_cursors_from(entry, level);
		afdw_forget_savepoint_op(entry, level);
		/* Its writes all undone: a writer that has not written. */
		if (entry->role == AFDW_ROLE_WROTE && entry->wrote_level >= level)
		{
			afdw_set_role(entry, AFDW_ROLE_WRITER);
			entry->wrote_level = 0;
		}
		return;
	}
	afdw_forget_closes(entry);
	afdw_forget_savepoint_op(entry, 0);
	entry->xact_depth = 0;
	entry->cursor_number = 0;
	entry->locks_rows = false;
	afdw_set_role(entry, AFDW_ROLE_READER);
	forget_wrap(entry);
}
