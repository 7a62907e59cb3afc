/*-------------------------------------------------------------------------
 *
 * shippable.c
 *		The rules of what async_fdw may send to a remote server.
 *
 * An expression is shipped to the remote server only when the remote
 * server computes exactly what the local one would: built-in immutable
 * operators and functions over the table's columns, constants and
 * parameters, all of built-in types, with no collation other than the
 * default involved but those of the foreign tables' columns (see
 * collation_derived).  Objects of the extensions named in the server's
 * extensions option count as built in.
 *
 * Neighbours: the planner (scan_paths.c) splits a scan's conditions here into
 * remote and local ones; deparse_statements.c and deparse_expr.c write the
 * remote ones as SQL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "access/transam.h"
#include "catalog/dependency.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_ts_config.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "async_fdw.h"

/* What the shippability walker needs to know. */
typedef struct ShipContext
{
	PlannerInfo *root;
	RelOptInfo *baserel;
	List	   *extensions;		/* OIDs of the server's extensions option */
	bool		aggs_ok;		/* aggregates may appear (not in their own
								 * arguments) */
	bool		partial;		/* ... as partial aggregates (each one's
								 * transition state, afdw_partial_form) */
} ShipContext;

static bool collation_ok(Oid coll);
static bool collation_derived(Oid coll, Node *inputs);
static bool object_shippable(Oid oid, Oid classid, List *extensions);
static bool type_shippable(Oid type, ShipContext *cxt);
static bool function_shippable(Oid funcid, ShipContext *cxt);
static bool operator_shippable(Oid opno, Oid funcid, ShipContext *cxt);
static bool ship_walker(Node *node, ShipContext *cxt);
static bool column_shippable(Var *var, ShipContext *cxt);
static bool call_shippable(Node *node, ShipContext *cxt);
static bool compound_shippable(Node *node, ShipContext *cxt);
static bool aggref_shippable(Aggref *agg, ShipContext *cxt);
static bool case_shippable(CaseExpr *ce, ShipContext *cxt);
static bool subplan_shippable(Node *node, ShipContext *cxt);

/*
 * collation_ok
 *		True if COLL is no collation or the default one.  Any other would
 *		need the remote server to have the same collation under the same
 *		name, which nothing guarantees.
 */
static bool
collation_ok(Oid coll)
{
	return !OidIsValid(coll) || coll == DEFAULT_COLLATION_OID;
}

/*
 * collation_derived
 *		True if COLL, a collation an expression uses or gives its result, is
 *		no collation, the default one, or the collation of one of INPUTS
 *		(an expression or a list of them), the expression's own inputs.
 *
 * The walker accepts a collation other than the default only where it
 * comes from a column of the scanned tables declared with it, which the
 * remote column is assumed to have too (as postgres_fdw assumes): such a
 * collation passes from input to result through accepted nodes, so an
 * input's collation is either the default or one from a column.  A
 * COLLATE clause naming another collation (a RelabelType whose input has
 * another collation), a constant's or a parameter's is not sent: the
 * remote server may have no collation of that name, or another one.
 */
static bool
collation_derived(Oid coll, Node *inputs)
{
	ListCell   *lc;

	if (collation_ok(coll))
		return true;
	if (inputs == NULL)
		return false;
	if (!IsA(inputs, List))
		return exprCollation(inputs) == coll;
	foreach(lc, (List *) inputs)
	{
		if (lfirst(lc) != NULL && exprCollation(lfirst(lc)) == coll)
			return true;
	}
	return false;
}

/*
 * object_shippable
 *		True if object OID of catalog CLASSID exists with the same meaning on
 *		the remote server: it is built in, or it belongs to an extension
 *		that the server's extensions option (EXTENSIONS) says is installed
 *		remotely too.
 */
static bool
object_shippable(Oid oid, Oid classid, List *extensions)
{
	Oid			extension;

	if (afdw_is_builtin(oid))
		return true;
	if (extensions == NIL)
		return false;
	extension = getExtensionOfObject(classid, oid);
	return OidIsValid(extension) && list_member_oid(extensions, extension);
}

