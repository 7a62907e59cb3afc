/*-------------------------------------------------------------------------
 *
 * deparse_join.c
 *		Remote SQL of joins: the SELECT of a join of foreign tables on one
 *		server, its FROM item and locking clause, and the UPDATE ... FROM or
 *		DELETE ... USING whose source is such a join.
 *
 * Each table of a join is named r<n> by its range table index.  A full
 * join's side that is itself a join with WHERE conditions is read as a
 * subquery s<n>(c1, c2, ...) (AfdwSubquery), written here; which sides
 * are, their numbers and the names of their columns are join_subqueries.c's.
 * The statement's state is a DeparseContext (deparse_internal.h), whose
 * afdw_init_join_deparse (deparse_context.c) opens the join's tables and
 * numbers its subqueries.
 *
 * Neighbours: join_paths.c builds a join's SELECT and locking clause here,
 * order_limit.c a column of a join's sort key, direct_modify_plan.c a remote
 * UPDATE or DELETE over a join; deparse_statements.c writes the FROM item of a
 * grouped join's SELECT with afdw_deparse_join_from_where, and deparse_expr.c
 * the expressions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/prep.h"
#include "optimizer/restrictinfo.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "async_fdw.h"
#include "sql/deparse_internal.h"

static void deparse_from(RelOptInfo *rel, DeparseContext *cxt);
static void append_whole_row(StringInfo buf, int varno, DeparseContext *cxt);
static Var *select_var(RelOptInfo *rel, Var *var, DeparseContext *cxt);

/*
 * subquery_has_column
 *		Whether REL, a side read as a subquery, has VAR among its columns
 *		(the columns of its tables the query reads above it).
 */
static bool
subquery_has_column(RelOptInfo *rel, Var *var)
{
	ListCell   *lc;

	foreach(lc, pull_var_clause((Node *) rel->reltarget->exprs, PVC_RECURSE_PLACEHOLDERS))
	{
		Var		   *c = lfirst_node(Var, lc);

		if (c->varno == var->varno && c->varattno == var->varattno)
			return true;
	}
	return false;
}

/*
 * afdw_join_var_readable
 *		Whether VAR, a column of a table of REL (a remote join, or a table
 *		of one), can be named in the select list or ORDER BY of REL's
 *		remote query: not a column of a semi- or anti-join's inner side,
 *		which only its EXISTS sees, and through a side read as a subquery
 *		only as one of its columns.
 */
bool
afdw_join_var_readable(RelOptInfo *rel, Var *var)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;
	RelOptInfo *sides[2];

	if (fp->outer_rel == NULL)
		return (Index) var->varno == rel->relid;
	sides[0] = fp->outer_rel;
	sides[1] = afdw_is_semi_join(rel) ? NULL : fp->inner_rel;
	for (int i = 0; i < 2; i++)
	{
		if (sides[i] == NULL || !bms_is_member(var->varno, sides[i]->relids))
			continue;
		if (afdw_side_is_subquery(sides[i], fp->jointype) &&
			!subquery_has_column(sides[i], var))
			return false;
		return afdw_join_var_readable(sides[i], var);
	}
	return false;
}

/*
 * nullable_relids
 *		The tables of REL (a remote join, or a table of one) that an outer
 *		join within it may fill with nulls.
 */
static Relids
nullable_relids(RelOptInfo *rel)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;
	Relids		result;

	if (fp->outer_rel == NULL)
		return NULL;
	result = bms_union(nullable_relids(fp->outer_rel),
					   nullable_relids(fp->inner_rel));
	if (fp->jointype == JOIN_LEFT || fp->jointype == JOIN_FULL)
		result = bms_add_members(result, fp->inner_rel->relids);
	if (fp->jointype == JOIN_RIGHT || fp->jointype == JOIN_FULL)
		result = bms_add_members(result, fp->outer_rel->relids);
	return result;
}

