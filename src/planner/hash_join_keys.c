/*-------------------------------------------------------------------------
 *
 * hash_join_keys.c
 *		Keys of a hash join's inner side sent to the scans of its outer
 *		side: once the planner has made the plan, each hash join whose
 *		outer side scans a foreign table of ours on its join key gets a key
 *		collector under its Hash, and the scan sends the keys collected
 *		(or, failing that, the other way round).
 *
 * TPC-H's Q18 joins orders and lineitem (hundreds of thousands of rows)
 * to the 25 order keys of a grouped IN subquery.  pushed_keys.c cannot send
 * those ahead: they are no foreign table's, and the planner's estimate of
 * a HAVING condition is a third of the groups.  But the hash join builds
 * its hash table from them anyway.  So the Hash's input goes through a
 * collector (key_collector.c), which notes the distinct keys it passes on; when
 * the outer side's scan is first read, it has the collector read its
 * input to the end (keeping the rows for the Hash), and its remote query
 * gets "column = ANY (keys)".  Past afdw_key_array_limit distinct keys,
 * the collector gives up and the scan runs its query as planned.
 *
 * The condition only drops outer rows whose key the inner side does not
 * have.  That changes nothing above when every outer row the join keeps
 * needs a matching inner row (an inner, semi or right join: the Hash's
 * side is the preserved one) by a strict operator, and the column of the
 * scan reaches the join's key unchanged, through nodes that only pass
 * rows on, filter them, or join them:
 *
 *	- Append, MergeAppend, Sort, Incremental Sort, Material, Result,
 *	  Subquery Scan, and a Hash under a join;
 *	- an Agg, from one of its grouping columns (without grouping sets):
 *	  dropping rows of some keys drops those keys' groups and leaves the
 *	  others as they were; down to a remote aggregate (aggregate_paths.c), on its
 *	  grouping columns;
 *	- into a remote join (join_paths.c), whose WHERE clause takes the keys of a
 *	  column of one of its tables that it returns;
 *	- either side of an inner or outer join: a row of the other side that
 *	  loses its match is null-extended, and a null key joins nothing;
 *	- the outer side of a semi-join or anti-join.
 *
 * The other way round, the scans under the Hash may take the keys of the
 * outer side, when the join needs none of the Hash's rows without a match
 * (an inner, left, semi or anti join): a collector then goes over the
 * outer side, and reads it ahead when a scan under the Hash asks first.
 * That serves an aggregate grouped by its join key and estimated at fewer
 * rows than the other side, which the planner hashes: a correlated
 * subquery turned into a join (decorrelate.c, TPC-H's Q20).  A join gets
 * keys one way only, so that no scan waits for rows that wait for it.
 *
 * A Hash whose input depends on a parameter is left alone: it may be
 * rescanned after the scan has taken its keys.  So is one whose input is a
 * scan of a table estimated at more rows than an array holds keys (a
 * table's estimate is trusted; those of groups and joins are not: Q18's
 * 25 orders are estimated at 42,000), and, the other way round, an outer
 * side that is such a scan or depends on a parameter (other than the
 * output of an InitPlan of the statement's top plan, set once per run: the
 * keys of a small table, pushed_keys.c).  So are the parallel hash
 * joins, and statements that lock rows or are not plain SELECTs (as for
 * pushed_keys.c).
 *
 * The scans under the Hash of a semi- or anti-join also send SELECT
 * DISTINCT where their statistics expect repeated rows (distinct_inner):
 * the join only asks whether a match exists.
 *
 * Planner layer: called from aggregate_paths.c's planner hook, on the finished
 * plan.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_statistic.h"
#include "catalog/pg_type.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "async_fdw.h"

/* A scan's key slot that the column being followed reaches. */
typedef struct KeyTarget
{
	ForeignScan *scan;
	int			slot;
} KeyTarget;

/* The statement being given collectors. */
typedef struct AttachState
{
	int			next_id;		/* plan_node_id of the next collector */
	Bitmapset  *fixed;			/* parameters set once per execution: the
								 * outputs of the statement's own InitPlans */
	List	   *rtable;			/* the statement's range table */
} AttachState;

/*
 * max_plan_id
 *		The largest plan_node_id in PLAN.
 */
