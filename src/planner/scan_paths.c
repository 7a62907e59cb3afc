/*-------------------------------------------------------------------------
 *
 * scan_paths.c
 *		The planner of a scan of one foreign table: its size, paths, costs
 *		and plan.
 *
 * Its options (read through options.c), its conditions split into those
 * shipped and those checked locally (shippable.c decides), its paths and
 * costs, and the plan, whose private list (plan_private.c) carries the remote
 * SQL and the way of reading to the execution (scan.c).  Joins and aggregates
 * are join_paths.c's and aggregate_paths.c's; sorted paths and the LIMIT are
 * order_limit.c's.  Planner layer: calls the layers below, never the
 * execution's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "fmgr.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "async_fdw.h"

static bool remote_estimate(PlannerInfo *root, RelOptInfo *baserel, AfdwRelInfo *fp,
							Oid foreigntableid, double *rows);

/*
 * has_user_mapping
 *		Whether USERID, or PUBLIC, has a user mapping for SERVERID.
 */
static bool
has_user_mapping(Oid userid, Oid serverid)
{
	return SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(userid),
								 ObjectIdGetDatum(serverid)) ||
		SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
							  ObjectIdGetDatum(serverid));
}

/*
 * read_copy
 *		The server whose copy a scan of TABLE reads: its own for a table
 *		that is not replicated; for a replicated one (option copies), the
 *		copy on the server that most of the query's other foreign tables
 *		of async_fdw are on (so that their joins can go to it whole), the
 *		sessions spread over the copies where several are as good (by
 *		process ID), among those USERID has a user mapping for.
 */
static Oid
read_copy(PlannerInfo *root, ForeignTable *table, Oid userid)
{
	List	   *copies = afdw_copy_servers(table);
	int		   *uses;
	int			best = -1;
	int			ties = 0;
	int			pick;
	int			i;
	ListCell   *lc;

	if (copies == NIL)
		return table->serverid;
	uses = palloc0(sizeof(int) * list_length(copies));
	for (int rti = 1; rti < root->simple_rel_array_size; rti++)
	{
		RangeTblEntry *rte = root->simple_rte_array[rti];

		if (rte == NULL || rte->rtekind != RTE_RELATION ||
			rte->relkind != RELKIND_FOREIGN_TABLE || rte->relid == table->relid ||
			!afdw_table_reads_ours(rte->relid, false))
			continue;
		i = 0;
		foreach(lc, copies)
		{
			if (lfirst_oid(lc) == GetForeignServerIdByRelId(rte->relid))
				uses[i]++;
			i++;
		}
	}
	/* The most used copies that the user may reach, and how many tie. */
	i = 0;
	foreach(lc, copies)
	{
		if (i == 0 || has_user_mapping(userid, lfirst_oid(lc)))
		{
			if (uses[i] > best)
			{
				best = uses[i];
				ties = 0;
			}
			if (uses[i] == best)
				ties++;
		}
		i++;
	}
	pick = MyProcPid % ties;
	i = 0;
	foreach(lc, copies)
	{
		if ((i == 0 || has_user_mapping(userid, lfirst_oid(lc))) &&
			uses[i] == best && pick-- == 0)
			return lfirst_oid(lc);
		i++;
	}
	return table->serverid;		/* not reached */
}

/*
 * afdwGetForeignRelSize
 *		Look up the relation's options, split its conditions into remote and
 *		local ones, and estimate its size.
 */
