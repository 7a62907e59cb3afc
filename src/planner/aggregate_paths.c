/*-------------------------------------------------------------------------
 *
 * aggregate_paths.c
 *		Aggregates computed by the remote server.
 *
 * The planner offers the grouping of a foreign table's rows (or of a
 * remote join's, join_paths.c) to the FDW in two ways.  The whole aggregate
 * (UPPERREL_GROUP_AGG) of a foreign table or a join, or of a partition
 * (or a join of partitions) when the GROUP BY holds the partition key and
 * partitionwise aggregation is on, becomes one remote SELECT with GROUP BY
 * and HAVING.  The partial aggregate (UPPERREL_PARTIAL_GROUP_AGG) of a
 * partition, under partitionwise aggregation, becomes a remote SELECT of
 * each aggregate's transition state (shippable.c, afdw_partial_form),
 * which a local Finalize Aggregate combines with the other partitions':
 * every shard aggregates its own rows, all at once under the asynchronous
 * Append, and only the groups cross the network.
 *
 * postgres_fdw pushes partial aggregates never and partitionwise ones only
 * with enable_partitionwise_aggregate on.  Here, while a query that
 * aggregates a partitioned table with async_fdw partitions is planned,
 * enable_partitionwise_aggregate is on (the planner hook below, setting
 * async_fdw.partitionwise_aggregate), when every aggregate of the query
 * has a partial form: otherwise the partitions would be aggregated
 * locally, one after the other, instead of scanned concurrently.
 *
 * Neighbours: shippable.c says what may be sent, deparse_statements.c writes
 * the remote SELECT, the handler (async_fdw.c) hands PostgreSQL the planner's
 * callbacks for grouping relations here, scan.c runs the plans as scans whose
 * columns are the remote select list.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/planner.h"
#include "optimizer/tlist.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"
#include "utils/typcache.h"

#include "async_fdw.h"

/* async_fdw.partitionwise_aggregate and async_fdw.partitionwise_join */
static bool afdw_partitionwise_aggregate = true;
static bool afdw_partitionwise_join = true;

static planner_hook_type prev_planner_hook = NULL;
static ExecutorStart_hook_type prev_executor_start = NULL;

/*
 * afdw_key_slots_made() when a planning last ended (or a plan was last
 * given keys by afdw_executor_start).
 */
static int	key_slots_seen = 0;

/* afdw_initplans_sent when the last plan was looked at (initplans.c). */
static uint64 initplans_seen = 0;
static create_upper_paths_hook_type prev_upper_paths_hook = NULL;

/*
 * The planning under way, when the planner hook did not wrap it: the first
 * query of a session loads async_fdw while it is planned (the FDW's
 * handler is looked up for the first foreign table), too late for the
 * hook.  The first foreign table's size estimate then sets the planner
 * settings (afdw_late_partitionwise), and the end of the top level's
 * planning, or of the transaction, restores them.
 */
static bool planner_wrapped = false;
static bool late_checked = false;
static bool late_set = false;
static int	late_level = 0;		/* the transaction nesting level of that
								 * planning */
static bool late_saved_aggregate;
static bool late_saved_join;

/*
 * ungrouped_walker
 *		expression_tree_walker callback: true on a column outside the
 *		aggregates that is not within a grouping item of TLIST, or on
 *		GROUPING().
 */
static bool
ungrouped_walker(Node *node, List *tlist)
{
	TargetEntry *tle;

	if (node == NULL || IsA(node, Aggref))
		return false;
	if (IsA(node, GroupingFunc))
		return true;
	tle = tlist_member((Expr *) node, tlist);
	if (tle != NULL && tle->ressortgroupref != 0)
		return false;
	if (IsA(node, Var))
		return true;
	return expression_tree_walker(node, ungrouped_walker, tlist);
}

/*
 * only_grouped_columns
 *		True if every column of EXPR outside its aggregates is within a
 *		grouping item of TLIST (c2 / 2 under GROUP BY c2 / 2), so that the
 *		remote server accepts it in a grouped SELECT.
 */
static bool
only_grouped_columns(Expr *expr, List *tlist)
{
	return !ungrouped_walker((Node *) expr, tlist);
}

/*
 * add_item
 *		Add EXPR to the remote select list *TLIST unless it is there.
 */
static void
add_item(List **tlist, Expr *expr)
{
	if (tlist_member(expr, *tlist) == NULL)
		*tlist = lappend(*tlist, makeTargetEntry(expr, list_length(*tlist) + 1,
												 NULL, false));
}

/* What local_parts_walker looks at. */
typedef struct LocalParts
{
	PlannerInfo *root;
	RelOptInfo *input;
	bool		partial;
	List	  **tlist;			/* the remote select list, added to */
} LocalParts;

