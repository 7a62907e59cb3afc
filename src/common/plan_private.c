/*-------------------------------------------------------------------------
 *
 * plan_private.c
 *		The private list of a ForeignScan plan: what the planner hands the
 *		execution.
 *
 * The planner (scan_paths.c, join_paths.c, aggregate_paths.c, order_limit.c)
 * writes it, the execution (scan.c, explain.c) reads it, through the functions
 * here only.  A List, so that copyObject copies plans.  Bottom layer: calls
 * nothing of the project.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"

#include "async_fdw.h"

/*
 * Indexes of the items of ForeignScan->fdw_private.  It is a List so that
 * copyObject can copy plans.
 */
enum AfdwScanPrivate
{
	AFDW_PRIVATE_SQL,			/* String: the remote SELECT */
	AFDW_PRIVATE_RETRIEVED,		/* List of Integer: local column numbers */
	AFDW_PRIVATE_FETCH_SIZE,	/* Integer: rows per FETCH */
	AFDW_PRIVATE_STREAM,		/* Boolean: stream with COPY */
	AFDW_PRIVATE_OUTER_ORDER,	/* String: ORDER BY of a binary stream's
								 * wrapper ("" for none) */
	AFDW_PRIVATE_RELATIONS,		/* String: what a remote join or aggregate
								 * reads, for EXPLAIN ("" for a scan) */
	AFDW_PRIVATE_WHEN_READ,		/* Boolean: prepared only when read: a scan
								 * of the local join plan of a remote join,
								 * run only to recheck a row
								 * (afdw_mark_recheck_only), or of an
								 * initplan whose value nothing reads
								 * (afdw_mark_when_read) */
	AFDW_PRIVATE_OWN_LIMIT,		/* Integer: when the remote SELECT has the
								 * query's LIMIT (order_limit.c,
								 * afdw_add_final_path), the most rows it
								 * returns, or -1 when not known; else
								 * NO_OWN_LIMIT */
	AFDW_PRIVATE_KEY_AT,		/* Integer: where in the SQL conditions on
								 * keys may go (after the WHERE clause), or
								 * -1: nowhere */
	AFDW_PRIVATE_KEY_WHERE,		/* Boolean: the SQL has a WHERE clause */
	AFDW_PRIVATE_KEY_SLOTS,		/* List of Lists: the columns that may take
								 * keys (see afdw_set_key_slots) */
	AFDW_PRIVATE_KEY_USES		/* List of Lists: the keys the scan takes,
								 * from which collector (afdw_add_key_use) */
};

/* AFDW_PRIVATE_OWN_LIMIT of a SELECT without the query's LIMIT. */
#define NO_OWN_LIMIT	PG_INT32_MIN

/* Items of one of AFDW_PRIVATE_KEY_SLOTS' Lists. */
enum AfdwKeySlot
{
	KEY_SLOT_ATTNO,				/* Integer: the column */
	KEY_SLOT_OPERATOR,			/* Integer: the Oid of its equality operator */
	KEY_SLOT_COLLATION,			/* Integer: the Oid of the comparison's
								 * collation */
	KEY_SLOT_BEFORE,			/* String: the condition's text before the
								 * number of its parameter... */
	KEY_SLOT_AFTER				/* String: ... and after it */
};

/* Items of one of AFDW_PRIVATE_KEY_USES' Lists. */
enum AfdwKeyUse
{
	KEY_USE_COLLECTOR,			/* Integer: the collector's plan_node_id */
	KEY_USE_COLUMN,				/* Integer: which of its columns */
	KEY_USE_SLOT				/* Integer: which of AFDW_PRIVATE_KEY_SLOTS */
};

/*
 * afdw_make_scan_private
 *		The fdw_private list of a ForeignScan (see AfdwScanPrivate).
 */
List *
afdw_make_scan_private(const char *sql, List *retrieved_attrs, int fetch_size,
					   bool stream, const char *outer_order,
					   const char *relations)
{
	List	   *private = list_make5(makeString(pstrdup(sql)), retrieved_attrs,
									 makeInteger(fetch_size), makeBoolean(stream),
									 makeString(pstrdup(outer_order)));

	private = lappend(private, makeString(pstrdup(relations)));
	private = lappend(private, makeBoolean(false));
	private = lappend(private, makeInteger(NO_OWN_LIMIT));
	private = lappend(private, makeInteger(-1));
	private = lappend(private, makeBoolean(false));
	private = lappend(private, NIL);
	return lappend(private, NIL);
}

/*
 * afdw_mark_own_limit
 *		Note in SCAN's fdw_private that its remote SELECT ends with the
 *		LIMIT and OFFSET of ROOT's query, and how many rows that lets it
 *		return at most, when both are constants: no other LIMIT may be
 *		appended to it (a prepared statement's, scan_commands.c).
 */
