/*-------------------------------------------------------------------------
 *
 * key_collector.c
 *		The key collector: a plan node under a hash join's Hash that passes
 *		the Hash's rows on and notes the distinct values of its join keys,
 *		for the scans of the join's outer side to send (hash_join_keys.c).
 *
 * The Hash reads its input through the collector, which keeps, for each
 * key column, the set of distinct values seen, until there are more than
 * afdw_key_array_limit of them, or they take more than
 * KEY_ARRAY_MAX_BYTES (the column then gives up: a wide key would make
 * a large parameter).  At the end of the input the sets become arrays.
 *
 * A scan of the outer side asks for the arrays before it sends its query
 * (afdw_collected_keys).  The hash join may read its outer side first (it
 * fetches one outer row before building the hash table when the outer
 * side is expected to start sooner), so the collector may have to read
 * its input to the end right then: it keeps the rows in a tuplestore,
 * spilling past work_mem, and hands them to the Hash when asked for them,
 * before reading any more of its input.  It gives up reading ahead past
 * ten times as many rows as the arrays may hold keys, and every column
 * has given up past that many keys; the scans then run their queries as
 * planned.
 *
 * A collector may also go over a hash join's outer side, for the scans
 * under its Hash (hash_join_keys.c): the same node, read by the join instead of
 * the Hash, and read ahead when the Hash's scan asks first.
 *
 * The collectors of a statement are found by their plan_node_id in a
 * list of the backend's, which each leaves at its end (or when its
 * query's memory goes, after an error).
 *
 * Execution layer: called from the planner (hash_join_keys.c, to make the
 * node), from scan.c (the keys) and from _PG_init.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"
#include "utils/tuplestore.h"

#include "async_fdw.h"

#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#endif

/*
 * The most bytes of keys (as stored, uncompressed) one key column gathers:
 * past them it gives up, as past afdw_key_array_limit keys.
 */
#define KEY_ARRAY_MAX_BYTES	(1024 * 1024)

struct KeyColumn;

/* One distinct key of a column, in its set. */
typedef struct KeyEntry
{
	Datum		key;
	uint32		hash;
	char		status;
} KeyEntry;

static inline uint32 key_hash(struct KeyColumn *col, Datum key);
static inline bool key_equal(struct KeyColumn *col, Datum a, Datum b);

#define SH_PREFIX			keyset
#define SH_ELEMENT_TYPE		KeyEntry
#define SH_KEY_TYPE			Datum
#define SH_KEY				key
#define SH_HASH_KEY(tb, k)	key_hash((struct KeyColumn *) (tb)->private_data, k)
#define SH_EQUAL(tb, a, b)	key_equal((struct KeyColumn *) (tb)->private_data, a, b)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a)	((a)->hash)
#define SH_SCOPE			static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* One key column of the Hash's input. */
typedef struct KeyColumn
{
	AttrNumber	attno;			/* its number in the rows */
	Oid			type;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Oid			collation;
	FmgrInfo	hash_fn;
	FmgrInfo	eq_fn;
	keyset_hash *set;			/* the distinct keys, NULL once given up */
	int			count;			/* how many */
	Size		bytes;			/* their size, uncompressed */
	Datum		array;			/* at the end of the input, the array */
} KeyColumn;

/* State of a key collector. */
typedef struct KeyCollector
{
	CustomScanState css;
	int			id;				/* the plan's plan_node_id */
	EState	   *estate;
	dlist_node	node;			/* in collectors */
	bool		listed;
	int			limit;			/* the most keys a column may have */
	int			ncolumns;
	KeyColumn  *columns;
	bool		complete;		/* the input was read to its end */
	bool		gave_up;		/* reading ahead went past the limit */
	Tuplestorestate *ahead;		/* rows read ahead, not yet handed on */
	TupleTableSlot *ahead_slot;
	TupleTableSlot *own_slot;	/* over a join's outer side: the rows passed
								 * on, copied (NULL under a Hash) */
	int64		rows_ahead;
	MemoryContext keys_cxt;		/* the keys and arrays */
	MemoryContextCallback cleanup;
} KeyCollector;

