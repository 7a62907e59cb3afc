/*-------------------------------------------------------------------------
 *
 * scan.c
 *		Executor and asynchronous callbacks of async_fdw's foreign scans.
 *
 * Begin, Iterate, ReScan and End, the life of a scan's state, the eager start
 * of queries (every scan of a statement sends its query at the first fetch of
 * any of them), and the row loop (next_batch) that takes batches from where
 * the scan reads its query: a COPY stream (copy_stream.c), a queue of FETCH or
 * EXECUTE results (scan_commands.c).  row_builder.c turns each row into a
 * tuple.
 *
 * Under an asynchronous Append, a scan waits on its connection's socket;
 * scans sharing a connection wait on it once (socket_in_wait), and a scan
 * whose results another scan read makes the Append's wait end at once
 * (afdw_wake_append, in scan_state.c with the other primitives of a scan's
 * state that the scan files share).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/execAsync.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "tcop/tcopprot.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

/* What next_batch found. */
typedef enum AfdwBatchResult
{
	BATCH_READY,				/* the current batch has a row to use */
	BATCH_END,					/* the scan's rows are all used */
	BATCH_NOT_READY				/* no row has arrived yet (not waiting) */
} AfdwBatchResult;

/*
 * Scans of this backend that have not sent their query yet.  The first
 * fetch of any scan sends the queries of all the others of the same
 * executor too, so that every remote server starts working at once, even
 * under a MergeAppend or a plan that reads its children one by one.
 */
static dlist_head pending_scans = DLIST_STATIC_INIT(pending_scans);

static void begin_scan(ForeignScanState *node);

/*
 * When a scan under an asynchronous Append was last served after the
 * Append's wait (afdwForeignAsyncNotify), while scans are timed: a scan
 * still pending at its next wait counts its previous wait as lasting until
 * then.
 */
static instr_time last_notify;

/*
 * scan_user
 *		The user mapping a scan of range table entry RTINDEX of PLAN runs
 *		under, on the server the plan names: the table's, or for a remote join
 *		the server of its tables (of a partition's, where it reads a replicated
 *		table's copy: replicated_joins.c); the first table's when the plan
 *		names none (a remote aggregate of a subquery's partition).
 */
static UserMapping *
scan_user(ForeignScan *plan, EState *estate, Index rtindex)
{
	Oid			server = plan->fs_server;

	if (!OidIsValid(server))
		server = GetForeignTable(exec_rt_fetch(rtindex, estate)->relid)->serverid;
	return GetUserMapping(afdw_plan_check_user(plan, estate, rtindex), server);
}

/*
 * free_libpq_memory
 *		Give back what the scan holds outside PostgreSQL's memory contexts:
 *		the results queued and the current batch's result.
 *
 * Used when the scan's memory is going away: the line buffer and the rest
 * live in contexts that are deleted with (or before) the scan, so nothing
 * palloc'd may be touched here.
 */
static void
free_libpq_memory(AfdwScanState *st)
{
	afdw_clear_queue(st);
	if (st->batch_res != NULL)
	{
		PQclear(st->batch_res);
		st->batch_res = NULL;
	}
	if (st->held_error != NULL)
	{
		PQclear(st->held_error);
		st->held_error = NULL;
	}
	st->lines.buf = NULL;
	st->lines.size = 0;
	st->lines.used = 0;
	st->lines.n = 0;
	st->ntuples = 0;
	st->next_tuple = 0;
	/* The tuplestore's temporary file goes with the resource owner. */
	st->spill = NULL;
	st->spill_slot = NULL;
}

/*
 * stop_timing
 *		The scan no longer needs the waits timed.
 */
static void
stop_timing(AfdwScanState *st)
{
	if (st->stats.timed)
	{
		st->stats.timed = false;
		afdw_timed_scans--;
	}
}

/*
 * add_wait_since
 *		Count the time from *BEFORE's reading of afdw_wait_time until now
 *		as time ST waited.
 */
static inline void
add_wait_since(AfdwScanState *st, instr_time *before)
{
	if (st->stats.timed)
		INSTR_TIME_ACCUM_DIFF(st->stats.wait, afdw_wait_time, *before);
}

/*
 * scan_cleanup
 *		Memory-context callback: the executor state of the scan is going
 *		away, normally or on error.  Drop every reference to the scan held
 *		elsewhere, and give its connection back.
 *
 * It runs on the query context, whose child contexts (the scan's line
 * buffer among them) are already deleted: only the scan state itself,
 * which lives in the query context, and libpq memory may be touched.
 */
static void
scan_cleanup(void *arg)
{
	AfdwScanState *st = (AfdwScanState *) arg;

	stop_timing(st);
	if (st->phase == PHASE_PENDING)
		afdw_set_phase(st, PHASE_UNSENT);
	if (st->active)
	{
		dlist_delete(&st->active_node);
		st->active = false;
	}
	afdw_forget_owner(st->conn, st);
	if (!st->released)
	{
		afdw_release_connection(st->conn);
		st->released = true;
	}
	free_libpq_memory(st);
}

/*
 * computed_row_type
 *		The row type in which the remote rows of NODE, a remote join or
 *		aggregate, are read: its scan tuple's, except that a whole row
 *		typed record (the row identity of the target of an UPDATE or
 *		DELETE) is read as its table's row type, which the remote ROW()
 *		of its columns has.  The values go into the scan tuple unchanged.
 */
