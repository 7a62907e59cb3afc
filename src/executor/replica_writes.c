/*-------------------------------------------------------------------------
 *
 * replica_writes.c
 *		Writes to a replicated foreign table (option copies): the statement
 *		that changes the table's own server is sent to every other server
 *		holding a copy as well, and each copy must change as many rows.
 *
 * A write to such a table begins here (afdw_replica_writes_begin), which
 * takes the writer of the user's mapping on each other copy's server.
 * Each remote statement runs on the table's own server first, as for any
 * table; once it has succeeded, afdw_replica_writes_run runs it on the
 * other copies one after the other, in the order of their servers' OIDs,
 * and fails the statement at the first copy that fails or that changed
 * another number of rows than the table's server did.
 *
 * The order is what keeps concurrent writers of the same rows from a
 * deadlock that no single server would see: each statement takes its
 * locks server by server in one order, so two statements wait for each
 * other, if at all, on one server, whose deadlock detector breaks it.  A
 * statement that takes no lock on a server (an INSERT that ON CONFLICT DO
 * NOTHING skipped there, a DELETE that found nothing) may find another
 * state on the next copy, where a commit is not visible yet: sent to all
 * copies at once, two such statements locked each other on two servers and
 * waited for ever (021_replicated_writes.pl, 1 run in 8).
 *
 * A difference in the number of rows has two causes, which cannot be told
 * apart here: the copies differ, or another transaction committed on the
 * copies between the snapshots this one's statement took on them, seen by
 * one and not the other (a multi-server commit is atomic, its visibility
 * is not).  In the second case, under the remote REPEATABLE READ, every
 * row a copy matched that the other did not see is a row the other
 * transaction inserted or changed into the statement's condition: rows it
 * deleted or changed out of it would have been locked by it on the other
 * copy, which fails the statement with 40001 there.  So equal counts mean
 * the same rows, and a difference fails the statement with 40001 too, for
 * the application to retry; one that persists means the copies differ.
 *
 * The transaction that wrote is committed with two-phase commit on every
 * server (afdw_twophase_require), so that all copies change or none.
 *
 * Only statements that name their rows by their values can be repeated
 * on each copy: an INSERT, an UPDATE or DELETE sent whole to the remote
 * server (direct modification), and one row's UPDATE or DELETE by the
 * values of the key the table declares (column option key, modify_rows.c).
 * A change by remote row identity (ctid) is refused at planning, since
 * each copy stores its rows in its own places.
 *
 * Neighbours: modify_rows.c (INSERT, COPY), direct_modify.c (UPDATE, DELETE)
 * and truncate.c call it; options.c reads the copies; remote_xact.c sends the
 * writes in the remote transactions; remote_commands.c reads them; twophase.c
 * is told that the transaction must commit in two phases.  Execution layer.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "async_fdw.h"

/* One other server's copy and its writer. */
typedef struct ReplicaWrite
{
	struct AfdwReplicaWrites *all;
	Oid			serverid;
	char	   *servername;
	AfdwConn   *conn;			/* its writer; NULL once given back */
} ReplicaWrite;

/* The copies a statement writes besides the table's own server's. */
struct AfdwReplicaWrites
{
	Oid			relid;
	char	   *relname;
	char	   *servername;		/* the table's own server */
	int			n;
	ReplicaWrite *w;
	MemoryContextCallback cleanup;
};

static int	server_oid_cmp(const ListCell *a, const ListCell *b);
static void replica_error_context(void *arg);
static void replicas_cleanup(void *arg);

/*
 * afdw_replica_writes_begin
 *		Take the writers of USERID's mappings on the servers of the other
 *		copies of REL, when REL is replicated; NULL when it is not.  They
 *		are given back when the current memory context goes (the
 *		statement's), at the latest.
 */
AfdwReplicaWrites *
afdw_replica_writes_begin(Relation rel, Oid userid)
{
	List	   *servers = afdw_replica_other_servers(RelationGetRelid(rel));
	AfdwReplicaWrites *rw;
	ListCell   *lc;
	int			i = 0;

	if (servers == NIL)
		return NULL;
	rw = palloc0(sizeof(AfdwReplicaWrites));
	rw->relid = RelationGetRelid(rel);
	rw->relname = pstrdup(RelationGetRelationName(rel));
	rw->servername = GetForeignServer(GetForeignServerIdByRelId(rw->relid))->servername;
	rw->w = palloc0(sizeof(ReplicaWrite) * list_length(servers));

	/* The writers are given back however the statement ends. */
	rw->cleanup.func = replicas_cleanup;
	rw->cleanup.arg = rw;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &rw->cleanup);

	foreach(lc, servers)
	{
		ReplicaWrite *w = &rw->w[i];
		ForeignServer *server = GetForeignServer(lfirst_oid(lc));

		w->all = rw;
		w->serverid = server->serverid;
		w->servername = server->servername;
		w->conn = afdw_acquire_writer(GetUserMapping(userid, server->serverid));
		rw->n = ++i;
	}
	return rw;
}

