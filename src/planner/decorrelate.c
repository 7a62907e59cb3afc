/*-------------------------------------------------------------------------
 *
 * decorrelate.c
 *		Correlated aggregate subqueries over foreign tables of async_fdw
 *		turned into a join with the same aggregate grouped by the
 *		correlation's columns, before the planner sees them.
 *
 * PostgreSQL runs a scalar subquery that refers to its outer query as a
 * subplan, once per outer row.  Over foreign tables every run is a remote
 * query (one per partition), so TPC-H's Q17
 *
 *		WHERE l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem
 *							WHERE l_partkey = p_partkey)
 *
 * sends thousands of them, and Q20 one per partsupp row.  When the
 * subquery is an aggregate whose correlation is equality on its own
 * columns, the condition holds exactly when the outer row joins the
 * aggregate grouped by those columns and the join's value satisfies it:
 *
 *		FROM ..., (SELECT l_partkey, 0.2 * avg(l_quantity) FROM lineitem
 *				   GROUP BY l_partkey) d
 *		WHERE l_quantity < d.v AND d.k1 = p_partkey
 *
 * The grouped query is then one remote query per partition (a partial
 * aggregate), and a hash join sends its outer side's keys into it
 * (hash_join_keys.c), so that the shards group only the keys asked for.
 *
 * The two are equal under these rules, each checked:
 *
 *	- the condition is one of the level's WHERE conjuncts (a false or null
 *	  one drops the row), an operator that is strict, with the subquery as
 *	  one argument: an outer row without a group gets null, and drops;
 *	- the subquery's value is null when it aggregates no row: its
 *	  aggregates are built-in ones that return null on no input (not
 *	  count), under strict operators and functions only, with constants;
 *	- its correlation is "inner column = outer expression" by the default
 *	  equality of the column's type, under the column's collation: the
 *	  grouping's equality, so that one group is the rows the subquery would
 *	  read, and a null key finds no group as it finds no row;
 *	- the subquery reads plain tables (one of them ours), with no LIMIT,
 *	  ORDER BY, DISTINCT, grouping, HAVING, window functions, set
 *	  operations, subqueries, volatile functions or row-level security; its
 *	  other conditions do not refer to the outer query;
 *	- the level is a SELECT that locks no rows.
 *
 * A subquery whose value is not null on no rows (count) or which compares
 * by another equality stays a subplan.
 *
 * Which is faster depends on the outer rows: one outer row makes one
 * lookup as a subplan, and the whole table's groups as a join whose
 * grouped side gets no keys (a nested loop over it).  So the planner hook
 * plans the query both ways and keeps the cheaper plan.  The grouped
 * side's cost is that of every group, whatever keys it will take: the
 * join wins only where even that is cheaper than the subplan's runs
 * (TPC-H's Q17: 56,000 against 368,000; Q20: 24,000 against 22 million).
 * async_fdw.decorrelate_subqueries turns it off.
 *
 * Planner layer: called from aggregate_paths.c's planner hook.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_aggregate.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/parse_oper.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteManip.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "async_fdw.h"

/* async_fdw.decorrelate_subqueries */
static bool decorrelate_subqueries = true;

/* One equality of a subquery's column to an expression of the outer query. */
typedef struct Correlation
{
	OpExpr	   *op;				/* the subquery's condition */
	Var		   *inner;			/* its column of the subquery */
	Node	   *outer;			/* its other argument */
	bool		inner_first;	/* the column is the first argument */
	int			key;			/* the grouped query's column (1-based) */
} Correlation;

/*
 * afdw_decorrelate_init
 *		Define async_fdw.decorrelate_subqueries (from _PG_init).
 */
