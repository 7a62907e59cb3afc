/*-------------------------------------------------------------------------
 *
 * deparse_internal.h
 *		The state of writing remote SQL, shared by the files that write
 *		it: deparse_context.c (its setup and end), deparse_statements.c
 *		(statements), deparse_join.c (statements over a remote join),
 *		direct_modify.c and direct_modify_plan.c (a pushed UPDATE or
 *		DELETE), deparse_expr.c (expressions) and join_subqueries.c (the
 *		sides of joins read as subqueries).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DEPARSE_INTERNAL_H
#define DEPARSE_INTERNAL_H

#include "lib/stringinfo.h"
#include "nodes/pathnodes.h"
#include "utils/relcache.h"

/* State of deparsing one statement's expressions. */
typedef struct DeparseContext
{
	StringInfo	buf;
	PlannerInfo *root;			/* the query's planner state, for the
								 * subqueries sent inside (deparse_expr.c) */
	RelOptInfo *baserel;		/* the relation read: a base relation, or
								 * a join of them */
	Relation	rel;			/* a base relation's */
	List	   *joined;			/* a join's base relations (Relations)... */
	List	   *joined_relids;	/* ... and their range table indexes */
	List	   *subqueries;		/* a join's sides read as subqueries
								 * (AfdwSubquery, below)... */
	int			scope;			/* ... and the one being written (0: none) */
	bool		partial;		/* aggregates give their transition states */
	List	   *computed;		/* a grouped query's input read from a
								 * subquery: its columns (Vars and the
								 * expressions it computes), written
								 * g.c<k> above it */
	List	   *avg_args;		/* a grouped query's avgs of numeric and
								 * bigint: their argument lists */
	List	  **params;			/* expressions sent as $1, $2, ... */
	int			guc_level;		/* transmission modes' GUC level, or -1
								 * before a constant needed them */
} DeparseContext;

/*
 * A side of a full join that is itself a join with WHERE conditions, read
 * as the subquery s<number>(c1, c2, ...): its select list is the columns
 * of its tables that the query reads above it (COLUMNS, Vars), which are
 * named there c<k>.  PARENT is the subquery it is written in (0: none).
 */
typedef struct AfdwSubquery
{
	RelOptInfo *rel;
	int			number;
	int			parent;
	List	   *columns;
} AfdwSubquery;

/* deparse_context.c */
extern void afdw_init_deparse(DeparseContext *cxt, StringInfo buf, PlannerInfo *root,
							  RelOptInfo *baserel, Relation rel, List **params);
extern void afdw_init_join_deparse(DeparseContext *cxt, StringInfo buf,
								   PlannerInfo *root, RelOptInfo *joinrel,
								   List **params);
extern void afdw_end_deparse(DeparseContext *cxt);
extern void afdw_deparse_conditions(List *conds, DeparseContext *cxt);
extern void afdw_deparse_set_list(List *targets, List *colnos, Relation rel,
								  DeparseContext *cxt);

/* deparse_join.c */
extern void afdw_deparse_join_from_where(RelOptInfo *joinrel,
										 DeparseContext *cxt);
extern bool afdw_join_modify_ok(RelOptInfo *joinrel, Index target);
extern void afdw_deparse_join_modify(StringInfo buf, PlannerInfo *root,
									 RelOptInfo *joinrel, Index target,
									 CmdType operation, List *targets,
									 List *colnos, bool returning,
									 Bitmapset *ret_attrs, List *join_vars,
									 List **retrieved_attrs, List **params);

/* deparse_expr.c */
extern void afdw_deparse_expr(Expr *node, DeparseContext *cxt);
extern Expr *afdw_repeated_argument(Aggref *agg);
extern bool afdw_avg_args_walker(Node *node, List **args);

/* join_subqueries.c */
extern bool afdw_is_semi_join(RelOptInfo *rel);
extern bool afdw_side_is_subquery(RelOptInfo *rel, JoinType jointype);
extern void afdw_collect_subqueries(RelOptInfo *rel, int parent,
									DeparseContext *cxt);
extern bool afdw_deparse_subquery_column(Var *var, DeparseContext *cxt);

#endif							/* DEPARSE_INTERNAL_H */
