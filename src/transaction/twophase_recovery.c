/*-------------------------------------------------------------------------
 *
 * twophase_recovery.c
 *		The recovery of the remote transactions that two-phase commit
 *		(twophase.c) left prepared: async_fdw_recover_prepared_transactions
 *		and the core the recovery worker calls.
 *
 * Recovery (async_fdw_recover_prepared_transactions) lists on every
 * async_fdw server the prepared transactions this database's coordinator
 * left, and decides by the record: one whose row exists committed locally
 * (COMMIT PREPARED), one whose local transaction is still in progress is
 * left, any other aborted (ROLLBACK PREPARED); the rows of a server's
 * transactions no longer prepared there are deleted, if they committed
 * before the listing (a later one may name a transaction prepared after it).
 *
 * Recovery decides with enums (AfdwLocalState, AfdwRecoveryAction) and
 * hands each outcome to a callback: the SQL function words it into a row
 * (local_state_word, action_word: the only place the words live), the
 * worker counts it.
 *
 * Neighbours: recovery_worker.c calls afdw_recovery_servers and
 * afdw_recover_prepared; twophase.c names the table of records
 * (afdw_twophase_records_name), the identifiers' prefix
 * (afdw_twophase_gid_prefix) and holds the test pause; options.c says
 * which servers are ours (afdw_server_is_ours); connection_pool.c lends the
 * connections; remote_commands.c sends and waits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

PG_FUNCTION_INFO_V1(async_fdw_recover_prepared_transactions);

/*
 * mapping_of
 *		The user mapping whose OID is UMID, as GetUserMapping gives it.
 */
static UserMapping *
mapping_of(Oid umid)
{
	Oid			serverid;
	Oid			userid;

	if (!afdw_mapping_ids(umid, &serverid, &userid))
		return NULL;
	return GetUserMapping(userid, serverid);
}

/*
 * server_of_mapping
 *		The server of user mapping UMID; InvalidOid if it is gone.
 */
static Oid
server_of_mapping(Oid umid)
{
	Oid			serverid;
	Oid			userid;

	if (!afdw_mapping_ids(umid, &serverid, &userid))
		return InvalidOid;
	return serverid;
}

/*
 * run_finishing
 *		Run SQL (COMMIT or ROLLBACK PREPARED) on CONN; NULL on success, else
 *		the error's message, its SQLSTATE in *SQLERRCODE.  A failure is
 *		caught: recovery goes on.
 */
static char *
run_finishing(AfdwConn *conn, const char *sql, int *sqlerrcode)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char	   *volatile failure = NULL;

	*sqlerrcode = 0;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		afdw_run_command(conn, sql);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		failure = edata->message;
		*sqlerrcode = edata->sqlerrcode;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return failure;
}

/*
 * finish_prepared
 *		COMMIT PREPARED (COMMIT) or ROLLBACK PREPARED the remote transaction
 *		GID of user mapping UMID; what came of it, the reason of a failure in
 *		*FAILURE.
 */