void
afdw_decorrelate_init(void)
{
	DefineCustomBoolVariable("async_fdw.decorrelate_subqueries",
							 "Joins correlated aggregate subqueries over async_fdw tables to their grouped form.",
							 "A condition comparing with a scalar subquery that aggregates foreign tables of async_fdw and is correlated by equality on its columns is planned as a join with the subquery grouped by those columns, rather than a remote query per outer row.",
							 &decorrelate_subqueries,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
}

/*
 * and_args
 *		Append to LIST the conjuncts of NODE, nested ANDs flattened.
 */
static List *
and_args(List *list, Node *node)
{
	if (node == NULL)
		return list;
	if (is_andclause(node))
	{
		ListCell   *lc;

		foreach(lc, ((BoolExpr *) node)->args)
			list = and_args(list, (Node *) lfirst(lc));
		return list;
	}
	return lappend(list, node);
}

/*
 * outer_ref_walker
 *		expression_tree_walker callback: true on a reference to a query
 *		level above the one NODE is at (a Var, an aggregate, a placeholder
 *		or a GROUPING of an outer level).
 */
static bool
outer_ref_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
		return ((Var *) node)->varlevelsup > 0;
	if (IsA(node, Aggref))
	{
		if (((Aggref *) node)->agglevelsup > 0)
			return true;
	}
	if (IsA(node, PlaceHolderVar))
		return true;
	if (IsA(node, GroupingFunc))
		return true;
	if (IsA(node, Query) || IsA(node, SubLink))
		return true;
	return expression_tree_walker(node, outer_ref_walker, context);
}

/*
 * outer_expression_walker
 *		expression_tree_walker callback for outer_expression: true on a
 *		node it does not allow; *SEEN set on a Var of the level above.
 */
static bool
outer_expression_walker(Node *node, bool *seen)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		if (((Var *) node)->varlevelsup != 1)
			return true;
		*seen = true;
		return false;
	}
	if (IsA(node, Aggref) || IsA(node, PlaceHolderVar) ||
		IsA(node, GroupingFunc) || IsA(node, SubLink) || IsA(node, Query))
		return true;
	return expression_tree_walker(node, outer_expression_walker, seen);
}

/*
 * outer_expression
 *		Whether NODE, an expression of a subquery, reads only the level just
 *		above it: a Var of that level at least, no Var of its own or of a
 *		level further up, no aggregate, placeholder or subquery, nothing
 *		volatile.
 */
static bool
outer_expression(Node *node)
{
	bool		seen = false;

	if (outer_expression_walker(node, &seen) || !seen)
		return false;
	return !contain_volatile_functions(node);
}

/*
 * null_on_no_rows_agg
 *		Whether AGG is a built-in aggregate that returns null over no rows
 *		(count does not; neither may an aggregate of another level).
 */
static bool
null_on_no_rows_agg(Aggref *agg)
{
	static const char *const names[] = {
		"avg", "sum", "min", "max", "stddev", "stddev_samp", "stddev_pop",
		"variance", "var_samp", "var_pop", "bool_and", "bool_or", "every",
		"bit_and", "bit_or", "bit_xor"
	};
	char	   *name;
	bool		found = false;

	if (agg->agglevelsup != 0 || agg->aggkind != AGGKIND_NORMAL ||
		!afdw_is_builtin(agg->aggfnoid))
		return false;
	name = get_func_name(agg->aggfnoid);
	if (name == NULL)
		return false;
	for (int i = 0; i < (int) lengthof(names); i++)
		found = found || strcmp(name, names[i]) == 0;
	pfree(name);
	return found;
}

/*
 * null_on_no_rows
 *		Whether NODE, the value of an aggregate subquery, is null when the
 *		subquery reads no row: an aggregate that is then null, or a strict
 *		operator, function or cast of such a value and of constants or
 *		parameters.  Columns outside aggregates, which have no value over no
 *		rows, do not pass.
 */
static bool
null_on_no_rows(Node *node)
{
	List	   *args;
	Oid			funcid;
	bool		one = false;
	ListCell   *lc;

	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_Aggref:
			return null_on_no_rows_agg((Aggref *) node);
		case T_RelabelType:
			return null_on_no_rows((Node *) ((RelabelType *) node)->arg);
		case T_OpExpr:
			funcid = get_opcode(((OpExpr *) node)->opno);
			args = ((OpExpr *) node)->args;
			break;
		case T_FuncExpr:
			if (((FuncExpr *) node)->funcretset)
				return false;
			funcid = ((FuncExpr *) node)->funcid;
			args = ((FuncExpr *) node)->args;
			break;
		default:
			return false;
	}
	if (!OidIsValid(funcid) || !func_strict(funcid) ||
		func_volatile(funcid) == PROVOLATILE_VOLATILE)
		return false;
	foreach(lc, args)
	{
		Node	   *arg = (Node *) lfirst(lc);

		/* A constant, a parameter, an expression of them. */
		if (!contain_var_clause(arg) && !contain_agg_clause(arg) &&
			!contain_volatile_functions(arg) && !checkExprHasSubLink(arg))
			continue;
		if (!null_on_no_rows(arg))
			return false;
		one = true;
	}
	return one;
}

