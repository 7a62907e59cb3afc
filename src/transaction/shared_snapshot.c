/*-------------------------------------------------------------------------
 *
 * shared_snapshot.c
 *		The snapshot that the connections of async_fdw to one server, of one
 *		user mapping, share in a local transaction.
 *
 * The first connection of a user mapping to a server in a local
 * transaction (its leader) opens its remote transaction and, when more
 * connections may join, exports its snapshot in the same send as its first
 * command; the others import it, so that every scan of the server sees the
 * same data.  The connection through which the mapping writes never
 * exports (a transaction that exported cannot be prepared for a two-phase
 * commit), so it is never a leader that exported.  A connection that
 * cannot join (the leader exported nothing and now cannot, or is the
 * writer) shares the leader instead, which is the same mapping's:
 * different mappings have transactions of their own, as with postgres_fdw,
 * and never run a query on another's connection.
 *
 * Neighbours: remote_xact.c opens the remote transactions and calls
 * afdw_share_snapshot for the commands that give each its snapshot;
 * remote_commands.c hands the export's result over as it reads results
 * (through remote_xact.c's hook, session_export); remote_xact.c chooses the
 * writer, the leader when there is one (afdw_acquire_writer); scan.c asks
 * where a scan's first command goes (afdw_join_target), which is the writer
 * once the mapping wrote (connection_pool.c); remote_xact.c hands the lead to
 * the writer when it ends the leader's transaction early
 * (afdw_pass_leadership).  Whether the running statement is the whole local
 * transaction (afdw_statement_is_transaction) is answered here, where it
 * decides whether a floor is noted for snapshots taken later; remote_xact.c
 * and scan.c ask it too, whether a COMMIT may ride along.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

/*
 * The width of the row sent after a snapshot export so that the server
 * sends the export's result at once: more than the server's output buffer
 * (8 kB in every supported version; see afdw_share_snapshot).
 */
#define EXPORT_PAD_BYTES	8200

/*
 * Whose snapshot: a server's, as one user mapping sees it.  Connections of
 * different user mappings never share a snapshot (nor a connection): each
 * mapping has its own remote transactions, as with postgres_fdw, so that
 * no query runs with another user's remote credentials.
 */
typedef struct SnapshotKey
{
	Oid			serverid;
	Oid			umid;
} SnapshotKey;

/*
 * The remote snapshot of one server and user mapping in the current local
 * transaction: the first connection (the leader) exports it when more than
 * one connection needs it, the others import it.
 */
typedef struct ServerSnapshot
{
	SnapshotKey key;			/* hash key */
	AfdwConn   *leader;
	char		snapshot[64];	/* exported snapshot id, or "" */
} ServerSnapshot;

/* ServerSnapshots of the current local transaction, or NULL. */
static HTAB *snapshot_hash = NULL;

/*
 * The floor of the commit fence's numbers (commit_fence.c) when the current
 * local transaction took its first snapshots, if noted: a server first read
 * later is checked against it.
 */
static bool floor_noted = false;
static uint64 xact_floor = 0;

/*
 * While the first commands of a statement's scans are sent under the
 * commit fence (visibility.c), each leader opening its server's remote
 * transaction marks its snapshot taken, and is listed here (in
 * TopTransactionContext).
 */
static bool marking = false;
static List *marked = NIL;

static bool valid_snapshot_name(const char *name);

/*
 * server_snapshot
 *		The snapshot entry of CONN's server and user mapping in the current
 *		local transaction, made if need be.
 */