/*
 * local_parts_walker
 *		expression_tree_walker callback for an item computed locally: add
 *		its aggregates to the remote select list; true on one that cannot
 *		be sent, on GROUPING(), or on a column outside them and outside the
 *		grouping items (which the remote select list has).
 */
static bool
local_parts_walker(Node *node, LocalParts *lp)
{
	TargetEntry *tle;

	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		if (!afdw_is_shippable_grouped(lp->root, lp->input, (Expr *) node,
									   lp->partial))
			return true;
		add_item(lp->tlist, (Expr *) node);
		return false;
	}
	/* GROUPING() is computed by an Agg node only. */
	if (IsA(node, GroupingFunc))
		return true;
	tle = tlist_member((Expr *) node, *lp->tlist);
	if (tle != NULL && tle->ressortgroupref != 0)
		return false;
	if (IsA(node, Var))
		return true;
	return expression_tree_walker(node, local_parts_walker, lp);
}

/*
 * groupable_column
 *		Whether the remote server can group the rows of INPUT by EXPR, a
 *		column, as the local one would: a shippable column whose type's
 *		default equality is built in.
 */
static bool
groupable_column(PlannerInfo *root, RelOptInfo *input, Expr *expr)
{
	TypeCacheEntry *tc = lookup_type_cache(exprType((Node *) expr),
										   TYPECACHE_EQ_OPR);

	return OidIsValid(tc->eq_opr) && afdw_is_builtin(tc->eq_opr) &&
		afdw_is_shippable(root, input, expr);
}

/*
 * grouping_ok
 *		Whether the remote server can compute the grouping relation
 *		GROUPED of INPUT (a foreign table or a remote join) as the local
 *		one would; if so, fill GFP's remote select list, GROUP BY positions
 *		and HAVING.  HAVING_QUAL is the query's (ignored for PARTIAL
 *		aggregates: it applies after the Finalize Aggregate).
 *
 * Grouping items are sent whole.  Every other item is sent whole when it
 * can be, or else computed locally from its aggregates and grouping
 * columns, sent apart.  So is each condition of HAVING: a volatile one is
 * checked locally on the groups, next to the remote ones.
 *
 * A Param (an InitPlan's output, an outer query's column, a PL/pgSQL
 * variable, a generic plan's $n) is never an item of the select list: the
 * remote query gets its value as a parameter, from the plan's fdw_exprs,
 * and the planner's last pass (set_plan_references) rewrites each of
 * those that equals an item of the scan target list into a reference to
 * that item, that is, to the scan's own output, which does not exist yet
 * when the value is needed.  So the item is computed locally (it is the
 * value sent), and a Param grouped by stays in the remote GROUP BY as the
 * value itself: grouping by a constant, which still makes no group of no
 * rows.
 */
