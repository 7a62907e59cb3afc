/*-------------------------------------------------------------------------
 *
 * direct_modify_plan.c
 *		The planning of a direct modification: an UPDATE or DELETE of a
 *		foreign table that the remote server runs as one statement.
 *
 * When everything the statement computes is shippable (its conditions and,
 * for an UPDATE, its new values; RETURNING is computed locally from the
 * columns the remote statement returns), the planner's ForeignScan of the
 * target becomes the remote UPDATE or DELETE (PlanDirectModify), instead of
 * a scan whose rows are changed one by one (modify_rows.c).  An UPDATE ... FROM
 * or DELETE ... USING whose tables are all foreign tables of one server
 * becomes one remote statement too, from the remote join of its tables
 * (join_paths.c offers it for this only): UPDATE t r1 ... FROM (the others).
 * The plan's private list (AfdwDirectPrivate) carries the statement to
 * direct_modify.c, which runs it.
 *
 * Neighbours: shippable.c decides what may be sent, deparse_statements.c and
 * deparse_expr.c write it (deparse_internal.h).  Planner layer.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/table.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/plancat.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "async_fdw.h"
#include "sql/deparse_internal.h"

static Plan *target_scan(Plan *plan, Index rti);
static bool plan_join_modify(PlannerInfo *root, ModifyTable *plan,
							 Index resultRelation, int subplan_index,
							 ForeignScan *fscan);
static void deparse_direct(StringInfo buf, PlannerInfo *root, CmdType operation,
						   RelOptInfo *baserel,
						   Relation rel, List *targets, List *colnos,
						   List *conds, bool returning, Bitmapset *ret_attrs,
						   List **retrieved_attrs, List **params);

/*
 * target_scan
 *		The ForeignScan of range table entry RTI that PLAN, the subplan of a
 *		ModifyTable, runs for it, or NULL if there is none to turn into a
 *		direct modification: the scan must be the subplan itself or a child
 *		of an Append there.  A Result in between is allowed only as a
 *		projection: a gating condition on it would decide whether the scan
 *		runs at all, while a direct modification is sent when the executor
 *		starts.
 */
static Plan *
target_scan(Plan *plan, Index rti)
{
	ListCell   *lc;

	if (plan == NULL)
		return NULL;
	switch (nodeTag(plan))
	{
		case T_ForeignScan:
			/* The table's scan, or a remote join of it (join_paths.c). */
			if (((ForeignScan *) plan)->scan.scanrelid == rti ||
				(((ForeignScan *) plan)->scan.scanrelid == 0 &&
				 bms_is_member(rti, ((ForeignScan *) plan)->fs_relids)))
				return plan;
			return NULL;
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
			{
				Plan	   *child = (Plan *) lfirst(lc);

				if (IsA(child, ForeignScan) &&
					((ForeignScan *) child)->scan.scanrelid == rti)
					return child;
			}
			return NULL;
		case T_Result:
			if (((Result *) plan)->resconstantqual != NULL || plan->qual != NIL)
				return NULL;
			return target_scan(plan->lefttree, rti);
		default:
			return NULL;
	}
}

/*
 * afdwPlanDirectModify
 *		Turn the scan of RESULTRELATION, the SUBPLAN_INDEX'th result
 *		relation of PLAN, into a remote UPDATE or DELETE when the remote
 *		server can compute all of it; false leaves the row-by-row plan.
 *
 * The core planner asks only when no row trigger, stored generated column
 * or WITH CHECK OPTION needs each row locally.  Left to the row-by-row
 * path: conditions evaluated locally, new values that are not shippable,
 * a join with another table that is not one remote join of all the
 * query's tables (plan_join_modify; the scan is then not the subplan, or
 * not directly under its Append), and RETURNING of a system column other
 * than tableoid (the remote row's would not be the local one's).
 */
