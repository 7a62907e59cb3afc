/*-------------------------------------------------------------------------
 *
 * deparse_statements.c
 *		Remote SQL statements of async_fdw.
 *
 * The SELECT of a scan with the conditions that shippable.c let through,
 * the grouped SELECT of a remote aggregate, their ORDER BY and locking
 * clause, the writes of a table, the binary COPY wrapper and the remote
 * type check, ANALYZE's sampling query, and parameters bound into a
 * statement.  The expressions in them are written by deparse_expr.c, the
 * statements over a remote join by deparse_join.c; deparse_internal.h is
 * the shared state, set up by deparse_context.c, which also writes the
 * pieces shared with joins (a table's name, WHERE clauses, SET lists).
 *
 * The planner (scan_paths.c, join_paths.c, aggregate_paths.c) builds the
 * SELECTs here; scan_commands.c binds parameters into them, wraps them in a
 * binary COPY and asks for the remote type check with the helpers below, and
 * analyze.c gets its sampling query.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/transam.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/prep.h"
#include "optimizer/restrictinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "async_fdw.h"
#include "sql/deparse_internal.h"

static void append_select_list(List *tlist, DeparseContext *cxt);

/*
 * afdw_deparse_binary_select
 *		Append to BUF a query returning the rows of SQL, the remote SELECT
 *		of REL's columns RETRIEVED_ATTRS, with each column cast to the local
 *		column's type, so that its binary form is the one the local receive
 *		function reads.  Where the types are the same the cast is nothing:
 *		the remote parser drops it and flattens the subquery.
 */
void
afdw_deparse_binary_select(StringInfo buf, const char *sql,
						   const char *outer_order, Relation rel,
						   List *retrieved_attrs)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	ListCell   *lc;
	int			i = 0;

	appendStringInfoString(buf, "SELECT ");
	foreach(lc, retrieved_attrs)
	{
		int			attnum = lfirst_int(lc);
		Oid			type;
		HeapTuple	tup;

		/* The ctid is a tid on both sides. */
		type = attnum == SelfItemPointerAttributeNumber ? TIDOID :
			TupleDescAttr(tupdesc, attnum - 1)->atttypid;
		tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));

		/*
		 * The catalog name, qualified, and without a type modifier: the
		 * SQL spellings would not do ("character" means char(1)).
		 */
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for type %u", type);
		appendStringInfo(buf, "%sc%d::pg_catalog.%s", i > 0 ? ", " : "", i + 1,
						 quote_identifier(NameStr(((Form_pg_type) GETSTRUCT(tup))->typname)));
		ReleaseSysCache(tup);
		i++;
	}
	appendStringInfo(buf, " FROM (%s) s(", sql);
	for (int j = 1; j <= i; j++)
		appendStringInfo(buf, "%sc%d", j > 1 ? ", " : "", j);
	appendStringInfoChar(buf, ')');
	if (outer_order != NULL)
		appendStringInfoString(buf, outer_order);
}

/*
 * afdw_deparse_limit
 *		Append to BUF, the remote SELECT of REL (the foreign table FREL, or
 *		NULL), the LIMIT and OFFSET of ROOT's query, each a constant or a
 *		parameter (added to *PARAMS, sent as a value).
 */
void
afdw_deparse_limit(StringInfo buf, PlannerInfo *root, RelOptInfo *rel,
				   Relation frel, List **params)
{
	Query	   *parse = root->parse;
	DeparseContext cxt;

	afdw_init_deparse(&cxt, buf, root, rel, frel, params);
	if (parse->limitCount != NULL)
	{
		appendStringInfoString(buf, " LIMIT ");
		afdw_deparse_expr((Expr *) parse->limitCount, &cxt);
	}
	if (parse->limitOffset != NULL)
	{
		appendStringInfoString(buf, " OFFSET ");
		afdw_deparse_expr((Expr *) parse->limitOffset, &cxt);
	}
	afdw_end_deparse(&cxt);
}

