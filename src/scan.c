/*-------------------------------------------------------------------------
 *
 * scan.c
 *		Executor callbacks of async_fdw's scans, and ANALYZE.
 *
 * A scan reads its remote SELECT through a cursor, fetch_size rows at a
 * time, and turns each remote row into a local tuple with the local
 * types' input functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "commands/explain.h"
#include "commands/vacuum.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sampling.h"

#include "async_fdw.h"

/* State of one foreign scan, in ForeignScanState->fdw_state. */
typedef struct AfdwScanState
{
	Relation	rel;
	AttInMetadata *attinmeta;
	char	   *sql;			/* remote SELECT */
	List	   *retrieved_attrs;	/* local column numbers of its columns */
	int			fetch_size;

	AfdwConn   *conn;
	unsigned int cursor_number;
	bool		cursor_open;

	/* Parameters: expressions and their output functions. */
	int			nparams;
	List	   *param_exprs;	/* ExprStates */
	FmgrInfo   *param_flinfo;
	const char **param_values;

	/* The current batch. */
	HeapTuple  *tuples;
	int			ntuples;
	int			next_tuple;
	int			nbatches;		/* batches fetched since the cursor opened */
	bool		eof;

	MemoryContext batch_cxt;	/* the tuples of the current batch */
	MemoryContext row_cxt;		/* per-row garbage of input functions */
} AfdwScanState;

/* Where a conversion error happened, for its context line. */
typedef struct ConversionPosition
{
	Relation	rel;
	AttrNumber	attnum;			/* 0 while not in a column */
} ConversionPosition;

/*
 * conversion_error_context
 *		Name the foreign table and column whose remote value did not convert.
 */
static void
conversion_error_context(void *arg)
{
	ConversionPosition *pos = (ConversionPosition *) arg;

	if (pos->attnum > 0)
		errcontext("column \"%s\" of foreign table \"%s\"",
				   NameStr(TupleDescAttr(RelationGetDescr(pos->rel),
										 pos->attnum - 1)->attname),
				   RelationGetRelationName(pos->rel));
}

/*
 * scan_error_context
 *		Name the foreign table whose scan failed.
 */
static void
scan_error_context(void *arg)
{
	errcontext("scan of foreign table \"%s\"",
			   RelationGetRelationName((Relation) arg));
}

/*
 * make_tuple
 *		A local tuple from row ROW of RES, built in CXT.
 *
 * Columns not retrieved are NULL.  ROW_CXT holds the garbage of the input
 * functions and is reset afterwards.
 */
static HeapTuple
make_tuple(PGresult *res, int row, Relation rel, AttInMetadata *attinmeta,
		   List *retrieved_attrs, MemoryContext cxt, MemoryContext row_cxt)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	Datum	   *values;
	bool	   *nulls;
	ConversionPosition pos;
	ErrorContextCallback errcb;
	MemoryContext oldcxt;
	HeapTuple	tuple;
	ListCell   *lc;
	int			col = 0;

	/* With no column needed the remote SELECT list is a lone NULL. */
	if (list_length(retrieved_attrs) != PQnfields(res) &&
		!(retrieved_attrs == NIL && PQnfields(res) == 1))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("remote query of foreign table \"%s\" returned %d columns, expected %d",
						RelationGetRelationName(rel), PQnfields(res),
						list_length(retrieved_attrs))));

	oldcxt = MemoryContextSwitchTo(row_cxt);
	values = palloc0(sizeof(Datum) * tupdesc->natts);
	nulls = palloc(sizeof(bool) * tupdesc->natts);
	memset(nulls, true, sizeof(bool) * tupdesc->natts);

	pos.rel = rel;
	pos.attnum = 0;
	errcb.callback = conversion_error_context;
	errcb.arg = &pos;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	foreach(lc, retrieved_attrs)
	{
		int			attnum = lfirst_int(lc);
		char	   *value = PQgetisnull(res, row, col) ? NULL :
			PQgetvalue(res, row, col);

		pos.attnum = attnum;
		values[attnum - 1] = InputFunctionCall(&attinmeta->attinfuncs[attnum - 1],
											   value,
											   attinmeta->attioparams[attnum - 1],
											   attinmeta->atttypmods[attnum - 1]);
		nulls[attnum - 1] = (value == NULL);
		col++;
	}

	error_context_stack = errcb.previous;

	MemoryContextSwitchTo(cxt);
	tuple = heap_form_tuple(tupdesc, values, nulls);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(row_cxt);

	return tuple;
}

