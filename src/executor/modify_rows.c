/*-------------------------------------------------------------------------
 *
 * modify_rows.c
 *		Writes to async_fdw foreign tables row by row: INSERT (single rows,
 *		batches, and bulk loads streamed with COPY FROM STDIN), and UPDATE
 *		and DELETE of the rows a scan read, located by ctid, or in a
 *		replicated table by the key its column option key declares.
 *
 * Every write of a user mapping goes through its writer connection
 * (connection_pool.c), in the local transaction's remote transaction.  Values
 * travel as literals in the statement's text, so that a statement is one
 * message whatever opens the remote transaction before it, and nothing is
 * left prepared in a remote session (which a transaction pooler would
 * lose).
 *
 * An INSERT whose rows nobody looks at again (no RETURNING, no ON CONFLICT, no
 * check option, no AFTER trigger) is a bulk load (bulk_loads.c): its rows are
 * kept, streamed with COPY FROM STDIN once batch_size of them are there, or
 * sent as one multi-row INSERT at the end of the statement.  Here it is
 * decided, and each row's values are made as for any other write.
 *
 * Neighbours: deparse_statements.c writes the statements; remote_xact.c sends
 * them (afdw_run_write); bulk_loads.c keeps and streams a bulk load's rows;
 * row_builder.c turns a RETURNING row into a tuple; scan.c reads
 * (and locks, on the writer) the rows an UPDATE or DELETE changes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/inherit.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "utils/rel.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

/* Default of the batch_size option (see the README for its measurement). */
#define AFDW_DEFAULT_BATCH_SIZE		1000

/* Items of the fdw_private list of a ModifyTable's foreign table. */
enum ModifyPrivate
{
	MODIFY_HEAD,				/* String: the statement up to its rows */
	MODIFY_ROW,					/* String: an INSERT's row of $n, else "" */
	MODIFY_TAIL,				/* String: what follows the rows */
	MODIFY_TARGET_ATTRS,		/* List of Integer: the columns sent */
	MODIFY_RETRIEVED,			/* List of Integer: RETURNING's columns */
	MODIFY_DO_NOTHING,			/* Boolean: ON CONFLICT DO NOTHING */
	MODIFY_CHECK_PARTITION,		/* Boolean: an UPDATE whose changed rows
								 * are checked against the partition
								 * constraint (it returns them whole) */
	MODIFY_KEY					/* List of Integer: the key that finds the
								 * row to change on every copy of a
								 * replicated table; NIL: its ctid */
};

/* The state of writing to one foreign table in one statement. */
typedef struct AfdwModifyState
{
	Relation	rel;
	const char *relname;		/* for messages */
	EState	   *estate;			/* of the statement */
	CmdType		operation;
	AfdwConn   *conn;			/* the writer, as taken at Begin */
	AfdwReplicaWrites *replicas;	/* the other copies of a replicated
									 * table, else NULL */

	/* The statement, in parts (see afdw_deparse_insert and _update). */
	char	   *head;
	char	   *row;
	char	   *tail;
	List	   *target_attrs;
	List	   *retrieved_attrs;	/* NIL: no RETURNING */
	bool		do_nothing;
	bool		check_partition;	/* each row written must satisfy the
									 * table's partition constraint */

	/*
	 * Sending values: the columns' output functions; the place of the ctid
	 * in the subplan's rows (UPDATE, DELETE), or of the key's values, with
	 * their output functions (a replicated table).
	 */
	FmgrInfo   *out_funcs;		/* per target_attrs item */
	bool		needs_modes;	/* some output depends on settings */
	AttrNumber	ctid_attno;
	List	   *key;			/* column numbers; NIL: by ctid */
	AttrNumber *key_junk;		/* per key item */
	FmgrInfo   *key_out;		/* per key item */
	int			batch_size;

	/* Reading RETURNING rows. */
	RowBuilder	rb;
	MemoryContext temp_cxt;		/* per row; reset after each */

	AfdwBulkLoad *bulk;			/* a bulk load (bulk_loads.c), else NULL */
	MemoryContextCallback cleanup;
} AfdwModifyState;

static bool modify_returns_rows(ResultRelInfo *rinfo, CmdType operation,
								bool returning_list);
static bool may_load_in_bulk(ResultRelInfo *rinfo, CmdType operation,
							 List *fdw_private);
static int	batch_size_option(ResultRelInfo *rinfo);
static void find_row_junk(AfdwModifyState *st, Plan *subplan);
static AfdwModifyState *begin_modify(EState *estate, ResultRelInfo *rinfo,
									 CmdType operation, List *fdw_private,
									 Plan *subplan);
static void row_texts(AfdwModifyState *st, TupleTableSlot *slot,
					  TupleTableSlot *plan_slot, const char **values);
static void append_row_values(AfdwModifyState *st, StringInfo buf,
							  TupleTableSlot *slot, TupleTableSlot *plan_slot);
static TupleTableSlot *store_returned(AfdwModifyState *st, PGresult *res,
									  TupleTableSlot *slot);
static void modify_cleanup(void *arg);
static void end_modify(AfdwModifyState *st);
static Bitmapset *partition_key_attrs(Relation rel);

/*
 * writer_user
 *		The user mapping the writes to RINFO's table run under: the
 *		checking user of its range table entry, or of the statement's
 *		target's when the table is a partition the rows are routed to.
 */
static UserMapping *
writer_user(EState *estate, ResultRelInfo *rinfo)
{
	Oid			userid = afdw_result_rel_check_user(rinfo, estate);
	ForeignTable *table = GetForeignTable(RelationGetRelid(rinfo->ri_RelationDesc));

	return GetUserMapping(OidIsValid(userid) ? userid : GetUserId(),
						  table->serverid);
}