/*
 * afdw_join_select_var
 *		The column that REL's remote query (REL a remote join) names in its
 *		select list for VAR, a column of one of its tables: VAR itself where
 *		it can (afdw_join_var_readable), else a column equal to it in every
 *		row REL returns; NULL if there is none.
 *
 * PostgreSQL keeps a column of a semi-join's inner side above the join
 * only for a join condition it derives from an equivalence class (no other
 * expression of the query can name it): TPC-H's Q21 joins orders to
 * lineitem l2's l_orderkey, equal to l1's, inside EXISTS (... l2 ...).
 * The remote query cannot name it outside the EXISTS, but every row it
 * returns has a column equal to it by that class's equality: another
 * member of the class, a plain column of the same type, typmod and
 * collation that REL's remote query names and no outer join within REL
 * may make null.  The join conditions of the class within REL, all sent,
 * hold on every row; those above compare it by the same equality.
 */
Var *
afdw_join_select_var(PlannerInfo *root, RelOptInfo *rel, Var *var)
{
	Relids		nullable;
	ListCell   *lc;

	if (afdw_join_var_readable(rel, var))
		return var;
	if (var->varattno <= 0 || var->varlevelsup != 0)
		return NULL;
	nullable = nullable_relids(rel);
	foreach(lc, root->eq_classes)
	{
		EquivalenceClass *ec = (EquivalenceClass *) lfirst(lc);
		AfdwMemberIter iter;
		EquivalenceMember *em;
		Var		   *found = NULL;
		bool		holds = false;

		if (ec->ec_has_volatile || ec->ec_broken)
			continue;
#if PG_VERSION_NUM < 160000
		if (ec->ec_below_outer_join)
			continue;
#endif
		afdw_members_begin(&iter, ec, rel->relids);
		while ((em = afdw_members_next(&iter)) != NULL)
		{
			Var		   *m = (Var *) em->em_expr;

			while (IsA(m, RelabelType))
				m = (Var *) ((RelabelType *) m)->arg;
			if (!IsA(m, Var) || m->varlevelsup != 0 || m->varattno <= 0)
				continue;
			if (m->varno == var->varno && m->varattno == var->varattno)
				holds = true;
			else if (found == NULL &&
					 bms_is_member(m->varno, rel->relids) &&
					 !bms_is_member(m->varno, nullable) &&
					 m->vartype == var->vartype &&
					 m->vartypmod == var->vartypmod &&
					 m->varcollid == var->varcollid &&
					 afdw_join_var_readable(rel, m))
				found = m;
		}
		if (holds && found != NULL)
			return found;
	}
	return NULL;
}

/*
 * select_var
 *		VAR, a column of REL (a remote join) in its select list, as the
 *		remote query names it there (afdw_join_select_var).
 */
static Var *
select_var(RelOptInfo *rel, Var *var, DeparseContext *cxt)
{
	Var		   *named;

	if (((AfdwRelInfo *) rel->fdw_private)->outer_rel == NULL)
		return var;
	named = afdw_join_select_var(cxt->root, rel, var);
	if (named == NULL)
		elog(ERROR, "column %d of range table entry %d cannot be named in a remote join's select list",
			 var->varattno, var->varno);
	return named;
}

/*
 * deparse_subquery
 *		Append SQ, a side of a full join, as a subquery: SELECT its columns
 *		FROM its join WHERE its conditions, aliased s<n>(c1, c2, ...).
 */
static void
deparse_subquery(AfdwSubquery *sq, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	int			outside = cxt->scope;
	ListCell   *lc;

	appendStringInfoString(buf, "(SELECT ");
	cxt->scope = sq->number;
	foreach(lc, sq->columns)
	{
		if (foreach_current_index(lc) > 0)
			appendStringInfoString(buf, ", ");
		afdw_deparse_expr((Expr *) select_var(sq->rel, lfirst_node(Var, lc), cxt),
						  cxt);
	}
	if (sq->columns == NIL)
		appendStringInfoString(buf, "NULL");
	appendStringInfoString(buf, " FROM ");
	afdw_deparse_join_from_where(sq->rel, cxt);
	cxt->scope = outside;
	appendStringInfo(buf, ") s%d", sq->number);
	foreach(lc, sq->columns)
		appendStringInfo(buf, "%sc%d", foreach_current_index(lc) == 0 ? "(" : ", ",
						 foreach_current_index(lc) + 1);
	if (sq->columns != NIL)
		appendStringInfoChar(buf, ')');
}