static TupleDesc
computed_row_type(ForeignScanState *node, EState *estate)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	TupleDesc	tupdesc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	TupleDesc	copy = NULL;
	ListCell   *lc;
	int			i = 0;

	foreach(lc, plan->fdw_scan_tlist)
	{
		Var		   *var = (Var *) lfirst_node(TargetEntry, lc)->expr;

		if (i < tupdesc->natts && TupleDescAttr(tupdesc, i)->atttypid == RECORDOID &&
			IsA(var, Var) && var->varattno == 0 && var->varlevelsup == 0)
		{
			RangeTblEntry *rte = exec_rt_fetch(var->varno, estate);
			Oid			reltype = rte->rtekind == RTE_RELATION ?
				get_rel_type_id(rte->relid) : InvalidOid;

			if (OidIsValid(reltype))
			{
				if (copy == NULL)
					copy = CreateTupleDescCopy(tupdesc);
				TupleDescAttr(copy, i)->atttypid = reltype;
			}
		}
		i++;
	}
	return copy != NULL ? copy : tupdesc;
}

/*
 * afdwBeginForeignScan
 *		Take a connection and prepare the scan.  The query is sent at the
 *		first fetch of this or any other scan of the same query.
 *
 * A scan of the local join plan that rechecks a row of a remote join
 * (afdw_mark_recheck_only) is prepared only if it is ever read, which a
 * recheck does not do: it returns the row under test.  So is a scan of an
 * initplan whose value is written into remote queries and read nowhere
 * (afdw_mark_when_read): it is never read.
 */
static void
afdwBeginForeignScan(ForeignScanState *node, int eflags)
{
	if ((eflags & EXEC_FLAG_EXPLAIN_ONLY) ||
		afdw_scan_when_read((ForeignScan *) node->ss.ps.plan))
		return;
	begin_scan(node);
}

/*
 * init_rows
 *		The table ST reads and its row builder; return the table's range
 *		table index (a remote join's or aggregate's first table's), for
 *		scan_user.
 *
 * A scan whose remote query computes its columns (aggregates) has no
 * relation of its own: its rows are those of its target list, and the
 * foreign table it reads is opened here for its name and options (the
 * plan holds its lock).  Such rows travel in text form only.
 */
static Index
init_rows(AfdwScanState *st, ForeignScanState *node, ForeignScan *plan,
		  EState *estate, bool stream)
{
	Index		rtindex;

	if (plan->scan.scanrelid > 0)
	{
		rtindex = plan->scan.scanrelid;
		st->rel = node->ss.ss_currentRelation;
		afdw_init_row_builder(&st->rb, RelationGetDescr(st->rel),
							  RelationGetRelationName(st->rel), false,
							  st->retrieved_attrs, st->row_cxt);
		if (stream)
			st->binary_capable = afdw_prepare_binary(st);
	}
	else
	{
		rtindex = bms_next_member(afdw_scan_base_relids(plan), -1);
		st->computed = true;
		st->rel = table_open(exec_rt_fetch(rtindex, estate)->relid, NoLock);
		afdw_init_row_builder(&st->rb, computed_row_type(node, estate),
							  RelationGetRelationName(st->rel), true,
							  st->retrieved_attrs, st->row_cxt);
	}
	return rtindex;
}

/*
 * init_prepare
 *		Whether the runs of ST's query may be EXECUTEs of a prepared
 *		statement (a parameterized scan's), and whether the query ends with
 *		the query's own LIMIT; return what afdw_scan_own_limit gave as that
 *		LIMIT's most rows (-1: not known), read when own_limit is set.
 *
 * A query with the query's own LIMIT is prepared as it is, when that
 * LIMIT keeps it within the fetch_size + 1 rows of a prepared
 * statement's run; otherwise it runs as a cursor (a second LIMIT
 * could not be appended).
 */
static int
init_prepare(AfdwScanState *st, ForeignScan *plan)
{
	int			own_bound = -1;

	st->nparams = list_length(plan->fdw_exprs);
	st->may_prepare = (st->nparams > 0);

	if (afdw_scan_own_limit(plan, &own_bound))
	{
		st->own_limit = true;
		if (own_bound < 0 || own_bound > st->fetch_size)
			st->may_prepare = false;
	}
	return own_bound;
}

/*
 * init_key_slots
 *		The arrays of keys of hash joins that ST's query may take
 *		(take_keys); the query as planned until then.
 */
static void
init_key_slots(AfdwScanState *st, ForeignScan *plan)
{
	st->nkey_uses = afdw_scan_key_uses(plan);
	st->plain_sql = st->sql;
	st->plain_nparams = st->nparams;
	if (st->nkey_uses > 0)
	{
		st->may_prepare = false;
		st->key_used = palloc0(sizeof(bool) * st->nkey_uses);
		st->key_arrays = palloc0(sizeof(Datum) * st->nkey_uses);
		st->keys_sent = -1;
		fmgr_info(F_ARRAY_OUT, &st->key_out);
		st->param_values = palloc0(sizeof(char *) * (st->nparams + st->nkey_uses));
	}
}

/*
 * init_params
 *		The expressions of ST's parameters, and the output functions that
 *		make their values text.
 */
static void
init_params(AfdwScanState *st, ForeignScanState *node, ForeignScan *plan)
{
	ListCell   *lc;
	int			i = 0;

	if (st->nparams > 0)
	{
		st->param_exprs = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
		st->param_flinfo = palloc0(sizeof(FmgrInfo) * st->nparams);
		if (st->param_values == NULL)
			st->param_values = palloc0(sizeof(char *) * st->nparams);
		foreach(lc, plan->fdw_exprs)
		{
			Oid			typoutput;
			bool		isvarlena;

			getTypeOutputInfo(exprType((Node *) lfirst(lc)), &typoutput, &isvarlena);
			fmgr_info(typoutput, &st->param_flinfo[i++]);
		}
	}
}

/*
 * init_row_locks
 *		Whether ST's query locks the remote rows it reads.
 *
 * SELECT ... FOR UPDATE/SHARE: the remote rows stay locked until the
 * remote COMMIT, which must be over when the local one is.  So do the
 * rows of the target of an UPDATE or DELETE changed row by row
 * (modify_rows.c), which are changed where they are read.  Both run on the
 * writer (afdw_acquire_writer): a row locked on another connection of
 * the backend could not be changed by the writer without waiting for
 * that connection's transaction, that is, forever.
 */
