/*-------------------------------------------------------------------------
 *
 * connection_pool.c
 *		The pool of remote connections of async_fdw: taking and giving
 *		back connections, which ones are required or optional, dropping
 *		connections, invalidation.
 *
 * A backend keeps its connections across local transactions, keyed by user
 * mapping and slot.  Each scan gets a connection of its own up to the server's
 * max_connections; past that, scans share.  Each connection counts against the
 * backend's file descriptors; past them, scans share the connections open.  A
 * connection whose server or user mapping changed, or that broke, is replaced
 * once no remote transaction needs it. In a local transaction one connection
 * per user mapping writes (the writer, chosen by remote_xact.c's
 * afdw_acquire_writer), and once it wrote, the mapping's later scans go
 * through it (afdw_route_to_writer).  The answer to a COMMIT left unread is
 * read before a connection is reused.
 *
 * This file is part of the wire layer (with connection_setup.c,
 * remote_commands.c, connection_budget.c and connection_state.c), which
 * calls nothing above it: the session layer makes the pool
 * (afdw_connection_init) with the hooks through which it learns that a
 * remote session is gone (AfdwSessionHooks, connection_internal.h, kept by
 * connection_state.c with the hash of the connections), and takes
 * connections for scans (remote_xact.c, afdw_acquire_connection, over
 * afdw_pool_acquire).
 *
 * Neighbours: connection_setup.c opens one connection (settings, password
 * rules, application_name, refusals) and closes it; prepared_statements.c
 * keeps what is prepared in each remote session; remote_commands.c sends
 * commands and reads results on these connections, remote_xact.c runs the
 * remote transactions on them, shared_snapshot.c shares a snapshot among the
 * connections to one server.  They share struct AfdwConn through
 * connection_internal.h; scan.c and async_fdw.c see it through async_fdw.h
 * only, and so does connection_functions.c, which shows and closes connections
 * through afdw_list_connections and afdw_close_connection.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>

#include "storage/fd.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

/*
 * After a server refused a further connection for lack of room, how long
 * the pool shares its open connections before asking for a new one.
 */
#define AFDW_REFUSED_RETRY_MS	1000

static AfdwConn *open_or_share(AfdwConn *entry, UserMapping *user,
							   ForeignServer *server);
static void start_reserved(AfdwConn *entry, UserMapping *user, bool optional);
static bool kept_for_good(AfdwConn *entry);
static bool near_idle_timeout(AfdwConn *entry);
static bool wanted_idle_timeout(AfdwConn *entry, int *want);
static AfdwConn *least_used_open(Oid umid);
static bool reserve_fd(bool optional);
static void inval_callback(Datum arg, int cacheid, uint32 hashvalue);
static afdw_noreturn void report_lost_transaction(AfdwConn *entry);
static void finish_commit(AfdwConn *entry);

/*
 * afdw_connection_init
 *		Create the connection hash and register the invalidation callbacks,
 *		once; HOOKS is what the wire tells the session layer (see
 *		AfdwSessionHooks), given before the first connection exists.
 */
void
afdw_connection_init(const AfdwSessionHooks *hooks)
{
	if (afdw_conn_hash != NULL)
		return;

	afdw_make_conn_hash(hooks);
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
	return !entry->invalidated && entry->xact_state == AFDW_XACT_KNOWN &&
		!afdw_budget_idle_expired(entry) &&
		PQstatus(entry->conn) == CONNECTION_OK &&
		PQtransactionStatus(entry->conn) == PQTRANS_IDLE &&
		!socket_has_data(entry->conn) && !near_idle_timeout(entry);
}

/*
 * near_idle_timeout
 *		True if the server may close ENTRY, idle since its last transaction
 *		ended, any moment now (its idle_timeout, see
 *		afdw_append_idle_setting).
 *
 * A command sent just as the server's timer fires would find the session
 * gone: such a connection is closed and opened again rather than used
 * in the last quarter of its idle time.
 */
static bool
near_idle_timeout(AfdwConn *entry)
{
	if (entry->idle_timeout <= 0 || entry->idle_since == 0)
		return false;
	return TimestampDifferenceExceeds(entry->idle_since, GetCurrentTimestamp(),
									  entry->idle_timeout - entry->idle_timeout / 4);
}

