/*-------------------------------------------------------------------------
 *
 * order_limit.c
 *		ORDER BY and LIMIT of remote joins and remote aggregates, and the
 *		LIMIT of the final stage.
 *
 * A remote join (join_paths.c) is offered sorted in the query's order when the
 * remote server sorts each key exactly as the local one would: a plain column
 * of one of its tables, of a built-in type, ordered by that type's default
 * built-in operator class, in the default collation (or none), the rule
 * afdw_sort_key applies to a foreign table's scan.  A remote aggregate
 * (aggregate_paths.c) is offered sorted by the query's ORDER BY when each key
 * is an item of its remote select list of such a type (an aggregate's array of
 * such a built-in type too, ordered by array_ops).  The ORDER BY is then
 * written in the remote SELECT, and the local Sort goes.  With
 * use_remote_estimate, as postgres_fdw, a foreign table or a remote join is
 * also offered sorted by each join column a merge join could use.  A remote
 * sort costs what a local sort of the same rows would, but it ends before the
 * first row is sent (afdw_remote_sort_cost).
 *
 * When the LIMIT and OFFSET are all the query has left to do after a
 * foreign table's scan, a remote join or a remote aggregate, the final
 * stage of the planning (UPPERREL_FINAL) gets that scan with the LIMIT
 * and OFFSET in its remote query, as written (constants or parameters),
 * in place of the local Limit node (afdw_add_final_path): a UNION branch
 * with a LIMIT then stays a plain Foreign Scan, asynchronous under the
 * Append.  Otherwise the LIMIT (plus the OFFSET) still follows when
 * nothing between the remote query and the local Limit can drop rows or
 * change their order: the join reads every table of the query, or the
 * aggregate is the query's whole work (no DISTINCT, window function or
 * set-returning function after it), and the rows come in the query's
 * order if it has one.  The local Limit then stays; the remote one only
 * spares rows that would be thrown away.  Not with WITH TIES, a LIMIT
 * that is not a constant, row locks or parameters in the remote query, as
 * for a foreign table's scan (scan_paths.c).
 *
 * Neighbours: join_paths.c, aggregate_paths.c and scan_paths.c add the
 * unsorted paths and call here for the sorted ones (a foreign table's sort
 * keys are shippable.c's afdw_sort_key, written here by
 * afdw_deparse_order_by); join_paths.c and aggregate_paths.c hand the plans of
 * joins and aggregates here to finish the remote SQL; deparse_statements.c
 * writes a join's sort expressions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "async_fdw.h"

static bool query_limit(PlannerInfo *root, int64 *limit);
static bool add_kept_final_path(PlannerInfo *root, RelOptInfo *final,
								FinalPathExtraData *extra);

/*
 * sort_type_ok
 *		True if the remote server orders values of TYPE in collation COLL
 *		as the local one does for path key PK: a built-in type ordered by
 *		its default built-in operator family, no collation or the default.
 */
static bool
sort_type_ok(PathKey *pk, Oid type, Oid coll)
{
	TypeCacheEntry *tce;

	if (!afdw_is_builtin(type) ||
		(OidIsValid(coll) && coll != DEFAULT_COLLATION_OID))
		return false;
	tce = lookup_type_cache(type, TYPECACHE_BTREE_OPFAMILY);
	return OidIsValid(tce->btree_opf) && tce->btree_opf == pk->pk_opfamily &&
		afdw_is_builtin(tce->btree_opf);
}

/*
 * key_ok
 *		True if the equivalence class of PK may be sorted remotely at all:
 *		no volatile member, a plain ascending or descending order, a
 *		collation the remote server has.
 */
static bool
key_ok(PathKey *pk)
{
	EquivalenceClass *ec = pk->pk_eclass;

	return !ec->ec_has_volatile &&
		(!OidIsValid(ec->ec_collation) ||
		 ec->ec_collation == DEFAULT_COLLATION_OID) &&
		(afdw_pathkey_ascending(pk) ||
		 afdw_pathkey_descending(pk));
}

/*
 * member_is_var
 *		Whether EM, whose expression is VAR, stands for that column of its
 *		table alone.  A member made for a child join of a partitionwise
 *		join (PostgreSQL 16 and later) carries the child join's relations
 *		rather than its own.
 */
