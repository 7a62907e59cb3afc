/*-------------------------------------------------------------------------
 *
 * pushed_keys.c
 *		Keys sent ahead: a large scan joined to a small foreign table reads
 *		only the rows whose join key the small table has.
 *
 * When a scan of ours is joined on a column to a foreign table of ours
 * whose conditions leave few rows (Q19's part, 47 rows against 22,000
 * rows of lineitem), the scan's remote query gets one more condition:
 *
 *		(N < cardinality($k) OR col = ANY ($k))
 *
 * where $k is the array of the small table's join column, computed once
 * per statement by an InitPlan that reads the small table (its own remote
 * query, with its own conditions) and stops after N + 1 rows.  The remote
 * server then reads the large table by its index, if it has one, and sends
 * only the rows that can join; when the small table turns out to have
 * more than N rows, the first branch is true and the condition filters
 * nothing.  The join above still compares every row: the condition only
 * drops rows that could not have joined.
 *
 * That holds when every row of the result needs a row of the small table
 * with the same key: both relations are in one equivalence class of the
 * query's equality conditions, and neither is on the nullable side of an
 * outer join or the inner side of an anti-join (semi-joins are fine both
 * ways).  Only plain SELECTs without row locks get keys.
 *
 * It also writes the key slots of scans (scan_paths.c), remote aggregates
 * (aggregate_paths.c) and remote joins (join_paths.c): the conditions a hash
 * join's keys take at run time (hash_join_keys.c).
 *
 * Planner layer: called from scan_paths.c's afdwGetForeignPlan, which it calls
 * in turn to plan the small table's scan (through the table's FdwRoutine,
 * as the planner does: scan_paths.c is above this file), and from
 * aggregate_paths.c and join_paths.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/restrictinfo.h"
#include "optimizer/subselect.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "async_fdw.h"
#include "pg_compat.h"

/* async_fdw.key_filter_min_rows and async_fdw.key_filter_max_keys */
static int	key_filter_min_rows = 10000;
static int	key_filter_max_keys = 1000;

/*
 * At run time, the keys are sent when the small table has at most this
 * many times key_filter_max_keys rows (its estimate may be low).
 */
#define KEY_RUNTIME_FACTOR 10

/* Scans given key slots (afdw_key_slots), a count. */
static int	key_slots_made = 0;

/* Set while the small table's own scan is planned: it takes no keys. */
static bool planning_key_source = false;

/*
 * One array of keys already planned for this query level: the InitPlan's
 * output for column ATTNO of the small table (cached in its AfdwRelInfo,
 * so that the partitions of a table share one).
 */
typedef struct KeyArray
{
	AttrNumber	attno;
	Param	   *param;
} KeyArray;

/*
 * afdw_keys_init
 *		Define async_fdw.key_filter_min_rows and async_fdw.key_filter_max_keys
 *		(from _PG_init).
 */
