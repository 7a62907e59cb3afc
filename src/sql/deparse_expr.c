/*-------------------------------------------------------------------------
 *
 * deparse_expr.c
 *		Remote SQL of expressions.
 *
 * An expression that shippable.c let through, written so that the remote
 * server reads it as the local one means it, whatever the remote settings:
 * columns by their remote names, constants with the casts they need and
 * printed in the transmission modes, parameters as $n, operators and
 * functions by their names in pg_catalog or an extension's schema, and
 * aggregates whole or as the transition states of partial aggregates.
 * The transmission modes, the settings that values are printed in, are
 * set here, for constants and for the parameter values that the executor
 * sends (scan_commands.c, modify_rows.c, direct_modify.c).
 *
 * Neighbours: deparse_statements.c builds the statements around the expressions
 * (deparse_internal.h is their shared context).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/transam.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_ts_config.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "async_fdw.h"
#include "sql/deparse_internal.h"

static void deparse_aggref(Aggref *agg, DeparseContext *cxt);
static void deparse_subplan(Node *node, DeparseContext *cxt);
static void append_function_name(StringInfo buf, Oid funcid);

/*
 * afdw_is_builtin
 *		True for objects made by initdb, which every remote server of the
 *		same or a later major version has with the same meaning.
 */
bool
afdw_is_builtin(Oid oid)
{
	return oid < FirstGenbkiObjectId;
}

/*
 * afdw_type_names_by_oid
 *		True for the types whose values are objects named by their OIDs
 *		(regclass, regrole, ...), and arrays of them.  Their binary form
 *		is the remote object's OID, which names another object locally, or
 *		none; their text form is the name, which the local input function
 *		looks up, as with postgres_fdw.
 */
bool
afdw_type_names_by_oid(Oid type)
{
	Oid			element = get_element_type(type);

	switch (OidIsValid(element) ? element : type)
	{
		case REGPROCOID:
		case REGPROCEDUREOID:
		case REGOPEROID:
		case REGOPERATOROID:
		case REGCLASSOID:
		case REGTYPEOID:
		case REGCOLLATIONOID:
		case REGCONFIGOID:
		case REGDICTIONARYOID:
		case REGNAMESPACEOID:
		case REGROLEOID:
			return true;
		default:
			return false;
	}
}

/*
 * afdw_case_when_value
 *		The value compared in WHEN clause CW of a simple CASE (CASE x WHEN
 *		value ...), or NULL when the clause is not of the form the parser
 *		makes, CaseTestExpr = value (the CaseTestExpr perhaps under an
 *		implicit relabelling): the planner may have rewritten it (inlined
 *		an equality function), and such a clause cannot be written back
 *		as WHEN value.
 */
Expr *
afdw_case_when_value(CaseWhen *cw)
{
	OpExpr	   *op = (OpExpr *) cw->expr;
	Node	   *left;

	if (!IsA(op, OpExpr) || list_length(op->args) != 2)
		return NULL;
	left = linitial(op->args);
	if (IsA(left, RelabelType) &&
		((RelabelType *) left)->relabelformat == COERCE_IMPLICIT_CAST)
		left = (Node *) ((RelabelType *) left)->arg;
	if (!IsA(left, CaseTestExpr))
		return NULL;
	return lsecond(op->args);
}

/*
 * afdw_partial_form
 *		How the remote server computes the transition state of aggregate
 *		AGG, which a local Finalize Aggregate then combines, or
 *		AFDW_PARTIAL_NONE when no plain SQL gives a state that the local
 *		server reads back exactly.
 *
 * The state of count, sum of small integers, min, max, bool_and, bool_or,
 * every and the bit aggregates is the aggregate's own result.  That of avg
 * of a small integer is the array {count, sum}.  That of sum and avg of
 * bigint is internal; its serial form, the same in PostgreSQL 15, 17 and
 * 18 (the aggregate tests check it on each), is the count (for sum, 1
 * when it is not null: append_state_count) as int8send writes it
 * followed by the sum as numeric_send writes it but
 * with four bytes for each of its four header fields (its number of
 * digits, weight, sign and scale) instead of two.  min and
 * max of a type whose text form depends on a setting of the session
 * (money) are left out.  sum of float4 and float8 is the aggregate's own
 * result; avg of them is the array {count, sum, sum of squared
 * deviations} of float8, whose last item only the variance reads: the
 * remote sends 0 there (NaN after an infinite or NaN input, as
 * float8_accum).  Floating-point sums depend on the order of
 * addition, which an asynchronous Append does not fix either: a
 * partial sum is no less exact than a local one.  That of sum and avg of
 * numeric is internal, its serial form (the same in 15, 17 and 18): the
 * count of non-null inputs (for sum, 1 when there is one), the sum of the
 * finite ones as the bigint state writes it, the largest scale among them
 * as int4send and how many have it as int8send (only the inverse
 * transition of a moving aggregate reads that count, never a combined
 * state: the remote sends the count of inputs), then the counts of NaN,
 * Infinity and -Infinity (deparse_numeric_state).
 */