static bool
member_is_var(EquivalenceMember *em, Var *var)
{
	Relids		relids = afdw_var_relids(var);

	return bms_equal(em->em_relids, relids) ||
		(em->em_is_child && bms_is_subset(relids, em->em_relids));
}

/*
 * join_sort_var
 *		The column of the remote join JOINREL by which the remote server
 *		orders its rows exactly as the local server would for path key
 *		PK; NULL if there is none.  Only a column the join's remote query
 *		can name (afdw_join_var_readable): not one of a semi- or
 *		anti-join's inner side, nor one a subquery does not return.
 */
static Var *
join_sort_var(RelOptInfo *joinrel, PathKey *pk)
{
	AfdwMemberIter iter;
	EquivalenceMember *em;

	if (!key_ok(pk))
		return NULL;
	afdw_members_begin(&iter, pk->pk_eclass, joinrel->relids);
	while ((em = afdw_members_next(&iter)) != NULL)
	{
		Var		   *var = (Var *) em->em_expr;

		/* A varchar column comes relabeled to text (afdw_sort_key). */
		if (IsA(var, RelabelType) &&
			((RelabelType *) var)->resulttype == em->em_datatype)
			var = (Var *) ((RelabelType *) var)->arg;
		if (!IsA(var, Var) || var->varlevelsup != 0 || var->varattno <= 0 ||
			!bms_is_subset(afdw_var_relids(var), joinrel->relids) ||
			!afdw_join_var_readable(joinrel, var) ||
			!member_is_var(em, var) ||
			!afdw_is_builtin(em->em_datatype) ||
			!sort_type_ok(pk, var->vartype, var->varcollid))
			continue;
		return var;
	}
	return NULL;
}

/*
 * member_type_ok
 *		True if an expression of type TYPE is sorted as its equivalence
 *		member of type MEMBER_TYPE says: the same type, or an array of a
 *		built-in base type under array_ops, whose members are of anyarray.
 */
static bool
member_type_ok(Oid type, Oid member_type)
{
	Oid			elem;

	if (type == member_type)
		return true;
	if (member_type != ANYARRAYOID)
		return false;
	elem = get_element_type(type);
	return OidIsValid(elem) && afdw_is_builtin(elem) &&
		get_typtype(elem) == TYPTYPE_BASE;
}

/*
 * grouped_sort_position
 *		The position in the remote select list GROUPED_TLIST (TargetEntries)
 *		of the item by which the remote server orders the groups exactly as
 *		the local server would for path key PK; 0 if there is none.
 */
static int
grouped_sort_position(List *grouped_tlist, PathKey *pk)
{
	ListCell   *lc;

	if (!key_ok(pk))
		return 0;
	foreach(lc, pk->pk_eclass->ec_members)
	{
		EquivalenceMember *em = (EquivalenceMember *) lfirst(lc);
		Expr	   *expr = em->em_expr;
		ListCell   *lc2;

		if (em->em_is_child ||
			!member_type_ok(exprType((Node *) expr), em->em_datatype) ||
			!sort_type_ok(pk, exprType((Node *) expr), exprCollation((Node *) expr)))
			continue;
		foreach(lc2, grouped_tlist)
		{
			TargetEntry *tle = lfirst_node(TargetEntry, lc2);

			if (equal(tle->expr, expr))
				return tle->resno;
		}
	}
	return 0;
}

/*
 * sort_using
 *		" USING OPERATOR(schema.op) NULLS FIRST" (or LAST) for sort operator
 *		OPNO, palloc'd.
 */
static const char *
sort_using(Oid opno, bool nulls_first)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator form;
	const char *how;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	form = (Form_pg_operator) GETSTRUCT(tup);
	how = psprintf(" USING OPERATOR(%s.%s) NULLS %s",
				   quote_identifier(get_namespace_name(form->oprnamespace)),
				   NameStr(form->oprname), nulls_first ? "FIRST" : "LAST");
	ReleaseSysCache(tup);
	return how;
}