/*
 * afdw_pool_acquire
 *		A connection of USER's pool for one scan, until
 *		afdw_release_connection (the session layer's afdw_acquire_connection
 *		takes it so, having made the pool).
 *
 * Each scan gets a connection of its own while the pool has fewer than
 * the server's max_connections; past that, scans share the connections
 * with the fewest users and take turns on them.  A connection that broke
 * or whose server or user mapping changed is replaced when no remote
 * transaction is open on it.
 */
AfdwConn *
afdw_pool_acquire(UserMapping *user)
{
	ForeignServer *server = GetForeignServer(user->serverid);
	int			configured = afdw_int_option(server->options, "max_connections", 0);
	AfdwPooler	pooler = afdw_pooler_option(server->options);
	bool		pooled = (pooler == AFDW_POOLER_TRANSACTION);
	int			max;
	AfdwConn   *best = NULL;
	AfdwConn   *entry;

	/*
	 * A value stored before the validator bounded it is bounded here.
	 * Through a transaction pooler the default is one connection: each
	 * connection in a remote transaction holds one of the pooler's server
	 * sessions until the local transaction ends, so backends that each
	 * wanted several could wait for each other's until the pooler's
	 * timeout.
	 */
	max = (configured > 0) ? Min(configured, AFDW_MAX_MAX_CONNECTIONS) :
		(pooled ? 1 : AFDW_DEFAULT_MAX_CONNECTIONS);

	Assert(afdw_conn_hash != NULL);

	/*
	 * An unused open connection, else an unused slot, else the least used
	 * one that no scan streams on.  Streams are never shared: when every
	 * connection streams, one more is opened past max_connections, except
	 * through a transaction pooler, where a scan shares a stream's
	 * connection (reading the stream into memory first) rather than wait
	 * for a server session.
	 */
	for (int slot = 0; slot < max || (best == NULL && !pooled); slot++)
	{
		AfdwConnKey key;
		bool		found;

		key.umid = user->umid;
		key.slot = slot;
		entry = hash_search(afdw_conn_hash, &key, HASH_ENTER, &found);
		if (!found)
		{
			memset(((char *) entry) + sizeof(AfdwConnKey), 0,
				   sizeof(AfdwConn) - sizeof(AfdwConnKey));
			entry->conn = NULL;
		}

		/* Where auto found a transaction pooler, it counts as chosen. */
		if (slot == 0 && pooler == AFDW_POOLER_AUTO && entry->refuses_options)
		{
			pooled = true;
			if (configured <= 0)
				max = 1;
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
	if (best == NULL)
		best = least_used_open(user->umid);
	entry = best;

	/* One being opened is taken as it is: its handshake goes on. */
	if (entry->conn != NULL && entry->connecting == NULL)
	{
		if (entry->in_flight == AFDW_IN_FLIGHT_COMMIT)
			finish_commit(entry);
		if (entry->xact_depth == 0 && entry->in_flight == AFDW_IN_FLIGHT_NONE &&
			!usable_idle(entry))
			afdw_disconnect_entry(entry);
	}

	if (entry->conn != NULL && entry->connecting == NULL &&
		(entry->xact_state != AFDW_XACT_KNOWN ||
		 PQstatus(entry->conn) != CONNECTION_OK))
		report_lost_transaction(entry);

	/* An unused slot: connect it, or share an open connection instead. */
	if (entry->conn == NULL)
		entry = open_or_share(entry, user, server);

	afdw_budget_in_use(entry);
	entry->nusers++;
	return entry;
}

/*
 * report_lost_transaction
 *		Raise the loss of ENTRY's remote transaction: its connection broke,
 *		or a change of its transaction state was cut short, while the local
 *		transaction still needs it.
 */
static void
report_lost_transaction(AfdwConn *entry)
{
	/*
	 * A transaction command cut short (a cleanup that failed) gets the code
	 * postgres_fdw gives a connection left so, 08000; a broken connection
	 * 08006.
	 */
	ereport(ERROR,
			(errcode(entry->xact_state != AFDW_XACT_KNOWN ?
					 ERRCODE_CONNECTION_EXCEPTION :
					 ERRCODE_CONNECTION_FAILURE),
			 errmsg("lost connection to server \"%s\"",
					NameStr(entry->servername)),
			 errdetail("The remote transaction of this local transaction is lost."),
			 errhint("Roll back the local transaction and retry.")));
}

/*
 * finish_commit
 *		Read the answer to a COMMIT that was not waited for, before ENTRY is
 *		used again.  It was the commit of a transaction that only read:
 *		whatever it says, nothing is lost, but a connection that fails here
 *		is replaced.
 */
static void
finish_commit(AfdwConn *entry)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   AFDW_CLEANUP_TIMEOUT_MS);

	/*
	 * Read now, by no owner.  The wait serves interrupts: if one cuts it
	 * short, the answer is still on its way, and the end of the
	 * transaction drops the connection, which has a command in flight.
	 */
	afdw_set_in_flight(entry, AFDW_IN_FLIGHT_PLAIN);
	if (!afdw_wait_cleanup(entry, deadline, true, NULL) ||
		PQtransactionStatus(entry->conn) != PQTRANS_IDLE)
		afdw_disconnect_entry(entry);
}

