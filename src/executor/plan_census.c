/*-------------------------------------------------------------------------
 *
 * plan_census.c
 *		Where the ForeignScans of an executor's plan stand: the Append
 *		whose asynchronous child each is, and whether each runs once and
 *		is its server's only one in the statement.
 *
 * A scan's Begin asks (scan.c): the Append parent makes the scan
 * asynchronous, and a scan that is alone and runs once may send its
 * query with the remote COMMIT (afdw_send_in_xact).  The first scan of an
 * executor that asks walks the plan once; the others look up.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/ilist.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/plannodes.h"
#include "utils/memutils.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

/*
 * Where the ForeignScans of one executor's plan stand, found by one walk
 * of the plan at the first scan's Begin that asks, and kept in its query
 * context until that context goes (forget_scan_census): starting N scans
 * walks the plan once, not N times.  For each ForeignScan: the Append
 * whose asynchronous child it is, and whether it is alone, that is, the
 * only ForeignScan of its server in the statement, on a path of plan nodes
 * that run it once (no nested loop's inner side, no subplan).  The places
 * go into a small open-addressing table keyed by the node's address,
 * which costs less than a dynahash table for the few scans of most plans.
 * Executors nest (a function's query starts inside another's), hence a
 * list, one census per executor that has asked.
 */
typedef struct ScanCensus
{
	EState	   *estate;
	AfdwScanPlace  *places;			/* found by the walk, in its order */
	int			nplaces;
	int			maxplaces;
	AfdwScanPlace  *slots;			/* the table: 2^bits slots, at most half used */
	int			bits;
	MemoryContextCallback forget;
	dlist_node	node;			/* in scan_censuses */
} ScanCensus;

static dlist_head scan_censuses = DLIST_STATIC_INIT(scan_censuses);

/*
 * census_slot
 *		The first slot of CENSUS's table to probe for SCAN (Fibonacci
 *		hashing of its address; the low bits of an address are zero).
 */
static inline uint32
census_slot(ScanCensus *census, Plan *scan)
{
	return (uint32) ((((uint64) (uintptr_t) scan >> 3) *
					  UINT64CONST(0x9E3779B97F4A7C15)) >> (64 - census->bits));
}

/*
 * runs_children_once
 *		Whether a plan node of type TAG, run once, runs each of its
 *		children at most once: it never rescans them by itself.  Unknown
 *		types say no.  A nested loop rescans its inner side (see
 *		record_scans).
 */
static bool
runs_children_once(NodeTag tag)
{
	switch (tag)
	{
		case T_Result:
		case T_ProjectSet:
		case T_Limit:
		case T_Sort:
		case T_IncrementalSort:
		case T_Agg:
		case T_Unique:
		case T_WindowAgg:
		case T_SetOp:
		case T_Material:
		case T_Hash:
		case T_HashJoin:
		case T_MergeJoin:
		case T_Append:
		case T_MergeAppend:
		case T_SubqueryScan:
			return true;
		default:
			return false;
	}
}

/*
 * record_scans
 *		Add to CENSUS each ForeignScan under PLAN (not NULL), in the order of
 *		a search from the root (an Append's own children before anything
 *		below them).  PARENT is the Append whose asynchronous child PLAN
 *		is, or NULL; ONCE says that PLAN runs at most once.
 */
static void
record_scans(Plan *plan, Plan *parent, bool once, ScanCensus *census)
{
	List	   *children = NIL;
	Plan	   *only = NULL;
	bool		below = once && runs_children_once(nodeTag(plan));
	ListCell   *lc;

	check_stack_depth();
	switch (nodeTag(plan))
	{
		case T_ForeignScan:
			if (census->nplaces == census->maxplaces)
			{
				census->maxplaces *= 2;
				census->places = repalloc(census->places,
										  sizeof(AfdwScanPlace) * census->maxplaces);
			}
			census->places[census->nplaces].scan = plan;
			census->places[census->nplaces].parent = parent;
			census->places[census->nplaces].server = ((ForeignScan *) plan)->fs_server;
			census->places[census->nplaces].once = once;
			census->places[census->nplaces].only = false;
			census->places[census->nplaces].alone = false;
			census->nplaces++;
			/* Its outer plan runs only to recheck rows. */
			below = false;
			break;
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
			{
				Plan	   *child = lfirst(lc);

				if (child != NULL)
					record_scans(child,
								 IsA(child, ForeignScan) && child->async_capable ?
								 plan : NULL, below, census);
			}
			break;
		case T_MergeAppend:
			children = ((MergeAppend *) plan)->mergeplans;
			break;
		case T_SubqueryScan:
			only = ((SubqueryScan *) plan)->subplan;
			break;
		case T_CustomScan:
			children = ((CustomScan *) plan)->custom_plans;
			break;
		default:
			break;
	}
	foreach(lc, children)
	{
		if (lfirst(lc) != NULL)
			record_scans(lfirst(lc), NULL, below, census);
	}
	if (only != NULL)
		record_scans(only, NULL, below, census);
	if (plan->lefttree != NULL)
		record_scans(plan->lefttree, NULL, below, census);
	if (plan->righttree != NULL)
		record_scans(plan->righttree, NULL, below && !IsA(plan, NestLoop),
					 census);
}