/*
 * afdwIsForeignRelUpdatable
 *		Which of INSERT, UPDATE and DELETE REL takes: all of them, unless
 *		its updatable option (or its server's) says false.
 */
static int
afdwIsForeignRelUpdatable(Relation rel)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	ForeignServer *server = GetForeignServer(table->serverid);
	bool		updatable;

	updatable = afdw_bool_option(server->options, "updatable", true);
	updatable = afdw_bool_option(table->options, "updatable", updatable);
	return updatable ?
		(1 << CMD_INSERT) | (1 << CMD_UPDATE) | (1 << CMD_DELETE) : 0;
}

/*
 * key_junk_name
 *		The name of the junk column that carries the value of the key column
 *		ATT of a replicated table, the Nth (from 0) of its key.  Its type is
 *		in the name: tables of one UPDATE whose keys differ in type never
 *		share a junk column.
 */
static char *
key_junk_name(int n, Form_pg_attribute att)
{
	return psprintf("afdw_key%d_%u", n + 1, att->atttypid);
}

/*
 * afdwAddForeignUpdateTargets
 *		An UPDATE or DELETE finds each remote row again by its ctid, which
 *		the scan of the target reads as a junk column; in a replicated table
 *		(option copies) by the values of its key (afdw_copy_key), since a
 *		ctid finds a row on one copy only.
 */
static void
afdwAddForeignUpdateTargets(PlannerInfo *root, Index rtindex,
							RangeTblEntry *target_rte pg_attribute_unused(),
							Relation target_relation)
{
	List	   *key = afdw_copy_key(target_relation, NULL);
	ListCell   *lc;
	Var		   *var;

	if (key == NIL)
	{
		var = makeVar(rtindex, SelfItemPointerAttributeNumber, TIDOID, -1,
					  InvalidOid, 0);
		add_row_identity_var(root, var, rtindex, "ctid");
		return;
	}
	foreach(lc, key)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(target_relation),
											  lfirst_int(lc) - 1);

		var = makeVar(rtindex, att->attnum, att->atttypid, att->atttypmod,
					  att->attcollation, 0);
		add_row_identity_var(root, var, rtindex,
							 key_junk_name(foreach_current_index(lc), att));
	}
}

/*
 * insert_columns
 *		The columns an INSERT into REL sends, and an UPDATE of a table with
 *		a BEFORE ROW UPDATE trigger: all of them but the generated ones,
 *		which the remote server computes (or fills with its default).
 */
static List *
insert_columns(Relation rel)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	List	   *attrs = NIL;

	for (int i = 1; i <= tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i - 1);

		if (!att->attisdropped && !att->attgenerated)
			attrs = lappend_int(attrs, i);
	}
	return attrs;
}

/*
 * ctid_walker
 *		Whether NODE reads a ctid column.
 */
static bool
ctid_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var) && ((Var *) node)->varattno == SelfItemPointerAttributeNumber)
		return true;
	return expression_tree_walker(node, ctid_walker, context);
}

/*
 * mentions_ctid
 *		Whether a write's RETURNING list or its check options (a List of
 *		WithCheckOption) read the ctid: only then does the remote statement
 *		return it (a remote view has none).  Another table's ctid in an
 *		UPDATE ... FROM counts too, which costs only a column.
 */
static bool
mentions_ctid(List *returning, List *check_options)
{
	ListCell   *lc;

	if (ctid_walker((Node *) returning, NULL))
		return true;
	foreach(lc, check_options)
	{
		WithCheckOption *wco = lfirst_node(WithCheckOption, lc);

		if (ctid_walker(wco->qual, NULL))
			return true;
	}
	return false;
}

/*
 * make_private
 *		The fdw_private list of a write to REL (see enum ModifyPrivate);
 *		an UPDATE or DELETE finds its row by KEY (a replicated table's), or
 *		by its ctid when NIL; with RETURNING, the remote statement returns
 *		the stored row, and its ctid with WITH_CTID (mentions_ctid).
 */
static List *
make_private(Relation rel, CmdType operation, List *target_attrs, List *key,
			 bool do_nothing, bool returning, bool with_ctid,
			 bool check_partition)
{
	StringInfoData head;
	StringInfoData row;
	StringInfoData tail;
	List	   *retrieved_attrs = NIL;
	List	   *result;

	initStringInfo(&head);
	initStringInfo(&row);
	initStringInfo(&tail);
	switch (operation)
	{
		case CMD_INSERT:
			afdw_deparse_insert(&head, &row, &tail, rel, target_attrs,
								do_nothing, returning, with_ctid, &retrieved_attrs);
			break;
		case CMD_UPDATE:
			afdw_deparse_update(&head, &tail, rel, target_attrs, key, returning,
								with_ctid, &retrieved_attrs);
			break;
		case CMD_DELETE:
			afdw_deparse_delete(&head, &tail, rel, key, returning, with_ctid,
								&retrieved_attrs);
			break;
		default:
			elog(ERROR, "unexpected operation: %d", (int) operation);
	}
	result = list_make5(makeString(head.data), makeString(row.data),
						makeString(tail.data), target_attrs, retrieved_attrs);
	result = lappend(result, makeBoolean(do_nothing));
	result = lappend(result, makeBoolean(check_partition));
	return lappend(result, key);
}

/*
 * afdwPlanForeignModify
 *		The remote statement of a row-by-row write to the foreign table
 *		RESULT_RELATION of PLAN.
 */
