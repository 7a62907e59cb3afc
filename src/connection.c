/*-------------------------------------------------------------------------
 *
 * connection.c
 *		Remote connections of async_fdw and the remote transactions on them.
 *
 * A backend keeps its connections across local transactions, keyed by user
 * mapping.  A connection opens a remote transaction at its first use inside
 * a local one, with savepoints mirroring local subtransactions, and the
 * transaction callbacks end it with the local transaction, whatever happens.
 * Each connection also knows the statements prepared in its remote session.
 *
 * The connections of one server in a local transaction share a snapshot:
 * the first exports it in the same send as its first command, the others
 * import it.  Every reader of a connection's results goes through
 * afdw_get_result, which takes in the export's result on the way, and
 * follows each scan command through its remote savepoint (track_wrap).
 * Each connection counts against the backend's file descriptors; past
 * them, scans share the connections open.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>
#include <sys/socket.h>

#include "access/xact.h"
#include "catalog/pg_user_mapping.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "common/hashfn.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "async_fdw.h"

/*
 * Session settings every connection gets in its startup packet, so that
 * values travel in formats both sides read alike and remote SQL resolves
 * names in pg_catalog only.  They cost no round trip.
 */
#define AFDW_SESSION_OPTIONS \
	"-c search_path=pg_catalog -c TimeZone=UTC -c DateStyle=ISO " \
	"-c IntervalStyle=postgres -c extra_float_digits=3"

/*
 * How long cleanup may wait for remote servers: after an abort, for all of
 * them together; for the answer to a COMMIT that was not waited for, for
 * one.
 */
#define AFDW_CLEANUP_TIMEOUT_MS		30000

/* Hash key of a connection: a user mapping and a slot in its pool. */
typedef struct AfdwConnKey
{
	Oid			umid;
	int			slot;
} AfdwConnKey;

/* One remote connection and the state of its remote transaction. */
struct AfdwConn
{
	AfdwConnKey key;			/* hash key */
	PGconn	   *conn;			/* NULL when not connected */
	Oid			serverid;
	NameData	servername;		/* for messages */
	uint32		server_hash;	/* syscache hash values, for invalidation */
	uint32		mapping_hash;
	int			xact_depth;		/* 0: no remote transaction; 1: one is
								 * open; n > 1: savepoints s2 .. sn too */
	bool		changing_xact_state;	/* a transaction command was cut
										 * short: the remote state is unknown */
	bool		invalidated;	/* server or mapping changed: reconnect */
	bool		keep;			/* keep_connections */
	unsigned int cursor_number; /* last cursor number used in this xact */

	/*
	 * The cursors of the remote transaction, each with the local nesting
	 * level whose remote savepoint holds it; those no scan needs any more
	 * are closed by the next command that opens a cursor, or ended by the
	 * transaction or the rollback of their savepoint.
	 */
	struct RemoteCursor *cursors;
	int			ncursors;
	int			maxcursors;
	bool		commit_pending; /* COMMIT sent, answer not read yet */
	bool		locks_rows;		/* a scan of this transaction locks remote
								 * rows: its COMMIT is waited for */
	bool		streaming;		/* a scan streams on it: not to be shared */
	char	   *savepoint_op;	/* RELEASE or ROLLBACK TO of the savepoint
								 * around the last stream, to send first
								 * with the next command */
	int			savepoint_level;	/* local nesting level it belongs to */
	int			nusers;			/* scans holding this connection */

	/*
	 * The command in flight starts with a snapshot export (the transaction
	 * leader's, in the same send as its first command), whose result has
	 * not been read yet.  afdw_get_result takes it in; held_result keeps an
	 * error that await_export read ahead of the export, for the owner.
	 */
	bool		export_pending;
	PGresult   *held_result;

	/*
	 * Every command of a scan runs in the savepoint afdw_ra, taken after
	 * the statements that open the transaction (wrap_skip of them), so
	 * that a failure of work the query may never need leaves the remote
	 * transaction usable: the savepoint is rolled back with the next
	 * command, and the scan raises the error only if it needs the rows.  A
	 * savepoint whose command succeeded is released with the next command,
	 * or ended by COMMIT at no cost.  wrap_pending: the SAVEPOINT's result
	 * is still to come; wrap_open: it came, the command's end has not.  A
	 * failure before the savepoint leaves the remote transaction failed
	 * (xact_failed, with the SQLSTATE and message of the failure).
	 */
	int			wrap_skip;
	bool		wrap_pending;
	bool		wrap_open;
	int			wrap_level;		/* local nesting level of the savepoint */
	bool		xact_failed;
	char		xact_failed_state[6];
	char	   *xact_failed_msg;

	/*
	 * A command whose results are not all read yet.  Its owner, if still
	 * there, reads them through drain(); otherwise they are thrown away
	 * before the connection's next use.
	 */
	bool		busy;
	void	   *owner;
	AfdwDrainFn drain;

	/*
	 * What waits on the socket: the latch, postmaster death and the socket,
	 * kept for the connection's life so that a wait costs one system call.
	 */
	WaitEventSet *waitset;
	pgsocket	waitset_sock;

	/*
	 * Statements prepared in the remote session (PreparedStatements by
	 * hash of their text), with their memory; names are afdw_s<number>
	 * and never used twice in a session.
	 */
	HTAB	   *prepared;
	MemoryContext prepared_cxt;
	unsigned int statement_number;

	/*
	 * The statement whose PREPARE is part of the command in flight (0:
	 * none), known to exist once its PREPARE's result comes in; and the
	 * "DEALLOCATE afdw_sN; " of statements no longer used, sent with a
	 * later command in a healthy remote transaction, or after the end of
	 * the remote transaction.  Prepared statements outlive transactions
	 * and rollbacks, so nothing else removes them.
	 */
	unsigned int preparing;
	char	   *preparing_sql;
	StringInfoData deallocs;

	/*
	 * How the remote server broke the protocol, once it did (the
	 * connection is then cut, and every later error on it says this).
	 */
	const char *violation;
};

/* A cursor of a remote transaction. */
typedef struct RemoteCursor
{
	unsigned int number;		/* it is cN */
	int			level;			/* local nesting level that holds it */
	bool		closing;		/* no scan needs it: to be closed */
} RemoteCursor;

/* A statement prepared in a remote session. */
typedef struct PreparedStatement
{
	uint32		hash;			/* hash key: hash of the text */
	char	   *sql;
	unsigned int number;
} PreparedStatement;

/* Statements kept prepared per remote session, at most. */
#define AFDW_MAX_PREPARED	1000

/*
 * The remote snapshot of one server in the current local transaction: the
 * first connection to the server (the leader) exports it when more than
 * one connection needs it, the others import it.
 */
typedef struct ServerSnapshot
{
	Oid			serverid;		/* hash key */
	AfdwConn   *leader;
	char		snapshot[64];	/* exported snapshot id, or "" */
} ServerSnapshot;

/*
 * All connections of this backend.  The hash and its entries live in
 * TopMemoryContext's child "async_fdw connections" because connections
 * outlive transactions; entries are never removed, so pointers to them
 * stay valid.
 */
static HTAB *conn_hash = NULL;
static MemoryContext conn_cxt = NULL;

/* ServerSnapshots of the current local transaction, or NULL. */
static HTAB *snapshot_hash = NULL;

/* Whether any connection was used in the current local transaction. */
static bool xact_got_connection = false;

static void connect_entry(AfdwConn *entry, UserMapping *user);
static AfdwConn *least_used_open(Oid umid);
static bool reserve_fd(bool optional);
static void disconnect_entry(AfdwConn *entry);
static void xact_callback(XactEvent event, void *arg);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);
static void inval_callback(Datum arg, int cacheid, uint32 hashvalue);
static bool abort_remote(AfdwConn *entry, const char *sql, TimestampTz deadline);
static bool wait_cleanup(AfdwConn *entry, TimestampTz deadline, bool ignore_errors);
static void forget_closes(AfdwConn *entry);
static void forget_cursors_from(AfdwConn *entry, int level);
static void cursors_to_level(AfdwConn *entry, int level);
static void append_closes(AfdwConn *entry, StringInfo sql);
static void append_deallocs(AfdwConn *entry, StringInfo sql);
static void forget_deallocs(AfdwConn *entry);
static bool connection_alive(AfdwConn *entry);
static bool valid_snapshot_name(const char *name);
static void check_leader(AfdwConn *leader);
static void note_prepare(AfdwConn *conn, PGresult *res);
static void forget_savepoint_op(AfdwConn *entry, int level);
static void forget_wrap(AfdwConn *entry);
static void set_savepoint_op(AfdwConn *conn, const char *sql, int level);
static bool discard_copy_data(AfdwConn *entry, TimestampTz deadline);
static int	wait_readable(AfdwConn *entry, long timeout);
static bool wait_for_input(AfdwConn *entry, TimestampTz deadline);