/*
 * afdw_deparse_order_by
 *		Append to BUF, the remote SELECT of BASEREL (REL), the ORDER BY of
 *		PATHKEYS, each of which afdw_sort_key accepts or is a constant of
 *		BASEREL's rows (afdw_constant_key, left out); return the same order
 *		for the wrapper of a binary stream (afdw_deparse_binary_select), by
 *		position among RETRIEVED_ATTRS, palloc'd.  A key sorted by an
 *		extension's operator is written with USING (afdw_sort_operator).
 *
 * The subquery of the wrapper keeps its ORDER BY, but only the outer
 * query's order is guaranteed: the wrapper orders by the subquery's
 * columns, the remote values before any cast.
 */
char *
afdw_deparse_order_by(StringInfo buf, RelOptInfo *baserel, Relation rel,
					  List *pathkeys, List *retrieved_attrs)
{
	StringInfoData outer;
	ListCell   *lc;
	ListCell   *lc2;
	bool		first = true;

	initStringInfo(&outer);
	foreach(lc, pathkeys)
	{
		PathKey    *pk = (PathKey *) lfirst(lc);
		bool		descending;
		bool		nulls_first;
		AttrNumber	attno;
		const char *how;
		int			pos;
		Oid			opno;

		/* A constant of this table's rows (a UNION ALL branch's). */
		if (afdw_constant_key(baserel, pk))
			continue;
		attno = afdw_sort_key(baserel, pk, &descending, &nulls_first);
		if (attno == 0)
			elog(ERROR, "a sort key of a path of \"%s\" cannot be sent",
				 RelationGetRelationName(rel));
		pos = 0;
		foreach(lc2, retrieved_attrs)
		{
			if (lfirst_int(lc2) == attno)
				break;
			pos++;
		}
		if (lc2 == NULL)
			elog(ERROR, "sort column %d of \"%s\" is not read",
				 attno, RelationGetRelationName(rel));
		opno = afdw_sort_operator(baserel, pk,
								  TupleDescAttr(RelationGetDescr(rel), attno - 1)->atttypid);
		if (OidIsValid(opno))
			how = sort_using(opno, nulls_first);
		else
			how = descending ? (nulls_first ? " DESC" : " DESC NULLS LAST") :
				(nulls_first ? " ASC NULLS FIRST" : " ASC");
		appendStringInfoString(buf, first ? " ORDER BY " : ", ");
		appendStringInfoString(buf, quote_identifier(afdw_remote_column_name(rel, attno)));
		appendStringInfoString(buf, how);
		appendStringInfo(&outer, "%ss.c%d%s", first ? " ORDER BY " : ", ",
						 pos + 1, how);
		first = false;
	}
	return outer.data;
}

/*
 * afdw_remote_sort_cost
 *		What sorting ROWS rows of WIDTH bytes by PATHKEYS costs the remote
 *		server: what a local sort would, bounded by the first BOUND rows
 *		(-1: none) when the query's LIMIT goes with it.
 *
 * The remote sort ends before the first row is sent; a local one would
 * wait for the last row to arrive.  Paths sorted remotely add this to the
 * startup of the unsorted one's, after its whole remote read.
 */
Cost
afdw_remote_sort_cost(PlannerInfo *root, List *pathkeys, double rows, int width,
					  double bound)
{
	Path		sort_path;

	afdw_cost_sort(&sort_path, root, pathkeys, rows, width, bound);
	return sort_path.total_cost;
}

/*
 * afdw_add_sorted_join_paths
 *		Add to JOINREL, a remote join whose unsorted path costs STARTUP and
 *		TOTAL, the path sorted in the query's order when the remote server
 *		can sort it so.
 *
 * The remote join and sort end before the first row comes; the rows then
 * come as unsorted ones do (afdw_remote_sort_cost).
 */
void
afdw_add_sorted_join_paths(PlannerInfo *root, RelOptInfo *joinrel,
						   Cost startup, Cost total)
{
	Cost		extra;
	ListCell   *lc;

	if (root->query_pathkeys == NIL)
		return;
	foreach(lc, root->query_pathkeys)
	{
		if (join_sort_var(joinrel, (PathKey *) lfirst(lc)) == NULL)
			return;
	}
	extra = afdw_remote_sort_cost(root, root->query_pathkeys, joinrel->rows,
								  joinrel->reltarget->width, root->limit_tuples);
	afdw_offer_path(root, joinrel, (Path *)
			 afdw_join_path(root, joinrel, NULL, joinrel->rows,
									  startup + extra, total + extra,
									  root->query_pathkeys, NULL, NULL,
									  ((AfdwRelInfo *) joinrel->fdw_private)->gating_conds,
									  NIL));
}