/*
 * place_cmp
 *		qsort comparator of AfdwScanPlace pointers by server.
 */
static int
place_cmp(const void *a, const void *b)
{
	Oid			x = (*(AfdwScanPlace *const *) a)->server;
	Oid			y = (*(AfdwScanPlace *const *) b)->server;

	return (x > y) - (x < y);
}

/*
 * mark_alone
 *		Mark the places of CENSUS that are their server's only one, and
 *		those of them that run once.
 */
static void
mark_alone(ScanCensus *census)
{
	AfdwScanPlace **sorted = palloc(sizeof(AfdwScanPlace *) * census->nplaces);
	int			i = 0;

	for (int k = 0; k < census->nplaces; k++)
		sorted[k] = &census->places[k];
	qsort(sorted, census->nplaces, sizeof(AfdwScanPlace *), place_cmp);
	while (i < census->nplaces)
	{
		int			j = i + 1;

		while (j < census->nplaces && sorted[j]->server == sorted[i]->server)
			j++;
		if (j == i + 1)
		{
			sorted[i]->only = true;
			sorted[i]->alone = sorted[i]->once;
		}
		i = j;
	}
	pfree(sorted);
}

/*
 * forget_scan_census
 *		Memory context callback: the executor of a ScanCensus is ending,
 *		drop the census from the list.
 */
static void
forget_scan_census(void *arg)
{
	ScanCensus *census = (ScanCensus *) arg;

	dlist_delete(&census->node);
}

/*
 * build_scan_census
 *		The ScanCensus of ESTATE: its plan walked (main tree, then
 *		subplans, which may run any number of times), its table filled,
 *		listed until its query context goes.
 */
static ScanCensus *
build_scan_census(EState *estate)
{
	PlannedStmt *stmt = estate->es_plannedstmt;
	MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
	ScanCensus *census = palloc0(sizeof(ScanCensus));
	ListCell   *lc;

	census->estate = estate;
	census->maxplaces = 16;
	census->places = palloc(sizeof(AfdwScanPlace) * census->maxplaces);
	if (stmt->planTree != NULL)
		record_scans(stmt->planTree, NULL, true, census);
	foreach(lc, stmt->subplans)
	{
		if (lfirst(lc) != NULL)
			record_scans(lfirst(lc), NULL, false, census);
	}
	mark_alone(census);
	census->bits = 2;
	while ((1 << census->bits) < 2 * census->nplaces)
		census->bits++;
	census->slots = palloc0(sizeof(AfdwScanPlace) << census->bits);
	MemoryContextSwitchTo(old);

	/* Of a scan found twice, the first found stays (it is not alone). */
	for (int i = 0; i < census->nplaces; i++)
	{
		uint32		mask = (1U << census->bits) - 1;
		uint32		slot = census_slot(census, census->places[i].scan);

		while (census->slots[slot].scan != NULL &&
			   census->slots[slot].scan != census->places[i].scan)
			slot = (slot + 1) & mask;
		if (census->slots[slot].scan == NULL)
			census->slots[slot] = census->places[i];
	}

	/* Nothing below can fail: listed exactly while the context lives. */
	dlist_push_head(&scan_censuses, &census->node);
	census->forget.func = forget_scan_census;
	census->forget.arg = census;
	MemoryContextRegisterResetCallback(estate->es_query_cxt, &census->forget);
	return census;
}

/*
 * afdw_find_scan_place
 *		Where SCAN stands in ESTATE's plan (see ScanCensus), NULL if it is
 *		not found.  The first call of an executor walks its whole plan;
 *		later ones look the answer up.
 */
const AfdwScanPlace *
afdw_find_scan_place(EState *estate, Plan *scan)
{
	ScanCensus *census = NULL;
	dlist_iter	iter;
	uint32		mask;
	uint32		slot;

	dlist_foreach(iter, &scan_censuses)
	{
		ScanCensus *c = dlist_container(ScanCensus, node, iter.cur);

		if (c->estate == estate)
		{
			census = c;
			break;
		}
	}
	if (census == NULL)
		census = build_scan_census(estate);
	mask = (1U << census->bits) - 1;
	for (slot = census_slot(census, scan); census->slots[slot].scan != NULL;
		 slot = (slot + 1) & mask)
	{
		if (census->slots[slot].scan == scan)
			return &census->slots[slot];
	}
	return NULL;
}
