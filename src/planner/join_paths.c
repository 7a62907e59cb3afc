/*-------------------------------------------------------------------------
 *
 * join_paths.c
 *		Joins computed by the remote server.
 *
 * Two foreign tables of async_fdw (or joins of them) on the same server, read
 * through the same user mapping, join on that server: inner, left, right and
 * full joins, as postgres_fdw does, and semi- and anti-joins (EXISTS and NOT
 * EXISTS, the inner side in a subquery), when every condition of its sides can
 * be sent, and every condition of the join but those that filter its result
 * (any of an inner join's, those pushed down to an outer join), which may be
 * checked locally on the joined rows: such a join is then no side of another.
 * The remote query names each table r<n>, n its range table index, and places
 * each side's own conditions where they keep their meaning: the WHERE clause
 * around the join for an inner join's sides and an outer join's preserved
 * side, the ON clause for the nullable side; a full join reads a side with
 * conditions as a subquery (deparse_statements.c).  It returns the columns the
 * query reads; the expressions of the query's target, placeholders computed at
 * the join included, are computed locally.  Joins of partitions (partitionwise
 * join, turned on by aggregate_paths.c's planner hook for queries joining
 * partitioned tables of async_fdw) run as such scans under the asynchronous
 * Append, every shard joining at the same time.
 *
 * The join of all the tables of an UPDATE ... FROM or DELETE ... USING of
 * one foreign table becomes the remote statement itself (direct_modify.c) when
 * all of it can be sent; otherwise joins holding that table are scans that
 * lock its rows and return their ctids, by which modify_rows.c changes them.
 *
 * Under row marks (SELECT ... FOR UPDATE or FOR SHARE, the other tables of
 * an UPDATE or DELETE) the remote SELECT locks the rows of the tables the
 * query locks (FOR UPDATE OF r<n>) and returns the whole row of each table
 * with a row mark, as postgres_fdw does.  When a concurrent change makes
 * the executor recheck a joined row (EvalPlanQual), the join is made again
 * locally from the rechecked rows of its tables: the local join plan
 * (GetExistingLocalJoinPath) is the ForeignScan's outer plan, run only
 * then (scan.c's afdwRecheckForeignScan); its scans send nothing.  The
 * ForeignScan checks the join's local conditions on the remade row, as on
 * the others, so the local join plan leaves those it would check at its
 * top to it.
 *
 * A column of a semi-join's inner side that PostgreSQL keeps above the
 * join, for a join condition derived from an equivalence class, is
 * returned as an equal column the remote query can name
 * (afdw_join_select_var).  Once a join of one server's tables (or of
 * partitions, each on its server) can be made remotely, the local nested
 * loops that would look its rows up one remote query at a time are
 * dropped from the contest (afdw_join_pathlist, the setting
 * async_fdw.prefer_remote_joins).
 *
 * Not pushed: joins whose target holds anything but columns, whole rows
 * and ctids of their tables and placeholders computed at the join when
 * their paths are made, joins inside which a placeholder is computed,
 * joins with lateral references, joins having a semi- or anti-join as a
 * side (a condition of its outer side, not a FROM item), joins of a query
 * with a condition on no table (checked above the scans, which a remote
 * join replaces).
 * (In PostgreSQL 15 an anti-join's pushed-down conditions, filters on its
 * result, only read the outer side: they go in the WHERE clause.)
 *
 * Neighbours: shippable.c says what may be sent, deparse_statements.c writes
 * the remote SELECT (afdw_deparse_join_select), the handler (async_fdw.c)
 * hands PostgreSQL the planner's callbacks for join relations here, scan.c
 * runs the plans as scans whose columns are the remote select list.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/placeholder.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "async_fdw.h"

/* async_fdw.prefer_remote_joins */
static bool afdw_prefer_remote_joins = true;
static set_join_pathlist_hook_type prev_join_pathlist_hook = NULL;

static void set_recheck_paths(PlannerInfo *root, RelOptInfo *joinrel,
							  Path *epq_path);
static void offer_join_paths(PlannerInfo *root, RelOptInfo *joinrel,
							 AfdwRelInfo *jfp);
static bool is_ours(RelOptInfo *rel);
static bool joined_by_us(RelOptInfo *rel);

/*
 * side_conditions
 *		The conditions a side of a join applies to its own rows, as
 *		expressions: a base relation's remote conditions, a join's WHERE;
 *		none of a semi- or anti-join, a subquery that applies its own
 *		(deparse_join.c).
 */
static List *
side_conditions(RelOptInfo *side)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) side->fdw_private;

	if (fp->outer_rel != NULL &&
		(fp->jointype == JOIN_SEMI || fp->jointype == JOIN_ANTI))
		return NIL;
	if (fp->outer_rel != NULL)
		return list_copy(fp->where_conds);
	return extract_actual_clauses(fp->remote_conds, false);
}