/*
 * type_shippable
 *		True if a value of TYPE can be written as a literal or parameter and
 *		read back remotely as the same value, and the remote operators and
 *		functions on it behave as the local ones: a type made by the user
 *		(an enum, a domain with its CHECK) may have another meaning, or
 *		another type altogether, on the remote side.  The reg* types print
 *		names that the remote server would resolve to its own, different
 *		objects.
 */
static bool
type_shippable(Oid type, ShipContext *cxt)
{
	return !afdw_type_names_by_oid(type) &&
		object_shippable(type, TypeRelationId, cxt->extensions);
}

/*
 * function_shippable
 *		True for an immutable function that is built in or belongs to a
 *		listed extension.
 */
static bool
function_shippable(Oid funcid, ShipContext *cxt)
{
	return object_shippable(funcid, ProcedureRelationId, cxt->extensions) &&
		func_volatile(funcid) == PROVOLATILE_IMMUTABLE;
}

/*
 * operator_shippable
 *		True for an operator that is built in or belongs to a listed
 *		extension, whose function FUNCID is immutable.  (The function of
 *		such an operator is one too: an extension's operators call its own
 *		functions or built-in ones.)
 */
static bool
operator_shippable(Oid opno, Oid funcid, ShipContext *cxt)
{
	return object_shippable(opno, OperatorRelationId, cxt->extensions) &&
		func_volatile(funcid) == PROVOLATILE_IMMUTABLE;
}

/*
 * ship_walker
 *		True if every node of NODE can be evaluated remotely.
 *
 * Besides the node's own objects, the type of every node's result, every
 * column included, must be shippable: an operator on a column of a type
 * the remote server may not have the same (a local enum or domain over a
 * remote text or int) would compare or check another way remotely.
 */
static bool
ship_walker(Node *node, ShipContext *cxt)
{
	if (node == NULL)
		return true;

	switch (nodeTag(node))
	{
		case T_Var:
			if (!column_shippable((Var *) node, cxt))
				return false;
			break;

		case T_Const:
			{
				Const	   *c = (Const *) node;

				if (!collation_ok(c->constcollid))
					return false;

				/*
				 * A text search configuration (to_tsvector('english', ...))
				 * is sent by its qualified name when the remote server has
				 * the same one: a built-in one or one of a listed extension.
				 */
				if (c->consttype == REGCONFIGOID && !c->constisnull)
					return object_shippable(DatumGetObjectId(c->constvalue),
											TSConfigRelationId,
											cxt->extensions);
				break;
			}

		case T_Param:
			{
				Param	   *p = (Param *) node;

				if ((p->paramkind != PARAM_EXTERN && p->paramkind != PARAM_EXEC) ||
					!collation_ok(p->paramcollid))
					return false;
				break;
			}

		case T_OpExpr:
		case T_DistinctExpr:
		case T_ScalarArrayOpExpr:
		case T_FuncExpr:
			if (!call_shippable(node, cxt))
				return false;
			break;

		case T_BoolExpr:
		case T_NullTest:
		case T_BooleanTest:
		case T_RelabelType:
		case T_ArrayExpr:
		case T_SubscriptingRef:
			if (!compound_shippable(node, cxt))
				return false;
			break;

		case T_CaseExpr:
			if (!case_shippable((CaseExpr *) node, cxt))
				return false;
			break;

		case T_Aggref:
			if (!aggref_shippable((Aggref *) node, cxt))
				return false;
			break;

		case T_SubPlan:
		case T_AlternativeSubPlan:
			if (!subplan_shippable(node, cxt))
				return false;
			break;

		case T_List:
			{
				ListCell   *lc;

				foreach(lc, (List *) node)
				{
					if (!ship_walker((Node *) lfirst(lc), cxt))
						return false;
				}
				/* A list has no type of its own. */
				return true;
			}

		default:
			return false;
	}

	return type_shippable(exprType(node), cxt);
}

/*
 * column_shippable
 *		True if column VAR may be in a remote expression: a column of the
 *		scanned relation (ctid the only system column), or another
 *		relation's, sent as a parameter in a collation that is the default
 *		or none.
 */