/*
 * afdw_connection_init
 *		Create the connection hash and register the callbacks, once.
 */
void
afdw_connection_init(void)
{
	HASHCTL		ctl;

	if (conn_hash != NULL)
		return;

	ctl.keysize = sizeof(AfdwConnKey);
	ctl.entrysize = sizeof(AfdwConn);
	conn_cxt = AllocSetContextCreate(TopMemoryContext, "async_fdw connections",
									 ALLOCSET_SMALL_SIZES);
	ctl.hcxt = conn_cxt;
	conn_hash = hash_create("async_fdw connections", 16, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, inval_callback, (Datum) 0);
}

/*
 * socket_has_data
 *		True if the server sent something on an idle connection.
 *
 * Nothing is expected while no command runs: data or end-of-file means
 * the server ended the session (restart, pg_terminate_backend, idle
 * timeout), which libpq only notices at the next use.
 */
static bool
socket_has_data(PGconn *conn)
{
	struct pollfd pfd;

	pfd.fd = PQsocket(conn);
	pfd.events = POLLIN;
	pfd.revents = 0;
	if (pfd.fd < 0)
		return true;
	return poll(&pfd, 1, 0) > 0;
}

/*
 * usable_idle
 *		True if ENTRY, outside a remote transaction, can be used as it is.
 */
static bool
usable_idle(AfdwConn *entry)
{
	return !entry->invalidated && !entry->changing_xact_state &&
		PQstatus(entry->conn) == CONNECTION_OK &&
		PQtransactionStatus(entry->conn) == PQTRANS_IDLE &&
		!socket_has_data(entry->conn);
}

/*
 * finish_commit
 *		Read the answer to a COMMIT that was not waited for.  It was the
 *		commit of a transaction that only read: whatever it says, nothing
 *		is lost, but a connection that fails here is replaced.
 */
static void
finish_commit(AfdwConn *entry)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   AFDW_CLEANUP_TIMEOUT_MS);

	entry->commit_pending = false;
	entry->busy = false;

	/*
	 * The wait serves interrupts: if one cuts it short, the answer is still
	 * on its way, and the end of the transaction drops the connection.
	 */
	entry->changing_xact_state = true;
	if (!wait_cleanup(entry, deadline, true) ||
		PQtransactionStatus(entry->conn) != PQTRANS_IDLE)
		disconnect_entry(entry);
	else
		entry->changing_xact_state = false;
}

/*
 * afdw_acquire_connection
 *		A connection of USER's pool for one scan, until
 *		afdw_release_connection.
 *
 * Each scan gets a connection of its own while the pool has fewer than
 * the server's max_connections; past that, scans share the connections
 * with the fewest users and take turns on them.  A connection that broke
 * or whose server or user mapping changed is replaced when no remote
 * transaction is open on it.
 */
AfdwConn *
afdw_acquire_connection(UserMapping *user)
{
	ForeignServer *server = GetForeignServer(user->serverid);
	/* A value stored before the validator bounded it is bounded here. */
	int			max = Min(afdw_int_option(server->options, "max_connections",
										  AFDW_DEFAULT_MAX_CONNECTIONS),
						  AFDW_MAX_MAX_CONNECTIONS);
	AfdwConn   *best = NULL;
	AfdwConn   *entry;

	afdw_connection_init();
	xact_got_connection = true;

	/*
	 * An unused open connection, else an unused slot, else the least used
	 * one that no scan streams on.  Streams are never shared: when every
	 * connection streams, one more is opened past max_connections.
	 */
	for (int slot = 0; slot < max || best == NULL; slot++)
	{
		AfdwConnKey key;
		bool		found;

		key.umid = user->umid;
		key.slot = slot;
		entry = hash_search(conn_hash, &key, HASH_ENTER, &found);
		if (!found)
		{
			memset(((char *) entry) + sizeof(AfdwConnKey), 0,
				   sizeof(AfdwConn) - sizeof(AfdwConnKey));
			entry->conn = NULL;
		}

		if (entry->streaming && entry->nusers > 0)
			continue;
		if (entry->nusers == 0 && entry->conn != NULL)
		{
			best = entry;
			break;
		}
		if (entry->nusers == 0)
		{
			if (best == NULL || best->nusers > 0)
				best = entry;
			continue;
		}
		if (best == NULL || entry->nusers < best->nusers)
			best = entry;
	}
	entry = best;

	if (entry->conn != NULL && entry->commit_pending)
		finish_commit(entry);
	if (entry->conn != NULL && entry->xact_depth == 0 && !entry->busy &&
		!usable_idle(entry))
		disconnect_entry(entry);

	if (entry->conn != NULL &&
		(entry->changing_xact_state || PQstatus(entry->conn) != CONNECTION_OK))
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost connection to server \"%s\"",
						NameStr(entry->servername)),
				 errdetail("The remote transaction of this local transaction is lost."),
				 errhint("Roll back the local transaction and retry.")));

	/*
	 * Each connection holds a file descriptor, counted against the
	 * backend's limit as PostgreSQL counts its own.  Without one to spare,
	 * a scan shares an open connection; only the first connection to the
	 * server is required.
	 */
	if (entry->conn == NULL && !reserve_fd(least_used_open(user->umid) != NULL))
	{
		AfdwConn   *shared = least_used_open(user->umid);

		if (shared == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to server \"%s\"", server->servername),
					 errdetail("There are too many open files on the local server."),
					 errhint("Raise the local server's \"max_files_per_process\" setting or its \"ulimit -n\" limit.")));
		entry = shared;
	}
	else if (entry->conn == NULL)
	{
		PG_TRY();
		{
			connect_entry(entry, user);
		}
		PG_CATCH();
		{
			ReleaseExternalFD();
			PG_RE_THROW();
		}
		PG_END_TRY();
	}

	entry->nusers++;
	return entry;
}

/*
 * reserve_fd
 *		Count one more file descriptor against the backend's limit for a
 *		connection; false if there is none to spare.  An OPTIONAL connection
 *		is opened only while descriptors remain beyond its own and its wait
 *		set's, since the executor's waits need some too (an asynchronous
 *		Append cannot wait without one).
 */
static bool
reserve_fd(bool optional)
{
	int			got = 0;
	int			need = optional ? 3 : 1;

	while (got < need && AcquireExternalFD())
		got++;
	if (got < need)
	{
		while (got-- > 0)
			ReleaseExternalFD();
		return false;
	}
	while (got-- > 1)
		ReleaseExternalFD();
	return true;
}

/*
 * least_used_open
 *		The open connection of user mapping UMID with the fewest users,
 *		preferring one that no scan streams on; NULL if none is open.
 */
static AfdwConn *
least_used_open(Oid umid)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	AfdwConn   *best = NULL;

	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->key.umid != umid || entry->conn == NULL ||
			entry->changing_xact_state)
			continue;
		if (best == NULL ||
			(best->streaming && !entry->streaming) ||
			(best->streaming == entry->streaming && entry->nusers < best->nusers))
			best = entry;
	}
	return best;
}

/*
 * afdw_release_connection
 *		Give back a connection taken with afdw_acquire_connection.
 */
void
afdw_release_connection(AfdwConn *conn)
{
	if (conn->nusers > 0)
		conn->nusers--;
}

/*
 * afdw_get_connection
 *		A connection of USER's pool with the remote transaction open, for
 *		one-off work such as ANALYZE; release it when done.
 */
