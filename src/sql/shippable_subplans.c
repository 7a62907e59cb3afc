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
 * returns exactly the compared column (see pushdown.md); so is the value
 * of an uncorrelated scalar subquery, an initplan, in place of its
 * parameter.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "optimizer/clauses.h"

#include "async_fdw.h"

/* How many initplans were written into remote queries (afdw_sent_initplan). */
static uint64 initplans_sent = 0;

/*
 * sendable_scan
 *		The ForeignScan that subquery PLAN_ID runs, when its remote SELECT
 *		can be written inside a query to server SERVERID as user mapping
 *		UMID: its plan (under a Material at most) is one scan of that server
 *		and user mapping, with no local condition, no parameter and no row
 *		lock, whose remote SELECT returns exactly the one column of type
 *		TYPE that the subquery gives.  NULL if not.
 */
static ForeignScan *
sendable_scan(PlannerInfo *root, int plan_id, Oid serverid, Oid umid, Oid type)
{
	Plan	   *plan;
	ForeignScan *fs;
	PlannerInfo *subroot;
	TargetEntry *tle;
	List	   *retrieved;
	int			relid = -1;

	plan = (Plan *) list_nth(root->glob->subplans, plan_id - 1);
	subroot = (PlannerInfo *) list_nth(root->glob->subroots, plan_id - 1);
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
	retrieved = afdw_scan_retrieved(fs);
	tle = linitial_node(TargetEntry, plan->targetlist);
	if (tle->resjunk || list_length(retrieved) != 1 ||
		exprType((Node *) tle->expr) != type)
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
 * subplan_scan
 *		The ForeignScan that SubPlan SP runs, when its remote SELECT can be
 *		written inside a query to server SERVERID as user mapping UMID, in
 *		place of SP: SP is an uncorrelated "x op ANY/ALL (subquery)" whose
 *		plan is one remote SELECT of that server and user mapping returning
 *		exactly the column compared (sendable_scan).  NULL if not.
 *
 * The subquery then runs on the remote server in the same statement, and
 * so under the same snapshot as the rest of the query, as it would with
 * the remote transaction's other queries.
 */
static ForeignScan *
subplan_scan(PlannerInfo *root, SubPlan *sp, Oid serverid, Oid umid)
{
	OpExpr	   *test = (OpExpr *) sp->testexpr;
	Param	   *param;

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

	return sendable_scan(root, sp->plan_id, serverid, umid, param->paramtype);
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

/*
 * afdw_sent_initplan
 *		The ForeignScan of the initplan that sets PARAM, when its remote
 *		SELECT can be written in place of PARAM inside a query to server
 *		SERVERID as user mapping UMID: the initplan is an uncorrelated
 *		scalar subquery (a "(SELECT ...)" used as a value) whose plan is one
 *		remote SELECT of that server and user mapping returning the value
 *		(sendable_scan).  NULL if not.
 *
 * Written there, the subquery runs on the remote server in the same
 * statement, under the same snapshot, and the statement need not wait for
 * the initplan's own remote query before it is sent: a round trip fewer
 * (Q22's average balance, on the server of the customers it filters).  The
 * remote server raises the error the executor would when the subquery
 * returns more than one row, and gives NULL when it returns none.  The
 * initplan stays in the plan for any other use of its value; when there is
 * none, its scans are not started (initplans.c, told by
 * afdw_initplans_sent).
 */
ForeignScan *
afdw_sent_initplan(PlannerInfo *root, Param *param, Oid serverid, Oid umid)
{
	ForeignScan *scan;

	if (param->paramkind != PARAM_EXEC)
		return NULL;
	/* An initplan of this query level or of one around it sets it. */
	for (PlannerInfo *level = root; level != NULL; level = level->parent_root)
	{
		ListCell   *lc;

		foreach(lc, level->init_plans)
		{
			SubPlan    *sp = lfirst_node(SubPlan, lc);

			if (list_length(sp->setParam) != 1 ||
				linitial_int(sp->setParam) != param->paramid)
				continue;
			if (sp->subLinkType != EXPR_SUBLINK || sp->parParam != NIL ||
				sp->args != NIL || level->glob == NULL)
				return NULL;
			scan = sendable_scan(level, sp->plan_id, serverid, umid,
								 param->paramtype);
			if (scan != NULL)
				initplans_sent++;
			return scan;
		}
	}
	return NULL;
}

/*
 * afdw_initplans_sent
 *		How many times an initplan was written into a remote query in this
 *		backend: the planner hook looks for initplans nothing reads after a
 *		planning during which it grew (initplans.c).
 */
uint64
afdw_initplans_sent(void)
{
	return initplans_sent;
}
