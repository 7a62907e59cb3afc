/*-------------------------------------------------------------------------
 *
 * truncate.c
 *		TRUNCATE of foreign tables: one remote TRUNCATE per server.
 *
 * The executor hands over the foreign tables of one server at a time; they
 * become one remote TRUNCATE, with the statement's RESTART IDENTITY or
 * CONTINUE IDENTITY and CASCADE or RESTRICT, run on the writer of the current
 * user's mapping, so that it belongs to the local transaction (a rollback, or
 * that of a savepoint, undoes it) and later reads of the mapping see the
 * tables empty.  A replicated table (option copies) is emptied on each other
 * copy's server as well, and the transaction then commits in two phases
 * (afdw_twophase_require).  A table may refuse with the option truncatable
 * (table over server, default true).
 *
 * The remote TRUNCATE takes the strongest lock, which any other remote
 * transaction of this backend on the server that read a table would hold
 * until the local transaction ends: afdw_end_read_transactions (remote_xact.c)
 * ends those first, or fails when one cannot end yet, so that the
 * statement never waits for its own session.
 *
 * Neighbours: async_fdw.c registers afdwExecForeignTruncate; options.c reads
 * truncatable; deparse_statements.c names the remote tables; connection_pool.c
 * lends the writer; remote_xact.c runs the statement in the remote
 * transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/rel.h"

#include "async_fdw.h"

static void check_truncatable(Relation rel, ForeignServer *server);
static void truncate_on(Oid serverid, const char *sql);
static void append_truncate_options(StringInfo sql, DropBehavior behavior,
									bool restart_seqs);

/*
 * check_truncatable
 *		Fail unless REL, a foreign table of SERVER, allows TRUNCATE: its
 *		option truncatable, else its server's, else true.
 */
static void
check_truncatable(Relation rel, ForeignServer *server)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	bool		truncatable;

	truncatable = afdw_bool_option(server->options, "truncatable", true);
	truncatable = afdw_bool_option(table->options, "truncatable", truncatable);
	if (!truncatable)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("foreign table \"%s\" does not allow TRUNCATE",
						RelationGetRelationName(rel)),
				 errdetail("Its option truncatable, or its server's, is false.")));
}

/*
 * afdwExecForeignTruncate
 *		Truncate RELS, foreign tables of one server, with BEHAVIOR (CASCADE
 *		or RESTRICT) and RESTART_SEQS (RESTART or CONTINUE IDENTITY).
 *
 * ONLY is not passed on (the executor does not say whether it was
 * given): the remote table's own children, if it has any, are truncated
 * with it.
 */
void
afdwExecForeignTruncate(List *rels, DropBehavior behavior, bool restart_seqs)
{
	Oid			serverid = InvalidOid;
	ForeignServer *server = NULL;
	StringInfoData sql;
	ListCell   *lc;

	if (rels == NIL)
		return;

	/* Every table is checked before anything is sent. */
	initStringInfo(&sql);
	appendStringInfoString(&sql, "TRUNCATE ");
	foreach(lc, rels)
	{
		Relation	rel = (Relation) lfirst(lc);

		if (server == NULL)
		{
			serverid = GetForeignTable(RelationGetRelid(rel))->serverid;
			server = GetForeignServer(serverid);
		}
		check_truncatable(rel, server);
		if (lc != list_head(rels))
			appendStringInfoString(&sql, ", ");
		afdw_deparse_relation(&sql, rel);
	}
	append_truncate_options(&sql, behavior, restart_seqs);
	truncate_on(serverid, sql.data);
	pfree(sql.data);

	/*
	 * A replicated table is emptied on every copy's server too, in the
	 * same transaction, which then commits in two phases.
	 */
	foreach(lc, rels)
	{
		Relation	rel = (Relation) lfirst(lc);
		List	   *copies = afdw_replica_other_servers(RelationGetRelid(rel));
		ListCell   *lc2;

		if (copies == NIL)
			continue;
		afdw_twophase_require(RelationGetRelid(rel));
		initStringInfo(&sql);
		appendStringInfoString(&sql, "TRUNCATE ");
		afdw_deparse_relation(&sql, rel);
		append_truncate_options(&sql, behavior, restart_seqs);
		/* In the order of writes (replica_writes.c). */
		foreach(lc2, copies)
		{
			check_truncatable(rel, GetForeignServer(lfirst_oid(lc2)));
			truncate_on(lfirst_oid(lc2), sql.data);
		}
		pfree(sql.data);
	}
}

/*
 * append_truncate_options
 *		Append to SQL, a TRUNCATE, its RESTART or CONTINUE IDENTITY
 *		(RESTART_SEQS) and its CASCADE or RESTRICT (BEHAVIOR).
 */
static void
append_truncate_options(StringInfo sql, DropBehavior behavior, bool restart_seqs)
{
	appendStringInfoString(sql, restart_seqs ? " RESTART IDENTITY" :
						   " CONTINUE IDENTITY");
	appendStringInfoString(sql, behavior == DROP_CASCADE ? " CASCADE" :
						   " RESTRICT");
}

/*
 * truncate_on
 *		Run SQL, a TRUNCATE, on the writer of the current user's mapping
 *		for SERVERID.
 */
static void
truncate_on(Oid serverid, const char *sql)
{
	AfdwConn   *conn = afdw_acquire_writer(GetUserMapping(GetUserId(), serverid));

	PG_TRY();
	{
		afdw_end_read_transactions(conn, "TRUNCATE");
		PQclear(afdw_run_write(conn, sql));
	}
	PG_FINALLY();
	{
		afdw_release_connection(conn);
	}
	PG_END_TRY();
}