static AfdwRecoveryAction
finish_prepared(const char *gid, Oid umid, bool commit, const char **failure)
{
	UserMapping *user = mapping_of(umid);
	AfdwConn   *conn;
	int			sqlerrcode = 0;
	char	   *cmd;

	if (user == NULL)
		return AFDW_RECOVERY_LEFT_NO_MAPPING;
	cmd = psprintf("%s %s", commit ? "COMMIT PREPARED" : "ROLLBACK PREPARED",
				   quote_literal_cstr(gid));
	conn = afdw_open_connection(user);
	*failure = (conn->xact_depth > 0) ?
		"its connection is in a transaction" :
		run_finishing(conn, cmd, &sqlerrcode);
	afdw_release_connection(conn);
	pfree(cmd);

	/*
	 * Gone or busy: its own session finished it after the listing, or is
	 * finishing it now; that is no failure.
	 */
	if (*failure == NULL)
		return commit ? AFDW_RECOVERY_COMMITTED : AFDW_RECOVERY_ROLLED_BACK;
	if (sqlerrcode == ERRCODE_UNDEFINED_OBJECT)
		return AFDW_RECOVERY_FINISHED_BY_SESSION;
	if (sqlerrcode == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
		return AFDW_RECOVERY_LEFT_FINISHING;
	return AFDW_RECOVERY_FAILED;
}

/*
 * action_finished
 *		Whether after ACTION the remote transaction is no longer prepared,
 *		so that its record may go.
 */
static bool
action_finished(AfdwRecoveryAction action)
{
	switch (action)
	{
		case AFDW_RECOVERY_COMMITTED:
		case AFDW_RECOVERY_ROLLED_BACK:
		case AFDW_RECOVERY_FINISHED_BY_SESSION:
			return true;
		case AFDW_RECOVERY_LEFT:
		case AFDW_RECOVERY_WOULD_COMMIT:
		case AFDW_RECOVERY_WOULD_ROLL_BACK:
		case AFDW_RECOVERY_LEFT_NO_MAPPING:
		case AFDW_RECOVERY_LEFT_FINISHING:
		case AFDW_RECOVERY_FAILED:
			return false;
	}
	return false;
}

/*
 * recover_server
 *		Recover the prepared transactions this database left on server
 *		SERVERID (SERVERNAME), reading the records of table TABLE; REPORT gets
 *		one outcome per remote transaction.  FIRST: the first server of the
 *		call (the only one the debug pause stops at).
 */
static void
recover_server(Oid serverid, const char *servername, const char *table,
			   bool dry_run, bool first, AfdwRecoveryReport report, void *arg)
{
	char	   *prefix = afdw_twophase_gid_prefix();
	List	   *mappings = NIL;
	List	   *remaining = NIL;
	AfdwConn   *conn = NULL;
	UserMapping *user;
	PGresult   *volatile res = NULL;
	StringInfoData sql;
	SPIPlanPtr	plan;
	Oid			argtypes[1] = {TEXTOID};
	Snapshot	before_listing;
	int			rc;

	/* Any mapping of the server can list them; the records name theirs. */
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT oid FROM pg_catalog.pg_user_mapping WHERE umserver = %u"
					 " ORDER BY umuser = %u DESC, umuser = 0 DESC, oid", serverid, GetUserId());
	rc = SPI_execute(sql.data, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not list user mappings: %s", SPI_result_code_string(rc));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		mappings = lappend_oid(mappings,
							   DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															  SPI_tuptable->tupdesc, 1, &isnull)));
	}
	if (mappings == NIL)
		return;

	/*
	 * The prepared transactions of this coordinator's database.  The
	 * mapping may have been dropped since the listing (whose snapshot is
	 * older than the catalog's): then there is nothing to list either.
	 */
	user = mapping_of(linitial_oid(mappings));
	if (user == NULL)
		return;
	conn = afdw_open_connection(user);
	if (conn->xact_depth > 0)
	{
		afdw_release_connection(conn);
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot recover prepared transactions in a transaction that used server \"%s\"",
						servername),
				 errhint("Call async_fdw_recover_prepared_transactions() in a transaction of its own.")));
	}
	resetStringInfo(&sql);
	/*
	 * Every name qualified: outside a remote transaction, under a transaction
	 * pooler, the remote session's search_path is whatever the server's
	 * options set, and its owner may be a non-superuser.
	 */
	appendStringInfo(&sql, "SELECT gid FROM pg_catalog.pg_prepared_xacts"
					 " WHERE pg_catalog.starts_with(gid, %s::pg_catalog.text)"
					 " AND database OPERATOR(pg_catalog.=) pg_catalog.current_database()",
					 quote_literal_cstr(prefix));
	/*
	 * A record that this snapshot sees belongs to a transaction that
	 * committed locally, so prepared everywhere, before the listing: if the
	 * listing lacks its identifier, it was finished, and the record may go.
	 * A record committed after it may name a transaction prepared after the
	 * listing, still to be committed: it stays.
	 */
	before_listing = RegisterSnapshot(GetLatestSnapshot());
	PG_TRY();
	{
		res = afdw_run_query(conn, sql.data, 0, NULL);
	}
	PG_FINALLY();
	{
		afdw_release_connection(conn);
	}
	PG_END_TRY();
	if (first)
		afdw_twophase_pause_recovery();

	plan = SPI_prepare(psprintf("SELECT 1 FROM %s WHERE gid = $1", table), 1, argtypes);
	if (plan == NULL)
		elog(ERROR, "could not prepare the record lookup: %s",
			 SPI_result_code_string(SPI_result));

	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *gid = PQgetvalue(res, i, 0);
		uint64		xid64;
		Oid			umid;
		TransactionId xid;
		AfdwRecoveryOutcome out = {servername, gid, AFDW_LOCAL_ABORTED,
		AFDW_RECOVERY_LEFT, NULL};
		Datum		gidarg[1];

		if (sscanf(gid + strlen(prefix), UINT64_FORMAT "_%u", &xid64, &umid) != 2)
			continue;			/* not of the form async_fdw gives */
		/* Another server object may reach the same remote database. */
		if (server_of_mapping(umid) != serverid &&
			OidIsValid(server_of_mapping(umid)))
			continue;
		xid = XidFromFullTransactionId(FullTransactionIdFromU64(xid64));

		/*
		 * In progress first, then the record with a snapshot taken after:
		 * a transaction that ended in between is seen as it ended.
		 */
		/*
		 * At or past the next identifier: assigned before a crash that lost
		 * it (nothing made it durable, so it did not commit).  The procarray
		 * would call it in progress until a later identifier completes.
		 */
		if (FullTransactionIdFollowsOrEquals(FullTransactionIdFromU64(xid64),
											 ReadNextFullTransactionId()))
			out.state = AFDW_LOCAL_ABORTED;
		else if (TransactionIdIsInProgress(xid))
			out.state = AFDW_LOCAL_IN_PROGRESS;
		else
		{
			gidarg[0] = CStringGetTextDatum(gid);
			rc = SPI_execute_snapshot(plan, gidarg, NULL, GetLatestSnapshot(),
									  InvalidSnapshot, true, false, 1);
			if (rc != SPI_OK_SELECT)
				elog(ERROR, "could not look up a record: %s",
					 SPI_result_code_string(rc));
			out.state = (SPI_processed > 0) ? AFDW_LOCAL_COMMITTED : AFDW_LOCAL_ABORTED;
		}

		if (out.state == AFDW_LOCAL_IN_PROGRESS)
			out.action = AFDW_RECOVERY_LEFT;
		else if (dry_run)
			out.action = (out.state == AFDW_LOCAL_COMMITTED) ?
				AFDW_RECOVERY_WOULD_COMMIT : AFDW_RECOVERY_WOULD_ROLL_BACK;
		else
			out.action = finish_prepared(gid, umid, out.state == AFDW_LOCAL_COMMITTED,
										 &out.failure);
		if (!action_finished(out.action))
			remaining = lappend(remaining, pstrdup(gid));
		report(&out, arg);
	}
	PQclear(res);

	/* The records of transactions no longer prepared there are done. */
	if (!dry_run)
	{
		ListCell   *lc;

		resetStringInfo(&sql);
		appendStringInfo(&sql, "DELETE FROM %s WHERE server_id = %u", table, serverid);
		foreach(lc, remaining)
			appendStringInfo(&sql, "%s%s", lc == list_head(remaining) ?
							 " AND gid NOT IN (" : ", ",
							 quote_literal_cstr((char *) lfirst(lc)));
		if (remaining != NIL)
			appendStringInfoChar(&sql, ')');
		plan = SPI_prepare(sql.data, 0, NULL);
		if (plan == NULL)
			elog(ERROR, "could not prepare the deletion of records: %s",
				 SPI_result_code_string(SPI_result));
		rc = SPI_execute_snapshot(plan, NULL, NULL, before_listing,
								  InvalidSnapshot, false, false, 0);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "could not delete records: %s", SPI_result_code_string(rc));
	}
	UnregisterSnapshot(before_listing);
}