void
afdwGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	AfdwRelInfo *fp = palloc0(sizeof(AfdwRelInfo));
	Oid			userid;
	ListCell   *lc;

	baserel->fdw_private = fp;

	/* The first query of a session: see aggregate_paths.c. */
	afdw_late_partitionwise(root);

	fp->table = GetForeignTable(foreigntableid);
	userid = OidIsValid(baserel->userid) ? baserel->userid : GetUserId();
	/*
	 * A replicated table is read from one of its copies (see read_copy),
	 * but as the target of an UPDATE or DELETE (itself, or as a child of
	 * the target) on its own server, which the change reaches first
	 * (replica_writes.c).
	 */
	fp->server = GetForeignServer(bms_is_member((int) baserel->relid,
												root->all_result_relids) ?
								  fp->table->serverid :
								  read_copy(root, fp->table, userid));
	baserel->serverid = fp->server->serverid;
	fp->user = GetUserMapping(userid, fp->server->serverid);

	/* Table options override server options. */
	fp->fetch_size = afdw_fetch_size_option(fp->server->options,
											AFDW_DEFAULT_FETCH_SIZE);
	fp->fetch_size = afdw_fetch_size_option(fp->table->options, fp->fetch_size);
	fp->fetch_mode = afdw_fetch_mode_option(fp->server->options, AFDW_FETCH_AUTO);
	fp->fetch_mode = afdw_fetch_mode_option(fp->table->options, fp->fetch_mode);
	fp->async_capable = afdw_bool_option(fp->server->options, "async_capable", true);
	fp->async_capable = afdw_bool_option(fp->table->options, "async_capable",
										 fp->async_capable);
	fp->fdw_startup_cost = afdw_real_option(fp->server->options, "fdw_startup_cost",
											AFDW_DEFAULT_STARTUP_COST);
	fp->fdw_tuple_cost = afdw_real_option(fp->server->options, "fdw_tuple_cost",
										  AFDW_DEFAULT_TUPLE_COST);

	fp->extensions = afdw_extensions_option(fp->server->options);
	fp->use_remote_estimate = afdw_bool_option(fp->server->options,
											   "use_remote_estimate", false);
	fp->use_remote_estimate = afdw_bool_option(fp->table->options,
											   "use_remote_estimate",
											   fp->use_remote_estimate);

	afdw_classify_conditions(root, baserel, baserel->baserestrictinfo,
							 &fp->remote_conds, &fp->local_conds);

	/* The columns to fetch: those needed above, and by local conditions. */
	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid,
				   &fp->attrs_used);
	foreach(lc, fp->local_conds)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		pull_varattnos((Node *) ri->clause, baserel->relid, &fp->attrs_used);
	}

	cost_qual_eval(&fp->local_conds_cost, fp->local_conds, root);
	fp->local_conds_sel = clauselist_selectivity(root, fp->local_conds,
												 baserel->relid, JOIN_INNER, NULL);

	/*
	 * A table never analyzed has no row count: assume ten pages of rows of
	 * the estimated width, a modest size that neither hides the table from
	 * the planner nor makes it look huge.
	 */
	if (baserel->tuples < 0)
	{
		baserel->pages = 10;
		baserel->tuples = (10.0 * BLCKSZ) /
			(baserel->reltarget->width + MAXALIGN(SizeofHeapTupleHeader));
	}

	set_baserel_size_estimates(root, baserel);

	/* The remote server's own estimate of what it returns. */
	if (fp->use_remote_estimate)
	{
		double		remote_rows;

		if (remote_estimate(root, baserel, fp, foreigntableid, &remote_rows))
			baserel->rows = clamp_row_est(remote_rows * fp->local_conds_sel);
	}
}

/*
 * remote_estimate
 *		Ask the remote server to EXPLAIN the scan of BASEREL (its remote
 *		conditions, the columns it reads) and keep its costs in FP, with the
 *		rows it expects in *ROWS; false, with nothing asked, when the remote
 *		query has parameters, whose values are not known when planning.
 */