/*
 * side_name
 *		How EXPLAIN names a side of a join: the table's name and alias, or
 *		the description of a join, in parentheses.
 */
static char *
side_name(PlannerInfo *root, RelOptInfo *side)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) side->fdw_private;
	RangeTblEntry *rte;
	char	   *name;

	if (fp->outer_rel != NULL)
		return psprintf("(%s)", fp->relations);
	rte = planner_rt_fetch(side->relid, root);
	name = get_rel_name(rte->relid);
	if (rte->eref != NULL && strcmp(rte->eref->aliasname, name) != 0)
		return psprintf("%s %s", quote_identifier(name),
						quote_identifier(rte->eref->aliasname));
	return pstrdup(quote_identifier(name));
}

/*
 * join_side_ok
 *		Whether SIDE is a relation of ours that a remote join may read: a
 *		foreign table whose conditions are all sent, or such a join.  A
 *		semi- or anti-join is read as a subquery (deparse_join.c), which
 *		a query that locks rows or changes them cannot lock through: only
 *		with SEMI_OK.
 */
static bool
join_side_ok(RelOptInfo *side, bool semi_ok)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) side->fdw_private;

	if (!semi_ok && fp != NULL && fp->outer_rel != NULL &&
		(fp->jointype == JOIN_SEMI || fp->jointype == JOIN_ANTI))
		return false;
	return fp != NULL && fp->input_rel == NULL && fp->local_conds == NIL &&
		bms_is_empty(side->lateral_relids);
}

/*
 * placeholders_ok
 *		Whether no expression of the query that an outer join may null
 *		(a placeholder) is computed inside JOINREL, below its top: the
 *		remote select list holds columns only.  One computed at JOINREL
 *		itself is computed locally from its columns, as the target is.
 */
static bool
placeholders_ok(PlannerInfo *root, RelOptInfo *joinrel)
{
	Relids		relids = IS_OTHER_REL(joinrel) ? joinrel->top_parent_relids :
		joinrel->relids;
	ListCell   *lc;

	foreach(lc, root->placeholder_list)
	{
		PlaceHolderInfo *phinfo = (PlaceHolderInfo *) lfirst(lc);

		if (bms_is_subset(phinfo->ph_eval_at, relids) &&
			!bms_equal(phinfo->ph_eval_at, relids))
			return false;
	}
	return true;
}

/*
 * target_ok
 *		Whether the join's target holds only columns of its tables, their
 *		whole rows and their ctids (row marks', or the query's), none of a
 *		semi- or anti-join's inner side (read in an EXISTS) unless HIDDEN_OK
 *		(select_list_ok then finds each an equal column), and values of
 *		the query computed at this join (placeholders: the ForeignScan
 *		computes them from the columns the remote join returns).
 *
 * A placeholder computed below the join must not be computed again from
 * the columns: an outer join between would have made it null, not the
 * expression of null columns.
 */
static bool
target_ok(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *innerrel,
		  JoinType jointype, bool hidden_ok)
{
	ListCell   *lc;

	foreach(lc, joinrel->reltarget->exprs)
	{
		Var		   *var = (Var *) lfirst(lc);

		if (IsA(var, PlaceHolderVar))
		{
			PlaceHolderVar *phv = (PlaceHolderVar *) var;

			if (phv->phlevelsup != 0 || jointype == JOIN_SEMI || jointype == JOIN_ANTI ||
				!bms_equal(afdw_placeholder_info(root, phv)->ph_eval_at,
						   joinrel->relids))
				return false;
			continue;
		}
		if (!IsA(var, Var) || var->varlevelsup != 0 ||
			(var->varattno < 0 && var->varattno != SelfItemPointerAttributeNumber) ||
			!bms_is_member(var->varno, joinrel->relids))
			return false;
		if ((jointype == JOIN_SEMI || jointype == JOIN_ANTI) && !hidden_ok &&
			bms_is_member(var->varno, innerrel->relids))
			return false;
	}
	return true;
}

/*
 * select_list_ok
 *		Whether the remote query of JOINREL (its AfdwRelInfo set) can
 *		return every column its scan reads: those of its target and of its
 *		conditions checked locally, a column of a semi- or anti-join's
 *		inner side as an equal one (afdw_join_select_var).
 */
static bool
select_list_ok(PlannerInfo *root, RelOptInfo *joinrel, List *local_conds)
{
	List	   *vars;
	ListCell   *lc;

	vars = pull_var_clause((Node *) joinrel->reltarget->exprs,
						   PVC_RECURSE_PLACEHOLDERS);
	vars = list_concat(vars,
					   pull_var_clause((Node *) extract_actual_clauses(local_conds, false),
									   PVC_RECURSE_PLACEHOLDERS));
	foreach(lc, vars)
	{
		Var		   *var = lfirst_node(Var, lc);

		if (var->varlevelsup == 0 &&
			afdw_join_select_var(root, joinrel, var) == NULL)
			return false;
	}
	return true;
}

