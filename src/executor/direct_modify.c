/*-------------------------------------------------------------------------
 *
 * direct_modify.c
 *		Direct modification: the remote UPDATE or DELETE that
 *		direct_modify_plan.c planned, run as one statement.
 *
 * Each statement is sent at executor start (BeginDirectModify), without
 * waiting, on the writer of its user mapping, so that over a partitioned
 * table every shard works at the same time; the first IterateDirectModify
 * reads its result, counts its rows and hands RETURNING rows over one at a
 * time.  Partitions
 * on one server share its writer: a later statement's send reads the
 * earlier one's result first (drain_direct).
 *
 * A replicated table (option copies) sends the same statement to the other
 * servers holding a copy, which must change as many rows
 * (replica_writes.c).
 *
 * Neighbours: deparse_statements.c binds the parameters; replica_writes.c
 * writes the copies; remote_xact.c sends the statement in the remote
 * transaction (afdw_send_write) and remote_commands.c reads it; async_fdw.c
 * registers the callbacks (afdw_direct_routines).  Execution layer.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_trigger.h"
#include "commands/explain.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/plancat.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "async_fdw.h"
#include "sql/deparse_internal.h"
#include "executor/scan_internal.h"

/* Executor state of a direct modification. */
typedef struct AfdwDirectState
{
	ForeignScanState *node;
	CmdType		operation;		/* CMD_UPDATE or CMD_DELETE */
	Relation	rel;			/* the foreign table changed */
	char	   *sql;			/* remote SQL, parameters as $n */
	char	   *sent_sql;		/* what was sent: values inline */
	bool		returning;		/* the query has a RETURNING list */
	bool		check_partition;	/* each changed row is checked against
									 * the partition constraint */
	List	   *retrieved_attrs;
	bool		count;
	bool		final;			/* the statement's only remote work: its
								 * COMMIT may ride along (may_commit) */
	AfdwConn   *conn;			/* the writer of the user mapping */
	bool		released;		/* conn given back */
	AfdwReplicaWrites *replicas;	/* the other copies of a replicated
									 * table, else NULL */

	/* Parameters: expressions and their output functions. */
	int			nparams;
	List	   *param_exprs;
	FmgrInfo   *param_flinfo;

	bool		sent;			/* the statement is sent */
	bool		checked;		/* its result is read and counted */
	PGresult   *res;			/* its result, once read */
	int			next_row;		/* next RETURNING row to hand over */
	uint64		nrows;			/* rows changed (as many RETURNING rows) */

	RowBuilder	rb;				/* RETURNING rows to the table's tuples */
	bool		join;			/* over a remote join: the scan tuple holds
								 * the other tables' columns */
	int			join_cols;		/* its columns, after the target's */
	RowBuilder	join_rb;		/* ... to the scan tuple */
	MemoryContext row_cxt;		/* a RETURNING tuple; reset per row */
	MemoryContextCallback cleanup;
} AfdwDirectState;

static bool may_commit(ForeignScanState *node, AfdwDirectState *st);
static void send_statement(AfdwDirectState *st);
static void drain_direct(void *owner);
static void read_result(AfdwDirectState *st);
static void check_result(AfdwDirectState *st);
static void check_partitions(AfdwDirectState *st);
static void direct_cleanup(void *arg);
static void direct_error_context(void *arg);

/*
 * direct_user
 *		The user mapping the direct modification NODE of REL runs under, as
 *		a scan of its table would (scan_user in scan.c).
 */
static UserMapping *
direct_user(ForeignScanState *node, Relation rel)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	Oid			userid = afdw_plan_check_user(plan, node->ss.ps.state,
											  plan->resultRelation);

	return GetUserMapping(userid, GetForeignTable(RelationGetRelid(rel))->serverid);
}

/*
 * afdwBeginDirectModify
 *		Take the writer and, when the parameters are known, send the
 *		statement at once: every partition's starts now, on all shards.
 */
