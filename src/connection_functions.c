/*-------------------------------------------------------------------------
 *
 * connection_functions.c
 *		The SQL-callable operations functions of async_fdw: the open
 *		connections of this backend, closing them, and the connection
 *		budget of each server.
 *
 * async_fdw_get_connections, async_fdw_disconnect and
 * async_fdw_disconnect_all are postgres_fdw 15's functions of the same
 * purpose, with its columns and rules where they overlap, plus what a
 * pool of several connections per user mapping adds (the slot, whether
 * scans hold it and how they read, the remote process, when it opened).
 * They act on the calling backend's connections only.
 *
 * Neighbours: connection_pool.c owns the pool and hands out what this file
 * shows and closes (afdw_list_connections, afdw_close_connection), and
 * connection_budget.c the shared figures of the budget (afdw_budget_figures);
 * this file sees connections through async_fdw.h only, not
 * connection_internal.h, so the pool's invariants stay in connection_pool.c.
 * async_fdw--1.0--1.1.sql declares the functions (1.2--1.3 adds a column of
 * async_fdw_get_connections, 1.3--1.4 gives it postgres_fdw 18's argument and
 * first columns).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_foreign_server.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "async_fdw.h"

/* Columns of async_fdw_get_connections and async_fdw_connection_budget. */
#define GET_CONNECTIONS_COLS	12
#define BUDGET_COLS				5

/* Connections a disconnect left open because they are in use, per server. */
typedef struct SkippedServer
{
	Oid			serverid;
	char	   *name;			/* NULL if the server was dropped */
	int			count;
} SkippedServer;

static bool disconnect_connections(Oid serverid);
static int	skipped_cmp(const void *a, const void *b);
static char *mapping_user_name(Oid umid);
static void get_connections_old_row(AfdwConnInfo *info, ForeignServer *server,
									char *user, Datum *values, bool *nulls);

PG_FUNCTION_INFO_V1(async_fdw_get_connections);
PG_FUNCTION_INFO_V1(async_fdw_disconnect);
PG_FUNCTION_INFO_V1(async_fdw_disconnect_all);
PG_FUNCTION_INFO_V1(async_fdw_connection_budget);

/*
 * async_fdw_get_connections
 *		One row per open connection of this backend.
 *
 * As in postgres_fdw, server_name is NULL when the server was dropped
 * (only a connection the transaction uses can outlive its server: the
 * others are closed at once), user_name is the mapping's user ("public"
 * for a mapping FOR PUBLIC, NULL once the mapping is gone), valid is false
 * when the server or user mapping changed while the transaction used the
 * connection, which then goes at the transaction's end, used_in_xact tells
 * whether a remote transaction of the current one is open on it, and
 * closed, with check_conn, whether the server closed it (NULL without
 * check_conn, or where the platform cannot tell).  mode tells how the
 * scans holding the connection now read: 'stream', 'cursor' (commands
 * whose answers are read one at a time: DECLARE and FETCH, or EXECUTE of
 * a prepared statement), NULL when no scan holds it.  can_prepare tells
 * whether the server takes PREPARE TRANSACTION, NULL until the session
 * knows (twophase.c).  commit_fence (1.6) tells whether this backend's
 * commits on several servers, and its reads of several servers, go
 * through the commit fence: 'on', 'not preloaded' or 'turned off'
 * (commit_fence.c).
 *
 * The columns are 1.6's, postgres_fdw 18's first; a database whose
 * extension is not updated yet declares the function with 1.4's columns
 * (all but the last, which its descriptor leaves out), or without
 * argument, with the columns of 1.1 to 1.3 (get_connections_old_row), and
 * gets them.
 */