static bool
column_shippable(Var *var, ShipContext *cxt)
{
	if (var->varlevelsup != 0)
		return false;
	/* A parameter's collation is the default or none. */
	if (!bms_is_member(var->varno, cxt->baserel->relids) &&
		!collation_ok(var->varcollid))
		return false;

	/*
	 * No whole-row reference and no system column but ctid,
	 * whose remote value is the one the scan fetches.
	 */
	if (bms_is_member(var->varno, cxt->baserel->relids) &&
		var->varattno <= 0 &&
		var->varattno != SelfItemPointerAttributeNumber)
		return false;
	/* Another relation's column becomes a parameter. */
	return true;
}

/*
 * call_shippable
 *		True if NODE, a call of an operator (OpExpr, DistinctExpr,
 *		ScalarArrayOpExpr) or of a function (FuncExpr), can be evaluated
 *		remotely: the operator or function shippable, the collations it
 *		uses derived from its arguments', and its arguments shippable.
 */
static bool
call_shippable(Node *node, ShipContext *cxt)
{
	switch (nodeTag(node))
	{
		case T_OpExpr:
		case T_DistinctExpr:
			{
				OpExpr	   *op = (OpExpr *) node;

				set_opfuncid(op);
				if (!operator_shippable(op->opno, op->opfuncid, cxt) ||
					!collation_derived(op->inputcollid, (Node *) op->args) ||
					!collation_derived(op->opcollid, (Node *) op->args) ||
					!ship_walker((Node *) op->args, cxt))
					return false;
				break;
			}

		case T_ScalarArrayOpExpr:
			{
				ScalarArrayOpExpr *op = (ScalarArrayOpExpr *) node;

				set_sa_opfuncid(op);
				if (!operator_shippable(op->opno, op->opfuncid, cxt) ||
					!collation_derived(op->inputcollid, (Node *) op->args) ||
					!ship_walker((Node *) op->args, cxt))
					return false;
				break;
			}

		case T_FuncExpr:
			{
				FuncExpr   *f = (FuncExpr *) node;

				if (!function_shippable(f->funcid, cxt) ||
					!collation_derived(f->inputcollid, (Node *) f->args) ||
					!collation_derived(f->funccollid, (Node *) f->args) ||
					!ship_walker((Node *) f->args, cxt))
					return false;
				break;
			}

		default:
			elog(ERROR, "unrecognized node type: %d", (int) nodeTag(node));
	}
	return true;
}

/*
 * compound_shippable
 *		True if NODE, an expression over others with rules of its own (AND,
 *		OR and NOT, IS [NOT] NULL, IS [NOT] TRUE and the like, a binary
 *		coercion, an ARRAY[], a subscript), can be evaluated remotely: those
 *		rules, the collation of its result derived from its inputs', and
 *		its inputs shippable.
 */
static bool
compound_shippable(Node *node, ShipContext *cxt)
{
	switch (nodeTag(node))
	{
		case T_BoolExpr:
			if (!ship_walker((Node *) ((BoolExpr *) node)->args, cxt))
				return false;
			break;

		case T_NullTest:
			{
				NullTest   *nt = (NullTest *) node;

				/* IS NULL of a row is true only if every field is null. */
				if (nt->argisrow || !ship_walker((Node *) nt->arg, cxt))
					return false;
				break;
			}

		case T_BooleanTest:
			if (!ship_walker((Node *) ((BooleanTest *) node)->arg, cxt))
				return false;
			break;

		case T_RelabelType:
			{
				RelabelType *r = (RelabelType *) node;

				if (!collation_derived(r->resultcollid, (Node *) r->arg) ||
					!ship_walker((Node *) r->arg, cxt))
					return false;
				break;
			}

		case T_ArrayExpr:
			{
				ArrayExpr  *a = (ArrayExpr *) node;

				if (!collation_derived(a->array_collid, (Node *) a->elements) ||
					!ship_walker((Node *) a->elements, cxt))
					return false;
				break;
			}

		case T_SubscriptingRef:
			{
				SubscriptingRef *sr = (SubscriptingRef *) node;

				/*
				 * Only a fetch: an assignment appears in UPDATE's SET, not in
				 * a condition.  Built-in subscripting (of arrays, jsonb) is
				 * the same remotely; the container's type is checked as
				 * the type of its expression.
				 */
				if (sr->refassgnexpr != NULL ||
					!collation_derived(sr->refcollid, (Node *) sr->refexpr) ||
					!ship_walker((Node *) sr->refexpr, cxt) ||
					!ship_walker((Node *) sr->refupperindexpr, cxt) ||
					!ship_walker((Node *) sr->reflowerindexpr, cxt))
					return false;
				break;
			}

		default:
			elog(ERROR, "unrecognized node type: %d", (int) nodeTag(node));
	}
	return true;
}