static List *
afdwPlanForeignModify(PlannerInfo *root, ModifyTable *plan,
					  Index result_relation, int subplan_index)
{
	CmdType		operation = plan->operation;
	RangeTblEntry *rte = planner_rt_fetch(result_relation, root);
	Relation	rel = table_open(rte->relid, NoLock);
	List	   *target_attrs = NIL;
	bool		returning;
	bool		do_nothing = false;
	bool		check_partition = false;
	List	   *key = NIL;
	List	   *result;

	if (operation != CMD_INSERT)
		key = afdw_copy_key_required(rel);
	if (plan->onConflictAction == ONCONFLICT_UPDATE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ON CONFLICT DO UPDATE is not supported on foreign table \"%s\"",
						RelationGetRelationName(rel)),
				 errhint("Use ON CONFLICT DO NOTHING, or run the statement on the remote server.")));
	do_nothing = (plan->onConflictAction == ONCONFLICT_NOTHING);

	/*
	 * An UPDATE sends the columns it sets, unless a BEFORE ROW UPDATE
	 * trigger runs locally: that may change any column of the new row, and
	 * a column it changes but the statement does not set would keep its old
	 * value remotely.  Then the whole row goes, as for an INSERT.
	 */
	if (operation == CMD_UPDATE)
	{
		RelOptInfo *baserel = find_base_rel(root, result_relation);
		Bitmapset  *cols = get_rel_all_updated_cols(root, baserel);
		TupleDesc	tupdesc = RelationGetDescr(rel);
		int			col = -1;

		/* A row whose partition key changes is checked (see below). */
		check_partition = afdw_update_may_leave_partition(rel, cols);
		if (rel->trigdesc != NULL && rel->trigdesc->trig_update_before_row)
			target_attrs = insert_columns(rel);
		else
		{
			while ((col = bms_next_member(cols, col)) >= 0)
			{
				AttrNumber	attnum = col + FirstLowInvalidHeapAttributeNumber;

				if (attnum <= InvalidAttrNumber)
					elog(ERROR, "system-column update is not supported");
				if (!TupleDescAttr(tupdesc, attnum - 1)->attgenerated)
					target_attrs = lappend_int(target_attrs, attnum);
			}
		}
	}
	else if (operation == CMD_INSERT)
		target_attrs = insert_columns(rel);

	/*
	 * The row an UPDATE that may change its partition key stores comes back
	 * whole, to be checked against the partition constraint
	 * (afdw_check_partition_row).
	 */
	returning = (plan->returningLists != NIL &&
				 list_nth(plan->returningLists, subplan_index) != NIL) ||
		(plan->withCheckOptionLists != NIL &&
		 list_nth(plan->withCheckOptionLists, subplan_index) != NIL) ||
		(rel->trigdesc != NULL &&
		 ((operation == CMD_INSERT && rel->trigdesc->trig_insert_after_row) ||
		  (operation == CMD_UPDATE && rel->trigdesc->trig_update_after_row) ||
		  (operation == CMD_DELETE && rel->trigdesc->trig_delete_after_row))) ||
		check_partition;

	result = make_private(rel, operation, target_attrs, key, do_nothing, returning,
						  mentions_ctid(plan->returningLists != NIL ?
										list_nth(plan->returningLists, subplan_index) : NIL,
										plan->withCheckOptionLists != NIL ?
										list_nth(plan->withCheckOptionLists, subplan_index) : NIL),
						  check_partition);
	table_close(rel, NoLock);
	return result;
}

/*
 * modify_returns_rows
 *		Whether a write to RINFO's table must read back the rows the remote
 *		server wrote: for a RETURNING list (RETURNING_LIST), check options
 *		or AFTER ROW triggers, which see the rows as stored.
 */
static bool
modify_returns_rows(ResultRelInfo *rinfo, CmdType operation, bool returning_list)
{
	TriggerDesc *trig = rinfo->ri_TrigDesc;

	return returning_list || rinfo->ri_WithCheckOptions != NIL ||
		(trig != NULL &&
		 ((operation == CMD_INSERT && trig->trig_insert_after_row) ||
		  (operation == CMD_UPDATE && trig->trig_update_after_row) ||
		  (operation == CMD_DELETE && trig->trig_delete_after_row)));
}

/*
 * may_load_in_bulk
 *		Whether an INSERT into RINFO's table (FDW_PRIVATE its statement) may
 *		keep its rows and stream them later (see the banner): its batch_size is
 *		more than 1, nobody looks at the rows again in the statement, and no
 *		AFTER trigger of the table or of the statement's target, which runs
 *		before the end of the statement, could read the table and miss them.
 *		Not a replicated table (option copies), whose rows go to every copy
 *		statement by statement (replica_writes.c).
 */
static bool
may_load_in_bulk(ResultRelInfo *rinfo, CmdType operation, List *fdw_private)
{
	ResultRelInfo *root = rinfo->ri_RootResultRelInfo;

	if (operation != CMD_INSERT ||
		list_nth(fdw_private, MODIFY_RETRIEVED) != NIL ||
		boolVal(list_nth(fdw_private, MODIFY_DO_NOTHING)) ||
		list_nth(fdw_private, MODIFY_TARGET_ATTRS) == NIL)
		return false;
	/* batch_size 1 asks for an INSERT a row, as postgres_fdw sends. */
	if (batch_size_option(rinfo) <= 1)
		return false;
	if (afdw_copy_servers(GetForeignTable(RelationGetRelid(rinfo->ri_RelationDesc))) != NIL)
		return false;
	if (rinfo->ri_TrigDesc != NULL &&
		(rinfo->ri_TrigDesc->trig_insert_after_row ||
		 rinfo->ri_TrigDesc->trig_insert_after_statement))
		return false;
	if (root != NULL && root->ri_TrigDesc != NULL &&
		(root->ri_TrigDesc->trig_insert_after_row ||
		 root->ri_TrigDesc->trig_insert_after_statement))
		return false;
	return true;
}

/*
 * batch_size_option
 *		The batch_size option of RINFO's table, else of its server.
 */