static void
init_row_locks(AfdwScanState *st, ForeignScan *plan, EState *estate)
{
	int			relid = -1;

	st->locks_rows = (!st->computed && estate->es_rowmarks != NULL &&
					  estate->es_rowmarks[plan->scan.scanrelid - 1] != NULL &&
					  estate->es_rowmarks[plan->scan.scanrelid - 1]->strength != LCS_NONE);
	/*
	 * Also when the UPDATE or DELETE is in a WITH of another statement: a
	 * result relation's own range table entry is only scanned as the
	 * target.
	 */
	if (!st->computed && plan->operation == CMD_SELECT &&
		list_member_int(estate->es_plannedstmt->resultRelations,
						plan->scan.scanrelid))
		st->locks_rows = true;
	/*
	 * A remote join locks the rows of the tables the query locks, and
	 * those of the target of an UPDATE or DELETE that it holds (join_paths.c).
	 */
	while (plan->scan.scanrelid == 0 && plan->operation == CMD_SELECT &&
		   (relid = bms_next_member(afdw_scan_base_relids(plan), relid)) >= 0)
	{
		if ((estate->es_rowmarks != NULL &&
			 estate->es_rowmarks[relid - 1] != NULL &&
			 estate->es_rowmarks[relid - 1]->strength != LCS_NONE) ||
			list_member_int(estate->es_plannedstmt->resultRelations, relid))
			st->locks_rows = true;
	}
}

/*
 * choose_read_mode
 *		How ST's query may be read besides a cursor or a prepared
 *		statement: in one command with the remote COMMIT (one_shot), as a
 *		stream taking turns with its Append's other children on a shared
 *		connection (async_parent, when WANT_PARENT), or carried by a
 *		sibling's query (combine_parent).  OWN_BOUND is init_prepare's.
 *
 * A statement that is its own transaction and only reads, whose scan
 * is its server's only one and runs once: its query goes in one
 * command that returns all the rows, with the remote COMMIT in the
 * same send (afdw_send_in_xact).  That is a stream, or, for a scan
 * expected to return at most fetch_size rows (a lookup), a query
 * bounded to one row more (which tells that there are more: the query
 * then runs again with a cursor).
 */
static void
choose_read_mode(AfdwScanState *st, ForeignScan *plan, EState *estate,
				 bool stream, bool want_parent, int own_bound)
{
	bool		may_combine;

	st->one_shot = (!st->nested && !st->locks_rows &&
					plan->operation == CMD_SELECT &&
					estate->es_plannedstmt->commandType == CMD_SELECT &&
					estate->es_plannedstmt->rowMarks == NIL &&
					!estate->es_plannedstmt->hasModifyingCTE &&
					estate->es_epq_active == NULL &&
					(stream ||
					 (plan->scan.plan.plan_rows <= st->fetch_size &&
					  (st->nparams > 0 ? st->may_prepare :
					   !st->own_limit ||
					   (own_bound >= 0 && own_bound <= st->fetch_size)))) &&
					afdw_statement_is_transaction());
	may_combine = afdw_may_combine(st, plan, estate);
	if (want_parent || st->one_shot || may_combine)
	{
		const AfdwScanPlace *place = afdw_find_scan_place(estate, (Plan *) plan);

		if (want_parent && place != NULL)
			st->async_parent = place->parent;
		st->one_shot = st->one_shot && place != NULL && place->alone;
		if (may_combine)
			st->combine_parent = afdw_combine_parent(place);
	}
}

/*
 * take_connection
 *		ST's connection, for the user mapping scan_user finds from range
 *		table entry RTINDEX: the writer for a scan that locks rows
 *		(init_row_locks).
 */
static void
take_connection(AfdwScanState *st, ForeignScan *plan, EState *estate,
				Index rtindex)
{
	if (st->locks_rows)
	{
		st->conn = afdw_acquire_writer(scan_user(plan, estate, rtindex));
		afdw_note_row_locks(st->conn);
	}
	else
		st->conn = afdw_acquire_connection(scan_user(plan, estate, rtindex));

	st->stats.users = afdw_conn_users(st->conn);
}

/*
 * init_stats
 *		EXPLAIN ANALYZE: count the bytes of results, and time the waits
 *		unless TIMING is off (undone by the End or the cleanup).  The
 *		node's own instrumentation is set up only after the Begin: the
 *		executor's flags tell what it will be.
 */
static void
init_stats(AfdwScanState *st, EState *estate)
{
	if (estate->es_instrument != 0)
	{
		st->stats.count_bytes = true;
		if (estate->es_instrument & INSTRUMENT_TIMER)
		{
			st->stats.timed = true;
			afdw_timed_scans++;
		}
	}
}

/*
 * begin_scan
 *		afdwBeginForeignScan's work.
 */
