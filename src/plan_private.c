/*-------------------------------------------------------------------------
 *
 * plan_private.c
 *		The private list of a ForeignScan plan: what the planner hands the
 *		execution.
 *
 * The planner (path.c, join.c, upper.c, ordered.c) writes it, the
 * execution (scan.c, explain.c) reads it, through the functions here
 * only.  A List, so that copyObject copies plans.  Bottom layer: calls
 * nothing of the project.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"

#include "async_fdw.h"

/*
 * Indexes of the items of ForeignScan->fdw_private.  It is a List so that
 * copyObject can copy plans.
 */
enum AfdwScanPrivate
{
	AFDW_PRIVATE_SQL,			/* String: the remote SELECT */
	AFDW_PRIVATE_RETRIEVED,		/* List of Integer: local column numbers */
	AFDW_PRIVATE_FETCH_SIZE,	/* Integer: rows per FETCH */
	AFDW_PRIVATE_STREAM,		/* Boolean: stream with COPY */
	AFDW_PRIVATE_OUTER_ORDER,	/* String: ORDER BY of a binary stream's
								 * wrapper ("" for none) */
	AFDW_PRIVATE_RELATIONS,		/* String: what a remote join or aggregate
								 * reads, for EXPLAIN ("" for a scan) */
	AFDW_PRIVATE_RECHECK_ONLY,	/* Boolean: a scan of the local join plan
								 * of a remote join, run only to recheck a
								 * row (afdw_mark_recheck_only) */
	AFDW_PRIVATE_OWN_LIMIT		/* Integer, present only when the remote
								 * SELECT has the query's LIMIT (ordered.c,
								 * afdw_add_final_path): the most rows it
								 * returns, or -1 when not known */
};

/*
 * afdw_make_scan_private
 *		The fdw_private list of a ForeignScan (see AfdwScanPrivate).
 */
List *
afdw_make_scan_private(const char *sql, List *retrieved_attrs, int fetch_size,
					   bool stream, const char *outer_order,
					   const char *relations)
{
	List	   *private = list_make5(makeString(pstrdup(sql)), retrieved_attrs,
									 makeInteger(fetch_size), makeBoolean(stream),
									 makeString(pstrdup(outer_order)));

	private = lappend(private, makeString(pstrdup(relations)));
	return lappend(private, makeBoolean(false));
}

/*
 * afdw_mark_own_limit
 *		Note in SCAN's fdw_private that its remote SELECT ends with the
 *		LIMIT and OFFSET of ROOT's query, and how many rows that lets it
 *		return at most, when both are constants: no other LIMIT may be
 *		appended to it (a prepared statement's, fetch.c).
 */
void
afdw_mark_own_limit(PlannerInfo *root, ForeignScan *scan)
{
	Const	   *count = (Const *) root->parse->limitCount;
	Const	   *offset = (Const *) root->parse->limitOffset;
	int64		bound = -1;

	if (count != NULL && IsA(count, Const) && !count->constisnull &&
		(offset == NULL || IsA(offset, Const)))
	{
		bound = DatumGetInt64(count->constvalue);
		if (offset != NULL && !offset->constisnull)
			bound += DatumGetInt64(offset->constvalue);
	}
	afdw_mark_limit_bound(scan, bound);
}

/*
 * afdw_mark_limit_bound
 *		Note in SCAN's fdw_private that its remote SELECT ends with a LIMIT
 *		that lets it return at most BOUND rows (-1: not known), so that no
 *		other LIMIT is appended to it.
 */
void
afdw_mark_limit_bound(ForeignScan *scan, int64 bound)
{
	if (bound < 0 || bound > PG_INT32_MAX)
		bound = -1;
	Assert(list_length(scan->fdw_private) == AFDW_PRIVATE_OWN_LIMIT);
	scan->fdw_private = lappend(scan->fdw_private, makeInteger((int) bound));
}