bool
afdwPlanDirectModify(PlannerInfo *root, ModifyTable *plan, Index resultRelation,
					 int subplan_index)
{
	CmdType		operation = plan->operation;
	ForeignScan *fscan;
	RelOptInfo *baserel;
	RangeTblEntry *rte;
	Relation	rel;
	List	   *targets = NIL;
	List	   *colnos = NIL;
	List	   *returning = NIL;
	Bitmapset  *ret_attrs = NULL;
	List	   *retrieved_attrs = NIL;
	List	   *params = NIL;
	Bitmapset  *updated = NULL;
	bool		check_partition = false;
	StringInfoData sql;
	ListCell   *lc;
	int			attno;
	int			i;

	if (operation != CMD_UPDATE && operation != CMD_DELETE)
		return false;
	fscan = (ForeignScan *) target_scan(outerPlan(plan), resultRelation);
	if (fscan == NULL || fscan->scan.plan.qual != NIL)
		return false;
	if (fscan->scan.scanrelid == 0)
	{
		RelOptInfo *joinrel = find_join_rel(root, fscan->fs_relids);

		/*
		 * A replicated table is changed by the same statement on each copy,
		 * whose other tables need not be there (replica_writes.c).
		 */
		if (afdw_copy_servers(GetForeignTable(planner_rt_fetch(resultRelation, root)->relid)) != NIL)
			return false;
		/* A join that reads the target's rows for a change by ctid (join_paths.c). */
		if (joinrel == NULL || !afdw_direct_join_ok(root, joinrel))
			return false;
		return plan_join_modify(root, plan, resultRelation, subplan_index, fscan);
	}
	if (bms_num_members(afdw_scan_base_relids(fscan)) != 1)
		return false;
	baserel = find_base_rel(root, resultRelation);
	if (baserel->fdw_private == NULL)
		return false;

	if (operation == CMD_UPDATE)
	{
		ListCell   *lc2;

		get_translated_update_targetlist(root, resultRelation, &targets, &colnos);
		forboth(lc, targets, lc2, colnos)
		{
			TargetEntry *tle = lfirst_node(TargetEntry, lc);

			if (lfirst_int(lc2) <= 0 ||
				!afdw_is_shippable(root, baserel, tle->expr))
				return false;
			updated = bms_add_member(updated,
									 lfirst_int(lc2) - FirstLowInvalidHeapAttributeNumber);
		}
	}

	/*
	 * RETURNING is computed here from the changed rows, which the remote
	 * statement returns with the columns it needs.
	 */
	if (plan->returningLists != NIL)
	{
		returning = (List *) list_nth(plan->returningLists, subplan_index);
		pull_varattnos((Node *) returning, resultRelation, &ret_attrs);
		attno = -1;
		while ((attno = bms_next_member(ret_attrs, attno)) >= 0)
		{
			int			col = attno + FirstLowInvalidHeapAttributeNumber;

			if (col < 0 && col != TableOidAttributeNumber)
				return false;
		}
	}

	/*
	 * An UPDATE that may give a row another partition's key returns the
	 * changed rows, and each one is checked
	 * (direct_modify.c, afdw_check_partition_row) before the statement ends.
	 */
	rte = planner_rt_fetch(resultRelation, root);
	rel = table_open(rte->relid, NoLock);
	if (operation == CMD_UPDATE && afdw_update_may_leave_partition(rel, updated))
	{
		check_partition = true;
		/* The whole row, for the message of a row that fails. */
		ret_attrs = bms_add_member(ret_attrs, 0 - FirstLowInvalidHeapAttributeNumber);
	}
	initStringInfo(&sql);
	deparse_direct(&sql, root, operation, baserel, rel, targets, colnos,
				   fscan->fdw_recheck_quals,
				   plan->returningLists != NIL || check_partition,
				   ret_attrs, &retrieved_attrs, &params);
	table_close(rel, NoLock);

	fscan->operation = operation;
	fscan->resultRelation = resultRelation;
	fscan->fdw_exprs = params;
	fscan->fdw_private = lappend(list_make5(makeString(sql.data),
											makeBoolean(plan->returningLists != NIL),
											retrieved_attrs,
											makeBoolean(plan->canSetTag),
											makeBoolean(!afdw_has_exec_param((Node *) params, NULL))),
								 makeBoolean(check_partition));

	/*
	 * The scan's output is still projected from each RETURNING row, its
	 * tableoid telling the ModifyTable which partition the row is of; but
	 * the new values at its head (as many as the columns set; the junk
	 * columns follow) are unused, and would be computed again from the new
	 * row, which may fail (b + 1 at the top of int's range): they become
	 * nulls of their types.
	 */
	i = 0;
	foreach(lc, fscan->scan.plan.targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (i >= list_length(colnos))
			break;
		if (equal(tle->expr, ((TargetEntry *) list_nth(targets, i))->expr))
			tle->expr = (Expr *) makeNullConst(exprType((Node *) tle->expr),
											   exprTypmod((Node *) tle->expr),
											   exprCollation((Node *) tle->expr));
		i++;
	}

	/*
	 * Not under an asynchronous Append, whose calls are the scans': the
	 * statement is in flight from the executor's start anyway.
	 */
	fscan->scan.plan.async_capable = false;
	return true;
}