/*
 * merge_classes
 *		The equivalence classes by whose order a merge join could read REL:
 *		those of its equivalence joins and of its mergeable join clauses.
 */
static List *
merge_classes(PlannerInfo *root, RelOptInfo *rel)
{
	List	   *ecs = NIL;
	ListCell   *lc;

	if (rel->has_eclass_joins)
	{
		foreach(lc, root->eq_classes)
		{
			EquivalenceClass *ec = (EquivalenceClass *) lfirst(lc);

			if (ec->ec_merged == NULL && eclass_useful_for_merging(root, ec, rel))
				ecs = list_append_unique_ptr(ecs, ec);
		}
	}
	foreach(lc, rel->joininfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		if (ri->mergeopfamilies == NIL)
			continue;
		update_mergeclause_eclasses(root, ri);
		if (bms_is_subset(ri->right_relids, rel->relids))
			ecs = list_append_unique_ptr(ecs, ri->right_ec);
		else if (bms_is_subset(ri->left_relids, rel->relids))
			ecs = list_append_unique_ptr(ecs, ri->left_ec);
	}
	return ecs;
}

/*
 * afdw_add_merge_paths
 *		Add to REL, a foreign table or a remote join whose unsorted path
 *		has read its rows remotely at cost READ and costs TOTAL, a path
 *		sorted in the ascending order of each equivalence class a merge
 *		join of REL could use, when the remote server sorts it exactly as
 *		the local one.
 *
 * Only with use_remote_estimate, as postgres_fdw: a merge join that the
 * remote sort makes look cheap is a guess that can cost a lot when the
 * guessed sizes are wrong.
 */
void
afdw_add_merge_paths(PlannerInfo *root, RelOptInfo *rel, Cost read, Cost total)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;
	bool		join = (fp->outer_rel != NULL);
	ListCell   *lc;

	if (join ? !((AfdwRelInfo *) fp->outer_rel->fdw_private)->use_remote_estimate &&
		!((AfdwRelInfo *) fp->inner_rel->fdw_private)->use_remote_estimate :
		!fp->use_remote_estimate)
		return;
	foreach(lc, merge_classes(root, rel))
	{
		EquivalenceClass *ec = (EquivalenceClass *) lfirst(lc);
		PathKey    *pk;
		List	   *pathkeys;
		bool		descending;
		bool		nulls_first;
		Cost		sort;

		if (ec->ec_opfamilies == NIL)
			continue;
		pk = make_canonical_pathkey(root, ec, linitial_oid(ec->ec_opfamilies),
									BTLessStrategyNumber, false);
		if (join ? join_sort_var(rel, pk) == NULL :
			afdw_sort_key(rel, pk, &descending, &nulls_first) == 0)
			continue;
		pathkeys = list_make1(pk);
		sort = afdw_remote_sort_cost(root, pathkeys, rel->rows,
									 rel->reltarget->width, -1.0);
		if (join)
			afdw_offer_path(root, rel, (Path *)
					 afdw_join_path(root, rel, NULL, rel->rows,
											  read + sort, total + sort,
											  pathkeys, NULL, NULL,
											  ((AfdwRelInfo *) rel->fdw_private)->gating_conds,
											  NIL));
		else
			afdw_offer_path(root, rel, (Path *)
					 afdw_scan_path(root, rel, NULL, rel->rows,
											 read + sort, total + sort,
											 pathkeys, rel->lateral_relids,
											 NULL, NIL));
	}
}

/*
 * afdw_add_sorted_grouping_path
 *		Add to GROUPED, a remote aggregate of NGROUPS rows whose unsorted
 *		path costs STARTUP and TOTAL, the path sorted by the query's ORDER
 *		BY when the remote server can sort the groups so and nothing but
 *		the ORDER BY comes after the grouping.
 *
 * The remote sort of the groups ends before the first is sent
 * (afdw_remote_sort_cost).
 */