/*
 * case_shippable
 *		True if CASE expression CE can be evaluated remotely: its value (for
 *		a simple CASE), every WHEN clause and result, and its ELSE, over a
 *		result in no collation but the default.  A simple CASE's WHEN
 *		clauses must still be as the parser made them (afdw_case_when_value);
 *		their equality operator is checked with the clause, the remote
 *		parser choosing the same one for the same types.
 */
static bool
case_shippable(CaseExpr *ce, ShipContext *cxt)
{
	ListCell   *lc;
	List	   *results = NIL;

	if (!ship_walker((Node *) ce->arg, cxt) ||
		!ship_walker((Node *) ce->defresult, cxt))
		return false;
	foreach(lc, ce->args)
	{
		CaseWhen   *cw = lfirst_node(CaseWhen, lc);

		if (ce->arg != NULL)
		{
			/* Its operator, and the value compared, written alone. */
			OpExpr	   *op = (OpExpr *) cw->expr;
			Expr	   *value = afdw_case_when_value(cw);

			if (value == NULL)
				return false;
			set_opfuncid(op);
			if (!operator_shippable(op->opno, op->opfuncid, cxt) ||
				!collation_derived(op->inputcollid,
								   (Node *) list_make2(ce->arg, value)) ||
				!collation_derived(exprCollation(linitial(op->args)),
								   (Node *) ce->arg) ||
				!ship_walker((Node *) value, cxt))
				return false;
		}
		else if (!ship_walker((Node *) cw->expr, cxt))
			return false;
		if (!ship_walker((Node *) cw->result, cxt))
			return false;
		results = lappend(results, cw->result);
	}
	return collation_derived(ce->casecollid,
							 (Node *) lappend(results, ce->defresult));
}

/*
 * aggref_shippable
 *		True if the remote server computes aggregate AGG as the local one
 *		would: an aggregate built in or of a listed extension, over
 *		shippable arguments (direct ones too) and FILTER, whose DISTINCT
 *		and ORDER BY sort with shippable operators; computed whole unless
 *		CXT asks for partial aggregates, which must be plain ones with a
 *		partial form (afdw_partial_form).
 *
 * An ordered-set or hypothetical-set aggregate (WITHIN GROUP) sorts, and
 * compares its direct arguments, by the operator of each ORDER BY item;
 * it is sent only when that is the ascending or descending operator of
 * the default operator class of the item's built-in type, which the
 * remote server then takes from ASC or DESC.
 */
static bool
aggref_shippable(Aggref *agg, ShipContext *cxt)
{
	ListCell   *lc;
	bool		ok;

	if (!cxt->aggs_ok || agg->agglevelsup != 0 ||
		(agg->aggkind != AGGKIND_NORMAL &&
		 (cxt->partial || agg->aggvariadic)) ||
		agg->aggsplit != (cxt->partial ? AGGSPLIT_INITIAL_SERIAL : AGGSPLIT_SIMPLE) ||
		(cxt->partial && afdw_partial_form(agg) == AFDW_PARTIAL_NONE) ||
		!object_shippable(agg->aggfnoid, ProcedureRelationId, cxt->extensions) ||
		!collation_ok(agg->inputcollid) || !collation_ok(agg->aggcollid))
		return false;

	/* An aggregate's arguments hold no aggregate of the same level. */
	cxt->aggs_ok = false;
	ok = ship_walker((Node *) agg->aggfilter, cxt) &&
		ship_walker((Node *) agg->aggdirectargs, cxt);
	foreach(lc, agg->args)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (!ok)
			break;
		ok = ship_walker((Node *) tle->expr, cxt);
	}
	cxt->aggs_ok = true;
	if (!ok)
		return false;

	/* DISTINCT and ORDER BY sort with the clause's operator. */
	foreach(lc, list_concat_copy(agg->aggorder, agg->aggdistinct))
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);

		if (!operator_shippable(sgc->sortop, get_opcode(sgc->sortop), cxt) ||
			!operator_shippable(sgc->eqop, get_opcode(sgc->eqop), cxt))
			return false;
		if (agg->aggkind != AGGKIND_NORMAL)
		{
			TargetEntry *tle = get_sortgroupclause_tle(sgc, agg->args);
			Oid			type = exprType((Node *) tle->expr);
			TypeCacheEntry *tce;

			if (!afdw_is_builtin(type))
				return false;
			tce = lookup_type_cache(type, TYPECACHE_LT_OPR | TYPECACHE_GT_OPR);
			if (sgc->sortop != tce->lt_opr && sgc->sortop != tce->gt_opr)
				return false;
		}
	}
	return true;
}