static int
batch_size_option(ResultRelInfo *rinfo)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rinfo->ri_RelationDesc));
	ForeignServer *server = GetForeignServer(table->serverid);
	int			size;

	size = afdw_int_option(server->options, "batch_size", AFDW_DEFAULT_BATCH_SIZE);
	return afdw_int_option(table->options, "batch_size", size);
}

/*
 * find_row_junk
 *		Find where SUBPLAN's rows carry what finds the row to change: the
 *		ctid, or each value of ST's key with its output function.
 */
static void
find_row_junk(AfdwModifyState *st, Plan *subplan)
{
	TupleDesc	tupdesc = RelationGetDescr(st->rel);
	ListCell   *lc;

	if (st->key == NIL)
	{
		st->ctid_attno = ExecFindJunkAttributeInTlist(subplan->targetlist, "ctid");
		if (!AttributeNumberIsValid(st->ctid_attno))
			elog(ERROR, "could not find junk ctid column");
		return;
	}
	st->key_junk = palloc(sizeof(AttrNumber) * list_length(st->key));
	st->key_out = palloc(sizeof(FmgrInfo) * list_length(st->key));
	foreach(lc, st->key)
	{
		int			i = foreach_current_index(lc);
		Form_pg_attribute att = TupleDescAttr(tupdesc, lfirst_int(lc) - 1);
		char	   *name = key_junk_name(i, att);
		Oid			typoutput;
		bool		isvarlena;

		st->key_junk[i] = ExecFindJunkAttributeInTlist(subplan->targetlist, name);
		if (!AttributeNumberIsValid(st->key_junk[i]))
			elog(ERROR, "could not find junk column \"%s\"", name);
		getTypeOutputInfo(att->atttypid, &typoutput, &isvarlena);
		fmgr_info(typoutput, &st->key_out[i]);
		if (!afdw_output_ignores_settings(att->atttypid))
			st->needs_modes = true;
	}
}

/*
 * begin_modify
 *		The state of writing to RINFO's foreign table with the statement
 *		FDW_PRIVATE describes (see enum ModifyPrivate), its writer taken.
 *		An UPDATE or DELETE finds the ctid or the key values of the row to
 *		change among the junk columns of SUBPLAN's rows (NULL for INSERT).
 */
static AfdwModifyState *
begin_modify(EState *estate, ResultRelInfo *rinfo, CmdType operation,
			 List *fdw_private, Plan *subplan)
{
	AfdwModifyState *st = palloc0(sizeof(AfdwModifyState));
	Relation	rel = rinfo->ri_RelationDesc;
	TupleDesc	tupdesc = RelationGetDescr(rel);
	UserMapping *user;
	ListCell   *lc;
	int			i = 0;

	/*
	 * An error that ends the statement gives the writer back and takes the
	 * state out of the lists of bulk loads.  Registered first: connecting
	 * the writer may fail after ST is in a list.
	 */
	st->cleanup.func = modify_cleanup;
	st->cleanup.arg = st;
	MemoryContextRegisterResetCallback(estate->es_query_cxt, &st->cleanup);

	st->rel = rel;
	st->estate = estate;
	st->relname = RelationGetRelationName(rel);
	st->operation = operation;
	st->head = strVal(list_nth(fdw_private, MODIFY_HEAD));
	st->row = strVal(list_nth(fdw_private, MODIFY_ROW));
	st->tail = strVal(list_nth(fdw_private, MODIFY_TAIL));
	st->target_attrs = (List *) list_nth(fdw_private, MODIFY_TARGET_ATTRS);
	st->retrieved_attrs = (List *) list_nth(fdw_private, MODIFY_RETRIEVED);
	st->do_nothing = boolVal(list_nth(fdw_private, MODIFY_DO_NOTHING));
	st->check_partition = boolVal(list_nth(fdw_private, MODIFY_CHECK_PARTITION));
	st->key = (List *) list_nth(fdw_private, MODIFY_KEY);
	if (subplan != NULL)
		find_row_junk(st, subplan);

	st->batch_size = batch_size_option(rinfo);

	st->out_funcs = palloc0(sizeof(FmgrInfo) * Max(list_length(st->target_attrs), 1));
	foreach(lc, st->target_attrs)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, lfirst_int(lc) - 1);
		Oid			typoutput;
		bool		isvarlena;

		getTypeOutputInfo(att->atttypid, &typoutput, &isvarlena);
		fmgr_info(typoutput, &st->out_funcs[i++]);
		if (!afdw_output_ignores_settings(att->atttypid))
			st->needs_modes = true;
	}

	st->temp_cxt = AllocSetContextCreate(estate->es_query_cxt,
										 "async_fdw modify",
										 ALLOCSET_SMALL_SIZES);
	if (st->retrieved_attrs != NIL)
		afdw_init_row_builder(&st->rb, tupdesc, st->relname, false,
							  st->retrieved_attrs, st->temp_cxt);

	user = writer_user(estate, rinfo);
	st->conn = afdw_acquire_writer(user);
	afdw_visibility_first_write(st->conn, RelationGetRelid(rel));
	st->replicas = afdw_replica_writes_begin(rel, user->userid);
	if (may_load_in_bulk(rinfo, operation, fdw_private))
		st->bulk = afdw_bulk_begin(rel, st->target_attrs, st->head, st->tail,
								   st->batch_size, estate, &st->conn);
	return st;
}

/*
 * afdwBeginForeignModify
 *		Start the row-by-row writes of a ModifyTable to RINFO's table.
 */