/*
 * afdw_renew_idle
 *		The connection that a scan holding CONN is to send its first command
 *		of the local transaction on: CONN, with its session opened again if
 *		the remote server may close it any moment now, or, when the server
 *		refuses the new session for lack of room, an open connection of the
 *		pool that the scan shares instead (CONN is then given back, and the
 *		one returned taken).
 *
 * afdw_pool_acquire checks the idle time when the scan takes the
 * connection, but a scan may send its first command long after (a
 * parameterized scan when the outer side gives it a row, a subplan when it
 * is evaluated), while the remote idle_session_timeout runs on.  Nothing
 * has been sent on CONN in this transaction yet, so the scans holding it
 * carry on with the new session unawares, or move when they send their
 * own first commands.
 */
AfdwConn *
afdw_renew_idle(AfdwConn *conn)
{
	AfdwConn   *entry;
	AfdwRole	role;

	/* Another scan's renewal of CONN was refused: share as it did. */
	if (conn->conn == NULL && conn->connecting == NULL)
		return afdw_connection_ready(conn);
	if (conn->xact_depth > 0 || conn->in_flight != AFDW_IN_FLIGHT_NONE ||
		conn->connecting != NULL || !near_idle_timeout(conn))
		return conn;

	/* A writer that wrote nothing yet moves with its users. */
	role = conn->role;
	Assert(role != AFDW_ROLE_WROTE);
	afdw_disconnect_entry(conn);
	entry = open_or_share(conn, GetUserMapping(conn->userid, conn->serverid),
						  GetForeignServer(conn->serverid));
	if (role == AFDW_ROLE_WRITER && entry->role == AFDW_ROLE_READER)
		afdw_set_role(entry, AFDW_ROLE_WRITER);
	if (entry != conn)
	{
		afdw_release_connection(conn);
		afdw_budget_in_use(entry);
		entry->nusers++;
	}
	return afdw_connection_ready(entry);
}

/*
 * afdw_is_connecting
 *		True while CONN is being opened: afdw_connection_ready or
 *		afdw_connect_finish must end its handshake before it is used.
 */
bool
afdw_is_connecting(AfdwConn *conn)
{
	return conn->connecting != NULL;
}

/*
 * afdw_connection_ready
 *		The connection that a scan holding CONN (from
 *		afdw_acquire_connection) is to use, open: CONN once its handshake
 *		is over, or, when the server refused it for lack of room, the open
 *		connection of the pool the scan shares instead (CONN is then given
 *		back, and the one returned taken).  When it fails the caller still
 *		holds CONN, and gives it back as it would after any other error.
 */
AfdwConn *
afdw_connection_ready(AfdwConn *conn)
{
	AfdwConn   *shared;

	if (conn->connecting != NULL)
		afdw_connect_finish(&conn, 1);
	if (conn->conn != NULL)
		return conn;

	shared = least_used_open(conn->key.umid);
	/* None could be opened: the error postgres_fdw gives for its one. */
	if (shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not connect to server \"%s\"",
						NameStr(conn->servername)),
				 errdetail_internal("%s", conn->refusal ? conn->refusal :
									"The server refused the connection for lack of room.")));
	afdw_release_connection(conn);
	shared->nusers++;
	return afdw_connection_ready(shared);
}