AfdwPartialForm
afdw_partial_form(Aggref *agg)
{
	switch (agg->aggfnoid)
	{
		case F_COUNT_:
		case F_COUNT_ANY:
		case F_SUM_INT2:
		case F_SUM_INT4:
		case F_MIN_INT2:
		case F_MIN_INT4:
		case F_MIN_INT8:
		case F_MIN_OID:
		case F_MIN_FLOAT4:
		case F_MIN_FLOAT8:
		case F_MIN_NUMERIC:
		case F_MIN_DATE:
		case F_MIN_TIME:
		case F_MIN_TIMETZ:
		case F_MIN_TIMESTAMP:
		case F_MIN_TIMESTAMPTZ:
		case F_MIN_INTERVAL:
		case F_MIN_TEXT:
		case F_MIN_BPCHAR:
		case F_MAX_INT2:
		case F_MAX_INT4:
		case F_MAX_INT8:
		case F_MAX_OID:
		case F_MAX_FLOAT4:
		case F_MAX_FLOAT8:
		case F_MAX_NUMERIC:
		case F_MAX_DATE:
		case F_MAX_TIME:
		case F_MAX_TIMETZ:
		case F_MAX_TIMESTAMP:
		case F_MAX_TIMESTAMPTZ:
		case F_MAX_INTERVAL:
		case F_MAX_TEXT:
		case F_MAX_BPCHAR:
		case F_BOOL_AND:
		case F_BOOL_OR:
		case F_EVERY:
		case F_BIT_AND_INT2:
		case F_BIT_AND_INT4:
		case F_BIT_AND_INT8:
		case F_BIT_OR_INT2:
		case F_BIT_OR_INT4:
		case F_BIT_OR_INT8:
		case F_BIT_XOR_INT2:
		case F_BIT_XOR_INT4:
		case F_BIT_XOR_INT8:
			return AFDW_PARTIAL_SAME;
		case F_AVG_INT2:
		case F_AVG_INT4:
			return AFDW_PARTIAL_AVG_ARRAY;
		case F_SUM_INT8:
		case F_AVG_INT8:
			return AFDW_PARTIAL_INT8_STATE;
		case F_SUM_FLOAT4:
		case F_SUM_FLOAT8:
			return AFDW_PARTIAL_SAME;
		case F_AVG_FLOAT4:
		case F_AVG_FLOAT8:
			return AFDW_PARTIAL_FLOAT8_ARRAY;
		case F_SUM_NUMERIC:
		case F_AVG_NUMERIC:
			return AFDW_PARTIAL_NUMERIC_STATE;
		default:
			return AFDW_PARTIAL_NONE;
	}
}

/*
 * afdw_remote_column_name
 *		The remote name of column ATTNUM of REL: its column_name option, or
 *		its local name.
 */
const char *
afdw_remote_column_name(Relation rel, AttrNumber attnum)
{
	List	   *options = GetForeignColumnOptions(RelationGetRelid(rel), attnum);
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "column_name") == 0)
			return defGetString(def);
	}
	return NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname);
}

/*
 * append_type_name
 *		Append TYPE with TYPMOD as the remote server will read it.
 */
static void
append_type_name(StringInfo buf, Oid type, int32 typmod)
{
	bits16		flags = FORMAT_TYPE_TYPEMOD_GIVEN;

	/*
	 * Built-in types live in pg_catalog, the remote session's search_path;
	 * an extension's type is named with its schema, whatever the local
	 * search_path would leave out.
	 */
	if (!afdw_is_builtin(type))
		flags |= FORMAT_TYPE_FORCE_QUALIFY;
	appendStringInfoString(buf, format_type_extended(type, typmod, flags));
}

/*
 * afdw_append_literal
 *		Append VAL as a quoted string literal, whatever
 *		standard_conforming_strings says remotely.
 */
void
afdw_append_literal(StringInfo buf, const char *val)
{
	if (strchr(val, '\\') != NULL)
		appendStringInfoChar(buf, 'E');
	appendStringInfoChar(buf, '\'');
	for (const char *p = val; *p; p++)
	{
		if (*p == '\'' || *p == '\\')
			appendStringInfoChar(buf, *p);
		appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '\'');
}

/*
 * afdw_output_ignores_settings
 *		True for the types whose text form no setting changes, so that
 *		printing their values needs no afdw_set_transmission_modes.
 */
bool
afdw_output_ignores_settings(Oid type)
{
	switch (type)
	{
		case BOOLOID:
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case NUMERICOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case UUIDOID:
			return true;
		default:
			return false;
	}
}

/*
 * afdw_set_transmission_modes
 *		Make values print the way the remote session reads them, until
 *		afdw_reset_transmission_modes(the returned level).
 *
 * Remote sessions run with DateStyle ISO, IntervalStyle postgres and
 * extra_float_digits 3; a local session may print dates as 01/02/2003 or
 * round floats.
 */