/*
 * subplan_shippable
 *		True if NODE, a SubPlan or AlternativeSubPlan, is "x op ANY/ALL
 *		(subquery)" whose subquery is one remote SELECT to the same server
 *		as the same user (afdw_sent_subplan), with x and op shippable: the
 *		remote server then evaluates the whole condition, the subquery
 *		inside.
 */
static bool
subplan_shippable(Node *node, ShipContext *cxt)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) cxt->baserel->fdw_private;
	ForeignScan *scan;
	SubPlan    *sp;
	OpExpr	   *test;

	if (fp == NULL || fp->user == NULL)
		return false;
	sp = afdw_sent_subplan(cxt->root, node, fp->user->serverid, fp->user->umid,
						   &scan);
	if (sp == NULL)
		return false;
	test = (OpExpr *) sp->testexpr;
	set_opfuncid(test);
	/* the subquery's column, compared remotely as it is */
	return type_shippable(exprType(lsecond(test->args)), cxt) &&
		operator_shippable(test->opno, test->opfuncid, cxt) &&
		collation_derived(test->inputcollid, (Node *) test->args) &&
		ship_walker(linitial(test->args), cxt);
}

/*
 * afdw_is_shippable
 *		True if EXPR, a condition on BASEREL, can be evaluated remotely.
 */
bool
afdw_is_shippable(PlannerInfo *root, RelOptInfo *baserel, Expr *expr)
{
	ShipContext cxt;

	cxt.root = root;
	cxt.baserel = baserel;
	cxt.extensions = ((AfdwRelInfo *) baserel->fdw_private)->extensions;
	cxt.aggs_ok = false;
	cxt.partial = false;
	return ship_walker((Node *) expr, &cxt);
}

/*
 * afdw_is_shippable_grouped
 *		True if EXPR, an expression over the groups of a scan of BASEREL
 *		(an item of the select list or HAVING), can be evaluated remotely,
 *		with its aggregates computed whole or, when PARTIAL, as transition
 *		states.
 */
bool
afdw_is_shippable_grouped(PlannerInfo *root, RelOptInfo *baserel, Expr *expr,
						  bool partial)
{
	ShipContext cxt;

	cxt.root = root;
	cxt.baserel = baserel;
	cxt.extensions = ((AfdwRelInfo *) baserel->fdw_private)->extensions;
	cxt.aggs_ok = true;
	cxt.partial = partial;
	return ship_walker((Node *) expr, &cxt);
}

/*
 * afdw_classify_conditions
 *		Split the RestrictInfos CONDS into those evaluated remotely and those
 *		evaluated locally.
 */
void
afdw_classify_conditions(PlannerInfo *root, RelOptInfo *baserel, List *conds,
						 List **remote, List **local)
{
	ListCell   *lc;

	*remote = NIL;
	*local = NIL;
	foreach(lc, conds)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		if (afdw_is_shippable(root, baserel, ri->clause))
			*remote = lappend(*remote, ri);
		else
			*local = lappend(*local, ri);
	}
}

/*
 * afdw_sort_key
 *		The column of BASEREL by which the remote server can order its rows
 *		exactly as the local server would for path key PK, with *DESCENDING
 *		and *NULLS_FIRST telling how; 0 if there is none.
 *
 * Only a plain column of a built-in type counts, one the scan reads,
 * ordered by its type's default built-in operator class, or by an
 * operator of another family, built in or of a listed extension (ORDER BY
 * t USING ~<~, afdw_sort_operator), and in the default collation (or
 * none): the remote server then sorts it with the same operator as the
 * local one, whatever else it has.  An expression is sorted locally.
 */
