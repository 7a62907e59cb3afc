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
 * afdw_get_result, which takes in the export's result on the way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>
#include <sys/socket.h>

#include "access/xact.h"
#include "common/hashfn.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/builtins.h"
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

/* How long cleanup after an abort may wait for a remote server. */
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
	StringInfoData closes;		/* "CLOSE cN; " for cursors no scan needs,
								 * sent with the next command that opens a
								 * cursor, or ended by the transaction */
	bool		commit_pending; /* COMMIT sent, answer not read yet */
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
	 * How the remote server broke the protocol, once it did (the
	 * connection is then cut, and every later error on it says this).
	 */
	const char *violation;
};

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
static void disconnect_entry(AfdwConn *entry);
static void xact_callback(XactEvent event, void *arg);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);
static void inval_callback(Datum arg, int cacheid, uint32 hashvalue);
static bool abort_remote(AfdwConn *entry, const char *sql);
static bool wait_cleanup(AfdwConn *entry, TimestampTz deadline, bool ignore_errors);
static void forget_closes(AfdwConn *entry);
static void forget_savepoint_op(AfdwConn *entry, int level);
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
	if (!wait_cleanup(entry, deadline, true) ||
		PQtransactionStatus(entry->conn) != PQTRANS_IDLE)
		disconnect_entry(entry);
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
	int			max = afdw_int_option(server->options, "max_connections",
									  AFDW_DEFAULT_MAX_CONNECTIONS);
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

	if (entry->conn == NULL)
		connect_entry(entry, user);

	entry->nusers++;
	return entry;
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
 * afdw_pgconn
 *		The libpq connection of a pooled connection.
 */
PGconn *
afdw_pgconn(AfdwConn *conn)
{
	return conn->conn;
}

/*
 * afdw_next_cursor_number
 *		A cursor number unique within the connection's remote transaction.
 */
unsigned int
afdw_next_cursor_number(AfdwConn *conn)
{
	return ++conn->cursor_number;
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
		pfree(ps->sql);			/* another text of the same hash: replaced */
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
		pfree(ps->sql);
		(void) hash_search(conn->prepared, &hash, HASH_REMOVE, NULL);
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
 */
static void
check_password_rules(UserMapping *user, PGconn *conn, const char *servername)
{
	bool		has_password = false;
	ListCell   *lc;

	if (superuser_arg(user->userid) || !password_required(user))
		return;

	foreach(lc, user->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "password") == 0)
			has_password = true;
	}

	if (conn == NULL && !has_password)
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("A non-superuser must give a password in the user mapping for server \"%s\".",
						   servername),
				 errhint("Add option \"password\" to the user mapping, or have a superuser set password_required to false.")));

	if (conn != NULL && !PQconnectionUsedPassword(conn))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Server \"%s\" did not ask for the password, and a non-superuser may only connect with one.",
						   servername),
				 errhint("Make the remote server ask for a password, or have a superuser set password_required to false.")));
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
	entry->cursor_number = 0;
	entry->busy = false;
	entry->owner = NULL;
	entry->drain = NULL;

	check_password_rules(user, NULL, server->servername);

	max = list_length(server->options) + list_length(user->options) + 4;
	keywords = palloc(sizeof(char *) * max);
	values = palloc(sizeof(char *) * max);

	initStringInfo(&options);
	foreach(lc, list_concat_copy(server->options, user->options))
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (!afdw_is_libpq_option(def->defname))
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
 * server_connection_count
 *		How many connections to SERVERID are open in this backend.
 */
static int
server_connection_count(Oid serverid)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	int			n = 0;

	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn != NULL && entry->serverid == serverid)
			n++;
	}
	return n;
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
		strlen(PQgetvalue(res, 0, 0)) >= sizeof(ss->snapshot))
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
		ok = strlen(PQgetvalue(res, 0, 0)) < sizeof(ss->snapshot);
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
	if (conn->closes.data == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(conn_cxt);

		initStringInfo(&conn->closes);
		MemoryContextSwitchTo(old);
	}
	appendStringInfo(&conn->closes, "CLOSE c%u; ", cursor);
}

/*
 * afdw_savepoint_later
 *		Send SQL, which ends the savepoint taken before a stream, first
 *		thing with the connection's next command.  Dropped if the local
 *		subtransaction it was taken in ends first, since that ends the
 *		remote savepoint too.
 */
void
afdw_savepoint_later(AfdwConn *conn, const char *sql)
{
	if (conn->savepoint_op != NULL)
		pfree(conn->savepoint_op);
	conn->savepoint_op = MemoryContextStrdup(conn_cxt, sql);
	conn->savepoint_level = GetCurrentTransactionNestLevel();
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
 *		The transaction or savepoint that the pending CLOSEs were for is
 *		over, and took the cursors with it.
 */
static void
forget_closes(AfdwConn *entry)
{
	if (entry->closes.data != NULL)
		resetStringInfo(&entry->closes);
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
	if (ss->leader->busy && ss->leader->streaming)
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
xact_prefix(AfdwConn *entry)
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
			 * later in an explicit transaction block: a snapshot cannot be
			 * exported once a savepoint is open.  The export rides in the
			 * same send as the command; afdw_get_result reads its result.
			 */
			if (server_connection_count(entry->serverid) > 1 ||
				IsTransactionBlock())
			{
				appendStringInfoString(&sql, "; SELECT pg_catalog.pg_export_snapshot()");
				entry->export_pending = true;
			}
		}
		else
		{
			if (ss->snapshot[0] == '\0' && ss->leader->export_pending)
				await_export(ss->leader);
			if (ss->snapshot[0] == '\0')
				export_snapshot(ss, ss->leader, "");
			appendStringInfo(&sql, "; SET TRANSACTION SNAPSHOT '%s'", ss->snapshot);
			entry->xact_depth = 1;
		}
	}

	for (int level = Max(entry->xact_depth, 1) + 1; level <= curlevel; level++)
		appendStringInfo(&sql, "%sSAVEPOINT s%d", sql.len > 0 ? "; " : "", level);
	entry->xact_depth = Max(entry->xact_depth, curlevel);

	/* Cursors left by ended scans. */
	if (entry->closes.data != NULL && entry->closes.len > 0)
	{
		if (sql.len > 0)
			appendStringInfoString(&sql, "; ");
		appendBinaryStringInfo(&sql, entry->closes.data, entry->closes.len - 2);
		resetStringInfo(&entry->closes);
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

	afdw_make_idle(conn);
	prefix = xact_prefix(conn);
	if (prefix[0] != '\0')
		afdw_run_command(conn, prefix);
	pfree(prefix);
}