static ServerSnapshot *
server_snapshot(AfdwConn *conn)
{
	bool		found;
	ServerSnapshot *ss;
	SnapshotKey key;

	if (snapshot_hash == NULL)
	{
		HASHCTL		ctl;

		/* Dies with the transaction; xact_callbacks.c's callback forgets the pointer. */
		ctl.keysize = sizeof(SnapshotKey);
		ctl.entrysize = sizeof(ServerSnapshot);
		ctl.hcxt = TopTransactionContext;
		snapshot_hash = hash_create("async_fdw snapshots", 8, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	memset(&key, 0, sizeof(key));
	key.serverid = conn->serverid;
	key.umid = conn->key.umid;
	ss = hash_search(snapshot_hash, &key, HASH_ENTER, &found);
	if (!found)
	{
		ss->leader = NULL;
		ss->snapshot[0] = '\0';
	}
	return ss;
}

/*
 * find_snapshot
 *		The snapshot entry of server SERVERID and user mapping UMID in the
 *		current local transaction, or NULL.
 */
static ServerSnapshot *
find_snapshot(Oid serverid, Oid umid)
{
	SnapshotKey key;

	if (snapshot_hash == NULL)
		return NULL;
	memset(&key, 0, sizeof(key));
	key.serverid = serverid;
	key.umid = umid;
	return hash_search(snapshot_hash, &key, HASH_FIND, NULL);
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
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry != leader && entry->conn != NULL &&
			entry->serverid == leader->serverid &&
			entry->key.umid == leader->key.umid && entry->nusers > 0)
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
 * afdw_store_export
 *		RES is the result of the export that rode in CONN's first command of
 *		the transaction: keep the snapshot name for the connections that
 *		join later, and free RES.  False if RES holds no usable name.
 */
bool
afdw_store_export(AfdwConn *conn, PGresult *res)
{
	bool		ok = (PQntuples(res) == 1 && PQnfields(res) == 1 &&
					  !PQgetisnull(res, 0, 0));
	ServerSnapshot *ss = NULL;

	ss = find_snapshot(conn->serverid, conn->key.umid);
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
 * afdw_take_export
 *		afdw_store_export, failing when the export gave no usable name.
 */
void
afdw_take_export(AfdwConn *conn, PGresult *res)
{
	if (!afdw_store_export(conn, res))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not export the snapshot of server \"%s\"",
						NameStr(conn->servername)),
				 errdetail("pg_export_snapshot() returned no usable snapshot name.")));
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
	if (leader->xact_state == AFDW_XACT_KNOWN && afdw_connection_alive(leader))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("lost connection to server \"%s\"",
					NameStr(leader->servername)),
			 errdetail("The connection that opened the remote transaction, whose snapshot the other connections share, is lost."),
			 errhint("Roll back the local transaction and retry.")));
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
	PGresult   *res;

	(void) afdw_snapshot_await_taken(leader, -1);
	res = leader->held_result;
	if (res == NULL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("could not export the snapshot of server \"%s\"",
					NameStr(leader->servername)),
			 errdetail("The export failed on the connection that opened the remote transaction: %s",
					   PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?
					   PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) :
					   pchomp(PQerrorMessage(leader->conn)))));
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
	ss = server_snapshot(conn);
	if (ss->leader == NULL || ss->leader == conn || ss->snapshot[0] != '\0')
		return;
	/* Its export is on the way already, ahead of its first command. */
	if (ss->leader->export_pending)
		return;
	/* Not possible now: the joining scan shares the leader instead. */
	if ((afdw_is_busy(ss->leader) && ss->leader->streaming) ||
		ss->leader->xact_depth != 1 || ss->leader->role != AFDW_ROLE_READER)
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

	/* After a write, the writer's remote transaction alone sees it. */
	conn = afdw_route_to_writer(conn);
	if (conn->xact_depth > 0 || snapshot_hash == NULL)
		return conn;
	ss = find_snapshot(conn->serverid, conn->key.umid);
	if (ss == NULL || ss->leader == NULL || ss->leader == conn ||
		ss->snapshot[0] != '\0')
		return conn;
	leader = ss->leader;
	if (leader->export_pending)
		return conn;
	if (leader->conn != NULL && leader->xact_depth == 1 &&
		leader->role == AFDW_ROLE_READER &&
		!(afdw_is_busy(leader) && leader->streaming))
		return conn;
	if (conn->nusers > 0)
		conn->nusers--;
	leader->nusers++;
	/* The writer moves too: the leader's transaction is where it writes. */
	if (conn->role == AFDW_ROLE_WRITER && leader->role == AFDW_ROLE_READER)
	{
		afdw_set_role(conn, AFDW_ROLE_READER);
		afdw_set_role(leader, AFDW_ROLE_WRITER);
	}
	return leader;
}

/*
 * afdw_snapshot_leader
 *		The connection of user mapping UMID that leads its remote
 *		transaction on server SERVERID in the current local transaction, or
 *		NULL if there is none.
 */
AfdwConn *
afdw_snapshot_leader(Oid serverid, Oid umid)
{
	ServerSnapshot *ss = find_snapshot(serverid, umid);

	if (ss == NULL || ss->leader == NULL)
		return NULL;
	return ss->leader;
}

/*
 * afdw_snapshot_exporter
 *		Whether CONN leads its remote transaction and exported (or is
 *		exporting) its snapshot: PostgreSQL cannot prepare such a
 *		transaction for a two-phase commit, so it must not write.
 */
bool
afdw_snapshot_exporter(AfdwConn *conn)
{
	ServerSnapshot *ss = find_snapshot(conn->serverid, conn->key.umid);

	return ss != NULL && ss->leader == conn &&
		(ss->snapshot[0] != '\0' || conn->export_pending);
}

/*
 * afdw_pass_leadership
 *		GONE's remote transaction ended before the local one: if it led its
 *		server's, HEIR, a connection in the same snapshot, leads it from now
 *		on, and exports the snapshot again for the connections that join
 *		later (GONE's export ended with its transaction).
 */