/*
 * recover_server_reported
 *		recover_server in a subtransaction of its own, its failure reported
 *		(recover_server_caught).
 */
static void
recover_server_reported(Oid serverid, const char *servername, const char *table,
						bool dry_run, bool first, AfdwRecoveryReport report,
						void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		recover_server(serverid, servername, table, dry_run, first, report, arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		AfdwRecoveryOutcome out = {servername, NULL, AFDW_LOCAL_ABORTED,
		AFDW_RECOVERY_FAILED, NULL};

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		out.failure = edata->message;
		report(&out, arg);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

/*
 * recover_server_caught
 *		recover_server, with its failure (a server that cannot be reached)
 *		reported as a row instead of ending the recovery of the others.
 *
 * Its connections hold a superuser's user mapping to the password rules on
 * a server that a non-superuser owns (afdw_hold_owners_to_passwords): the
 * recovery visits every server, as a superuser, unasked.
 */
static void
recover_server_caught(Oid serverid, const char *servername, const char *table,
					  bool dry_run, bool first, AfdwRecoveryReport report,
					  void *arg)
{
	bool		held = afdw_hold_owners_to_passwords(true);

	PG_TRY();
	{
		recover_server_reported(serverid, servername, table, dry_run, first,
								report, arg);
	}
	PG_FINALLY();
	{
		afdw_hold_owners_to_passwords(held);
	}
	PG_END_TRY();
}

/*
 * list_servers
 *		The async_fdw servers of this database (afdw_server_is_ours), by
 *		name: their OIDs into *OIDS, their names into *NAMES.  Within SPI.
 */
static void
list_servers(List **oids, List **names)
{
	int			rc;

	rc = SPI_execute("SELECT oid, srvname FROM pg_catalog.pg_foreign_server"
					 " ORDER BY srvname", true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not list servers: %s", SPI_result_code_string(rc));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			serverid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															  SPI_tuptable->tupdesc,
															  1, &isnull));

		if (!afdw_server_is_ours(serverid))
			continue;
		*oids = lappend_oid(*oids, serverid);
		*names = lappend(*names, SPI_getvalue(SPI_tuptable->vals[i],
											  SPI_tuptable->tupdesc, 2));
	}
}