AfdwConn *
afdw_get_connection(UserMapping *user)
{
	AfdwConn   *conn = afdw_acquire_connection(user);

	afdw_begin_xact(conn);
	return conn;
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
			MemoryContextAlloc(conn_cxt, sizeof(RemoteCursor) * newmax) :
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
 * afdw_prepared_statement
 *		The number of the statement prepared in CONN's session with text
 *		SQL, or 0 if there is none.
 */
unsigned int
afdw_prepared_statement(AfdwConn *conn, const char *sql)
{
	uint32		hash = hash_bytes((const unsigned char *) sql, strlen(sql));
	PreparedStatement *ps;

	if (conn->prepared == NULL)
		return 0;
	ps = hash_search(conn->prepared, &hash, HASH_FIND, NULL);
	return (ps != NULL && strcmp(ps->sql, sql) == 0) ? ps->number : 0;
}

/*
 * afdw_next_statement_number
 *		A number for a new statement to prepare in CONN's session, or 0
 *		when the session has as many as it may keep.
 */
unsigned int
afdw_next_statement_number(AfdwConn *conn)
{
	if (conn->prepared != NULL &&
		hash_get_num_entries(conn->prepared) >= AFDW_MAX_PREPARED)
		return 0;
	return ++conn->statement_number;
}

/*
 * queue_dealloc
 *		Statement NUMBER of CONN's session is no longer used: deallocate it
 *		with a later command.
 */
static void
queue_dealloc(AfdwConn *conn, unsigned int number)
{
	if (conn->deallocs.data == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(conn_cxt);

		initStringInfo(&conn->deallocs);
		MemoryContextSwitchTo(old);
	}
	appendStringInfo(&conn->deallocs, "DEALLOCATE afdw_s%u; ", number);
}

/*
 * afdw_remember_statement
 *		Note that statement NUMBER, with text SQL, is prepared in CONN's
 *		session (once its PREPARE succeeded).
 */
void
afdw_remember_statement(AfdwConn *conn, const char *sql, unsigned int number)
{
	uint32		hash = hash_bytes((const unsigned char *) sql, strlen(sql));
	PreparedStatement *ps;
	bool		found;

	if (conn->prepared == NULL)
	{
		HASHCTL		ctl;

		conn->prepared_cxt = AllocSetContextCreate(conn_cxt,
												   "async_fdw prepared statements",
												   ALLOCSET_SMALL_SIZES);
		ctl.keysize = sizeof(uint32);
		ctl.entrysize = sizeof(PreparedStatement);
		ctl.hcxt = conn->prepared_cxt;
		conn->prepared = hash_create("async_fdw prepared statements", 64, &ctl,
									 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	ps = hash_search(conn->prepared, &hash, HASH_ENTER, &found);
	if (found)
	{
		/*
		 * Another text of the same hash is replaced: its statement, which
		 * stays in the remote session, goes.
		 */
		if (ps->number != number)
			queue_dealloc(conn, ps->number);
		pfree(ps->sql);
	}
	ps->sql = MemoryContextStrdup(conn->prepared_cxt, sql);
	ps->number = number;
}

/*
 * afdw_forget_statement
 *		Stop using the statement prepared in CONN's session with text SQL:
 *		an EXECUTE of it failed, maybe because the remote table changed
 *		under its plan.  The next use prepares it again, under a new name.
 */
void
afdw_forget_statement(AfdwConn *conn, const char *sql)
{
	uint32		hash = hash_bytes((const unsigned char *) sql, strlen(sql));
	PreparedStatement *ps;

	if (conn->prepared == NULL)
		return;
	ps = hash_search(conn->prepared, &hash, HASH_FIND, NULL);
	if (ps != NULL && strcmp(ps->sql, sql) == 0)
	{
		/* It stays in the remote session until deallocated there. */
		queue_dealloc(conn, ps->number);
		pfree(ps->sql);
		(void) hash_search(conn->prepared, &hash, HASH_REMOVE, NULL);
	}
}

/*
 * afdw_preparing_statement
 *		The command just sent on CONN prepares statement NUMBER with text
 *		SQL: remember it as soon as its PREPARE is seen to succeed, whoever
 *		reads the results, since it stays in the session even if the rest
 *		of the command fails.
 */
void
afdw_preparing_statement(AfdwConn *conn, const char *sql, unsigned int number)
{
	if (conn->preparing_sql != NULL)
		pfree(conn->preparing_sql);
	conn->preparing_sql = MemoryContextStrdup(conn_cxt, sql);
	conn->preparing = number;
}

/*
 * note_prepare
 *		RES is the next result of CONN's command in flight, which prepares
 *		a statement: if it is the PREPARE's success, the statement exists.
 *		The end of the results without it means the PREPARE did not run or
 *		failed.
 */
static void
note_prepare(AfdwConn *conn, PGresult *res)
{
	if (res != NULL && (PQresultStatus(res) != PGRES_COMMAND_OK ||
						strcmp(PQcmdStatus(res), "PREPARE") != 0))
		return;
	if (res != NULL)
		afdw_remember_statement(conn, conn->preparing_sql, conn->preparing);
	conn->preparing = 0;
	pfree(conn->preparing_sql);
	conn->preparing_sql = NULL;
}

/*
 * append_deallocs
 *		Append to SQL (commands separated by "; ") the DEALLOCATEs of the
 *		statements no longer used, now sent.  Only where the remote
 *		transaction is not in a failed state, or outside any.
 */
static void
append_deallocs(AfdwConn *entry, StringInfo sql)
{
	if (entry->deallocs.data == NULL || entry->deallocs.len == 0)
		return;
	if (sql->len > 0)
		appendStringInfoString(sql, "; ");
	appendBinaryStringInfo(sql, entry->deallocs.data, entry->deallocs.len - 2);
	resetStringInfo(&entry->deallocs);
}

/*
 * forget_deallocs
 *		The remote session is gone, and its statements with it.
 */
static void
forget_deallocs(AfdwConn *entry)
{
	if (entry->deallocs.data != NULL)
		resetStringInfo(&entry->deallocs);
	entry->preparing = 0;
	if (entry->preparing_sql != NULL)
	{
		pfree(entry->preparing_sql);
		entry->preparing_sql = NULL;
	}
}

/*
 * password_required
 *		Whether USER's mapping demands that the remote server asks for a
 *		password (true unless a superuser said otherwise).
 */
static bool
password_required(UserMapping *user)
{
	return afdw_bool_option(user->options, "password_required", true);
}

/*
 * check_password_rules
 *		Refuse a non-superuser a connection that did not prove a password.
 *
 * Without this, a non-superuser could log in to the remote server as
 * whatever the local server's operating system account is trusted as.
 * Called before connecting (CONN NULL) and once connected.
 */
static void
check_password_rules(UserMapping *user, PGconn *conn, const char *servername)
{
	const char *password = NULL;
	ListCell   *lc;

	if (superuser_arg(user->userid) || !password_required(user))
		return;

	foreach(lc, user->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "password") == 0)
			password = defGetString(def);
	}

	/*
	 * An empty password counts as none: libpq then looks the password up
	 * in the local server's password file, which is not the user's.
	 */
	if (conn == NULL && (password == NULL || password[0] == '\0'))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("A non-superuser must give a password in the user mapping for server \"%s\".",
						   servername),
				 errhint("Add option \"password\" to the user mapping, or have a superuser set \"password_required\" to false.")));

	if (conn != NULL && !PQconnectionUsedPassword(conn))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Server \"%s\" did not ask for the password, and a non-superuser may only connect with one.",
						   servername),
				 errhint("Make the remote server ask for a password, or have a superuser set \"password_required\" to false.")));

	/*
	 * The password that libpq sent must be the mapping's own, not one it
	 * found elsewhere (a password file, a service file): a non-empty
	 * password keeps libpq from looking, but do not depend on that.
	 */
	if (conn != NULL &&
		(password == NULL || PQpass(conn) == NULL ||
		 strcmp(PQpass(conn), password) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("The connection to server \"%s\" used a password other than the user mapping's.",
						   servername),
				 errhint("A non-superuser may only connect with the password of the user mapping.")));
}

/*
 * notice_receiver
 *		Pass remote notices on at DEBUG1: they concern the remote session.
 */
static void
notice_receiver(void *arg, const PGresult *res)
{
	char	   *msg = pchomp(PQresultErrorMessage(res));

	ereport(DEBUG1,
			(errmsg_internal("remote server \"%s\": %s", (char *) arg, msg)));
	pfree(msg);
}

/*
 * connect_deadline_ms
 *		The connect_timeout of OPTIONS in milliseconds, or -1 for none.
 *
 * libpq ignores connect_timeout when the caller drives the connection with
 * PQconnectPoll, so async_fdw enforces it itself, over the whole attempt.
 */
static long
connect_timeout_ms(List *options)
{
	int			secs = afdw_int_option(options, "connect_timeout", 0);

	if (secs <= 0)
		return -1;
	return (long) Max(secs, 2) * 1000L;
}

/*
 * expand_application_name
 *		FMT with its escapes replaced by facts about the local session.
 *
 * The escapes are postgres_fdw 15's: %a the local application_name, %c the
 * session id (as in log_line_prefix), %C cluster_name, %d the database,
 * %p the backend's process id, %u the user who logged in, %% a percent
 * sign.  Like postgres_fdw, an unknown escape and a lone trailing '%' are
 * dropped, and there is no padding (%-10u).  Characters other than
 * printable ASCII and the length are left to the remote server, which
 * treats them as for any client (replaced by '?', cut at 63 bytes).
 */