void
afdw_keys_init(void)
{
	DefineCustomIntVariable("async_fdw.key_filter_min_rows",
							"Estimated rows of a scan from which it reads only the keys of a small joined foreign table.",
							"A scan joined on a column to a foreign table of async_fdw with at most async_fdw.key_filter_max_keys estimated rows sends that table's keys in its remote query (for a partition, the estimate of the whole partitioned table counts). -1 turns this off.",
							&key_filter_min_rows,
							10000, -1, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("async_fdw.key_filter_max_keys",
							"Estimated rows of a foreign table up to which its join keys are sent to the large scans joined to it.",
							"At run time, the keys are sent only if the table returns at most ten times as many rows.",
							&key_filter_max_keys,
							1000, 1, INT_MAX / KEY_RUNTIME_FACTOR - 1,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
}

/*
 * is_our_rel
 *		Whether REL is a foreign table of async_fdw planned at this level.
 */
static bool
is_our_rel(RelOptInfo *rel)
{
	return rel != NULL && rel->reloptkind == RELOPT_BASEREL &&
		rel->rtekind == RTE_RELATION && rel->fdwroutine != NULL &&
		afdw_routine_is_ours(rel->fdwroutine) &&
		rel->fdw_private != NULL &&
		((AfdwRelInfo *) rel->fdw_private)->input_rel == NULL &&
		((AfdwRelInfo *) rel->fdw_private)->outer_rel == NULL;
}

/*
 * may_lose_rows
 *		Whether a relation of RELIDS may be on the nullable side of an outer
 *		join, or the inner side of an anti-join: its rows are then not
 *		required for the result's rows.
 */
static bool
may_lose_rows(PlannerInfo *root, Relids relids)
{
	ListCell   *lc;

	foreach(lc, root->join_info_list)
	{
		SpecialJoinInfo *sj = (SpecialJoinInfo *) lfirst(lc);

		if (sj->jointype == JOIN_SEMI)
			continue;
		if (bms_overlap(sj->syn_righthand, relids))
			return true;
		if (sj->jointype == JOIN_FULL && bms_overlap(sj->syn_lefthand, relids))
			return true;
	}
	return false;
}

/*
 * key_source_ok
 *		Whether SRC, another base relation of this query level, can give
 *		keys: a foreign table of ours with few estimated rows, whose own
 *		conditions can all be evaluated by an InitPlan (no parameter, no
 *		subplan, no constant-only gating condition), read without LATERAL.
 */
static bool
key_source_ok(PlannerInfo *root, RelOptInfo *src)
{
	ListCell   *lc;

	if (!is_our_rel(src) || src->rows > key_filter_max_keys ||
		!bms_is_empty(src->lateral_relids) || may_lose_rows(root, src->relids))
		return false;
	foreach(lc, src->baserestrictinfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		if (ri->pseudoconstant || afdw_has_exec_param((Node *) ri->clause, NULL) ||
			contain_volatile_functions((Node *) ri->clause))
			return false;
	}
	return true;
}

/*
 * plain_path
 *		An unparameterized ForeignPath of SRC, unordered if there is one.
 */
static ForeignPath *
plain_path(RelOptInfo *src)
{
	ForeignPath *found = NULL;
	ListCell   *lc;

	foreach(lc, src->pathlist)
	{
		Path	   *path = (Path *) lfirst(lc);

		if (!IsA(path, ForeignPath) || path->param_info != NULL)
			continue;
		if (path->pathkeys == NIL)
			return (ForeignPath *) path;
		if (found == NULL)
			found = (ForeignPath *) path;
	}
	return found;
}

/*
 * source_scan
 *		The ForeignScan of SRC (foreign table RELID) by PATH returning
 *		TLIST, with all its conditions, and no keys of its own.
 */
static ForeignScan *
source_scan(PlannerInfo *root, RelOptInfo *src, Oid relid, ForeignPath *path,
			List *tlist)
{
	ForeignScan *scan;

	planning_key_source = true;
	PG_TRY();
	{
		/* afdwGetForeignPlan (scan_paths.c): SRC is ours (key_source_ok). */
		scan = src->fdwroutine->GetForeignPlan(root, src, relid, path, tlist,
											   src->baserestrictinfo, NULL);
	}
	PG_FINALLY();
	{
		planning_key_source = false;
	}
	PG_END_TRY();
	/* As create_foreignscan_plan would: the server it reads (scan.c). */
	scan->fs_server = src->serverid;
	return scan;
}

/*
 * key_array
 *		The Param that holds the array of KEY (a column of SRC) for this
 *		statement: an InitPlan reading SRC with its conditions, at most
 *		max_keys * KEY_RUNTIME_FACTOR + 1 rows.  Made once per column and
 *		query level; NULL if SRC cannot be read so.
 */
static Param *
key_array(PlannerInfo *root, RelOptInfo *src, Var *key)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) src->fdw_private;
	RangeTblEntry *rte = planner_rt_fetch(src->relid, root);
	ForeignPath *path;
	List	   *tlist;
	ForeignScan *scan;
	Limit	   *limit;
	Param	   *param;
	Oid			array_type;
	ListCell   *lc;

	foreach(lc, fp->key_arrays)
	{
		KeyArray   *ka = (KeyArray *) lfirst(lc);

		if (ka->attno == key->varattno)
			return ka->param;
	}

	array_type = get_array_type(key->vartype);
	path = plain_path(src);
	if (!OidIsValid(array_type) || path == NULL)
		return NULL;

	/* The table's scan, returning the key, as the planner would make it. */
	tlist = list_make1(makeTargetEntry((Expr *) copyObject(key), 1, NULL, false));
	scan = source_scan(root, src, rte->relid, path, tlist);
	scan->scan.plan.startup_cost = path->path.startup_cost;
	scan->scan.plan.total_cost = path->path.total_cost;
	scan->scan.plan.plan_rows = path->path.rows;
	scan->scan.plan.plan_width = get_typavgwidth(key->vartype, key->vartypmod);
	scan->scan.plan.parallel_safe = false;

	/* No more rows than the array may hold. */
	limit = makeNode(Limit);
	limit->plan.targetlist = copyObject(tlist);
	limit->plan.lefttree = &scan->scan.plan;
	limit->limitCount = (Node *)
		makeConst(INT8OID, -1, InvalidOid, sizeof(int64),
				  Int64GetDatum((int64) key_filter_max_keys * KEY_RUNTIME_FACTOR + 1),
				  false, FLOAT8PASSBYVAL);
	limit->limitOption = LIMIT_OPTION_COUNT;
	limit->plan.startup_cost = scan->scan.plan.startup_cost;
	limit->plan.total_cost = scan->scan.plan.total_cost;
	limit->plan.plan_rows = scan->scan.plan.plan_rows;
	limit->plan.plan_width = scan->scan.plan.plan_width;

	/*
	 * An InitPlan of this query level, whose rows make an array (as
	 * ARRAY(SELECT ...) does): SS_make_initplan_from_plan makes a
	 * single-value one, which is then told to collect.  The plan reads the
	 * level's range table, as MIN/MAX's InitPlans do (planagg.c).
	 */
	param = SS_make_initplan_output_param(root, array_type, -1, key->varcollid);
	SS_make_initplan_from_plan(root, root, &limit->plan, param);
	llast_node(SubPlan, root->init_plans)->subLinkType = ARRAY_SUBLINK;

	{
		KeyArray   *ka = palloc(sizeof(KeyArray));

		ka->attno = key->varattno;
		ka->param = param;
		fp->key_arrays = lappend(fp->key_arrays, ka);
	}
	return param;
}

