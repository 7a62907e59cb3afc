/*-------------------------------------------------------------------------
 *
 * join_subqueries.c
 *		The sides of remote joins read as subqueries: which sides are,
 *		their numbers in a statement, and the names of their columns.
 *
 * A full join's side that is itself a join with WHERE conditions, and a
 * semi- or anti-join below another join, is read as a subquery
 * s<n>(c1, c2, ...) (AfdwSubquery, deparse_internal.h).  The subqueries of
 * a statement are numbered when its DeparseContext is set up
 * (deparse_context.c); above a subquery, deparse_expr.c names a column of
 * its tables s<n>.c<k>; deparse_join.c writes the subqueries themselves in
 * its FROM items.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "optimizer/optimizer.h"

#include "async_fdw.h"
#include "sql/deparse_internal.h"

/*
 * afdw_is_semi_join
 *		Whether REL is a remote semi- or anti-join, which is a condition
 *		of its outer side ([NOT] EXISTS) rather than a FROM item.
 */
bool
afdw_is_semi_join(RelOptInfo *rel)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;

	return fp->outer_rel != NULL &&
		(fp->jointype == JOIN_SEMI || fp->jointype == JOIN_ANTI);
}

/*
 * afdw_side_is_subquery
 *		Whether REL, a side of a join of type JOINTYPE, is read as a
 *		subquery with a column list (AfdwSubquery): a full join filters
 *		its sides before joining them, and a join's WHERE conditions have
 *		no other place then; a semi- or anti-join below another join is
 *		its outer side filtered by its EXISTS, which becomes a FROM item
 *		so.
 */
bool
afdw_side_is_subquery(RelOptInfo *rel, JoinType jointype)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;

	return (jointype == JOIN_FULL && fp->outer_rel != NULL && fp->where_conds != NIL) ||
		afdw_is_semi_join(rel);
}

/*
 * afdw_collect_subqueries
 *		Add to CXT's subqueries, numbered in the order met, the sides of
 *		REL (a join, or a base relation: none) and of the joins below it
 *		that are read as subqueries; PARENT is the subquery REL is in.
 */
void
afdw_collect_subqueries(RelOptInfo *rel, int parent, DeparseContext *cxt)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;
	RelOptInfo *sides[2];

	if (fp->outer_rel == NULL)
		return;
	sides[0] = fp->outer_rel;
	sides[1] = fp->inner_rel;
	for (int i = 0; i < 2; i++)
	{
		int			within = parent;

		if (afdw_side_is_subquery(sides[i], fp->jointype))
		{
			AfdwSubquery *sq = palloc(sizeof(AfdwSubquery));

			sq->rel = sides[i];
			sq->number = list_length(cxt->subqueries) + 1;
			sq->parent = parent;
			sq->columns = pull_var_clause((Node *) sides[i]->reltarget->exprs,
										  PVC_RECURSE_PLACEHOLDERS);
			cxt->subqueries = lappend(cxt->subqueries, sq);
			within = sq->number;
		}
		afdw_collect_subqueries(sides[i], within, cxt);
	}
}

/*
 * afdw_deparse_subquery_column
 *		Append VAR as the column of the subquery it is read through where
 *		CXT is writing (s<n>.c<k>), and return true; false if its table is
 *		named directly there.
 */
bool
afdw_deparse_subquery_column(Var *var, DeparseContext *cxt)
{
	ListCell   *lc;

	if (var->varlevelsup != 0)
		return false;
	foreach(lc, cxt->subqueries)
	{
		AfdwSubquery *sq = (AfdwSubquery *) lfirst(lc);
		ListCell   *col;

		if (sq->parent != cxt->scope || !bms_is_member(var->varno, sq->rel->relids))
			continue;
		foreach(col, sq->columns)
		{
			Var		   *c = lfirst_node(Var, col);

			if (c->varno == var->varno && c->varattno == var->varattno)
			{
				appendStringInfo(cxt->buf, "s%d.c%d", sq->number,
								 foreach_current_index(col) + 1);
				return true;
			}
		}
		elog(ERROR, "column %d of range table entry %d is not in remote subquery s%d",
			 var->varattno, var->varno, sq->number);
	}
	return false;
}