void
afdw_add_sorted_grouping_path(PlannerInfo *root, RelOptInfo *grouped,
							  double ngroups, Cost startup, Cost total)
{
	AfdwRelInfo *gfp = (AfdwRelInfo *) grouped->fdw_private;
	Query	   *parse = root->parse;
	Cost		extra;
	int64		limit;
	ListCell   *lc;

	if (root->sort_pathkeys == NIL || gfp->partial ||
		parse->distinctClause != NIL || parse->hasWindowFuncs ||
		parse->hasTargetSRFs)
		return;
	foreach(lc, root->sort_pathkeys)
	{
		if (grouped_sort_position(gfp->grouped_tlist, (PathKey *) lfirst(lc)) == 0)
			return;
	}
	if (!query_limit(root, &limit))
		limit = -1;
	extra = afdw_remote_sort_cost(root, root->sort_pathkeys, ngroups,
								  grouped->reltarget->width, (double) limit);
	afdw_offer_path(root, grouped, (Path *)
			 afdw_upper_path(root, grouped, grouped->reltarget,
									   ngroups, startup + extra, total + extra,
									   root->sort_pathkeys, NULL, NIL));
}

/*
 * query_limit
 *		The query's LIMIT plus OFFSET in *LIMIT, when both are constants
 *		(a missing OFFSET is 0) and the LIMIT is not WITH TIES.
 */
static bool
query_limit(PlannerInfo *root, int64 *limit)
{
	Query	   *parse = root->parse;
	Const	   *count = (Const *) parse->limitCount;
	Const	   *offset = (Const *) parse->limitOffset;
	int64		n;

	if (count == NULL || !IsA(count, Const) || count->constisnull ||
		parse->limitOption == LIMIT_OPTION_WITH_TIES)
		return false;
	n = DatumGetInt64(count->constvalue);
	if (offset != NULL)
	{
		if (!IsA(offset, Const))
			return false;
		if (!offset->constisnull)
			n += DatumGetInt64(offset->constvalue);
	}
	if (n < 1 || n > PG_INT32_MAX)
		return false;
	*limit = n;
	return true;
}

/*
 * limit_for
 *		True if the remote query of REL (a remote join or aggregate) on
 *		PATH may return only the first *LIMIT rows (see the file's
 *		comment).
 */
static bool
limit_for(PlannerInfo *root, RelOptInfo *rel, Path *path, bool grouped,
		  int64 *limit)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;
	Query	   *parse = root->parse;
	RelOptInfo *read = grouped ? fp->input_rel : rel;

	/*
	 * A join of partitions (partitionwise join) reads every table when its
	 * parents' join does: each child under the Append or Merge Append then
	 * returns at most the rows the Limit could take from it.
	 */
	if (root->rowMarks != NIL || root->hasPseudoConstantQuals ||
		path->param_info != NULL ||
		!(read->reloptkind == RELOPT_BASEREL || read->reloptkind == RELOPT_JOINREL ||
		  (!grouped && read->reloptkind == RELOPT_OTHER_JOINREL)) ||
		!bms_equal(read->reloptkind == RELOPT_OTHER_JOINREL ?
				   read->top_parent_relids : read->relids, afdw_all_query_relids(root)))
		return false;
	if (grouped)
	{
		if (fp->partial || fp->local_having != NIL ||
			parse->distinctClause != NIL ||
			parse->hasWindowFuncs || parse->hasTargetSRFs ||
			!pathkeys_contained_in(root->sort_pathkeys, path->pathkeys))
			return false;
		return query_limit(root, limit);
	}
	/* Rows a local condition drops would not count toward the LIMIT. */
	if (fp->local_conds != NIL ||
		root->limit_tuples < 1 || root->limit_tuples > (double) PG_INT32_MAX ||
		parse->limitOption == LIMIT_OPTION_WITH_TIES ||
		!pathkeys_contained_in(root->query_pathkeys, path->pathkeys))
		return false;
	*limit = (int64) root->limit_tuples;
	return true;
}

/*
 * afdw_finish_remote_plan
 *		Append to the remote SQL of SCAN, the plan of REL (a remote join or
 *		aggregate) on PATH, the ORDER BY of the path's keys and the LIMIT
 *		the query allows; return SCAN.
 */