Datum
async_fdw_get_connections(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bool		old_layout = (PG_NARGS() == 0);
	bool		check_conn = !old_layout && PG_GETARG_BOOL(0);
	List	   *conns;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);

	conns = afdw_list_connections(check_conn);
	foreach(lc, conns)
	{
		AfdwConnInfo *info = (AfdwConnInfo *) lfirst(lc);
		ForeignServer *server = GetForeignServerExtended(info->serverid,
														 FSV_MISSING_OK);
		char	   *user = mapping_user_name(info->umid);
		Datum		values[GET_CONNECTIONS_COLS];
		bool		nulls[GET_CONNECTIONS_COLS];
		int			i = 0;

		memset(nulls, 0, sizeof(nulls));
		if (old_layout)
		{
			get_connections_old_row(info, server, user, values, nulls);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			continue;
		}

		if (server != NULL)
			values[i] = CStringGetTextDatum(server->servername);
		else
			nulls[i] = true;
		i++;
		if (user != NULL)
			values[i] = CStringGetTextDatum(user);
		else
			nulls[i] = true;
		i++;
		values[i++] = BoolGetDatum(info->valid);
		values[i++] = BoolGetDatum(info->used_in_xact);
		if (info->closed >= 0)
			values[i] = BoolGetDatum(info->closed > 0);
		else
			nulls[i] = true;
		i++;
		values[i++] = Int32GetDatum(info->remote_pid);
		values[i++] = Int32GetDatum(info->slot);
		values[i++] = BoolGetDatum(info->in_use);
		if (info->nusers > 0)
			values[i] = CStringGetTextDatum(info->streaming ? "stream" : "cursor");
		else
			nulls[i] = true;
		i++;
		values[i++] = TimestampTzGetDatum(info->opened_at);
		if (info->can_prepare >= 0)
			values[i] = BoolGetDatum(info->can_prepare > 0);
		else
			nulls[i] = true;
		i++;
		values[i++] = CStringGetTextDatum(afdw_fence_state_name(afdw_fence_state()));
		Assert(i == GET_CONNECTIONS_COLS);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	list_free_deep(conns);

	return (Datum) 0;
}

/*
 * get_connections_old_row
 *		The row of INFO as versions 1.1 to 1.3 declare it: server_name,
 *		valid, user_name, slot, in_use, mode, remote_pid, opened_at and
 *		(1.3) can_prepare.
 *
 * A declaration with fewer columns (1.1 and 1.2 lack can_prepare) takes
 * the first of them: the tuple is formed from its own descriptor.
 */
static void
get_connections_old_row(AfdwConnInfo *info, ForeignServer *server,
						char *user, Datum *values, bool *nulls)
{
	if (server != NULL)
		values[0] = CStringGetTextDatum(server->servername);
	else
		nulls[0] = true;
	values[1] = BoolGetDatum(info->valid);
	if (user != NULL)
		values[2] = CStringGetTextDatum(user);
	else
		nulls[2] = true;
	values[3] = Int32GetDatum(info->slot);
	values[4] = BoolGetDatum(info->in_use);
	if (info->nusers > 0)
		values[5] = CStringGetTextDatum(info->streaming ? "stream" : "cursor");
	else
		nulls[5] = true;
	values[6] = Int32GetDatum(info->remote_pid);
	values[7] = TimestampTzGetDatum(info->opened_at);
	if (info->can_prepare >= 0)
		values[8] = BoolGetDatum(info->can_prepare > 0);
	else
		nulls[8] = true;
}

/*
 * mapping_user_name
 *		The name of the user of user mapping UMID, "public" for a mapping
 *		FOR PUBLIC, NULL if the mapping is gone.
 */
static char *
mapping_user_name(Oid umid)
{
	Oid			serverid;
	Oid			user;

	if (!afdw_mapping_ids(umid, &serverid, &user))
		return NULL;
	if (!OidIsValid(user))
		return pstrdup("public");
	return GetUserNameFromId(user, true);
}

/*
 * async_fdw_disconnect
 *		Close this backend's connections to the named server; true if any
 *		was closed.
 *
 * An unknown name is an error, as in postgres_fdw; a server of another
 * foreign data wrapper has no connection of async_fdw, so the answer is
 * false, as postgres_fdw answers for one of async_fdw's.
 */
Datum
async_fdw_disconnect(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ForeignServer *server = GetForeignServerByName(name, false);

	PG_RETURN_BOOL(disconnect_connections(server->serverid));
}

/*
 * async_fdw_disconnect_all
 *		Close all of this backend's connections; true if any was closed.
 */
Datum
async_fdw_disconnect_all(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(disconnect_connections(InvalidOid));
}