int
afdw_set_transmission_modes(void)
{
	int			nestlevel = NewGUCNestLevel();

	if (DateStyle != USE_ISO_DATES)
		(void) set_config_option("datestyle", "ISO", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	if (IntervalStyle != INTSTYLE_POSTGRES)
		(void) set_config_option("intervalstyle", "postgres", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (extra_float_digits < 3)
		(void) set_config_option("extra_float_digits", "3", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * afdw_reset_transmission_modes
 *		Undo afdw_set_transmission_modes.
 */
void
afdw_reset_transmission_modes(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
}

/*
 * deparse_const
 *		Append constant C, with a cast wherever the literal alone would be
 *		read as another type.
 *
 * With BARE, a constant printed as a quoted literal or NULL gets no cast:
 * the remote parser gives it the type of what it is compared with (see
 * deparse_opexpr).  Numbers and Booleans are printed as usual.
 */
static void
deparse_const(Const *c, DeparseContext *cxt, bool bare)
{
	StringInfo	buf = cxt->buf;
	Oid			typoutput;
	bool		isvarlena;
	char	   *val;
	bool		cast = true;

	if (c->consttype == REGCONFIGOID && !c->constisnull)
	{
		/* By its qualified name: the local search path does not apply. */
		HeapTuple	tup = SearchSysCache1(TSCONFIGOID, c->constvalue);
		Form_pg_ts_config form;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for text search configuration %u",
				 DatumGetObjectId(c->constvalue));
		form = (Form_pg_ts_config) GETSTRUCT(tup);
		afdw_append_literal(buf,
							quote_qualified_identifier(get_namespace_name(form->cfgnamespace),
													   NameStr(form->cfgname)));
		appendStringInfoString(buf, "::regconfig");
		ReleaseSysCache(tup);
		return;
	}

	if (c->constisnull)
	{
		appendStringInfoString(buf, "NULL");
		if (!bare)
		{
			appendStringInfoString(buf, "::");
			append_type_name(buf, c->consttype, c->consttypmod);
		}
		return;
	}

	/* Settings change how floats, dates and times print: fix them first. */
	if (cxt->guc_level < 0 && !afdw_output_ignores_settings(c->consttype))
		cxt->guc_level = afdw_set_transmission_modes();
	getTypeOutputInfo(c->consttype, &typoutput, &isvarlena);
	val = OidOutputFunctionCall(typoutput, c->constvalue);

	switch (c->consttype)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
			/* Plain numbers go bare; NaN and Infinity need quotes. */
			if (strspn(val, "0123456789+-eE.") == strlen(val))
			{
				if (val[0] == '-' || val[0] == '+')
					appendStringInfo(buf, "(%s)", val);
				else
					appendStringInfoString(buf, val);
				cast = (c->consttype != INT4OID);
			}
			else
				afdw_append_literal(buf, val);
			break;

		case BOOLOID:
			appendStringInfoString(buf, strcmp(val, "t") == 0 ? "true" : "false");
			cast = false;
			break;

		default:
			afdw_append_literal(buf, val);
			cast = !bare;
			break;
	}

	if (cast)
	{
		appendStringInfoString(buf, "::");
		append_type_name(buf, c->consttype, c->consttypmod);
	}
	pfree(val);
}

/*
 * deparse_param
 *		Append $n for the parameter expression EXPR (a Param, or another
 *		relation's column), registering it in *params; or, for the value of
 *		an initplan that can run on the same server (afdw_sent_initplan),
 *		the initplan's remote SELECT in parentheses.
 */
static void
deparse_param(Expr *expr, DeparseContext *cxt)
{
	int			n = 0;
	ListCell   *lc;
	bool		found = false;

	if (IsA(expr, Param) && cxt->root != NULL && cxt->baserel != NULL)
	{
		AfdwRelInfo *fp = (AfdwRelInfo *) cxt->baserel->fdw_private;
		ForeignScan *fs = NULL;

		if (fp != NULL && fp->user != NULL)
			fs = afdw_sent_initplan(cxt->root, (Param *) expr,
									fp->user->serverid, fp->user->umid);
		if (fs != NULL)
		{
			appendStringInfo(cxt->buf, "(%s)", afdw_scan_sql(fs));
			return;
		}
	}

	foreach(lc, *cxt->params)
	{
		n++;
		if (equal(expr, lfirst(lc)))
		{
			found = true;
			break;
		}
	}
	if (!found)
	{
		*cxt->params = lappend(*cxt->params, expr);
		n = list_length(*cxt->params);
	}

	appendStringInfo(cxt->buf, "$%d::", n);
	append_type_name(cxt->buf, exprType((Node *) expr), exprTypmod((Node *) expr));
}

/*
 * deparse_operator_name
 *		Append the name of operator OPNO.
 *
 * Remote sessions search pg_catalog only: the bare name finds a built-in
 * operator, an extension's needs its schema.
 */
static void
deparse_operator_name(Oid opno, DeparseContext *cxt, char *kind)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator form;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	form = (Form_pg_operator) GETSTRUCT(tup);
	if (form->oprnamespace == PG_CATALOG_NAMESPACE)
		appendStringInfoString(cxt->buf, NameStr(form->oprname));
	else
	{
		/* An extension's operator, in the schema of its extension. */
		appendStringInfo(cxt->buf, "OPERATOR(%s.%s)",
						 quote_identifier(get_namespace_name(form->oprnamespace)),
						 NameStr(form->oprname));
	}
	*kind = form->oprkind;
	ReleaseSysCache(tup);
}

/*
 * deparse_subplan
 *		Append NODE, a SubPlan or AlternativeSubPlan that shippable.c let
 *		through, as "(x op ANY (remote SELECT))" (or ALL).
 *
 * The subquery's own scan stays in the plan, for a recheck or a partition
 * of another server that evaluates the condition locally, and is started
 * with the statement's other scans.  Prepared only when first read, it
 * would take a connection that a sibling under an asynchronous Append
 * holds in the middle of the Append's work: with one connection per
 * server, the Append then waited for ever (005_differential.pl, seed 4242).
 */
static void
deparse_subplan(Node *node, DeparseContext *cxt)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) cxt->baserel->fdw_private;
	ForeignScan *fs = NULL;
	SubPlan    *sp = afdw_sent_subplan(cxt->root, node, fp->user->serverid,
									   fp->user->umid, &fs);
	OpExpr	   *test;
	char		kind;

	if (sp == NULL)
		elog(ERROR, "subquery cannot be sent to the remote server");
	test = (OpExpr *) sp->testexpr;
	appendStringInfoChar(cxt->buf, '(');
	afdw_deparse_expr(linitial(test->args), cxt);
	appendStringInfoChar(cxt->buf, ' ');
	deparse_operator_name(test->opno, cxt, &kind);
	appendStringInfo(cxt->buf, " %s (%s))",
					 sp->subLinkType == ANY_SUBLINK ? "ANY" : "ALL",
					 afdw_scan_sql(fs));
}