ForeignScan *
afdw_finish_remote_plan(PlannerInfo *root, RelOptInfo *rel, Path *path,
						ForeignScan *scan)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;
	bool		grouped = (fp->input_rel != NULL);
	String	   *sql = (String *) linitial(scan->fdw_private);
	StringInfoData buf;
	ListCell   *lc;
	bool		first = true;
	int64		limit = -1;

	initStringInfo(&buf);
	appendStringInfoString(&buf, strVal(sql));
	foreach(lc, path->pathkeys)
	{
		PathKey    *pk = (PathKey *) lfirst(lc);
		bool		descending = (afdw_pathkey_descending(pk));

		appendStringInfoString(&buf, first ? " ORDER BY " : ", ");
		first = false;
		if (grouped)
		{
			int			pos = grouped_sort_position(fp->grouped_tlist, pk);

			if (pos == 0)
				elog(ERROR, "a sort key of a remote aggregate cannot be sent");
			appendStringInfo(&buf, "%d", pos);
		}
		else
		{
			Var		   *var = join_sort_var(rel, pk);

			if (var == NULL)
				elog(ERROR, "a sort key of a remote join cannot be sent");
			afdw_deparse_join_column(&buf, root, rel, var);
		}
		appendStringInfoString(&buf, descending ?
							   (pk->pk_nulls_first ? " DESC" : " DESC NULLS LAST") :
							   (pk->pk_nulls_first ? " ASC NULLS FIRST" : " ASC"));
	}
	if (afdw_is_final_path(path))
		afdw_deparse_limit(&buf, root, rel, NULL, &scan->fdw_exprs);
	else if (scan->fdw_exprs == NIL && limit_for(root, rel, path, grouped, &limit))
		appendStringInfo(&buf, " LIMIT " INT64_FORMAT, limit);
	else
		limit = -1;				/* none sent */
	if (buf.len != (int) strlen(strVal(sql)))
		linitial(scan->fdw_private) = makeString(buf.data);

	/* With a LIMIT, keys would make it return other rows: none. */
	if ((afdw_is_final_path(path) || limit >= 0) && afdw_scan_key_slots(scan) > 0)
		afdw_set_key_slots(scan, -1, false, NIL);
	if (afdw_is_final_path(path))
		afdw_mark_own_limit(root, scan);
	else if (limit >= 0)
		afdw_mark_limit_bound(scan, limit);
	return scan;
}

/*
 * afdw_has_exec_param
 *		True if NODE holds a parameter that the executor sets (the output of
 *		a subquery run as an InitPlan, or of an outer query level), or a
 *		subquery.  CONTEXT is unused (an expression_tree_walker).
 */
bool
afdw_has_exec_param(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
		return ((Param *) node)->paramkind != PARAM_EXTERN;
	if (IsA(node, SubLink) || IsA(node, SubPlan))
		return true;
	return expression_tree_walker(node, afdw_has_exec_param, context);
}

/*
 * limit_value_ok
 *		True if NODE, the query's LIMIT or OFFSET (NULL: none), can be
 *		written in the remote query of REL: a constant that is not negative
 *		(a negative one is refused locally, with the local message), or an
 *		expression REL's server can evaluate over the statement's own
 *		parameters (sent as values), such as the cast of a generic plan's
 *		integer $1 to the bigint a LIMIT is.  Not a subquery's output, nor
 *		a volatile function, evaluated once locally.
 */
static bool
limit_value_ok(PlannerInfo *root, RelOptInfo *rel, Node *node)
{
	if (node == NULL)
		return true;
	if (IsA(node, Const))
		return ((Const *) node)->constisnull ||
			DatumGetInt64(((Const *) node)->constvalue) >= 0;
	return !afdw_has_exec_param(node, NULL) &&
		!contain_volatile_functions(node) &&
		afdw_is_shippable(root, rel, (Expr *) node);
}

/*
 * final_input_ok
 *		True if every row the remote query of REL, a foreign table, a remote
 *		join or a remote aggregate of ours, returns is a row of the query's
 *		result: no condition or HAVING checked locally after it.
 */
static bool
final_input_ok(RelOptInfo *rel)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;

	if (fp == NULL)
		return false;
	if (fp->input_rel != NULL)
		return rel->reloptkind == RELOPT_UPPER_REL && !fp->partial &&
			fp->local_having == NIL;
	/* Rows a local condition drops would not count toward the LIMIT. */
	if (fp->local_conds != NIL)
		return false;
	if (fp->outer_rel != NULL)
		return rel->reloptkind == RELOPT_JOINREL;
	return rel->reloptkind == RELOPT_BASEREL;
}

