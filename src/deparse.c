/*-------------------------------------------------------------------------
 *
 * deparse.c
 *		Remote SQL of async_fdw.
 *
 * The SELECT of a scan with the conditions that shippable.c let through,
 * its locking clause, the constants and parameters in a form the remote
 * server reads alike whatever its settings.
 *
 * The planner (async_fdw.c) builds the SELECT here; request.c binds parameters into it, wraps it in a binary COPY and
 * asks for the remote type check with the helpers below, and analyze.c
 * gets its sampling query.
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
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/prep.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "async_fdw.h"

/* State of deparsing one expression. */
typedef struct DeparseContext
{
	StringInfo	buf;
	RelOptInfo *baserel;
	Relation	rel;
	bool		partial;		/* aggregates give their transition states */
	List	  **params;			/* expressions sent as $1, $2, ... */
	int			guc_level;		/* transmission modes' GUC level, or -1
								 * before a constant needed them */
} DeparseContext;

static void deparse_expr(Expr *node, DeparseContext *cxt);
static void append_literal(StringInfo buf, const char *val);
static void deparse_aggref(Aggref *agg, DeparseContext *cxt);
static void append_function_name(StringInfo buf, Oid funcid);

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
 * remote_column_name
 *		The remote name of column ATTNUM of REL: its column_name option, or
 *		its local name.
 */
static const char *
remote_column_name(Relation rel, AttrNumber attnum)
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
 * afdw_deparse_order_by
 *		Append to BUF, the remote SELECT of BASEREL (REL), the ORDER BY of
 *		PATHKEYS, each of which afdw_sort_key accepts; return the same order
 *		for the wrapper of a binary stream (afdw_deparse_binary_select), by
 *		position among RETRIEVED_ATTRS, palloc'd.
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
		AttrNumber	attno = afdw_sort_key(baserel, pk, &descending, &nulls_first);
		const char *how;
		int			pos;

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
		how = descending ? (nulls_first ? " DESC" : " DESC NULLS LAST") :
			(nulls_first ? " ASC NULLS FIRST" : " ASC");
		appendStringInfoString(buf, first ? " ORDER BY " : ", ");
		appendStringInfoString(buf, quote_identifier(remote_column_name(rel, attno)));
		appendStringInfoString(buf, how);
		appendStringInfo(&outer, "%ss.c%d%s", first ? " ORDER BY " : ", ",
						 pos + 1, how);
		first = false;
	}
	return outer.data;
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
						 quote_literal_cstr(remote_column_name(rel, i + 1)),
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
		appendStringInfoString(buf, quote_identifier(remote_column_name(rel, i)));
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
afdw_deparse_select(StringInfo buf, RelOptInfo *baserel,
					Relation rel, Bitmapset *attrs_used, List *remote_conds,
					List **retrieved_attrs, List **params)
{
	DeparseContext cxt;
	ListCell   *lc;
	bool		first = true;

	appendStringInfoString(buf, "SELECT ");
	deparse_target_list(buf, rel, attrs_used, retrieved_attrs);
	appendStringInfoString(buf, " FROM ");
	afdw_deparse_relation(buf, rel);

	cxt.buf = buf;
	cxt.baserel = baserel;
	cxt.rel = rel;
	cxt.partial = false;
	cxt.params = params;
	cxt.guc_level = -1;

	foreach(lc, remote_conds)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		appendStringInfoString(buf, first ? " WHERE " : " AND ");
		first = false;
		appendStringInfoChar(buf, '(');
		deparse_expr(ri->clause, &cxt);
		appendStringInfoChar(buf, ')');
	}
	if (cxt.guc_level >= 0)
		afdw_reset_transmission_modes(cxt.guc_level);
}

/*
 * afdw_deparse_grouped_select
 *		The remote SELECT of an aggregate over a scan of BASEREL (REL): the
 *		expressions of TLIST (TargetEntries, their aggregates computed whole
 *		or, when PARTIAL, as transition states) over the rows that pass
 *		REMOTE_CONDS (RestrictInfos), grouped by the TLIST items at the
 *		1-based positions GROUP_POSITIONS, and the groups kept by HAVING
 *		(expressions).  *PARAMS gets the expressions sent as $1, $2, ...
 */