static bool
remote_estimate(PlannerInfo *root, RelOptInfo *baserel, AfdwRelInfo *fp,
				Oid foreigntableid, double *rows)
{
	StringInfoData sql;
	List	   *retrieved_attrs = NIL;
	List	   *params = NIL;
	Relation	rel;
	AfdwConn   *conn;
	PGresult   *volatile res = NULL;
	double		startup = 0;
	double		total = 0;
	volatile int found = 0;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "EXPLAIN ");
	rel = table_open(foreigntableid, NoLock);
	afdw_deparse_select(&sql, root, baserel, rel, fp->attrs_used, fp->remote_conds,
						&retrieved_attrs, &params);
	table_close(rel, NoLock);
	if (params != NIL)
		return false;

	conn = afdw_get_connection(fp->user);
	PG_TRY();
	{
		const char *line;
		const char *p;

		res = afdw_run_query(conn, sql.data, 0, NULL);
		/* The first line: "... (cost=S..T rows=R width=W)". */
		line = PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "";
		p = strrchr(line, '(');
		if (p != NULL)
			found = sscanf(p, "(cost=%lf..%lf rows=%lf", &startup, &total, rows);
	}
	PG_FINALLY();
	{
		PQclear(res);
		afdw_release_connection(conn);
	}
	PG_END_TRY();

	if (found != 3 || !(startup >= 0 && total >= startup && total < 1e300 &&
						*rows >= 0 && *rows < 1e300))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("could not read the remote server's estimate for foreign table \"%s\"",
						get_rel_name(foreigntableid)),
				 errdetail("Its EXPLAIN did not end its first line with (cost=...rows=...)."),
				 errhint("Set \"use_remote_estimate\" to false for this table or its server.")));
	fp->remote_estimated = true;
	fp->remote_startup = startup;
	fp->remote_total = total;
	return true;
}

/*
 * estimate_costs
 *		Startup and total cost of a scan of BASEREL returning ROWS rows.
 *
 * The remote side costs what its EXPLAIN said (use_remote_estimate), or a
 * scan of the whole table; every row that passes the remote conditions
 * crosses the network at fdw_tuple_cost, and local conditions are applied
 * to it.  A parameterized scan is costed with the plain scan's remote
 * estimate, for want of the parameters' values.
 */
static void
estimate_costs(RelOptInfo *baserel, AfdwRelInfo *fp, double rows, Cost *startup, Cost *total)
{
	double		retrieved = clamp_row_est(rows / Max(fp->local_conds_sel, 1e-10));
	Cost		run;

	*startup = fp->fdw_startup_cost + fp->local_conds_cost.startup +
		baserel->reltarget->cost.startup;

	/* The remote work: its own estimate, or a scan of the whole table. */
	if (fp->remote_estimated)
	{
		*startup += fp->remote_startup;
		run = fp->remote_total - fp->remote_startup;
	}
	else
		run = seq_page_cost * baserel->pages + cpu_tuple_cost * baserel->tuples;
	run += (fp->fdw_tuple_cost + cpu_tuple_cost +
			fp->local_conds_cost.per_tuple) * retrieved;
	run += baserel->reltarget->cost.per_tuple * rows;

	*total = *startup + run;
}

/*
 * remote_read_cost
 *		What the remote server's read of BASEREL's rows costs, before any
 *		is sent: its own estimate, or a scan of the whole table.
 */
static Cost
remote_read_cost(RelOptInfo *baserel, AfdwRelInfo *fp)
{
	if (fp->remote_estimated)
		return fp->remote_total - fp->remote_startup;
	return seq_page_cost * baserel->pages + cpu_tuple_cost * baserel->tuples;
}

/*
 * add_param_path
 *		Add a path of BASEREL parameterized by REQUIRED_OUTER, unless one is
 *		there already.
 */
static void
add_param_path(PlannerInfo *root, RelOptInfo *baserel, AfdwRelInfo *fp,
			   Relids required_outer, List **seen)
{
	ParamPathInfo *ppi;
	Cost		startup;
	Cost		total;

	if (bms_is_empty(required_outer))
		return;
	ppi = get_baserel_parampathinfo(root, baserel, required_outer);
	if (list_member_ptr(*seen, ppi))
		return;
	*seen = lappend(*seen, ppi);

	estimate_costs(baserel, fp, ppi->ppi_rows, &startup, &total);
	afdw_offer_path(root, baserel, (Path *)
			 afdw_scan_path(root, baserel, NULL, ppi->ppi_rows,
									 startup, total, NIL, ppi->ppi_req_outer,
									 NULL, NIL));
}