void
afdw_pass_leadership(AfdwConn *gone, AfdwConn *heir)
{
	ServerSnapshot *ss = find_snapshot(gone->serverid, gone->key.umid);

	if (ss == NULL || ss->leader != gone)
		return;
	Assert(heir->serverid == gone->serverid && heir->xact_depth > 0);
	/* Another mapping's: that mapping's next connection starts anew. */
	if (heir->key.umid != gone->key.umid)
	{
		hash_search(snapshot_hash, &ss->key, HASH_REMOVE, NULL);
		return;
	}
	ss->leader = heir;
	ss->snapshot[0] = '\0';
}

/*
 * afdw_snapshot_ended
 *		CONN's remote transaction ended with the statement's last command
 *		(afdw_send_in_xact): if it led its server's, the server has no
 *		snapshot in the local transaction any more, and its next connection
 *		starts anew.
 */
void
afdw_snapshot_ended(AfdwConn *conn)
{
	ServerSnapshot *ss = find_snapshot(conn->serverid, conn->key.umid);

	if (ss != NULL && ss->leader == conn)
		hash_search(snapshot_hash, &ss->key, HASH_REMOVE, NULL);
}

/*
 * afdw_share_snapshot
 *		Append to SQL, which starts ENTRY's remote transaction, what gives
 *		the transaction the snapshot that the connections to its server
 *		share in the local transaction.  NESTED is afdw_send_in_xact's.
 *
 * The first connection to the server in the local transaction becomes its
 * leader.  When the server has several connections, or may have in a
 * transaction block, the leader exports its snapshot in the same send as
 * its first command, and every other one imports it in the same send as
 * its own first command (after waiting for the export's result if it is
 * still on its way), so that all of them see the same data.
 *
 * A server sends the results of a string of statements as its output buffer (8
 * kB) fills, or at the end of the string: the export's result would wait for
 * the end of the leader's command, a long aggregate say, and so would every
 * connection importing the snapshot.  A row wider than that buffer, right
 * after the export, pushes the export's result out at once; remote_commands.c
 * reads the row as a command's result (afdw_pop_result).
 */
void
afdw_share_snapshot(AfdwConn *entry, bool nested, StringInfo sql)
{
	ServerSnapshot *ss = server_snapshot(entry);

	if (ss->leader == NULL)
	{
		ss->leader = entry;
		/*
		 * Export when other connections serve this server now, or may
		 * join later: a snapshot cannot be exported once a savepoint is
		 * open or while a stream runs.  The export rides in the same
		 * send as the command; afdw_get_result reads its result.
		 */
		if (entry->role == AFDW_ROLE_READER && export_wanted(entry, nested))
		{
			appendStringInfo(sql, "; SELECT pg_catalog.pg_export_snapshot()"
							 "; SELECT pg_catalog.repeat(' ', %d)",
							 EXPORT_PAD_BYTES);
			afdw_expect_export(entry);
		}
		else if (marking)
		{
			/*
			 * The marker takes the snapshot (the first statement of a
			 * REPEATABLE READ transaction that needs one), and the wide row
			 * after it pushes its result out at once.
			 */
			appendStringInfo(sql, "; SELECT 1; SELECT pg_catalog.repeat(' ', %d)",
							 EXPORT_PAD_BYTES);
			afdw_expect_marker(entry);
		}
		if (marking)
		{
			MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

			marked = lappend(marked, entry);
			MemoryContextSwitchTo(old);
		}
		else
			afdw_snapshot_note_floor(nested);
		return;
	}

	check_leader(ss->leader);
	if (ss->snapshot[0] == '\0' && ss->leader->export_pending)
		await_export(ss->leader);
	if (ss->snapshot[0] == '\0')
		export_snapshot(ss, ss->leader, "");
	appendStringInfo(sql, "; SET TRANSACTION SNAPSHOT %s",
					 quote_literal_cstr(ss->snapshot));
}

/*
 * afdw_forget_snapshots
 *		The local transaction is over: its snapshots went with
 *		TopTransactionContext.
 */
void
afdw_forget_snapshots(void)
{
	snapshot_hash = NULL;
	floor_noted = false;
	marking = false;
	marked = NIL;
}

/*
 * afdw_snapshot_is_new
 *		Whether CONN's first command in the local transaction would open the
 *		first remote transaction of its server and user mapping, taking a
 *		snapshot of its own (rather than importing one taken before).
 */
bool
afdw_snapshot_is_new(AfdwConn *conn)
{
	return afdw_snapshot_leader(conn->serverid, conn->key.umid) == NULL;
}

/*
 * afdw_statement_is_transaction
 *		Whether the running statement is, for remote transactions, the
 *		whole local transaction: no transaction block (explicit, or the
 *		implicit one of several statements in one message), no
 *		subtransaction, and READ COMMITTED.
 *
 * A remote transaction of such a statement that only read may end with the
 * statement's last command on its connection: the local transaction has
 * nothing more to see (the next statement at READ COMMITTED takes a new
 * snapshot anyway) and nothing to lose by an early COMMIT.
 */
