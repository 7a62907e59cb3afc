/*-------------------------------------------------------------------------
 *
 * initplans.c
 *		Initplans whose value nothing in a finished plan reads: their
 *		scans of async_fdw are not started.
 *
 * The value of an uncorrelated scalar subquery whose plan is one remote
 * SELECT can be written into the remote query of a scan of the same server
 * (afdw_sent_initplan, shippable_subplans.c).  PostgreSQL then never runs
 * the initplan unless something else reads its value, but async_fdw sends
 * the query of every scan of a statement when the first one starts: the
 * initplan's query would run on the remote server all the same, on a
 * connection of its own, beside the query that has it inside.  After
 * planning, a walk of the plan finds the initplans whose value no
 * expression reads (the plan's own, its children's and the other initplans'
 * parameters) and marks their scans as prepared only when read
 * (afdw_mark_when_read), which they never are.  Where it cannot tell, the
 * walk takes the value as read: the scans then start as before.
 *
 * Called by the planner hook (aggregate_paths.c) when a scan of the plan
 * had an initplan written into its query.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"

#include "async_fdw.h"

typedef struct ReadContext
{
	PlannedStmt *stmt;
	int			paramid;
} ReadContext;

static void mark_plan(PlannedStmt *stmt, Plan *plan);
static bool value_read(PlannedStmt *stmt, Plan *plan, SubPlan *init);
static bool expression_reads(Node *node, ReadContext *cxt);
static bool own_expressions_read(Plan *plan, ReadContext *cxt);
static bool subtree_reads(Plan *plan, ReadContext *cxt);
static void mark_scans(Plan *plan);

/*
 * afdw_mark_unread_initplans
 *		Mark the scans of every initplan of STMT whose value nothing reads
 *		as prepared only when read.
 */
void
afdw_mark_unread_initplans(PlannedStmt *stmt)
{
	ListCell   *lc;

	mark_plan(stmt, stmt->planTree);
	foreach(lc, stmt->subplans)
		mark_plan(stmt, (Plan *) lfirst(lc));
}

/*
 * mark_plan
 *		Look at the initplans of PLAN and of every plan under it.
 */
static void
mark_plan(PlannedStmt *stmt, Plan *plan)
{
	ListCell   *lc;

	check_stack_depth();
	if (plan == NULL)
		return;
	foreach(lc, plan->initPlan)
	{
		SubPlan    *init = lfirst_node(SubPlan, lc);

		if (!value_read(stmt, plan, init))
			mark_scans((Plan *) list_nth(stmt->subplans, init->plan_id - 1));
	}
	mark_plan(stmt, plan->lefttree);
	mark_plan(stmt, plan->righttree);
	switch (nodeTag(plan))
	{
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
				mark_plan(stmt, (Plan *) lfirst(lc));
			break;
		case T_MergeAppend:
			foreach(lc, ((MergeAppend *) plan)->mergeplans)
				mark_plan(stmt, (Plan *) lfirst(lc));
			break;
		case T_SubqueryScan:
			mark_plan(stmt, ((SubqueryScan *) plan)->subplan);
			break;
		case T_CustomScan:
			foreach(lc, ((CustomScan *) plan)->custom_plans)
				mark_plan(stmt, (Plan *) lfirst(lc));
			break;
		default:
			break;
	}
}

/*
 * value_read
 *		Whether anything may read the value of INIT, an initplan of PLAN:
 *		an expression of PLAN, a plan under it, or another initplan of
 *		PLAN.  True when not sure.
 *
 * The value is a parameter of PLAN's level: only PLAN and what is under
 * it can read it.  The planner lists, for every plan node, the parameters
 * from above that it and the plans under it may read (extParam): the plans
 * whose list names it are looked into, their own expressions here.  A
 * plan under PLAN with initplans of its own counts as reading it.
 */
static bool
value_read(PlannedStmt *stmt, Plan *plan, SubPlan *init)
{
	ReadContext cxt;
	ListCell   *lc;

	if (init->subLinkType != EXPR_SUBLINK || list_length(init->setParam) != 1)
		return true;
	cxt.stmt = stmt;
	cxt.paramid = linitial_int(init->setParam);
	foreach(lc, plan->initPlan)
	{
		SubPlan    *other = lfirst_node(SubPlan, lc);
		Plan	   *other_plan = list_nth(stmt->subplans, other->plan_id - 1);

		if (other != init && (other_plan == NULL ||
							  bms_is_member(cxt.paramid, other_plan->extParam)))
			return true;
	}
	return own_expressions_read(plan, &cxt) || subtree_reads(plan, &cxt);
}

/*
 * own_expressions_read
 *		Whether an expression of PLAN itself reads CXT's parameter; true
 *		for a kind of plan node whose expressions are not known here.
 */