/* The collectors of the backend's running statements. */
static dlist_head collectors = DLIST_STATIC_INIT(collectors);

static Node *create_collector_state(CustomScan *cscan);
static void collector_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *collector_exec(CustomScanState *node);
static void collector_end(CustomScanState *node);
static void collector_rescan(CustomScanState *node);
static void collector_explain(CustomScanState *node, List *ancestors,
							  ExplainState *es);

static const CustomScanMethods collector_plan_methods = {
	.CustomName = "AsyncFdwKeys",
	.CreateCustomScanState = create_collector_state,
};

static const CustomExecMethods collector_exec_methods = {
	.CustomName = "AsyncFdwKeys",
	.BeginCustomScan = collector_begin,
	.ExecCustomScan = collector_exec,
	.EndCustomScan = collector_end,
	.ReScanCustomScan = collector_rescan,
	.ExplainCustomScan = collector_explain,
};

/*
 * key_hash
 *		The hash of KEY, a value of COL, by the hash join's hash function.
 */
static inline uint32
key_hash(KeyColumn *col, Datum key)
{
	return DatumGetUInt32(FunctionCall1Coll(&col->hash_fn, col->collation, key));
}

/*
 * key_equal
 *		Whether A and B, values of COL, are equal by the join's operator.
 */
static inline bool
key_equal(KeyColumn *col, Datum a, Datum b)
{
	return DatumGetBool(FunctionCall2Coll(&col->eq_fn, col->collation, a, b));
}

/*
 * afdw_collect_init
 *		Register the collector's plan methods, so that plans holding one can
 *		be read back from text (from _PG_init).
 */
void
afdw_collect_init(void)
{
	RegisterCustomScanMethods(&collector_plan_methods);
}

/*
 * afdw_make_key_collector
 *		A key collector over CHILD, a Hash's input or (OUTER) a hash join's
 *		outer side, whose rows it returns as they are (copied over an outer
 *		side); COLUMNS are Lists of three Integers: a key's column number
 *		in the rows, the Oid of the join's operator and of its collation.
 *		Past LIMIT distinct keys, a column gives up.  ID is its
 *		plan_node_id.
 */
CustomScan *
afdw_make_key_collector(Plan *child, List *columns, int limit, int id,
						bool outer)
{
	CustomScan *cs = makeNode(CustomScan);
	ListCell   *lc;
	AttrNumber	resno = 1;

	cs->scan.plan.startup_cost = child->startup_cost;
	cs->scan.plan.total_cost = child->total_cost;
	cs->scan.plan.plan_rows = child->plan_rows;
	cs->scan.plan.plan_width = child->plan_width;
	cs->scan.plan.parallel_aware = false;
	cs->scan.plan.parallel_safe = child->parallel_safe;
	cs->scan.plan.plan_node_id = id;
	cs->scan.plan.lefttree = child;
	cs->scan.plan.extParam = bms_copy(child->extParam);
	cs->scan.plan.allParam = bms_copy(child->allParam);

	/* The child's columns, as a Hash or a Material lists them. */
	foreach(lc, child->targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Var		   *var = makeVar(OUTER_VAR, tle->resno,
								  exprType((Node *) tle->expr),
								  exprTypmod((Node *) tle->expr),
								  exprCollation((Node *) tle->expr), 0);

		cs->scan.plan.targetlist =
			lappend(cs->scan.plan.targetlist,
					makeTargetEntry((Expr *) var, resno++, tle->resname, tle->resjunk));
	}
	cs->scan.scanrelid = 0;
	cs->flags = 0;
	cs->custom_private = list_make3(makeInteger(limit), columns, makeBoolean(outer));
	cs->methods = &collector_plan_methods;
	return cs;
}

/*
 * afdw_is_key_collector
 *		Whether PLAN is a key collector.
 */
bool
afdw_is_key_collector(Plan *plan)
{
	return IsA(plan, CustomScan) &&
		((CustomScan *) plan)->methods == &collector_plan_methods;
}

/*
 * create_collector_state
 *		The executor state of CSCAN, a key collector.
 */