/*
 * condition_may_stay_local
 *		Whether RI, a condition of JOINREL (a join of type JOINTYPE) that
 *		cannot be sent, may be checked locally on the joined rows: a filter
 *		of the join's result (any condition of an inner join, a condition
 *		pushed down to an outer join), not an outer join's ON condition,
 *		which decides which rows are null-extended.  Not for a semi- or
 *		anti-join.  Under row marks, the ForeignScan checks it on the rows
 *		its local join plan remakes too; the join of an UPDATE or DELETE
 *		that has one is a scan, never the remote statement
 *		(afdw_join_modify_ok).
 */
static bool
condition_may_stay_local(RestrictInfo *ri, RelOptInfo *joinrel,
						 JoinType jointype)
{
	if (jointype == JOIN_SEMI || jointype == JOIN_ANTI)
		return false;
	return jointype == JOIN_INNER || RINFO_IS_PUSHED_DOWN(ri, joinrel->relids);
}

/*
 * remote_costs
 *		What reading REL costs the remote server, before its first row
 *		(*STARTUP) and in all (*TOTAL): its scan, or its join.
 */
static void
remote_costs(RelOptInfo *rel, Cost *startup, Cost *total)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;

	if (fp->remote_estimated)
	{
		*startup = fp->remote_startup;
		*total = fp->remote_total;
		return;
	}
	*startup = 0;
	*total = seq_page_cost * rel->pages + cpu_tuple_cost * rel->tuples;
}

/*
 * join_kind
 *		How EXPLAIN names a join of JOINTYPE ("INNER JOIN", ...), or NULL
 *		for a join type that is not sent.
 */
static const char *
join_kind(JoinType jointype)
{
	switch (jointype)
	{
		case JOIN_INNER:
			return "INNER JOIN";
		case JOIN_LEFT:
			return "LEFT JOIN";
		case JOIN_RIGHT:
			return "RIGHT JOIN";
		case JOIN_FULL:
			return "FULL JOIN";
		case JOIN_SEMI:
			return "SEMI JOIN";
		case JOIN_ANTI:
			return "ANTI JOIN";
		default:
			return NULL;
	}
}

/*
 * split_join_clauses
 *		Sort the conditions of JOINREL's join of JOINTYPE (EXTRA's
 *		restrictlist) into JFP's gating and local conditions, *ON and
 *		*WHERE; false when one can be neither sent nor checked locally.
 *
 * Join clauses go in ON; for an outer join, conditions pushed down to
 * it filter its result (WHERE).  One that cannot be sent may be checked
 * locally if it filters the joined rows.
 */
static bool
split_join_clauses(PlannerInfo *root, RelOptInfo *joinrel, JoinType jointype,
				   JoinPathExtraData *extra, AfdwRelInfo *jfp,
				   List **on, List **where)
{
	ListCell   *lc;

	foreach(lc, extra->restrictlist)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		/* Checked once above the join, where the core planner does. */
		if (ri->pseudoconstant && afdw_gates_join_pseudoconstants())
		{
			jfp->gating_conds = lappend(jfp->gating_conds, ri);
			continue;
		}
		if (!afdw_is_shippable(root, joinrel, ri->clause))
		{
			if (!condition_may_stay_local(ri, joinrel, jointype))
				return false;
			jfp->local_conds = lappend(jfp->local_conds, ri);
			continue;
		}
		if (IS_OUTER_JOIN(jointype) && RINFO_IS_PUSHED_DOWN(ri, joinrel->relids))
			*where = lappend(*where, ri->clause);
		else
			*on = lappend(*on, ri->clause);
	}
	return true;
}

/*
 * place_side_conditions
 *		Add the own conditions of the sides OUTERREL and INNERREL of a join
 *		of JOINTYPE to *ON or *WHERE, where they keep their meaning; false
 *		when the remote UPDATE or DELETE of the join (MODIFY) could not
 *		write them.
 */
static bool
place_side_conditions(RelOptInfo *outerrel, RelOptInfo *innerrel,
					  JoinType jointype, bool modify, List **on, List **where)
{
	AfdwRelInfo *ofp = (AfdwRelInfo *) outerrel->fdw_private;
	AfdwRelInfo *ifp = (AfdwRelInfo *) innerrel->fdw_private;
	List	   *outer_conds;
	List	   *inner_conds;

	outer_conds = side_conditions(outerrel);
	inner_conds = side_conditions(innerrel);
	switch (jointype)
	{
		case JOIN_INNER:
			*where = list_concat(*where, list_concat(outer_conds, inner_conds));
			break;
		case JOIN_LEFT:
		case JOIN_SEMI:
		case JOIN_ANTI:
			/* The inner side's conditions go in the EXISTS for the last two. */
			*where = list_concat(*where, outer_conds);
			*on = list_concat(*on, inner_conds);
			break;
		case JOIN_RIGHT:
			*where = list_concat(*where, inner_conds);
			*on = list_concat(*on, outer_conds);
			break;
		default:

			/*
			 * A full join filters a side before joining it: a side with
			 * conditions becomes a subquery (deparse_statements.c), which the remote
			 * UPDATE or DELETE of a join does not write.
			 */
			if (modify && ((outer_conds != NIL && ofp->outer_rel != NULL) ||
						   (inner_conds != NIL && ifp->outer_rel != NULL)))
				return false;
			break;
	}
	return true;
}