/*
 * open_or_share
 *		Connect ENTRY, an unused slot of USER's pool on SERVER, and return
 *		it; or return an open connection of the pool to share instead.
 *
 * Only the first connection to the server is required: it is opened or
 * the query fails.  Any further one is optional: without a file
 * descriptor to spare, or when the server refuses it for lack of room
 * (SQLSTATE class 53, such as "too many clients"), the scan shares the
 * least used open connection and takes turns on it, and the query goes on.
 * After such a refusal the pool asks the server for no new connection for
 * AFDW_REFUSED_RETRY_MS, so that the scans of a query do not each knock on
 * a full server.  Without a budget, neither is one while another backend
 * waits for room for its first connection there (afdw_room_wanted).  With
 * a budget (connection_budget.c), an optional connection past it is not opened
 * either, and the required one waits for room.
 *
 * The connection is only started here: the handshakes of the connections
 * a query needs go on together until afdw_connect_finish, which learns
 * of a refusal (afdw_connection_ready then hands out the shared one).
 */
static AfdwConn *
open_or_share(AfdwConn *entry, UserMapping *user, ForeignServer *server)
{
	AfdwConn   *shared = least_used_open(user->umid);
	AfdwConn   *first = afdw_slot_zero(user->umid);

	Assert(first != NULL);		/* afdw_pool_acquire made slot 0 */

	if (shared != NULL && first->refused_at != 0 &&
		!TimestampDifferenceExceeds(first->refused_at, GetCurrentTimestamp(),
									AFDW_REFUSED_RETRY_MS))
		return shared;
	/* Another backend's first connection waits for room there. */
	if (shared != NULL && afdw_room_wanted(shared))
		return shared;

	if (!afdw_budget_charge(entry, server, shared != NULL))
		return shared;
	if (!reserve_fd(shared != NULL))
	{
		afdw_budget_release(entry);
		if (shared == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to server \"%s\"", server->servername),
					 errdetail("There are too many open files on the local server."),
					 errhint("Raise the local server's \"max_files_per_process\" setting or its \"ulimit -n\" limit.")));
		return shared;
	}

	start_reserved(entry, user, shared != NULL);
	return entry;
}

/*
 * kept_for_good
 *		True if ENTRY is one of the idle_connections (by default one) open
 *		connections of its pool with the lowest slots: those stay open
 *		between transactions.
 */
static bool
kept_for_good(AfdwConn *entry)
{
	int			below = 0;

	for (int slot = 0; slot < entry->key.slot && below < entry->keep_idle; slot++)
	{
		AfdwConnKey key;
		AfdwConn   *other;

		key.umid = entry->key.umid;
		key.slot = slot;
		other = hash_search(afdw_conn_hash, &key, HASH_FIND, NULL);
		if (other != NULL && other->conn != NULL && other->connecting == NULL)
			below++;
	}
	return below < entry->keep_idle;
}

/*
 * afdw_append_idle_setting
 *		Append to SQL, the command that ends ENTRY's remote transaction, the
 *		remote idle_session_timeout the session is to keep from then on, if
 *		it changes: none for a connection kept for good, the server's
 *		idle_timeout for the others.
 *
 * The remote server itself then closes a connection past those once it
 * has been idle outside a transaction for that long, giving its place
 * back, while a session that runs queries back to back keeps using it; a
 * backend runs no code while its session is idle, and could not close it
 * then.  The setting is made after the transaction, in the same message
 * as its end (no round trip, and a rollback cannot undo it), not when
 * connecting: a connection that waits before its first command (for the
 * other handshakes, or for the snapshot of another connection) must not
 * time out.  Only PostgreSQL 14 and later have the setting, and through a
 * pooler the server session is not the connection's: then the connection
 * is closed at the end of the transaction (afdw_trim_idle_pools).
 */
void
afdw_append_idle_setting(AfdwConn *entry, StringInfo sql)
{
	int			want;

	if (!wanted_idle_timeout(entry, &want))
		return;
	appendStringInfo(sql, "; SET idle_session_timeout = %d", want);
	entry->idle_timeout = want;
}