/*
 * ec_member_is_column
 *		generate_implied_equalities_for_column callback: true for a member
 *		that is the column *(AttrNumber *) ARG of REL.
 */
static bool
ec_member_is_column(PlannerInfo *root pg_attribute_unused(), RelOptInfo *rel,
					EquivalenceClass *ec pg_attribute_unused(),
					EquivalenceMember *em, void *arg)
{
	Expr	   *expr = em->em_expr;

	while (IsA(expr, RelabelType))
		expr = ((RelabelType *) expr)->arg;

	return IsA(expr, Var) &&
		((Var *) expr)->varno == (int) rel->relid &&
		((Var *) expr)->varlevelsup == 0 &&
		((Var *) expr)->varattno == *(AttrNumber *) arg;
}

/*
 * sortable
 *		True if the remote server can order BASEREL's rows by every path key
 *		of PATHKEYS (afdw_sort_key) that is not a constant of its rows
 *		(afdw_constant_key: a UNION ALL branch's 1 AS type, not sent).
 */
static bool
sortable(RelOptInfo *baserel, List *pathkeys)
{
	ListCell   *lc;

	foreach(lc, pathkeys)
	{
		bool		descending;
		bool		nulls_first;

		if (!afdw_constant_key(baserel, (PathKey *) lfirst(lc)) &&
			afdw_sort_key(baserel, (PathKey *) lfirst(lc), &descending,
						  &nulls_first) == 0)
			return false;
	}
	return true;
}

/*
 * afdwGetForeignPaths
 *		Add the plain path and paths parameterized by join clauses that can
 *		be sent as remote parameters (nested loops with the foreign table
 *		inside).
 */
void
afdwGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) baserel->fdw_private;
	Cost		startup;
	Cost		total;
	List	   *seen = NIL;
	ListCell   *lc;

	estimate_costs(baserel, fp, baserel->rows, &startup, &total);
	afdw_offer_path(root, baserel, (Path *)
			 afdw_scan_path(root, baserel, NULL, baserel->rows,
									 startup, total, NIL,
									 baserel->lateral_relids, NULL, NIL));

	/*
	 * The query's order, sorted by the remote server when it sorts exactly
	 * as the local one (afdw_sort_key): a partition's scan under a
	 * MergeAppend, or a table's under an ORDER BY, then needs no local
	 * sort.  The remote read and sort end before the first row comes;
	 * the rows then come as unsorted ones do, so that a LIMIT above reads
	 * only the first ones (afdw_remote_sort_cost).
	 */
	if (root->query_pathkeys != NIL && sortable(baserel, root->query_pathkeys))
	{
		List	   *sent = NIL;
		Cost		read = 0;
		Cost		sort = 0;

		foreach(lc, root->query_pathkeys)
		{
			if (!afdw_constant_key(baserel, (PathKey *) lfirst(lc)))
				sent = lappend(sent, lfirst(lc));
		}
		/* With nothing to sort, the rows come as the unsorted path's. */
		if (sent != NIL)
		{
			read = remote_read_cost(baserel, fp);
			sort = afdw_remote_sort_cost(root, sent, baserel->rows,
										 baserel->reltarget->width,
										 root->limit_tuples);
		}
		afdw_offer_path(root, baserel, (Path *)
				 afdw_scan_path(root, baserel, NULL, baserel->rows,
								startup + read + sort, total + sort,
								root->query_pathkeys,
								baserel->lateral_relids, NULL, NIL));
	}
	/* Orders a merge join could use (with remote estimates only). */
	afdw_add_merge_paths(root, baserel, startup + remote_read_cost(baserel, fp),
						 total);

	/* Join clauses that are not equivalences. */
	foreach(lc, baserel->joininfo)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
		Relids		outer;

		if (!join_clause_is_movable_to(ri, baserel) ||
			!afdw_is_shippable(root, baserel, ri->clause))
			continue;
		outer = bms_union(ri->clause_relids, baserel->lateral_relids);
		outer = bms_del_member(outer, baserel->relid);
		add_param_path(root, baserel, fp, outer, &seen);
	}

	/* Equivalences: one candidate per column that takes part in one. */
	if (baserel->has_eclass_joins)
	{
		Relation	rel = table_open(foreigntableid, NoLock);
		int			natts = RelationGetDescr(rel)->natts;

		table_close(rel, NoLock);
		for (AttrNumber attno = 1; attno <= natts; attno++)
		{
			List	   *clauses;
			ListCell   *lc2;

			clauses = generate_implied_equalities_for_column(root, baserel,
															 ec_member_is_column,
															 &attno,
															 baserel->lateral_referencers);
			foreach(lc2, clauses)
			{
				RestrictInfo *ri = lfirst_node(RestrictInfo, lc2);
				Relids		outer;

				if (!afdw_is_shippable(root, baserel, ri->clause))
					continue;
				outer = bms_union(ri->clause_relids, baserel->lateral_relids);
				outer = bms_del_member(outer, baserel->relid);
				add_param_path(root, baserel, fp, outer, &seen);
			}
		}
	}
}