/*
 * cost_remote_join
 *		Set in JFP the costs of JOINREL's remote join of OUTERREL and
 *		INNERREL (of JOINTYPE, with the conditions ON and WHERE): those of
 *		the remote server, and those of its paths.
 */
static void
cost_remote_join(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel,
				 RelOptInfo *innerrel, JoinType jointype,
				 JoinPathExtraData *extra, AfdwRelInfo *jfp,
				 List *on, List *where)
{
	Cost		o_startup;
	Cost		o_total;
	Cost		i_startup;
	Cost		i_total;
	double		sent;
	Cost		startup;
	Cost		total;

	/*
	 * Conditions checked locally filter the rows the remote server sends:
	 * it sends more than the join's estimate, each checked.
	 */
	sent = joinrel->rows;
	if (jfp->local_conds != NIL)
	{
		cost_qual_eval(&jfp->local_conds_cost, jfp->local_conds, root);
		jfp->local_conds_sel = clauselist_selectivity(root, jfp->local_conds, 0,
													  jointype, extra->sjinfo);
		sent = clamp_row_est(joinrel->rows / Max(jfp->local_conds_sel, 1e-10));
	}

	/*
	 * Both sides read, the join's comparisons, the joined rows sent: the
	 * first row comes once both sides have started (a LIMIT may stop the
	 * join early), unless the remote server sorts the rows first.
	 */
	remote_costs(outerrel, &o_startup, &o_total);
	remote_costs(innerrel, &i_startup, &i_total);
	jfp->remote_estimated = true;
	jfp->remote_startup = o_startup + i_startup;
	jfp->remote_total = o_total + i_total +
		cpu_operator_cost * (outerrel->rows + innerrel->rows) *
		(list_length(on) + list_length(where) + 1) +
		cpu_tuple_cost * sent;

	startup = jfp->fdw_startup_cost + jfp->local_conds_cost.startup;
	total = startup + jfp->remote_total +
		(jfp->fdw_tuple_cost + cpu_tuple_cost +
		 jfp->local_conds_cost.per_tuple) * sent +
		joinrel->reltarget->cost.per_tuple * joinrel->rows;
	jfp->join_startup = startup + jfp->remote_startup;
	jfp->join_read = startup + jfp->remote_total;
	jfp->join_total = total;
}

/*
 * afdwGetForeignJoinPaths
 *		Offer the remote join of OUTERREL and INNERREL for JOINREL.
 *
 * Costed as the remote reads of both sides, the join's work over their
 * rows, and the transfer of the joined rows: less than reading both sides
 * whenever the join returns fewer rows than they hold together.
 */
