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
 * table; once it has succeeded, it goes to all the other copies at once
 * (afdw_replica_writes_send), and afdw_replica_writes_finish reads their
 * results, raises the first remote error, and fails the statement if a
 * copy changed another number of rows than the table's server did: the
 * copies differ, and a statement that would leave them further apart is
 * rolled back.
 *
 * The table's own server goes first so that two transactions changing the
 * same rows meet there: the second waits for the first's row locks (or
 * its key, for an INSERT) before it touches any other copy.  Sent to all
 * copies at once, each could take the lock first on another server and
 * wait for the other there, a deadlock that no single server sees.  The transaction that wrote is committed with two-phase
 * commit on every server (afdw_twophase_require), so that all copies
 * change or none.
 *
 * Only statements that name their rows by their values can be repeated
 * on each copy: an INSERT, and an UPDATE or DELETE sent whole to the
 * remote server (direct modification).  A change by remote row identity
 * (ctid) is refused at planning (modify.c), since each copy stores its
 * rows in its own places.
 *
 * Neighbours: modify.c (INSERT, COPY), direct.c (UPDATE, DELETE) and
 * truncate.c call it; option.c reads the copies; xact.c sends the writes
 * in the remote transactions; remote.c reads them; twophase.c is told
 * that the transaction must commit in two phases.  Execution layer.
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
	const char *sql;			/* the statement in flight, if any */
	PGresult   *res;			/* its result, once read */
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

static void drain_replica(void *owner);
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
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	List	   *servers = afdw_copy_servers(table);
	AfdwReplicaWrites *rw;
	ListCell   *lc;
	int			i = 0;

	if (list_length(servers) < 2)
		return NULL;
	rw = palloc0(sizeof(AfdwReplicaWrites));
	rw->relid = RelationGetRelid(rel);
	rw->relname = pstrdup(RelationGetRelationName(rel));
	rw->servername = GetForeignServer(table->serverid)->servername;
	rw->w = palloc0(sizeof(ReplicaWrite) * (list_length(servers) - 1));

	/* The writers are given back however the statement ends. */
	rw->cleanup.func = replicas_cleanup;
	rw->cleanup.arg = rw;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &rw->cleanup);

	/* The first is the table's own server (afdw_copy_servers). */
	for_each_from(lc, servers, 1)
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
 * afdw_replica_writes_send
 *		Send SQL, a write of the table, on every other copy's writer,
 *		without waiting.  SQL must live until afdw_replica_writes_finish.
 */
void
afdw_replica_writes_send(AfdwReplicaWrites *rw, const char *sql)
{
	afdw_twophase_require(rw->relid);
	for (int i = 0; i < rw->n; i++)
	{
		ReplicaWrite *w = &rw->w[i];

		Assert(w->res == NULL);
		w->conn = afdw_current_writer(w->conn);
		w->sql = sql;
		afdw_send_write(w->conn, sql, false, w, drain_replica);
	}
}

/*
 * drain_replica
 *		Another command needs a copy's writer: read the write's result now,
 *		for afdw_replica_writes_finish.
 */
static void
drain_replica(void *owner)
{
	ReplicaWrite *w = (ReplicaWrite *) owner;

	w->res = afdw_wait_result(w->conn, w->sql);
}

/*
 * afdw_replica_writes_finish
 *		Read the results of the write sent to the copies, and fail unless
 *		each succeeded and changed ROWS rows, as many as the table's own
 *		server did (VERB names the statement in the message).
 */
void
afdw_replica_writes_finish(AfdwReplicaWrites *rw, uint64 rows,
						   const char *verb)
{
	for (int i = 0; i < rw->n; i++)
	{
		ReplicaWrite *w = &rw->w[i];
		PGresult   *res;
		uint64		changed;
		ErrorContextCallback errcb;

		if (w->sql == NULL)
			continue;
		errcb.callback = replica_error_context;
		errcb.arg = w;
		errcb.previous = error_context_stack;
		error_context_stack = &errcb;
		if (w->res == NULL)
		{
			/* A rollback to a savepoint took the write's result. */
			if (!afdw_is_owner(w->conn, w))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("remote statement on the copy of foreign table \"%s\" was cancelled",
								rw->relname)));
			w->res = afdw_wait_result(w->conn, w->sql);
		}
		res = w->res;
		w->res = NULL;
		if (res == NULL ||
			(PQresultStatus(res) != PGRES_COMMAND_OK &&
			 PQresultStatus(res) != PGRES_TUPLES_OK))
			afdw_report_remote_error(res, w->conn, w->sql);
		changed = PQresultStatus(res) == PGRES_TUPLES_OK ?
			(uint64) PQntuples(res) : (uint64) strtoul(PQcmdTuples(res), NULL, 10);
		PQclear(res);
		w->sql = NULL;
		if (changed != rows)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("copies of replicated foreign table \"%s\" differ",
							rw->relname),
					 errdetail("The %s changed " UINT64_FORMAT " rows on server \"%s\" and " UINT64_FORMAT " on server \"%s\".",
							   verb, rows, rw->servername, changed, w->servername),
					 errhint("Make the table's rows the same on every server of its option \"copies\"; the statement changed none of them.")));
		error_context_stack = errcb.previous;
	}
}

/*
 * afdw_replica_writes_end
 *		Give the copies' writers back; a result nobody read is thrown away
 *		before their next use.
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
 *		Memory-context callback, and afdw_replica_writes_end: forget the
 *		writes in flight (an abort handles the remote side) and give the
 *		writers back, once.
 */
static void
replicas_cleanup(void *arg)
{
	AfdwReplicaWrites *rw = (AfdwReplicaWrites *) arg;

	for (int i = 0; i < rw->n; i++)
	{
		ReplicaWrite *w = &rw->w[i];

		if (w->res != NULL)
		{
			PQclear(w->res);
			w->res = NULL;
		}
		if (w->conn == NULL)
			continue;
		afdw_forget_owner(w->conn, w);
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