void
afdw_deparse_grouped_select(StringInfo buf, RelOptInfo *baserel, Relation rel,
							List *tlist, List *remote_conds,
							List *group_positions, List *having, bool partial,
							List **params)
{
	DeparseContext cxt;
	ListCell   *lc;
	bool		first = true;

	cxt.buf = buf;
	cxt.baserel = baserel;
	cxt.rel = rel;
	cxt.partial = partial;
	cxt.params = params;
	cxt.guc_level = -1;

	appendStringInfoString(buf, "SELECT ");
	foreach(lc, tlist)
	{
		if (!first)
			appendStringInfoString(buf, ", ");
		first = false;
		deparse_expr(lfirst_node(TargetEntry, lc)->expr, &cxt);
	}
	appendStringInfoString(buf, " FROM ");
	afdw_deparse_relation(buf, rel);

	first = true;
	foreach(lc, remote_conds)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		appendStringInfoString(buf, first ? " WHERE " : " AND ");
		first = false;
		appendStringInfoChar(buf, '(');
		deparse_expr(ri->clause, &cxt);
		appendStringInfoChar(buf, ')');
	}

	/* By position: a constant's position is not the constant. */
	first = true;
	foreach(lc, group_positions)
	{
		appendStringInfo(buf, "%s%d", first ? " GROUP BY " : ", ", lfirst_int(lc));
		first = false;
	}

	first = true;
	foreach(lc, having)
	{
		appendStringInfoString(buf, first ? " HAVING " : " AND ");
		first = false;
		appendStringInfoChar(buf, '(');
		deparse_expr((Expr *) lfirst(lc), &cxt);
		appendStringInfoChar(buf, ')');
	}
	if (cxt.guc_level >= 0)
		afdw_reset_transmission_modes(cxt.guc_level);
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
 * append_literal
 *		Append VAL as a quoted string literal, whatever
 *		standard_conforming_strings says remotely.
 */
static void
append_literal(StringInfo buf, const char *val)
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
				append_literal(buf, values[n - 1]);
			p = end;
			continue;
		}
		appendStringInfoChar(buf, *p++);
	}
}

/*
 * output_ignores_settings
 *		True for the types whose text form no setting changes, so that
 *		printing their constants needs no afdw_set_transmission_modes.
 */
static bool
output_ignores_settings(Oid type)
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
	if (cxt->guc_level < 0 && !output_ignores_settings(c->consttype))
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
				append_literal(buf, val);
			break;

		case BOOLOID:
			appendStringInfoString(buf, strcmp(val, "t") == 0 ? "true" : "false");
			cast = false;
			break;

		default:
			append_literal(buf, val);
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
 *		relation's column), registering it in *params.
 */
static void
deparse_param(Expr *expr, DeparseContext *cxt)
{
	int			n = 0;
	ListCell   *lc;
	bool		found = false;

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
	return IsA(expr, Var) &&
		((Var *) expr)->varno == (int) cxt->baserel->relid &&
		((Var *) expr)->varlevelsup == 0;
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
			deparse_expr(linitial(op->args), cxt);
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
		deparse_expr(llast(op->args), cxt);
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
		deparse_expr(linitial(f->args), cxt);
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
		deparse_expr(lfirst(lc), cxt);
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
 *		with AGG's arguments, DISTINCT, ORDER BY and FILTER.
 */
static void
deparse_agg_call(Aggref *agg, const char *name, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;
	ListCell   *lc;
	bool		first = true;

	if (name != NULL)
		appendStringInfoString(buf, name);
	else
		append_function_name(buf, agg->aggfnoid);
	appendStringInfoChar(buf, '(');
	if (agg->aggdistinct != NIL)
		appendStringInfoString(buf, "DISTINCT ");
	if (agg->aggstar)
		appendStringInfoChar(buf, '*');
	foreach(lc, agg->args)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		/* ORDER BY items that are not arguments. */
		if (tle->resjunk)
			continue;
		if (!first)
			appendStringInfoString(buf, ", ");
		if (agg->aggvariadic && lnext(agg->args, lc) == NULL)
			appendStringInfoString(buf, "VARIADIC ");
		first = false;
		deparse_expr(tle->expr, cxt);
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

		appendStringInfoString(buf, first ? " ORDER BY " : ", ");
		first = false;
		deparse_expr(tle->expr, cxt);
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
		deparse_expr(agg->aggfilter, cxt);
		appendStringInfoChar(buf, ')');
	}
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
				StringInfoData sum;
				DeparseContext sub = *cxt;

				initStringInfo(&sum);
				sub.buf = &sum;
				appendStringInfoString(&sum, "numeric_send(COALESCE(");
				deparse_agg_call(agg, "sum", &sub);
				appendStringInfoString(&sum, ", 0))");
				cxt->guc_level = sub.guc_level;

				appendStringInfoString(buf, "(int8send(");
				deparse_agg_call(agg, "count", cxt);
				appendStringInfoChar(buf, ')');
				for (int field = 0; field < 4; field++)
					appendStringInfo(buf, " || decode('0000', 'hex') || substr(%s, %d, 2)",
									 sum.data, 2 * field + 1);
				appendStringInfo(buf, " || substr(%s, 9))", sum.data);
				pfree(sum.data);
				break;
			}
		case AFDW_PARTIAL_NONE:
			elog(ERROR, "aggregate %u has no partial form", agg->aggfnoid);
	}
}