/*
 * var_relation
 *		The relation whose column VAR is, if the statement reads it (NULL
 *		for another relation's column, sent as a parameter).
 */
static Relation
var_relation(Var *var, DeparseContext *cxt)
{
	ListCell   *lc1;
	ListCell   *lc2;

	if (var->varlevelsup != 0)
		return NULL;
	if (cxt->joined == NIL)
		return var->varno == (int) cxt->baserel->relid ? cxt->rel : NULL;
	forboth(lc1, cxt->joined_relids, lc2, cxt->joined)
	{
		if (lfirst_int(lc1) == var->varno)
			return (Relation) lfirst(lc2);
	}
	return NULL;
}

/*
 * is_own_column
 *		True if EXPR prints as a bare column of the scanned table: a column,
 *		or one under a relabelling that prints as nothing (varchar used as
 *		text, say).
 */
static bool
is_own_column(Expr *expr, DeparseContext *cxt)
{
	if (IsA(expr, RelabelType) &&
		((RelabelType *) expr)->relabelformat == COERCE_IMPLICIT_CAST)
		expr = ((RelabelType *) expr)->arg;
	return IsA(expr, Var) && ((Var *) expr)->varlevelsup == 0 &&
		var_relation((Var *) expr, cxt) != NULL;
}

/*
 * deparse_opexpr
 *		Append an operator expression, prefix or infix.
 *
 * A constant compared with one of the table's columns of the very same
 * type is printed without a cast when it is a quoted literal, as
 * postgres_fdw does: the remote parser then reads it as the remote
 * column's type, so that a column declared text locally over a remote
 * enum or char(n) is compared the remote column's way (with a cast, the
 * remote server would look for an operator of its type and text, and fail
 * or compare otherwise).
 */
static void
deparse_opexpr(OpExpr *op, DeparseContext *cxt, bool distinct)
{
	StringInfo	buf = cxt->buf;
	char		kind;
	bool		bare_left = false;
	bool		bare_right = false;

	if (!distinct && list_length(op->args) == 2)
	{
		Expr	   *left = linitial(op->args);
		Expr	   *right = lsecond(op->args);

		if (exprType((Node *) left) == exprType((Node *) right))
		{
			if (IsA(left, Const))
				bare_left = is_own_column(right, cxt);
			else if (IsA(right, Const))
				bare_right = is_own_column(left, cxt);
		}
	}

	appendStringInfoChar(buf, '(');
	if (list_length(op->args) == 2)
	{
		if (bare_left)
			deparse_const(linitial(op->args), cxt, true);
		else
			afdw_deparse_expr(linitial(op->args), cxt);
		appendStringInfoChar(buf, ' ');
	}
	if (distinct)
		appendStringInfoString(buf, "IS DISTINCT FROM");
	else
		deparse_operator_name(op->opno, cxt, &kind);
	appendStringInfoChar(buf, ' ');
	if (bare_right)
		deparse_const(llast(op->args), cxt, true);
	else
		afdw_deparse_expr(llast(op->args), cxt);
	appendStringInfoChar(buf, ')');
}

/*
 * deparse_funcexpr
 *		Append a function call, or a cast when the call is one.
 */
static void
deparse_funcexpr(FuncExpr *f, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	ListCell   *lc;
	bool		first = true;

	if (f->funcformat == COERCE_EXPLICIT_CAST ||
		f->funcformat == COERCE_IMPLICIT_CAST)
	{
		int32		typmod;

		/* A length coercion carries the typmod; the cast applies it. */
		(void) exprIsLengthCoercion((Node *) f, &typmod);
		appendStringInfoChar(buf, '(');
		afdw_deparse_expr(linitial(f->args), cxt);
		appendStringInfoString(buf, ")::");
		append_type_name(buf, f->funcresulttype, typmod);
		return;
	}

	append_function_name(buf, f->funcid);
	appendStringInfoChar(buf, '(');
	foreach(lc, f->args)
	{
		if (!first)
			appendStringInfoString(buf, ", ");
		if (f->funcvariadic && lnext(f->args, lc) == NULL)
			appendStringInfoString(buf, "VARIADIC ");
		first = false;
		afdw_deparse_expr(lfirst(lc), cxt);
	}
	appendStringInfoChar(buf, ')');
}

/*
 * append_function_name
 *		Append the name of function FUNCID as the remote server finds it:
 *		remote sessions search pg_catalog only; an extension's has a schema.
 */
static void
append_function_name(StringInfo buf, Oid funcid)
{
	Oid			nsp = get_func_namespace(funcid);

	if (nsp != PG_CATALOG_NAMESPACE)
		appendStringInfo(buf, "%s.", quote_identifier(get_namespace_name(nsp)));
	appendStringInfoString(buf, quote_identifier(get_func_name(funcid)));
}

/*
 * deparse_agg_call
 *		Append a call of aggregate NAME (or of AGG's own aggregate when NULL)
 *		with AGG's arguments, DISTINCT, ORDER BY and FILTER; an ordered-set
 *		or hypothetical-set aggregate as name(direct arguments) WITHIN
 *		GROUP (ORDER BY its arguments).
 */