static bool
grouping_ok(PlannerInfo *root, RelOptInfo *input, RelOptInfo *grouped,
			List *having_qual, bool partial, AfdwRelInfo *gfp)
{
	Query	   *parse = root->parse;
	PathTarget *target = grouped->reltarget;
	List	   *tlist = NIL;
	ListCell   *lc;
	int			i;
	Index		extra_sgref = 0;

	/* The grouping items first: the others are checked against them. */
	i = 0;
	foreach(lc, target->exprs)
	{
		Expr	   *expr = (Expr *) lfirst(lc);
		Index		sgref = get_pathtarget_sortgroupref(target, i++);
		SortGroupClause *sgc;
		TargetEntry *tle;

		if (sgref == 0 ||
			(sgc = get_sortgroupref_clause_noerr(sgref, parse->groupClause)) == NULL)
			continue;

		/* Grouped remotely by the equality of its type: the local one. */
		if (!afdw_is_shippable(root, input, expr) ||
			expression_returns_set((Node *) expr) ||
			!afdw_is_builtin(sgc->eqop))
			return false;
		if (IsA(expr, Param))
		{
			gfp->group_values = lappend(gfp->group_values, expr);
			continue;
		}
		tle = makeTargetEntry(expr, list_length(tlist) + 1, NULL, false);
		tle->ressortgroupref = sgref;
		tlist = lappend(tlist, tle);
		gfp->group_positions = lappend_int(gfp->group_positions, tle->resno);
	}
	/* Above every reference of the query's: none of its clauses has it. */
	foreach(lc, parse->targetList)
		extra_sgref = Max(extra_sgref, lfirst_node(TargetEntry, lc)->ressortgroupref);
	for (i = 0; i < list_length(target->exprs); i++)
		extra_sgref = Max(extra_sgref, get_pathtarget_sortgroupref(target, i));

	i = 0;
	foreach(lc, target->exprs)
	{
		Expr	   *expr = (Expr *) lfirst(lc);
		Index		sgref = get_pathtarget_sortgroupref(target, i++);
		LocalParts	lp;

		if (sgref != 0 && get_sortgroupref_clause_noerr(sgref, parse->groupClause) != NULL)
			continue;
		if (expression_returns_set((Node *) expr))
			return false;
		if (!IsA(expr, Param) &&
			afdw_is_shippable_grouped(root, input, expr, partial) &&
			only_grouped_columns(expr, tlist))
		{
			add_item(&tlist, expr);
			continue;
		}

		/*
		 * A column of a partial target outside its grouping items: one the
		 * planner found constant (from 16, a GROUP BY column a condition
		 * fixes, WHERE k = 3 GROUP BY k) or that depends on them.  The
		 * remote partial aggregate groups by it too: finer groups than the
		 * query's are combined by the Finalize Aggregate, and this column
		 * has one value in each of the query's groups anyway.
		 */
		if (partial && IsA(expr, Var) && groupable_column(root, input, expr))
		{
			TargetEntry *tle = makeTargetEntry(expr, list_length(tlist) + 1,
											   NULL, false);

			/* Not the query's: marks it grouped for the items after it. */
			tle->ressortgroupref = ++extra_sgref;
			tlist = lappend(tlist, tle);
			gfp->group_positions = lappend_int(gfp->group_positions, tle->resno);
			continue;
		}

		/*
		 * Computed locally: its aggregates are sent, its grouping items
		 * are.
		 */
		lp.root = root;
		lp.input = input;
		lp.partial = partial;
		lp.tlist = &tlist;
		if (local_parts_walker((Node *) expr, &lp))
			return false;
	}

	if (!partial)
	{
		foreach(lc, having_qual)
		{
			Expr	   *qual = (Expr *) lfirst(lc);

			LocalParts	lp;

			if (afdw_is_shippable_grouped(root, input, qual, false) &&
				only_grouped_columns(qual, tlist))
			{
				gfp->having = lappend(gfp->having, qual);
				continue;
			}

			/* Checked locally on the groups: its aggregates are sent. */
			lp.root = root;
			lp.input = input;
			lp.partial = false;
			lp.tlist = &tlist;
			if (local_parts_walker((Node *) qual, &lp))
				return false;
			gfp->local_having = lappend(gfp->local_having, qual);
		}
	}

	/*
	 * A query with GROUP BY makes no group of no rows; a remote aggregate
	 * without one makes a row of them.  With nothing left to group by
	 * remotely (from 16, a partial target leaves out the items the planner
	 * found constant: a correlated subquery's GROUP BY of the outer value,
	 * a column a condition fixes), the remote query groups by a constant
	 * expression, NOT false (a bare constant other than a position is
	 * refused there): one group of its rows, none of no rows.
	 */
	if (parse->groupClause != NIL && gfp->group_positions == NIL &&
		gfp->group_values == NIL)
		gfp->group_values =
			list_make1(makeBoolExpr(NOT_EXPR,
									list_make1(makeBoolConst(false, false)),
									-1));

	gfp->grouped_tlist = tlist;
	return true;
}

/*
 * afdwGetForeignUpperPaths
 *		Offer the remote aggregate of INPUT, a foreign table of ours whose
 *		conditions are all remote or a remote join (join_paths.c), for the
 *		grouping relation OUTPUT: whole (UPPERREL_GROUP_AGG) or partial
 *		(UPPERREL_PARTIAL_GROUP_AGG); or the scan with the query's LIMIT
 *		for the final relation (UPPERREL_FINAL, order_limit.c).
 *
 * Not with conditions that depend on no table (a parameter's, say): the
 * planner checks them in a Result above the scan of the table, which a
 * remote aggregate replaces.
 *
 * Costed as the remote scan and the transfer of the groups, never more
 * than the rows: less than the same scan sending every row to a local
 * aggregate.  The remote aggregation is not counted: it runs on the
 * remote server, while the other partitions' run on theirs, which is why
 * even a tie goes to this path.  The remote scan is run cost, as it is for
 * the scan of the rows: counted as startup cost, it lost the tie to a
 * local aggregate of the same total and a lower startup (a GroupAggregate
 * over a scan whose grouping column a condition fixes, k = $1 or k = 3, or
 * over a partition of one row).
 */