/*
 * afdw_direct_join_mode
 *		Whether ROOT is an UPDATE or DELETE of a single foreign table
 *		(RESULT) that the core planner would let become a direct
 *		modification: then join_paths.c may join the table remotely with others,
 *		as the source of a remote UPDATE ... FROM or DELETE ... USING
 *		(afdw_direct_join_ok), and the query's row marks are those of the
 *		other tables, copies of their rows, which that statement does not
 *		need.
 */
bool
afdw_direct_join_mode(PlannerInfo *root)
{
	Query	   *parse = root->parse;
	Index		result = parse->resultRelation;
	ListCell   *lc;

	if ((parse->commandType != CMD_UPDATE && parse->commandType != CMD_DELETE) ||
		result == 0 || !bms_equal(root->all_result_relids, bms_make_singleton(result)) ||
		planner_rt_fetch(result, root)->relkind != RELKIND_FOREIGN_TABLE)
		return false;
	/* What make_modifytable asks before it offers a direct modification. */
	if (parse->withCheckOptions != NIL ||
		has_row_triggers(root, result, parse->commandType) ||
		has_stored_generated_columns(root, result) ||
		has_transition_tables(root, result, parse->commandType) ||
		afdw_returns_old_or_new(parse->returningList))
		return false;
	foreach(lc, root->rowMarks)
	{
		if (lfirst_node(PlanRowMark, lc)->markType != ROW_MARK_COPY)
			return false;
	}
	return true;
}

/*
 * join_modify_parts
 *		Whether the UPDATE or DELETE ROOT (afdw_direct_join_mode) can be
 *		sent as one remote statement reading JOINREL, a remote join of all
 *		its tables: the join has a shape the statement can take, the new
 *		values are shippable, and RETURNING reads no system column but the
 *		target's tableoid (the remote statement returns the columns and
 *		whole rows it reads).  Gives the new values (*TARGETS, *COLNOS) and
 *		the target's columns RETURNING reads (*RET_ATTRS).
 */