/*
 * deparse_side_subquery
 *		Append REL, a side read as a subquery (afdw_side_is_subquery), as the
 *		subquery afdw_collect_subqueries numbered for it where CXT writes.
 */
static void
deparse_side_subquery(RelOptInfo *rel, DeparseContext *cxt)
{
	ListCell   *lc;

	foreach(lc, cxt->subqueries)
	{
		AfdwSubquery *sq = (AfdwSubquery *) lfirst(lc);

		if (sq->rel == rel && sq->parent == cxt->scope)
		{
			deparse_subquery(sq, cxt);
			return;
		}
	}
	elog(ERROR, "side of a remote join has no subquery");
}

/*
 * deparse_join_side
 *		Append the FROM item of REL, a side of a join of type JOINTYPE.  A
 *		full join's side that is a base relation with conditions is read
 *		through a subquery that applies them before the join, under the
 *		same name r<n>, its columns keeping the remote names that the rest
 *		of the query uses (join_paths.c places other sides' conditions); a join
 *		with conditions is read as a subquery with a column list
 *		(AfdwSubquery).
 */
static void
deparse_join_side(RelOptInfo *rel, JoinType jointype, DeparseContext *cxt)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;

	if (afdw_side_is_subquery(rel, jointype))
	{
		deparse_side_subquery(rel, cxt);
		return;
	}
	if (jointype != JOIN_FULL || fp->outer_rel != NULL || fp->remote_conds == NIL)
	{
		deparse_from(rel, cxt);
		return;
	}
	appendStringInfoString(cxt->buf, "(SELECT * FROM ");
	deparse_from(rel, cxt);
	afdw_deparse_conditions(extract_actual_clauses(fp->remote_conds, false), cxt);
	appendStringInfo(cxt->buf, ") r%d", rel->relid);
}

/*
 * deparse_from
 *		Append the FROM item of REL, a base relation of the join deparsed
 *		in CXT (r<n>), or a join of them with its ON clause.
 */
static void
deparse_from(RelOptInfo *rel, DeparseContext *cxt)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;
	StringInfo	buf = cxt->buf;
	ListCell   *lc1;
	ListCell   *lc2;
	bool		first = true;

	/* A semi- or anti-join read as a FROM item: its subquery. */
	if (afdw_is_semi_join(rel))
	{
		deparse_side_subquery(rel, cxt);
		return;
	}
	if (fp->outer_rel == NULL)
	{
		forboth(lc1, cxt->joined_relids, lc2, cxt->joined)
		{
			if (lfirst_int(lc1) == (int) rel->relid)
				afdw_deparse_relation(buf, (Relation) lfirst(lc2));
		}
		appendStringInfo(buf, " r%d", rel->relid);
		return;
	}
	appendStringInfoChar(buf, '(');
	deparse_join_side(fp->outer_rel, fp->jointype, cxt);
	switch (fp->jointype)
	{
		case JOIN_INNER:
			appendStringInfoString(buf, " INNER JOIN ");
			break;
		case JOIN_LEFT:
			appendStringInfoString(buf, " LEFT JOIN ");
			break;
		case JOIN_RIGHT:
			appendStringInfoString(buf, " RIGHT JOIN ");
			break;
		case JOIN_FULL:
			appendStringInfoString(buf, " FULL JOIN ");
			break;
		default:
			elog(ERROR, "unexpected join type %d", (int) fp->jointype);
	}
	deparse_join_side(fp->inner_rel, fp->jointype, cxt);
	appendStringInfoString(buf, " ON ");
	foreach(lc1, fp->join_on)
	{
		if (!first)
			appendStringInfoString(buf, " AND ");
		first = false;
		appendStringInfoChar(buf, '(');
		afdw_deparse_expr((Expr *) lfirst(lc1), cxt);
		appendStringInfoChar(buf, ')');
	}
	if (first)
		appendStringInfoString(buf, "(TRUE)");
	appendStringInfoChar(buf, ')');
}