void
afdwGetForeignUpperPaths(PlannerInfo *root, UpperRelationKind stage,
						 RelOptInfo *input, RelOptInfo *output, void *extra)
{
	GroupPathExtraData *gx = (GroupPathExtraData *) extra;
	AfdwRelInfo *ifp = (AfdwRelInfo *) input->fdw_private;
	AfdwRelInfo *gfp;
	bool		partial = (stage == UPPERREL_PARTIAL_GROUP_AGG);
	List	   *group_exprs = NIL;
	double		ngroups;
	Cost		remote;
	Cost		startup;
	Cost		total;
	ListCell   *lc;

	/* Only the LIMIT is left to do (order_limit.c). */
	if (stage == UPPERREL_FINAL)
	{
		afdw_add_final_path(root, input, output, (FinalPathExtraData *) extra);
		return;
	}
	if ((stage != UPPERREL_GROUP_AGG && stage != UPPERREL_PARTIAL_GROUP_AGG) ||
		output->fdw_private != NULL || ifp == NULL ||
		(input->reloptkind != RELOPT_BASEREL &&
		 input->reloptkind != RELOPT_OTHER_MEMBER_REL &&
		 input->reloptkind != RELOPT_JOINREL &&
		 input->reloptkind != RELOPT_OTHER_JOINREL) ||
		ifp->input_rel != NULL || ifp->local_conds != NIL ||
		!bms_is_empty(input->lateral_relids) ||
		root->parse->groupingSets != NIL || root->hasPseudoConstantQuals)
		return;

	gfp = afdw_derived_relinfo(ifp);
	gfp->input_rel = input;
	gfp->partial = partial;
	if (!grouping_ok(root, input, output, (List *) gx->havingQual, partial, gfp))
		return;
	output->fdw_private = gfp;

	/*
	 * The groups: one without GROUP BY, else the planner's estimate, of
	 * the query's grouping items (a column grouping_ok added has one value
	 * a group).
	 */
	foreach(lc, gfp->group_positions)
	{
		TargetEntry *tle = list_nth_node(TargetEntry, gfp->grouped_tlist,
										 lfirst_int(lc) - 1);

		if (get_sortgroupref_clause_noerr(tle->ressortgroupref,
										  root->parse->groupClause) != NULL)
			group_exprs = lappend(group_exprs, tle->expr);
	}
	group_exprs = list_concat(group_exprs, gfp->group_values);
	ngroups = group_exprs == NIL ? 1 :
		Min(estimate_num_groups(root, group_exprs, input->rows, NULL, NULL),
			input->rows);
	if (gfp->having != NIL || gfp->local_having != NIL)
		ngroups = clamp_row_est(ngroups *
								clauselist_selectivity(root,
													   list_concat_copy(gfp->having,
																		gfp->local_having),
													   0, JOIN_INNER, NULL));

	if (ifp->remote_estimated)
		remote = ifp->remote_total;
	else
		remote = seq_page_cost * input->pages + cpu_tuple_cost * input->tuples;
	startup = ifp->fdw_startup_cost;
	total = startup + remote + (ifp->fdw_tuple_cost + cpu_tuple_cost) * ngroups +
		output->reltarget->cost.per_tuple * ngroups;

	afdw_offer_path(root, output, (Path *)
			 afdw_upper_path(root, output, output->reltarget, ngroups,
									   startup, total, NIL, NULL, NIL));
	afdw_add_sorted_grouping_path(root, output, ngroups, startup, total);
}

/*
 * afdw_grouping_plan
 *		The ForeignScan of a remote aggregate: the plan's TLIST is computed
 *		from the remote select list, its scan target list.
 */
ForeignScan *
afdw_grouping_plan(PlannerInfo *root, RelOptInfo *rel, List *tlist,
				   Plan *outer_plan)
{
	AfdwRelInfo *gfp = (AfdwRelInfo *) rel->fdw_private;
	AfdwRelInfo *ifp = (AfdwRelInfo *) gfp->input_rel->fdw_private;
	List	   *retrieved_attrs = NIL;
	List	   *params = NIL;
	StringInfoData sql;
	Relation	frel;
	const char *what;
	bool		stream;
	int			key_at;
	bool		key_where;
	List	   *key_slots = NIL;
	ForeignScan *scan;

	/* Read to the end, as a scan with no LIMIT is (scan_paths.c). */
	if (ifp->fetch_mode == AFDW_FETCH_AUTO)
		stream = root->tuple_fraction <= 0;
	else
		stream = (ifp->fetch_mode == AFDW_FETCH_STREAM);

	/* A foreign table, or a remote join (join_paths.c) of them. */
	initStringInfo(&sql);
	if (ifp->outer_rel == NULL)
	{
		frel = table_open(ifp->table->relid, NoLock);
		what = quote_identifier(RelationGetRelationName(frel));
	}
	else
	{
		frel = NULL;
		what = psprintf("(%s)", ifp->relations);
	}
	afdw_deparse_grouped_select(&sql, root, gfp->input_rel, frel,
								gfp->grouped_tlist, ifp->remote_conds,
								gfp->group_positions, gfp->group_values,
								gfp->having,
								gfp->partial, &params, &key_at, &key_where);

	/*
	 * The grouping columns that may take the keys of a hash join above at
	 * run time (hash_join_keys.c): a condition on a grouping column drops whole
	 * groups and changes no other (nor what HAVING keeps of them).
	 */
	if (key_at >= 0)
		key_slots = afdw_group_key_slots(root, gfp->input_rel, frel,
										 gfp->grouped_tlist, gfp->group_positions,
										 params);
	if (frel != NULL)
		table_close(frel, NoLock);

	afdw_check_params_apart(params, gfp->grouped_tlist);
	for (int i = 1; i <= list_length(gfp->grouped_tlist); i++)
		retrieved_attrs = lappend_int(retrieved_attrs, i);

	scan = make_foreignscan(tlist, gfp->local_having, 0, params,
							afdw_make_scan_private(sql.data, retrieved_attrs,
												   ifp->fetch_size, stream, "",
												   psprintf("%s on %s",
															gfp->partial ?
															"Partial Aggregate" :
															"Aggregate", what)),
							gfp->grouped_tlist, NIL, outer_plan);
	if (key_slots != NIL)
		afdw_set_key_slots(scan, key_at, key_where, key_slots);
	return scan;
}