/*
 * scan_user
 *		The user mapping a scan of a relation in PLAN runs under.
 */
static UserMapping *
scan_user(ForeignScan *plan, EState *estate, Relation rel)
{
	Oid			userid;
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));

#if PG_VERSION_NUM >= 160000
	userid = OidIsValid(plan->checkAsUser) ? plan->checkAsUser : GetUserId();
#else
	RangeTblEntry *rte = exec_rt_fetch(plan->scan.scanrelid, estate);

	userid = OidIsValid(rte->checkAsUser) ? rte->checkAsUser : GetUserId();
#endif
	return GetUserMapping(userid, table->serverid);
}

/*
 * afdwBeginForeignScan
 *		Connect and prepare the scan; nothing is sent yet.
 */
static void
afdwBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	AfdwScanState *st;
	ListCell   *lc;
	int			i = 0;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	st = palloc0(sizeof(AfdwScanState));
	node->fdw_state = st;

	st->rel = node->ss.ss_currentRelation;
	st->attinmeta = TupleDescGetAttInMetadata(RelationGetDescr(st->rel));
	afdw_scan_private(plan, &st->sql, &st->retrieved_attrs, &st->fetch_size);

	st->conn = afdw_get_connection(scan_user(plan, estate, st->rel));

	st->batch_cxt = AllocSetContextCreate(estate->es_query_cxt,
										  "async_fdw batch",
										  ALLOCSET_DEFAULT_SIZES);
	st->row_cxt = AllocSetContextCreate(estate->es_query_cxt,
										"async_fdw row",
										ALLOCSET_SMALL_SIZES);

	st->nparams = list_length(plan->fdw_exprs);
	if (st->nparams > 0)
	{
		st->param_exprs = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
		st->param_flinfo = palloc0(sizeof(FmgrInfo) * st->nparams);
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
 * compute_params
 *		Evaluate the scan's parameters as text, as the remote side reads it.
 */
static void
compute_params(ForeignScanState *node, AfdwScanState *st)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	MemoryContext oldcxt;
	ListCell   *lc;
	int			nestlevel;
	int			i = 0;

	/* The values live until the next batch. */
	MemoryContextReset(st->batch_cxt);
	oldcxt = MemoryContextSwitchTo(st->batch_cxt);
	nestlevel = afdw_set_transmission_modes();
	foreach(lc, st->param_exprs)
	{
		ExprState  *expr = (ExprState *) lfirst(lc);
		bool		isnull;
		Datum		value = ExecEvalExpr(expr, econtext, &isnull);

		st->param_values[i] = isnull ? NULL :
			OutputFunctionCall(&st->param_flinfo[i], value);
		i++;
	}
	afdw_reset_transmission_modes(nestlevel);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * open_cursor
 *		Declare the remote cursor of the scan.
 */
static void
open_cursor(ForeignScanState *node, AfdwScanState *st)
{
	char	   *sql;

	if (st->nparams > 0)
		compute_params(node, st);

	st->cursor_number = afdw_next_cursor_number(st->conn);
	sql = psprintf("DECLARE c%u CURSOR FOR %s", st->cursor_number, st->sql);
	PQclear(afdw_run_query(st->conn, sql, st->nparams,
						   (const char *const *) st->param_values));
	pfree(sql);

	st->cursor_open = true;
	st->ntuples = 0;
	st->next_tuple = 0;
	st->nbatches = 0;
	st->eof = false;
}

/*
 * fetch_batch
 *		Fetch the next fetch_size rows into the batch.
 */
static void
fetch_batch(AfdwScanState *st)
{
	char		sql[64];
	PGresult   *volatile res;

	MemoryContextReset(st->batch_cxt);
	st->tuples = NULL;
	st->ntuples = 0;
	st->next_tuple = 0;

	snprintf(sql, sizeof(sql), "FETCH %d FROM c%u", st->fetch_size, st->cursor_number);
	res = afdw_run_query(st->conn, sql, 0, NULL);

	PG_TRY();
	{
		int			n = PQntuples(res);

		st->tuples = MemoryContextAlloc(st->batch_cxt, sizeof(HeapTuple) * Max(n, 1));
		for (int i = 0; i < n; i++)
			st->tuples[i] = make_tuple(res, i, st->rel, st->attinmeta,
									   st->retrieved_attrs, st->batch_cxt,
									   st->row_cxt);
		st->ntuples = n;
		st->eof = (n < st->fetch_size);
		st->nbatches++;
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
}

/*
 * close_cursor
 *		Close the scan's remote cursor.
 */
static void
close_cursor(AfdwScanState *st)
{
	char		sql[64];

	snprintf(sql, sizeof(sql), "CLOSE c%u", st->cursor_number);
	st->cursor_open = false;
	afdw_run_command(st->conn, sql);
}

/*
 * afdwIterateForeignScan
 *		The next row, fetching a batch when the current one is used up.
 */
static TupleTableSlot *
afdwIterateForeignScan(ForeignScanState *node)
{
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	ErrorContextCallback errcb;

	if (st->next_tuple >= st->ntuples && (!st->cursor_open || !st->eof))
	{
		errcb.callback = scan_error_context;
		errcb.arg = st->rel;
		errcb.previous = error_context_stack;
		error_context_stack = &errcb;

		if (!st->cursor_open)
			open_cursor(node, st);
		fetch_batch(st);

		error_context_stack = errcb.previous;
	}

	if (st->next_tuple >= st->ntuples)
		return ExecClearTuple(slot);

	ExecStoreHeapTuple(st->tuples[st->next_tuple++], slot, false);
	return slot;
}

/*
 * afdwReScanForeignScan
 *		Start the scan over.
 *
 * With the same parameters and every row already in memory, the batch is
 * read again; otherwise the cursor is declared anew.  The remote snapshot
 * does not change within the transaction, so the rows are the same.
 */
static void
afdwReScanForeignScan(ForeignScanState *node)
{
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;

	if (!st->cursor_open)
		return;

	if (node->ss.ps.chgParam == NULL && st->eof && st->nbatches == 1)
	{
		st->next_tuple = 0;
		return;
	}

	close_cursor(st);
	st->ntuples = 0;
	st->next_tuple = 0;
	st->eof = false;
}

/*
 * afdwEndForeignScan
 *		Close the cursor.  Memory goes with the query's context.
 */
static void
afdwEndForeignScan(ForeignScanState *node)
{
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;

	if (st == NULL)
		return;
	if (st->cursor_open)
		close_cursor(st);
}

/*
 * afdwExplainForeignScan
 *		Show the remote SQL in EXPLAIN VERBOSE.
 */
static void
afdwExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	char	   *sql;
	List	   *retrieved_attrs;
	int			fetch_size;

	if (!es->verbose)
		return;
	afdw_scan_private((ForeignScan *) node->ss.ps.plan, &sql, &retrieved_attrs,
					  &fetch_size);
	ExplainPropertyText("Remote SQL", sql, es);
}

/* State of ANALYZE's reservoir sampling. */
typedef struct Sampler
{
	Relation	rel;
	AttInMetadata *attinmeta;
	List	   *retrieved_attrs;
	MemoryContext anl_cxt;		/* where sampled rows live */
	MemoryContext row_cxt;
	ReservoirStateData rstate;
	int			targrows;
	double		seen;			/* rows read so far */
	double		skip;			/* rows to pass over before the next pick */
} Sampler;

/*
 * sample_batch
 *		Offer the rows of RES to the sample ROWS (*NUMROWS long); return how
 *		many rows RES had.  RES is freed.
 */
static int
sample_batch(PGresult *res, Sampler *s, HeapTuple *rows, int *numrows)
{
	int			n = PQntuples(res);

	PG_TRY();
	{
		for (int i = 0; i < n; i++)
		{
			int			slot = -1;

			s->seen += 1;
			if (*numrows < s->targrows)
				slot = (*numrows)++;
			else
			{
				if (s->skip < 0)
					s->skip = reservoir_get_next_S(&s->rstate, s->seen, s->targrows);
				if (s->skip <= 0)
				{
					slot = (int) (s->targrows * sampler_random_fract(&s->rstate.randstate));
					heap_freetuple(rows[slot]);
				}
				s->skip -= 1;
			}
			if (slot >= 0)
				rows[slot] = make_tuple(res, i, s->rel, s->attinmeta,
										s->retrieved_attrs, s->anl_cxt, s->row_cxt);
		}
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();

	return n;
}

/*
 * acquire_sample_rows
 *		Read every remote row of REL and keep a random sample of TARGROWS
 *		of them in ROWS (Vitter's reservoir algorithm); ANALYZE's callback.
 */
static int
acquire_sample_rows(Relation rel, int elevel, HeapTuple *rows, int targrows,
					double *totalrows, double *totaldeadrows)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	ForeignServer *server = GetForeignServer(table->serverid);
	UserMapping *user = GetUserMapping(rel->rd_rel->relowner, table->serverid);
	AfdwConn   *conn = afdw_get_connection(user);
	Sampler		sampler;
	StringInfoData sql;
	unsigned int cursor = afdw_next_cursor_number(conn);
	int			fetch_size;
	int			numrows = 0;
	char		fetch[64];
	bool		done = false;

	fetch_size = afdw_fetch_size_option(server->options, AFDW_DEFAULT_FETCH_SIZE);
	fetch_size = afdw_fetch_size_option(table->options, fetch_size);

	sampler.rel = rel;
	sampler.attinmeta = TupleDescGetAttInMetadata(RelationGetDescr(rel));
	sampler.anl_cxt = CurrentMemoryContext;
	sampler.row_cxt = AllocSetContextCreate(CurrentMemoryContext,
											"async_fdw analyze row",
											ALLOCSET_SMALL_SIZES);
	sampler.targrows = targrows;
	sampler.seen = 0;
	sampler.skip = -1;
	reservoir_init_selection_state(&sampler.rstate, targrows);

	initStringInfo(&sql);
	appendStringInfo(&sql, "DECLARE c%u CURSOR FOR ", cursor);
	afdw_deparse_analyze(&sql, rel, &sampler.retrieved_attrs);
	afdw_run_command(conn, sql.data);

	snprintf(fetch, sizeof(fetch), "FETCH %d FROM c%u", fetch_size, cursor);
	while (!done)
	{
		vacuum_delay_point();
		done = sample_batch(afdw_run_query(conn, fetch, 0, NULL), &sampler,
							rows, &numrows) < fetch_size;
	}

	snprintf(fetch, sizeof(fetch), "CLOSE c%u", cursor);
	afdw_run_command(conn, fetch);
	MemoryContextDelete(sampler.row_cxt);

	*totalrows = sampler.seen;
	*totaldeadrows = 0;
	ereport(elevel,
			(errmsg("\"%s\": foreign table contains %.0f rows, %d rows in sample",
					RelationGetRelationName(rel), sampler.seen, numrows)));
	return numrows;
}

/*
 * afdwAnalyzeForeignTable
 *		Offer acquire_sample_rows to ANALYZE, with the remote table's size
 *		in pages.
 */
static bool
afdwAnalyzeForeignTable(Relation rel, AcquireSampleRowsFunc *func,
						BlockNumber *totalpages)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	UserMapping *user = GetUserMapping(rel->rd_rel->relowner, table->serverid);
	AfdwConn   *conn = afdw_get_connection(user);
	StringInfoData name;
	StringInfoData sql;
	PGresult   *volatile res;

	initStringInfo(&name);
	afdw_deparse_relation(&name, rel);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT pg_catalog.pg_relation_size(");
	appendStringInfoString(&sql, quote_literal_cstr(name.data));
	appendStringInfoString(&sql, "::pg_catalog.regclass)");

	res = afdw_run_query(conn, sql.data, 0, NULL);
	PG_TRY();
	{
		double		bytes = 0;

		if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
			bytes = strtod(PQgetvalue(res, 0, 0), NULL);
		*totalpages = (BlockNumber) Max(1, bytes / BLCKSZ);
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();

	*func = acquire_sample_rows;
	return true;
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
	routine->ExplainForeignScan = afdwExplainForeignScan;
	routine->AnalyzeForeignTable = afdwAnalyzeForeignTable;
}