/*
 * row_marks_copy_only
 *		True if every row mark of ROOT's query only copies its rows for
 *		rechecks (ROW_MARK_COPY, as every foreign table's is): then the
 *		LockRows node above the scan locks nothing and never rechecks, and
 *		the rows are locked by the remote query's FOR UPDATE or FOR SHARE,
 *		which a LIMIT before it leaves correct (the remote locks the rows
 *		its LIMIT and OFFSET pass, as a local LockRows under a Limit does).
 */
static bool
row_marks_copy_only(PlannerInfo *root)
{
	ListCell   *lc;

	foreach(lc, root->rowMarks)
	{
		if (lfirst_node(PlanRowMark, lc)->markType != ROW_MARK_COPY)
			return false;
	}
	return true;
}

/*
 * add_limited_path
 *		Add to FINAL the path of REL (of target TARGET, in the order
 *		PATHKEYS) with the query's LIMIT and OFFSET in its remote query:
 *		ROWS, STARTUP and TOTAL, those of the path without them, bounded as
 *		a Limit node bounds them (EXTRA's estimates).  LESS_HANDING: less
 *		the Limit's handing on of each row, which the path saves.
 */
static void
add_limited_path(PlannerInfo *root, RelOptInfo *final, RelOptInfo *rel,
				 PathTarget *target, double rows, Cost startup, Cost total,
				 List *pathkeys, bool less_handing, FinalPathExtraData *extra)
{
	adjust_limit_rows_costs(&rows, &startup, &total, extra->offset_est,
							extra->count_est);
	if (less_handing)
		total -= cpu_tuple_cost * rows;
	startup = Min(startup, total);
	add_path(final, (Path *)
			 afdw_upper_path(root, rel, target, rows, startup, total, pathkeys,
							 NULL, list_make1(makeBoolean(true))));
}

/*
 * afdw_add_final_path
 *		Add to FINAL, the query's final relation, whose input INPUT needs
 *		only the LIMIT (and OFFSET) after a foreign scan, remote join or
 *		remote aggregate of ours, the path of that scan with the LIMIT in
 *		its remote query and no local Limit above it (UPPERREL_FINAL).
 *
 * The scan then stays a plain Foreign Scan: a branch of a UNION, (SELECT
 * ... ORDER BY a LIMIT 10) UNION ALL (...), runs asynchronously under the
 * Append, which a Limit node above it would prevent.  The path is that
 * of the input's cheapest path of ours that returns the query's order,
 * bounded as a Limit bounds it, less the Limit's handing on of each row.
 * Row locks of SELECT ... FOR UPDATE are taken by the remote query,
 * whose locking clause follows the LIMIT.  Not with WITH TIES (the ties
 * past the limit count), row marks that lock local rows, set-returning
 * functions in the select list, conditions that depend on
 * no table, or a LIMIT that is an expression to compute locally.
 */
void
afdw_add_final_path(PlannerInfo *root, RelOptInfo *input, RelOptInfo *final,
					FinalPathExtraData *extra)
{
	Query	   *parse = root->parse;
	ListCell   *lc;

	if (!extra->limit_needed || !row_marks_copy_only(root) ||
		parse->hasTargetSRFs || parse->limitOption == LIMIT_OPTION_WITH_TIES ||
		root->hasPseudoConstantQuals)
		return;
	foreach(lc, input->pathlist)
	{
		Path	   *path = (Path *) lfirst(lc);
		Path	   *scan = path;

		/* The final target may have been put in a projection over it. */
		if (IsA(scan, ProjectionPath))
			scan = ((ProjectionPath *) scan)->subpath;
		if (!IsA(scan, ForeignPath) || scan->param_info != NULL ||
			afdw_is_final_path(scan) || !final_input_ok(scan->parent) ||
			!pathkeys_contained_in(root->sort_pathkeys, scan->pathkeys) ||
			!limit_value_ok(root, scan->parent, parse->limitCount) ||
			!limit_value_ok(root, scan->parent, parse->limitOffset))
			continue;
		add_limited_path(root, final, scan->parent, path->pathtarget,
						 path->rows, path->startup_cost, path->total_cost,
						 scan->pathkeys, true, extra);
		return;
	}
	add_kept_final_path(root, final, extra);
}