static void
deparse_agg_call(Aggref *agg, const char *name, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	ListCell   *lc;
	bool		first = true;
	bool		ordered_set = AGGKIND_IS_ORDERED_SET(agg->aggkind);

	if (name != NULL)
		appendStringInfoString(buf, name);
	else
		append_function_name(buf, agg->aggfnoid);
	appendStringInfoChar(buf, '(');
	if (ordered_set)
	{
		foreach(lc, agg->aggdirectargs)
		{
			if (!first)
				appendStringInfoString(buf, ", ");
			first = false;
			afdw_deparse_expr((Expr *) lfirst(lc), cxt);
		}
		appendStringInfoString(buf, ") WITHIN GROUP (");
	}
	else if (agg->aggdistinct != NIL)
		appendStringInfoString(buf, "DISTINCT ");
	if (agg->aggstar)
		appendStringInfoChar(buf, '*');
	foreach(lc, agg->args)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		/*
		 * ORDER BY items that are not arguments; those of an ordered-set
		 * aggregate come in its WITHIN GROUP.
		 */
		if (tle->resjunk || ordered_set)
			continue;
		if (!first)
			appendStringInfoString(buf, ", ");
		if (agg->aggvariadic && lnext(agg->args, lc) == NULL)
			appendStringInfoString(buf, "VARIADIC ");
		first = false;
		afdw_deparse_expr(tle->expr, cxt);
	}

	first = true;
	foreach(lc, agg->aggorder)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, agg->args);
		Oid			type = exprType((Node *) tle->expr);
		TypeCacheEntry *tce = lookup_type_cache(type, TYPECACHE_LT_OPR |
												TYPECACHE_GT_OPR);
		char		kind;

		appendStringInfoString(buf, !first ? ", " :
							   ordered_set ? "ORDER BY " : " ORDER BY ");
		first = false;
		afdw_deparse_expr(tle->expr, cxt);
		if (sgc->sortop == tce->gt_opr)
			appendStringInfoString(buf, " DESC");
		else if (sgc->sortop != tce->lt_opr)
		{
			appendStringInfoString(buf, " USING ");
			deparse_operator_name(sgc->sortop, cxt, &kind);
		}
		appendStringInfoString(buf, sgc->nulls_first ? " NULLS FIRST" : " NULLS LAST");
	}
	appendStringInfoChar(buf, ')');

	if (agg->aggfilter != NULL)
	{
		appendStringInfoString(buf, " FILTER (WHERE ");
		afdw_deparse_expr(agg->aggfilter, cxt);
		appendStringInfoChar(buf, ')');
	}
}

/*
 * append_widened_numeric
 *		Append the remote expression of the bytes of NUMERIC_SEND (a remote
 *		numeric_send(...)) with its four header fields widened from two
 *		bytes to four, sign-extended: the number of digits, the weight
 *		(negative below 1), the sign and the display scale.
 */
static void
append_widened_numeric(StringInfo buf, const char *numeric_send)
{
	for (int field = 0; field < 4; field++)
		appendStringInfo(buf,
						 "CASE WHEN get_byte(%s, %d) >= 128 THEN decode('ffff', 'hex') ELSE decode('0000', 'hex') END || substr(%s, %d, 2) || ",
						 numeric_send, 2 * field, numeric_send, 2 * field + 1);
	appendStringInfo(buf, "substr(%s, 9)", numeric_send);
}

/*
 * append_state_count
 *		Append the count of a sum or avg state of AGG, whose sum's remote
 *		SQL is SUM: count(x) for an avg, which divides by it; for a sum,
 *		whose finalization and combination read the count only to tell no
 *		input from some, 1 when SUM is not null and 0 when it is.  The sum
 *		is computed anyway, so a sum's state evaluates its argument once a
 *		row, as the sum itself does.  But the local server finalizes a sum
 *		and an avg of the same arguments from one state, read from either's
 *		column: such a sum sends the true count (CXT's avg_args).
 */
static void
append_state_count(Aggref *agg, const char *sum, DeparseContext *cxt)
{
	if ((agg->aggfnoid == F_SUM_NUMERIC || agg->aggfnoid == F_SUM_INT8) &&
		!list_member(cxt->avg_args, agg->args))
		appendStringInfo(cxt->buf, "CASE WHEN %s IS NULL THEN 0 ELSE 1 END::int8", sum);
	else
		deparse_agg_call(agg, "count", cxt);
}

/*
 * afdw_avg_args_walker
 *		Add to *ARGS the argument lists of the avgs of numeric and bigint in
 *		NODE (see append_state_count).
 */
bool
afdw_avg_args_walker(Node *node, List **args)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref) &&
		(((Aggref *) node)->aggfnoid == F_AVG_NUMERIC ||
		 ((Aggref *) node)->aggfnoid == F_AVG_INT8))
		*args = lappend(*args, ((Aggref *) node)->args);
	return expression_tree_walker(node, afdw_avg_args_walker, (void *) args);
}

/*
 * deparse_numeric_state
 *		Append the serial form of the transition state of AGG, a sum or avg
 *		of numeric (see afdw_partial_form), from its count and sum.
 *
 * A sum that is not finite says all the state's finalization needs: NaN
 * (a NaN, or both infinities), Infinity or -Infinity, sent as one NaN or
 * infinity counted, the finite sum then 0; a finite sum has no NaN or
 * infinity beside it, and its scale is the largest of its inputs'.  So
 * the remote server computes the same two aggregates as for the result
 * (the sum alone for sum: append_state_count).
 */