static void
afdwBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
					   List *fdw_private, int subplan_index pg_attribute_unused(),
					   int eflags)
{
	CmdType		operation = mtstate->operation;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	rinfo->ri_FdwState = begin_modify(mtstate->ps.state, rinfo, operation,
									  fdw_private,
									  operation == CMD_INSERT ? NULL :
									  outerPlanState(mtstate)->plan);

	/*
	 * An INSERT into a partition named as the statement's target: nothing
	 * routed its rows, and PostgreSQL leaves a foreign table's constraints
	 * to it.  A row of another partition would be lost to every query that
	 * prunes by the key, so each row is checked before it is sent.
	 */
	if (operation == CMD_INSERT &&
		rinfo->ri_RelationDesc->rd_rel->relispartition)
		((AfdwModifyState *) rinfo->ri_FdwState)->check_partition = true;
}

/*
 * afdwBeginForeignInsert
 *		Start the INSERTs into RINFO's table of rows routed to it as a
 *		partition, or of a COPY into it (MTSTATE NULL, or without plan).
 */
static void
afdwBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	ModifyTable *plan = (mtstate != NULL) ? (ModifyTable *) mtstate->ps.plan : NULL;
	EState	   *estate = (mtstate != NULL) ? mtstate->ps.state : NULL;
	Relation	rel = rinfo->ri_RelationDesc;
	bool		do_nothing = false;
	bool		returning;
	List	   *fdw_private;

	/*
	 * A row moved by an UPDATE into a partition that the same UPDATE
	 * changes: the moved row would be found and changed again.
	 */
	if (plan != NULL && plan->operation == CMD_UPDATE &&
		(rinfo->ri_usesFdwDirectModify || rinfo->ri_FdwState != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot route rows into foreign table \"%s\", which the same UPDATE changes",
						RelationGetRelationName(rel))));
	if (plan != NULL && plan->onConflictAction == ONCONFLICT_UPDATE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ON CONFLICT DO UPDATE is not supported on foreign table \"%s\"",
						RelationGetRelationName(rel)),
				 errhint("Use ON CONFLICT DO NOTHING, or run the statement on the remote server.")));
	if (plan != NULL)
		do_nothing = (plan->onConflictAction == ONCONFLICT_NOTHING);

	/* COPY's estate is not the ModifyTable's: take it from the result. */
	if (estate == NULL)
		elog(ERROR, "COPY into a foreign table without executor state");

	returning = modify_returns_rows(rinfo, CMD_INSERT, rinfo->ri_returningList != NIL);

	/*
	 * A row routed here by an INSERT may still be changed by a BEFORE ROW
	 * trigger of this table, after the routing: then it is checked as an
	 * INSERT straight into the table is.  COPY checks such rows itself
	 * (plan NULL).
	 */
	fdw_private = make_private(rel, CMD_INSERT, insert_columns(rel), NIL, do_nothing,
							   returning,
							   mentions_ctid(rinfo->ri_returningList,
											 rinfo->ri_WithCheckOptions),
							   plan != NULL && rel->rd_rel->relispartition &&
							   rinfo->ri_TrigDesc != NULL &&
							   rinfo->ri_TrigDesc->trig_insert_before_row);
	rinfo->ri_FdwState = begin_modify(estate, rinfo, CMD_INSERT, fdw_private,
									  NULL);
}

/*
 * row_texts
 *		Fill VALUES with the text forms of SLOT's target columns (NULL for a
 *		null), then those of the key values PLAN_SLOT carries (a replicated
 *		table's UPDATE or DELETE), as the remote server reads them
 *		(afdw_set_transmission_modes), in the current memory context.
 */
static void
row_texts(AfdwModifyState *st, TupleTableSlot *slot, TupleTableSlot *plan_slot,
		  const char **values)
{
	int			nestlevel = -1;
	int			i = 0;
	ListCell   *lc;

	if (st->needs_modes)
		nestlevel = afdw_set_transmission_modes();
	foreach(lc, st->target_attrs)
	{
		bool		isnull;
		Datum		value = slot_getattr(slot, lfirst_int(lc), &isnull);

		values[i] = isnull ? NULL : OutputFunctionCall(&st->out_funcs[i], value);
		i++;
	}
	foreach(lc, st->key)
	{
		int			k = foreach_current_index(lc);
		bool		isnull;
		Datum		value = ExecGetJunkAttribute(plan_slot, st->key_junk[k], &isnull);

		/* "= NULL" would find no row, and the change would be lost. */
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("key column \"%s\" of replicated foreign table \"%s\" is null in a row to change",
							NameStr(TupleDescAttr(RelationGetDescr(st->rel),
												  lfirst_int(lc) - 1)->attname),
							st->relname),
					 errdetail("An UPDATE or DELETE of a replicated table finds each row on every copy by the columns of its option key, which must not be null.")));
		values[i++] = OutputFunctionCall(&st->key_out[k], value);
	}
	if (nestlevel >= 0)
		afdw_reset_transmission_modes(nestlevel);
}

/*
 * append_row_values
 *		Append to BUF the statement's row of parameters (st->row, or for an
 *		UPDATE or DELETE its head) with the values of SLOT's target columns
 *		and what finds the row to change, from PLAN_SLOT (its ctid or key
 *		values), as literals.
 */
static void
append_row_values(AfdwModifyState *st, StringInfo buf, TupleTableSlot *slot,
				  TupleTableSlot *plan_slot)
{
	int			n = list_length(st->target_attrs);
	const char **values = palloc(sizeof(char *) * (n + list_length(st->key) + 1));

	row_texts(st, slot, plan_slot, values);
	n += list_length(st->key);
	if (st->ctid_attno != InvalidAttrNumber)
	{
		bool		isnull;
		Datum		ctid = ExecGetJunkAttribute(plan_slot, st->ctid_attno, &isnull);

		if (isnull)
			elog(ERROR, "ctid is NULL");
		values[n++] = DatumGetCString(DirectFunctionCall1(tidout, ctid));
	}
	afdw_bind_params(buf, st->operation == CMD_INSERT ? st->row : st->head,
					 n, values);
}