void
afdw_mark_own_limit(PlannerInfo *root, ForeignScan *scan)
{
	Const	   *count = (Const *) root->parse->limitCount;
	Const	   *offset = (Const *) root->parse->limitOffset;
	int64		bound = -1;

	if (count != NULL && IsA(count, Const) && !count->constisnull &&
		(offset == NULL || IsA(offset, Const)))
	{
		bound = DatumGetInt64(count->constvalue);
		if (offset != NULL && !offset->constisnull)
			bound += DatumGetInt64(offset->constvalue);
	}
	afdw_mark_limit_bound(scan, bound);
}

/*
 * afdw_mark_limit_bound
 *		Note in SCAN's fdw_private that its remote SELECT ends with a LIMIT
 *		that lets it return at most BOUND rows (-1: not known), so that no
 *		other LIMIT is appended to it.
 */
void
afdw_mark_limit_bound(ForeignScan *scan, int64 bound)
{
	if (bound < 0 || bound > PG_INT32_MAX)
		bound = -1;
	list_nth_cell(scan->fdw_private, AFDW_PRIVATE_OWN_LIMIT)->ptr_value =
		makeInteger((int) bound);
}

/*
 * afdw_scan_own_limit
 *		True if the remote SELECT of PLAN ends with the query's LIMIT; then
 *		*BOUND is the most rows it returns, or -1 when not known.
 */
bool
afdw_scan_own_limit(ForeignScan *plan, int *bound)
{
	*bound = intVal(list_nth(plan->fdw_private, AFDW_PRIVATE_OWN_LIMIT));
	return *bound != NO_OWN_LIMIT;
}

/*
 * afdw_make_scan_distinct
 *		Have PLAN's remote SELECT return its rows without repeats (SELECT
 *		DISTINCT), the place where keys are written moving with the text;
 *		false, and nothing changed, when it is not a plain SELECT, is one
 *		already, or ends with an ORDER BY, a LIMIT or a row lock (which
 *		DISTINCT would change or refuse).
 */
bool
afdw_make_scan_distinct(ForeignScan *plan)
{
	static const char select[] = "SELECT ";
	static const char distinct[] = "DISTINCT ";
	ListCell   *sql_cell = list_nth_cell(plan->fdw_private, AFDW_PRIVATE_SQL);
	const char *sql = strVal(lfirst(sql_cell));
	int			bound;

	if (strncmp(sql, select, strlen(select)) != 0 ||
		strncmp(sql + strlen(select), distinct, strlen(distinct)) == 0 ||
		strVal(list_nth(plan->fdw_private, AFDW_PRIVATE_OUTER_ORDER))[0] != '\0' ||
		afdw_scan_own_limit(plan, &bound) ||
		strstr(sql, " ORDER BY ") != NULL || strstr(sql, " LIMIT ") != NULL ||
		strstr(sql, " FOR UPDATE") != NULL || strstr(sql, " FOR SHARE") != NULL ||
		strstr(sql, " FOR NO KEY UPDATE") != NULL ||
		strstr(sql, " FOR KEY SHARE") != NULL)
		return false;
	lfirst(sql_cell) = makeString(psprintf("%s%s%s", select, distinct,
										   sql + strlen(select)));
	if (list_length(plan->fdw_private) > AFDW_PRIVATE_KEY_AT)
	{
		ListCell   *at = list_nth_cell(plan->fdw_private, AFDW_PRIVATE_KEY_AT);

		if (intVal(lfirst(at)) >= 0)
			lfirst(at) = makeInteger(intVal(lfirst(at)) + (int) strlen(distinct));
	}
	return true;
}

/*
 * afdw_scan_relations
 *		What the remote join or aggregate of PLAN reads, as EXPLAIN shows
 *		it; NULL for a scan of one table.
 */
const char *
afdw_scan_relations(ForeignScan *plan)
{
	const char *relations = strVal(list_nth(plan->fdw_private,
											AFDW_PRIVATE_RELATIONS));

	return relations[0] == '\0' ? NULL : relations;
}

/*
 * afdw_scan_private
 *		The remote SQL, column list, fetch size and fetch mode of a
 *		ForeignScan plan, and the ORDER BY of a binary stream's wrapper
 *		(NULL for none).
 */
void
afdw_scan_private(ForeignScan *plan, char **sql, List **retrieved_attrs,
				  int *fetch_size, bool *stream, char **outer_order)
{
	*sql = strVal(list_nth(plan->fdw_private, AFDW_PRIVATE_SQL));
	*retrieved_attrs = (List *) list_nth(plan->fdw_private, AFDW_PRIVATE_RETRIEVED);
	*fetch_size = intVal(list_nth(plan->fdw_private, AFDW_PRIVATE_FETCH_SIZE));
	*stream = boolVal(list_nth(plan->fdw_private, AFDW_PRIVATE_STREAM));
	*outer_order = strVal(list_nth(plan->fdw_private, AFDW_PRIVATE_OUTER_ORDER));
	if ((*outer_order)[0] == '\0')
		*outer_order = NULL;
}