void
afdwGetForeignJoinPaths(PlannerInfo *root, RelOptInfo *joinrel,
						RelOptInfo *outerrel, RelOptInfo *innerrel,
						JoinType jointype, JoinPathExtraData *extra)
{
	AfdwRelInfo *ofp = (AfdwRelInfo *) outerrel->fdw_private;
	AfdwRelInfo *ifp = (AfdwRelInfo *) innerrel->fdw_private;
	AfdwRelInfo *jfp;
	List	   *on = NIL;
	List	   *where = NIL;
	const char *kind;
	bool		modify;
	bool		semi_sides;
	Path	   *epq_path = NULL;

	/* One path per join relation, whichever pair of sides comes first. */
	if (joinrel->fdw_private != NULL)
		return;
	kind = join_kind(jointype);
	if (kind == NULL)
		return;
	/*
	 * The target of an UPDATE or DELETE is read locked, on the connection
	 * that changes it (scan.c), on its own; or in a remote join with other
	 * tables when the query is an UPDATE or DELETE of that one foreign
	 * table (afdw_direct_join_mode).  Then the join of all its tables may
	 * be the remote UPDATE ... FROM or DELETE ... USING (direct_modify.c), and
	 * other joins, and that one when it cannot, are scans that lock the
	 * target's rows and return their ctids (FOR UPDATE OF r<n>).
	 */
	modify = afdw_direct_join_mode(root);
	if (!modify && bms_overlap(joinrel->relids, root->all_result_relids))
		return;
	semi_sides = (!modify && root->rowMarks == NIL &&
				  root->parse->commandType == CMD_SELECT);
	/*
	 * Conditions that depend on no table are checked in a gating Result:
	 * before PostgreSQL 17 above the scans, which a remote join replaces,
	 * so none may be pending; from 17 on above the join too, where its
	 * path names them (gating_conds).
	 */
	if ((root->hasPseudoConstantQuals && !afdw_gates_join_pseudoconstants()) ||
		!join_side_ok(outerrel, semi_sides) || !join_side_ok(innerrel, semi_sides) ||
		ofp->server->serverid != ifp->server->serverid ||
		ofp->user->umid != ifp->user->umid ||
		!bms_is_empty(joinrel->lateral_relids) ||
		(!modify && !target_ok(root, joinrel, innerrel, jointype, true)) ||
		!placeholders_ok(root, joinrel))
		return;

	/*
	 * Rows a recheck may ask for again are joined again locally (see the
	 * file's comment): no local join plan, no remote join.
	 */
	if (!modify && (root->rowMarks != NIL ||
					root->parse->commandType == CMD_UPDATE ||
					root->parse->commandType == CMD_DELETE))
	{
		epq_path = GetExistingLocalJoinPath(joinrel);
		if (epq_path == NULL)
			return;
	}

	/*
	 * The sides' pseudoconstant conditions (PostgreSQL 17 and later) are
	 * checked above this join too, which is right only where a false one
	 * empties the join as it empties the side: not on a side that an outer
	 * join fills with nulls, nor on the inner side of an anti-join.
	 */
	if ((ifp->gating_conds != NIL && jointype != JOIN_INNER && jointype != JOIN_SEMI) ||
		(ofp->gating_conds != NIL && (jointype == JOIN_RIGHT || jointype == JOIN_FULL)))
		return;

	/* Set now: the shippability checks read the join's options. */
	jfp = afdw_derived_relinfo(ofp);
	jfp->outer_rel = outerrel;
	jfp->inner_rel = innerrel;
	jfp->jointype = jointype;
	jfp->gating_conds = list_concat_copy(ofp->gating_conds, ifp->gating_conds);
	joinrel->fdw_private = jfp;

	/* The join's conditions in ON, WHERE or kept locally, or no remote join. */
	if (!split_join_clauses(root, joinrel, jointype, extra, jfp, &on, &where))
	{
		joinrel->fdw_private = NULL;
		return;
	}

	/* The sides' own conditions, where they keep their meaning. */
	if (!place_side_conditions(outerrel, innerrel, jointype, modify, &on, &where))
	{
		joinrel->fdw_private = NULL;
		return;
	}

	jfp->join_on = on;
	jfp->where_conds = where;
	if (!modify && !select_list_ok(root, joinrel, jfp->local_conds))
	{
		joinrel->fdw_private = NULL;
		return;
	}
	jfp->relations = psprintf("%s %s %s", side_name(root, outerrel), kind,
							  side_name(root, innerrel));
	if (modify && !afdw_direct_join_ok(root, joinrel))
	{
		/* A scan, with a local join plan for rechecks as above. */
		if (!target_ok(root, joinrel, innerrel, jointype, false) ||
			(epq_path = GetExistingLocalJoinPath(joinrel)) == NULL)
			return;
	}

	cost_remote_join(root, joinrel, outerrel, innerrel, jointype, extra, jfp,
					 on, where);
	jfp->epq_path = epq_path;
	jfp->join_offered = true;
	offer_join_paths(root, joinrel, jfp);
}

/*
 * offer_join_paths
 *		Offer the remote join paths of JOINREL as costed in JFP: unsorted,
 *		in the orders of the query and of merge joins, each with the local
 *		join that rechecks a row when one is needed.
 */
static void
offer_join_paths(PlannerInfo *root, RelOptInfo *joinrel, AfdwRelInfo *jfp)
{
	afdw_offer_path(root, joinrel, (Path *)
			 afdw_join_path(root, joinrel, NULL, joinrel->rows,
							jfp->join_startup, jfp->join_total,
							NIL, NULL, jfp->epq_path, jfp->gating_conds, NIL));
	afdw_add_sorted_join_paths(root, joinrel, jfp->join_read, jfp->join_total);
	afdw_add_merge_paths(root, joinrel, jfp->join_read, jfp->join_total);
	if (jfp->epq_path != NULL)
		set_recheck_paths(root, joinrel, jfp->epq_path);
}

/*
 * is_ours
 *		True if REL, a base or join relation, is read by async_fdw.
 */
static bool
is_ours(RelOptInfo *rel)
{
	return rel->fdwroutine != NULL &&
		rel->fdwroutine->GetForeignJoinPaths == afdwGetForeignJoinPaths;
}

/*
 * joined_by_us
 *		True if REL is a join relation whose remote join of ours was
 *		offered (afdwGetForeignJoinPaths may keep its AfdwRelInfo without
 *		offering one: a join holding the target of an UPDATE that cannot
 *		be rechecked locally).
 */
static bool
joined_by_us(RelOptInfo *rel)
{
	return is_ours(rel) && rel->fdw_private != NULL &&
		((AfdwRelInfo *) rel->fdw_private)->join_offered;
}