static void
afdwBeginDirectModify(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	AfdwDirectState *st;
	UserMapping *user;
	ListCell   *lc;
	int			i = 0;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	/* Rows an INSERT of this statement still keeps are changed too. */
	afdw_flush_kept_rows(plan->fs_server);

	st = palloc0(sizeof(AfdwDirectState));
	node->fdw_state = st;
	st->node = node;
	st->operation = plan->operation;
	/* A remote join (scanrelid 0) has no relation of its own. */
	st->rel = node->ss.ss_currentRelation != NULL ?
		node->ss.ss_currentRelation : node->resultRelInfo->ri_RelationDesc;
	st->sql = strVal(list_nth(plan->fdw_private, AFDW_DIRECT_SQL));
	st->returning = boolVal(list_nth(plan->fdw_private, AFDW_DIRECT_RETURNING));
	st->retrieved_attrs = (List *) list_nth(plan->fdw_private, AFDW_DIRECT_RETRIEVED);
	st->count = boolVal(list_nth(plan->fdw_private, AFDW_DIRECT_COUNT));
	st->check_partition = boolVal(list_nth(plan->fdw_private,
										   AFDW_DIRECT_CHECK_PARTITION));

	st->nparams = list_length(plan->fdw_exprs);
	if (st->nparams > 0)
	{
		st->param_exprs = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
		st->param_flinfo = palloc0(sizeof(FmgrInfo) * st->nparams);
		foreach(lc, plan->fdw_exprs)
		{
			Oid			typoutput;
			bool		isvarlena;

			getTypeOutputInfo(exprType((Node *) lfirst(lc)), &typoutput, &isvarlena);
			fmgr_info(typoutput, &st->param_flinfo[i++]);
		}
	}
	st->join = plan->scan.scanrelid == 0;
	if (st->returning || st->check_partition)
	{
		st->row_cxt = AllocSetContextCreate(estate->es_query_cxt,
											"async_fdw returning",
											ALLOCSET_SMALL_SIZES);
		afdw_init_row_builder(&st->rb, RelationGetDescr(st->rel),
							  RelationGetRelationName(st->rel), false,
							  st->retrieved_attrs, st->row_cxt);
	}
	if (st->returning && st->join)
	{
		TupleDesc	scan_desc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
		List	   *columns = NIL;

		st->join_cols = intVal(list_nth(plan->fdw_private, AFDW_DIRECT_JOIN_COLS));
		Assert(st->join_cols == scan_desc->natts);
		for (int col = 1; col <= st->join_cols; col++)
			columns = lappend_int(columns, col);
		afdw_init_row_builder(&st->join_rb, scan_desc,
							  RelationGetRelationName(st->rel), true,
							  columns, st->row_cxt);
	}

	user = direct_user(node, st->rel);
	st->conn = afdw_acquire_writer(user);

	/*
	 * From here on the state is referenced from outside its memory, and the
	 * writer is given back however the statement ends (the copies' writers
	 * below may fail to connect).
	 */
	st->cleanup.func = direct_cleanup;
	st->cleanup.arg = st;
	MemoryContextRegisterResetCallback(estate->es_query_cxt, &st->cleanup);

	afdw_visibility_first_write(st->conn, RelationGetRelid(st->rel));
	/* A replicated table: the same statement changes every copy. */
	st->replicas = afdw_replica_writes_begin(st->rel, user->userid);
	st->final = st->replicas == NULL && may_commit(node, st);

	if (boolVal(list_nth(plan->fdw_private, AFDW_DIRECT_EAGER)))
		send_statement(st);
}

/*
 * after_statement_trigger
 *		Whether TRIGDESC has an AFTER STATEMENT trigger of EVENT (a
 *		TRIGGER_TYPE_ event).
 */
static bool
after_statement_trigger(TriggerDesc *trigdesc, int event)
{
	if (trigdesc == NULL)
		return false;
	if (event == TRIGGER_TYPE_UPDATE)
		return trigdesc->trig_update_after_statement;
	return trigdesc->trig_delete_after_statement;
}