static int
max_plan_id(Plan *plan)
{
	int			max;
	ListCell   *lc;
	List	   *children = NIL;

	check_stack_depth();
	if (plan == NULL)
		return -1;
	max = plan->plan_node_id;
	max = Max(max, max_plan_id(plan->lefttree));
	max = Max(max, max_plan_id(plan->righttree));
	if (IsA(plan, Append))
		children = ((Append *) plan)->appendplans;
	else if (IsA(plan, MergeAppend))
		children = ((MergeAppend *) plan)->mergeplans;
	else if (IsA(plan, SubqueryScan))
		children = list_make1(((SubqueryScan *) plan)->subplan);
	else if (IsA(plan, CustomScan))
		children = ((CustomScan *) plan)->custom_plans;
	else if (IsA(plan, BitmapAnd))
		children = ((BitmapAnd *) plan)->bitmapplans;
	else if (IsA(plan, BitmapOr))
		children = ((BitmapOr *) plan)->bitmapplans;
	foreach(lc, children)
		max = Max(max, max_plan_id((Plan *) lfirst(lc)));
	return max;
}

/*
 * our_scan
 *		Whether PLAN is a scan of a foreign table of async_fdw with key
 *		slots.
 */
static bool
our_scan(ForeignScan *plan)
{
	FdwRoutine *routine;

	if (afdw_scan_key_slots(plan) == 0 || !OidIsValid(plan->fs_server))
		return false;
	routine = GetFdwRoutineByServerId(plan->fs_server);
	return afdw_routine_is_ours(routine);
}

/*
 * output_var
 *		The Var that PLAN's output column RESNO is, or NULL if it is not a
 *		plain column.
 */
static Var *
output_var(Plan *plan, AttrNumber resno)
{
	TargetEntry *tle;

	if (resno < 1 || resno > list_length(plan->targetlist))
		return NULL;
	tle = list_nth_node(TargetEntry, plan->targetlist, resno - 1);
	if (!IsA(tle->expr, Var))
		return NULL;
	return (Var *) tle->expr;
}

/*
 * follow_column
 *		Add to *TARGETS the key slots that output column RESNO of PLAN comes
 *		from unchanged (see the file's comment), for keys compared by
 *		OPNO under COLLATION.
 */
static void
follow_column(Plan *plan, AttrNumber resno, Oid opno, Oid collation,
			  List **targets)
{
	Var		   *var;
	ListCell   *lc;

	check_stack_depth();
	if (plan == NULL || (var = output_var(plan, resno)) == NULL)
		return;

	switch (nodeTag(plan))
	{
		case T_ForeignScan:
			{
				ForeignScan *fs = (ForeignScan *) plan;
				int			n;

				/*
				 * A remote join's or aggregate's key slots are known by the
				 * item of its scan target list, a table's by its column.
				 */
				if (fs->scan.scanrelid == 0 ? var->varno != INDEX_VAR :
					(fs->fdw_scan_tlist != NIL || var->varno != (int) fs->scan.scanrelid))
					return;
				if (!our_scan(fs))
					return;
				n = afdw_scan_key_slots(fs);
				for (int i = 0; i < n; i++)
				{
					AttrNumber	attno;
					Oid			slot_op;
					Oid			slot_coll;

					afdw_scan_key_slot(fs, i, &attno, &slot_op, &slot_coll);
					if (attno == var->varattno && slot_op == opno &&
						slot_coll == collation)
					{
						KeyTarget  *t = palloc(sizeof(KeyTarget));

						t->scan = fs;
						t->slot = i;
						*targets = lappend(*targets, t);
						return;
					}
				}
				return;
			}
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
				follow_column((Plan *) lfirst(lc), resno, opno, collation, targets);
			return;
		case T_MergeAppend:
			foreach(lc, ((MergeAppend *) plan)->mergeplans)
				follow_column((Plan *) lfirst(lc), resno, opno, collation, targets);
			return;
		case T_SubqueryScan:
			if (var->varno == (int) ((SubqueryScan *) plan)->scan.scanrelid)
				follow_column(((SubqueryScan *) plan)->subplan, var->varattno,
							  opno, collation, targets);
			return;
		case T_Agg:
			{
				Agg		   *agg = (Agg *) plan;
				bool		grouping = false;

				/* A grouping column: fewer rows are fewer groups, the same. */
				if (var->varno != OUTER_VAR || agg->aggstrategy == AGG_PLAIN ||
					agg->groupingSets != NIL || agg->chain != NIL)
					return;
				for (int i = 0; i < agg->numCols; i++)
					grouping = grouping || agg->grpColIdx[i] == var->varattno;
				if (grouping)
					follow_column(plan->lefttree, var->varattno, opno, collation,
								  targets);
				return;
			}
		case T_Result:
		case T_Sort:
		case T_IncrementalSort:
		case T_Material:
		case T_Hash:
			if (var->varno == OUTER_VAR)
				follow_column(plan->lefttree, var->varattno, opno, collation,
							  targets);
			return;
		case T_NestLoop:
		case T_MergeJoin:
		case T_HashJoin:
			{
				JoinType	jointype = ((Join *) plan)->jointype;

				if (var->varno == OUTER_VAR &&
					(jointype == JOIN_INNER || jointype == JOIN_LEFT ||
					 jointype == JOIN_RIGHT || jointype == JOIN_FULL ||
					 jointype == JOIN_SEMI || jointype == JOIN_ANTI))
					follow_column(plan->lefttree, var->varattno, opno, collation,
								  targets);
				else if (var->varno == INNER_VAR &&
						 (jointype == JOIN_INNER || jointype == JOIN_LEFT ||
						  jointype == JOIN_RIGHT || jointype == JOIN_FULL))
					follow_column(plan->righttree, var->varattno, opno, collation,
								  targets);
				return;
			}
		default:
			return;
	}
}