static void
begin_scan(ForeignScanState *node)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	AfdwScanState *st;
	bool		stream;
	Index		rtindex;
	int			own_bound;
	bool		want_parent;

	/* Rows an INSERT of this statement still keeps are read too. */
	afdw_flush_kept_rows(plan->fs_server);

	st = palloc0(sizeof(AfdwScanState));
	node->fdw_state = st;
	st->wait_sock = PGINVALID_SOCKET;
	st->node = node;
	st->estate = estate;
	st->start_level = GetCurrentTransactionNestLevel();
	st->mode = READ_CURSOR;		/* until the query is sent */
	st->phase = PHASE_UNSENT;	/* until it is in pending_scans */
	st->outcome = PHASE_OPEN;
	afdw_scan_private(plan, &st->sql, &st->retrieved_attrs, &st->fetch_size,
					  &stream, &st->outer_order);
	st->may_stream = stream;

	st->scan_cxt = AllocSetContextCreate(estate->es_query_cxt,
										 "async_fdw scan",
										 ALLOCSET_SMALL_SIZES);
	st->batch_cxt = AllocSetContextCreate(estate->es_query_cxt,
										  "async_fdw batch",
										  ALLOCSET_DEFAULT_SIZES);
	st->row_cxt = AllocSetContextCreate(estate->es_query_cxt,
										"async_fdw row",
										ALLOCSET_DEFAULT_SIZES);

	rtindex = init_rows(st, node, plan, estate, stream);
	own_bound = init_prepare(st, plan);

	/*
	 * A remote join planned to become a direct modification has no SELECT
	 * (join_paths.c); the planner must not have left it as a scan.
	 */
	if (st->sql[0] == '\0')
		elog(ERROR, "foreign scan of \"%s\" has no remote query",
			 st->rb.relname);

	init_key_slots(st, plan);
	init_params(st, node, plan);

	/*
	 * A query that runs inside another statement (a function's) is not the
	 * statement the client sent: more scans may join its remote
	 * transaction later (see afdw_send_in_xact).
	 */
	st->nested = !afdw_is_client_statement(estate);

	want_parent = (plan->scan.plan.async_capable && estate->es_epq_active == NULL &&
				   stream && st->nparams == 0);

	init_row_locks(st, plan, estate);
	choose_read_mode(st, plan, estate, stream, want_parent, own_bound);
	take_connection(st, plan, estate, rtindex);

	/* From here on the scan is referenced from outside its memory. */
	st->cleanup.func = scan_cleanup;
	st->cleanup.arg = st;
	MemoryContextRegisterResetCallback(estate->es_query_cxt, &st->cleanup);

	init_stats(st, estate);

	st->phase = PHASE_PENDING;
	dlist_push_tail(&pending_scans, &st->pending_node);
	dlist_push_tail(&afdw_active_scans, &st->active_node);
	st->active = true;
}

/*
 * ready_connections
 *		End together the handshakes of the connections that the scans of
 *		ESTATE still waiting to start are opening, and move a scan whose
 *		connection the server refused onto the one it shares instead.
 *
 * The scans' connections are started at their Begin, one after the other
 * but without waiting, so that their handshakes overlap: a query that
 * needs four connections pays about one connection's time.
 */
static void
ready_connections(EState *estate)
{
	dlist_iter	it;
	AfdwConn  **conns = NULL;
	int			n = 0;
	int			max = 0;
	ErrorContextCallback *saved;

	dlist_foreach(it, &pending_scans)
	{
		AfdwScanState *st = dlist_container(AfdwScanState, pending_node, it.cur);
		bool		seen = false;

		if (st->estate != estate || !afdw_is_connecting(st->conn))
			continue;
		for (int i = 0; i < n && !seen; i++)
			seen = (conns[i] == st->conn);
		if (seen)
			continue;
		if (n == max)
		{
			max = Max(8, max * 2);
			conns = (conns == NULL) ? palloc(sizeof(AfdwConn *) * max) :
				repalloc(conns, sizeof(AfdwConn *) * max);
		}
		conns[n++] = st->conn;
	}
	if (n == 0)
		return;

	/*
	 * A connection's failure concerns its server, not the table of the
	 * scan that happened to fetch first: no scan context, as when
	 * connecting at a scan's Begin.  (An error's unwinding restores the
	 * stack.)
	 */
	saved = error_context_stack;
	if (saved != NULL && saved->callback == afdw_scan_error_context)
		error_context_stack = saved->previous;
	afdw_connect_finish(conns, n);
	pfree(conns);

	dlist_foreach(it, &pending_scans)
	{
		AfdwScanState *st = dlist_container(AfdwScanState, pending_node, it.cur);
		AfdwConn   *conn;

		if (st->estate != estate)
			continue;
		conn = afdw_connection_ready(st->conn);
		if (conn == st->conn)
			continue;
		st->conn = conn;
		if (st->locks_rows)
			afdw_note_row_locks(conn);
		st->stats.users = Max(st->stats.users, afdw_conn_users(conn));
	}
	error_context_stack = saved;
}

/*
 * take_keys
 *		Ask the key collectors of ST's plan for their keys (which may read
 *		a hash join's inner side to its end: see key_collector.c), and make the
 *		query that takes those they have.
 *
 * Called when the scan is first read, never from another scan's turn: the
 * collectors run other parts of the plan.  So a scan with key uses is not
 * started with the others (start_pending_scans).
 */
static void
take_keys(AfdwScanState *st)
{
	ForeignScan *plan = (ForeignScan *) st->node->ss.ps.plan;
	int			used = 0;
	MemoryContext old;
	ErrorContextCallback *saved = error_context_stack;

	/*
	 * An error of the other side's scans is theirs, not this table's: no
	 * scan context of its own meanwhile.  (An error's unwinding restores
	 * the stack.)
	 */
	if (saved != NULL && saved->callback == afdw_scan_error_context &&
		saved->arg == st)
		error_context_stack = saved->previous;
	st->keys_sent = 0;
	for (int i = 0; i < st->nkey_uses; i++)
	{
		int			collector;
		int			column;
		int			count = 0;

		afdw_scan_key_use(plan, i, &collector, &column);
		st->key_used[i] = afdw_collected_keys(st->estate, collector, column,
											  &st->key_arrays[i], &count);
		if (st->key_used[i])
		{
			used++;
			st->keys_sent += count;
		}
	}
	error_context_stack = saved;
	if (st->sql != st->plain_sql)
		pfree(st->sql);
	st->sql = st->plain_sql;
	st->nparams = st->plain_nparams + used;
	if (used > 0)
	{
		old = MemoryContextSwitchTo(st->scan_cxt);
		st->sql = afdw_keyed_sql(plan, st->key_used, st->plain_nparams + 1);
		MemoryContextSwitchTo(old);
	}
	else
		st->keys_sent = -1;
	st->keys_taken = true;
}