/*
 * afdw_deparse_type_check
 *		Append to BUF a remote query that returns true when every column
 *		of REL with a built-in type has exactly that type remotely too
 *		(built-in types have the same OIDs on both servers).  The answer
 *		holds for any scan of REL, whatever columns it reads.
 */
void
afdw_deparse_type_check(StringInfo buf, Relation rel)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	StringInfoData relname;
	StringInfoData pairs;
	int			n = 0;

	initStringInfo(&pairs);
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		if (att->attisdropped || att->atttypid >= FirstGenbkiObjectId)
			continue;
		appendStringInfo(&pairs, "%s(%s::pg_catalog.name, '%u'::pg_catalog.oid)",
						 n > 0 ? ", " : "",
						 quote_literal_cstr(afdw_remote_column_name(rel, i + 1)),
						 att->atttypid);
		n++;
	}

	initStringInfo(&relname);
	afdw_deparse_relation(&relname, rel);
	appendStringInfo(buf,
					 "SELECT count(*) = %d FROM pg_catalog.pg_attribute"
					 " WHERE attrelid = pg_catalog.to_regclass(%s)"
					 " AND attnum > 0 AND NOT attisdropped"
					 " AND (attname, atttypid) IN (%s)",
					 n, quote_literal_cstr(relname.data), pairs.data);
	pfree(relname.data);
	pfree(pairs.data);
}

/*
 * deparse_target_list
 *		Append the columns of REL in ATTRS_USED (all of them for a whole-row
 *		reference) to BUF, and list their numbers in *RETRIEVED_ATTRS.
 */
static void
deparse_target_list(StringInfo buf, Relation rel, Bitmapset *attrs_used,
					List **retrieved_attrs)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	bool		all = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber,
									attrs_used);
	bool		first = true;

	*retrieved_attrs = NIL;
	for (int i = 1; i <= tupdesc->natts; i++)
	{
		if (TupleDescAttr(tupdesc, i - 1)->attisdropped)
			continue;
		if (!all && !bms_is_member(i - FirstLowInvalidHeapAttributeNumber,
								   attrs_used))
			continue;
		if (!first)
			appendStringInfoString(buf, ", ");
		first = false;
		appendStringInfoString(buf, quote_identifier(afdw_remote_column_name(rel, i)));
		*retrieved_attrs = lappend_int(*retrieved_attrs, i);
	}

	/*
	 * The remote row's ctid, when referenced: it becomes the local tuple's
	 * ctid.  Other system columns would mean nothing locally.
	 */
	if (bms_is_member(SelfItemPointerAttributeNumber - FirstLowInvalidHeapAttributeNumber,
					  attrs_used))
	{
		if (!first)
			appendStringInfoString(buf, ", ");
		first = false;
		appendStringInfoString(buf, "ctid");
		*retrieved_attrs = lappend_int(*retrieved_attrs, SelfItemPointerAttributeNumber);
	}

	/* No column needed (count(*), say): rows still have to come. */
	if (first)
		appendStringInfoString(buf, "NULL");
}

/*
 * afdw_deparse_select
 *		The remote SELECT of a scan of BASEREL: the columns in ATTRS_USED and
 *		the REMOTE_CONDS (RestrictInfos).
 *
 * *RETRIEVED_ATTRS gets the local column numbers of the result's columns;
 * *PARAMS the expressions whose values are sent as $1, $2, ...
 */
void
afdw_deparse_select(StringInfo buf, PlannerInfo *root, RelOptInfo *baserel,
					Relation rel, Bitmapset *attrs_used, List *remote_conds,
					List **retrieved_attrs, List **params)
{
	DeparseContext cxt;

	appendStringInfoString(buf, "SELECT ");
	deparse_target_list(buf, rel, attrs_used, retrieved_attrs);
	appendStringInfoString(buf, " FROM ");
	afdw_deparse_relation(buf, rel);

	afdw_init_deparse(&cxt, buf, root, baserel, rel, params);
	afdw_deparse_conditions(extract_actual_clauses(remote_conds, false), &cxt);
	afdw_end_deparse(&cxt);
}