AttrNumber
afdw_sort_key(RelOptInfo *baserel, PathKey *pk, bool *descending,
			  bool *nulls_first)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) baserel->fdw_private;
	EquivalenceClass *ec = pk->pk_eclass;
	AfdwMemberIter iter;
	EquivalenceMember *em;

	if (ec->ec_has_volatile || !collation_ok(ec->ec_collation) ||
		(!afdw_pathkey_ascending(pk) &&
		 !afdw_pathkey_descending(pk)))
		return 0;

	afdw_members_begin(&iter, ec, baserel->relids);
	while ((em = afdw_members_next(&iter)) != NULL)
	{
		Var		   *var = (Var *) em->em_expr;
		TypeCacheEntry *tce;

		/*
		 * A column whose type sorts with another's operators (varchar with
		 * text's) comes relabeled to that type.
		 */
		if (IsA(var, RelabelType) &&
			((RelabelType *) var)->resulttype == em->em_datatype)
			var = (Var *) ((RelabelType *) var)->arg;
		if (!IsA(var, Var) || var->varno != (int) baserel->relid ||
			var->varlevelsup != 0 || var->varattno <= 0 ||
			!bms_equal(em->em_relids, baserel->relids))
			continue;
		if (!bms_is_member(var->varattno - FirstLowInvalidHeapAttributeNumber,
						   fp->attrs_used) ||
			!afdw_is_builtin(var->vartype) || !collation_ok(var->varcollid) ||
			!afdw_is_builtin(em->em_datatype))
			return 0;
		tce = lookup_type_cache(var->vartype, TYPECACHE_BTREE_OPFAMILY);
		if (!OidIsValid(tce->btree_opf) || !afdw_is_builtin(tce->btree_opf))
			return 0;
		if (tce->btree_opf != pk->pk_opfamily &&
			!OidIsValid(afdw_sort_operator(baserel, pk, var->vartype)))
			return 0;
		*descending = (afdw_pathkey_descending(pk));
		*nulls_first = pk->pk_nulls_first;
		return var->varattno;
	}
	return 0;
}

/*
 * afdw_sort_operator
 *		The operator by which the remote server must order the values of
 *		TYPE, a column of BASEREL, for path key PK, written with USING:
 *		that of PK's operator family when it is not TYPE's default btree
 *		family but is built in or belongs to an extension of the server's
 *		extensions option, as the operator does, with an immutable
 *		function; InvalidOid otherwise (the type's default order: ASC or
 *		DESC, or an order that cannot be sent).
 */
Oid
afdw_sort_operator(RelOptInfo *baserel, PathKey *pk, Oid type)
{
	List	   *extensions = ((AfdwRelInfo *) baserel->fdw_private)->extensions;
	TypeCacheEntry *tce = lookup_type_cache(type, TYPECACHE_BTREE_OPFAMILY);
	Oid			opno;

	if (tce->btree_opf == pk->pk_opfamily ||
		!object_shippable(pk->pk_opfamily, OperatorFamilyRelationId, extensions))
		return InvalidOid;
	opno = get_opfamily_member(pk->pk_opfamily, type, type, afdw_pathkey_strategy(pk));
	if (!OidIsValid(opno) ||
		!object_shippable(opno, OperatorRelationId, extensions) ||
		func_volatile(get_opcode(opno)) != PROVOLATILE_IMMUTABLE)
		return InvalidOid;
	return opno;
}

/*
 * afdw_constant_key
 *		True if path key PK is a constant for the rows of REL: a branch of
 *		a UNION ALL that selects 1 AS type, under ORDER BY type.  Such a key
 *		orders nothing in REL and is not sent (ORDER BY 1 would name the
 *		first column).
 */
bool
afdw_constant_key(RelOptInfo *rel, PathKey *pk)
{
	AfdwMemberIter iter;
	EquivalenceMember *em;

	afdw_members_begin(&iter, pk->pk_eclass, rel->relids);
	while ((em = afdw_members_next(&iter)) != NULL)
	{
		if (IsA(em->em_expr, Const) && bms_equal(em->em_relids, rel->relids))
			return true;
	}
	return false;
}