/*
 * afdw_recovery_servers
 *		The names of the servers the recovery worker visits (in the caller's
 *		memory context): every async_fdw server of this database, by name;
 *		none if async_fdw 1.2, which keeps the records, is not installed
 *		here.  Needs an active snapshot.
 */
List *
afdw_recovery_servers(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *oids = NIL;
	List	   *names = NIL;
	List	   *result = NIL;
	ListCell   *lc;

	SPI_connect();
	if (afdw_twophase_records_name() != NULL)
		list_servers(&oids, &names);
	foreach(lc, names)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		result = lappend(result, pstrdup((char *) lfirst(lc)));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return result;
}

/*
 * afdw_recover_prepared
 *		Recover, on every async_fdw server of this database or on the one
 *		whose OID is ONLY, the remote transactions two-phase commit left
 *		prepared (see the banner); with DRY_RUN, only find out what would be
 *		done.  REPORT (with ARG) gets each outcome, a server that cannot be
 *		reached as one outcome of its own.  False if async_fdw 1.2, which
 *		keeps the records, is not installed in this database: nothing was
 *		done.  Needs an active snapshot.
 */
bool
afdw_recover_prepared(Oid only, bool dry_run, AfdwRecoveryReport report,
					  void *arg)
{
	char	   *table;
	List	   *servers = NIL;
	List	   *names = NIL;
	ListCell   *lc;
	ListCell   *lc2;
	int			rc;

	SPI_connect();
	table = afdw_twophase_records_name();
	if (table == NULL)
	{
		SPI_finish();
		return false;
	}
	if (OidIsValid(only))
	{
		ForeignServer *server = GetForeignServer(only);

		if (!afdw_server_is_ours(only))
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("server \"%s\" is not an async_fdw server",
							server->servername),
					 errhint("Name a server of a foreign-data wrapper whose handler is async_fdw_handler, or none for all.")));
		servers = list_make1_oid(only);
		names = list_make1(server->servername);
	}
	else
		list_servers(&servers, &names);
	forboth(lc, servers, lc2, names)
		recover_server_caught(lfirst_oid(lc), (char *) lfirst(lc2), table,
							  dry_run, lc == list_head(servers), report, arg);

	/* The records of servers dropped since: nothing can reach them. */
	if (!dry_run)
	{
		rc = SPI_execute(psprintf("DELETE FROM %s WHERE server_id NOT IN"
								  " (SELECT oid FROM pg_catalog.pg_foreign_server)",
								  table), false, 0);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "could not delete records: %s", SPI_result_code_string(rc));
	}
	SPI_finish();
	return true;
}