/*
 * limit_to_send
 *		True if the remote query of BASEREL's scan on PATH, whose conditions
 *		LOCAL_EXPRS are checked locally and which sends PARAMS, may return
 *		only the first *LIMIT rows, the LIMIT plus the OFFSET of the query.
 *
 * The local Limit node stays; the remote one only spares rows that would
 * be thrown away.  That holds when the query reads only this table (or,
 * for a partition or an inheritance child, only its parent), so that no
 * join or local condition can drop rows between the scan and the Limit,
 * and the scan returns the query's order if it has one: each child of an
 * Append or a Merge Append then returns at most the rows the Limit could
 * take from it.  Not with a LIMIT that is not a constant, WITH TIES (a tie
 * past the limit counts), row locks, or a parameterized scan; nor with
 * parameters in the remote query, whose executions have a LIMIT of their
 * own (scan_commands.c).
 */
static bool
limit_to_send(PlannerInfo *root, RelOptInfo *baserel, ForeignPath *path,
			  List *local_exprs, List *params, int64 *limit)
{
	Relids		top = baserel->top_parent_relids != NULL ?
		baserel->top_parent_relids : baserel->relids;

	if (root->limit_tuples < 1 || root->limit_tuples > (double) PG_INT32_MAX ||
		root->parse->limitOption == LIMIT_OPTION_WITH_TIES ||
		root->parse->rowMarks != NIL || path->path.param_info != NULL ||
		params != NIL || local_exprs != NIL ||
		!bms_equal(top, root->all_baserels))
		return false;
	if (root->query_pathkeys != NIL &&
		!pathkeys_contained_in(root->query_pathkeys, path->path.pathkeys))
		return false;
	*limit = (int64) root->limit_tuples;
	return true;
}

/*
 * afdwGetForeignPlan
 *		Build the ForeignScan: the remote SQL with every shippable condition,
 *		including join clauses of a parameterized path, and the local rest.
 */