static Node *
create_collector_state(CustomScan *cscan)
{
	KeyCollector *c = (KeyCollector *) newNode(sizeof(KeyCollector),
											   T_CustomScanState);

	c->css.methods = &collector_exec_methods;
	c->id = cscan->scan.plan.plan_node_id;
	return (Node *) c;
}

/*
 * forget_collector
 *		Take C out of the list of collectors.
 */
static void
forget_collector(void *arg)
{
	KeyCollector *c = (KeyCollector *) arg;

	if (c->listed)
		dlist_delete(&c->node);
	c->listed = false;
}

/*
 * new_sets
 *		Empty sets of keys for C's columns, in its keys' memory.
 */
static void
new_sets(KeyCollector *c)
{
	for (int i = 0; i < c->ncolumns; i++)
	{
		c->columns[i].set = keyset_create(c->keys_cxt, 64, &c->columns[i]);
		c->columns[i].count = 0;
		c->columns[i].bytes = 0;
		c->columns[i].array = (Datum) 0;
	}
}

/*
 * collector_begin
 *		Start the collector: its input, its key columns' functions, and its
 *		place in the list of collectors.
 */
static void
collector_begin(CustomScanState *node, EState *estate, int eflags)
{
	KeyCollector *c = (KeyCollector *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	PlanState  *child;
	ListCell   *lc;
	int			i = 0;

	child = ExecInitNode(outerPlan(cscan), estate, eflags);
	outerPlanState(node) = child;

	/* Rows come from the child's slots or from the read-ahead's. */
	node->ss.ps.resultopsset = true;
	node->ss.ps.resultopsfixed = false;
	c->ahead_slot = ExecInitExtraTupleSlot(estate, ExecGetResultType(child),
										   &TTSOpsMinimalTuple);

	/*
	 * A hash join keeps the outer row it read before building its hash
	 * table, while the scans under the Hash have the collector read ahead
	 * with the input's slots: the row must not be one of those.
	 */
	c->own_slot = NULL;
	if (list_length(cscan->custom_private) > 2 &&
		boolVal(lthird(cscan->custom_private)))
		c->own_slot = ExecInitExtraTupleSlot(estate, ExecGetResultType(child),
											 &TTSOpsMinimalTuple);

	c->estate = estate;
	c->keys_cxt = AllocSetContextCreate(estate->es_query_cxt, "async_fdw keys",
										ALLOCSET_DEFAULT_SIZES);
	c->limit = intVal(linitial(cscan->custom_private));
	c->ncolumns = list_length(lsecond(cscan->custom_private));
	c->columns = palloc0(sizeof(KeyColumn) * c->ncolumns);
	foreach(lc, (List *) lsecond(cscan->custom_private))
	{
		List	   *item = (List *) lfirst(lc);
		KeyColumn  *col = &c->columns[i++];
		Oid			opno = (Oid) intVal(lsecond(item));
		RegProcedure lhs;
		RegProcedure rhs;

		col->attno = (AttrNumber) intVal(linitial(item));
		col->collation = (Oid) intVal(lthird(item));
		col->type = TupleDescAttr(ExecGetResultType(child), col->attno - 1)->atttypid;
		get_typlenbyvalalign(col->type, &col->typlen, &col->typbyval, &col->typalign);
		if (!get_op_hash_functions(opno, &lhs, &rhs))
			elog(ERROR, "could not find hash function for hash operator %u", opno);
		fmgr_info(rhs, &col->hash_fn);
		fmgr_info(get_opcode(opno), &col->eq_fn);
	}
	new_sets(c);

	c->cleanup.func = forget_collector;
	c->cleanup.arg = c;
	MemoryContextRegisterResetCallback(estate->es_query_cxt, &c->cleanup);
	dlist_push_tail(&collectors, &c->node);
	c->listed = true;
}

/*
 * key_size
 *		The bytes VALUE, a key of COL, takes in an array: a varlena's
 *		uncompressed size, whether it came compressed or out of line.
 */
static Size
key_size(KeyColumn *col, Datum value)
{
	if (col->typlen == -1)
		return toast_raw_datum_size(value);
	if (col->typlen == -2)
		return strlen(DatumGetCString(value)) + 1;
	return col->typlen;
}

/*
 * note_keys
 *		Add the keys of SLOT's row to C's sets; a column with more keys than
 *		an array may hold gives up.
 */
static void
note_keys(KeyCollector *c, TupleTableSlot *slot)
{
	for (int i = 0; i < c->ncolumns; i++)
	{
		KeyColumn  *col = &c->columns[i];
		bool		isnull;
		bool		found;
		Datum		value;
		KeyEntry   *entry;

		if (col->set == NULL)
			continue;
		value = slot_getattr(slot, col->attno, &isnull);
		if (isnull)
			continue;			/* joins nothing */
		entry = keyset_insert(col->set, value, &found);
		if (found)
			continue;
		if (!col->typbyval)
		{
			MemoryContext old = MemoryContextSwitchTo(c->keys_cxt);

			entry->key = datumCopy(value, false, col->typlen);
			MemoryContextSwitchTo(old);
		}
		col->bytes += key_size(col, value);
		if (++col->count > c->limit || col->bytes > KEY_ARRAY_MAX_BYTES)
		{
			keyset_destroy(col->set);
			col->set = NULL;
		}
	}
}

/*
 * input_ended
 *		The input is read: the sets become arrays.
 */
static void
input_ended(KeyCollector *c)
{
	MemoryContext old = MemoryContextSwitchTo(c->keys_cxt);

	c->complete = true;
	for (int i = 0; i < c->ncolumns; i++)
	{
		KeyColumn  *col = &c->columns[i];
		Datum	   *elems;
		keyset_iterator it;
		KeyEntry   *entry;
		int			n = 0;

		if (col->set == NULL)
			continue;
		elems = palloc(sizeof(Datum) * Max(col->count, 1));
		keyset_start_iterate(col->set, &it);
		while ((entry = keyset_iterate(col->set, &it)) != NULL)
			elems[n++] = entry->key;
		col->array = PointerGetDatum(construct_array(elems, n, col->type,
													 col->typlen, col->typbyval,
													 col->typalign));
	}
	MemoryContextSwitchTo(old);
}

/*
 * all_gave_up
 *		Whether every key column of C has given up.
 */
static bool
all_gave_up(KeyCollector *c)
{
	for (int i = 0; i < c->ncolumns; i++)
	{
		if (c->columns[i].set != NULL)
			return false;
	}
	return true;
}

/*
 * collector_exec
 *		The next row of the input: one read ahead first, if any.
 */
static TupleTableSlot *
collector_exec(CustomScanState *node)
{
	KeyCollector *c = (KeyCollector *) node;
	TupleTableSlot *slot;

	if (c->ahead != NULL)
	{
		if (tuplestore_gettupleslot(c->ahead, true, false, c->ahead_slot))
			return c->ahead_slot;
		tuplestore_end(c->ahead);
		c->ahead = NULL;
	}
	if (c->complete)
		return NULL;
	slot = ExecProcNode(outerPlanState(node));
	if (TupIsNull(slot))
	{
		input_ended(c);
		return NULL;
	}
	note_keys(c, slot);
	if (c->own_slot != NULL)
		return ExecCopySlot(c->own_slot, slot);
	return slot;
}

/*
 * read_ahead
 *		Read C's input to its end, keeping the rows for the Hash, unless
 *		that takes more than ten times as many rows as an array may hold
 *		keys, or every column gives up.
 */
static void
read_ahead(KeyCollector *c)
{
	PlanState  *child = outerPlanState(&c->css);
	int64		max_rows = (int64) c->limit * 10;
	MemoryContext old;

	/*
	 * The executor runs nodes in the query's memory (hash tables and sorts
	 * are made in the current context); the scan asking may be in a row's.
	 */
	old = MemoryContextSwitchTo(c->estate->es_query_cxt);
	if (c->ahead == NULL)
		c->ahead = tuplestore_begin_heap(false, false, work_mem);
	while (!c->complete)
	{
		TupleTableSlot *slot;

		CHECK_FOR_INTERRUPTS();
		if (c->rows_ahead >= max_rows || all_gave_up(c))
		{
			c->gave_up = true;
			break;
		}
		slot = ExecProcNode(child);
		if (TupIsNull(slot))
		{
			input_ended(c);
			break;
		}
		note_keys(c, slot);
		tuplestore_puttupleslot(c->ahead, slot);
		c->rows_ahead++;
	}
	MemoryContextSwitchTo(old);
}

/*
 * afdw_collected_keys
 *		The keys of column COLUMN of the collector of ESTATE's statement
 *		whose plan_node_id is COLLECTOR: true with *KEYS (an array) and
 *		*COUNT, after reading its input to the end if it has not been yet;
 *		false when it has more keys than an array holds, or its input more
 *		rows than it reads ahead.
 */
bool
afdw_collected_keys(EState *estate, int collector, int column, Datum *keys,
					int *count)
{
	dlist_iter	it;
	KeyCollector *c = NULL;
	KeyColumn  *col;

	dlist_foreach(it, &collectors)
	{
		KeyCollector *each = dlist_container(KeyCollector, node, it.cur);

		if (each->estate == estate && each->id == collector)
		{
			c = each;
			break;
		}
	}
	if (c == NULL || column >= c->ncolumns)
		return false;
	if (!c->complete && !c->gave_up)
		read_ahead(c);
	col = &c->columns[column];
	if (!c->complete || col->set == NULL)
		return false;
	*keys = col->array;
	*count = col->count;
	return true;
}

/*
 * collector_rescan
 *		Start over: the input's keys are collected anew.
 */
static void
collector_rescan(CustomScanState *node)
{
	KeyCollector *c = (KeyCollector *) node;
	PlanState  *child = outerPlanState(node);

	if (c->ahead != NULL)
		tuplestore_end(c->ahead);
	c->ahead = NULL;
	c->rows_ahead = 0;
	c->complete = false;
	c->gave_up = false;
	MemoryContextReset(c->keys_cxt);
	new_sets(c);
	if (child->chgParam == NULL)
		ExecReScan(child);
}

/*
 * collector_end
 *		End the collector and its input.
 */
static void
collector_end(CustomScanState *node)
{
	KeyCollector *c = (KeyCollector *) node;

	forget_collector(c);
	if (c->ahead != NULL)
		tuplestore_end(c->ahead);
	c->ahead = NULL;
	ExecEndNode(outerPlanState(node));
}

/*
 * collector_explain
 *		Show the key columns, and with ANALYZE how many keys each had.
 */
static void
collector_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	KeyCollector *c = (KeyCollector *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *context;
	bool		useprefix = list_length(es->rtable) > 1 || es->verbose;
	ListCell   *lc;
	int			i = 0;

	context = set_deparse_context_plan(es->deparse_cxt, (Plan *) cscan, ancestors);
	foreach(lc, (List *) lsecond(cscan->custom_private))
	{
		AttrNumber	attno = (AttrNumber) intVal(linitial((List *) lfirst(lc)));
		TargetEntry *tle = list_nth_node(TargetEntry, cscan->scan.plan.targetlist,
										 attno - 1);
		char	   *name = deparse_expression((Node *) tle->expr, context,
											  useprefix, false);

		if (es->analyze)
		{
			KeyColumn  *col = &c->columns[i];
			char	   *found;

			if (col->set == NULL && col->count > c->limit)
				found = psprintf("more than %d", c->limit);
			else if (col->set == NULL)
				found = psprintf("more than %d kB", KEY_ARRAY_MAX_BYTES / 1024);
			else if (!c->complete)
				found = psprintf("%d so far", col->count);
			else
				found = psprintf("%d", col->count);
			if (c->rows_ahead > 0)
				found = psprintf("%s; " INT64_FORMAT " rows read ahead%s", found,
								 c->rows_ahead, c->gave_up ? ", then stopped" : "");
			ExplainPropertyText("Keys", psprintf("%s (%s)", name, found), es);
		}
		else
			ExplainPropertyText("Keys", name, es);
		i++;
	}
}