/*
 * plain_subquery
 *		Whether SUB, the query of a scalar subquery, has the form the file's
 *		comment allows, leaving aside its conditions: one aggregated value,
 *		plain tables, one of them ours.
 */
static bool
plain_subquery(Query *sub)
{
	ListCell   *lc;
	bool		ours = false;
	TargetEntry *tle;

	if (sub->commandType != CMD_SELECT || sub->utilityStmt != NULL ||
		!sub->hasAggs || sub->hasWindowFuncs || sub->hasTargetSRFs ||
		sub->hasSubLinks || sub->hasDistinctOn || sub->hasRecursive ||
		sub->hasModifyingCTE || sub->hasForUpdate || sub->hasRowSecurity ||
		sub->cteList != NIL || sub->groupClause != NIL ||
		sub->groupingSets != NIL || sub->havingQual != NULL ||
		sub->windowClause != NIL || sub->distinctClause != NIL ||
		sub->sortClause != NIL || sub->limitOffset != NULL ||
		sub->limitCount != NULL || sub->rowMarks != NIL ||
		sub->setOperations != NULL || sub->jointree == NULL ||
		sub->jointree->fromlist == NIL || list_length(sub->targetList) != 1)
		return false;
	tle = linitial_node(TargetEntry, sub->targetList);
	if (tle->resjunk || !null_on_no_rows((Node *) tle->expr) ||
		outer_ref_walker((Node *) tle->expr, NULL) ||
		contain_volatile_functions((Node *) tle->expr))
		return false;

	foreach(lc, sub->jointree->fromlist)
	{
		if (!IsA(lfirst(lc), RangeTblRef))
			return false;
	}
	foreach(lc, sub->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		if (rte->rtekind != RTE_RELATION || rte->securityQuals != NIL ||
			rte->tablesample != NULL)
			return false;
		ours = ours || afdw_table_reads_ours(rte->relid, true);
	}
	return ours;
}

/*
 * correlation_of
 *		The Correlation that NODE, a condition of a subquery referring to
 *		the level above, is, or NULL if it is no equality of the file's
 *		comment.
 */
static Correlation *
correlation_of(Node *node)
{
	OpExpr	   *op = (OpExpr *) node;
	Correlation *c;
	Var		   *inner = NULL;
	Node	   *outer = NULL;
	bool		first = false;
	TypeCacheEntry *tc;

	if (!IsA(op, OpExpr) || list_length(op->args) != 2)
		return NULL;
	if (IsA(linitial(op->args), Var) && ((Var *) linitial(op->args))->varlevelsup == 0)
	{
		inner = linitial(op->args);
		outer = lsecond(op->args);
		first = true;
	}
	else if (IsA(lsecond(op->args), Var) && ((Var *) lsecond(op->args))->varlevelsup == 0)
	{
		inner = lsecond(op->args);
		outer = linitial(op->args);
	}
	if (inner == NULL || inner->varattno <= 0 || !outer_expression(outer) ||
		exprType(outer) != inner->vartype)
		return NULL;

	/* The grouping's equality, under the column's collation. */
	tc = lookup_type_cache(inner->vartype, TYPECACHE_EQ_OPR);
	if (!OidIsValid(tc->eq_opr) || tc->eq_opr != op->opno ||
		op->inputcollid != inner->varcollid)
		return NULL;

	c = palloc0(sizeof(Correlation));
	c->op = op;
	c->inner = inner;
	c->outer = outer;
	c->inner_first = first;
	return c;
}

/*
 * grouped_query
 *		SUB turned into its grouped form: its columns of CORRELATIONS
 *		(each given its key number) first, then its value, grouped by the
 *		columns, with its conditions LOCAL only.
 */