static bool
own_expressions_read(Plan *plan, ReadContext *cxt)
{
	if (expression_reads((Node *) plan->targetlist, cxt) ||
		expression_reads((Node *) plan->qual, cxt))
		return true;
	switch (nodeTag(plan))
	{
		case T_ForeignScan:
			{
				ForeignScan *fs = (ForeignScan *) plan;

				/*
				 * fdw_scan_tlist says what the remote query returns: its
				 * parameters are sent in fdw_exprs.  The conditions sent
				 * are evaluated here only to recheck a row (EvalPlanQual),
				 * which a SELECT without row locks never does.
				 */
				if (expression_reads((Node *) fs->fdw_exprs, cxt))
					return true;
				return (cxt->stmt->commandType != CMD_SELECT ||
						cxt->stmt->rowMarks != NIL) &&
					expression_reads((Node *) fs->fdw_recheck_quals, cxt);
			}
		case T_CustomScan:
			return expression_reads((Node *) ((CustomScan *) plan)->custom_exprs, cxt);
		case T_Result:
			return expression_reads(((Result *) plan)->resconstantqual, cxt);
		case T_Limit:
			return expression_reads(((Limit *) plan)->limitOffset, cxt) ||
				expression_reads(((Limit *) plan)->limitCount, cxt);
		case T_NestLoop:
			return expression_reads((Node *) ((Join *) plan)->joinqual, cxt);
		case T_MergeJoin:
			return expression_reads((Node *) ((Join *) plan)->joinqual, cxt) ||
				expression_reads((Node *) ((MergeJoin *) plan)->mergeclauses, cxt);
		case T_HashJoin:
			return expression_reads((Node *) ((Join *) plan)->joinqual, cxt) ||
				expression_reads((Node *) ((HashJoin *) plan)->hashclauses, cxt);
		case T_Hash:
			return expression_reads((Node *) ((Hash *) plan)->hashkeys, cxt);
		case T_Append:
		case T_MergeAppend:
			/* Run-time pruning may read it: not looked into. */
			return afdw_plan_prunes(plan);
		case T_Agg:
		case T_Sort:
		case T_IncrementalSort:
		case T_Material:
		case T_Unique:
		case T_Group:
		case T_SeqScan:
		case T_SubqueryScan:
			/* No expressions but the target list and the filter. */
			return false;
		default:
			return true;
	}
}

/*
 * subtree_reads
 *		Whether a plan under PLAN reads CXT's parameter: each plan whose
 *		extParam names it (the planner's list of the parameters from above
 *		that a plan and the plans under it may read, counting conditions
 *		kept for rechecks) is looked into; true for a kind of plan node
 *		whose children are not known here.
 */
static bool
subtree_reads(Plan *plan, ReadContext *cxt)
{
	ListCell   *lc;
	List	   *children = NIL;

	check_stack_depth();
	switch (nodeTag(plan))
	{
		case T_Append:
			children = ((Append *) plan)->appendplans;
			break;
		case T_MergeAppend:
			children = ((MergeAppend *) plan)->mergeplans;
			break;
		case T_SubqueryScan:
			children = list_make1(((SubqueryScan *) plan)->subplan);
			break;
		case T_CustomScan:
			children = ((CustomScan *) plan)->custom_plans;
			break;
		case T_BitmapAnd:
		case T_BitmapOr:
		case T_ModifyTable:
			return true;
		default:
			break;
	}
	if (plan->lefttree != NULL)
		children = lappend(list_copy(children), plan->lefttree);
	if (plan->righttree != NULL)
		children = lappend(list_copy(children), plan->righttree);
	foreach(lc, children)
	{
		Plan	   *child = (Plan *) lfirst(lc);

		if (!bms_is_member(cxt->paramid, child->extParam))
			continue;
		if (child->initPlan != NIL || own_expressions_read(child, cxt) ||
			subtree_reads(child, cxt))
			return true;
	}
	return false;
}

/*
 * expression_reads
 *		Whether NODE, an expression of a plan, reads CXT's parameter:
 *		itself, or through a subplan whose plan reads it.
 */
static bool
expression_reads(Node *node, ReadContext *cxt)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
		return ((Param *) node)->paramkind == PARAM_EXEC &&
			((Param *) node)->paramid == cxt->paramid;
	if (IsA(node, SubPlan))
	{
		SubPlan    *sp = (SubPlan *) node;
		Plan	   *plan = list_nth(cxt->stmt->subplans, sp->plan_id - 1);

		if (plan == NULL || bms_is_member(cxt->paramid, plan->extParam))
			return true;
		return expression_reads(sp->testexpr, cxt) ||
			expression_reads((Node *) sp->args, cxt);
	}
	return expression_tree_walker(node, expression_reads, (void *) cxt);
}

/*
 * mark_scans
 *		Mark the scans of async_fdw in PLAN, an initplan's plan whose value
 *		nothing reads, as prepared only when read.
 */
static void
mark_scans(Plan *plan)
{
	ListCell   *lc;

	check_stack_depth();
	if (plan == NULL)
		return;
	if (IsA(plan, ForeignScan) &&
		afdw_server_is_ours(((ForeignScan *) plan)->fs_server))
		afdw_mark_when_read((ForeignScan *) plan);
	mark_scans(plan->lefttree);
	mark_scans(plan->righttree);
	if (IsA(plan, Append))
	{
		foreach(lc, ((Append *) plan)->appendplans)
			mark_scans((Plan *) lfirst(lc));
	}
	else if (IsA(plan, MergeAppend))
	{
		foreach(lc, ((MergeAppend *) plan)->mergeplans)
			mark_scans((Plan *) lfirst(lc));
	}
}