/*
 * afdw_scan_sql
 *		The remote SQL of a ForeignScan plan, for a caller that needs
 *		nothing else of it (a subquery written into another scan's query).
 */
const char *
afdw_scan_sql(ForeignScan *plan)
{
	return strVal(list_nth(plan->fdw_private, AFDW_PRIVATE_SQL));
}

/*
 * afdw_scan_retrieved
 *		The remote columns a ForeignScan plan fetches (attribute numbers of
 *		its table, or positions in its scan tuple).
 */
List *
afdw_scan_retrieved(ForeignScan *plan)
{
	return (List *) list_nth(plan->fdw_private, AFDW_PRIVATE_RETRIEVED);
}

/*
 * afdw_mark_recheck_only
 *		Mark every scan of async_fdw in PLAN, the local join plan that a
 *		remote join runs to recheck a row (EvalPlanQual), as run only then:
 *		its remote query is not sent with those of the statement's other
 *		scans (scan.c).
 *
 * The plan joins foreign tables of the remote join, whose scans are all
 * async_fdw's; in a recheck each returns the row under test, never
 * fetching.  Sent with the others, a scan under FOR UPDATE would lock
 * every row of its table.
 */
void
afdw_mark_recheck_only(Plan *plan)
{
	ListCell   *lc;

	check_stack_depth();
	if (plan == NULL)
		return;
	if (IsA(plan, ForeignScan) && ((ForeignScan *) plan)->scan.scanrelid > 0 &&
		list_length(((ForeignScan *) plan)->fdw_private) > AFDW_PRIVATE_WHEN_READ)
		list_nth_cell(((ForeignScan *) plan)->fdw_private,
					  AFDW_PRIVATE_WHEN_READ)->ptr_value = makeBoolean(true);
	if (IsA(plan, Append))
	{
		foreach(lc, ((Append *) plan)->appendplans)
			afdw_mark_recheck_only(lfirst(lc));
	}
	else if (IsA(plan, MergeAppend))
	{
		foreach(lc, ((MergeAppend *) plan)->mergeplans)
			afdw_mark_recheck_only(lfirst(lc));
	}
	afdw_mark_recheck_only(plan->lefttree);
	afdw_mark_recheck_only(plan->righttree);
}

/*
 * afdw_mark_when_read
 *		Mark SCAN, an async_fdw scan, as prepared only when read: its remote
 *		query is not sent with those of the statement's other scans
 *		(scan.c).  For the scans of an initplan whose value nothing in the
 *		plan reads (initplans.c): written into remote queries instead.
 */
void
afdw_mark_when_read(ForeignScan *scan)
{
	if (list_length(scan->fdw_private) > AFDW_PRIVATE_WHEN_READ)
		list_nth_cell(scan->fdw_private,
					  AFDW_PRIVATE_WHEN_READ)->ptr_value = makeBoolean(true);
}

/*
 * afdw_scan_when_read
 *		Whether PLAN is a scan prepared only when read: one that runs only
 *		to recheck a row of a remote join (afdw_mark_recheck_only), or one
 *		of an initplan whose value nothing reads (afdw_mark_when_read).
 */
bool
afdw_scan_when_read(ForeignScan *plan)
{
	return list_length(plan->fdw_private) > AFDW_PRIVATE_WHEN_READ &&
		boolVal(list_nth(plan->fdw_private, AFDW_PRIVATE_WHEN_READ));
}

/*
 * afdw_set_key_slots
 *		Note in SCAN's fdw_private the columns whose keys its remote SELECT
 *		may take at run time (hash_join_keys.c): each of SLOTS is made by
 *		afdw_make_key_slot; the conditions go at offset AT of the SQL,
 *		which has a WHERE clause if WHERE.
 */
void
afdw_set_key_slots(ForeignScan *scan, int at, bool where, List *slots)
{
	list_nth_cell(scan->fdw_private, AFDW_PRIVATE_KEY_AT)->ptr_value = makeInteger(at);
	list_nth_cell(scan->fdw_private, AFDW_PRIVATE_KEY_WHERE)->ptr_value =
		makeBoolean(where);
	list_nth_cell(scan->fdw_private, AFDW_PRIVATE_KEY_SLOTS)->ptr_value = slots;
}

/*
 * afdw_make_key_slot
 *		A column that may take keys: column ATTNO compared by operator OPNO
 *		under COLLATION with the array of keys, a condition whose text is
 *		BEFORE, the parameter's number, then AFTER.
 */