/*
 * combine_pending_scans
 *		Let ESTATE's scans still waiting to start that may send their
 *		queries together (combined_scans.c) do so.
 */
static void
combine_pending_scans(EState *estate)
{
	dlist_iter	it;
	AfdwScanState **scans = NULL;
	int			n = 0;
	int			max = 0;

	dlist_foreach(it, &pending_scans)
	{
		AfdwScanState *st = dlist_container(AfdwScanState, pending_node, it.cur);

		if (st->estate != estate || st->combine_parent == NULL)
			continue;
		if (n == max)
		{
			max = Max(16, max * 2);
			scans = (scans == NULL) ? palloc(sizeof(AfdwScanState *) * max) :
				repalloc(scans, sizeof(AfdwScanState *) * max);
		}
		scans[n++] = st;
	}
	if (n > 1)
		afdw_combine_scans(scans, n);
	if (scans != NULL)
		pfree(scans);
}

/*
 * scan_relid
 *		A table ST reads: its own, or the first of its join or aggregate.
 */
static Oid
scan_relid(AfdwScanState *st)
{
	ForeignScan *plan = (ForeignScan *) st->node->ss.ps.plan;
	int			rti;

	if (st->rel != NULL)
		return RelationGetRelid(st->rel);
	rti = bms_next_member(afdw_scan_base_relids(plan), -1);
	if (rti <= 0)
		return InvalidOid;
	return exec_rt_fetch(rti, st->estate)->relid;
}

/*
 * start_pending_scans
 *		Send the queries of every scan of ESTATE still waiting to start,
 *		when they need no parameter and their connection is free.
 *
 * A query started for a scan that the plan never runs (the inner side of
 * a join whose outer side is empty, a subplan never evaluated) costs
 * nothing visible: its errors are never raised (afdw_read_request), and at its
 * end it is cancelled rather than waited for (afdw_finish_request).
 */
static void
start_pending_scans(EState *estate)
{
	dlist_mutable_iter it;
	dlist_iter	it2;
	AfdwConn  **volatile conns = NULL;
	Oid		   *volatile relids = NULL;
	int			n = 0;
	int			max = 0;

	ready_connections(estate);

	/*
	 * Snapshots first: a connection joining a remote transaction that an
	 * earlier statement opened on another connection imports its snapshot,
	 * which that connection exports while it is still free.
	 */
	dlist_foreach(it2, &pending_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, pending_node, it2.cur);

		if (other->estate == estate)
			afdw_prepare_snapshot(other->conn);
	}

	combine_pending_scans(estate);

	/*
	 * The servers that take their snapshots now take them together, under
	 * the commit fence when there are several (visibility.c).
	 */
	dlist_foreach(it2, &pending_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, pending_node, it2.cur);

		if (!afdw_fence_active())
			break;
		if (other->estate != estate || other->absorbed)
			continue;
		if (n == max)
		{
			max = Max(16, max * 2);
			conns = (conns == NULL) ? palloc(sizeof(AfdwConn *) * max) :
				repalloc(conns, sizeof(AfdwConn *) * max);
			relids = (relids == NULL) ? palloc(sizeof(Oid) * max) :
				repalloc(relids, sizeof(Oid) * max);
		}
		relids[n] = scan_relid(other);
		conns[n++] = other->conn;
	}
	PG_TRY();
	{
		afdw_visibility_begin(conns, relids, n, !afdw_is_client_statement(estate));
		dlist_foreach_modify(it, &pending_scans)
		{
			AfdwScanState *other = dlist_container(AfdwScanState, pending_node, it.cur);

			if (other->estate != estate)
				continue;
			if (other->absorbed)
			{
				/* Its rows come with a sibling's: it returns none. */
				afdw_set_phase(other, PHASE_DONE);
				continue;
			}
			afdw_set_phase(other, PHASE_UNSENT);
			if (other->nparams == 0 && other->nkey_uses == 0 &&
				!afdw_is_busy(other->conn))
				afdw_send_start(other);
		}
		afdw_visibility_end(conns, n);
	}
	PG_FINALLY();
	{
		afdw_visibility_abort();
	}
	PG_END_TRY();
	if (conns != NULL)
	{
		pfree(conns);
		pfree(relids);
	}
}

/*
 * sibling_owns_connection
 *		Whether the command in flight on ST's connection belongs to another
 *		scan that waits on the same asynchronous Append: that scan waits on
 *		the socket, and ST must not take the connection over (the socket
 *		would be waited on twice, and the sibling read here, synchronously).
 */
static bool
sibling_owns_connection(AfdwScanState *st)
{
	void	   *owner = afdw_conn_owner(st->conn);
	AppendState *append;

	if (owner == NULL || owner == st || st->areq == NULL ||
		!IsA(st->areq->requestor, AppendState))
		return false;

	/*
	 * The owner need not be a scan: a write streaming on the writer
	 * (modify_rows.c) is one too.  So look for it among the siblings.
	 */
	append = (AppendState *) st->areq->requestor;
	for (int i = 0; i < append->as_nplans; i++)
	{
		AsyncRequest *areq = append->as_asyncrequests[i];

		if (areq != NULL && IsA(areq->requestee, ForeignScanState) &&
			((ForeignScanState *) areq->requestee)->fdw_state == owner)
			return areq->callback_pending;
	}
	return false;
}

/*
 * next_batch
 *		Make a batch with rows to use current: BATCH_READY when there is
 *		one, BATCH_END when the rows are all used, BATCH_NOT_READY when
 *		BLOCK is false and the rows have not arrived yet.
 *
 * Not inlined: afdwIterateForeignScan, which calls it once per batch, then
 * needs no stack frame for its rows.
 */
