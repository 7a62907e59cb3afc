/*-------------------------------------------------------------------------
 *
 * deparse_context.c
 *		The state of writing one remote statement (DeparseContext,
 *		deparse_internal.h): its setup and its end; and the pieces that the
 *		statements of a table and of a join both write: a table's remote
 *		name, a WHERE clause, an UPDATE's SET list.
 *
 * Setting up a statement over a join opens the join's tables and numbers
 * the sides read as subqueries (join_subqueries.c); its end closes them
 * and resets the transmission modes that a constant may have set
 * (deparse_expr.c).
 *
 * Neighbours: deparse_statements.c and deparse_join.c write their
 * statements with these, direct_modify_plan.c a pushed UPDATE or DELETE;
 * analyze.c, truncate.c and check_copies.c name remote tables with
 * afdw_deparse_relation; deparse_expr.c writes the expressions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "commands/defrem.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "async_fdw.h"
#include "sql/deparse_internal.h"

/*
 * afdw_init_deparse
 *		Set CXT up to write the expressions of a statement reading BASEREL:
 *		a foreign table REL, or (REL NULL) a join, whose tables are opened
 *		until afdw_end_deparse.
 */
void
afdw_init_deparse(DeparseContext *cxt, StringInfo buf, PlannerInfo *root,
				  RelOptInfo *baserel, Relation rel, List **params)
{
	int			relid = -1;
	Relids		tables;

	cxt->buf = buf;
	cxt->root = root;
	cxt->baserel = baserel;
	cxt->rel = rel;
	cxt->joined = NIL;
	cxt->joined_relids = NIL;
	cxt->subqueries = NIL;
	cxt->scope = 0;
	cxt->partial = false;
	cxt->computed = NIL;
	cxt->avg_args = NIL;
	cxt->params = params;
	cxt->guc_level = -1;
	if (rel != NULL)
		return;
	tables = afdw_base_relids(root, baserel);
	while ((relid = bms_next_member(tables, relid)) >= 0)
	{
		cxt->joined = lappend(cxt->joined,
							  table_open(planner_rt_fetch(relid, root)->relid, NoLock));
		cxt->joined_relids = lappend_int(cxt->joined_relids, relid);
	}
	if (baserel->fdw_private != NULL &&
		((AfdwRelInfo *) baserel->fdw_private)->outer_rel != NULL)
		afdw_collect_subqueries(baserel, 0, cxt);
}

/*
 * afdw_init_join_deparse
 *		Set CXT up, as afdw_init_deparse does, to write a statement over
 *		JOINREL, a remote join (deparse_join.c), whose tables stay open until
 *		afdw_end_deparse.
 */
void
afdw_init_join_deparse(DeparseContext *cxt, StringInfo buf, PlannerInfo *root,
					   RelOptInfo *joinrel, List **params)
{
	afdw_init_deparse(cxt, buf, root, joinrel, NULL, params);
}

/*
 * afdw_end_deparse
 *		Undo what writing CXT's expressions set: the transmission modes, the
 *		tables of a join.
 */
void
afdw_end_deparse(DeparseContext *cxt)
{
	ListCell   *lc;

	if (cxt->guc_level >= 0)
		afdw_reset_transmission_modes(cxt->guc_level);
	foreach(lc, cxt->joined)
		table_close((Relation) lfirst(lc), NoLock);
}

/*
 * afdw_deparse_relation
 *		Append REL's remote name, schema-qualified and quoted, to BUF.
 */
void
afdw_deparse_relation(StringInfo buf, Relation rel)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	const char *nspname = NULL;
	const char *relname = NULL;
	ListCell   *lc;

	foreach(lc, table->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "schema_name") == 0)
			nspname = defGetString(def);
		else if (strcmp(def->defname, "table_name") == 0)
			relname = defGetString(def);
	}
	if (nspname == NULL)
		nspname = get_namespace_name(RelationGetNamespace(rel));
	if (relname == NULL)
		relname = RelationGetRelationName(rel);

	appendStringInfo(buf, "%s.%s", quote_identifier(nspname),
					 quote_identifier(relname));
}

/*
 * afdw_deparse_conditions
 *		Append the expressions CONDS as a WHERE clause, if any.
 */
void
afdw_deparse_conditions(List *conds, DeparseContext *cxt)
{
	ListCell   *lc;
	bool		first = true;

	foreach(lc, conds)
	{
		appendStringInfoString(cxt->buf, first ? " WHERE " : " AND ");
		first = false;
		appendStringInfoChar(cxt->buf, '(');
		afdw_deparse_expr((Expr *) lfirst(lc), cxt);
		appendStringInfoChar(cxt->buf, ')');
	}
}

/*
 * afdw_deparse_set_list
 *		Append " SET col = expr, ..." of a remote UPDATE to CXT's buffer:
 *		TARGETS' expressions (TargetEntries) assigned to REL's columns
 *		COLNOS (nothing for a DELETE, whose lists are empty).
 */
void
afdw_deparse_set_list(List *targets, List *colnos, Relation rel,
					  DeparseContext *cxt)
{
	ListCell   *lc;
	ListCell   *lc2;
	bool		first = true;

	forboth(lc, targets, lc2, colnos)
	{
		appendStringInfoString(cxt->buf, first ? " SET " : ", ");
		first = false;
		appendStringInfo(cxt->buf, "%s = ",
						 quote_identifier(afdw_remote_column_name(rel, lfirst_int(lc2))));
		afdw_deparse_expr(lfirst_node(TargetEntry, lc)->expr, cxt);
	}
}