/*
 * afdw_idle_setting_changes
 *		Whether the end of ENTRY's transaction would change its remote idle
 *		timeout (afdw_append_idle_setting), changing nothing.
 */
bool
afdw_idle_setting_changes(AfdwConn *entry)
{
	int			want;

	return wanted_idle_timeout(entry, &want);
}

/*
 * wanted_idle_timeout
 *		The idle timeout ENTRY's remote session should have from the end of
 *		its transaction on, in *WANT; false if it has it already or cannot
 *		have one (afdw_append_idle_setting).
 */
static bool
wanted_idle_timeout(AfdwConn *entry, int *want)
{
	*want = 0;
	if (!kept_for_good(entry))
	{
		if (entry->pooler != AFDW_POOLER_NONE ||
			PQserverVersion(entry->conn) < 140000)
			return false;
		*want = entry->idle_limit;
	}
	return *want != entry->idle_timeout;
}

/*
 * start_reserved
 *		afdw_connect_start, giving back the file descriptor reserved for
 *		the connection and its unit of the budget when it fails with an
 *		error.
 */
static void
start_reserved(AfdwConn *entry, UserMapping *user, bool optional)
{
	PG_TRY();
	{
		afdw_connect_start(entry, user, optional);
	}
	PG_CATCH();
	{
		if (entry->conn != NULL)
			afdw_disconnect_entry(entry);
		else
		{
			afdw_connect_forget(entry);
			ReleaseExternalFD();
			afdw_budget_release(entry);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();
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

	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->key.umid != umid || entry->conn == NULL ||
			entry->xact_state != AFDW_XACT_KNOWN)
			continue;
		/* An idle one the server closed (idle_timeout) is dropped. */
		if (entry->nusers == 0 && entry->xact_depth == 0 &&
			entry->in_flight == AFDW_IN_FLIGHT_NONE &&
			entry->connecting == NULL && !usable_idle(entry))
		{
			afdw_disconnect_entry(entry);
			continue;
		}
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
 * afdw_find_writer
 *		The writer of user mapping UMID in the current local transaction
 *		(see AfdwConn), or NULL if none was chosen.
 */
AfdwConn *
afdw_find_writer(Oid umid)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;

	if (afdw_conn_hash == NULL)
		return NULL;
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->key.umid == umid && entry->role != AFDW_ROLE_READER)
		{
			hash_seq_term(&scan);
			return entry;
		}
	}
	return NULL;
}

/*
 * afdw_take_open
 *		Take ENTRY, an open connection that a remote transaction of the
 *		current local one runs on, for one more scan, until
 *		afdw_release_connection; raise the loss of the remote transaction
 *		if its session broke.
 */
void
afdw_take_open(AfdwConn *entry)
{
	if (entry->conn == NULL || entry->xact_state != AFDW_XACT_KNOWN ||
		PQstatus(entry->conn) != CONNECTION_OK)
		report_lost_transaction(entry);
	afdw_budget_in_use(entry);
	entry->nusers++;
}

/*
 * afdw_current_writer
 *		The writer of CONN's user mapping now: a writer that had to share
 *		the leader of its server's remote transaction moved there
 *		(afdw_join_target).  CONN if none was chosen.
 */
AfdwConn *
afdw_current_writer(AfdwConn *conn)
{
	AfdwConn   *writer;

	if (conn->role != AFDW_ROLE_READER)
		return conn;
	writer = afdw_find_writer(conn->key.umid);
	return writer != NULL ? writer : conn;
}

/*
 * afdw_route_to_writer
 *		The connection a scan holding CONN is to send its next query on:
 *		the writer of CONN's user mapping once it wrote in the current
 *		local transaction (the scan then holds it instead), else CONN.
 */