/*
 * afdw_all_partitions_ours
 *		True if REL, a partitioned relation (base or join) split into its
 *		partitions, has only partitions of ours (pruned ones aside), each of
 *		them, when a join, a remote join of ours.
 */
bool
afdw_all_partitions_ours(RelOptInfo *rel)
{
	bool		any = false;

	if (rel->nparts <= 0 || rel->part_rels == NULL)
		return false;
	for (int i = 0; i < rel->nparts; i++)
	{
		RelOptInfo *part = rel->part_rels[i];

		if (part == NULL || IS_DUMMY_REL(part))
			continue;
		if (IS_JOIN_REL(part) ? !joined_by_us(part) : !is_ours(part))
			return false;
		any = true;
	}
	return any;
}

/*
 * only_remote
 *		True if every base relation of RELIDS is read through async_fdw: a
 *		foreign table of ours, or a partitioned table all of whose
 *		partitions are.
 */
static bool
only_remote(PlannerInfo *root, Relids relids)
{
	int			relid = -1;

	while ((relid = bms_next_member(relids, relid)) >= 0)
	{
		RelOptInfo *rel = root->simple_rel_array[relid];

		if (rel == NULL)
			return false;
		if (rel->reloptkind == RELOPT_BASEREL && rel->part_rels != NULL ?
			!afdw_all_partitions_ours(rel) : !is_ours(rel))
			return false;
	}
	return true;
}

/*
 * joined_remotely
 *		True if the join of RELIDS is a remote join of ours, or a
 *		partitionwise join each of whose partitions' joins is.
 */
static bool
joined_remotely(PlannerInfo *root, Relids relids)
{
	RelOptInfo *rel = find_join_rel(root, relids);

	if (rel == NULL)
		return false;
	if (is_ours(rel))
		return joined_by_us(rel);
	return rel->fdwroutine == NULL && afdw_all_partitions_ours(rel);
}

/*
 * lookup_side
 *		The parameterized remote scan of ours that PATH, the inner side of
 *		a nested loop, reads (through a Material or Memoize, or an Append
 *		of partitions' scans), or NULL.
 */
static Path *
lookup_side(Path *path)
{
	if (IsA(path, MaterialPath))
		path = ((MaterialPath *) path)->subpath;
	else if (IsA(path, MemoizePath))
		path = ((MemoizePath *) path)->subpath;
	if (path->param_info == NULL)
		return NULL;
	if (IsA(path, ForeignPath))
		return is_ours(path->parent) ? path : NULL;
	if (IsA(path, AppendPath))
	{
		ListCell   *lc;

		if (((AppendPath *) path)->subpaths == NIL)
			return NULL;
		foreach(lc, ((AppendPath *) path)->subpaths)
		{
			Path	   *sub = (Path *) lfirst(lc);

			if (!IsA(sub, ForeignPath) || !is_ours(sub->parent))
				return NULL;
		}
		return path;
	}
	return NULL;
}

/*
 * looks_rows_up
 *		True if PATH, a path of JOINREL, is a nested loop that sends a
 *		remote query per row of its outer side where the server could
 *		join the rows itself: its inner side is a parameterized remote scan
 *		of ours, its outer side reads remote relations only, and the join
 *		of the scan with the relations its parameters come from is a remote
 *		join of ours (JOINREL itself or a smaller one).
 */
static bool
looks_rows_up(PlannerInfo *root, RelOptInfo *joinrel, Path *path)
{
	JoinPath   *join = (JoinPath *) path;
	Path	   *lookup;

	if (!IsA(path, NestPath) || path->param_info != NULL)
		return false;
	lookup = lookup_side(join->innerjoinpath);
	if (lookup == NULL ||
		!only_remote(root, afdw_base_relids(root, join->outerjoinpath->parent)))
		return false;
	if (joined_by_us(joinrel))
		return true;
	return joined_remotely(root,
						   bms_union(lookup->parent->relids,
									 PATH_REQ_OUTER(lookup)));
}

/*
 * afdw_join_pathlist
 *		set_join_pathlist_hook: drop JOINREL's nested loops that look rows
 *		up one by one on a server where the server can join the rows itself
 *		(looks_rows_up).
 *
 * Such a nested loop sends a remote query per row of its outer side, each
 * a round trip, where a remote join sends one and the server may look the
 * rows up itself, by its indexes, at no round trip each.  The nested loop
 * wins on cost only when its outer side's row estimate is low, and that
 * estimate is least reliable where it matters most: an anti-join or a
 * semi-join with a condition besides its keys (TPC-H's Q21) is estimated
 * at one row and returns thousands, which then cost a round trip each.
 * Joins of whole tables, hash or merge, stay in the contest: they send one
 * query per table; so do nested loops whose outer side reads a local table
 * (the lookups of a few local rows' keys).  PostgreSQL calls this hook
 * after each pair of sides has added its paths, so none of those nested
 * loops remains.  When JOINREL is itself a remote join of ours, that join
 * is offered again, in case one of them had beaten it; otherwise at least
 * one path is kept (a partitionwise join's Append of remote joins comes
 * after every pair).  A parameterized path (by a relation of the query
 * outside JOINREL) is kept.
 */