/*
 * repeated_arguments_walker
 *		Add to *ARGS (once each) the arguments of the aggregates in NODE
 *		that their partial forms would evaluate more than once a row
 *		(afdw_repeated_argument).
 */
static bool
repeated_arguments_walker(Node *node, List **args)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		Expr	   *arg = afdw_repeated_argument((Aggref *) node);

		if (arg != NULL)
			*args = list_append_unique(*args, arg);
	}
	return expression_tree_walker(node, repeated_arguments_walker, (void *) args);
}

/* The columns of a grouped query's subquery, being collected. */
typedef struct SubqueryColumns
{
	List	   *computed;		/* the expressions it computes */
	List	   *vars;			/* the columns read above it */
} SubqueryColumns;

/*
 * subquery_vars_walker
 *		Add to COLS's vars (once each) the columns that NODE reads outside
 *		the expressions that the subquery computes; true (give the subquery
 *		up) for a column that is not a table's plain column (a whole row,
 *		ctid) or a placeholder.
 */
static bool
subquery_vars_walker(Node *node, SubqueryColumns *cols)
{
	ListCell   *lc;

	if (node == NULL)
		return false;
	if (list_member(cols->computed, node))
		return false;
	if (IsA(node, PlaceHolderVar))
		return true;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if (var->varlevelsup != 0 || var->varattno <= 0)
			return true;
		foreach(lc, cols->vars)
		{
			Var		   *v = lfirst_node(Var, lc);

			if (v->varno == var->varno && v->varattno == var->varattno)
				return false;
		}
		cols->vars = lappend(cols->vars, var);
		return false;
	}
	return expression_tree_walker(node, subquery_vars_walker, (void *) cols);
}

/*
 * grouped_subquery_columns
 *		The columns of the subquery that a partial grouped query of TLIST
 *		(TargetEntries) and HAVING reads when some aggregate's partial form
 *		evaluates its argument more than once a row: the columns read above
 *		it, then each such argument once; NIL when none does.
 */
static List *
grouped_subquery_columns(List *tlist, List *having)
{
	SubqueryColumns cols = {NIL, NIL};

	repeated_arguments_walker((Node *) tlist, &cols.computed);
	if (cols.computed == NIL ||
		subquery_vars_walker((Node *) tlist, &cols) ||
		subquery_vars_walker((Node *) having, &cols))
		return NIL;
	return list_concat(cols.vars, cols.computed);
}

/*
 * afdw_deparse_grouped_select
 *		The remote SELECT of an aggregate over BASEREL, a foreign table (REL)
 *		or a join of them: the expressions of TLIST (TargetEntries, their
 *		aggregates computed whole or, when PARTIAL, as transition states)
 *		over the rows that pass REMOTE_CONDS (RestrictInfos, for a table) or
 *		the join's conditions, grouped by the TLIST items at the 1-based
 *		positions GROUP_POSITIONS and by the values of GROUP_VALUES
 *		(Params), and the groups kept by HAVING (expressions).  *PARAMS
 *		gets the expressions sent as $1, $2, ...  *KEY_AT is the offset
 *		where more conditions on the table's rows may go (pushed_keys.c), with
 *		*KEY_WHERE true if a WHERE clause is written already; -1 for a
 *		join or the subquery form below.
 *
 * The state of an avg reads its argument twice (in a count and a sum):
 * such an argument that is not a column is then computed once a row in a
 * subquery, SELECT ... FROM (SELECT columns, arguments FROM ... WHERE
 * ... OFFSET 0) g(c1, ...) GROUP BY ..., which OFFSET 0 keeps the remote
 * planner from merging into the grouping.
 */