/*
 * too_many_keys
 *		Whether the input of a Hash, PLAN, probably has more keys than an
 *		array holds: a scan of one table (whose estimate comes from its
 *		statistics, not a guess about groups or joins) estimated at more
 *		rows.  The scans would wait for a collector that gives up.  (A
 *		large table with few distinct keys loses them.)
 */
static bool
too_many_keys(Plan *plan)
{
	if (plan->plan_rows <= afdw_key_array_limit())
		return false;
	switch (nodeTag(plan))
	{
		case T_SeqScan:
		case T_IndexScan:
		case T_IndexOnlyScan:
		case T_BitmapHeapScan:
			return true;
		case T_ForeignScan:
			return ((ForeignScan *) plan)->scan.scanrelid > 0;
		default:
			return false;
	}
}

/*
 * key_targets
 *		For each hash clause of HJ, the key slots that the keys of one side
 *		of the join reach on the other: the scans of the outer side, for
 *		the Hash's keys, or (BACK) the scans under the Hash, for the outer
 *		side's keys.  *COLUMNS gets the key columns collected (each a List:
 *		column number in the collecting side's rows, operator, collation),
 *		*USES the slots that take them (scan, column index, slot).
 */
static void
key_targets(HashJoin *hj, bool back, List **columns, List **uses)
{
	Hash	   *hash = (Hash *) innerPlan(hj);

	*columns = NIL;
	*uses = NIL;
	for (int i = 0; i < list_length(hj->hashkeys); i++)
	{
		Var		   *outer = list_nth(hj->hashkeys, i);
		Var		   *inner = list_nth(hash->hashkeys, i);
		Oid			opno = list_nth_oid(hj->hashoperators, i);
		Oid			collation = list_nth_oid(hj->hashcollations, i);
		List	   *targets = NIL;
		ListCell   *lc;
		bool		used = false;

		if (!IsA(outer, Var) || outer->varno != OUTER_VAR ||
			!IsA(inner, Var) || inner->varno != OUTER_VAR ||
			inner->vartype != outer->vartype || !op_strict(opno))
			continue;
		if (back)
			follow_column(hash->plan.lefttree, inner->varattno, opno, collation,
						  &targets);
		else
			follow_column(outerPlan(hj), outer->varattno, opno, collation,
						  &targets);
		foreach(lc, targets)
		{
			KeyTarget  *t = (KeyTarget *) lfirst(lc);

			if (afdw_scan_key_uses(t->scan) >= AFDW_MAX_KEY_SLOTS)
				continue;
			*uses = lappend(*uses, list_make3(t->scan, makeInteger(list_length(*columns)),
											  makeInteger(t->slot)));
			used = true;
		}
		if (used)
			*columns = lappend(*columns,
							   list_make3(makeInteger(back ? outer->varattno :
													  inner->varattno),
										  makeInteger((int) opno),
										  makeInteger((int) collation)));
	}
}

/*
 * give_keys
 *		Put a key collector under the Hash of HJ if a scan of its outer
 *		side can take the keys of one of its hash clauses, or over its outer
 *		side if a scan under the Hash can take the outer side's (see the
 *		file's comment), the first way if both can: the Hash's side is the
 *		one the planner expects smaller.
 */