/*
 * afdw_deparse_join_from_where
 *		Append the FROM item of JOINREL, a join of foreign tables on one
 *		server (join_paths.c), and its WHERE conditions: a semi- or anti-join
 *		reads its outer side, with [NOT] EXISTS of its inner side under the
 *		join's conditions.
 */
void
afdw_deparse_join_from_where(RelOptInfo *joinrel, DeparseContext *cxt)
{
	AfdwRelInfo *jfp = (AfdwRelInfo *) joinrel->fdw_private;
	StringInfo	buf = cxt->buf;
	bool		semi = (jfp->jointype == JOIN_SEMI || jfp->jointype == JOIN_ANTI);

	deparse_from(semi ? jfp->outer_rel : joinrel, cxt);
	afdw_deparse_conditions(jfp->where_conds, cxt);
	if (semi)
	{
		appendStringInfo(buf, "%s%sEXISTS (SELECT NULL FROM ",
						 jfp->where_conds == NIL ? " WHERE " : " AND ",
						 jfp->jointype == JOIN_ANTI ? "NOT " : "");
		deparse_from(jfp->inner_rel, cxt);
		afdw_deparse_conditions(jfp->join_on, cxt);
		appendStringInfoChar(buf, ')');
	}
}

/*
 * append_join_select_list
 *		Append SELECT and the columns of TLIST (TargetEntries of Vars) of
 *		the join deparsed in CXT: a table's whole row (for a row mark, or
 *		the query's t.*) as a ROW() of its columns, null where an outer
 *		join found no row (append_whole_row), converted locally into
 *		the table's row type; its ctid as r<n>.ctid.
 */
static void
append_join_select_list(List *tlist, DeparseContext *cxt)
{
	ListCell   *lc;
	bool		first = true;

	appendStringInfoString(cxt->buf, "SELECT ");
	foreach(lc, tlist)
	{
		Expr	   *expr = lfirst_node(TargetEntry, lc)->expr;

		if (!first)
			appendStringInfoString(cxt->buf, ", ");
		first = false;
		if (IsA(expr, Var) && ((Var *) expr)->varattno == 0 &&
			((Var *) expr)->varlevelsup == 0)
			append_whole_row(cxt->buf, ((Var *) expr)->varno, cxt);
		else if (IsA(expr, Var) && ((Var *) expr)->varlevelsup == 0)
			afdw_deparse_expr((Expr *) select_var(cxt->baserel, (Var *) expr, cxt),
							  cxt);
		else
			afdw_deparse_expr(expr, cxt);
	}
	if (first)
		appendStringInfoString(cxt->buf, "NULL");
}

/*
 * afdw_deparse_join_select
 *		The remote SELECT of JOINREL, a join of foreign tables on one
 *		server (join_paths.c): the columns of TLIST (TargetEntries), each table
 *		named r<n> by its range table index, the join's conditions.
 *		*PARAMS gets the expressions sent as $1, $2, ...
 */
void
afdw_deparse_join_select(StringInfo buf, PlannerInfo *root, RelOptInfo *joinrel,
						 List *tlist, List **params)
{
	DeparseContext cxt;

	afdw_init_join_deparse(&cxt, buf, root, joinrel, params);
	append_join_select_list(tlist, &cxt);
	appendStringInfoString(buf, " FROM ");
	afdw_deparse_join_from_where(joinrel, &cxt);
	afdw_end_deparse(&cxt);
}