static char *
expand_application_name(const char *fmt)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (const char *p = fmt; *p != '\0'; p++)
	{
		if (*p != '%')
		{
			appendStringInfoChar(&buf, *p);
			continue;
		}
		if (p[1] == '\0')
			break;
		p++;
		switch (*p)
		{
			case '%':
				appendStringInfoChar(&buf, '%');
				break;
			case 'a':
				if (application_name != NULL)
					appendStringInfoString(&buf, application_name);
				break;
			case 'c':
				appendStringInfo(&buf, "%lx.%x", (long) MyStartTime, MyProcPid);
				break;
			case 'C':
				if (cluster_name != NULL)
					appendStringInfoString(&buf, cluster_name);
				break;
			case 'p':
				appendStringInfo(&buf, "%d", MyProcPid);
				break;
			case 'd':
			case 'u':
				/*
				 * The names the client logged in with, looked up rather
				 * than read from MyProcPort, whose header needs GSSAPI's.
				 * A background worker has no client: nothing, as in
				 * postgres_fdw.
				 */
				if (MyProcPort != NULL)
				{
					const char *name = (*p == 'd') ?
						get_database_name(MyDatabaseId) :
						GetUserNameFromId(GetAuthenticatedUserId(), true);

					appendStringInfoString(&buf, name != NULL ? name : "[unknown]");
				}
				break;
			default:
				break;
		}
	}
	return buf.data;
}

/*
 * choose_application_name
 *		The application_name of a new connection for SERVER and USER, or
 *		NULL to leave it to fallback_application_name.
 *
 * As in postgres_fdw 15, the async_fdw.application_name setting comes
 * first, then the user mapping's and the server's application_name; the
 * first that is not empty once its escapes are replaced wins.
 */
static char *
choose_application_name(ForeignServer *server, UserMapping *user)
{
	List	   *candidates = NIL;
	List	   *option_lists[2];
	ListCell   *lc;

	if (afdw_application_name != NULL && afdw_application_name[0] != '\0')
		candidates = lappend(candidates, afdw_application_name);

	option_lists[0] = user->options;
	option_lists[1] = server->options;
	for (size_t i = 0; i < lengthof(option_lists); i++)
	{
		foreach(lc, option_lists[i])
		{
			DefElem    *def = (DefElem *) lfirst(lc);

			if (strcmp(def->defname, "application_name") == 0)
				candidates = lappend(candidates, defGetString(def));
		}
	}

	foreach(lc, candidates)
	{
		char	   *name = expand_application_name((const char *) lfirst(lc));

		if (name[0] != '\0')
			return name;
		pfree(name);
	}
	return NULL;
}

/*
 * connect_entry
 *		Open ENTRY's connection for USER, waiting interruptibly.
 */
static void
connect_entry(AfdwConn *entry, UserMapping *user)
{
	ForeignServer *server = GetForeignServer(user->serverid);
	const char **keywords;
	const char **values;
	int			n = 0;
	int			max;
	StringInfoData options;
	ListCell   *lc;
	PGconn	   *volatile conn = NULL;
	long		timeout;
	TimestampTz start = GetCurrentTimestamp();
	char	   *appname;

	entry->serverid = server->serverid;
	namestrcpy(&entry->servername, server->servername);
	entry->server_hash = GetSysCacheHashValue1(FOREIGNSERVEROID,
											   ObjectIdGetDatum(server->serverid));
	entry->mapping_hash = GetSysCacheHashValue1(USERMAPPINGOID,
												ObjectIdGetDatum(user->umid));
	entry->keep = afdw_bool_option(server->options, "keep_connections", true);
	entry->invalidated = false;
	entry->changing_xact_state = false;
	entry->xact_depth = 0;
	entry->locks_rows = false;
	entry->cursor_number = 0;
	entry->busy = false;
	entry->owner = NULL;
	entry->drain = NULL;

	check_password_rules(user, NULL, server->servername);

	/* The users' options, then options, application_name,
	 * fallback_application_name, client_encoding and the end. */
	max = list_length(server->options) + list_length(user->options) + 5;
	keywords = palloc(sizeof(char *) * max);
	values = palloc(sizeof(char *) * max);

	initStringInfo(&options);
	foreach(lc, list_concat_copy(server->options, user->options))
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (!afdw_is_libpq_option(def->defname))
			continue;
		/* Its escapes are replaced below. */
		if (strcmp(def->defname, "application_name") == 0)
			continue;
		/* Users' own startup options go first, so that ours win. */
		if (strcmp(def->defname, "options") == 0)
		{
			appendStringInfo(&options, "%s ", defGetString(def));
			continue;
		}
		keywords[n] = def->defname;
		values[n] = defGetString(def);
		n++;
	}
	appendStringInfoString(&options, AFDW_SESSION_OPTIONS);
	keywords[n] = "options";
	values[n++] = options.data;
	appname = choose_application_name(server, user);
	if (appname != NULL)
	{
		keywords[n] = "application_name";
		values[n++] = appname;
	}
	keywords[n] = "fallback_application_name";
	values[n++] = "async_fdw";
	keywords[n] = "client_encoding";
	values[n++] = GetDatabaseEncodingName();
	keywords[n] = NULL;
	values[n] = NULL;

	timeout = connect_timeout_ms(server->options);

	PG_TRY();
	{
		PostgresPollingStatusType poll = PGRES_POLLING_WRITING;

		conn = PQconnectStartParams(keywords, values, false);
		if (conn == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Could not allocate a connection to server \"%s\".",
							   server->servername)));

		while (PQstatus(conn) != CONNECTION_BAD &&
			   poll != PGRES_POLLING_OK && poll != PGRES_POLLING_FAILED)
		{
			int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;
			long		wait = -1;
			int			rc;

			events |= (poll == PGRES_POLLING_READING) ?
				WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
			if (timeout >= 0)
			{
				wait = timeout - (long) (TimestampDifferenceMilliseconds(start,
																		 GetCurrentTimestamp()));
				if (wait <= 0)
					ereport(ERROR,
							(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
							 errmsg("could not connect to server \"%s\"",
									server->servername),
							 errdetail("The connection attempt took longer than connect_timeout.")));
				events |= WL_TIMEOUT;
			}

			rc = WaitLatchOrSocket(MyLatch, events, PQsocket(conn), wait,
								   PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
			}
			if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
				poll = PQconnectPoll(conn);
		}

		if (PQstatus(conn) != CONNECTION_OK)
		{
			char	   *msg = pchomp(PQerrorMessage(conn));

			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to server \"%s\"",
							server->servername),
					 errdetail_internal("%s", msg)));
		}

		check_password_rules(user, conn, server->servername);
	}
	PG_CATCH();
	{
		if (conn != NULL)
			PQfinish(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	PQsetNoticeReceiver(conn, notice_receiver, NameStr(entry->servername));
	entry->conn = conn;

	pfree(keywords);
	pfree(values);
	pfree(options.data);
	if (appname != NULL)
		pfree(appname);
}

/*
 * disconnect_entry
 *		Close ENTRY's connection, if any.
 */
static void
disconnect_entry(AfdwConn *entry)
{
	if (entry->waitset != NULL)
	{
		FreeWaitEventSet(entry->waitset);
		entry->waitset = NULL;
	}
	if (entry->conn != NULL)
	{
		PQfinish(entry->conn);
		entry->conn = NULL;
		ReleaseExternalFD();
	}
	if (entry->held_result != NULL)
	{
		PQclear(entry->held_result);
		entry->held_result = NULL;
	}
	entry->export_pending = false;
	if (entry->prepared_cxt != NULL)
	{
		MemoryContextDelete(entry->prepared_cxt);
		entry->prepared_cxt = NULL;
		entry->prepared = NULL;
	}
	entry->statement_number = 0;
	entry->xact_depth = 0;
	entry->locks_rows = false;
	entry->changing_xact_state = false;
	entry->invalidated = false;
	entry->cursor_number = 0;
	entry->busy = false;
	entry->owner = NULL;
	entry->drain = NULL;
	entry->commit_pending = false;
	entry->streaming = false;
	entry->violation = NULL;
	forget_closes(entry);
	forget_savepoint_op(entry, 0);
	forget_wrap(entry);
	forget_deallocs(entry);
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
	entry->changing_xact_state = true;
	if (sock != PGINVALID_SOCKET)
		(void) shutdown(sock, SHUT_RDWR);
}

/*
 * refuse_copy_in
 *		The server answered with CopyInResponse or CopyBothResponse (STATUS):
 *		async_fdw never sends COPY FROM, so the server is not speaking the
 *		protocol.  Get libpq out of its COPY IN state, in which it would
 *		return the same result forever, and cut the connection.
 */
static void
refuse_copy_in(AfdwConn *entry, ExecStatusType status)
{
	(void) PQputCopyEnd(entry->conn, "async_fdw never sends COPY data");
	break_connection(entry, status == PGRES_COPY_BOTH ?
					 "It answered with CopyBothResponse, which async_fdw never asks for." :
					 "It answered with CopyInResponse, but async_fdw sent no COPY FROM STDIN.");
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
 */
void
afdw_protocol_violation(AfdwConn *conn, const char *detail, const char *sql)
{
	break_connection(conn, detail);
	afdw_report_remote_error(NULL, conn, sql);
}

/*
 * server_snapshot
 *		The snapshot entry of SERVERID in the current local transaction.
 */
static ServerSnapshot *
server_snapshot(Oid serverid)
{
	bool		found;
	ServerSnapshot *ss;

	if (snapshot_hash == NULL)
	{
		HASHCTL		ctl;

		/* Dies with the transaction; xact_callback forgets the pointer. */
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(ServerSnapshot);
		ctl.hcxt = TopTransactionContext;
		snapshot_hash = hash_create("async_fdw snapshots", 8, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	ss = hash_search(snapshot_hash, &serverid, HASH_ENTER, &found);
	if (!found)
	{
		ss->leader = NULL;
		ss->snapshot[0] = '\0';
	}
	return ss;
}

/*
 * export_wanted
 *		Whether LEADER, the first connection to its server in the local
 *		transaction, should export its snapshot with its first command.
 *
 * More connections may join the remote transaction when scans hold other
 * connections to the server now, in a transaction block, inside a local
 * subtransaction, or when the query runs inside another statement (NESTED:
 * a function's loop may start another scan at any time).  Otherwise every
 * scan of the transaction has its connection already (executors take them
 * at startup), and the export, which costs the remote server a file, is
 * left out.
 */
static bool
export_wanted(AfdwConn *leader, bool nested)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	bool		others = false;

	if (nested || IsTransactionBlock() || GetCurrentTransactionNestLevel() > 1)
		return true;
	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry != leader && entry->conn != NULL &&
			entry->serverid == leader->serverid && entry->nusers > 0)
			others = true;
	}
	return others;
}

/*
 * export_snapshot
 *		Export the snapshot of LEADER's remote transaction into SS.
 */
static void
export_snapshot(ServerSnapshot *ss, AfdwConn *leader, const char *prefix)
{
	char	   *sql = psprintf("%s%sSELECT pg_catalog.pg_export_snapshot()",
							   prefix, prefix[0] ? "; " : "");
	PGresult   *res = afdw_run_query(leader, sql, 0, NULL);

	if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0) ||
		!valid_snapshot_name(PQgetvalue(res, 0, 0)))
	{
		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not export the snapshot of server \"%s\"",
						NameStr(leader->servername)),
				 errdetail("pg_export_snapshot() returned no usable snapshot name.")));
	}
	strlcpy(ss->snapshot, PQgetvalue(res, 0, 0), sizeof(ss->snapshot));
	PQclear(res);
	pfree(sql);
}

