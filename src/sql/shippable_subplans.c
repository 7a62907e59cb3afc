/*-------------------------------------------------------------------------
 *
 * shippable_subplans.c
 *		Which subqueries kept as subplans can be written inside a remote
 *		query: the test shared by shippable.c (may the condition be sent?)
 *		and deparse_expr.c (write it).
 *
 * A condition "x op ANY/ALL (subquery)" that the planner keeps as a
 * subplan (NOT IN, IN under OR, op ALL) is sent whole when the subquery's
 * plan is one remote SELECT of the scan's server and user mapping that
 * returns exactly the compared column (see pushdown.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "optimizer/clauses.h"

#include "async_fdw.h"

/*
 * subplan_scan
 *		The ForeignScan that SubPlan SP runs, when its remote SELECT can be
 *		written inside a query to server SERVERID as user mapping UMID, in
 *		place of SP: SP is an uncorrelated "x op ANY/ALL (subquery)" whose
 *		plan (under a Material at most) is one scan of that server and user
 *		mapping, with no local condition, no parameter and no row lock,
 *		whose remote SELECT returns exactly the column compared.  NULL if
 *		not.
 *
 * The subquery then runs on the remote server in the same statement, and
 * so under the same snapshot as the rest of the query, as it would with
 * the remote transaction's other queries.
 */
static ForeignScan *
subplan_scan(PlannerInfo *root, SubPlan *sp, Oid serverid, Oid umid)
{
	Plan	   *plan;
	ForeignScan *fs;
	PlannerInfo *subroot;
	OpExpr	   *test = (OpExpr *) sp->testexpr;
	Param	   *param;
	TargetEntry *tle;
	char	   *sql;
	List	   *retrieved;
	int			fetch_size;
	bool		stream;
	char	   *outer_order;
	int			relid = -1;

	if (root == NULL || root->glob == NULL ||
		(sp->subLinkType != ANY_SUBLINK && sp->subLinkType != ALL_SUBLINK) ||
		sp->parParam != NIL || sp->args != NIL || sp->setParam != NIL ||
		list_length(sp->paramIds) != 1 ||
		test == NULL || !IsA(test, OpExpr) || list_length(test->args) != 2)
		return NULL;

	/* x op $n, $n the subquery's column as it comes, not converted */
	param = (Param *) lsecond(test->args);
	if (!IsA(param, Param) || param->paramkind != PARAM_EXEC ||
		param->paramid != linitial_int(sp->paramIds) ||
		contain_exec_param(linitial(test->args), sp->paramIds))
		return NULL;

	plan = (Plan *) list_nth(root->glob->subplans, sp->plan_id - 1);
	subroot = (PlannerInfo *) list_nth(root->glob->subroots, sp->plan_id - 1);
	if (plan != NULL && IsA(plan, Material) && plan->initPlan == NIL)
		plan = outerPlan(plan);
	if (plan == NULL || !IsA(plan, ForeignScan) || subroot == NULL ||
		subroot->parse->rowMarks != NIL)
		return NULL;
	fs = (ForeignScan *) plan;
	if (fs->fs_server != serverid || fs->operation != CMD_SELECT ||
		plan->qual != NIL || plan->initPlan != NIL || fs->fdw_exprs != NIL ||
		!bms_is_empty(plan->extParam) || list_length(plan->targetlist) != 1 ||
		list_length(fs->fdw_private) <= 1 || !IsA(linitial(fs->fdw_private), String))
		return NULL;

	/* The user mapping of every table it reads. */
	while ((relid = bms_next_member(afdw_scan_base_relids(fs), relid)) >= 0)
	{
		RelOptInfo *rel = relid < subroot->simple_rel_array_size ?
			subroot->simple_rel_array[relid] : NULL;

		if (rel == NULL || rel->serverid != serverid || rel->fdw_private == NULL ||
			((AfdwRelInfo *) rel->fdw_private)->user == NULL ||
			((AfdwRelInfo *) rel->fdw_private)->user->umid != umid)
			return NULL;
	}

	/* Its remote SELECT returns the one column the subquery gives. */
	afdw_scan_private(fs, &sql, &retrieved, &fetch_size, &stream, &outer_order);
	tle = linitial_node(TargetEntry, plan->targetlist);
	if (tle->resjunk || list_length(retrieved) != 1 ||
		exprType((Node *) tle->expr) != param->paramtype)
		return NULL;
	if (fs->scan.scanrelid > 0)
	{
		Var		   *var = (Var *) tle->expr;

		if (!IsA(var, Var) || var->varno != (int) fs->scan.scanrelid ||
			var->varlevelsup != 0 || var->varattno != linitial_int(retrieved))
			return NULL;
	}
	else if (list_length(fs->fdw_scan_tlist) != 1 || linitial_int(retrieved) != 1 ||
			 !equal(tle->expr, linitial_node(TargetEntry, fs->fdw_scan_tlist)->expr))
		return NULL;
	return fs;
}

/*
 * afdw_sent_subplan
 *		The SubPlan of NODE, a SubPlan or an AlternativeSubPlan, whose
 *		subquery can be sent inside a query to server SERVERID as user
 *		mapping UMID (subplan_scan), or NULL; *SCAN gets its ForeignScan.
 */
SubPlan *
afdw_sent_subplan(PlannerInfo *root, Node *node, Oid serverid, Oid umid,
				  ForeignScan **scan)
{
	ListCell   *lc;

	if (IsA(node, SubPlan))
	{
		*scan = subplan_scan(root, (SubPlan *) node, serverid, umid);
		return *scan != NULL ? (SubPlan *) node : NULL;
	}
	if (!IsA(node, AlternativeSubPlan))
		return NULL;
	/* Either plan of the subquery gives the same rows. */
	foreach(lc, ((AlternativeSubPlan *) node)->subplans)
	{
		*scan = subplan_scan(root, lfirst_node(SubPlan, lc), serverid, umid);
		if (*scan != NULL)
			return lfirst_node(SubPlan, lc);
	}
	return NULL;
}