void
afdw_deparse_grouped_select(StringInfo buf, PlannerInfo *root, RelOptInfo *baserel,
							Relation rel, List *tlist, List *remote_conds,
							List *group_positions, List *group_values,
							List *having, bool partial, List **params,
							int *key_at, bool *key_where)
{
	DeparseContext cxt;
	ListCell   *lc;
	bool		first = true;
	List	   *computed = partial ? grouped_subquery_columns(tlist, having) : NIL;

	afdw_init_deparse(&cxt, buf, root, baserel, rel, params);
	cxt.partial = partial;
	afdw_avg_args_walker((Node *) tlist, &cxt.avg_args);

	cxt.computed = computed;
	append_select_list(tlist, &cxt);
	cxt.computed = NIL;
	appendStringInfoString(buf, " FROM ");
	if (computed != NIL)
	{
		appendStringInfoString(buf, "(SELECT ");
		foreach(lc, computed)
		{
			if (foreach_current_index(lc) > 0)
				appendStringInfoString(buf, ", ");
			afdw_deparse_expr((Expr *) lfirst(lc), &cxt);
		}
		appendStringInfoString(buf, " FROM ");
	}
	*key_at = -1;
	*key_where = false;
	if (rel != NULL)
	{
		List	   *conds = extract_actual_clauses(remote_conds, false);

		afdw_deparse_relation(buf, rel);
		afdw_deparse_conditions(conds, &cxt);
		if (computed == NIL)
		{
			*key_at = buf->len;
			*key_where = (conds != NIL);
		}
	}
	else
		afdw_deparse_join_from_where(baserel, &cxt);
	if (computed != NIL)
	{
		appendStringInfoString(buf, " OFFSET 0) g");
		foreach(lc, computed)
			appendStringInfo(buf, "%sc%d", foreach_current_index(lc) == 0 ? "(" : ", ",
							 foreach_current_index(lc) + 1);
		appendStringInfoChar(buf, ')');
	}
	cxt.computed = computed;

	/* By position: a constant's position is not the constant. */
	first = true;
	foreach(lc, group_positions)
	{
		appendStringInfo(buf, "%s%d", first ? " GROUP BY " : ", ", lfirst_int(lc));
		first = false;
	}
	/* "$n::type" (a value bound inline too): an expression, not a position. */
	foreach(lc, group_values)
	{
		appendStringInfoString(buf, first ? " GROUP BY " : ", ");
		first = false;
		afdw_deparse_expr((Expr *) lfirst(lc), &cxt);
	}

	first = true;
	foreach(lc, having)
	{
		appendStringInfoString(buf, first ? " HAVING " : " AND ");
		first = false;
		appendStringInfoChar(buf, '(');
		afdw_deparse_expr((Expr *) lfirst(lc), &cxt);
		appendStringInfoChar(buf, ')');
	}
	afdw_end_deparse(&cxt);
}

/*
 * append_select_list
 *		Append SELECT and the expressions of TLIST (TargetEntries); with no
 *		column needed (count(*) of a join), a lone NULL: rows still have to
 *		come.
 */
static void
append_select_list(List *tlist, DeparseContext *cxt)
{
	ListCell   *lc;
	bool		first = true;

	appendStringInfoString(cxt->buf, "SELECT ");
	foreach(lc, tlist)
	{
		if (!first)
			appendStringInfoString(cxt->buf, ", ");
		first = false;
		afdw_deparse_expr(lfirst_node(TargetEntry, lc)->expr, cxt);
	}
	if (first)
		appendStringInfoString(cxt->buf, "NULL");
}

/*
 * afdw_deparse_locking_clause
 *		Append to BUF the locking clause the remote SELECT of BASEREL needs
 *		when the query locks the relation's rows (SELECT ... FOR UPDATE or
 *		FOR SHARE naming it, or all of its tables); true if it needs one.
 *
 * The rows are locked remotely as they are fetched, as postgres_fdw does,
 * rather than locked again afterwards as local rows are.  The key and
 * NOWAIT variants are not passed on either, as with postgres_fdw: FOR NO
 * KEY UPDATE becomes FOR UPDATE, FOR KEY SHARE becomes FOR SHARE.  A
 * partition of a partitioned table has a row mark of its own, copied
 * from the parent's.
 */