/*
 * store_export
 *		RES is the result of the export that rode in CONN's first command of
 *		the transaction: keep the snapshot name for the connections that
 *		join later, and free RES.  False if RES holds no usable name.
 */
static bool
store_export(AfdwConn *conn, PGresult *res)
{
	bool		ok = (PQntuples(res) == 1 && PQnfields(res) == 1 &&
					  !PQgetisnull(res, 0, 0));
	ServerSnapshot *ss = NULL;

	conn->export_pending = false;
	if (snapshot_hash != NULL)
		ss = hash_search(snapshot_hash, &conn->serverid, HASH_FIND, NULL);
	if (ok && ss != NULL && ss->leader == conn)
	{
		ok = valid_snapshot_name(PQgetvalue(res, 0, 0));
		if (ok)
			strlcpy(ss->snapshot, PQgetvalue(res, 0, 0), sizeof(ss->snapshot));
	}
	PQclear(res);
	return ok;
}

/*
 * take_export
 *		store_export, failing when the export gave no usable name.
 */
static void
take_export(AfdwConn *conn, PGresult *res)
{
	if (!store_export(conn, res))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not export the snapshot of server \"%s\"",
						NameStr(conn->servername)),
				 errdetail("pg_export_snapshot() returned no usable snapshot name.")));
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

	if (!(conn->wrap_pending || conn->wrap_open))
		return;
	if (res == NULL)
	{
		/*
		 * The command succeeded: its savepoint is released with the
		 * connection's next command, or ended by the transaction's end.
		 */
		if (conn->wrap_open)
			set_savepoint_op(conn, "RELEASE SAVEPOINT afdw_ra", conn->wrap_level);
		conn->wrap_pending = false;
		conn->wrap_open = false;
		return;
	}
	status = PQresultStatus(res);
	if (status == PGRES_COPY_OUT)
		return;					/* the COPY's own result comes later */
	if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
	{
		if (conn->wrap_open)
			set_savepoint_op(conn,
							 "ROLLBACK TO SAVEPOINT afdw_ra; RELEASE SAVEPOINT afdw_ra",
							 conn->wrap_level);
		else
		{
			const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
			const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

			conn->xact_failed = true;
			strlcpy(conn->xact_failed_state, state ? state : "08006",
					sizeof(conn->xact_failed_state));
			if (conn->xact_failed_msg != NULL)
				pfree(conn->xact_failed_msg);
			conn->xact_failed_msg = MemoryContextStrdup(conn_cxt,
														msg ? msg : "unknown failure");
		}
		conn->wrap_pending = false;
		conn->wrap_open = false;
		return;
	}
	if (conn->wrap_pending)
	{
		if (conn->wrap_skip > 0)
			conn->wrap_skip--;
		else
		{
			conn->wrap_pending = false;
			conn->wrap_open = true;
		}
		return;
	}
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
	conn->savepoint_op = MemoryContextStrdup(conn_cxt, sql);
	conn->savepoint_level = level;
}

/*
 * forget_wrap
 *		The remote transaction ended or the connection was reset: nothing
 *		wraps anything any more, and nothing failed.
 */
static void
forget_wrap(AfdwConn *entry)
{
	entry->wrap_skip = 0;
	entry->wrap_pending = false;
	entry->wrap_open = false;
	entry->xact_failed = false;
	if (entry->xact_failed_msg != NULL)
	{
		pfree(entry->xact_failed_msg);
		entry->xact_failed_msg = NULL;
	}
}

/*
 * valid_snapshot_name
 *		Whether NAME looks like what pg_export_snapshot() returns (hex
 *		numbers and dashes) and fits in a ServerSnapshot.  It goes into SQL
 *		of the other connections: quoted, but never trusted blindly.
 */
static bool
valid_snapshot_name(const char *name)
{
	size_t		len = strlen(name);

	if (len == 0 || len >= sizeof(((ServerSnapshot *) NULL)->snapshot))
		return false;
	return strspn(name, "0123456789ABCDEFabcdef-") == len;
}

/*
 * check_leader
 *		Fail unless LEADER, the connection that opened the remote transaction
 *		of its server and whose snapshot the others import, is still there:
 *		a lost one took its transaction and snapshot with it, so the local
 *		transaction can no longer see that server's data as one snapshot.
 */
static void
check_leader(AfdwConn *leader)
{
	if (!leader->changing_xact_state && connection_alive(leader))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("lost connection to server \"%s\"",
					NameStr(leader->servername)),
			 errdetail("The connection that opened the remote transaction, whose snapshot the other connections share, is lost."),
			 errhint("Roll back the local transaction and retry.")));
}

/*
 * pop_result
 *		The next result of CONN's command in flight (a result held back
 *		first), or NULL at the end; *IS_EXPORT tells whether it is the
 *		result of the snapshot export riding ahead of the command.  Any
 *		other result but a command's ends the wait for the export: after a
 *		failed transaction start it never comes.
 */