static void
give_keys(HashJoin *hj, AttachState *as)
{
	Hash	   *hash = (Hash *) innerPlan(hj);
	Plan	   *outer_plan = outerPlan(hj);
	bool		forth_ok;
	bool		back_ok;
	List	   *columns = NIL;
	List	   *uses = NIL;
	bool		back;
	ListCell   *lc;
	int			id;

	if (hj->join.plan.parallel_aware || !IsA(hash, Hash) ||
		hash->plan.parallel_aware || !bms_is_empty(hash->plan.extParam) ||
		hash->plan.lefttree == NULL || afdw_is_key_collector(hash->plan.lefttree) ||
		outer_plan == NULL || afdw_is_key_collector(outer_plan) ||
		list_length(hj->hashkeys) != list_length(hash->hashkeys))
		return;
	forth_ok = (hj->join.jointype == JOIN_INNER || hj->join.jointype == JOIN_SEMI ||
				hj->join.jointype == JOIN_RIGHT) &&
		!too_many_keys(hash->plan.lefttree);
	back_ok = (hj->join.jointype == JOIN_INNER || hj->join.jointype == JOIN_LEFT ||
			   hj->join.jointype == JOIN_SEMI || hj->join.jointype == JOIN_ANTI) &&
		bms_is_subset(outer_plan->extParam, as->fixed) &&
		!too_many_keys(outer_plan);

	if (forth_ok)
		key_targets(hj, false, &columns, &uses);
	back = (columns == NIL && back_ok);
	if (back)
		key_targets(hj, true, &columns, &uses);
	if (columns == NIL)
		return;

	id = as->next_id++;
	if (back)
		outerPlan(hj) = (Plan *) afdw_make_key_collector(outer_plan, columns,
														 afdw_key_array_limit(),
														 id, true);
	else
		hash->plan.lefttree = (Plan *) afdw_make_key_collector(hash->plan.lefttree,
															   columns,
															   afdw_key_array_limit(),
															   id, false);
	foreach(lc, uses)
	{
		List	   *use = (List *) lfirst(lc);

		afdw_add_key_use((ForeignScan *) linitial(use), id,
						 intVal(lsecond(use)), intVal(lthird(use)));
	}
}

/*
 * identity_type
 *		Whether values of TYPE that are equal are one value in every respect
 *		an expression can see (no 1.0 against 1.00, no -0 against 0, no
 *		collation): of two rows equal in such columns, a join that only asks
 *		whether a match exists needs one.
 */
static bool
identity_type(Oid type)
{
	switch (type)
	{
		case BOOLOID:
		case CHAROID:
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case UUIDOID:
			return true;
		default:
			return false;
	}
}

/*
 * column_distinct
 *		How many distinct values column ATTNUM of table RELID has, by its
 *		statistics (ANALYZE); -1 when they do not say.
 */
static double
column_distinct(Oid relid, AttrNumber attnum)
{
	HeapTuple	tuple;
	float4		stadistinct;
	float4		reltuples;

	tuple = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(relid),
							Int16GetDatum(attnum), BoolGetDatum(false));
	if (!HeapTupleIsValid(tuple))
		return -1;
	stadistinct = ((Form_pg_statistic) GETSTRUCT(tuple))->stadistinct;
	ReleaseSysCache(tuple);
	if (stadistinct > 0)
		return stadistinct;
	if (stadistinct == 0)
		return -1;
	/* A fraction of the table's rows. */
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		return -1;
	reltuples = ((Form_pg_class) GETSTRUCT(tuple))->reltuples;
	ReleaseSysCache(tuple);
	return reltuples > 0 ? -stadistinct * reltuples : -1;
}

/*
 * distinct_scan
 *		Have FS, a scan under the Hash of a semi- or anti-join, send SELECT
 *		DISTINCT where the statistics expect its rows to repeat: a scan of
 *		one table of async_fdw whose retrieved columns are all of identity
 *		types (identity_type), with no volatile function in what it
 *		computes or checks locally, and whose columns' distinct values,
 *		multiplied, are at most half its estimated rows.  Otherwise the
 *		remote server would sort or hash every row to drop none.
 */
static void
distinct_scan(ForeignScan *fs, List *rtable)
{
	RangeTblEntry *rte;
	List	   *retrieved;
	double		combinations = 1;
	ListCell   *lc;

	if (fs->scan.scanrelid == 0 || fs->operation != CMD_SELECT ||
		!OidIsValid(fs->fs_server) ||
		!afdw_routine_is_ours(GetFdwRoutineByServerId(fs->fs_server)) ||
		contain_volatile_functions((Node *) fs->scan.plan.qual) ||
		contain_volatile_functions((Node *) fs->scan.plan.targetlist))
		return;
	rte = rt_fetch(fs->scan.scanrelid, rtable);
	retrieved = afdw_scan_retrieved(fs);
	if (rte->rtekind != RTE_RELATION || retrieved == NIL)
		return;
	foreach(lc, retrieved)
	{
		AttrNumber	attnum = (AttrNumber) lfirst_int(lc);
		double		ndistinct;

		if (attnum <= 0 || !identity_type(get_atttype(rte->relid, attnum)))
			return;
		ndistinct = column_distinct(rte->relid, attnum);
		if (ndistinct < 0)
			return;
		combinations *= ndistinct;
	}
	if (combinations * 2 <= fs->scan.plan.plan_rows)
		(void) afdw_make_scan_distinct(fs);
}