ForeignScan *
afdwGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
				   ForeignPath *best_path, List *tlist, List *scan_clauses,
				   Plan *outer_plan)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) baserel->fdw_private;
	List	   *remote_conds = NIL;
	List	   *remote_exprs = NIL;
	List	   *local_exprs = NIL;
	List	   *retrieved_attrs = NIL;
	List	   *params = NIL;
	Bitmapset  *attrs_used = bms_copy(fp->attrs_used);
	StringInfoData sql;
	Relation	rel;
	ListCell   *lc;
	bool		stream;
	char	   *outer_order = "";
	int64		limit;
	int64		sent_limit = -1;
	List	   *key_conds;
	List	   *key_slots = NIL;
	int			key_at;
	ForeignScan *scan;

	/* The remote aggregate of a grouping relation (aggregate_paths.c), a join. */
	if (fp->input_rel != NULL)
		return afdw_finish_remote_plan(root, baserel, &best_path->path,
									   afdw_grouping_plan(root, baserel, tlist,
														  outer_plan));
	if (fp->outer_rel != NULL)
		return afdw_join_lock_rows(root, baserel,
								   afdw_finish_remote_plan(root, baserel,
														   &best_path->path,
														   afdw_join_plan(root, baserel,
																		  tlist,
																		  outer_plan,
																		  best_path->path.param_info != NULL)));

	/*
	 * Streaming pays off for scans read to the end.  A parameterized scan
	 * is rescanned with new values, and a query with a LIMIT, a cursor or
	 * an EXISTS (a tuple fraction) may stop early: those use a cursor.
	 */
	if (fp->fetch_mode == AFDW_FETCH_AUTO)
		stream = best_path->path.param_info == NULL && root->tuple_fraction <= 0;
	else
		stream = (fp->fetch_mode == AFDW_FETCH_STREAM);

	foreach(lc, scan_clauses)
	{
		RestrictInfo *ri = lfirst_node(RestrictInfo, lc);

		/* Gating quals are handled above the scan. */
		if (ri->pseudoconstant)
			continue;

		if (list_member_ptr(fp->remote_conds, ri) ||
			(!list_member_ptr(fp->local_conds, ri) &&
			 afdw_is_shippable(root, baserel, ri->clause)))
		{
			remote_conds = lappend(remote_conds, ri);
			remote_exprs = lappend(remote_exprs, ri->clause);
		}
		else
		{
			local_exprs = lappend(local_exprs, ri->clause);
			pull_varattnos((Node *) ri->clause, baserel->relid, &attrs_used);
		}
	}

	/* The keys of a small table joined to it (pushed_keys.c). */
	key_conds = afdw_key_conditions(root, baserel, best_path);
	remote_conds = list_concat(remote_conds, key_conds);

	rel = table_open(foreigntableid, NoLock);
	initStringInfo(&sql);
	afdw_deparse_select(&sql, root, baserel, rel, attrs_used, remote_conds,
						&retrieved_attrs, &params);
	key_at = sql.len;
	if (best_path->path.pathkeys != NIL)
		outer_order = afdw_deparse_order_by(&sql, baserel, rel,
											best_path->path.pathkeys,
											retrieved_attrs);
	if (afdw_is_final_path(&best_path->path))
	{
		if (local_exprs != NIL)
			elog(ERROR, "the LIMIT of a scan with local conditions cannot be sent");
		afdw_deparse_limit(&sql, root, baserel, rel, &params);
	}
	else if (limit_to_send(root, baserel, best_path, local_exprs, params, &limit))
	{
		appendStringInfo(&sql, " LIMIT " INT64_FORMAT, limit);
		sent_limit = limit;
	}

	/*
	 * The columns that may take the keys of a hash join's inner side at
	 * run time (hash_join_keys.c): not with a LIMIT, which the keys would make
	 * return other rows.  A small table's keys may be there too: both
	 * only drop rows that join nothing.
	 */
	if (sent_limit < 0 && !afdw_is_final_path(&best_path->path))
		key_slots = afdw_key_slots(root, baserel, rel, best_path, params, key_conds);
	table_close(rel, NoLock);

	/*
	 * Rows locked by SELECT ... FOR UPDATE/SHARE are locked remotely as
	 * they are fetched.  Through a cursor: a stream abandoned early (a
	 * LIMIT, an EXISTS) is rolled back to its savepoint, which would
	 * release the locks of the rows already returned.
	 */
	if (afdw_deparse_locking_clause(&sql, root, baserel))
		stream = false;

	scan = make_foreignscan(tlist, local_exprs, baserel->relid, params,
							afdw_make_scan_private(sql.data, retrieved_attrs,
												   fp->fetch_size, stream,
												   outer_order, ""),
							NIL, remote_exprs, outer_plan);
	if (afdw_is_final_path(&best_path->path))
		afdw_mark_own_limit(root, scan);
	else if (sent_limit >= 0)
		afdw_mark_limit_bound(scan, sent_limit);
	if (key_slots != NIL)
		afdw_set_key_slots(scan, key_at, remote_conds != NIL, key_slots);
	return scan;
}