static PGresult *
pop_result(AfdwConn *conn, bool *is_export)
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
	if (res != NULL && (PQresultStatus(res) == PGRES_COPY_IN ||
						PQresultStatus(res) == PGRES_COPY_BOTH))
		refuse_copy_in(conn, PQresultStatus(res));
	track_wrap(conn, res);
	if (conn->preparing != 0)
		note_prepare(conn, res);
	if (conn->export_pending &&
		(res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK))
	{
		conn->export_pending = false;
		*is_export = (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK);
	}
	return res;
}

/*
 * await_export
 *		Wait for the snapshot export riding ahead of the command in flight on
 *		LEADER, and read it, leaving the command's own results to its owner.
 *
 * Only results of the transaction start come before the export.  If the
 * start or the export fails, the error is kept for the owner, and the
 * connection that needed the snapshot fails.
 */
static void
await_export(AfdwConn *leader)
{
	static const char export_sql[] = "SELECT pg_catalog.pg_export_snapshot()";

	while (leader->export_pending)
	{
		PGresult   *res;

		bool		is_export;

		while (!afdw_result_ready(leader))
			afdw_wait_socket(leader, export_sql);
		res = pop_result(leader, &is_export);
		if (is_export)
		{
			take_export(leader, res);
			break;
		}
		if (res != NULL && PQresultStatus(res) == PGRES_COMMAND_OK)
		{
			PQclear(res);
			continue;
		}
		leader->held_result = res;
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not export the snapshot of server \"%s\"",
						NameStr(leader->servername)),
				 errdetail("The export failed on the connection that opened the remote transaction: %s",
						   res && PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?
						   PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) :
						   pchomp(PQerrorMessage(leader->conn)))));
	}
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
 * afdw_get_result
 *		PQgetResult for CONN: the next result of its command in flight, or
 *		NULL at the end.  The result of a snapshot export riding ahead of
 *		the command is taken in here and shows as a command result.
 */