/*
 * afdw_scan_own_limit
 *		True if the remote SELECT of PLAN ends with the query's LIMIT; then
 *		*BOUND is the most rows it returns, or -1 when not known.
 */
bool
afdw_scan_own_limit(ForeignScan *plan, int *bound)
{
	if (list_length(plan->fdw_private) <= AFDW_PRIVATE_OWN_LIMIT)
		return false;
	*bound = intVal(list_nth(plan->fdw_private, AFDW_PRIVATE_OWN_LIMIT));
	return true;
}

/*
 * afdw_scan_relations
 *		What the remote join or aggregate of PLAN reads, as EXPLAIN shows
 *		it; NULL for a scan of one table.
 */
const char *
afdw_scan_relations(ForeignScan *plan)
{
	const char *relations = strVal(list_nth(plan->fdw_private,
											AFDW_PRIVATE_RELATIONS));

	return relations[0] == '\0' ? NULL : relations;
}

/*
 * afdw_scan_private
 *		The remote SQL, column list, fetch size and fetch mode of a
 *		ForeignScan plan, and the ORDER BY of a binary stream's wrapper
 *		(NULL for none).
 */
void
afdw_scan_private(ForeignScan *plan, char **sql, List **retrieved_attrs,
				  int *fetch_size, bool *stream, char **outer_order)
{
	*sql = strVal(list_nth(plan->fdw_private, AFDW_PRIVATE_SQL));
	*retrieved_attrs = (List *) list_nth(plan->fdw_private, AFDW_PRIVATE_RETRIEVED);
	*fetch_size = intVal(list_nth(plan->fdw_private, AFDW_PRIVATE_FETCH_SIZE));
	*stream = boolVal(list_nth(plan->fdw_private, AFDW_PRIVATE_STREAM));
	*outer_order = strVal(list_nth(plan->fdw_private, AFDW_PRIVATE_OUTER_ORDER));
	if ((*outer_order)[0] == '\0')
		*outer_order = NULL;
}

/*
 * afdw_mark_recheck_only
 *		Mark every scan of async_fdw in PLAN, the local join plan that a
 *		remote join runs to recheck a row (EvalPlanQual), as run only then:
 *		its remote query is not sent with those of the statement's other
 *		scans (scan.c).
 *
 * The plan joins foreign tables of the remote join, whose scans are all
 * async_fdw's; in a recheck each returns the row under test, never
 * fetching.  Sent with the others, a scan under FOR UPDATE would lock
 * every row of its table.
 */
void
afdw_mark_recheck_only(Plan *plan)
{
	ListCell   *lc;

	check_stack_depth();
	if (plan == NULL)
		return;
	if (IsA(plan, ForeignScan) && ((ForeignScan *) plan)->scan.scanrelid > 0 &&
		list_length(((ForeignScan *) plan)->fdw_private) > AFDW_PRIVATE_RECHECK_ONLY)
		list_nth_cell(((ForeignScan *) plan)->fdw_private,
					  AFDW_PRIVATE_RECHECK_ONLY)->ptr_value = makeBoolean(true);
	if (IsA(plan, Append))
	{
		foreach(lc, ((Append *) plan)->appendplans)
			afdw_mark_recheck_only(lfirst(lc));
	}
	else if (IsA(plan, MergeAppend))
	{
		foreach(lc, ((MergeAppend *) plan)->mergeplans)
			afdw_mark_recheck_only(lfirst(lc));
	}
	afdw_mark_recheck_only(plan->lefttree);
	afdw_mark_recheck_only(plan->righttree);
}

/*
 * afdw_scan_recheck_only
 *		Whether PLAN is a scan that runs only to recheck a row of a remote
 *		join (afdw_mark_recheck_only).
 */
bool
afdw_scan_recheck_only(ForeignScan *plan)
{
	return list_length(plan->fdw_private) > AFDW_PRIVATE_RECHECK_ONLY &&
		boolVal(list_nth(plan->fdw_private, AFDW_PRIVATE_RECHECK_ONLY));
}