/*
 * may_commit
 *		Whether the direct modification NODE (ST) may carry the remote
 *		COMMIT of a statement that is its own transaction
 *		(afdw_send_final_write decides the rest when it is sent): it runs
 *		the client's statement itself, not a function's query, which the
 *		rest of the calling statement follows (afdw_is_client_statement);
 *		it is the statement's whole plan below its ModifyTable, the plan's
 *		only write and its server's only ForeignScan, and nothing runs
 *		after its result: no RETURNING, whose rows are converted only then,
 *		no check of the changed rows' partition, no AFTER STATEMENT
 *		trigger, no subquery.
 *
 * An autocommit UPDATE or DELETE of one row then costs one round trip,
 * as an INSERT does (afdw_defer_write), instead of the statement's and
 * the COMMIT's.
 */
static bool
may_commit(ForeignScanState *node, AfdwDirectState *st)
{
	PlannedStmt *stmt = node->ss.ps.state->es_plannedstmt;
	ModifyTable *mt = (ModifyTable *) stmt->planTree;
	ResultRelInfo *rinfo = node->resultRelInfo;
	const AfdwScanPlace *place;
	int			event = (st->operation == CMD_UPDATE) ?
		TRIGGER_TYPE_UPDATE : TRIGGER_TYPE_DELETE;

	if (!afdw_is_client_statement(node->ss.ps.state))
		return false;
	if (st->returning || st->check_partition || !st->count ||
		!IsA(mt, ModifyTable) || outerPlan(mt) != (Plan *) node->ss.ps.plan ||
		list_length(mt->resultRelations) != 1 || stmt->hasModifyingCTE ||
		stmt->subplans != NIL || mt->plan.initPlan != NIL)
		return false;
	if (after_statement_trigger(rinfo->ri_TrigDesc, event) ||
		(rinfo->ri_RootResultRelInfo != NULL &&
		 after_statement_trigger(rinfo->ri_RootResultRelInfo->ri_TrigDesc, event)))
		return false;
	/* The ModifyTable runs it once: whether it is its server's only one. */
	place = afdw_find_scan_place(node->ss.ps.state, node->ss.ps.plan);
	return place != NULL && place->only;
}

/*
 * send_statement
 *		Send the statement, its parameters' values inline, on the writer
 *		without waiting for it.
 */
static void
send_statement(AfdwDirectState *st)
{
	EState	   *estate = st->node->ss.ps.state;
	ExprContext *econtext = st->node->ss.ps.ps_ExprContext;
	MemoryContext oldcxt = MemoryContextSwitchTo(estate->es_query_cxt);

	if (st->nparams == 0)
		st->sent_sql = st->sql;
	else
	{
		const char **values = palloc(sizeof(char *) * st->nparams);
		StringInfoData buf;
		ListCell   *lc;
		int			nestlevel = afdw_set_transmission_modes();
		int			i = 0;

		foreach(lc, st->param_exprs)
		{
			bool		isnull;
			Datum		value = ExecEvalExpr((ExprState *) lfirst(lc), econtext,
											 &isnull);

			values[i] = isnull ? NULL : OutputFunctionCall(&st->param_flinfo[i], value);
			i++;
		}
		afdw_reset_transmission_modes(nestlevel);
		initStringInfo(&buf);
		afdw_bind_params(&buf, st->sql, st->nparams, values);
		st->sent_sql = buf.data;
	}
	MemoryContextSwitchTo(oldcxt);

	if (st->final)
		(void) afdw_send_final_write(st->conn, st->sent_sql, st, drain_direct);
	else
		afdw_send_write(st->conn, st->sent_sql, false, st, drain_direct);
	st->sent = true;
}

/*
 * read_result
 *		Wait for the statement's result and keep it.
 */
static void
read_result(AfdwDirectState *st)
{
	st->res = afdw_wait_result(st->conn, st->sent_sql);
}

/*
 * drain_direct
 *		Another command needs the writer: read the statement's result now,
 *		for the first IterateDirectModify.  A failed statement fails the
 *		query here, with its own error: the other command would run in its
 *		failed remote transaction and fail with 25P02 instead.
 */