/*
 * store_returned
 *		Put the row of RES (a RETURNING result) into SLOT.
 */
static TupleTableSlot *
store_returned(AfdwModifyState *st, PGresult *res, TupleTableSlot *slot)
{
	HeapTuple	tuple;

	if (PQntuples(res) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("remote server returned %d rows for one row of foreign table \"%s\"",
						PQntuples(res), st->relname)));
	tuple = afdw_make_tuple(&st->rb, res, 0, st->temp_cxt);

	/*
	 * A row routed through a partitioned table comes in the root's slot,
	 * which need not hold heap tuples: copy the values where it is not.
	 * The remote ctid goes with it, for RETURNING ctid.
	 */
	tuple->t_self = st->rb.ctid;
	ExecForceStoreHeapTuple(tuple, slot, false);
	slot->tts_tid = st->rb.ctid;
	return slot;
}

/*
 * operation_name
 *		The SQL command of OPERATION, for messages.
 */
static const char *
operation_name(CmdType operation)
{
	return operation == CMD_INSERT ? "INSERT" :
		operation == CMD_UPDATE ? "UPDATE" : "DELETE";
}

/*
 * run_row
 *		Write the row of SLOT (PLAN_SLOT: what finds the row to change) with
 *		one remote statement; SLOT with what the remote server stored, or
 *		NULL when it wrote nothing (a conflict skipped, a row gone).
 */