/*
 * disconnect_connections
 *		Close the connections to SERVERID (every server if InvalidOid) that
 *		the current transaction does not use; true if any was closed.
 *
 * Those it uses are kept, with a warning per server as postgres_fdw
 * gives one per connection: closing them would lose the remote
 * transaction under the local one.
 */
static bool
disconnect_connections(Oid serverid)
{
	List	   *conns = afdw_list_connections(false);
	SkippedServer *skipped = palloc0(sizeof(SkippedServer) *
									 (list_length(conns) + 1));
	int			nskipped = 0;
	bool		closed = false;
	ListCell   *lc;

	foreach(lc, conns)
	{
		AfdwConnInfo *info = (AfdwConnInfo *) lfirst(lc);
		int			i;

		if (OidIsValid(serverid) && info->serverid != serverid)
			continue;
		if (!info->in_use)
		{
			closed |= afdw_close_connection(info->umid, info->slot);
			continue;
		}
		for (i = 0; i < nskipped && skipped[i].serverid != info->serverid; i++)
			;
		if (i == nskipped)
			skipped[nskipped++].serverid = info->serverid;
		skipped[i].count++;
	}

	/* The warnings in the order of the names, not of the pool's hash. */
	for (int i = 0; i < nskipped; i++)
	{
		ForeignServer *server = GetForeignServerExtended(skipped[i].serverid,
														 FSV_MISSING_OK);

		skipped[i].name = server != NULL ? server->servername : NULL;
	}
	qsort(skipped, nskipped, sizeof(SkippedServer), skipped_cmp);

	for (int i = 0; i < nskipped; i++)
	{
		if (skipped[i].name == NULL)
			ereport(WARNING,
					(errmsg("cannot close dropped server connection because it is still in use"),
					 errdetail_plural("%d connection is used by the current transaction.",
									  "%d connections are used by the current transaction.",
									  skipped[i].count, skipped[i].count)));
		else
			ereport(WARNING,
					(errmsg("cannot close connection for server \"%s\" because it is still in use",
							skipped[i].name),
					 errdetail_plural("%d connection to it is used by the current transaction.",
									  "%d connections to it are used by the current transaction.",
									  skipped[i].count, skipped[i].count)));
	}

	pfree(skipped);
	list_free_deep(conns);
	return closed;
}

/*
 * skipped_cmp
 *		qsort comparator of SkippedServers: by name, dropped servers last.
 */
static int
skipped_cmp(const void *a, const void *b)
{
	const SkippedServer *sa = (const SkippedServer *) a;
	const SkippedServer *sb = (const SkippedServer *) b;

	if (sa->name == NULL || sb->name == NULL)
		return (sa->name == NULL) - (sb->name == NULL);
	return strcmp(sa->name, sb->name);
}

/*
 * async_fdw_connection_budget
 *		One row per async_fdw server of the current database: its
 *		connection budget and how it is used by all backends.
 *
 * budget is NULL when the server has none (max_shared_connections 0);
 * held (connections counted against it now), idle_expiring (of them,
 * idle ones that the remote server closes by itself, which stop counting
 * then) and waiting (backends waiting for room) are NULL when async_fdw
 * was not preloaded, since then no backend sees the others' connections.
 * A server is async_fdw's when its wrapper's handler is
 * async_fdw_handler, whatever the wrapper is called (afdw_server_is_ours).
 */
Datum
async_fdw_connection_budget(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;

	InitMaterializedSRF(fcinfo, 0);

	rel = table_open(ForeignServerRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_foreign_server form = (Form_pg_foreign_server) GETSTRUCT(tuple);
		ForeignServer *server;
		Datum		values[BUDGET_COLS];
		bool		nulls[BUDGET_COLS];
		int			limit;
		int			held;
		int			idle_expiring;
		int			waiting;
		bool		shared;

		if (!afdw_server_is_ours(form->oid))
			continue;
		server = GetForeignServer(form->oid);
		shared = afdw_budget_figures(server, &limit, &held, &idle_expiring,
									 &waiting);

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(server->servername);
		values[1] = Int32GetDatum(limit);
		nulls[1] = (limit <= 0);
		values[2] = Int32GetDatum(held);
		values[3] = Int32GetDatum(idle_expiring);
		values[4] = Int32GetDatum(waiting);
		nulls[2] = nulls[3] = nulls[4] = !shared;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	return (Datum) 0;
}