bool
afdw_deparse_locking_clause(StringInfo buf, PlannerInfo *root,
							RelOptInfo *baserel)
{
	PlanRowMark *rc = get_plan_rowmark(root->rowMarks, baserel->relid);

	/*
	 * The target of an UPDATE or DELETE changed row by row: its rows are
	 * locked as they are read, as a local target's are when changed.
	 */
	if ((root->parse->commandType == CMD_UPDATE ||
		 root->parse->commandType == CMD_DELETE) &&
		bms_is_member(baserel->relid, root->all_result_relids))
	{
		appendStringInfoString(buf, " FOR UPDATE");
		return true;
	}
	if (rc == NULL)
		return false;
	switch (rc->strength)
	{
		case LCS_NONE:
			/* A table of the query that is not locked. */
			return false;
		case LCS_FORKEYSHARE:
		case LCS_FORSHARE:
			appendStringInfoString(buf, " FOR SHARE");
			return true;
		case LCS_FORNOKEYUPDATE:
		case LCS_FORUPDATE:
			appendStringInfoString(buf, " FOR UPDATE");
			return true;
	}
	return false;
}

/*
 * append_column_list
 *		Append the remote names of REL's columns TARGET_ATTRS (column
 *		numbers), separated by commas.
 */
static void
append_column_list(StringInfo buf, Relation rel, List *target_attrs)
{
	ListCell   *lc;

	foreach(lc, target_attrs)
	{
		if (lc != list_head(target_attrs))
			appendStringInfoString(buf, ", ");
		appendStringInfoString(buf,
							   quote_identifier(afdw_remote_column_name(rel, lfirst_int(lc))));
	}
}

/*
 * append_returning
 *		Append to BUF, when RETURNING, a RETURNING clause of every column of
 *		REL, and the ctid with WITH_CTID (RETURNING ctid: a remote view has
 *		none), whose numbers go to *RETRIEVED_ATTRS (NIL otherwise): the row
 *		as the remote server stored it replaces the local one, for the
 *		query's RETURNING list, triggers and check options to see.
 */
static void
append_returning(StringInfo buf, Relation rel, bool returning, bool with_ctid,
				 List **retrieved_attrs)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	bool		first = true;

	*retrieved_attrs = NIL;
	if (!returning)
		return;
	for (int i = 1; i <= tupdesc->natts; i++)
	{
		if (TupleDescAttr(tupdesc, i - 1)->attisdropped)
			continue;
		appendStringInfoString(buf, first ? " RETURNING " : ", ");
		first = false;
		appendStringInfoString(buf, quote_identifier(afdw_remote_column_name(rel, i)));
		*retrieved_attrs = lappend_int(*retrieved_attrs, i);
	}
	/* And where the row now is, for RETURNING ctid (or a table of no column). */
	if (with_ctid || first)
	{
		appendStringInfoString(buf, first ? " RETURNING ctid" : ", ctid");
		*retrieved_attrs = lappend_int(*retrieved_attrs, SelfItemPointerAttributeNumber);
	}
}

/*
 * afdw_deparse_insert
 *		The remote INSERT into REL of the columns TARGET_ATTRS, in three
 *		parts: HEAD up to VALUES, ROW the row of parameters $1, $2, ... (one
 *		per column, or DEFAULT VALUES' place when there is none), repeated
 *		for each row of a batch, and TAIL: ON CONFLICT DO NOTHING with
 *		DO_NOTHING, the RETURNING clause with RETURNING (see
 *		append_returning).
 */
void
afdw_deparse_insert(StringInfo head, StringInfo row, StringInfo tail,
					Relation rel, List *target_attrs, bool do_nothing,
					bool returning, bool with_ctid, List **retrieved_attrs)
{
	appendStringInfoString(head, "INSERT INTO ");
	afdw_deparse_relation(head, rel);
	if (target_attrs != NIL)
	{
		appendStringInfoChar(head, '(');
		append_column_list(head, rel, target_attrs);
		appendStringInfoString(head, ") VALUES ");
		appendStringInfoChar(row, '(');
		for (int i = 1; i <= list_length(target_attrs); i++)
			appendStringInfo(row, "%s$%d", i > 1 ? ", " : "", i);
		appendStringInfoChar(row, ')');
	}
	else
		appendStringInfoString(head, " DEFAULT VALUES");
	if (do_nothing)
		appendStringInfoString(tail, " ON CONFLICT DO NOTHING");
	append_returning(tail, rel, returning, with_ctid, retrieved_attrs);
}