AfdwConn *
afdw_route_to_writer(AfdwConn *conn)
{
	AfdwConn   *writer = afdw_current_writer(conn);

	if (writer == conn || writer->role != AFDW_ROLE_WROTE)
		return conn;
	if (conn->nusers > 0)
		conn->nusers--;
	writer->nusers++;
	return writer;
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
 * conn_in_use
 *		Whether the current transaction uses ENTRY: scans hold it, or a
 *		remote transaction (even a failed one) is open on it.
 */
static bool
conn_in_use(AfdwConn *entry)
{
	return entry->nusers > 0 || entry->xact_depth > 0;
}

/*
 * peer_closed
 *		1 if the server closed CONN (or it is broken), 0 if not, -1 if this
 *		platform cannot tell without reading from it.
 *
 * A server that ends the session (pg_terminate_backend, a restart, an
 * idle timeout) shuts the socket down; POLLRDHUP (Linux) reports that
 * at once even while unread data (the server's last error) waits, where
 * POLLIN alone would not tell an answer from a goodbye.
 */
static int
peer_closed(PGconn *conn)
{
#ifdef POLLRDHUP
	struct pollfd pfd;
	int			rc;

	if (PQstatus(conn) != CONNECTION_OK || PQsocket(conn) < 0)
		return 1;
	pfd.fd = PQsocket(conn);
	pfd.events = POLLRDHUP;
	pfd.revents = 0;
	do
		rc = poll(&pfd, 1, 0);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return 1;
	return (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
#else
	(void) conn;
	return -1;
#endif
}

/*
 * afdw_list_connections
 *		A List of AfdwConnInfo, palloc'd in the current context, one per
 *		open connection of this backend, in no particular order; with
 *		CHECK_CLOSED, whether the server closed each one (peer_closed).
 */
List *
afdw_list_connections(bool check_closed)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	List	   *result = NIL;

	if (afdw_conn_hash == NULL)
		return NIL;

	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		AfdwConnInfo *info;

		/* Entries stay in the hash once their session is closed. */
		if (entry->conn == NULL)
			continue;
		/* An idle one the server closed (idle_timeout) is dropped. */
		if (entry->nusers == 0 && entry->xact_depth == 0 &&
			entry->in_flight == AFDW_IN_FLIGHT_NONE && !usable_idle(entry))
		{
			afdw_disconnect_entry(entry);
			continue;
		}

		info = palloc(sizeof(AfdwConnInfo));
		info->serverid = entry->serverid;
		info->umid = entry->key.umid;
		info->slot = entry->key.slot;
		info->valid = !entry->invalidated;
		info->in_use = conn_in_use(entry);
		info->used_in_xact = entry->xact_depth > 0;
		info->closed = check_closed ? peer_closed(entry->conn) : -1;
		info->nusers = entry->nusers;
		info->streaming = entry->streaming && entry->nusers > 0;
		info->remote_pid = PQbackendPID(entry->conn);
		info->opened_at = entry->opened_at;
		info->can_prepare = entry->can_prepare;
		result = lappend(result, info);
	}
	return result;
}

/*
 * afdw_close_connection
 *		Close the connection in SLOT of user mapping UMID unless the current
 *		transaction uses it; true if it was open and is now closed.
 */