static bool
join_modify_parts(PlannerInfo *root, RelOptInfo *joinrel, List **targets,
				  List **colnos, Bitmapset **ret_attrs)
{
	Index		result = root->parse->resultRelation;
	List	   *returning = root->parse->returningList;
	int			attno = -1;
	ListCell   *lc;
	ListCell   *lc2;

	*targets = NIL;
	*colnos = NIL;
	*ret_attrs = NULL;
	if (!bms_equal(joinrel->relids, afdw_all_query_relids(root)) ||
		!afdw_join_modify_ok(joinrel, result))
		return false;
	if (root->parse->commandType == CMD_UPDATE)
	{
		Bitmapset  *updated = NULL;
		Relation	rel;
		bool		may_leave;

		get_translated_update_targetlist(root, result, targets, colnos);
		forboth(lc, *targets, lc2, *colnos)
		{
			if (lfirst_int(lc2) <= 0 ||
				!afdw_is_shippable(root, joinrel, lfirst_node(TargetEntry, lc)->expr))
				return false;
			updated = bms_add_member(updated,
									 lfirst_int(lc2) - FirstLowInvalidHeapAttributeNumber);
		}

		/*
		 * A row that may leave its partition is checked by a direct
		 * modification of the table alone, or row by row.
		 */
		rel = table_open(planner_rt_fetch(result, root)->relid, NoLock);
		may_leave = afdw_update_may_leave_partition(rel, updated);
		table_close(rel, NoLock);
		if (may_leave)
			return false;
	}
	if (returning != NIL)
	{
		/* The other tables' columns and whole rows, not their ctid. */
		foreach(lc, pull_var_clause((Node *) returning, PVC_INCLUDE_PLACEHOLDERS))
		{
			Var		   *var = (Var *) lfirst(lc);

			if (!IsA(var, Var) ||
				((Index) var->varno != result && var->varattno < 0))
				return false;
		}
		pull_varattnos((Node *) returning, result, ret_attrs);
		while ((attno = bms_next_member(*ret_attrs, attno)) >= 0)
		{
			int			col = attno + FirstLowInvalidHeapAttributeNumber;

			if (col < 0 && col != TableOidAttributeNumber)
				return false;
		}
	}
	return true;
}

/*
 * afdw_direct_join_ok
 *		Whether join_paths.c offers JOINREL, a remote join, to the UPDATE or
 *		DELETE ROOT (afdw_direct_join_mode): only a join that will be the
 *		remote statement (join_modify_parts), never a scan, which would
 *		need the target's rows locked and rechecked.
 */
bool
afdw_direct_join_ok(PlannerInfo *root, RelOptInfo *joinrel)
{
	List	   *targets;
	List	   *colnos;
	Bitmapset  *ret_attrs;

	return join_modify_parts(root, joinrel, &targets, &colnos, &ret_attrs);
}

/*
 * plan_join_modify
 *		afdwPlanDirectModify for FSCAN, a remote join of the target with the
 *		query's other tables: the remote UPDATE ... FROM or DELETE ... USING.
 *		join_paths.c offered the join only for this (afdw_direct_join_ok).
 */