static void
afdw_join_pathlist(PlannerInfo *root, RelOptInfo *joinrel,
				   RelOptInfo *outerrel, RelOptInfo *innerrel,
				   JoinType jointype, JoinPathExtraData *extra)
{
	AfdwRelInfo *jfp = NULL;
	bool		dropped = false;
	List	   *kept = NIL;
	ListCell   *lc;

	if (prev_join_pathlist_hook != NULL)
		prev_join_pathlist_hook(root, joinrel, outerrel, innerrel, jointype,
								extra);
	if (!afdw_prefer_remote_joins)
		return;
	if (is_ours(joinrel))
	{
		if (!joined_by_us(joinrel))
			return;
		jfp = (AfdwRelInfo *) joinrel->fdw_private;
	}
	/* The hook runs for every join of every query: no list unless needed. */
	foreach(lc, joinrel->pathlist)
	{
		if (looks_rows_up(root, joinrel, (Path *) lfirst(lc)))
		{
			dropped = true;
			break;
		}
	}
	if (!dropped)
		return;
	foreach(lc, joinrel->pathlist)
	{
		Path	   *path = (Path *) lfirst(lc);

		if (!looks_rows_up(root, joinrel, path))
			kept = lappend(kept, path);
	}
	if (jfp == NULL && kept == NIL)
		return;
	joinrel->pathlist = kept;
	if (jfp != NULL)
		offer_join_paths(root, joinrel, jfp);
}

/*
 * afdw_join_init
 *		At load: the setting async_fdw.prefer_remote_joins and the hook
 *		that applies it.
 */