/*
 * distinct_below
 *		distinct_scan for the scans whose rows reach PLAN, the input of a
 *		semi- or anti-join's Hash, unchanged: through an Append or a key
 *		collector.
 */
static void
distinct_below(Plan *plan, List *rtable)
{
	ListCell   *lc;

	check_stack_depth();
	if (plan == NULL)
		return;
	if (IsA(plan, ForeignScan))
		distinct_scan((ForeignScan *) plan, rtable);
	else if (IsA(plan, Append))
	{
		foreach(lc, ((Append *) plan)->appendplans)
			distinct_below((Plan *) lfirst(lc), rtable);
	}
	else if (afdw_is_key_collector(plan))
		distinct_below(plan->lefttree, rtable);
}

/*
 * distinct_inner
 *		When HJ is a semi- or anti-join, have the scans under its Hash send
 *		SELECT DISTINCT where it pays (distinct_scan): such a join only asks
 *		whether an outer row has a match, and a repeated row answers
 *		nothing new, while each costs the remote server its output, the
 *		network and the coordinator its hashing.  (TPC-H's Q22: 18,679
 *		orders of 1,857 customers came to tell which customers have one.)
 *		Not with a volatile join condition, which a repeat could make
 *		true.
 */
static void
distinct_inner(HashJoin *hj, List *rtable)
{
	Hash	   *hash = (Hash *) innerPlan(hj);

	if ((hj->join.jointype != JOIN_SEMI && hj->join.jointype != JOIN_ANTI) ||
		hash == NULL || !IsA(hash, Hash) ||
		contain_volatile_functions((Node *) hj->join.joinqual))
		return;
	distinct_below(hash->plan.lefttree, rtable);
}

/*
 * attach_walker
 *		Give keys (give_keys) to the hash joins of PLAN, outermost first, and
 *		have the scans under the Hash of a semi- or anti-join send SELECT
 *		DISTINCT where it pays (distinct_inner).
 */
static void
attach_walker(Plan *plan, AttachState *as)
{
	ListCell   *lc;
	List	   *children = NIL;

	check_stack_depth();
	if (plan == NULL)
		return;
	if (IsA(plan, HashJoin))
	{
		give_keys((HashJoin *) plan, as);
		distinct_inner((HashJoin *) plan, as->rtable);
	}
	attach_walker(plan->lefttree, as);
	attach_walker(plan->righttree, as);
	if (IsA(plan, Append))
		children = ((Append *) plan)->appendplans;
	else if (IsA(plan, MergeAppend))
		children = ((MergeAppend *) plan)->mergeplans;
	else if (IsA(plan, SubqueryScan))
		children = list_make1(((SubqueryScan *) plan)->subplan);
	foreach(lc, children)
		attach_walker((Plan *) lfirst(lc), as);
}

/*
 * afdw_attach_key_collectors
 *		Give the scans of STMT the keys of the hash joins above them (see
 *		the file's comment).
 */
void
afdw_attach_key_collectors(PlannedStmt *stmt)
{
	AttachState as;
	ListCell   *lc;
	int			max;

	if (stmt->commandType != CMD_SELECT || stmt->rowMarks != NIL ||
		stmt->hasModifyingCTE || stmt->parallelModeNeeded)
		return;

	max = max_plan_id(stmt->planTree);
	foreach(lc, stmt->subplans)
		max = Max(max, max_plan_id((Plan *) lfirst(lc)));
	as.next_id = max + 1;
	as.fixed = NULL;
	as.rtable = stmt->rtable;
	foreach(lc, stmt->planTree->initPlan)
	{
		SubPlan    *sp = lfirst_node(SubPlan, lc);
		ListCell   *lc2;

		foreach(lc2, sp->setParam)
			as.fixed = bms_add_member(as.fixed, lfirst_int(lc2));
	}

	attach_walker(stmt->planTree, &as);
	foreach(lc, stmt->subplans)
		attach_walker((Plan *) lfirst(lc), &as);
}