/*
 * afdw_deparse_join_column
 *		Append to BUF column VAR of a table of JOINREL, a remote join
 *		(join_paths.c), as its remote SELECT names it (r<n>.column).
 */
void
afdw_deparse_join_column(StringInfo buf, PlannerInfo *root, RelOptInfo *joinrel,
						 Var *var)
{
	DeparseContext cxt;
	List	   *params = NIL;

	afdw_init_join_deparse(&cxt, buf, root, joinrel, &params);
	afdw_deparse_expr((Expr *) var, &cxt);
	afdw_end_deparse(&cxt);
	Assert(params == NIL);
}

/*
 * afdw_deparse_join_condition
 *		The text of COND, a condition on the columns of JOINREL, a remote
 *		join, as its remote SELECT whose parameters are PARAMS would have
 *		it: a parameter not among them is numbered after them (PARAMS itself
 *		is left as it is).
 */
char *
afdw_deparse_join_condition(PlannerInfo *root, RelOptInfo *joinrel, Expr *cond,
							List *params)
{
	DeparseContext cxt;
	StringInfoData buf;
	List	   *own = list_copy(params);

	initStringInfo(&buf);
	afdw_init_join_deparse(&cxt, &buf, root, joinrel, &own);
	afdw_deparse_expr(cond, &cxt);
	afdw_end_deparse(&cxt);
	list_free(own);
	return buf.data;
}

/*
 * afdw_deparse_join_locking_clause
 *		Append to BUF the locking clause of the remote SELECT of JOINREL, a
 *		remote join, that the query's row marks ask for: FOR UPDATE OF r<n>
 *		or FOR SHARE OF r<n> for each table the query locks (as
 *		afdw_deparse_locking_clause decides for a scan); true if any.
 *		With BUF NULL, only say whether there is one.
 *		The query's other tables have row marks that lock nothing (their
 *		rows are copied for rechecks, in the join's whole-row columns).
 */
bool
afdw_deparse_join_locking_clause(StringInfo buf, PlannerInfo *root,
								 RelOptInfo *joinrel)
{
	int			relid = -1;
	bool		any = false;

	while ((relid = bms_next_member(joinrel->relids, relid)) >= 0)
	{
		PlanRowMark *rc = get_plan_rowmark(root->rowMarks, relid);

		/* The target of an UPDATE or DELETE, changed by ctid (join_paths.c). */
		if ((root->parse->commandType == CMD_UPDATE ||
			 root->parse->commandType == CMD_DELETE) &&
			bms_is_member(relid, root->all_result_relids))
		{
			if (buf != NULL)
				appendStringInfo(buf, " FOR UPDATE OF r%d", relid);
			any = true;
			continue;
		}
		if (rc == NULL)
			continue;
		switch (rc->strength)
		{
			case LCS_NONE:
				break;
			case LCS_FORKEYSHARE:
			case LCS_FORSHARE:
				if (buf != NULL)
					appendStringInfo(buf, " FOR SHARE OF r%d", relid);
				any = true;
				break;
			case LCS_FORNOKEYUPDATE:
			case LCS_FORUPDATE:
				if (buf != NULL)
					appendStringInfo(buf, " FOR UPDATE OF r%d", relid);
				any = true;
				break;
		}
	}
	return any;
}

/*
 * from_without_target
 *		Append to CXT's buffer (none: only check) the FROM item of REL, a
 *		remote join holding the range table entry TARGET, without TARGET:
 *		the FROM (or USING) list of a remote UPDATE (or DELETE) of TARGET.
 *		The ON conditions of the inner joins on the way to TARGET go to
 *		*CONDS, for the WHERE clause, where they may name TARGET.  False if
 *		the join cannot be written so: TARGET on the nullable side of an
 *		outer join (its rows without a match would not be changed), an
 *		outer join whose ON clause names TARGET, a semi- or anti-join.
 */