static Query *
grouped_query(Query *sub, List *correlations, List *local)
{
	Query	   *g = copyObject(sub);
	TargetEntry *value = linitial_node(TargetEntry, g->targetList);
	List	   *tlist = NIL;
	List	   *group = NIL;
	ListCell   *lc;

	foreach(lc, correlations)
	{
		Correlation *c = (Correlation *) lfirst(lc);
		ListCell   *lc2;
		TargetEntry *tle;
		SortGroupClause *sgc;
		Oid			sortop;
		Oid			eqop;
		bool		hashable;

		/* A column twice is one key. */
		foreach(lc2, tlist)
		{
			if (equal(((TargetEntry *) lfirst(lc2))->expr, c->inner))
			{
				c->key = foreach_current_index(lc2) + 1;
				break;
			}
		}
		if (c->key > 0)
			continue;

		c->key = list_length(tlist) + 1;
		tle = makeTargetEntry((Expr *) copyObject(c->inner), (AttrNumber) c->key,
							  psprintf("k%d", c->key), false);
		tle->ressortgroupref = c->key;
		tlist = lappend(tlist, tle);

		get_sort_group_operators(c->inner->vartype, false, true, false,
								 &sortop, &eqop, NULL, &hashable);
		sgc = makeNode(SortGroupClause);
		sgc->tleSortGroupRef = c->key;
		sgc->eqop = eqop;
		sgc->sortop = sortop;
		sgc->nulls_first = false;
		sgc->hashable = hashable;
		group = lappend(group, sgc);
	}
	value->resno = list_length(tlist) + 1;
	value->resname = pstrdup("v");
	value->ressortgroupref = 0;
	g->targetList = lappend(tlist, value);
	g->groupClause = group;
	g->jointree->quals = local == NIL ? NULL : (Node *) make_ands_explicit(local);
	return g;
}

/*
 * decorrelate_conjunct
 *		The conditions that replace COND, one of Q's WHERE conjuncts, if it
 *		compares with a correlated aggregate subquery of the file's comment
 *		(whose grouped form is then added to Q's FROM); NIL if it does not.
 *		Unless APPLY, Q is left as it is and COND alone stands for the
 *		conditions.
 */
static List *
decorrelate_conjunct(Query *q, Node *cond, bool apply)
{
	OpExpr	   *op = (OpExpr *) cond;
	SubLink    *sl;
	int			slpos;
	Query	   *sub;
	List	   *correlations = NIL;
	List	   *local = NIL;
	List	   *result = NIL;
	ListCell   *lc;
	Query	   *g;
	ParseState *pstate;
	ParseNamespaceItem *nsitem;
	RangeTblRef *rtr;
	int			rtindex;
	TargetEntry *value;
	OpExpr	   *cmp;

	if (!IsA(op, OpExpr) || list_length(op->args) != 2 || op->opretset ||
		op->opresulttype != BOOLOID || !op_strict(op->opno))
		return NIL;
	if (IsA(linitial(op->args), SubLink))
		slpos = 0;
	else if (IsA(lsecond(op->args), SubLink))
		slpos = 1;
	else
		return NIL;
	sl = list_nth_node(SubLink, op->args, slpos);
	if (sl->subLinkType != EXPR_SUBLINK ||
		checkExprHasSubLink(list_nth(op->args, 1 - slpos)) ||
		contain_volatile_functions(list_nth(op->args, 1 - slpos)) ||
		func_volatile(get_opcode(op->opno)) == PROVOLATILE_VOLATILE)
		return NIL;
	sub = (Query *) sl->subselect;
	if (!plain_subquery(sub))
		return NIL;

	/* Its conditions: of its own, or correlations. */
	foreach(lc, and_args(NIL, sub->jointree->quals))
	{
		Node	   *qual = (Node *) lfirst(lc);
		Correlation *c;

		if (!outer_ref_walker(qual, NULL))
		{
			if (contain_volatile_functions(qual))
				return NIL;
			local = lappend(local, qual);
			continue;
		}
		c = correlation_of(qual);
		if (c == NULL)
			return NIL;
		correlations = lappend(correlations, c);
	}
	if (correlations == NIL)
		return NIL;
	if (!apply)
		return list_make1(cond);

	g = grouped_query(sub, correlations, local);
	pstate = make_parsestate(NULL);
	nsitem = addRangeTableEntryForSubquery(pstate, g,
										   makeAlias("decorrelated", NIL),
										   false, true);
	q->rtable = lappend(q->rtable, nsitem->p_rte);
	rtindex = list_length(q->rtable);
	free_parsestate(pstate);
	rtr = makeNode(RangeTblRef);
	rtr->rtindex = rtindex;
	q->jointree->fromlist = lappend(q->jointree->fromlist, rtr);

	/* The correlations, now join conditions of this level. */
	foreach(lc, correlations)
	{
		Correlation *c = (Correlation *) lfirst(lc);
		OpExpr	   *eq = copyObject(c->op);
		Node	   *outer = copyObject(c->outer);
		Var		   *key = makeVar(rtindex, (AttrNumber) c->key, c->inner->vartype,
								  c->inner->vartypmod, c->inner->varcollid, 0);

		IncrementVarSublevelsUp(outer, -1, 1);
		eq->args = c->inner_first ? list_make2(key, outer) : list_make2(outer, key);
		result = lappend(result, eq);
	}

	/* The comparison, with the group's value for the subquery. */
	value = llast_node(TargetEntry, g->targetList);
	cmp = copyObject(op);
	list_nth_cell(cmp->args, slpos)->ptr_value =
		makeVar(rtindex, value->resno, exprType((Node *) value->expr),
				exprTypmod((Node *) value->expr),
				exprCollation((Node *) value->expr), 0);
	return lappend(result, cmp);
}