/*
 * afdw_send_in_xact
 *		Send SQL (no parameters) in the remote transaction without waiting,
 *		with whatever opens the transaction in the same send; OWNER reads
 *		the results, through DRAIN when someone else needs the connection.
 */
void
afdw_send_in_xact(AfdwConn *conn, const char *sql, void *owner, AfdwDrainFn drain)
{
	char	   *prefix;
	char	   *full;

	afdw_make_idle(conn);
	prefix = xact_prefix(conn);
	full = prefix[0] ? psprintf("%s; %s", prefix, sql) : (char *) sql;
	afdw_send_query(conn, full, 0, NULL);
	afdw_set_owner(conn, owner, drain);
	if (full != sql)
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
		WaitEventSet *set = CreateWaitEventSet(conn_cxt, 3);

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
 * wait_for_input
 *		Wait until ENTRY's socket is readable and read what came, at most
 *		until DEADLINE (-1: no limit, and interrupts are served); false on
 *		timeout or when the connection broke.
 */
static bool
wait_for_input(AfdwConn *entry, TimestampTz deadline)
{
	long		wait = -1;
	int			rc;

	if (deadline >= 0)
	{
		wait = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (wait <= 0)
			return false;
	}
	rc = wait_readable(entry, wait);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		if (deadline < 0)
			CHECK_FOR_INTERRUPTS();
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

			lost = (PQresultStatus(res) == PGRES_FATAL_ERROR &&
					PQresultErrorField(res, PG_DIAG_SQLSTATE) == NULL);
			if (kept != NULL && PQresultStatus(kept) == PGRES_FATAL_ERROR)
				PQclear(res);
			else
			{
				PQclear(kept);
				kept = res;
			}

			/*
			 * An error of libpq's own (it has no SQLSTATE): the session is
			 * lost or out of step, and libpq may wait for an end that never
			 * comes.
			 */
			if (lost)
			{
				break_connection(conn, NULL);
				break;
			}
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
 *		without raising errors; true if it succeeded.
 *
 * Used while aborting, when an error must not be thrown and interrupts are
 * held off.
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
 *		raising an error; false if the connection must be dropped.
 */
static bool
abort_remote(AfdwConn *entry, const char *sql)
{
	TimestampTz deadline;

	/* A transaction command that was cut short left an unknown state. */
	if (entry->changing_xact_state || PQstatus(entry->conn) != CONNECTION_OK)
		return false;

	entry->changing_xact_state = true;
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   AFDW_CLEANUP_TIMEOUT_MS);
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
 * commit_all
 *		Send COMMIT on every connection in a remote transaction, then wait
 *		for all the answers, so that commits of many servers overlap.
 */
static void
commit_all(void)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;

	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn == NULL || entry->xact_depth == 0)
			continue;
		afdw_make_idle(entry);
		forget_closes(entry);
		forget_savepoint_op(entry, 0);
		entry->changing_xact_state = true;
		afdw_send_query(entry, "COMMIT TRANSACTION", 0, NULL);

		/*
		 * async_fdw only reads, and a REPEATABLE READ transaction that only
		 * read has nothing to lose at COMMIT: its answer is read before the
		 * connection's next use, off the critical path.  SERIALIZABLE ones
		 * may fail to commit, so they are waited for.
		 */
		if (!IsolationIsSerializable())
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
			/* Cancel everything at once, then clean up one by one. */
			hash_seq_init(&scan, conn_hash);
			while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
			{
				if (entry->conn != NULL && entry->xact_depth > 0 &&
					!entry->changing_xact_state)
					send_cancel(entry);
			}
			hash_seq_init(&scan, conn_hash);
			while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
			{
				if (entry->conn != NULL && entry->xact_depth > 0 &&
					!abort_remote(entry, "ABORT TRANSACTION"))
					entry->changing_xact_state = true;
			}
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
		entry->cursor_number = 0;
		entry->owner = NULL;
		entry->drain = NULL;
		forget_closes(entry);
		forget_savepoint_op(entry, 0);
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

	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB &&
		event != SUBXACT_EVENT_ABORT_SUB)
		return;
	if (!xact_got_connection)
		return;

	curlevel = GetCurrentTransactionNestLevel();
	hash_seq_init(&scan, conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		char		sql[200];

		if (entry->conn == NULL || entry->xact_depth < curlevel)
			continue;
		if (entry->xact_depth > curlevel)
			elog(ERROR, "remote savepoint level %d outlived its subtransaction",
				 entry->xact_depth);

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
			forget_closes(entry);
			forget_savepoint_op(entry, curlevel);
			(void) abort_remote(entry, sql);
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