static bool
from_without_target(RelOptInfo *rel, Index target, List **conds,
					DeparseContext *cxt)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;
	bool		in_outer = bms_is_member(target, fp->outer_rel->relids);
	RelOptInfo *with = in_outer ? fp->outer_rel : fp->inner_rel;
	RelOptInfo *other = in_outer ? fp->inner_rel : fp->outer_rel;
	bool		alone = bms_membership(with->relids) == BMS_SINGLETON;
	ListCell   *lc;
	bool		first = true;

	switch (fp->jointype)
	{
		case JOIN_INNER:
			/* Its ON clause is a condition like any other. */
			*conds = list_concat(*conds, fp->join_on);
			if (alone)
			{
				if (cxt != NULL)
					deparse_from(other, cxt);
				return true;
			}
			if (cxt != NULL)
				appendStringInfoChar(cxt->buf, '(');
			if (!from_without_target(with, target, conds, cxt))
				return false;
			if (cxt != NULL)
			{
				appendStringInfoString(cxt->buf, " INNER JOIN ");
				deparse_from(other, cxt);
				appendStringInfoString(cxt->buf, " ON (TRUE))");
			}
			return true;
		case JOIN_LEFT:
		case JOIN_RIGHT:
			if (alone || in_outer != (fp->jointype == JOIN_LEFT) ||
				bms_is_member(target, pull_varnos(NULL, (Node *) fp->join_on)))
				return false;
			break;
		default:
			return false;
	}

	/* An outer join whose preserved side holds TARGET. */
	if (cxt != NULL)
		appendStringInfoChar(cxt->buf, '(');
	if (!from_without_target(with, target, conds, cxt))
		return false;
	if (cxt == NULL)
		return true;
	appendStringInfoString(cxt->buf, fp->jointype == JOIN_LEFT ?
						   " LEFT JOIN " : " RIGHT JOIN ");
	deparse_from(other, cxt);
	appendStringInfoString(cxt->buf, " ON ");
	foreach(lc, fp->join_on)
	{
		if (!first)
			appendStringInfoString(cxt->buf, " AND ");
		first = false;
		appendStringInfoChar(cxt->buf, '(');
		afdw_deparse_expr((Expr *) lfirst(lc), cxt);
		appendStringInfoChar(cxt->buf, ')');
	}
	if (first)
		appendStringInfoString(cxt->buf, "(TRUE)");
	appendStringInfoChar(cxt->buf, ')');
	return true;
}

/*
 * append_whole_row
 *		Append to BUF the whole row of the table r<VARNO> of the join
 *		deparsed in CXT, as a ROW() of its columns in the local table's
 *		order, read by the row type's input function; null where an outer
 *		join found no row.
 */
static void
append_whole_row(StringInfo buf, int varno, DeparseContext *cxt)
{
	Relation	rel = NULL;
	TupleDesc	tupdesc;
	ListCell   *lc1;
	ListCell   *lc2;
	bool		first = true;

	forboth(lc1, cxt->joined_relids, lc2, cxt->joined)
	{
		if (lfirst_int(lc1) == varno)
			rel = (Relation) lfirst(lc2);
	}
	Assert(rel != NULL);
	tupdesc = RelationGetDescr(rel);
	appendStringInfo(buf, "CASE WHEN (r%d.*)::text IS NOT NULL THEN ROW(", varno);
	for (int i = 1; i <= tupdesc->natts; i++)
	{
		if (TupleDescAttr(tupdesc, i - 1)->attisdropped)
			continue;
		appendStringInfo(buf, "%sr%d.%s", first ? "" : ", ", varno,
						 quote_identifier(afdw_remote_column_name(rel, i)));
		first = false;
	}
	appendStringInfoString(buf, ") END");
}

/*
 * afdw_join_modify_ok
 *		Whether JOINREL, a remote join holding TARGET with no condition
 *		checked locally, can be the source of a remote UPDATE ... FROM or
 *		DELETE ... USING of TARGET (see from_without_target).
 */