/*
 * decorrelate_level
 *		Whether a WHERE conjunct of Q compares with a correlated aggregate
 *		subquery of the file's comment; if APPLY, each such one is made a
 *		join with the subquery's grouped form.
 */
static bool
decorrelate_level(Query *q, bool apply)
{
	List	   *conds;
	List	   *kept = NIL;
	bool		changed = false;
	ListCell   *lc;

	if (q->commandType != CMD_SELECT || !q->hasSubLinks || q->rowMarks != NIL ||
		q->hasForUpdate || q->setOperations != NULL || q->jointree == NULL ||
		q->jointree->quals == NULL)
		return false;

	conds = and_args(NIL, q->jointree->quals);
	foreach(lc, conds)
	{
		Node	   *cond = (Node *) lfirst(lc);
		List	   *replaced = decorrelate_conjunct(q, cond, apply);

		if (replaced != NIL)
		{
			if (!apply)
				return true;
			kept = list_concat(kept, replaced);
			changed = true;
		}
		else
			kept = lappend(kept, cond);
	}
	if (changed)
		q->jointree->quals = (Node *) make_ands_explicit(kept);
	return changed;
}

/*
 * decorrelate_walker
 *		query_tree_walker callback: decorrelate every level under NODE,
 *		innermost first, if *APPLY; else stop (true) at the first level
 *		that has something to decorrelate.
 */
static bool
decorrelate_walker(Node *node, bool *apply)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *q = (Query *) node;

		if (query_tree_walker(q, decorrelate_walker, apply, 0))
			return true;
		return decorrelate_level(q, *apply) && !*apply;
	}
	return expression_tree_walker(node, decorrelate_walker, apply);
}

/*
 * afdw_decorrelate
 *		A copy of QUERY with the correlated aggregate subqueries of every
 *		level that the file's comment allows turned into joins with their
 *		grouped form, or NULL if it has none (or the setting is off).
 *		QUERY is left as it is: the planner hook plans both, and keeps the
 *		cheaper (aggregate_paths.c).
 */
Query *
afdw_decorrelate(Query *query)
{
	bool		apply = false;
	Query	   *copy;

	if (!decorrelate_subqueries)
		return NULL;
	check_stack_depth();
	if (!decorrelate_walker((Node *) query, &apply))
		return NULL;
	copy = copyObject(query);
	apply = true;
	(void) decorrelate_walker((Node *) copy, &apply);
	return copy;
}