static void
deparse_numeric_state(Aggref *agg, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	DeparseContext sub = *cxt;
	StringInfoData sum;
	StringInfoData send;

	initStringInfo(&sum);
	sub.buf = &sum;
	deparse_agg_call(agg, "sum", &sub);
	cxt->guc_level = sub.guc_level;

	initStringInfo(&send);
	appendStringInfo(&send, "numeric_send(CASE WHEN %s - %s = 0 THEN %s ELSE 0 END)",
					 sum.data, sum.data, sum.data);

	appendStringInfoString(buf, "(int8send(");
	append_state_count(agg, sum.data, cxt);
	appendStringInfoString(buf, ") || ");
	append_widened_numeric(buf, send.data);
	appendStringInfo(buf, " || int4send(COALESCE(scale(%s), 0)) || int8send(", sum.data);
	append_state_count(agg, sum.data, cxt);
	appendStringInfo(buf, ") || int8send(CASE WHEN %s = 'NaN' THEN 1 ELSE 0 END)"
					 " || int8send(CASE WHEN %s = 'Infinity' THEN 1 ELSE 0 END)"
					 " || int8send(CASE WHEN %s = '-Infinity' THEN 1 ELSE 0 END))",
					 sum.data, sum.data, sum.data);
	pfree(sum.data);
	pfree(send.data);
}

/*
 * afdw_repeated_argument
 *		The argument of AGG that its partial form (afdw_partial_form)
 *		evaluates more than once a row, as an avg's count(x) and sum(x)
 *		(a sum's state reads its sum alone: append_state_count), when it
 *		costs more than reading a column, a constant or a parameter (or a
 *		cast of one); else NULL.  A grouped query computes it once, in a
 *		subquery under the grouping (afdw_deparse_grouped_select).  An
 *		aggregate with FILTER, DISTINCT or ORDER BY keeps its argument: a
 *		filtered one may be evaluated only where the filter holds.
 */
Expr *
afdw_repeated_argument(Aggref *agg)
{
	Node	   *arg;

	switch (afdw_partial_form(agg))
	{
		case AFDW_PARTIAL_AVG_ARRAY:
		case AFDW_PARTIAL_FLOAT8_ARRAY:
			break;
		case AFDW_PARTIAL_INT8_STATE:
		case AFDW_PARTIAL_NUMERIC_STATE:
			if (agg->aggfnoid == F_AVG_INT8 || agg->aggfnoid == F_AVG_NUMERIC)
				break;
			return NULL;
		default:
			return NULL;
	}
	if (agg->aggfilter != NULL || agg->aggdistinct != NIL ||
		agg->aggorder != NIL || list_length(agg->args) != 1)
		return NULL;
	/* A cast of a column costs less than the subquery's projection. */
	arg = (Node *) linitial_node(TargetEntry, agg->args)->expr;
	for (;;)
	{
		if (IsA(arg, RelabelType))
			arg = (Node *) ((RelabelType *) arg)->arg;
		else if (IsA(arg, FuncExpr) &&
				 ((FuncExpr *) arg)->funcformat != COERCE_EXPLICIT_CALL &&
				 list_length(((FuncExpr *) arg)->args) == 1)
			arg = (Node *) linitial(((FuncExpr *) arg)->args);
		else
			break;
	}
	if (IsA(arg, Var) || IsA(arg, Const) || IsA(arg, Param))
		return NULL;
	return linitial_node(TargetEntry, agg->args)->expr;
}

/*
 * computed_column
 *		The 1-based position of NODE among the columns of the subquery a
 *		grouped query reads (CXT's computed: Vars, matched by table and
 *		column, and expressions), or 0.
 */
static int
computed_column(Node *node, DeparseContext *cxt)
{
	ListCell   *lc;

	foreach(lc, cxt->computed)
	{
		Node	   *c = (Node *) lfirst(lc);

		if (IsA(node, Var) && IsA(c, Var))
		{
			if (((Var *) node)->varlevelsup == 0 &&
				((Var *) node)->varno == ((Var *) c)->varno &&
				((Var *) node)->varattno == ((Var *) c)->varattno)
				return foreach_current_index(lc) + 1;
		}
		else if (!IsA(c, Var) && equal(node, c))
			return foreach_current_index(lc) + 1;
	}
	return 0;
}

/*
 * deparse_aggref
 *		Append aggregate AGG, or its transition state in the form
 *		afdw_partial_form chose when the context asks for partial
 *		aggregates.
 */