bool
afdw_statement_is_transaction(void)
{
	return !IsTransactionBlock() && GetCurrentTransactionNestLevel() == 1 &&
		XactIsoLevel == XACT_READ_COMMITTED;
}

/*
 * afdw_snapshot_note_floor
 *		The local transaction takes its first snapshots now: note the floor
 *		of the commit fence's numbers, against which servers read later are
 *		checked (afdw_snapshot_check).  Not for a statement that is its own
 *		transaction: nothing is read after it.  A function's statement
 *		(NESTED) is not one, though the statement that called it may be:
 *		the function's next statements may read more servers, in the same
 *		remote transactions.
 */
void
afdw_snapshot_note_floor(bool nested)
{
	if (floor_noted || !afdw_fence_active() ||
		(!nested && afdw_statement_is_transaction()))
		return;
	xact_floor = afdw_fence_floor();
	floor_noted = true;
}

/*
 * afdw_snapshot_check_wanted
 *		Whether a new snapshot taken now must be checked against the ones taken
 *		before (see commit_fence.c): the transaction noted its floor, and it is
 *		REPEATABLE READ or SERIALIZABLE (every snapshot of it must be one) or
 *		MIXES, the statement also reads snapshots taken before.
 */
bool
afdw_snapshot_check_wanted(bool mixes)
{
	return floor_noted && afdw_fence_active() &&
		(IsolationUsesXactSnapshot() || mixes);
}

/*
 * afdw_snapshot_start_checked
 *		Whether ENTRY's first command must open its remote transaction on its
 *		own, to check its new snapshot (remote_xact.c): outside a statement's
 *		first commands, which visibility.c checks together.
 */
bool
afdw_snapshot_start_checked(AfdwConn *entry)
{
	return !marking && afdw_snapshot_is_new(entry) &&
		afdw_snapshot_check_wanted(false);
}

/*
 * afdw_snapshot_marking
 *		Have the leaders that open their servers' remote transactions from
 *		now on (ON) mark their snapshots taken, or stop (and forget them).
 */
void
afdw_snapshot_marking(bool on)
{
	marking = on;
	if (!on)
	{
		list_free(marked);
		marked = NIL;
	}
}

/*
 * afdw_snapshot_marked
 *		The leaders that marked their snapshots since marking began.
 */
List *
afdw_snapshot_marked(void)
{
	return marked;
}

/*
 * afdw_snapshot_await_taken
 *		Wait until LEADER's server has taken the snapshot of the remote
 *		transaction that its command in flight opens: the export's result or
 *		the marker's has come; false if DEADLINE (-1: none) passed first.
 *		The results of the statements that open the transaction are read on
 *		the way; an error among them is held for the command's owner, and
 *		ends the wait (no snapshot comes).
 */
bool
afdw_snapshot_await_taken(AfdwConn *leader, TimestampTz deadline)
{
	while (leader->marker_pending || leader->export_pending)
	{
		PGresult   *res;
		bool		is_export;
		const char *what = leader->export_pending ?
			"SELECT pg_catalog.pg_export_snapshot()" : "SELECT 1";

		while (!afdw_result_ready(leader))
		{
			if (deadline < 0)
				afdw_wait_socket(leader, what);
			else if (!afdw_wait_socket_until(leader, what, deadline))
				return false;
		}
		res = afdw_pop_result(leader, &is_export);
		if (is_export)
		{
			afdw_take_export(leader, res);
			break;
		}
		if (res != NULL && PQresultStatus(res) == PGRES_COMMAND_OK)
		{
			PQclear(res);
			continue;
		}
		leader->held_result = res;
		break;
	}
	return true;
}

/*
 * afdw_snapshot_floor
 *		The floor the local transaction noted with its first snapshots, if
 *		it did (else false).
 */
bool
afdw_snapshot_floor(uint64 *floor)
{
	*floor = xact_floor;
	return floor_noted;
}

/*
 * afdw_snapshot_check
 *		CONN's server has just taken a new snapshot, which must agree with
 *		the snapshots taken when the commit fence's floor was FLOOR: fail
 *		with a serialization failure if a transaction that committed on
 *		several servers since then may have reached it (commit_fence.c).
 */
void
afdw_snapshot_check(AfdwConn *conn, uint64 floor)
{
	if (!afdw_fence_committed_since(conn->serverid, floor))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to a concurrent commit on several servers"),
			 errdetail("A transaction that committed on several servers meanwhile may be visible in this transaction's snapshot of server \"%s\" and not in its snapshots of others.",
					   NameStr(conn->servername)),
			 errhint("Retry the transaction.")));
}