static bool
plan_join_modify(PlannerInfo *root, ModifyTable *plan, Index resultRelation,
				 int subplan_index, ForeignScan *fscan)
{
	RelOptInfo *joinrel = find_join_rel(root, fscan->fs_relids);
	List	   *targets;
	List	   *colnos;
	Bitmapset  *ret_attrs;
	List	   *retrieved_attrs = NIL;
	List	   *params = NIL;
	bool		returning = plan->returningLists != NIL &&
		list_nth(plan->returningLists, subplan_index) != NIL;
	List	   *join_vars = NIL;
	List	   *scan_tlist = NIL;
	StringInfoData sql;
	ListCell   *lc;

	if (joinrel == NULL || (int) resultRelation != root->parse->resultRelation ||
		!join_modify_parts(root, joinrel, &targets, &colnos, &ret_attrs))
		elog(ERROR, "remote join of foreign table %u cannot be sent as its UPDATE or DELETE",
			 planner_rt_fetch(resultRelation, root)->relid);

	/* The other tables' columns RETURNING reads: the join's scan tuple. */
	if (returning)
	{
		foreach(lc, pull_var_clause((Node *) list_nth(plan->returningLists, subplan_index),
									PVC_INCLUDE_PLACEHOLDERS))
		{
			Var		   *var = lfirst_node(Var, lc);

			if ((Index) var->varno != resultRelation &&
				!list_member(join_vars, var))
			{
				join_vars = lappend(join_vars, var);
				scan_tlist = lappend(scan_tlist,
									 makeTargetEntry((Expr *) var,
													 list_length(join_vars),
													 NULL, false));
			}
		}
	}

	initStringInfo(&sql);
	afdw_deparse_join_modify(&sql, root, joinrel, resultRelation, plan->operation,
							 targets, colnos, returning, ret_attrs, join_vars,
							 &retrieved_attrs, &params);

	fscan->operation = plan->operation;
	fscan->resultRelation = resultRelation;
	fscan->fdw_exprs = params;
	fscan->fdw_private = list_concat(list_make5(makeString(sql.data),
												makeBoolean(returning),
												retrieved_attrs,
												makeBoolean(plan->canSetTag),
												makeBoolean(!afdw_has_exec_param((Node *) params, NULL))),
									 list_make2(makeBoolean(false),
												makeInteger(list_length(join_vars))));

	/*
	 * RETURNING reads the target's changed row (IterateDirectModify hands it
	 * over) and, from the scan's output, the other tables' columns, which
	 * the remote statement returns after the target's as the scan tuple
	 * (a whole row as a ROW() of its columns).
	 * Nothing else of the join is read back: the rest of the scan's output
	 * becomes nulls of its types.
	 */
	fscan->fdw_scan_tlist = scan_tlist;
	foreach(lc, fscan->scan.plan.targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (IsA(tle->expr, Var) && list_member(join_vars, tle->expr))
			continue;
		tle->expr = (Expr *) makeNullConst(exprType((Node *) tle->expr),
										   exprTypmod((Node *) tle->expr),
										   exprCollation((Node *) tle->expr));
	}
	fscan->scan.plan.lefttree = NULL;
	fscan->scan.plan.async_capable = false;
	return true;
}

/*
 * deparse_direct
 *		Append to BUF the remote UPDATE (setting the columns COLNOS to the
 *		expressions of the TargetEntries TARGETS) or DELETE of BASEREL (REL)
 *		under the conditions CONDS (expressions), with, when RETURNING, the
 *		columns RET_ATTRS (offset by FirstLowInvalidHeapAttributeNumber;
 *		whole row: all) listed by number in *RETRIEVED_ATTRS.  *PARAMS gets
 *		the expressions sent as $1, $2, ...
 */
static void
deparse_direct(StringInfo buf, PlannerInfo *root, CmdType operation,
			   RelOptInfo *baserel,
			   Relation rel, List *targets, List *colnos, List *conds,
			   bool returning, Bitmapset *ret_attrs, List **retrieved_attrs,
			   List **params)
{
	DeparseContext cxt;
	TupleDesc	tupdesc = RelationGetDescr(rel);
	bool		all = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber,
									ret_attrs);
	bool		first = true;

	afdw_init_deparse(&cxt, buf, root, baserel, rel, params);
	appendStringInfoString(buf, operation == CMD_UPDATE ? "UPDATE " : "DELETE FROM ");
	afdw_deparse_relation(buf, rel);
	afdw_deparse_set_list(targets, colnos, rel, &cxt);
	afdw_deparse_conditions(conds, &cxt);
	afdw_end_deparse(&cxt);

	*retrieved_attrs = NIL;
	if (!returning)
		return;
	for (int i = 1; i <= tupdesc->natts; i++)
	{
		if (TupleDescAttr(tupdesc, i - 1)->attisdropped ||
			(!all && !bms_is_member(i - FirstLowInvalidHeapAttributeNumber,
									ret_attrs)))
			continue;
		appendStringInfoString(buf, first ? " RETURNING " : ", ");
		first = false;
		appendStringInfoString(buf, quote_identifier(afdw_remote_column_name(rel, i)));
		*retrieved_attrs = lappend_int(*retrieved_attrs, i);
	}
	/*
	 * RETURNING of no column (a constant, tableoid) needs no RETURNING
	 * clause: the remote row count gives its rows (check_result).
	 */
}