static void
deparse_aggref(Aggref *agg, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;

	switch (cxt->partial ? afdw_partial_form(agg) : AFDW_PARTIAL_SAME)
	{
		case AFDW_PARTIAL_SAME:
			deparse_agg_call(agg, NULL, cxt);
			break;
		case AFDW_PARTIAL_AVG_ARRAY:
			appendStringInfoString(buf, "ARRAY[");
			deparse_agg_call(agg, "count", cxt);
			appendStringInfoString(buf, ", COALESCE(");
			deparse_agg_call(agg, "sum", cxt);
			appendStringInfoString(buf, ", 0)]::int8[]");
			break;
		case AFDW_PARTIAL_INT8_STATE:
			{
				/*
				 * The count, then the sum's four header fields widened from
				 * numeric_send's two bytes to four (none is negative: the
				 * weight of an integer is not), then its digits.  The
				 * remote server computes the repeated aggregates once.
				 */
				StringInfoData call;
				StringInfoData sum;
				DeparseContext sub = *cxt;

				initStringInfo(&call);
				sub.buf = &call;
				deparse_agg_call(agg, "sum", &sub);
				cxt->guc_level = sub.guc_level;
				initStringInfo(&sum);
				appendStringInfo(&sum, "numeric_send(COALESCE(%s, 0))", call.data);

				appendStringInfoString(buf, "(int8send(");
				append_state_count(agg, call.data, cxt);
				appendStringInfoChar(buf, ')');
				for (int field = 0; field < 4; field++)
					appendStringInfo(buf, " || decode('0000', 'hex') || substr(%s, %d, 2)",
									 sum.data, 2 * field + 1);
				appendStringInfo(buf, " || substr(%s, 9))", sum.data);
				pfree(call.data);
				pfree(sum.data);
				break;
			}
		case AFDW_PARTIAL_FLOAT8_ARRAY:
			{
				/*
				 * float4_accum adds in float8: so does the remote sum, of
				 * the argument cast to float8.  The third item is NaN, as
				 * float8_accum leaves it, once an input is infinite or NaN
				 * (the sum is then not finite): float8_combine would take
				 * a 0 beside an infinite sum for an overflow.
				 */
				Aggref	   *sum = copyObject(agg);
				TargetEntry *arg = linitial_node(TargetEntry, sum->args);

				if (exprType((Node *) arg->expr) == FLOAT4OID)
					arg->expr = (Expr *) makeFuncExpr(F_FLOAT8_FLOAT4, FLOAT8OID,
													  list_make1(arg->expr),
													  InvalidOid, InvalidOid,
													  COERCE_EXPLICIT_CAST);
				appendStringInfoString(buf, "ARRAY[(");
				deparse_agg_call(agg, "count", cxt);
				appendStringInfoString(buf, ")::float8, COALESCE(");
				deparse_agg_call(sum, "sum", cxt);
				appendStringInfoString(buf, ", 0), CASE WHEN COALESCE(");
				deparse_agg_call(sum, "sum", cxt);
				appendStringInfoString(buf, " - ");
				deparse_agg_call(sum, "sum", cxt);
				appendStringInfoString(buf, ", 0) = 0 THEN 0::float8 ELSE 'NaN'::float8 END]::float8[]");
				break;
			}
		case AFDW_PARTIAL_NUMERIC_STATE:
			deparse_numeric_state(agg, cxt);
			break;
		case AFDW_PARTIAL_NONE:
			elog(ERROR, "aggregate %u has no partial form", agg->aggfnoid);
	}
}

/*
 * deparse_var
 *		Append column VAR of a table the statement reads (r<n>.name in a
 *		join, s<n>.c<k> above a subquery), or $n for another relation's.
 */
static void
deparse_var(Var *var, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	Relation	rel = var_relation(var, cxt);

	/* A column of a subquery's table, above it: s<n>.c<k>. */
	if (rel != NULL && afdw_deparse_subquery_column(var, cxt))
		return;
	if (rel == NULL)
	{
		deparse_param((Expr *) var, cxt);
		return;
	}
	/* In a join, r<n> is the relation of range table entry n. */
	if (cxt->joined != NIL)
		appendStringInfo(buf, "r%d.", var->varno);
	if (var->varattno == SelfItemPointerAttributeNumber)
		appendStringInfoString(buf, "ctid");
	else
		appendStringInfoString(buf,
							   quote_identifier(afdw_remote_column_name(rel,
																   var->varattno)));
}

/*
 * deparse_scalar_array_op
 *		Append "(x op ANY (array))", or ALL.
 */
static void
deparse_scalar_array_op(ScalarArrayOpExpr *op, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	char		kind;

	appendStringInfoChar(buf, '(');
	afdw_deparse_expr(linitial(op->args), cxt);
	appendStringInfoChar(buf, ' ');
	deparse_operator_name(op->opno, cxt, &kind);
	appendStringInfoString(buf, op->useOr ? " ANY (" : " ALL (");
	afdw_deparse_expr(lsecond(op->args), cxt);
	appendStringInfoString(buf, "))");
}

/*
 * deparse_bool_expr
 *		Append NOT, or the arguments joined by AND or OR, in parentheses.
 */
static void
deparse_bool_expr(BoolExpr *b, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	ListCell   *lc;
	bool		first = true;

	if (b->boolop == NOT_EXPR)
	{
		appendStringInfoString(buf, "(NOT ");
		afdw_deparse_expr(linitial(b->args), cxt);
		appendStringInfoChar(buf, ')');
		return;
	}
	appendStringInfoChar(buf, '(');
	foreach(lc, b->args)
	{
		if (!first)
			appendStringInfoString(buf, b->boolop == AND_EXPR ?
								   " AND " : " OR ");
		first = false;
		afdw_deparse_expr(lfirst(lc), cxt);
	}
	appendStringInfoChar(buf, ')');
}

/*
 * deparse_null_test
 *		Append "(x IS NULL)" or "(x IS NOT NULL)".
 */
static void
deparse_null_test(NullTest *nt, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;

	appendStringInfoChar(buf, '(');
	afdw_deparse_expr(nt->arg, cxt);
	appendStringInfoString(buf, nt->nulltesttype == IS_NULL ?
						   " IS NULL)" : " IS NOT NULL)");
}

/*
 * deparse_boolean_test
 *		Append "(x IS TRUE)", "(x IS NOT FALSE)", "(x IS UNKNOWN)" ...
 */
static void
deparse_boolean_test(BooleanTest *bt, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	static const char *const tests[] = {
		[IS_TRUE] = " IS TRUE)",
		[IS_NOT_TRUE] = " IS NOT TRUE)",
		[IS_FALSE] = " IS FALSE)",
		[IS_NOT_FALSE] = " IS NOT FALSE)",
		[IS_UNKNOWN] = " IS UNKNOWN)",
		[IS_NOT_UNKNOWN] = " IS NOT UNKNOWN)"
	};

	appendStringInfoChar(buf, '(');
	afdw_deparse_expr(bt->arg, cxt);
	appendStringInfoString(buf, tests[bt->booltesttype]);
}