static TupleTableSlot *
run_row(AfdwModifyState *st, TupleTableSlot *slot, TupleTableSlot *plan_slot)
{
	StringInfoData sql;
	PGresult   *res;
	TupleTableSlot *volatile result = slot;
	MemoryContext old = MemoryContextSwitchTo(st->temp_cxt);

	MemoryContextReset(st->temp_cxt);
	initStringInfo(&sql);
	if (st->operation == CMD_INSERT)
		appendStringInfoString(&sql, st->head);
	append_row_values(st, &sql, slot, plan_slot);
	appendStringInfoString(&sql, st->tail);

	st->conn = afdw_current_writer(st->conn);
	res = afdw_run_write(st->conn, sql.data);
	MemoryContextSwitchTo(old);
	PG_TRY();
	{
		uint64		changed = afdw_rows_changed(res);

		/*
		 * A key that is not unique changed more than the one row, here and
		 * on every copy: the statement fails, and with it the change.
		 */
		if (st->key != NIL && changed > 1)
			ereport(ERROR,
					(errcode(ERRCODE_CARDINALITY_VIOLATION),
					 st->operation == CMD_UPDATE ?
					 errmsg("the key of replicated foreign table \"%s\" found " UINT64_FORMAT " rows to update for one row",
							st->relname, changed) :
					 errmsg("the key of replicated foreign table \"%s\" found " UINT64_FORMAT " rows to delete for one row",
							st->relname, changed),
					 errdetail("The columns of its option key must identify one row, and on its server \"%s\" they do not.",
							   GetForeignServer(GetForeignTable(RelationGetRelid(st->rel))->serverid)->servername),
					 errhint("Declare as the key the columns of a primary key or unique constraint that every copy has.")));
		/* The copies follow the table's own server: see replica_writes.c. */
		if (st->replicas != NULL)
			afdw_replica_writes_run(st->replicas, sql.data, changed,
									operation_name(st->operation));
		if (st->retrieved_attrs != NIL)
			result = (PQntuples(res) == 0) ? NULL : store_returned(st, res, slot);
		else if (strcmp(PQcmdTuples(res), "0") == 0)
			result = NULL;
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
	return result;
}

/*
 * keep_row
 *		Hand SLOT's row to ST's bulk load, its values made in the per-row
 *		memory.
 */
static void
keep_row(AfdwModifyState *st, TupleTableSlot *slot)
{
	MemoryContext old = MemoryContextSwitchTo(st->temp_cxt);
	const char **values = palloc(sizeof(char *) * list_length(st->target_attrs));

	row_texts(st, slot, NULL, values);
	MemoryContextSwitchTo(old);
	afdw_bulk_add(st->bulk, values);
	MemoryContextReset(st->temp_cxt);
}

/*
 * afdwExecForeignInsert
 *		Insert SLOT's row: at once, or kept for a bulk load.
 */
static TupleTableSlot *
afdwExecForeignInsert(EState *estate pg_attribute_unused(), ResultRelInfo *rinfo,
					  TupleTableSlot *slot, TupleTableSlot *plan_slot pg_attribute_unused())
{
	AfdwModifyState *st = (AfdwModifyState *) rinfo->ri_FdwState;
	ErrorContextCallback errcb;
	TupleTableSlot *result = slot;

	errcb.callback = afdw_write_error_context;
	errcb.arg = unconstify(char *, st->relname);
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	if (st->check_partition)
		afdw_check_partition_row(rinfo, CMD_INSERT, slot, st->estate);
	if (st->bulk)
		keep_row(st, slot);
	else
		result = run_row(st, slot, NULL);
	error_context_stack = errcb.previous;
	return result;
}

/*
 * afdwExecForeignBatchInsert
 *		Insert the *NUMSLOTS rows of SLOTS with one multi-row INSERT; set
 *		*NUMSLOTS to how many the remote server inserted (ON CONFLICT DO
 *		NOTHING may skip some).
 */
static TupleTableSlot **
afdwExecForeignBatchInsert(EState *estate pg_attribute_unused(), ResultRelInfo *rinfo,
						   TupleTableSlot **slots,
						   TupleTableSlot **plan_slots pg_attribute_unused(),
						   int *numslots)
{
	AfdwModifyState *st = (AfdwModifyState *) rinfo->ri_FdwState;
	ErrorContextCallback errcb;
	StringInfoData sql;
	PGresult   *res;
	MemoryContext old;

	errcb.callback = afdw_write_error_context;
	errcb.arg = unconstify(char *, st->relname);
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	if (st->check_partition)
	{
		for (int i = 0; i < *numslots; i++)
			afdw_check_partition_row(rinfo, CMD_INSERT, slots[i], st->estate);
	}
	MemoryContextReset(st->temp_cxt);
	old = MemoryContextSwitchTo(st->temp_cxt);
	initStringInfo(&sql);
	appendStringInfoString(&sql, st->head);
	for (int i = 0; i < *numslots; i++)
	{
		if (i > 0)
			appendStringInfoString(&sql, ", ");
		append_row_values(st, &sql, slots[i], NULL);
	}
	appendStringInfoString(&sql, st->tail);
	st->conn = afdw_current_writer(st->conn);
	res = afdw_run_write(st->conn, sql.data);
	*numslots = atoi(PQcmdTuples(res));
	PQclear(res);
	/* The copies follow the table's own server: see replica_writes.c. */
	if (st->replicas != NULL)
		afdw_replica_writes_run(st->replicas, sql.data, (uint64) *numslots, "INSERT");
	MemoryContextSwitchTo(old);

	error_context_stack = errcb.previous;
	return slots;
}

/*
 * afdwGetForeignModifyBatchSize
 *		Rows per multi-row INSERT into RINFO's table: batch_size, unless the
 *		rows are to be read back (RETURNING, check options, AFTER ROW
 *		triggers), or a BEFORE ROW trigger might look for the rows before
 *		it, or the table loads in bulk (which batches on its own).
 */
static int
afdwGetForeignModifyBatchSize(ResultRelInfo *rinfo)
{
	AfdwModifyState *st = (AfdwModifyState *) rinfo->ri_FdwState;

	/* Without state (EXPLAIN): what the options say, for the plan. */
	if (st == NULL)
	{
		if (rinfo->ri_returningList != NIL || rinfo->ri_WithCheckOptions != NIL ||
			RelationGetDescr(rinfo->ri_RelationDesc)->natts == 0 ||
			(rinfo->ri_TrigDesc != NULL &&
			 (rinfo->ri_TrigDesc->trig_insert_before_row ||
			  rinfo->ri_TrigDesc->trig_insert_after_row)))
			return 1;
		return batch_size_option(rinfo);
	}
	/* A row of no column is DEFAULT VALUES, which takes one row only. */
	if (st->bulk || st->retrieved_attrs != NIL || st->target_attrs == NIL ||
		(rinfo->ri_TrigDesc != NULL && rinfo->ri_TrigDesc->trig_insert_before_row))
		return 1;
	return st->batch_size;
}

/*
 * afdwExecForeignUpdate
 *		Change the remote row that PLAN_SLOT finds (its ctid, or the key of a
 *		replicated table) to SLOT's values.
 */
static TupleTableSlot *
afdwExecForeignUpdate(EState *estate pg_attribute_unused(), ResultRelInfo *rinfo,
					  TupleTableSlot *slot, TupleTableSlot *plan_slot)
{
	AfdwModifyState *st = (AfdwModifyState *) rinfo->ri_FdwState;
	ErrorContextCallback errcb;
	TupleTableSlot *result;

	errcb.callback = afdw_write_error_context;
	errcb.arg = unconstify(char *, st->relname);
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	result = run_row(st, slot, plan_slot);
	/* The row as stored, when its partition key may have changed. */
	if (st->check_partition && st->operation == CMD_UPDATE && result != NULL)
		afdw_check_partition_row(rinfo, CMD_UPDATE, result, st->estate);
	error_context_stack = errcb.previous;
	return result;
}

/*
 * afdwExecForeignDelete
 *		Delete the remote row that PLAN_SLOT finds.
 */
static TupleTableSlot *
afdwExecForeignDelete(EState *estate pg_attribute_unused(), ResultRelInfo *rinfo,
					  TupleTableSlot *slot, TupleTableSlot *plan_slot)
{
	return afdwExecForeignUpdate(NULL, rinfo, slot, plan_slot);
}

/*
 * end_modify
 *		Finish ST's writes (a bulk load's last rows) and give its writer
 *		back.
 */
static void
end_modify(AfdwModifyState *st)
{
	ErrorContextCallback errcb;

	errcb.callback = afdw_write_error_context;
	errcb.arg = unconstify(char *, st->relname);
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	if (st->bulk)
		afdw_bulk_end(st->bulk);
	error_context_stack = errcb.previous;

	afdw_release_connection(st->conn);
	st->conn = NULL;
	afdw_replica_writes_end(st->replicas);
}

/*
 * afdwEndForeignModify
 *		End the writes to RINFO's table.
 */
static void
afdwEndForeignModify(EState *estate pg_attribute_unused(), ResultRelInfo *rinfo)
{
	AfdwModifyState *st = (AfdwModifyState *) rinfo->ri_FdwState;

	if (st != NULL && st->conn != NULL)
		end_modify(st);
}

/*
 * modify_cleanup
 *		The statement's memory goes (after an error, say) while ST's writes
 *		did not end: forget the stream (the abort of the transaction or
 *		savepoint fails it remotely) and give the writer back.
 */
static void
modify_cleanup(void *arg)
{
	AfdwModifyState *st = (AfdwModifyState *) arg;

	if (st->bulk != NULL)
		afdw_bulk_forget(st->bulk);
	if (st->conn != NULL)
	{
		afdw_release_connection(st->conn);
		st->conn = NULL;
	}
}

/*
 * partition_key_attrs
 *		The columns of REL (offset by FirstLowInvalidHeapAttributeNumber)
 *		that its partition constraint reads, its ancestors' bounds
 *		included; NULL when REL is not a partition.
 */
static Bitmapset *
partition_key_attrs(Relation rel)
{
	Bitmapset  *attrs = NULL;

	if (rel->rd_rel->relispartition)
		pull_varattnos((Node *) RelationGetPartitionQual(rel), 1, &attrs);
	return attrs;
}

/*
 * afdw_update_may_leave_partition
 *		Whether an UPDATE of REL that sets the columns UPDATED_COLS (offset
 *		by FirstLowInvalidHeapAttributeNumber) may give a row a partition
 *		key of another partition: REL is a partition and the statement, or
 *		a BEFORE ROW UPDATE trigger of REL, may change a column its
 *		partition constraint reads.
 *
 * PostgreSQL moves no row out of a foreign partition (its UPDATE goes to
 * the foreign table as it is), so such a row would stay where it is,
 * found by no query that prunes by its key.  The rows of such an UPDATE
 * are checked instead (afdw_check_partition_row).
 */
bool
afdw_update_may_leave_partition(Relation rel, Bitmapset *updated_cols)
{
	Bitmapset  *key_attrs = partition_key_attrs(rel);

	if (key_attrs == NULL)
		return false;
	if (rel->trigdesc != NULL && rel->trigdesc->trig_update_before_row)
		return true;
	return bms_overlap(key_attrs, updated_cols);
}

/*
 * afdw_check_partition_row
 *		Fail unless SLOT, a row of RINFO's foreign table as OPERATION is
 *		to store it (or has, remotely), satisfies the table's partition
 *		constraint.
 *
 * A row an UPDATE of the partitioned table changes is one PostgreSQL
 * would have moved to another partition: that is not possible out of a
 * foreign table, and the statement fails (the local transaction's abort
 * takes the remote change back).  Any other row, an INSERT's or one
 * written to the partition itself, breaks the constraint, as it would on
 * a table of this server.
 */
void
afdw_check_partition_row(ResultRelInfo *rinfo, CmdType operation,
						 TupleTableSlot *slot, EState *estate)
{
	ResultRelInfo *root = rinfo->ri_RootResultRelInfo;

	if (ExecPartitionCheck(rinfo, slot, estate, false))
		return;
	if (root == NULL || operation != CMD_UPDATE)
		ExecPartitionCheckEmitError(rinfo, slot, estate);
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot move a row out of foreign partition \"%s\"",
					RelationGetRelationName(rinfo->ri_RelationDesc)),
			 errdetail("The new partition key of the row belongs to another partition of \"%s\", and rows are not moved out of foreign partitions.",
					   RelationGetRelationName(root->ri_RelationDesc)),
			 errhint("Delete the row and insert it again with its new key.")));
}