static pg_noinline AfdwBatchResult
next_batch(AfdwScanState *st, bool block)
{
	AfdwBatchResult result;
	ErrorContextCallback errcb;
	instr_time	waited = afdw_wait_time;

	errcb.callback = afdw_scan_error_context;
	errcb.arg = st;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	for (;;)
	{
		if (st->next_tuple < st->ntuples)
		{
			result = BATCH_READY;
			goto out;
		}

		/* The batch is used up: the phase says where the next one is. */
		switch (st->phase)
		{
			case PHASE_COPYING:
				if (!afdw_take_stream_batch(st, block))
					goto not_ready;
				/* The stream is over: a sibling waiting for the connection starts. */
				if (st->phase == PHASE_DONE)
					afdw_hand_over(st);
				continue;
			case PHASE_SPILLED:
				afdw_take_spill_batch(st);
				continue;
			case PHASE_IN_FLIGHT:
			case PHASE_STREAM_FAILED:
				if (st->qcount > 0)
					afdw_take_batch(st);
				else if (!afdw_read_request(st, block))
					goto not_ready;
				continue;
			case PHASE_DONE:
				if (st->qcount > 0)
					afdw_take_batch(st);
				else if (st->held_error != NULL)
					afdw_raise_held_error(st);
				else
				{
					result = BATCH_END;
					goto out;
				}
				continue;
			case PHASE_OPEN:
			case PHASE_OVERFLOW:
				if (st->qcount > 0)
				{
					afdw_take_batch(st);
					continue;
				}
				break;			/* a command to send */
			case PHASE_QUEUED:
				/* afdw_hand_over starts its stream when the sibling's ends. */
				if (block)
					elog(ERROR, "scan of \"%s\" waits for a sibling's stream but was read synchronously",
						 RelationGetRelationName(st->rel));
				goto not_ready;
			case PHASE_PENDING:
			case PHASE_UNSENT:
				Assert(st->qcount == 0);
				if (st->nkey_uses > 0 && !st->keys_taken)
					take_keys(st);
				start_pending_scans(st->estate);
				if (st->phase != PHASE_UNSENT)
					continue;	/* sent with the others */
				if (afdw_sibling_streaming(st))
				{
					afdw_set_phase(st, PHASE_QUEUED);
					continue;
				}
				break;			/* a command to send */
		}

		if (!block && sibling_owns_connection(st))
		{
			/* The sibling's event comes first; the next wait sends. */
			st->conn_wait = true;
			goto not_ready;
		}
		if (st->phase == PHASE_OPEN)
			afdw_send_fetch(st);
		else
		{
			/* More rows than a lookup: run it again with a cursor. */
			if (st->phase == PHASE_OVERFLOW)
			{
				st->may_prepare = false;
				st->one_shot = false;
			}
			afdw_send_start(st);
		}
	}

not_ready:
	result = BATCH_NOT_READY;
out:
	add_wait_since(st, &waited);
	error_context_stack = errcb.previous;
	return result;
}

/*
 * afdwIterateForeignScan
 *		The next row, waiting for it unless an asynchronous request asked
 *		not to.
 *
 * A row of the current batch, the common case, goes to afdw_store_row as
 * the last thing done here, so that the call costs no more than the jump
 * to it.
 */
static TupleTableSlot *
afdwIterateForeignScan(ForeignScanState *node)
{
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;

	/*
	 * A scan prepared only when read (afdwBeginForeignScan), in the
	 * query's memory: the caller's may be a row's, reset before the scan's
	 * next row.
	 */
	if (unlikely(st == NULL))
	{
		MemoryContext old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);

		begin_scan(node);
		MemoryContextSwitchTo(old);
		st = (AfdwScanState *) node->fdw_state;
	}
	st->demanded = true;
	st->conn_wait = false;
	if (unlikely(st->next_tuple >= st->ntuples))
	{
		switch (next_batch(st, !st->nowait))
		{
			case BATCH_READY:
				break;
			case BATCH_END:
				return ExecClearTuple(slot);
			case BATCH_NOT_READY:
				st->not_ready = true;
				return ExecClearTuple(slot);
		}
	}
	return afdw_store_row(st, slot);
}

/*
 * may_rewind
 *		Whether a rescan of ST with the same parameters may read its first
 *		batch again rather than run its query again: the batch in hand is
 *		the query's first, and its rows are intact.
 *
 * The rows of a FETCH or EXECUTE result stay as they came, and the
 * batches queued or asked for behind it are the ones that follow it, so
 * such a first batch is read again whatever the cursor is doing: a scan
 * rescanned after a few rows of a large result (a correlated EXISTS, a
 * nested loop that stops early) costs no round trip.  A stream's lines
 * are split in place unless the stream had ended within its first batch
 * (afdw_store_row).  Not a query whose rows an error cut short, nor one
 * that took a hash join's keys (the join's inner side, and so the keys,
 * may be read anew), nor an EXECUTE that overflowed its LIMIT or a
 * query sent with the COMMIT that has more rows, which both run again by
 * cursor.  The remote snapshot does not change within the transaction:
 * the rows are those a new run would return.
 */
static bool
may_rewind(AfdwScanState *st)
{
	if (st->nbatches != 1 || st->held_error != NULL || st->sql != st->plain_sql)
		return false;
	if (st->phase == PHASE_DONE)
		return true;
	if (afdw_is_stream(st) || st->one_shot)
		return false;
	return st->phase == PHASE_OPEN || st->phase == PHASE_IN_FLIGHT;
}

/*
 * afdwReScanForeignScan
 *		Start the scan over.
 *
 * With the same parameters and the first batch in hand, that batch is
 * read again (may_rewind); otherwise a new cursor is declared at the next
 * fetch.  The remote snapshot does not change within the transaction, so
 * the rows are the same.
 */