static void
drain_direct(void *owner)
{
	AfdwDirectState *st = (AfdwDirectState *) owner;
	ErrorContextCallback errcb;

	read_result(st);
	if (st->res != NULL &&
		(PQresultStatus(st->res) == PGRES_COMMAND_OK ||
		 PQresultStatus(st->res) == PGRES_TUPLES_OK))
		return;
	errcb.callback = direct_error_context;
	errcb.arg = st;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	check_result(st);
	error_context_stack = errcb.previous;
}

/*
 * check_result
 *		Raise the statement's error, if it failed; else count its rows for
 *		the statement's tag.
 */
static void
check_result(AfdwDirectState *st)
{
	PGresult   *res = st->res;

	if (res == NULL ||
		(PQresultStatus(res) != PGRES_COMMAND_OK &&
		 PQresultStatus(res) != PGRES_TUPLES_OK))
	{
		st->res = NULL;
		afdw_report_remote_error(res, st->conn, st->sent_sql);
	}
	st->checked = true;
	/* No RETURNING clause when RETURNING reads no column: the count. */
	st->nrows = afdw_rows_changed(res);
	if (st->replicas != NULL)
	{
		/* The copies follow the table's own server: see replica_writes.c. */
		afdw_replica_writes_run(st->replicas, st->sent_sql, st->nrows,
								st->operation == CMD_UPDATE ? "UPDATE" : "DELETE");
	}
	if (st->count)
		st->node->ss.ps.state->es_processed += st->nrows;
	if (st->check_partition)
		check_partitions(st);
}

/*
 * check_partitions
 *		Check every row the statement changed against the table's partition
 *		constraint (afdw_check_partition_row): the remote statement returned
 *		the columns it reads.  A failure fails the statement before any row
 *		is handed over, and the local transaction's abort takes the remote
 *		change back.
 */
static void
check_partitions(AfdwDirectState *st)
{
	EState	   *estate = st->node->ss.ps.state;
	ResultRelInfo *rinfo = st->node->resultRelInfo;
	TupleTableSlot *slot = ExecGetReturningSlot(estate, rinfo);

	for (uint64 row = 0; row < st->nrows; row++)
	{
		HeapTuple	tuple;

		MemoryContextReset(st->row_cxt);
		tuple = afdw_make_tuple_at(&st->rb, st->res, (int) row, 0, st->row_cxt);
		ExecForceStoreHeapTuple(tuple, slot, false);
		afdw_check_partition_row(rinfo, CMD_UPDATE, slot, estate);
		ExecClearTuple(slot);
	}
}

/*
 * afdwIterateDirectModify
 *		The next RETURNING row (an empty slot at the end, or at once
 *		without RETURNING), after reading and counting the statement's
 *		result the first time.
 */
static TupleTableSlot *
afdwIterateDirectModify(ForeignScanState *node)
{
	AfdwDirectState *st = (AfdwDirectState *) node->fdw_state;
	ResultRelInfo *rinfo = node->resultRelInfo;
	TupleTableSlot *slot;
	HeapTuple	tuple;
	ErrorContextCallback errcb;

	errcb.callback = direct_error_context;
	errcb.arg = st;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	if (!st->checked)
	{
		if (!st->sent)
			send_statement(st);
		if (st->res == NULL)
		{
			/* A rollback to a savepoint took the statement's result. */
			if (!afdw_is_owner(st->conn, st))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("remote statement on foreign table \"%s\" was cancelled",
								RelationGetRelationName(st->rel))));
			read_result(st);
		}
		check_result(st);
	}

	if (!st->returning || (uint64) st->next_row >= st->nrows)
	{
		error_context_stack = errcb.previous;
		return ExecClearTuple(node->ss.ss_ScanTupleSlot);
	}

	/* The row, as the table's tuple, where RETURNING reads it. */
	slot = ExecGetReturningSlot(node->ss.ps.state, rinfo);
	ExecClearTuple(slot);
	MemoryContextReset(st->row_cxt);
	tuple = afdw_make_tuple_at(&st->rb, st->res, st->next_row, 0, st->row_cxt);
	ExecForceStoreHeapTuple(tuple, slot, false);
	/* A row of the table: its tableoid is the table's (RETURNING reads it). */
	slot->tts_tableOid = RelationGetRelid(st->rel);
	rinfo->ri_projectReturning->pi_exprContext->ecxt_scantuple = slot;

	/*
	 * Over a remote join, the other tables' columns follow: the scan tuple,
	 * from which the scan's output (and so RETURNING) reads them.
	 */
	if (st->join)
	{
		tuple = afdw_make_tuple_at(&st->join_rb, st->res, st->next_row,
								   list_length(st->retrieved_attrs), st->row_cxt);
		slot = node->ss.ss_ScanTupleSlot;
		ExecForceStoreHeapTuple(tuple, slot, false);
		/*
		 * The slot the scan returns stands for the target's row too: it
		 * carries the target's tableoid (PostgreSQL 18 reads RETURNING's
		 * tableoid of a remote join's target there).
		 */
		slot->tts_tableOid = RelationGetRelid(st->rel);
	}
	st->next_row++;
	error_context_stack = errcb.previous;
	return slot;
}