/*
 * deparse_expr
 *		Append NODE, which ship_walker accepted, as remote SQL.
 */
static void
deparse_expr(Expr *node, DeparseContext *cxt)
{
	StringInfo	buf = cxt->buf;

	switch (nodeTag(node))
	{
		case T_Var:
			{
				Var		   *var = (Var *) node;

				if (var->varno == (int) cxt->baserel->relid &&
					var->varattno == SelfItemPointerAttributeNumber)
					appendStringInfoString(buf, "ctid");
				else if (var->varno == (int) cxt->baserel->relid)
					appendStringInfoString(buf,
										   quote_identifier(remote_column_name(cxt->rel,
																			   var->varattno)));
				else
					deparse_param(node, cxt);
				break;
			}

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
			{
				ScalarArrayOpExpr *op = (ScalarArrayOpExpr *) node;
				char		kind;

				appendStringInfoChar(buf, '(');
				deparse_expr(linitial(op->args), cxt);
				appendStringInfoChar(buf, ' ');
				deparse_operator_name(op->opno, cxt, &kind);
				appendStringInfoString(buf, op->useOr ? " ANY (" : " ALL (");
				deparse_expr(lsecond(op->args), cxt);
				appendStringInfoString(buf, "))");
				break;
			}

		case T_FuncExpr:
			deparse_funcexpr((FuncExpr *) node, cxt);
			break;

		case T_BoolExpr:
			{
				BoolExpr   *b = (BoolExpr *) node;
				ListCell   *lc;
				bool		first = true;

				if (b->boolop == NOT_EXPR)
				{
					appendStringInfoString(buf, "(NOT ");
					deparse_expr(linitial(b->args), cxt);
					appendStringInfoChar(buf, ')');
					break;
				}
				appendStringInfoChar(buf, '(');
				foreach(lc, b->args)
				{
					if (!first)
						appendStringInfoString(buf, b->boolop == AND_EXPR ?
											   " AND " : " OR ");
					first = false;
					deparse_expr(lfirst(lc), cxt);
				}
				appendStringInfoChar(buf, ')');
				break;
			}

		case T_NullTest:
			{
				NullTest   *nt = (NullTest *) node;

				appendStringInfoChar(buf, '(');
				deparse_expr(nt->arg, cxt);
				appendStringInfoString(buf, nt->nulltesttype == IS_NULL ?
									   " IS NULL)" : " IS NOT NULL)");
				break;
			}

		case T_BooleanTest:
			{
				BooleanTest *bt = (BooleanTest *) node;
				static const char *const tests[] = {
					[IS_TRUE] = " IS TRUE)",
					[IS_NOT_TRUE] = " IS NOT TRUE)",
					[IS_FALSE] = " IS FALSE)",
					[IS_NOT_FALSE] = " IS NOT FALSE)",
					[IS_UNKNOWN] = " IS UNKNOWN)",
					[IS_NOT_UNKNOWN] = " IS NOT UNKNOWN)"
				};

				appendStringInfoChar(buf, '(');
				deparse_expr(bt->arg, cxt);
				appendStringInfoString(buf, tests[bt->booltesttype]);
				break;
			}

		case T_RelabelType:
			{
				RelabelType *r = (RelabelType *) node;

				if (r->relabelformat == COERCE_IMPLICIT_CAST)
					deparse_expr(r->arg, cxt);
				else
				{
					appendStringInfoChar(buf, '(');
					deparse_expr(r->arg, cxt);
					appendStringInfoString(buf, ")::");
					append_type_name(buf, r->resulttype, r->resulttypmod);
				}
				break;
			}

		case T_ArrayExpr:
			{
				ArrayExpr  *a = (ArrayExpr *) node;
				ListCell   *lc;
				bool		first = true;

				appendStringInfoString(buf, "ARRAY[");
				foreach(lc, a->elements)
				{
					if (!first)
						appendStringInfoString(buf, ", ");
					first = false;
					deparse_expr(lfirst(lc), cxt);
				}
				appendStringInfoString(buf, "]::");
				append_type_name(buf, a->array_typeid, -1);
				break;
			}

		case T_Aggref:
			deparse_aggref((Aggref *) node, cxt);
			break;

		default:
			elog(ERROR, "unsupported expression type for deparse: %d",
				 (int) nodeTag(node));
	}
}