/*
 * key_condition
 *		(N < cardinality(KEYS) OR COLUMN = ANY (KEYS)), with the equality
 *		operator EQ.
 */
static Expr *
key_condition(Expr *column, Param *keys, Oid eq, Oid collation)
{
	ScalarArrayOpExpr *any = makeNode(ScalarArrayOpExpr);
	Expr	   *count;
	Expr	   *too_many;

	any->opno = eq;
	any->opfuncid = get_opcode(eq);
	any->hashfuncid = InvalidOid;
	any->negfuncid = InvalidOid;
	any->useOr = true;
	any->inputcollid = collation;
	any->args = list_make2(copyObject(column), copyObject(keys));
	any->location = -1;

	count = (Expr *) makeFuncExpr(F_CARDINALITY, INT4OID,
								  list_make1(copyObject(keys)),
								  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	too_many = make_opclause(Int4LessOperator, BOOLOID, false,
							 (Expr *) makeConst(INT4OID, -1, InvalidOid, sizeof(int32),
												Int32GetDatum(key_filter_max_keys *
															  KEY_RUNTIME_FACTOR),
												false, true),
							 count, InvalidOid, InvalidOid);
	return make_orclause(list_make2(too_many, any));
}

/*
 * equality_operator
 *		The equality operator of one of EC's btree families between
 *		LEFTTYPE and RIGHTTYPE, or InvalidOid.
 */
static Oid
equality_operator(EquivalenceClass *ec, Oid lefttype, Oid righttype)
{
	ListCell   *lc;

	foreach(lc, ec->ec_opfamilies)
	{
		Oid			op = get_opfamily_member(lfirst_oid(lc), lefttype, righttype,
											 BTEqualStrategyNumber);

		if (OidIsValid(op))
			return op;
	}
	return InvalidOid;
}

/*
 * grouping_columns
 *		The columns of REL, a foreign table (not a partition), by which the
 *		subquery that ROOT plans groups: the level above may join on them,
 *		and a grouped subquery made of a correlated one (decorrelate.c)
 *		does.  NIL at the top level, or under grouping sets.
 */
static List *
grouping_columns(PlannerInfo *root, RelOptInfo *rel)
{
	List	   *columns = NIL;
	ListCell   *lc;

	if (root->parent_root == NULL || rel->reloptkind != RELOPT_BASEREL ||
		root->parse->groupClause == NIL || root->parse->groupingSets != NIL)
		return NIL;
	foreach(lc, get_sortgrouplist_exprs(root->parse->groupClause,
										root->parse->targetList))
	{
		Var		   *var = (Var *) lfirst(lc);

		if (IsA(var, Var) && var->varno == (int) rel->relid &&
			var->varlevelsup == 0 && var->varattno > 0)
			columns = lappend(columns, var);
	}
	return columns;
}

/*
 * large_scan
 *		Whether REL's scan by PATH may take keys: a plain SELECT's
 *		unparameterized scan, joined to other relations by equivalence
 *		classes, estimated at key_filter_min_rows rows or more (*ROWS, a
 *		partition counting with its siblings: one array serves them all).
 */
static bool
large_scan(PlannerInfo *root, RelOptInfo *rel, ForeignPath *path, double *rows)
{
	Relids		own = IS_OTHER_REL(rel) ? rel->top_parent_relids : rel->relids;
	int			parent;

	if (key_filter_min_rows < 0 || planning_key_source ||
		root->parse->commandType != CMD_SELECT ||
		root->rowMarks != NIL || root->parse->rowMarks != NIL ||
		path->path.param_info != NULL || !bms_is_empty(rel->lateral_relids) ||
		(!rel->has_eclass_joins && rel->joininfo == NIL &&
		 grouping_columns(root, rel) == NIL))
		return false;

	*rows = rel->rows;
	if (bms_get_singleton_member(own, &parent) && parent != (int) rel->relid &&
		root->simple_rel_array[parent] != NULL)
		*rows = root->simple_rel_array[parent]->rows;
	return *rows >= key_filter_min_rows;
}

/*
 * afdw_key_conditions
 *		The key conditions (RestrictInfos) that the remote query of REL's
 *		scan by PATH takes, one per small foreign table joined to it on one
 *		of its columns (see the file's comment); NIL if none.
 */
List *
afdw_key_conditions(PlannerInfo *root, RelOptInfo *rel, ForeignPath *path)
{
	Relids		own = IS_OTHER_REL(rel) ? rel->top_parent_relids : rel->relids;
	double		rows;
	List	   *conds = NIL;
	ListCell   *lc;

	if (!large_scan(root, rel, path, &rows) || may_lose_rows(root, own))
		return NIL;

	foreach(lc, root->eq_classes)
	{
		EquivalenceClass *ec = (EquivalenceClass *) lfirst(lc);
		EquivalenceMember *em;
		AfdwMemberIter iter;
		Expr	   *column = NULL;
		RelOptInfo *src = NULL;
		Var		   *key = NULL;
		Param	   *keys;
		Expr	   *cond;
		Oid			eq;

		if (ec->ec_has_const || ec->ec_has_volatile || ec->ec_broken ||
			list_length(ec->ec_members) < 2 || !bms_overlap(ec->ec_relids, own))
			continue;

		/* REL's column, and the column of the smallest source. */
		afdw_members_begin(&iter, ec, rel->relids);
		while ((em = afdw_members_next(&iter)) != NULL)
		{
			Expr	   *expr = em->em_expr;
			int			relid;

			while (IsA(expr, RelabelType))
				expr = ((RelabelType *) expr)->arg;
			if (!IsA(expr, Var) || ((Var *) expr)->varlevelsup != 0 ||
				((Var *) expr)->varattno <= 0 ||
				!bms_get_singleton_member(em->em_relids, &relid))
				continue;
			if (relid == (int) rel->relid)
				column = em->em_expr;
			else if (!em->em_is_child && !bms_is_member(relid, own) &&
					 relid < root->simple_rel_array_size &&
					 key_source_ok(root, root->simple_rel_array[relid]) &&
					 root->simple_rel_array[relid]->rows * 10 <= rows &&
					 (src == NULL || root->simple_rel_array[relid]->rows < src->rows))
			{
				src = root->simple_rel_array[relid];
				key = (Var *) expr;
			}
		}
		if (column == NULL || src == NULL || !IsA(column, Var))
			continue;

		eq = equality_operator(ec, exprType((Node *) column), key->vartype);
		if (!OidIsValid(eq) || !op_strict(eq) ||
			!OidIsValid(get_array_type(key->vartype)))
			continue;

		/* Shippable with a stand-in for the array, before it is planned. */
		keys = makeNode(Param);
		keys->paramkind = PARAM_EXEC;
		keys->paramid = 0;
		keys->paramtype = get_array_type(key->vartype);
		keys->paramtypmod = -1;
		keys->paramcollid = key->varcollid;
		keys->location = -1;
		if (!afdw_is_shippable(root, rel, key_condition(column, keys, eq,
														ec->ec_collation)))
			continue;

		keys = key_array(root, src, key);
		if (keys == NULL)
			continue;
		cond = key_condition(column, keys, eq, ec->ec_collation);
		conds = lappend(conds, make_simple_restrictinfo(root, cond));
	}
	return conds;
}

/*
 * key_slot
 *		The key slot (afdw_make_key_slot) of COLUMN of REL (foreign table
 *		RELATION, or NULL for a remote join), compared by operator EQ under
 *		COLLATION, in a remote SELECT with parameters PARAMS (its array
 *		written as MARKER's parameter), known as column SLOT_ATTNO of the
 *		scan (the table's column, or the item of the scan's target list);
 *		NULL if SLOTS has the column already, or the condition cannot be
 *		sent.
 */
static List *
key_slot(PlannerInfo *root, RelOptInfo *rel, Relation relation, Var *column,
		 AttrNumber slot_attno, Oid eq, Oid collation, List *params,
		 const char *marker, List *slots)
{
	ScalarArrayOpExpr *any;
	Param	   *keys;
	char	   *text;
	char	   *at;
	ListCell   *lc;

	foreach(lc, slots)
	{
		if (intVal(linitial(lfirst(lc))) == slot_attno)
			return NULL;
	}
	if (!op_strict(eq) || !op_hashjoinable(eq, column->vartype) ||
		!OidIsValid(get_array_type(column->vartype)))
		return NULL;

	/* A stand-in for the array, numbered after PARAMS once written. */
	keys = makeNode(Param);
	keys->paramkind = PARAM_EXEC;
	keys->paramid = -1;
	keys->paramtype = get_array_type(column->vartype);
	keys->paramtypmod = -1;
	keys->paramcollid = column->varcollid;
	keys->location = -1;
	any = makeNode(ScalarArrayOpExpr);
	any->opno = eq;
	any->opfuncid = get_opcode(eq);
	any->hashfuncid = InvalidOid;
	any->negfuncid = InvalidOid;
	any->useOr = true;
	any->inputcollid = collation;
	any->args = list_make2(copyObject(column), keys);
	any->location = -1;
	if (IS_JOIN_REL(rel))
	{
		/* Shippable as a condition on the column's own table. */
		if (!afdw_is_shippable(root, find_base_rel(root, column->varno), (Expr *) any))
			return NULL;
		text = afdw_deparse_join_condition(root, rel, (Expr *) any, params);
	}
	else
	{
		if (!afdw_is_shippable(root, rel, (Expr *) any))
			return NULL;
		text = afdw_deparse_condition(root, rel, relation, (Expr *) any, params);
	}
	at = strstr(text, marker);
	if (at == NULL)
		return NULL;
	*at = '\0';
	return afdw_make_key_slot(slot_attno, eq, collation, text,
							  at + strlen(marker) - 2);
}

/* A column of a scan that may take keys, from an equivalence member. */
typedef Var *(*MemberColumn) (EquivalenceMember *em, RelOptInfo *rel, void *arg);

/*
 * joined_columns
 *		The columns of REL in EC that COLUMN_OF finds among its members, if
 *		EC also has a member of a relation outside OWN (REL's, or its
 *		parent's): what joins REL to another relation by equality.  NIL if
 *		there is none, or EC is of no use for keys (constant, volatile,
 *		broken, of one member, or not REL's).  A remote join may return
 *		several (each joined table's column of the equality), all equal in
 *		its rows.
 */
static List *
joined_columns(EquivalenceClass *ec, RelOptInfo *rel, Relids own,
			   MemberColumn column_of, void *arg)
{
	EquivalenceMember *em;
	AfdwMemberIter iter;
	List	   *columns = NIL;
	bool		joined = false;

	if (ec->ec_has_const || ec->ec_has_volatile || ec->ec_broken ||
		list_length(ec->ec_members) < 2 || !bms_overlap(ec->ec_relids, own))
		return NIL;

	afdw_members_begin(&iter, ec, rel->relids);
	while ((em = afdw_members_next(&iter)) != NULL)
	{
		Var		   *var = column_of(em, rel, arg);

		if (var != NULL)
			columns = lappend(columns, var);
		else if (!em->em_is_child && !bms_is_empty(em->em_relids) &&
				 !bms_overlap(em->em_relids, own))
			joined = true;
	}
	if (!joined)
	{
		list_free(columns);
		return NIL;
	}
	return columns;
}

/*
 * joined_column
 *		The column of REL, a foreign table's scan, in EC that joins it to
 *		another relation (joined_columns), or NULL.
 */
static Var *
joined_column(EquivalenceClass *ec, RelOptInfo *rel, Relids own,
			  MemberColumn column_of, void *arg)
{
	List	   *columns = joined_columns(ec, rel, own, column_of, arg);

	return columns != NIL ? (Var *) llast(columns) : NULL;
}

/*
 * table_column
 *		MemberColumn of a foreign table's scan: EM if it is a column of REL.
 */
static Var *
table_column(EquivalenceMember *em, RelOptInfo *rel, void *arg pg_attribute_unused())
{
	Var		   *var = (Var *) em->em_expr;

	if (bms_equal(em->em_relids, rel->relids) && IsA(var, Var) &&
		var->varno == (int) rel->relid && var->varlevelsup == 0 &&
		var->varattno > 0)
		return var;
	return NULL;
}

/*
 * returned_column
 *		MemberColumn of a remote join's scan: EM if it is a column of one of
 *		REL's tables that ARG, the scan's target list, returns.
 */
static Var *
returned_column(EquivalenceMember *em, RelOptInfo *rel, void *arg)
{
	Var		   *var = (Var *) em->em_expr;

	if (IsA(var, Var) && var->varlevelsup == 0 && var->varattno > 0 &&
		bms_is_member(var->varno, rel->relids) &&
		tlist_member((Expr *) var, (List *) arg) != NULL)
		return var;
	return NULL;
}

/*
 * afdw_key_slots
 *		The columns of REL (foreign table RELATION) whose scan by PATH, a
 *		remote SELECT with parameters PARAMS, may take at run time the keys
 *		of a hash join's other side (hash_join_keys.c): those joined by an
 *		equivalence class or an outer join's equality to another relation,
 *		and those by which a subquery groups (grouping_columns), at most
 *		AFDW_MAX_KEY_SLOTS, but those that KEY_CONDS (the keys of small
 *		tables, afdw_key_conditions) filter already.
 *		Each is a List made by afdw_make_key_slot: the condition
 *		"column = ANY ($n)", written with its parameter numbered after
 *		PARAMS.  NIL if the scan is not large (large_scan).
 *
 * Whether any hash join will have the column on its outer side is known
 * only once the plan is made; the conditions are written now, while the
 * relation's planner state is at hand.
 */
List *
afdw_key_slots(PlannerInfo *root, RelOptInfo *rel, Relation relation,
			   ForeignPath *path, List *params, List *key_conds)
{
	Relids		own = IS_OTHER_REL(rel) ? rel->top_parent_relids : rel->relids;
	double		rows;
	List	   *slots = NIL;
	ListCell   *lc;
	char	   *marker = psprintf("$%d::", list_length(params) + 1);
	Bitmapset  *keyed = NULL;

	if (!large_scan(root, rel, path, &rows))
		return NIL;

	/* A column that has a small table's keys needs no others. */
	foreach(lc, key_conds)
		pull_varattnos((Node *) lfirst_node(RestrictInfo, lc)->clause, rel->relid,
					   &keyed);

	foreach(lc, root->eq_classes)
	{
		EquivalenceClass *ec = (EquivalenceClass *) lfirst(lc);
		Var		   *column = joined_column(ec, rel, own, table_column, NULL);
		Oid			eq;
		List	   *slot;

		if (column == NULL ||
			bms_is_member(column->varattno - FirstLowInvalidHeapAttributeNumber, keyed))
			continue;
		eq = equality_operator(ec, column->vartype, column->vartype);
		if (!OidIsValid(eq))
			continue;
		slot = key_slot(root, rel, relation, column, column->varattno, eq,
						ec->ec_collation,
						params, marker, slots);
		if (slot != NULL)
			slots = lappend(slots, slot);
		if (list_length(slots) == AFDW_MAX_KEY_SLOTS)
			break;
	}

	/* Grouping columns of a subquery, by the type's default equality. */
	foreach(lc, grouping_columns(root, rel))
	{
		Var		   *column = (Var *) lfirst(lc);
		TypeCacheEntry *tc = lookup_type_cache(column->vartype, TYPECACHE_EQ_OPR);
		List	   *slot;

		if (list_length(slots) == AFDW_MAX_KEY_SLOTS)
			break;
		if (!OidIsValid(tc->eq_opr) ||
			bms_is_member(column->varattno - FirstLowInvalidHeapAttributeNumber, keyed))
			continue;
		slot = key_slot(root, rel, relation, column, column->varattno, tc->eq_opr,
						column->varcollid, params, marker, slots);
		if (slot != NULL)
			slots = lappend(slots, slot);
	}

	/* Equalities of outer joins, which are in no equivalence class. */
	foreach(lc, rel->joininfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		OpExpr	   *op = (OpExpr *) ri->clause;
		Var		   *column = NULL;
		Node	   *other = NULL;
		List	   *slot;

		if (list_length(slots) == AFDW_MAX_KEY_SLOTS)
			break;
		if (!IsA(op, OpExpr) || list_length(op->args) != 2 ||
			!OidIsValid(ri->hashjoinoperator) || ri->hashjoinoperator != op->opno ||
			ri->pseudoconstant)
			continue;
		if (IsA(linitial(op->args), Var))
		{
			column = linitial(op->args);
			other = lsecond(op->args);
		}
		if (column == NULL || column->varno != (int) rel->relid)
		{
			column = IsA(lsecond(op->args), Var) ? lsecond(op->args) : NULL;
			other = linitial(op->args);
		}
		if (column == NULL || column->varno != (int) rel->relid ||
			column->varlevelsup != 0 || column->varattno <= 0 ||
			bms_is_member(column->varattno - FirstLowInvalidHeapAttributeNumber, keyed) ||
			exprType(other) != column->vartype ||
			bms_overlap(pull_varnos(root, other), own))
			continue;
		slot = key_slot(root, rel, relation, column, column->varattno, op->opno,
						op->inputcollid,
						params, marker, slots);
		if (slot != NULL)
			slots = lappend(slots, slot);
	}
	if (slots != NIL)
		key_slots_made++;
	return slots;
}

/*
 * afdw_group_key_slots
 *		The grouping columns of a remote aggregate over INPUT_REL (foreign
 *		table RELATION) that may take at run time the keys of a hash join's
 *		other side (hash_join_keys.c), as afdw_key_slots: those of
 *		GROUP_POSITIONS (1-based, in GROUPED_TLIST) that are columns of the
 *		table, compared by their type's default equality under their
 *		collation, the equality of the grouping, each known by its position
 *		in GROUPED_TLIST (the scan's target list).  The remote SELECT has
 *		parameters PARAMS.  NIL if the table is not large.
 *
 * The aggregate of a correlated subquery turned into a join
 * (decorrelate.c) is grouped by the columns it joins on, and is joined in
 * a subquery of its own: its planner sees no equivalence with the other
 * side, so every grouping column gets a slot.
 */
List *
afdw_group_key_slots(PlannerInfo *root, RelOptInfo *input_rel, Relation relation,
					 List *grouped_tlist, List *group_positions, List *params)
{
	Relids		own = IS_OTHER_REL(input_rel) ? input_rel->top_parent_relids :
		input_rel->relids;
	int			parent;
	double		rows = input_rel->rows;
	List	   *slots = NIL;
	ListCell   *lc;
	char	   *marker = psprintf("$%d::", list_length(params) + 1);

	if (key_filter_min_rows < 0 || planning_key_source || relation == NULL ||
		root->parse->commandType != CMD_SELECT ||
		root->rowMarks != NIL || root->parse->rowMarks != NIL ||
		!bms_is_empty(input_rel->lateral_relids))
		return NIL;
	if (bms_get_singleton_member(own, &parent) && parent != (int) input_rel->relid &&
		root->simple_rel_array[parent] != NULL)
		rows = root->simple_rel_array[parent]->rows;
	if (rows < key_filter_min_rows)
		return NIL;

	foreach(lc, group_positions)
	{
		int			pos = lfirst_int(lc);
		TargetEntry *tle;
		Var		   *column;
		TypeCacheEntry *tc;
		List	   *slot;

		if (pos < 1 || pos > list_length(grouped_tlist))
			continue;
		tle = list_nth_node(TargetEntry, grouped_tlist, pos - 1);
		column = (Var *) tle->expr;
		if (!IsA(column, Var) || column->varno != (int) input_rel->relid ||
			column->varlevelsup != 0 || column->varattno <= 0)
			continue;
		tc = lookup_type_cache(column->vartype, TYPECACHE_EQ_OPR);
		if (!OidIsValid(tc->eq_opr))
			continue;
		slot = key_slot(root, input_rel, relation, column, (AttrNumber) pos, tc->eq_opr,
						column->varcollid, params, marker, slots);
		if (slot != NULL)
			slots = lappend(slots, slot);
		if (list_length(slots) == AFDW_MAX_KEY_SLOTS)
			break;
	}
	if (slots != NIL)
		key_slots_made++;
	return slots;
}

/*
 * afdw_join_key_slots
 *		The columns of JOINREL, a remote join whose SELECT returns SCAN_TLIST
 *		and has parameters PARAMS, that may take at run time the keys of a hash
 *		join's other side (hash_join_keys.c), as afdw_key_slots: a column of
 *		one of its tables, returned, joined by an equivalence class to a
 *		relation outside the join.  Each slot is known by the column's item in
 *		SCAN_TLIST.  NIL unless the join is estimated at key_filter_min_rows
 *		rows or more, or if it is parameterized (PARAMETERIZED).
 *
 * The condition goes in the join's WHERE clause, which filters the joined
 * rows: those whose key the hash join above has not, which it would drop
 * (a null key included, under the strict equality), whatever the joins
 * inside.  TPC-H's Q8 joins each partition's lineitem and orders remotely,
 * then part's 139 keys locally: the remote joins return 1 row in 150.
 */
List *
afdw_join_key_slots(PlannerInfo *root, RelOptInfo *joinrel, List *scan_tlist,
					List *params, bool parameterized)
{
	Relids		own = IS_OTHER_REL(joinrel) ? joinrel->top_parent_relids :
		joinrel->relids;
	List	   *slots = NIL;
	ListCell   *lc;
	char	   *marker = psprintf("$%d::", list_length(params) + 1);

	if (key_filter_min_rows < 0 || planning_key_source || parameterized ||
		root->parse->commandType != CMD_SELECT ||
		root->rowMarks != NIL || root->parse->rowMarks != NIL ||
		!bms_is_empty(joinrel->lateral_relids) ||
		joinrel->rows < key_filter_min_rows)
		return NIL;

	/*
	 * Each returned column of an equality gets a slot of its own: the hash
	 * join above may compare any of them (orders' or lineitem's order key,
	 * in a join of the two), and a slot is known by its item.
	 */
	foreach(lc, root->eq_classes)
	{
		EquivalenceClass *ec = (EquivalenceClass *) lfirst(lc);
		List	   *columns = joined_columns(ec, joinrel, own, returned_column,
											 scan_tlist);
		ListCell   *lc2;

		foreach(lc2, columns)
		{
			Var		   *column = (Var *) lfirst(lc2);
			TargetEntry *tle = tlist_member((Expr *) column, scan_tlist);
			Oid			eq = equality_operator(ec, column->vartype, column->vartype);
			List	   *slot;

			if (!OidIsValid(eq) || tle == NULL ||
				list_length(slots) == AFDW_MAX_KEY_SLOTS)
				continue;
			slot = key_slot(root, joinrel, NULL, column, tle->resno, eq,
							ec->ec_collation, params, marker, slots);
			if (slot != NULL)
				slots = lappend(slots, slot);
		}
		if (list_length(slots) == AFDW_MAX_KEY_SLOTS)
			break;
	}
	if (slots != NIL)
		key_slots_made++;
	return slots;
}

/*
 * afdw_key_slots_made
 *		A count of the scans given key slots so far: the planner hook
 *		(aggregate_paths.c) looks for hash joins to give them keys only when a
 *		planning made some.
 */
int
afdw_key_slots_made(void)
{
	return key_slots_made;
}

/*
 * afdw_key_array_limit
 *		The most keys an array sent at run time holds.
 */
int
afdw_key_array_limit(void)
{
	return key_filter_max_keys * KEY_RUNTIME_FACTOR;
}