/*
 * server_oid_cmp
 *		list_sort comparator of server OIDs.
 */
static int
server_oid_cmp(const ListCell *a, const ListCell *b)
{
	Oid			x = lfirst_oid(a);
	Oid			y = lfirst_oid(b);

	return (x > y) - (x < y);
}

/*
 * afdw_replica_other_servers
 *		The servers of the copies of the replicated table RELID other than
 *		its own, in the order writes reach them (by OID); NIL when it is not
 *		replicated.
 */
List *
afdw_replica_other_servers(Oid relid)
{
	List	   *servers = afdw_copy_servers(GetForeignTable(relid));

	/* The first is the table's own server (afdw_copy_servers). */
	servers = list_copy_tail(servers, 1);
	list_sort(servers, server_oid_cmp);
	return servers;
}

/*
 * afdw_replica_writes_run
 *		Run SQL, a write of the table that changed ROWS rows on its own
 *		server, on every other copy in turn, and fail at the first copy that
 *		fails or changes another number of rows (VERB names the statement
 *		in the message).
 */
void
afdw_replica_writes_run(AfdwReplicaWrites *rw, const char *sql, uint64 rows,
						const char *verb)
{
	afdw_twophase_require(rw->relid);
	for (int i = 0; i < rw->n; i++)
	{
		ReplicaWrite *w = &rw->w[i];
		PGresult   *res;
		uint64		changed;
		ErrorContextCallback errcb;

		errcb.callback = replica_error_context;
		errcb.arg = w;
		errcb.previous = error_context_stack;
		error_context_stack = &errcb;
		w->conn = afdw_current_writer(w->conn);
		res = afdw_run_write(w->conn, sql);
		changed = afdw_rows_changed(res);
		PQclear(res);
		if (changed != rows)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access to replicated foreign table \"%s\": its copies changed different numbers of rows",
							rw->relname),
					 errdetail("The %s changed " UINT64_FORMAT " rows on server \"%s\" and " UINT64_FORMAT " on server \"%s\".",
							   verb, rows, rw->servername, changed, w->servername),
					 errhint("A transaction that committed on the copies meanwhile, seen on one server and not yet on the other, causes this: retry the transaction. If it fails again the same way, the copies differ: make their rows the same.")));
		error_context_stack = errcb.previous;
	}
}

/*
 * afdw_replica_writes_end
 *		Give the copies' writers back.
 */
void
afdw_replica_writes_end(AfdwReplicaWrites *rw)
{
	if (rw == NULL)
		return;
	replicas_cleanup(rw);
}

/*
 * replicas_cleanup
 *		Memory-context callback, and afdw_replica_writes_end: give the
 *		writers back, once (an abort handles the remote side).
 */
static void
replicas_cleanup(void *arg)
{
	AfdwReplicaWrites *rw = (AfdwReplicaWrites *) arg;

	for (int i = 0; i < rw->n; i++)
	{
		ReplicaWrite *w = &rw->w[i];

		if (w->conn == NULL)
			continue;
		afdw_release_connection(w->conn);
		w->conn = NULL;
	}
}

/*
 * replica_error_context
 *		Name the copy (ARG, its ReplicaWrite) whose write failed.
 */
static void
replica_error_context(void *arg)
{
	ReplicaWrite *w = (ReplicaWrite *) arg;

	errcontext("write to the copy of foreign table \"%s\" on server \"%s\"",
			   w->all->relname, w->servername);
}

/*
 * afdw_replica_server_names
 *		The servers a write to the replicated table RELID changes, its own
 *		first, as a comma-separated list for EXPLAIN; NULL when it is not
 *		replicated.
 */
char *
afdw_replica_server_names(Oid relid)
{
	List	   *servers = afdw_copy_servers(GetForeignTable(relid));
	StringInfoData buf;
	ListCell   *lc;

	if (servers == NIL)
		return NULL;
	initStringInfo(&buf);
	foreach(lc, servers)
	{
		if (buf.len > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, GetForeignServer(lfirst_oid(lc))->servername);
	}
	return buf.data;
}