/*
 * not_builtin
 *		check_functions_in_node callback: true for a function that is not
 *		built in.
 */
static bool
not_builtin(Oid funcid, void *context pg_attribute_unused())
{
	return !afdw_is_builtin(funcid);
}

/*
 * builtin_immutable_walker
 *		expression_tree_walker callback: true on a node that calls a
 *		function that is not built in, or on a subquery, but that of an
 *		EXISTS, IN or ANY that the planner pulls up into a semi- or
 *		anti-join (a plain subquery whose conditions pass too).
 */
static bool builtin_immutable(Node *node);

static bool
builtin_immutable_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubLink))
	{
		SubLink    *sl = (SubLink *) node;
		Query	   *sub = (Query *) sl->subselect;

		if ((sl->subLinkType != EXISTS_SUBLINK && sl->subLinkType != ANY_SUBLINK) ||
			sub->hasAggs || sub->groupClause != NIL || sub->havingQual != NULL ||
			sub->hasWindowFuncs || sub->hasTargetSRFs || sub->setOperations != NULL ||
			sub->limitCount != NULL || sub->limitOffset != NULL ||
			sub->cteList != NIL)
			return true;
		return !builtin_immutable(sub->jointree->quals) ||
			!builtin_immutable(sl->testexpr);
	}
	if (IsA(node, Query))
		return true;
	if (check_functions_in_node(node, not_builtin, NULL))
		return true;
	return expression_tree_walker(node, builtin_immutable_walker, context);
}

/*
 * builtin_immutable
 *		True if NODE calls only built-in immutable functions (and has no
 *		subquery): a first sign that an aggregate can be sent, checked
 *		before planning, when the tables are not known yet.
 */
static bool
builtin_immutable(Node *node)
{
	return !contain_mutable_functions(node) &&
		!builtin_immutable_walker(node, NULL);
}

/*
 * quals_builtin_immutable
 *		builtin_immutable for QUALS, a level's WHERE conditions before
 *		planning, except that an uncorrelated IN (= ANY) among its top
 *		AND'ed conditions counts by its test only.
 *
 * The planner turns such an IN into a join with its subquery, planned as a
 * level of its own (which search_query looks at as any other, grouped or
 * not): it is not left among this level's conditions.  The first query of
 * a session, which the hook does not wrap, is looked at after that pull-up
 * (afdw_late_partitionwise); without this rule a later query with a
 * grouped IN subquery (GROUP BY ... HAVING) had another plan.
 */
static bool
quals_builtin_immutable(Node *quals)
{
	if (quals == NULL)
		return true;
	if (is_andclause(quals))
	{
		ListCell   *lc;

		foreach(lc, ((BoolExpr *) quals)->args)
		{
			if (!quals_builtin_immutable(lfirst(lc)))
				return false;
		}
		return true;
	}
	if (IsA(quals, SubLink) && ((SubLink *) quals)->subLinkType == ANY_SUBLINK &&
		!contain_vars_of_level(((SubLink *) quals)->subselect, 1))
		return builtin_immutable(((SubLink *) quals)->testexpr);
	return builtin_immutable(quals);
}

/*
 * aggref_without_partial_form
 *		expression_tree_walker callback: true on an aggregate of this level
 *		that the remote servers cannot compute partially.
 */
static bool
aggref_without_partial_form(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		Aggref	   *agg = (Aggref *) node;

		if (agg->agglevelsup != 0)
			return false;
		return afdw_partial_form(agg) == AFDW_PARTIAL_NONE ||
			agg->aggdistinct != NIL || agg->aggorder != NIL ||
			!builtin_immutable((Node *) agg->args) ||
			!builtin_immutable((Node *) agg->aggfilter);
	}
	if (IsA(node, SubLink) || IsA(node, Query))
		return false;
	return expression_tree_walker(node, aggref_without_partial_form, context);
}