static void
afdwReScanForeignScan(ForeignScanState *node)
{
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;
	instr_time	waited;

	/* Not prepared (afdwBeginForeignScan): nothing to start over. */
	if (st == NULL)
		return;
	/* It never started: it starts over like the others. */
	if (st->phase == PHASE_QUEUED)
		afdw_set_phase(st, PHASE_UNSENT);
	st->conn_wait = false;

	if (node->ss.ps.chgParam == NULL && may_rewind(st))
	{
		/* Convert the rows again: the values of the first pass go. */
		ExecClearTuple(node->ss.ss_ScanTupleSlot);
		MemoryContextReset(st->row_cxt);
		st->next_tuple = 0;
		return;
	}

	/*
	 * Keys are asked for again: the join's inner side may be read anew.
	 * A query that carried its siblings', or that a sibling's carried,
	 * runs as its own.
	 */
	st->keys_taken = false;
	st->carrying = 0;
	st->absorbed = false;
	if (st->sql != st->plain_sql)
		pfree(st->sql);
	st->sql = st->plain_sql;
	st->nparams = st->plain_nparams;

	/* Runs after the first stay in the remote transaction. */
	st->one_shot = false;
	waited = afdw_wait_time;
	afdw_finish_request(st);
	add_wait_since(st, &waited);
	if (!afdw_query_sent(st))
		return;

	afdw_close_cursor(st);
	afdw_drop_batch(st);
}

/*
 * afdwEndForeignScan
 *		Leave the cursor to be closed by the connection's next command or
 *		by the end of the transaction, and give the connection back.
 */
static void
afdwEndForeignScan(ForeignScanState *node)
{
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;

	if (st == NULL)
		return;

	if (st->phase == PHASE_PENDING || st->phase == PHASE_QUEUED)
		afdw_set_phase(st, PHASE_UNSENT);
	afdw_finish_request(st);
	afdw_close_cursor(st);
	stop_timing(st);

	if (st->active)
	{
		dlist_delete(&st->active_node);
		st->active = false;
	}
	afdw_release_connection(st->conn);
	st->released = true;
	if (st->computed)
		table_close(st->rel, NoLock);
}

/*
 * afdwRecheckForeignScan
 *		Whether the row under test still passes the scan, when the executor
 *		rechecks a row (EvalPlanQual); store it into SLOT.
 *
 * A scan of one table gets the rechecked row from the executor, and its
 * remote conditions are checked again as fdw_recheck_quals.  A remote
 * join makes its row again from the rechecked rows of its tables, by its
 * local join plan (join_paths.c), which returns the scan's columns.
 */
static bool
afdwRecheckForeignScan(ForeignScanState *node, TupleTableSlot *slot)
{
	PlanState  *outer = outerPlanState(node);
	TupleTableSlot *result;

	if (((Scan *) node->ss.ps.plan)->scanrelid > 0 || outer == NULL)
		return true;
	result = ExecProcNode(outer);
	if (TupIsNull(result))
		return false;
	ExecCopySlot(slot, result);
	return true;
}

/*
 * afdwIsForeignPathAsyncCapable
 *		Whether the scan may run asynchronously under an Append: the
 *		async_capable option of the table, else of the server (default on),
 *		in a backend under a postmaster.
 */
static bool
afdwIsForeignPathAsyncCapable(ForeignPath *path)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) path->path.parent->fdw_private;

	/*
	 * PostgreSQL 15's Append waits for its asynchronous children with a
	 * postmaster-death event, which a single-user backend cannot watch
	 * (epoll_ctl fails): there, scans run one after the other.
	 */
	if (!IsUnderPostmaster)
		return false;
	return fp->async_capable;
}

/*
 * afdwForeignAsyncRequest
 *		Give the Append a row if one is at hand; otherwise make sure one is
 *		on its way and say so.
 */
static void
afdwForeignAsyncRequest(AsyncRequest *areq)
{
	ForeignScanState *node = (ForeignScanState *) areq->requestee;
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;
	TupleTableSlot *slot;

	st->areq = areq;
	st->wait_sock = PGINVALID_SOCKET;

	/*
	 * Run the node itself (its quals and projection) without the
	 * instrumentation wrapper, which the async machinery provides.  No
	 * PG_TRY is needed to clear the flag: an error here ends the executor
	 * state the scan belongs to, and a sigsetjmp per row costs.
	 */
	st->nowait = true;
	st->not_ready = false;
	slot = node->ss.ps.ExecProcNodeReal(&node->ss.ps);
	st->nowait = false;

	if (!TupIsNull(slot))
		ExecAsyncRequestDone(areq, slot);
	else if (st->not_ready)
		ExecAsyncRequestPending(areq);
	else
		ExecAsyncRequestDone(areq, NULL);
}

/*
 * forget_waits
 *		ST is being configured for a new wait: the socket it added to an
 *		earlier wait set is not in this one.  With ALL (the wait set holds
 *		no socket yet: a new wait begins), neither are its siblings'.
 */
static void
forget_waits(AfdwScanState *st, bool all)
{
	dlist_iter	it;

	st->wait_sock = PGINVALID_SOCKET;
	if (!all)
		return;
	afdw_forget_wake(((AppendState *) st->areq->requestor)->as_eventset);
	dlist_foreach(it, &afdw_active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other->areq != NULL && other->areq->requestor == st->areq->requestor)
			other->wait_sock = PGINVALID_SOCKET;
	}
}

/*
 * socket_in_wait
 *		Whether a sibling of ST under the same Append, still waiting, added
 *		SOCK to the Append's wait set.  A sibling takes the connection over
 *		only when its owner does not wait (sibling_owns_connection), but a
 *		scan of another plan node (a subplan evaluated in a sibling's
 *		filter) may take it meanwhile, and then a third sibling finds it
 *		free: the socket is then in the wait set already, and its event
 *		reaches the sibling, after which the next wait serves ST.
 */