PGresult *
afdw_get_result(AfdwConn *conn)
{
	bool		is_export;
	PGresult   *res = pop_result(conn, &is_export);

	if (!is_export)
		return res;
	take_export(conn, res);
	res = PQmakeEmptyPGresult(conn->conn, PGRES_COMMAND_OK);
	if (res == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	return res;
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
	if (!connection_alive(conn))
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
 * cursors_to_level
 *		The remote savepoints deeper than LEVEL are released: their cursors
 *		now belong to LEVEL.
 */
static void
cursors_to_level(AfdwConn *entry, int level)
{
	for (int i = 0; i < entry->ncursors; i++)
	{
		if (entry->cursors[i].level > level)
			entry->cursors[i].level = level;
	}
}

/*
 * connection_alive
 *		False if ENTRY's remote session is known to be over: what is on the
 *		socket, read into libpq's buffer for whoever reads the results, ends
 *		with the end of the connection.
 */
static bool
connection_alive(AfdwConn *entry)
{
	if (entry->conn == NULL || PQstatus(entry->conn) != CONNECTION_OK)
		return false;

	/*
	 * A session ended by the server sends why (a FATAL error), then the end
	 * of the stream, which only a second read sees.  The bound keeps a
	 * stream in progress from being read ahead here.
	 */
	for (int i = 0; i < 4 && socket_has_data(entry->conn); i++)
	{
		if (!PQconsumeInput(entry->conn))
			return false;
	}
	return PQstatus(entry->conn) == CONNECTION_OK;
}


/*
 * forget_savepoint_op
 *		Drop the pending savepoint command if its level is over.
 */
static void
forget_savepoint_op(AfdwConn *entry, int level)
{
	if (entry->savepoint_op != NULL && entry->savepoint_level >= level)
	{
		pfree(entry->savepoint_op);
		entry->savepoint_op = NULL;
	}
}

/*
 * afdw_conn_users
 *		How many scans hold CONN.
 */
int
afdw_conn_users(AfdwConn *conn)
{
	return conn->nusers;
}

/*
 * afdw_set_streaming
 *		Mark CONN as carrying a stream, which no other scan may share.
 */
void
afdw_set_streaming(AfdwConn *conn, bool streaming)
{
	conn->streaming = streaming;
}

/*
 * forget_closes
 *		The remote transaction is over, and took every cursor with it.
 */
static void
forget_closes(AfdwConn *entry)
{
	entry->ncursors = 0;
}

/*
 * afdw_prepare_snapshot
 *		If CONN will join a remote transaction whose server already has a
 *		leader that has not exported its snapshot, export it now, while the
 *		leader is likely idle (before a stream occupies it).
 */
void
afdw_prepare_snapshot(AfdwConn *conn)
{
	ServerSnapshot *ss;

	if (conn->xact_depth > 0)
		return;
	ss = server_snapshot(conn->serverid);
	if (ss->leader == NULL || ss->leader == conn || ss->snapshot[0] != '\0')
		return;
	/* Its export is on the way already, ahead of its first command. */
	if (ss->leader->export_pending)
		return;
	/* Not possible now: the joining scan shares the leader instead. */
	if ((ss->leader->busy && ss->leader->streaming) || ss->leader->xact_depth != 1)
		return;
	afdw_make_idle(ss->leader);
	if (ss->leader->savepoint_op != NULL)
	{
		/* The savepoint of a finished stream must end first. */
		char	   *op = ss->leader->savepoint_op;

		ss->leader->savepoint_op = NULL;
		export_snapshot(ss, ss->leader, op);
		pfree(op);
		return;
	}
	export_snapshot(ss, ss->leader, "");
}

/*
 * xact_prefix
 *		The commands that must run on ENTRY before the caller's next one so
 *		that it runs in the remote transaction at the current local nesting
 *		level; "" if there are none.  Counts them as done.
 *
 * The first connection to a server in a local transaction opens a
 * REPEATABLE READ (or SERIALIZABLE) transaction.  When the server has
 * several connections, or may have in a transaction block, the first one
 * exports its snapshot in the same send as its first command, and every
 * other one imports it in the same send as its own first command (after
 * waiting for the export's result if it is still on its way), so that all
 * of them see the same data.
 */
static char *
xact_prefix(AfdwConn *entry, bool nested, int *nstatements)
{
	int			curlevel = GetCurrentTransactionNestLevel();
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

	if (entry->xact_depth == 0)
	{
		ServerSnapshot *ss = server_snapshot(entry->serverid);

		appendStringInfoString(&sql, IsolationIsSerializable() ?
							   "START TRANSACTION ISOLATION LEVEL SERIALIZABLE" :
							   "START TRANSACTION ISOLATION LEVEL REPEATABLE READ");

		if (ss->leader == NULL)
		{
			ss->leader = entry;
			entry->xact_depth = 1;
			/*
			 * Export when other connections serve this server now, or may
			 * join later: a snapshot cannot be exported once a savepoint is
			 * open or while a stream runs.  The export rides in the same
			 * send as the command; afdw_get_result reads its result.
			 */
			if (export_wanted(entry, nested))
			{
				appendStringInfoString(&sql, "; SELECT pg_catalog.pg_export_snapshot()");
				entry->export_pending = true;
			}
		}
		else
		{
			check_leader(ss->leader);
			if (ss->snapshot[0] == '\0' && ss->leader->export_pending)
				await_export(ss->leader);
			if (ss->snapshot[0] == '\0')
				export_snapshot(ss, ss->leader, "");
			appendStringInfo(&sql, "; SET TRANSACTION SNAPSHOT %s",
							 quote_literal_cstr(ss->snapshot));
			entry->xact_depth = 1;
		}
	}

	for (int level = Max(entry->xact_depth, 1) + 1; level <= curlevel; level++)
		appendStringInfo(&sql, "%sSAVEPOINT s%d", sql.len > 0 ? "; " : "", level);
	entry->xact_depth = Max(entry->xact_depth, curlevel);

	/* Cursors left by ended scans, statements by failed ones. */
	append_closes(entry, &sql);
	append_deallocs(entry, &sql);

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
 * afdw_begin_xact
 *		Open the remote transaction (and savepoints) on CONN now.
 */
void
afdw_begin_xact(AfdwConn *conn)
{
	char	   *prefix;
	int			nstatements;

	afdw_make_idle(conn);
	prefix = xact_prefix(conn, true, &nstatements);
	if (prefix[0] != '\0')
		afdw_run_command(conn, prefix);
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
 *
 * A failure inside the savepoint is the scan's to report when it needs
 * the rows; the connection rolls the savepoint back with its next command
 * (track_wrap), so that the remote transaction and its exported snapshot
 * stay usable for the rest of the query.
 */
void
afdw_send_in_xact(AfdwConn *conn, const char *sql, void *owner, AfdwDrainFn drain,
				  bool nested)
{
	char	   *prefix;
	char	   *full;
	int			nstatements;

	afdw_make_idle(conn);
	if (conn->xact_failed)
		ereport(ERROR,
				(errcode(MAKE_SQLSTATE(conn->xact_failed_state[0], conn->xact_failed_state[1],
									   conn->xact_failed_state[2], conn->xact_failed_state[3],
									   conn->xact_failed_state[4])),
				 errmsg("remote transaction on server \"%s\" failed earlier in this transaction",
						NameStr(conn->servername)),
				 errdetail_internal("%s", conn->xact_failed_msg),
				 errhint("Roll back the local transaction and retry.")));
	prefix = xact_prefix(conn, nested, &nstatements);
	full = psprintf("%s%sSAVEPOINT afdw_ra; %s", prefix, prefix[0] ? "; " : "", sql);
	afdw_send_query(conn, full, 0, NULL);
	afdw_set_owner(conn, owner, drain);
	conn->wrap_skip = nstatements;
	conn->wrap_pending = true;
	conn->wrap_open = false;
	conn->wrap_level = GetCurrentTransactionNestLevel();
	pfree(full);
	pfree(prefix);
}

/*
 * afdw_set_owner
 *		Record who reads the results of the command in flight on CONN.
 */
void
afdw_set_owner(AfdwConn *conn, void *owner, AfdwDrainFn drain)
{
	conn->busy = true;
	conn->owner = owner;
	conn->drain = drain;
}

/*
 * afdw_set_idle
 *		Note that every result of the command on CONN has been read.
 */
void
afdw_set_idle(AfdwConn *conn)
{
	conn->busy = false;
	conn->owner = NULL;
	conn->drain = NULL;
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
	return conn->busy && conn->owner == owner;
}

/*
 * afdw_conn_owner
 *		The owner of the command in flight on CONN, or NULL.
 */
void *
afdw_conn_owner(AfdwConn *conn)
{
	return conn->busy ? conn->owner : NULL;
}

/*
 * afdw_join_target
 *		The connection a scan holding CONN should send its first command on.
 *
 * CONN itself, unless it has yet to join the remote transaction of its
 * server and cannot: joining imports the snapshot of the transaction's
 * first connection (the leader), and a leader that did not export it with
 * its first command cannot export it while a stream runs on it or inside
 * a savepoint.  Then the scan shares the leader (the caller moves to it),
 * which sees the same data, so that no query ever fails for want of a
 * snapshot.
 */
AfdwConn *
afdw_join_target(AfdwConn *conn)
{
	ServerSnapshot *ss;
	AfdwConn   *leader;

	if (conn->xact_depth > 0 || snapshot_hash == NULL)
		return conn;
	ss = hash_search(snapshot_hash, &conn->serverid, HASH_FIND, NULL);
	if (ss == NULL || ss->leader == NULL || ss->leader == conn ||
		ss->snapshot[0] != '\0')
		return conn;
	leader = ss->leader;
	if (leader->export_pending)
		return conn;
	if (leader->conn != NULL && leader->xact_depth == 1 &&
		!(leader->busy && leader->streaming))
		return conn;
	if (conn->nusers > 0)
		conn->nusers--;
	leader->nusers++;
	return leader;
}

/*
 * afdw_is_busy
 *		True if a command on CONN still has results to be read.
 */
bool
afdw_is_busy(AfdwConn *conn)
{
	return conn->busy;
}

/*
 * afdw_make_idle
 *		Make CONN ready for a new command: let the owner of the command in
 *		flight read its results, or read and discard them if it is gone.
 */
void
afdw_make_idle(AfdwConn *conn)
{
	if (!conn->busy)
		return;

	if (conn->owner != NULL)
	{
		conn->drain(conn->owner);
		Assert(!conn->busy);
	}
	else
	{
		PGresult   *res = afdw_wait_result(conn, NULL);

		afdw_set_idle(conn);
		PQclear(res);
	}
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
		set = CreateWaitEventSet(conn_cxt, 3);

		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		/* A single-user backend has no postmaster to watch. */
		if (IsUnderPostmaster)
			AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		AddWaitEventToSet(set, WL_SOCKET_READABLE, sock, NULL, NULL);
		entry->waitset = set;
		entry->waitset_sock = sock;
	}
	if (WaitEventSetWait(entry->waitset, timeout, &event, 1, PG_WAIT_EXTENSION) == 0)
		return WL_TIMEOUT;
	return event.events;
}

/*
 * cleanup_interrupted
 *		Whether cleanup waiting with interrupts held off (while aborting)
 *		should give up: a query cancel or a termination came meanwhile, or
 *		the backend is exiting, which ends the remote sessions anyway.
 */
static bool
cleanup_interrupted(void)
{
	return QueryCancelPending || ProcDiePending || proc_exit_inprogress;
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

	if (deadline >= 0)
	{
		if (cleanup_interrupted())
			return false;
		wait = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (wait <= 0)
			return false;
	}
	rc = wait_readable(entry, wait);
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
 * afdw_send_query
 *		Send SQL with NPARAMS text parameters, without waiting.  The caller
 *		reads the results.
 */
void
afdw_send_query(AfdwConn *conn, const char *sql, int nparams,
				const char *const *values)
{
	int			ok;

	afdw_make_idle(conn);
	if (nparams > 0)
		ok = PQsendQueryParams(conn->conn, sql, nparams, NULL, values,
							   NULL, NULL, 0);
	else
		ok = PQsendQuery(conn->conn, sql);

	if (!ok)
		afdw_report_remote_error(NULL, conn, sql);
	conn->busy = true;
	conn->owner = NULL;
	conn->wrap_pending = false;
	conn->wrap_open = false;
}

/*
 * afdw_wait_result
 *		Wait for the results of the command in flight and return the one
 *		that matters: the first error, or else the last result.
 *
 * The wait reacts to interrupts and postmaster death; a query cancel here
 * leaves the remote query running, and the abort callback cancels it.
 */
PGresult *
afdw_wait_result(AfdwConn *conn, const char *sql)
{
	PGresult   *volatile kept = NULL;

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
											"It answered with CopyOutResponse to a query that is not a COPY.",
											sql);
				afdw_discard_copy(conn, sql);
				continue;
			}

			lost = afdw_result_lost(conn, res);
			if (kept != NULL && PQresultStatus(kept) == PGRES_FATAL_ERROR)
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
	PGresult   *res;

	afdw_send_query(conn, sql, nparams, values);
	res = afdw_wait_result(conn, sql);
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
				 errdetail("%s", conn->violation),
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
 * wait_cleanup
 *		Wait at most until DEADLINE for the results of the command in flight,
 *		without raising errors for them; true if it succeeded.
 *
 * Used while aborting, when an error must not be thrown and interrupts are
 * held off (a cancel then ends the wait with false), and for the answer to
 * a COMMIT, where interrupts are served.
 */
static bool
wait_cleanup(AfdwConn *entry, TimestampTz deadline, bool ignore_errors)
{
	PGconn	   *conn = entry->conn;
	bool		ok = true;

	/* The answer may be in already: then there is no need to wait. */
	if (!afdw_result_ready(entry) && !PQconsumeInput(conn))
		return false;

	for (;;)
	{
		PGresult   *res;
		bool		is_export;

		while (!afdw_result_ready(entry))
		{
			if (!wait_for_input(entry, deadline))
				return false;
		}
		res = pop_result(entry, &is_export);
		if (is_export)
		{
			/*
			 * Keep the snapshot (a rollback to a savepoint leaves the
			 * transaction running), without an error here.
			 */
			(void) store_export(entry, res);
			continue;
		}
		if (res == NULL)
			break;
		if (PQresultStatus(res) == PGRES_COPY_OUT)
		{
			PQclear(res);
			if (!discard_copy_data(entry, deadline))
				return false;
			continue;
		}
		if (PQresultStatus(res) != PGRES_COMMAND_OK &&
			PQresultStatus(res) != PGRES_TUPLES_OK && !ignore_errors)
			ok = false;
		PQclear(res);
	}
	return ok;
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
	(void) wait_cleanup(entry, deadline, true);
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
	/* A transaction command that was cut short left an unknown state. */
	if (entry->changing_xact_state || PQstatus(entry->conn) != CONNECTION_OK)
		return false;

	entry->changing_xact_state = true;
	/* The rollback ends the savepoint of the command in flight too. */
	entry->wrap_pending = false;
	entry->wrap_open = false;
	if (!finish_in_flight(entry, deadline))
		return false;
	entry->busy = false;
	entry->owner = NULL;
	if (!PQsendQuery(entry->conn, sql) ||
		!wait_cleanup(entry, deadline, false))
		return false;
	entry->changing_xact_state = false;
	return true;
}

/*
 * send_cancel
 *		Ask the server to cancel what runs on ENTRY, without waiting for the
 *		effect, so that the cancels of many connections run at once.
 */
static void
send_cancel(AfdwConn *entry)
{
	PGcancel   *cancel;
	char		errbuf[256];

	if (entry->conn == NULL || PQtransactionStatus(entry->conn) != PQTRANS_ACTIVE)
		return;
	cancel = PQgetCancel(entry->conn);
	if (cancel != NULL)
	{
		(void) PQcancel(cancel, errbuf, sizeof(errbuf));
		PQfreeCancel(cancel);
	}
}

/*
 * afdw_cancel
 *		Ask the remote server to cancel the command running on CONN.
 */
void
afdw_cancel(AfdwConn *conn)
{
	send_cancel(conn);
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
 * commit_all
 *		Send COMMIT on every connection in a remote transaction, then wait
 *		for all the answers, so that commits of many servers overlap.
 */
static void
commit_all(void)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	StringInfoData sql;

	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn == NULL || entry->xact_depth == 0)
			continue;
		afdw_make_idle(entry);
		forget_closes(entry);
		entry->changing_xact_state = true;

		/*
		 * A failed scan's savepoint is rolled back first.  Statements no
		 * longer used go after the COMMIT, whose answer is not waited for
		 * and whose outcome they cannot change.
		 */
		initStringInfo(&sql);
		if (entry->savepoint_op != NULL &&
			strncmp(entry->savepoint_op, "RELEASE", 7) != 0)
			appendStringInfo(&sql, "%s; ", entry->savepoint_op);
		forget_savepoint_op(entry, 0);
		appendStringInfoString(&sql, "COMMIT TRANSACTION");
		if (!IsolationIsSerializable())
			append_deallocs(entry, &sql);
		afdw_send_query(entry, sql.data, 0, NULL);
		pfree(sql.data);

		/*
		 * async_fdw only reads, and a REPEATABLE READ transaction that only
		 * read has nothing to lose at COMMIT: its answer is read before the
		 * connection's next use, off the critical path.  SERIALIZABLE ones
		 * may fail to commit, so they are waited for, and so are those
		 * holding row locks (SELECT ... FOR UPDATE), which must be free for
		 * others once the local COMMIT has returned.
		 */
		if (!IsolationIsSerializable() && !entry->locks_rows)
		{
			entry->commit_pending = true;
			entry->changing_xact_state = false;
			entry->xact_depth = 0;
		}
	}

	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		PGresult   *res;

		if (entry->conn == NULL || entry->xact_depth == 0 || entry->commit_pending)
			continue;
		res = afdw_wait_result(entry, "COMMIT TRANSACTION");
		if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			hash_seq_term(&scan);
			afdw_report_remote_error(res, entry, "COMMIT TRANSACTION");
		}
		PQclear(res);
		entry->changing_xact_state = false;
		entry->xact_depth = 0;
	}
}