/*
 * afdw_keep_final_candidate
 *		Note PATH, a path of ours about to be offered for REL, as the
 *		relation's candidate for the final stage when it is unparameterized,
 *		in the query's final order, and the cheapest such so far.
 *
 * The final stage reads the paths that survived in its input relation;
 * but a path whose cost shrinks most with the LIMIT sent (a remote sort,
 * a cross join) may have lost to a local one that the LIMIT helps less:
 * afdw_add_final_path then builds it again from what is kept here.
 */
static void
afdw_keep_final_candidate(PlannerInfo *root, RelOptInfo *rel, Path *path)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;

	if (fp == NULL || path->param_info != NULL ||
		!bms_is_empty(rel->lateral_relids) ||
		!pathkeys_contained_in(root->sort_pathkeys, path->pathkeys) ||
		(fp->final_kept && fp->final_total <= path->total_cost))
		return;
	fp->final_kept = true;
	fp->final_rows = path->rows;
	fp->final_startup = path->startup_cost;
	fp->final_total = path->total_cost;
	fp->final_pathkeys = path->pathkeys;
}

/*
 * afdw_offer_path
 *		add_path: offer PATH, a path of ours, for REL, kept as the final
 *		stage's candidate if it is one (afdw_keep_final_candidate).
 */
void
afdw_offer_path(PlannerInfo *root, RelOptInfo *rel, Path *path)
{
	afdw_keep_final_candidate(root, rel, path);
	add_path(rel, path);
}

/*
 * query_input_rel
 *		The relation whose rows the query's ORDER BY and LIMIT take: the
 *		grouping relation of a query with aggregates or GROUP BY, else the
 *		scan or join of all its tables; NULL when DISTINCT or window
 *		functions come between.
 */
static RelOptInfo *
query_input_rel(PlannerInfo *root)
{
	Query	   *parse = root->parse;
	Relids		relids = afdw_all_query_relids(root);
	int			relid;

	if (parse->distinctClause != NIL || parse->hasWindowFuncs ||
		parse->groupingSets != NIL)
		return NULL;
	if (parse->groupClause != NIL || parse->hasAggs ||
		parse->havingQual != NULL)
		return fetch_upper_rel(root, UPPERREL_GROUP_AGG, NULL);
	if (bms_get_singleton_member(relids, &relid))
		return root->simple_rel_array[relid];
	return find_join_rel(root, relids);
}

/*
 * add_kept_final_path
 *		Add to FINAL the path with the query's LIMIT of the relation under
 *		the query's ORDER BY, from its kept candidate, when no path of ours
 *		survived in INPUT (afdw_keep_final_candidate); true if added.
 */
static bool
add_kept_final_path(PlannerInfo *root, RelOptInfo *final,
					FinalPathExtraData *extra)
{
	Query	   *parse = root->parse;
	RelOptInfo *rel = query_input_rel(root);
	AfdwRelInfo *fp;

	/* Not a relation of another wrapper's (its fdw_private is not ours). */
	if (rel == NULL || rel->fdwroutine != final->fdwroutine ||
		rel->serverid != final->serverid || rel->fdw_private == NULL ||
		!final_input_ok(rel))
		return false;
	fp = (AfdwRelInfo *) rel->fdw_private;
	if (!fp->final_kept ||
		!limit_value_ok(root, rel, parse->limitCount) ||
		!limit_value_ok(root, rel, parse->limitOffset))
		return false;
	add_limited_path(root, final, rel, root->upper_targets[UPPERREL_FINAL],
					 fp->final_rows, fp->final_startup, fp->final_total,
					 fp->final_pathkeys, false, extra);
	return true;
}

/*
 * afdw_is_final_path
 *		True if PATH is one of afdw_add_final_path's: its remote query has
 *		the query's LIMIT and OFFSET, and no local Limit is above it.
 */
bool
afdw_is_final_path(Path *path)
{
	return IsA(path, ForeignPath) && ((ForeignPath *) path)->fdw_private != NIL;
}