/*
 * append_row_finder
 *		Append to BUF the WHERE clause that finds the one row of REL to
 *		change, its parameters numbered from FIRST: its ctid, or with KEY
 *		(the key of a replicated table, see afdw_copy_key) the values of
 *		those columns, which find the same row on every copy.
 */
static void
append_row_finder(StringInfo buf, Relation rel, List *key, int first)
{
	ListCell   *lc;

	if (key == NIL)
	{
		appendStringInfo(buf, " WHERE ctid = $%d", first);
		return;
	}
	foreach(lc, key)
		appendStringInfo(buf, "%s%s = $%d",
						 foreach_current_index(lc) == 0 ? " WHERE " : " AND ",
						 quote_identifier(afdw_remote_column_name(rel, lfirst_int(lc))),
						 first + foreach_current_index(lc));
}

/*
 * afdw_deparse_update
 *		The remote UPDATE of one row of REL: HEAD sets the columns
 *		TARGET_ATTRS to $1, $2, ... and finds the row by the parameters
 *		after them (its ctid, or the values of KEY: see append_row_finder);
 *		TAIL is the RETURNING clause with RETURNING (see append_returning).
 */
void
afdw_deparse_update(StringInfo head, StringInfo tail, Relation rel,
					List *target_attrs, List *key, bool returning,
					bool with_ctid, List **retrieved_attrs)
{
	ListCell   *lc;
	int			n = 0;

	appendStringInfoString(head, "UPDATE ");
	afdw_deparse_relation(head, rel);
	foreach(lc, target_attrs)
	{
		appendStringInfoString(head, n == 0 ? " SET " : ", ");
		appendStringInfo(head, "%s = $%d",
						 quote_identifier(afdw_remote_column_name(rel, lfirst_int(lc))),
						 n + 1);
		n++;
	}
	/* Nothing to set (only generated columns change): the row stays. */
	if (n == 0)
		appendStringInfo(head, " SET %s = %s",
						 quote_identifier(afdw_remote_column_name(rel, 1)),
						 quote_identifier(afdw_remote_column_name(rel, 1)));
	append_row_finder(head, rel, key, n + 1);
	append_returning(tail, rel, returning, with_ctid, retrieved_attrs);
}

/*
 * afdw_deparse_delete
 *		The remote DELETE of one row of REL, found by $1 (its ctid), or by
 *		$1, $2, ... (the values of KEY) (HEAD), and its RETURNING clause with
 *		RETURNING (TAIL, see append_returning).
 */
void
afdw_deparse_delete(StringInfo head, StringInfo tail, Relation rel, List *key,
					bool returning, bool with_ctid, List **retrieved_attrs)
{
	appendStringInfoString(head, "DELETE FROM ");
	afdw_deparse_relation(head, rel);
	append_row_finder(head, rel, key, 1);
	append_returning(tail, rel, returning, with_ctid, retrieved_attrs);
}

/*
 * afdw_deparse_copy_from
 *		The remote COPY of REL's columns TARGET_ATTRS from the client, in
 *		text format.
 */
void
afdw_deparse_copy_from(StringInfo buf, Relation rel, List *target_attrs)
{
	appendStringInfoString(buf, "COPY ");
	afdw_deparse_relation(buf, rel);
	if (target_attrs != NIL)
	{
		appendStringInfoString(buf, " (");
		append_column_list(buf, rel, target_attrs);
		appendStringInfoChar(buf, ')');
	}
	appendStringInfoString(buf, " FROM STDIN");
}