/*
 * partitioned_relids_walker
 *		expression_tree_walker callback: add to *RELIDS (a List of OIDs) the
 *		partitioned tables of the subquery of each EXISTS, IN or ANY under
 *		NODE (a level's conditions), and of theirs: the planner pulls such a
 *		subquery up into a semi- or anti-join of the level, where its tables
 *		join the level's own.
 */
static bool
partitioned_relids_walker(Node *node, List **relids)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubLink))
	{
		SubLink    *sl = (SubLink *) node;

		if (sl->subLinkType == EXISTS_SUBLINK || sl->subLinkType == ANY_SUBLINK)
		{
			Query	   *sub = (Query *) sl->subselect;
			ListCell   *lc;

			foreach(lc, sub->rtable)
			{
				RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

				if (rte->rtekind == RTE_RELATION &&
					rte->relkind == RELKIND_PARTITIONED_TABLE)
					*relids = lappend_oid(*relids, rte->relid);
			}
			(void) partitioned_relids_walker(sub->jointree->quals, relids);
		}
		return partitioned_relids_walker(sl->testexpr, relids);
	}
	if (IsA(node, Query))
		return false;
	return expression_tree_walker(node, partitioned_relids_walker, relids);
}

/*
 * partitioned_relids
 *		The partitioned tables that QUERY's level may join: those of its
 *		range table, and those of the subqueries of its EXISTS, IN and ANY
 *		conditions (partitioned_relids_walker), each once per reference.
 */
static List *
partitioned_relids(Query *query)
{
	List	   *relids = NIL;
	ListCell   *lc;

	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		if (rte->rtekind == RTE_RELATION && rte->relkind == RELKIND_PARTITIONED_TABLE)
			relids = lappend_oid(relids, rte->relid);
	}
	/* No SubLink at this level (most queries): nothing to pull up, no walk. */
	if (query->hasSubLinks)
		(void) partitioned_relids_walker((Node *) query->jointree, &relids);
	return relids;
}

/*
 * async_partitioned_tables
 *		How many of the partitioned tables RELIDS have a partition of
 *		async_fdw, at any depth.
 */
static int
async_partitioned_tables(List *relids)
{
	ListCell   *lc;
	int			count = 0;

	foreach(lc, relids)
	{
		if (afdw_table_reads_ours(lfirst_oid(lc), true))
			count++;
	}
	return count;
}

/* What the planner hook found in a query and its subqueries. */
typedef struct PartialSearch
{
	bool		wanted;			/* a level would aggregate async_fdw
								 * partitions partially */
	bool		refused;		/* a level aggregates async_fdw partitions
								 * but not partially */
	bool		joins;			/* a level joins partitioned tables with
								 * async_fdw partitions */
} PartialSearch;

/*
 * search_query
 *		Look at every level of NODE (a Query, or an expression holding
 *		subqueries) for an aggregate over async_fdw partitions.
 */
static bool
search_query(Node *node, PartialSearch *ps)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *q = (Query *) node;
		bool		aggregates = (q->hasAggs || q->groupClause != NIL);
		List	   *relids = partitioned_relids(q);
		int			partitioned = list_length(relids);

		/*
		 * The partitions are looked at only where they could matter: two
		 * tables that may join (an EXISTS's or IN's subquery joins the
		 * level once the planner pulls it up), or one aggregated.
		 */
		if (partitioned >= 2 || (partitioned == 1 && aggregates))
			partitioned = async_partitioned_tables(relids);
		else
			partitioned = 0;

		if (partitioned >= 2)
			ps->joins = true;
		if (aggregates && partitioned > 0)
		{
			List	   *group_exprs = get_sortgrouplist_exprs(q->groupClause,
															  q->targetList);

			if (q->groupingSets == NIL &&
				!aggref_without_partial_form((Node *) q->targetList, NULL) &&
				!aggref_without_partial_form(q->havingQual, NULL) &&
				builtin_immutable((Node *) group_exprs) &&
				quals_builtin_immutable(q->jointree->quals))
				ps->wanted = true;
			else
				ps->refused = true;
		}
		return query_tree_walker(q, search_query, ps, 0);
	}
	return expression_tree_walker(node, search_query, ps);
}

/*
 * plan_query
 *		Plan QUERY with partitionwise aggregation on when it aggregates a
 *		partitioned table with async_fdw partitions, each of whose
 *		aggregates the shards can compute partially (see the file's
 *		comment), and with partitionwise join on when it joins two such
 *		tables (join_paths.c).
 */