/*
 * local_state_word
 *		STATE as the column local_state shows it.
 */
static const char *
local_state_word(AfdwLocalState state)
{
	switch (state)
	{
		case AFDW_LOCAL_ABORTED:
			return "aborted";
		case AFDW_LOCAL_IN_PROGRESS:
			return "in progress";
		case AFDW_LOCAL_COMMITTED:
			return "committed";
	}
	elog(ERROR, "unknown local state %d", (int) state);
	return NULL;				/* keep the compiler quiet */
}

/*
 * action_word
 *		ACTION as the column action shows it (a failure's reason follows
 *		"failed: ").
 */
static const char *
action_word(AfdwRecoveryAction action)
{
	switch (action)
	{
		case AFDW_RECOVERY_LEFT:
			return "left";
		case AFDW_RECOVERY_WOULD_COMMIT:
			return "would commit";
		case AFDW_RECOVERY_WOULD_ROLL_BACK:
			return "would roll back";
		case AFDW_RECOVERY_COMMITTED:
			return "committed";
		case AFDW_RECOVERY_ROLLED_BACK:
			return "rolled back";
		case AFDW_RECOVERY_FINISHED_BY_SESSION:
			return "finished by its session";
		case AFDW_RECOVERY_LEFT_NO_MAPPING:
			return "left: its user mapping is gone";
		case AFDW_RECOVERY_LEFT_FINISHING:
			return "left: its session is finishing it";
		case AFDW_RECOVERY_FAILED:
			return "failed";
	}
	elog(ERROR, "unknown recovery action %d", (int) action);
	return NULL;				/* keep the compiler quiet */
}

/*
 * put_row
 *		AfdwRecoveryReport of the SQL function: OUTCOME as a row of the
 *		result set ARG, in words.
 */
static void
put_row(const AfdwRecoveryOutcome *outcome, void *arg)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	const char *action = action_word(outcome->action);

	values[0] = CStringGetTextDatum(outcome->server);
	if (outcome->gid != NULL)
	{
		values[1] = CStringGetTextDatum(outcome->gid);
		values[2] = CStringGetTextDatum(local_state_word(outcome->state));
	}
	else
		nulls[1] = nulls[2] = true;
	if (outcome->action == AFDW_RECOVERY_FAILED)
		action = psprintf("%s: %s", action, outcome->failure);
	values[3] = CStringGetTextDatum(action);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * async_fdw_recover_prepared_transactions
 *		SQL-callable: afdw_recover_prepared over every async_fdw server of
 *		this database or the one named SERVER; with DRY_RUN, only say what
 *		would be done.  One row per remote transaction: server, identifier,
 *		local state, action.
 *
 * Not strict: SERVER is NULL by default, for all servers.
 */
Datum
async_fdw_recover_prepared_transactions(PG_FUNCTION_ARGS)
{
	bool		dry_run;
	Oid			only = InvalidOid;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dry_run must not be null")));
	dry_run = PG_GETARG_BOOL(0);
	if (!PG_ARGISNULL(1))
		only = GetForeignServerByName(text_to_cstring(PG_GETARG_TEXT_PP(1)),
									  false)->serverid;

	InitMaterializedSRF(fcinfo, 0);
	(void) afdw_recover_prepared(only, dry_run, put_row, rsinfo);
	PG_RETURN_VOID();
}