List *
afdw_make_key_slot(AttrNumber attno, Oid opno, Oid collation,
				   const char *before, const char *after)
{
	return list_make5(makeInteger(attno), makeInteger((int) opno),
					  makeInteger((int) collation), makeString(pstrdup(before)),
					  makeString(pstrdup(after)));
}

/*
 * afdw_scan_key_slots
 *		How many columns of PLAN, a scan of a foreign table of async_fdw or
 *		a remote aggregate over one, may take keys.
 */
int
afdw_scan_key_slots(ForeignScan *plan)
{
	if (plan->operation != CMD_SELECT ||
		list_length(plan->fdw_private) <= AFDW_PRIVATE_KEY_USES)
		return 0;
	return list_length((List *) list_nth(plan->fdw_private, AFDW_PRIVATE_KEY_SLOTS));
}

/*
 * afdw_scan_key_slot
 *		The column, equality operator and collation of PLAN's key slot I.
 */
void
afdw_scan_key_slot(ForeignScan *plan, int i, AttrNumber *attno, Oid *opno,
				   Oid *collation)
{
	List	   *slot = list_nth(list_nth(plan->fdw_private, AFDW_PRIVATE_KEY_SLOTS), i);

	*attno = (AttrNumber) intVal(list_nth(slot, KEY_SLOT_ATTNO));
	*opno = (Oid) intVal(list_nth(slot, KEY_SLOT_OPERATOR));
	*collation = (Oid) intVal(list_nth(slot, KEY_SLOT_COLLATION));
}

/*
 * afdw_add_key_use
 *		Note in PLAN's fdw_private that its key slot SLOT takes the keys of
 *		column COLUMN of the key collector whose plan_node_id is COLLECTOR.
 */
void
afdw_add_key_use(ForeignScan *plan, int collector, int column, int slot)
{
	ListCell   *cell = list_nth_cell(plan->fdw_private, AFDW_PRIVATE_KEY_USES);

	cell->ptr_value = lappend((List *) lfirst(cell),
							  list_make3(makeInteger(collector), makeInteger(column),
										 makeInteger(slot)));
}

/*
 * afdw_scan_key_uses
 *		How many arrays of keys PLAN's remote SELECT takes.
 */
int
afdw_scan_key_uses(ForeignScan *plan)
{
	if (plan->operation != CMD_SELECT ||
		list_length(plan->fdw_private) <= AFDW_PRIVATE_KEY_USES)
		return 0;
	return list_length((List *) list_nth(plan->fdw_private, AFDW_PRIVATE_KEY_USES));
}

/*
 * afdw_scan_key_use
 *		The collector (its plan_node_id) and column whose keys PLAN's use I
 *		takes.
 */
void
afdw_scan_key_use(ForeignScan *plan, int i, int *collector, int *column)
{
	List	   *use = list_nth(list_nth(plan->fdw_private, AFDW_PRIVATE_KEY_USES), i);

	*collector = intVal(list_nth(use, KEY_USE_COLLECTOR));
	*column = intVal(list_nth(use, KEY_USE_COLUMN));
}

/*
 * afdw_keyed_sql
 *		PLAN's remote SELECT with the conditions of the key uses whose USED
 *		is true (all of them if USED is NULL), their arrays numbered from
 *		FIRST_PARAM on, in the order of the uses.
 */
char *
afdw_keyed_sql(ForeignScan *plan, const bool *used, int first_param)
{
	char	   *sql = strVal(list_nth(plan->fdw_private, AFDW_PRIVATE_SQL));
	int			at = intVal(list_nth(plan->fdw_private, AFDW_PRIVATE_KEY_AT));
	bool		where = boolVal(list_nth(plan->fdw_private, AFDW_PRIVATE_KEY_WHERE));
	List	   *slots = (List *) list_nth(plan->fdw_private, AFDW_PRIVATE_KEY_SLOTS);
	List	   *uses = (List *) list_nth(plan->fdw_private, AFDW_PRIVATE_KEY_USES);
	StringInfoData buf;
	ListCell   *lc;
	int			param = first_param;

	Assert(at >= 0 && at <= (int) strlen(sql));
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, sql, at);
	foreach(lc, uses)
	{
		List	   *slot = list_nth(slots, intVal(list_nth(lfirst(lc), KEY_USE_SLOT)));

		if (used != NULL && !used[foreach_current_index(lc)])
			continue;
		appendStringInfo(&buf, "%s(%s$%d%s)", where ? " AND " : " WHERE ",
						 strVal(list_nth(slot, KEY_SLOT_BEFORE)), param++,
						 strVal(list_nth(slot, KEY_SLOT_AFTER)));
		where = true;
	}
	appendStringInfoString(&buf, sql + at);
	return buf.data;
}