/*
 * afdwExplainForeignModify
 *		EXPLAIN VERBOSE shows the remote statement, and the batch size, or
 *		for a bulk load its COPY and after how many rows it streams.
 */
static void
afdwExplainForeignModify(ModifyTableState *mtstate,
						 ResultRelInfo *rinfo, List *fdw_private,
						 int subplan_index pg_attribute_unused(),
						 ExplainState *es)
{
	StringInfoData sql;
	char	   *copies;

	if (!es->verbose)
		return;
	initStringInfo(&sql);
	appendStringInfoString(&sql, strVal(list_nth(fdw_private, MODIFY_HEAD)));
	appendStringInfoString(&sql, strVal(list_nth(fdw_private, MODIFY_ROW)));
	appendStringInfoString(&sql, strVal(list_nth(fdw_private, MODIFY_TAIL)));
	ExplainPropertyText("Remote SQL", sql.data, es);
	copies = afdw_replica_server_names(RelationGetRelid(rinfo->ri_RelationDesc));
	if (copies != NULL)
		ExplainPropertyText("Copies Written", copies, es);
	afdw_explain_commit_fence(es, mtstate->ps.state, rinfo);
	if (may_load_in_bulk(rinfo, mtstate->operation, fdw_private))
	{
		resetStringInfo(&sql);
		afdw_deparse_copy_from(&sql, rinfo->ri_RelationDesc,
							   (List *) list_nth(fdw_private, MODIFY_TARGET_ATTRS));
		ExplainPropertyText("Bulk Load", sql.data, es);
		ExplainPropertyInteger("Bulk Load After", "rows",
							   batch_size_option(rinfo), es);
	}
	else if (rinfo->ri_BatchSize > 1)
		ExplainPropertyInteger("Batch Size", NULL, rinfo->ri_BatchSize, es);
}

/*
 * afdw_modify_routines
 *		Fill in the row-by-row write callbacks of ROUTINE.
 */
void
afdw_modify_routines(FdwRoutine *routine)
{
	routine->IsForeignRelUpdatable = afdwIsForeignRelUpdatable;
	routine->AddForeignUpdateTargets = afdwAddForeignUpdateTargets;
	routine->PlanForeignModify = afdwPlanForeignModify;
	routine->BeginForeignModify = afdwBeginForeignModify;
	routine->ExecForeignInsert = afdwExecForeignInsert;
	routine->ExecForeignBatchInsert = afdwExecForeignBatchInsert;
	routine->GetForeignModifyBatchSize = afdwGetForeignModifyBatchSize;
	routine->ExecForeignUpdate = afdwExecForeignUpdate;
	routine->ExecForeignDelete = afdwExecForeignDelete;
	routine->EndForeignModify = afdwEndForeignModify;
	routine->BeginForeignInsert = afdwBeginForeignInsert;
	routine->EndForeignInsert = afdwEndForeignModify;
	routine->ExplainForeignModify = afdwExplainForeignModify;
}