static PlannedStmt *
plan_query(Query *query, const char *query_string, int cursor_options,
		   ParamListInfo bound_params)
{
	PlannedStmt *result;
	bool		saved = enable_partitionwise_aggregate;
	bool		saved_join = enable_partitionwise_join;
	bool		saved_wrapped = planner_wrapped;
	PartialSearch ps = {false, false, false};

	if ((afdw_partitionwise_aggregate && !enable_partitionwise_aggregate) ||
		(afdw_partitionwise_join && !enable_partitionwise_join))
	{
		(void) search_query((Node *) query, &ps);
		if (afdw_partitionwise_aggregate && ps.wanted && !ps.refused)
			enable_partitionwise_aggregate = true;
		if (afdw_partitionwise_join && ps.joins)
			enable_partitionwise_join = true;
	}
	PG_TRY();
	{
		int			slots = afdw_key_slots_made();
		uint64		initplans = afdw_initplans_sent();

		planner_wrapped = true;
		if (prev_planner_hook != NULL)
			result = prev_planner_hook(query, query_string, cursor_options,
									   bound_params);
		else
			result = standard_planner(query, query_string, cursor_options,
									  bound_params);
		/* Scans that may take a hash join's keys: give them (hash_join_keys.c). */
		if (afdw_key_slots_made() != slots)
			afdw_attach_key_collectors(result);
		key_slots_seen = afdw_key_slots_made();
		/* Initplans written into remote queries: start no scan of theirs. */
		if (afdw_initplans_sent() != initplans)
			afdw_mark_unread_initplans(result);
		initplans_seen = afdw_initplans_sent();
	}
	PG_FINALLY();
	{
		/* A planning nested in another returns to the outer one's state. */
		planner_wrapped = saved_wrapped;
		enable_partitionwise_aggregate = saved;
		enable_partitionwise_join = saved_join;
	}
	PG_END_TRY();
	return result;
}

/*
 * afdw_planner
 *		Plan QUERY (plan_query); if it has correlated aggregate subqueries
 *		that decorrelate.c can make joins, plan it that way too, and keep
 *		the cheaper plan.
 */
static PlannedStmt *
afdw_planner(Query *query, const char *query_string, int cursor_options,
			 ParamListInfo bound_params)
{
	Query	   *joined = afdw_decorrelate(query);
	PlannedStmt *as_joins;
	PlannedStmt *as_written;

	if (joined == NULL)
		return plan_query(query, query_string, cursor_options, bound_params);
	as_joins = plan_query(joined, query_string, cursor_options, bound_params);
	as_written = plan_query(query, query_string, cursor_options, bound_params);
	if (as_joins->planTree->total_cost < as_written->planTree->total_cost)
		return as_joins;
	return as_written;
}

/*
 * afdw_executor_start
 *		Give the scans of the plan made by the planning that loaded
 *		async_fdw (the planner hook did not wrap it) the keys of the hash
 *		joins above them, and keep its initplans that nothing reads from
 *		starting, as afdw_planner does for later plans; then start the
 *		executor.
 *
 * The plan is the next to start: a statement runs (or is explained) just after
 * it is planned.  Giving keys or marking twice changes nothing
 * (hash_join_keys.c, initplans.c), so a plan made and never run costs the
 * next one only a look.
 */
static void
afdw_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (afdw_key_slots_made() != key_slots_seen)
	{
		key_slots_seen = afdw_key_slots_made();
		afdw_attach_key_collectors(queryDesc->plannedstmt);
	}
	if (afdw_initplans_sent() != initplans_seen)
	{
		initplans_seen = afdw_initplans_sent();
		afdw_mark_unread_initplans(queryDesc->plannedstmt);
	}
	if (prev_executor_start != NULL)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/*
 * mark_partitionwise_join
 *		Let the partitioned tables of ROOT, and their partitions already
 *		sized, take part in partitionwise joins, as the planner marks them
 *		when enable_partitionwise_join is on before their sizes are set (and
 *		with the same rule: no whole-row reference to the table).
 */
static void
mark_partitionwise_join(PlannerInfo *root)
{
	for (int i = 1; i < root->simple_rel_array_size; i++)
	{
		RelOptInfo *rel = root->simple_rel_array[i];
		RelOptInfo *top;
		int			i2;

		if (rel == NULL)
			continue;
		top = rel;
		if (rel->reloptkind == RELOPT_OTHER_MEMBER_REL &&
			bms_get_singleton_member(rel->top_parent_relids, &i2))
			top = root->simple_rel_array[i2];
		if (top != NULL && top->reloptkind == RELOPT_BASEREL &&
			root->simple_rte_array[top->relid]->relkind == RELKIND_PARTITIONED_TABLE &&
			top->attr_needed[InvalidAttrNumber - top->min_attr] == NULL)
			rel->consider_partitionwise_join = true;
	}
}