/*
 * afdw_deparse_analyze
 *		The remote SELECT of every column of REL, for ANALYZE, of about
 *		FRACTION of its rows sampled by METHOD (AFDW_SAMPLE_OFF: all rows;
 *		never AFDW_SAMPLE_AUTO).
 */
void
afdw_deparse_analyze(StringInfo buf, Relation rel, AfdwSampling method,
					 double fraction, List **retrieved_attrs)
{
	Bitmapset  *all = bms_make_singleton(0 - FirstLowInvalidHeapAttributeNumber);

	Assert(method != AFDW_SAMPLE_AUTO);
	appendStringInfoString(buf, "SELECT ");
	deparse_target_list(buf, rel, all, retrieved_attrs);
	appendStringInfoString(buf, " FROM ");
	afdw_deparse_relation(buf, rel);
	/* The percentage or fraction as a literal that reads back exactly. */
	if (method == AFDW_SAMPLE_SYSTEM || method == AFDW_SAMPLE_BERNOULLI)
		appendStringInfo(buf, " TABLESAMPLE %s(%.17g)",
						 method == AFDW_SAMPLE_SYSTEM ? "SYSTEM" : "BERNOULLI",
						 100.0 * fraction);
	else if (method == AFDW_SAMPLE_RANDOM)
		appendStringInfo(buf, " WHERE pg_catalog.random() < %.17g", fraction);
}

/*
 * afdw_bind_params
 *		Append SQL to BUF with each parameter reference $n replaced by the
 *		literal of VALUES[n - 1] (NULL for a null value).
 *
 * SQL is remote SQL of async_fdw's own making, in which $n appears only as
 * "$n::type" outside quoted literals and identifiers, which are skipped.
 * Sending the values inline lets the DECLARE of a parameterized scan go in
 * the same message as its first FETCH.
 */
void
afdw_bind_params(StringInfo buf, const char *sql, int nparams,
				 const char *const *values)
{
	const char *p = sql;

	while (*p)
	{
		if (*p == '\'' || *p == '"')
		{
			/* A quoted literal or identifier, to its closing quote. */
			char		quote = *p;
			bool		backslashes = (quote == '\'' && p > sql &&
									   (p[-1] == 'E' || p[-1] == 'e'));

			appendStringInfoChar(buf, *p++);
			while (*p)
			{
				if (backslashes && *p == '\\' && p[1])
				{
					appendBinaryStringInfo(buf, p, 2);
					p += 2;
					continue;
				}
				if (*p == quote)
				{
					appendStringInfoChar(buf, *p++);
					if (*p != quote)
						break;	/* closing quote; a doubled one goes on */
				}
				appendStringInfoChar(buf, *p++);
			}
			continue;
		}
		if (*p == '$' && isdigit((unsigned char) p[1]))
		{
			char	   *end;
			long		n = strtol(p + 1, &end, 10);

			if (n < 1 || n > nparams)
				elog(ERROR, "parameter $%ld out of range in remote SQL", n);
			if (values[n - 1] == NULL)
				appendStringInfoString(buf, "NULL");
			else
				afdw_append_literal(buf, values[n - 1]);
			p = end;
			continue;
		}
		appendStringInfoChar(buf, *p++);
	}
}

/*
 * afdw_deparse_condition
 *		The text of COND, a condition on BASEREL (foreign table REL), as
 *		the remote SELECT whose parameters are PARAMS would have it: a
 *		parameter not among them is numbered after them (PARAMS itself is
 *		left as it is).
 */
char *
afdw_deparse_condition(PlannerInfo *root, RelOptInfo *baserel, Relation rel,
					   Expr *cond, List *params)
{
	DeparseContext cxt;
	StringInfoData buf;
	List	   *own = list_copy(params);

	initStringInfo(&buf);
	afdw_init_deparse(&cxt, &buf, root, baserel, rel, &own);
	afdw_deparse_expr(cond, &cxt);
	afdw_end_deparse(&cxt);
	list_free(own);
	return buf.data;
}