static bool
socket_in_wait(AfdwScanState *st, pgsocket sock)
{
	dlist_iter	it;

	dlist_foreach(it, &afdw_active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other != st && other->wait_sock == sock && other->areq != NULL &&
			other->areq->requestor == st->areq->requestor &&
			other->areq->callback_pending)
			return true;
	}
	return false;
}

/*
 * configure_wait
 *		Wait on the connection's socket for the rows in flight.
 *
 * When another scan sharing the connection has already read them (it
 * needed the connection), the request is completed here instead, as no
 * event would come for it.
 */
static void
configure_wait(AsyncRequest *areq)
{
	AfdwScanState *st = (AfdwScanState *) ((ForeignScanState *) areq->requestee)->fdw_state;
	WaitEventSet *set = ((AppendState *) areq->requestor)->as_eventset;
	pgsocket	sock;

	st->areq = areq;
	forget_waits(st, GetNumRegisteredWaitEvents(set) <= 1);

	/*
	 * Waiting for a sibling's stream to end, or for a sibling's command to
	 * free the connection: the sibling waits on the socket (a socket can be
	 * waited on once), and this scan goes on when the sibling's event has
	 * been served.
	 */
	if (st->phase == PHASE_QUEUED ||
		(st->conn_wait && sibling_owns_connection(st)))
	{
		areq->callback_pending = true;
		return;
	}

	/*
	 * Rows of a stream, or results that a connection joining the remote
	 * transaction read ahead to get at its snapshot, may wait in libpq's
	 * buffer, unseen by the socket.
	 */
	if ((st->phase != PHASE_IN_FLIGHT && st->phase != PHASE_STREAM_FAILED) ||
		(afdw_is_owner(st->conn, st) && afdw_result_ready(st->conn)))
	{
		areq->callback_pending = false;
		afdwForeignAsyncRequest(areq);
		if (areq->request_complete)
		{
			/* No notification will count this row: count it here. */
			if (areq->requestee->instrument)
				InstrUpdateTupleCount(areq->requestee->instrument,
									  TupIsNull(areq->result) ? 0.0 : 1.0);
			ExecAsyncResponse(areq);
			return;
		}
		if (st->phase == PHASE_QUEUED || st->conn_wait)
		{
			areq->callback_pending = true;
			return;
		}
	}

	Assert(afdw_in_flight(st));
	areq->callback_pending = true;
	sock = afdw_socket(st->conn);
	if (socket_in_wait(st, sock))
		return;
	AddWaitEventToSet(set, WL_SOCKET_READABLE, sock, NULL, areq);
	st->wait_sock = sock;
}

/*
 * note_pending
 *		The Append is about to wait, for ST's data if PENDING.  A wait that
 *		ended without serving ST (another scan's data came) counted for ST
 *		until the last scan was served after it.
 */
static void
note_pending(AfdwScanState *st, bool pending)
{
	if (!INSTR_TIME_IS_ZERO(st->stats.pending_since))
	{
		instr_time	waited = last_notify;

		INSTR_TIME_SUBTRACT(waited, st->stats.pending_since);
		if (INSTR_TIME_GET_DOUBLE(waited) > 0)
			INSTR_TIME_ADD(st->stats.wait, waited);
	}
	if (pending)
		INSTR_TIME_SET_CURRENT(st->stats.pending_since);
	else
		INSTR_TIME_SET_ZERO(st->stats.pending_since);
}

/*
 * afdwForeignAsyncConfigureWait
 *		configure_wait, and the latch set again if the Append's wait must
 *		end at once (afdw_wake_append).
 */
static void
afdwForeignAsyncConfigureWait(AsyncRequest *areq)
{
	AfdwScanState *st = (AfdwScanState *) ((ForeignScanState *) areq->requestee)->fdw_state;

	configure_wait(areq);
	if (st->stats.timed)
		note_pending(st, areq->callback_pending);
	afdw_wake_again(((AppendState *) areq->requestor)->as_eventset);
}

/*
 * afdwForeignAsyncNotify
 *		Data arrived on the connection: hand over a row if it is complete.
 */
static void
afdwForeignAsyncNotify(AsyncRequest *areq)
{
	AfdwScanState *st = (AfdwScanState *) ((ForeignScanState *) areq->requestee)->fdw_state;

	/* The Append's wait is over for this scan: count it (see note_pending). */
	if (st->stats.timed)
	{
		INSTR_TIME_SET_CURRENT(last_notify);
		if (!INSTR_TIME_IS_ZERO(st->stats.pending_since))
		{
			INSTR_TIME_ACCUM_DIFF(st->stats.wait, last_notify,
								  st->stats.pending_since);
			INSTR_TIME_SET_ZERO(st->stats.pending_since);
		}
	}
	afdwForeignAsyncRequest(areq);
}

/*
 * afdw_scan_routines
 *		Fill in the scan callbacks of ROUTINE.
 */
void
afdw_scan_routines(FdwRoutine *routine)
{
	routine->BeginForeignScan = afdwBeginForeignScan;
	routine->IterateForeignScan = afdwIterateForeignScan;
	routine->ReScanForeignScan = afdwReScanForeignScan;
	routine->EndForeignScan = afdwEndForeignScan;
	routine->RecheckForeignScan = afdwRecheckForeignScan;
	routine->ExplainForeignScan = afdwExplainForeignScan;
	routine->IsForeignPathAsyncCapable = afdwIsForeignPathAsyncCapable;
	routine->ForeignAsyncRequest = afdwForeignAsyncRequest;
	routine->ForeignAsyncConfigureWait = afdwForeignAsyncConfigureWait;
	routine->ForeignAsyncNotify = afdwForeignAsyncNotify;
}