void
afdw_join_init(void)
{
	DefineCustomBoolVariable("async_fdw.prefer_remote_joins",
							 "Joins of one server's tables go to it whole rather than as a local join looking rows up one by one.",
							 "A local nested loop whose inner side is a parameterized remote scan sends a query per outer row; when the same join can be sent as one remote query, that plan is not considered.",
							 &afdw_prefer_remote_joins,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	prev_join_pathlist_hook = set_join_pathlist_hook;
	set_join_pathlist_hook = afdw_join_pathlist;
}

/*
 * set_recheck_paths
 *		Give every remote join path of JOINREL (the sorted ones of
 *		order_limit.c too) EPQ_PATH, the local join that rechecks a row, as
 *		the path its ForeignScan's outer plan comes from: sorted as the
 *		path is.
 *
 * A recheck joins one row of each table, but the local join plan of a
 * larger remote join (GetExistingLocalJoinPath) may take this one's
 * local join in its place, as the outer side of a merge join that
 * expects the order.
 */
static void
set_recheck_paths(PlannerInfo *root, RelOptInfo *joinrel, Path *epq_path)
{
	Path	   *columns = NULL;
	ListCell   *lc;

	foreach(lc, joinrel->pathlist)
	{
		ForeignPath *path = (ForeignPath *) lfirst(lc);

		if (!IsA(path, ForeignPath) || path->fdw_outerpath != NULL)
			continue;
		if (path->path.pathkeys == NIL ||
			pathkeys_contained_in(path->path.pathkeys, epq_path->pathkeys))
		{
			path->fdw_outerpath = epq_path;
			continue;
		}

		/*
		 * The sort returns what the join under it returns: make that the
		 * columns the ForeignScan reads (afdw_join_plan), not values
		 * computed from them (placeholders), those of its local
		 * conditions included.
		 */
		if (columns == NULL)
		{
			AfdwRelInfo *jfp = (AfdwRelInfo *) joinrel->fdw_private;
			PathTarget *target = create_empty_pathtarget();

			add_new_columns_to_pathtarget(target,
										  pull_var_clause((Node *) joinrel->reltarget->exprs,
														  PVC_RECURSE_PLACEHOLDERS));
			add_new_columns_to_pathtarget(target,
										  pull_var_clause((Node *) extract_actual_clauses(jfp->local_conds, false),
														  PVC_RECURSE_PLACEHOLDERS));
			set_pathtarget_cost_width(root, target);
			columns = (Path *) create_projection_path(root, joinrel, epq_path, target);
		}
		path->fdw_outerpath = (Path *) create_sort_path(root, joinrel, columns,
														path->path.pathkeys, -1.0);
	}
}

/*
 * afdw_join_plan
 *		The ForeignScan of a remote join: its scan target list is the
 *		join's columns, which TLIST reads.
 */
ForeignScan *
afdw_join_plan(PlannerInfo *root, RelOptInfo *rel, List *tlist, Plan *outer_plan,
			   bool parameterized)
{
	AfdwRelInfo *jfp = (AfdwRelInfo *) rel->fdw_private;
	List	   *scan_tlist = NIL;
	List	   *retrieved_attrs = NIL;
	List	   *params = NIL;
	List	   *local_exprs;
	StringInfoData sql;
	ListCell   *lc;
	bool		stream;
	List	   *key_slots = NIL;
	bool		locks;
	ForeignScan *scan;

	/*
	 * The columns the plan's target reads: by now the join's target may be
	 * the query's final one (a ROW(), a cast), computed locally from them.
	 */
	scan_tlist = add_to_flat_tlist(NIL,
								   pull_var_clause((Node *) rel->reltarget->exprs,
												   PVC_RECURSE_AGGREGATES |
												   PVC_RECURSE_WINDOWFUNCS |
												   PVC_RECURSE_PLACEHOLDERS));
	/* Then those of the conditions checked locally, on the joined rows. */
	local_exprs = extract_actual_clauses(jfp->local_conds, false);
	scan_tlist = add_to_flat_tlist(scan_tlist,
								   pull_var_clause((Node *) local_exprs,
												   PVC_RECURSE_PLACEHOLDERS));
	foreach(lc, scan_tlist)
		retrieved_attrs = lappend_int(retrieved_attrs,
									  lfirst_node(TargetEntry, lc)->resno);

	/* Read to the end, as a scan with no LIMIT is (scan_paths.c). */
	if (jfp->fetch_mode == AFDW_FETCH_AUTO)
		stream = root->tuple_fraction <= 0;
	else
		stream = (jfp->fetch_mode == AFDW_FETCH_STREAM);

	/*
	 * The join that becomes the remote UPDATE or DELETE has no SELECT
	 * (afdwPlanDirectModify writes the statement).
	 */
	locks = afdw_deparse_join_locking_clause(NULL, root, rel);
	initStringInfo(&sql);
	if (!afdw_direct_join_mode(root) || !afdw_direct_join_ok(root, rel))
	{
		afdw_deparse_join_select(&sql, root, rel, scan_tlist, &params);
		afdw_check_params_apart(params, scan_tlist);

		/*
		 * The columns that may take a hash join's keys at run time
		 * (hash_join_keys.c), in the WHERE clause that ends the statement.
		 */
		if (!locks)
			key_slots = afdw_join_key_slots(root, rel, scan_tlist, params,
											parameterized);
	}

	/*
	 * Locked rows come through a cursor, as a locking scan's do (scan_paths.c);
	 * the locking clause follows the ORDER BY (afdw_join_lock_rows).
	 */
	if (locks)
		stream = false;

	/*
	 * The local join that rechecks a row returns the scan's columns, and
	 * its scans run only then.
	 */
	if (outer_plan != NULL)
	{
		/*
		 * The ForeignScan checks the local conditions on the rows it
		 * returns, rechecked ones too: the local join need not check them
		 * as well, where it checks them at its top.
		 */
		outer_plan->qual = list_difference(outer_plan->qual, local_exprs);
		if ((IsA(outer_plan, NestLoop) || IsA(outer_plan, MergeJoin) ||
			 IsA(outer_plan, HashJoin)) &&
			((Join *) outer_plan)->jointype == JOIN_INNER)
			((Join *) outer_plan)->joinqual =
				list_difference(((Join *) outer_plan)->joinqual, local_exprs);
		outer_plan = change_plan_targetlist(outer_plan, scan_tlist,
											outer_plan->parallel_safe);
		afdw_mark_recheck_only(outer_plan);
	}

	scan = make_foreignscan(tlist, local_exprs, 0, params,
							afdw_make_scan_private(sql.data, retrieved_attrs,
												   jfp->fetch_size, stream, "",
												   jfp->relations),
							scan_tlist, NIL, outer_plan);
	if (key_slots != NIL)
		afdw_set_key_slots(scan, sql.len,
						   jfp->where_conds != NIL || jfp->jointype == JOIN_SEMI ||
						   jfp->jointype == JOIN_ANTI,
						   key_slots);
	return scan;
}

/*
 * afdw_join_lock_rows
 *		Append to the remote SELECT of SCAN, the plan of REL (a remote join
 *		or aggregate) whose ORDER BY and LIMIT are written, the locking
 *		clause the query's row marks ask for; return SCAN.
 */
ForeignScan *
afdw_join_lock_rows(PlannerInfo *root, RelOptInfo *rel, ForeignScan *scan)
{
	String	   *sql = (String *) linitial(scan->fdw_private);
	StringInfoData buf;

	if (strVal(sql)[0] == '\0')
		return scan;
	initStringInfo(&buf);
	appendStringInfoString(&buf, strVal(sql));
	if (afdw_deparse_join_locking_clause(&buf, root, rel))
		linitial(scan->fdw_private) = makeString(buf.data);
	return scan;
}