bool
afdw_close_connection(Oid umid, int slot)
{
	AfdwConnKey key;
	AfdwConn   *entry;

	if (afdw_conn_hash == NULL)
		return false;
	key.umid = umid;
	key.slot = slot;
	entry = hash_search(afdw_conn_hash, &key, HASH_FIND, NULL);
	if (entry == NULL || entry->conn == NULL || conn_in_use(entry))
		return false;

	/*
	 * Outside the transaction's use nothing refers to the session but the
	 * entry (a COMMIT not waited for is dropped with it, as it is when an
	 * idle connection is found broken).
	 */
	afdw_disconnect_entry(entry);
	return true;
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

/*
 * afdw_connection_alive
 *		False if ENTRY's remote session is known to be over: what is on the
 *		socket, read into libpq's buffer for whoever reads the results, ends
 *		with the end of the connection.
 */
bool
afdw_connection_alive(AfdwConn *entry)
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
 * afdw_trim_idle_pools
 *		Between transactions, keep open the first idle_connections (by
 *		default one) of each pool's connections, lowest slots first; close
 *		the rest, unless the server closes them itself once they have been
 *		idle for idle_timeout (see afdw_append_idle_setting).
 *
 * Run by the transaction callback (xact_callbacks.c) when a transaction ends.
 * A backend runs no code while its session is idle, so this is the last moment
 * at which it can give places back; the connections past the first are opened
 * again by the next query that needs them.  Those past the kept ones close
 * now, not after their idle time, when the server refused the pool one a
 * moment ago, or, without preloading, when another backend waits for room
 * there for its first (afdw_room_wanted): else sessions that run queries back
 * to back would keep them for good, and a session arriving later find no place
 * for its first.  When another backend waits for room on a server
 * (connection_budget.c), every idle connection to it closes, the kept ones
 * too: a cache yields to a real need.  Those the server closes itself stop
 * counting against the budget once it has.
 */
void
afdw_trim_idle_pools(void)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *first;

	hash_seq_init(&scan, afdw_conn_hash);
	while ((first = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		int			kept = 0;
		bool		full;
		int			wanted = -1;	/* afdw_room_wanted, once asked */

		if (first->key.slot != 0)
			continue;

		/*
		 * A server that refused a connection of the pool a moment ago is
		 * full: the connections past the kept ones are given back now, not
		 * after their idle time, so that other sessions' first connections
		 * find room.
		 */
		full = first->refused_at != 0 &&
			!TimestampDifferenceExceeds(first->refused_at, GetCurrentTimestamp(),
										AFDW_REFUSED_RETRY_MS);
		for (int slot = 0;; slot++)
		{
			AfdwConnKey key;
			AfdwConn   *entry;

			key.umid = first->key.umid;
			key.slot = slot;
			entry = hash_search(afdw_conn_hash, &key, HASH_FIND, NULL);
			if (entry == NULL)
				break;
			if (entry->conn == NULL)
				continue;
			if (afdw_budget_wanted(entry->serverid))
			{
				afdw_disconnect_entry(entry);
				continue;
			}
			if (entry->idle_timeout > 0)
				afdw_budget_idle(entry, entry->idle_timeout);
			if (kept < entry->keep_idle)
				kept++;
			/* The server closes those with a timeout once idle that long. */
			else if (entry->idle_timeout == 0 || full)
				afdw_disconnect_entry(entry);
			else
			{
				/* Unless another backend waits for room there now. */
				if (wanted < 0)
					wanted = afdw_room_wanted(entry) ? 1 : 0;
				if (wanted)
					afdw_disconnect_entry(entry);
			}
		}
	}
}

/*
 * afdw_set_role
 *		Move CONN to ROLE in its user mapping's writes (see AfdwRole): to
 *		the writer when chosen, to wrote at each write, back to a reader at
 *		the end of the transaction or when the role moves to another
 *		connection before a write.
 */
void
afdw_set_role(AfdwConn *conn, AfdwRole role)
{
#ifdef USE_ASSERT_CHECKING
	switch (role)
	{
		case AFDW_ROLE_READER:
			/* From any: the transaction or the session is over. */
			break;
		case AFDW_ROLE_WRITER:
			/* Chosen, or its writes all rolled back with a savepoint. */
			Assert(conn->role != AFDW_ROLE_WRITER);
			break;
		case AFDW_ROLE_WROTE:
			Assert(conn->role != AFDW_ROLE_READER);
			break;
	}
#endif
	conn->role = role;
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

	if (afdw_conn_hash == NULL)
		return;

	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		uint32		mine;

		mine = (cacheid == FOREIGNSERVEROID) ? entry->server_hash : entry->mapping_hash;
		if (hashvalue != 0 && hashvalue != mine)
			continue;
		/* The server may be another now: auto asks again. */
		entry->refuses_options = false;
		if (entry->conn == NULL)
			continue;

		/*
		 * One whose only work in flight is the COMMIT of a transaction that
		 * only read, not waited for, goes too: its answer matters to nobody,
		 * and a dropped server's connection would otherwise stay open for
		 * the backend's life, since no later scan takes its slot.
		 */
		if (entry->xact_depth == 0 && entry->nusers == 0 &&
			(entry->in_flight == AFDW_IN_FLIGHT_NONE ||
			 entry->in_flight == AFDW_IN_FLIGHT_COMMIT))
			afdw_disconnect_entry(entry);
		else
			entry->invalidated = true;
	}
}