bool
afdw_join_modify_ok(RelOptInfo *joinrel, Index target)
{
	AfdwRelInfo *jfp = (AfdwRelInfo *) joinrel->fdw_private;
	List	   *conds = NIL;

	if (jfp == NULL || jfp->outer_rel == NULL || jfp->local_conds != NIL ||
		!bms_is_member(target, joinrel->relids))
		return false;
	return from_without_target(joinrel, target, &conds, NULL);
}

/*
 * afdw_deparse_join_modify
 *		Append to BUF the remote UPDATE (setting the columns COLNOS to the
 *		expressions of the TargetEntries TARGETS) or DELETE of TARGET, a
 *		table of JOINREL, a join of foreign tables on one server, for each
 *		row of the join: UPDATE ... FROM or DELETE ... USING the other
 *		tables, each named r<n> by its range table index.  With RETURNING,
 *		TARGET's columns RET_ATTRS (offset by
 *		FirstLowInvalidHeapAttributeNumber; whole row: all), listed by
 *		number in *RETRIEVED_ATTRS, then the other tables' columns
 *		JOIN_VARS (Vars).  *PARAMS gets the expressions sent as $1, $2, ...
 */
void
afdw_deparse_join_modify(StringInfo buf, PlannerInfo *root, RelOptInfo *joinrel,
						 Index target, CmdType operation, List *targets,
						 List *colnos, bool returning, Bitmapset *ret_attrs,
						 List *join_vars, List **retrieved_attrs, List **params)
{
	AfdwRelInfo *jfp = (AfdwRelInfo *) joinrel->fdw_private;
	DeparseContext cxt;
	Relation	rel = NULL;
	TupleDesc	tupdesc;
	List	   *conds = list_copy(jfp->where_conds);
	bool		all = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber,
									ret_attrs);
	bool		first = true;
	ListCell   *lc;
	ListCell   *lc2;

	afdw_init_join_deparse(&cxt, buf, root, joinrel, params);
	forboth(lc, cxt.joined_relids, lc2, cxt.joined)
	{
		if (lfirst_int(lc) == (int) target)
			rel = (Relation) lfirst(lc2);
	}
	Assert(rel != NULL);
	tupdesc = RelationGetDescr(rel);

	appendStringInfoString(buf, operation == CMD_UPDATE ? "UPDATE " : "DELETE FROM ");
	afdw_deparse_relation(buf, rel);
	appendStringInfo(buf, " r%u", target);
	afdw_deparse_set_list(targets, colnos, rel, &cxt);
	appendStringInfoString(buf, operation == CMD_UPDATE ? " FROM " : " USING ");
	if (!from_without_target(joinrel, target, &conds, &cxt))
		elog(ERROR, "remote join cannot be the source of a remote %s",
			 operation == CMD_UPDATE ? "UPDATE" : "DELETE");
	afdw_deparse_conditions(conds, &cxt);

	*retrieved_attrs = NIL;
	if (returning)
	{
		first = true;
		for (int i = 1; i <= tupdesc->natts; i++)
		{
			if (TupleDescAttr(tupdesc, i - 1)->attisdropped ||
				(!all && !bms_is_member(i - FirstLowInvalidHeapAttributeNumber,
										ret_attrs)))
				continue;
			appendStringInfo(buf, "%sr%u.%s", first ? " RETURNING " : ", ", target,
							 quote_identifier(afdw_remote_column_name(rel, i)));
			first = false;
			*retrieved_attrs = lappend_int(*retrieved_attrs, i);
		}
		/* Then the other tables' columns that RETURNING reads. */
		foreach(lc, join_vars)
		{
			Var		   *var = lfirst_node(Var, lc);

			appendStringInfoString(buf, first ? " RETURNING " : ", ");
			first = false;
			if (var->varattno == 0)
				append_whole_row(buf, var->varno, &cxt);
			else
				afdw_deparse_expr((Expr *) var, &cxt);
		}
		/* None (a constant, tableoid): the row count gives the rows. */
	}
	afdw_end_deparse(&cxt);
}