/*
 * abort_all
 *		Roll back every remote transaction, never raising an error: cancel
 *		what runs everywhere at once, then clean up one connection after the
 *		other, all within one deadline.  A connection that cannot be cleaned
 *		up is marked to be dropped.
 */
static void
abort_all(void)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	TimestampTz deadline;

	/*
	 * After an error in the cleanup of an error, try nothing that could
	 * fail again: the connections are dropped.
	 */
	if (in_error_recursion_trouble())
	{
		hash_seq_init(&scan, conn_hash);
		while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
		{
			if (entry->conn != NULL && entry->xact_depth > 0)
				entry->changing_xact_state = true;
		}
		return;
	}

	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn != NULL && entry->xact_depth > 0 &&
			!entry->changing_xact_state)
			send_cancel(entry);
	}

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   AFDW_CLEANUP_TIMEOUT_MS);
	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		StringInfoData sql;

		if (entry->conn == NULL || entry->xact_depth == 0)
			continue;
		/* Statements no longer used go after the end of the transaction. */
		initStringInfo(&sql);
		appendStringInfoString(&sql, "ABORT TRANSACTION");
		append_deallocs(entry, &sql);
		if (!abort_remote(entry, sql.data, deadline))
			entry->changing_xact_state = true;
		pfree(sql.data);
	}
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

	if (!xact_got_connection)
		return;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			/* A failure here aborts the local transaction. */
			commit_all();
			return;

		case XACT_EVENT_PRE_PREPARE:
			hash_seq_init(&scan, conn_hash);
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
			break;

		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			break;
	}

	/* The local transaction is over: so is every remote one. */
	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		entry->nusers = 0;
		if (entry->conn == NULL)
			continue;
		/* Pre-commit ended every remote transaction. */
		Assert(event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
			   entry->xact_depth == 0);
		entry->xact_depth = 0;
		entry->locks_rows = false;
		entry->cursor_number = 0;
		entry->owner = NULL;
		entry->drain = NULL;
		forget_closes(entry);
		forget_savepoint_op(entry, 0);
		forget_wrap(entry);
		entry->streaming = false;
		/* Results nobody read: the remote state is unknown. */
		if (entry->export_pending || entry->held_result != NULL)
		{
			disconnect_entry(entry);
			continue;
		}
		if (entry->commit_pending && entry->keep && !entry->invalidated)
			continue;
		if (entry->busy || entry->changing_xact_state || entry->invalidated ||
			!entry->keep || PQstatus(entry->conn) != CONNECTION_OK ||
			PQtransactionStatus(entry->conn) != PQTRANS_IDLE)
			disconnect_entry(entry);
	}

	xact_got_connection = false;
	snapshot_hash = NULL;
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
	if (!xact_got_connection)
		return;

	/* The cleanups of all connections share one deadline. */
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		trouble = in_error_recursion_trouble();
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   AFDW_CLEANUP_TIMEOUT_MS);
	}

	curlevel = GetCurrentTransactionNestLevel();
	hash_seq_init(&scan, conn_hash);
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
			entry->changing_xact_state = true;
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
			forget_savepoint_op(entry, curlevel);
			entry->changing_xact_state = true;
			afdw_run_command(entry, sql);
			entry->changing_xact_state = false;
			cursors_to_level(entry, curlevel - 1);
		}
		else if (trouble)
		{
			/* After an error in error cleanup, try nothing: drop it later. */
			entry->changing_xact_state = true;
		}
		else
		{
			snprintf(sql, sizeof(sql),
					 "ROLLBACK TO SAVEPOINT s%d; RELEASE SAVEPOINT s%d",
					 curlevel, curlevel);
			/*
			 * What was in flight is cancelled; its owner finds out at its
			 * next use.  On failure the connection stays marked for
			 * disconnection.
			 */
			send_cancel(entry);
			entry->owner = NULL;
			entry->drain = NULL;
			entry->streaming = false;
			forget_cursors_from(entry, curlevel);
			forget_savepoint_op(entry, curlevel);
			(void) abort_remote(entry, sql, deadline);
		}
		entry->xact_depth--;
	}
}

/*
 * inval_callback
 *		Drop connections whose server or user mapping changed: at once when
 *		idle, at the end of the local transaction otherwise.
 */
static void
inval_callback(Datum arg pg_attribute_unused(), int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;

	if (conn_hash == NULL)
		return;

	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		uint32		mine;

		if (entry->conn == NULL)
			continue;
		mine = (cacheid == FOREIGNSERVEROID) ? entry->server_hash : entry->mapping_hash;
		if (hashvalue != 0 && hashvalue != mine)
			continue;

		if (entry->xact_depth == 0 && entry->nusers == 0 && !entry->busy)
			disconnect_entry(entry);
		else
			entry->invalidated = true;
	}
}

/* --- scan-side accessors, to move to remote.c at merge --- */

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
 * afdw_socket
 *		CONN's socket, for a wait set of the executor.
 */
pgsocket
afdw_socket(AfdwConn *conn)
{
	return PQsocket(conn->conn);
}

/*
 * afdw_server_version
 *		The remote server's version number (PQserverVersion's form).
 */
int
afdw_server_version(AfdwConn *conn)
{
	return PQserverVersion(conn->conn);
}

/*
 * afdw_connection_ok
 *		Whether CONN's session is still usable.
 */
bool
afdw_connection_ok(AfdwConn *conn)
{
	return PQstatus(conn->conn) == CONNECTION_OK;
}