/*
 * deparse_relabel
 *		Append a relabelling: nothing when implicit, else a cast.
 */
static void
deparse_relabel(RelabelType *r, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;

	if (r->relabelformat == COERCE_IMPLICIT_CAST)
		afdw_deparse_expr(r->arg, cxt);
	else
	{
		appendStringInfoChar(buf, '(');
		afdw_deparse_expr(r->arg, cxt);
		appendStringInfoString(buf, ")::");
		append_type_name(buf, r->resulttype, r->resulttypmod);
	}
}

/*
 * deparse_array_expr
 *		Append ARRAY[...] with its type.
 */
static void
deparse_array_expr(ArrayExpr *a, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	ListCell   *lc;
	bool		first = true;

	appendStringInfoString(buf, "ARRAY[");
	foreach(lc, a->elements)
	{
		if (!first)
			appendStringInfoString(buf, ", ");
		first = false;
		afdw_deparse_expr(lfirst(lc), cxt);
	}
	appendStringInfoString(buf, "]::");
	append_type_name(buf, a->array_typeid, -1);
}

/*
 * deparse_case_expr
 *		Append a CASE expression, searched or simple.
 */
static void
deparse_case_expr(CaseExpr *ce, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	ListCell   *lc;

	appendStringInfoString(buf, "(CASE");
	if (ce->arg != NULL)
	{
		appendStringInfoChar(buf, ' ');
		afdw_deparse_expr(ce->arg, cxt);
	}
	foreach(lc, ce->args)
	{
		CaseWhen   *cw = lfirst_node(CaseWhen, lc);

		appendStringInfoString(buf, " WHEN ");
		/* A simple CASE writes only the value compared. */
		afdw_deparse_expr(ce->arg != NULL ?
						  afdw_case_when_value(cw) : cw->expr, cxt);
		appendStringInfoString(buf, " THEN ");
		afdw_deparse_expr(cw->result, cxt);
	}
	if (ce->defresult != NULL)
	{
		appendStringInfoString(buf, " ELSE ");
		afdw_deparse_expr(ce->defresult, cxt);
	}
	appendStringInfoString(buf, " END)");
}

/*
 * deparse_subscripting_ref
 *		Append an element or a slice of a container (an array, say).
 */
static void
deparse_subscripting_ref(SubscriptingRef *sr, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	ListCell   *lu;
	ListCell   *ll = NULL;

	/* (container)[i] or, for a slice, (container)[l:u]. */
	appendStringInfoString(buf, "((");
	afdw_deparse_expr(sr->refexpr, cxt);
	appendStringInfoChar(buf, ')');
	if (sr->reflowerindexpr != NIL)
		ll = list_head(sr->reflowerindexpr);
	foreach(lu, sr->refupperindexpr)
	{
		appendStringInfoChar(buf, '[');
		if (ll != NULL)
		{
			if (lfirst(ll) != NULL)
				afdw_deparse_expr(lfirst(ll), cxt);
			appendStringInfoChar(buf, ':');
			ll = lnext(sr->reflowerindexpr, ll);
		}
		if (lfirst(lu) != NULL)
			afdw_deparse_expr(lfirst(lu), cxt);
		appendStringInfoChar(buf, ']');
	}
	appendStringInfoChar(buf, ')');
}

/*
 * afdw_deparse_expr
 *		Append NODE, which ship_walker accepted, as remote SQL.
 */
void
afdw_deparse_expr(Expr *node, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	int			column;

	/* Above the subquery of a grouped query: its column g.c<k>. */
	if (cxt->computed != NIL &&
		(column = computed_column((Node *) node, cxt)) > 0)
	{
		appendStringInfo(buf, "g.c%d", column);
		return;
	}

	switch (nodeTag(node))
	{
		case T_Var:
			deparse_var((Var *) node, cxt);
			break;

		case T_Const:
			deparse_const((Const *) node, cxt, false);
			break;

		case T_Param:
			deparse_param(node, cxt);
			break;

		case T_OpExpr:
			deparse_opexpr((OpExpr *) node, cxt, false);
			break;

		case T_DistinctExpr:
			deparse_opexpr((OpExpr *) node, cxt, true);
			break;

		case T_ScalarArrayOpExpr:
			deparse_scalar_array_op((ScalarArrayOpExpr *) node, cxt);
			break;

		case T_FuncExpr:
			deparse_funcexpr((FuncExpr *) node, cxt);
			break;

		case T_BoolExpr:
			deparse_bool_expr((BoolExpr *) node, cxt);
			break;

		case T_NullTest:
			deparse_null_test((NullTest *) node, cxt);
			break;

		case T_BooleanTest:
			deparse_boolean_test((BooleanTest *) node, cxt);
			break;

		case T_RelabelType:
			deparse_relabel((RelabelType *) node, cxt);
			break;

		case T_ArrayExpr:
			deparse_array_expr((ArrayExpr *) node, cxt);
			break;

		case T_CaseExpr:
			deparse_case_expr((CaseExpr *) node, cxt);
			break;

		case T_SubscriptingRef:
			deparse_subscripting_ref((SubscriptingRef *) node, cxt);
			break;

		case T_Aggref:
			deparse_aggref((Aggref *) node, cxt);
			break;

		case T_SubPlan:
		case T_AlternativeSubPlan:
			deparse_subplan((Node *) node, cxt);
			break;

		default:
			elog(ERROR, "unsupported expression type for deparse: %d",
				 (int) nodeTag(node));
	}
}