/*
 * afdw_late_partitionwise
 *		For the planning of the query that loaded async_fdw (the planner
 *		hook did not wrap it), do what the hook does, from the size estimate
 *		of ROOT's first foreign table, before the planner looks at
 *		partitionwise joins of the tables not sized yet and at aggregates.
 */
void
afdw_late_partitionwise(PlannerInfo *root)
{
	PartialSearch ps = {false, false, false};
	PlannerInfo *top = root;

	if (planner_wrapped || late_checked)
		return;
	late_checked = true;
	late_level = GetCurrentTransactionNestLevel();
	while (top->parent_root != NULL)
		top = top->parent_root;
	(void) search_query((Node *) top->parse, &ps);
	late_saved_aggregate = enable_partitionwise_aggregate;
	late_saved_join = enable_partitionwise_join;
	if (afdw_partitionwise_aggregate && ps.wanted && !ps.refused)
	{
		enable_partitionwise_aggregate = true;
		late_set = true;
	}
	if (afdw_partitionwise_join && ps.joins && !enable_partitionwise_join)
	{
		enable_partitionwise_join = true;
		late_set = true;
		mark_partitionwise_join(root);
	}
}

/*
 * afdw_late_partitionwise_end
 *		Restore what afdw_late_partitionwise set: at the end of the top
 *		level's planning, and at the end of a transaction or subtransaction
 *		whose planning failed on the way.
 */
static void
afdw_late_partitionwise_end(void)
{
	if (late_set)
	{
		enable_partitionwise_aggregate = late_saved_aggregate;
		enable_partitionwise_join = late_saved_join;
	}
	late_set = false;
	late_checked = false;
}

/*
 * upper_xact_callback
 *		A transaction that ends ends a planning that failed on the way (an
 *		error caught in a subtransaction, or the transaction's own): restore
 *		the planner settings (registered at load, as the planning may fail
 *		before any connection exists).
 */
static void
upper_xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
		afdw_late_partitionwise_end();
}

/*
 * upper_subxact_callback
 *		A subtransaction that aborts at or above the level of the planning
 *		afdw_late_partitionwise looked at ends that planning (a savepoint
 *		rolled back after it failed); one deeper (a function that the
 *		planning ran and that caught its own error) does not.
 */
static void
upper_subxact_callback(SubXactEvent event,
					   SubTransactionId mySubid pg_attribute_unused(),
					   SubTransactionId parentSubid pg_attribute_unused(),
					   void *arg pg_attribute_unused())
{
	if (event == SUBXACT_EVENT_ABORT_SUB && late_checked &&
		GetCurrentTransactionNestLevel() <= late_level)
		afdw_late_partitionwise_end();
}

/*
 * afdw_upper_paths
 *		create_upper_paths_hook: the top level's final stage ends the
 *		planning of a query that afdw_late_partitionwise looked at.
 */
static void
afdw_upper_paths(PlannerInfo *root, UpperRelationKind stage,
				 RelOptInfo *input_rel, RelOptInfo *output_rel, void *extra)
{
	if (prev_upper_paths_hook != NULL)
		prev_upper_paths_hook(root, stage, input_rel, output_rel, extra);
	if (stage == UPPERREL_FINAL && root->parent_root == NULL && late_checked)
		afdw_late_partitionwise_end();
}

/*
 * afdw_upper_init
 *		Define async_fdw.partitionwise_aggregate and
 *		async_fdw.partitionwise_join, install the planner hook and the upper
 *		paths hook, and register the callbacks of transaction ends (from
 *		_PG_init).
 */
void
afdw_upper_init(void)
{
	DefineCustomBoolVariable("async_fdw.partitionwise_aggregate",
							 "Aggregates partitioned tables with async_fdw partitions partition by partition.",
							 "While such a query is planned, enable_partitionwise_aggregate is on, so that each shard computes its partition's aggregates, partially when the GROUP BY does not hold the partition key.",
							 &afdw_partitionwise_aggregate,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("async_fdw.partitionwise_join",
							 "Joins partitioned tables with async_fdw partitions partition by partition.",
							 "While a query joining such tables is planned, enable_partitionwise_join is on, so that partitions with the same bounds on one server join there, every server at the same time.",
							 &afdw_partitionwise_join,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	prev_planner_hook = planner_hook;
	planner_hook = afdw_planner;
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = afdw_executor_start;
	prev_upper_paths_hook = create_upper_paths_hook;
	create_upper_paths_hook = afdw_upper_paths;
	RegisterXactCallback(upper_xact_callback, NULL);
	RegisterSubXactCallback(upper_subxact_callback, NULL);
}