/*
 * afdwEndDirectModify
 *		Read a result nobody asked for (its error is the statement's), and
 *		give the writer back.
 */
static void
afdwEndDirectModify(ForeignScanState *node)
{
	AfdwDirectState *st = (AfdwDirectState *) node->fdw_state;

	if (st == NULL)
		return;
	if (st->sent && !st->checked)
	{
		ErrorContextCallback errcb;

		errcb.callback = direct_error_context;
		errcb.arg = st;
		errcb.previous = error_context_stack;
		error_context_stack = &errcb;
		if (st->res == NULL && afdw_is_owner(st->conn, st))
			read_result(st);
		if (st->res != NULL)
			check_result(st);
		error_context_stack = errcb.previous;
	}
	if (st->res != NULL)
	{
		PQclear(st->res);
		st->res = NULL;
	}
	afdw_release_connection(st->conn);
	st->released = true;
	afdw_replica_writes_end(st->replicas);
}

/*
 * direct_error_context
 *		Name the foreign table whose remote UPDATE or DELETE (ARG, its
 *		AfdwDirectState) failed, or whose RETURNING row could not be read.
 */
static void
direct_error_context(void *arg)
{
	AfdwDirectState *st = (AfdwDirectState *) arg;

	if (st->operation == CMD_UPDATE)
		errcontext("update of foreign table \"%s\"", RelationGetRelationName(st->rel));
	else
		errcontext("delete from foreign table \"%s\"", RelationGetRelationName(st->rel));
}

/*
 * direct_cleanup
 *		Memory-context callback: the executor state is going away, normally
 *		or on error.  Forget the statement in flight (the abort handles the
 *		remote side) and give the writer back.
 */
static void
direct_cleanup(void *arg)
{
	AfdwDirectState *st = (AfdwDirectState *) arg;

	afdw_forget_owner(st->conn, st);
	if (!st->released)
	{
		afdw_release_connection(st->conn);
		st->released = true;
	}
	if (st->res != NULL)
	{
		PQclear(st->res);
		st->res = NULL;
	}
}

/*
 * afdwExplainDirectModify
 *		Show the remote statement in EXPLAIN VERBOSE.
 */
static void
afdwExplainDirectModify(ForeignScanState *node, ExplainState *es)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;

	if (es->verbose)
	{
		char	   *servers = NULL;

		if (node->resultRelInfo != NULL)
			servers = afdw_replica_server_names(RelationGetRelid(node->resultRelInfo->ri_RelationDesc));
		ExplainPropertyText("Remote SQL",
							strVal(list_nth(plan->fdw_private, AFDW_DIRECT_SQL)), es);
		if (servers != NULL)
			ExplainPropertyText("Copies Written", servers, es);
		afdw_explain_commit_fence(es, node->ss.ps.state, node->resultRelInfo);
	}
}

/*
 * afdw_direct_routines
 *		Fill in the direct modification callbacks of ROUTINE.
 */
void
afdw_direct_routines(FdwRoutine *routine)
{
	routine->BeginDirectModify = afdwBeginDirectModify;
	routine->IterateDirectModify = afdwIterateDirectModify;
	routine->EndDirectModify = afdwEndDirectModify;
	routine->ExplainDirectModify = afdwExplainDirectModify;
}

