/*-------------------------------------------------------------------------
 *
 * replicated_joins.c
 *		Joins of partitions with replicated tables, each partition's made
 *		on its own server with that server's copy.
 *
 * A foreign table whose option copies names servers has the same rows on
 * each of them and on its own server (the dimension tables of a star
 * schema, which Citus calls reference tables).  A partitioned table whose
 * partitions are all async_fdw's, joined with such a table, is the union
 * of each partition's join with it; when every partition's server holds
 * a copy, each partition's join is sent whole to its server, reading the
 * copy there, and an Append takes them all, asynchronously.  The join of
 * that with another replicated table extends each partition's join in the
 * same way, so that a star join goes to every shard whole.
 *
 * The planner offers no such join itself (partitionwise joins need both
 * sides partitioned alike), so a set_join_pathlist_hook adds it: for each
 * partition, a join relation made here for that partition's join (its
 * target and conditions translated to the partition's columns, its server
 * the partition's), whose remote join path afdwGetForeignJoinPaths makes
 * with the replicated table read on that server; the Append of the
 * cheapest of each is offered for the whole join, to win on cost or not.
 * Only inner, left (the partitions preserved), semi- and anti-joins, in
 * queries that neither lock nor change rows; a join relation of a
 * partitionwise join (already a partition's) is left alone.
 *
 * Setting async_fdw.join_copies (on) turns it off.
 *
 * Neighbours: options.c reads the copies option; join_paths.c makes each
 * partition's remote join and says whether a relation's partitions are all
 * ours; scan.c runs each on the server its plan names (fs_server).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "miscadmin.h"
#include "optimizer/appendinfo.h"
#include "optimizer/cost.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planner.h"
#include "optimizer/prep.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "utils/guc.h"
#include "utils/selfuncs.h"

#include "async_fdw.h"

/* async_fdw.join_copies */
static bool join_copies = true;
static set_join_pathlist_hook_type prev_join_pathlist_hook = NULL;
static create_upper_paths_hook_type prev_upper_paths_hook = NULL;

/*
 * copy_joins_under
 *		The partitions' joins with replicated tables under PATH, when it is
 *		an Append of them made here (join_copies_paths), or a projection
 *		of one: their relations, in the Append's order; NIL otherwise.
 */
static List *
copy_joins_under(Path *path)
{
	AppendPath *append;
	List	   *parts = NIL;
	ListCell   *lc;

	if (IsA(path, ProjectionPath))
		path = ((ProjectionPath *) path)->subpath;
	if (!IsA(path, AppendPath))
		return NIL;
	append = (AppendPath *) path;
	if (append->subpaths == NIL || append->path.param_info != NULL)
		return NIL;
	foreach(lc, append->subpaths)
	{
		Path	   *sub = (Path *) lfirst(lc);
		RelOptInfo *part = sub->parent;

		/* Another wrapper's private state is not ours to read. */
		if (!IsA(sub, ForeignPath) || !IS_JOIN_REL(part) ||
			part->fdwroutine == NULL ||
			part->fdwroutine->GetForeignJoinPaths != afdwGetForeignJoinPaths ||
			part->fdw_private == NULL ||
			!((AfdwRelInfo *) part->fdw_private)->copy_join)
		{
			list_free(parts);
			return NIL;
		}
		parts = lappend(parts, part);
	}
	return parts;
}

/*
 * partition_joins
 *		The relations whose joins with a replicated table make REL's rows,
 *		one a partition: REL's partitions when it is a partitioned table
 *		(or a partitionwise join) whose partitions are all async_fdw's, or
 *		the partitions' joins under the Append of such a join made here
 *		(a join with another replicated table); NIL otherwise.  Pruned
 *		partitions are left out.
 */
static List *
partition_joins(RelOptInfo *rel)
{
	List	   *parts = NIL;
	ListCell   *lc;

	if (afdw_all_partitions_ours(rel))
	{
		for (int i = 0; i < rel->nparts; i++)
		{
			RelOptInfo *part = rel->part_rels[i];

			if (part != NULL && !IS_DUMMY_REL(part))
				parts = lappend(parts, part);
		}
		return parts;
	}
	foreach(lc, rel->pathlist)
	{
		parts = copy_joins_under((Path *) lfirst(lc));
		if (parts != NIL)
			return parts;
	}
	return NIL;
}

/*
 * partition_appinfos
 *		The AppendRelInfos that translate the partitioned tables' columns to
 *		those of the partitions among RELIDS; *N is set to their number.
 */
static AppendRelInfo **
partition_appinfos(PlannerInfo *root, Relids relids, int *n)
{
	AppendRelInfo **appinfos = palloc(sizeof(AppendRelInfo *) *
									  Max(bms_num_members(relids), 1));
	int			relid = -1;

	*n = 0;
	while ((relid = bms_next_member(relids, relid)) >= 0)
	{
		if (root->append_rel_array != NULL && root->append_rel_array[relid] != NULL)
			appinfos[(*n)++] = root->append_rel_array[relid];
	}
	return appinfos;
}

/*
 * copy_servers
 *		The servers on which every table of REL, a foreign table of
 *		async_fdw or a remote join of them, has a copy (each replicated):
 *		NIL when one is not.
 */
static List *
copy_servers(PlannerInfo *root, RelOptInfo *rel)
{
	List	   *servers = NIL;
	bool		first = true;
	int			relid = -1;

	while ((relid = bms_next_member(rel->relids, relid)) >= 0)
	{
		RangeTblEntry *rte = planner_rt_fetch(relid, root);
		List	   *copies;

		/* From 16 on a join's relids hold its outer joins too. */
		if (rte->rtekind != RTE_RELATION)
			continue;
		copies = afdw_copy_servers(GetForeignTable(rte->relid));
		if (first)
			servers = copies;
		else
		{
			List	   *both = NIL;
			ListCell   *lc;

			foreach(lc, servers)
			{
				if (list_member_oid(copies, lfirst_oid(lc)))
					both = lappend_oid(both, lfirst_oid(lc));
			}
			servers = both;
		}
		first = false;
		if (servers == NIL)
			break;
	}
	return servers;
}

/*
 * conds_sendable
 *		Whether every condition in CONDS (RestrictInfos or bare clauses),
 *		written for REL's tables on their own server, can be sent to the
 *		server REL's AfdwRelInfo now names: the value of an initplan or a
 *		subquery written into a remote query goes only to the server and
 *		user mapping that would run it, a function of an extension only to
 *		a server that declares the extension.
 */
static bool
conds_sendable(PlannerInfo *root, RelOptInfo *rel, List *conds)
{
	ListCell   *lc;

	foreach(lc, conds)
	{
		Node	   *cond = (Node *) lfirst(lc);

		if (IsA(cond, RestrictInfo))
			cond = (Node *) ((RestrictInfo *) cond)->clause;
		if (!afdw_is_shippable(root, rel, (Expr *) cond))
			return false;
	}
	return true;
}

/*
 * copy_on
 *		REL, a replicated foreign table of async_fdw or a remote join of
 *		them, as read from the copies on SERVER: a copy of its relation
 *		whose AfdwRelInfo (and those of a join's sides) names that server,
 *		the user mapping there and the extensions it declares; NULL when a
 *		condition sent with REL cannot be sent to SERVER (conds_sendable).
 */
static RelOptInfo *
copy_on(PlannerInfo *root, RelOptInfo *rel, Oid server)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) rel->fdw_private;
	RelOptInfo *copy = makeNode(RelOptInfo);
	AfdwRelInfo *cfp = palloc(sizeof(AfdwRelInfo));

	memcpy(copy, rel, sizeof(RelOptInfo));
	memcpy(cfp, fp, sizeof(AfdwRelInfo));
	cfp->server = GetForeignServer(server);
	cfp->user = GetUserMapping(OidIsValid(fp->user->userid) ? fp->user->userid :
							   (OidIsValid(rel->userid) ? rel->userid : GetUserId()),
							   server);
	cfp->extensions = afdw_extensions_option(cfp->server->options);
	copy->fdw_private = cfp;
	copy->serverid = server;
	if (fp->outer_rel != NULL)
	{
		cfp->outer_rel = copy_on(root, fp->outer_rel, server);
		cfp->inner_rel = copy_on(root, fp->inner_rel, server);
		if (cfp->outer_rel == NULL || cfp->inner_rel == NULL ||
			!conds_sendable(root, copy, fp->join_on) ||
			!conds_sendable(root, copy, fp->where_conds))
			return NULL;
	}
	if (!conds_sendable(root, copy, fp->remote_conds))
		return NULL;
	return copy;
}

/*
 * partition_join_path
 *		The cheapest remote join of PART, one partition's relation (or join)
 *		among OUTER's, with INNER, a replicated table or a remote join of
 *		such, whose copies are on SERVERS, made on PART's server from the
 *		copies there, as a part of
 *		JOINREL (the join of OUTER and INNER, of type JOINTYPE); NULL when
 *		it cannot be made so.
 */
static Path *
partition_join_path(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outer,
					RelOptInfo *part, RelOptInfo *inner, List *servers,
					JoinType jointype, JoinPathExtraData *extra)
{
	AfdwRelInfo *pfp = (AfdwRelInfo *) part->fdw_private;
	Oid			server = pfp->server->serverid;
	RelOptInfo *join;
	AppendRelInfo **appinfos;
	int			nappinfos;
	JoinPathExtraData part_extra;
	RelOptInfo *inner_copy;

	if (!list_member_oid(servers, server))
		return NULL;
	appinfos = partition_appinfos(root, part->relids, &nappinfos);

	/*
	 * The partition's join: JOINREL's target and conditions in the
	 * partition's columns, its share of JOINREL's rows, made on its server.
	 * It is no relation of the query's join search, only the parent of
	 * its own paths.
	 */
	join = makeNode(RelOptInfo);
	memcpy(join, joinrel, sizeof(RelOptInfo));
	join->reloptkind = RELOPT_OTHER_JOINREL;
	join->relids = bms_union(part->relids, inner->relids);
	afdw_set_parent_rel(join, joinrel);
	join->reltarget = copy_pathtarget(joinrel->reltarget);
	join->reltarget->exprs = (List *)
		adjust_appendrel_attrs(root, (Node *) joinrel->reltarget->exprs,
							   nappinfos, appinfos);
	join->rows = clamp_row_est(joinrel->rows * part->rows / Max(outer->rows, 1.0));
	join->pathlist = NIL;
	join->ppilist = NIL;
	join->partial_pathlist = NIL;
	join->cheapest_startup_path = NULL;
	join->cheapest_total_path = NULL;
	join->cheapest_unique_path = NULL;
	join->cheapest_parameterized_paths = NIL;
	join->joininfo = NIL;
	join->has_eclass_joins = false;
	join->fdwroutine = part->fdwroutine;
	join->fdw_private = NULL;
	join->serverid = server;
	join->part_scheme = NULL;
	join->nparts = 0;
	join->boundinfo = NULL;
	join->part_rels = NULL;
	join->partexprs = NULL;
	join->nullable_partexprs = NULL;
	join->consider_partitionwise_join = false;

	part_extra = *extra;
	part_extra.restrictlist = (List *)
		adjust_appendrel_attrs(root, (Node *) extra->restrictlist,
							   nappinfos, appinfos);
	inner_copy = copy_on(root, inner, server);
	if (inner_copy == NULL)
		return NULL;
	afdwGetForeignJoinPaths(root, join, part, inner_copy, jointype, &part_extra);
	if (join->pathlist == NIL || join->fdw_private == NULL)
		return NULL;
	((AfdwRelInfo *) join->fdw_private)->copy_join = true;
	set_cheapest(join);
	return join->cheapest_total_path;
}

/*
 * serial_excess
 *		How much more PATHS, the partitions' remote joins under one
 *		Append, cost when their remote work is counted one after the other
 *		(as an Append sums its children's costs) than when the servers work
 *		at once, as they do under an asynchronous Append: each server's
 *		joins one after the other, the servers side by side, so the remote
 *		work takes as long as the busiest server's.  What each row costs on
 *		this side (its transfer and conversion) stays summed.
 *
 * Without it each partition's join pays in full for reading its own copy
 * of the replicated tables, and a plan that reads them once here and
 * joins the partitions' rows on this side looks cheaper while it is
 * slower: TPC-H's Q5 and Q8 at the layout with replicated tables chose
 * such joins here (Q8: 63-108 ms against 36-41 for the whole join on
 * each shard, on 4 shards).
 */
static Cost
serial_excess(List *paths)
{
	Oid		   *servers = palloc(sizeof(Oid) * list_length(paths));
	Cost	   *work = palloc0(sizeof(Cost) * list_length(paths));
	int			nservers = 0;
	Cost		summed = 0;
	Cost		busiest = 0;
	ListCell   *lc;

	foreach(lc, paths)
	{
		Path	   *path = (Path *) lfirst(lc);
		AfdwRelInfo *fp = (AfdwRelInfo *) path->parent->fdw_private;
		Cost		remote;
		int			i;

		/* A remote aggregate's remote work is mostly its input join's. */
		if (fp->input_rel != NULL)
			fp = (AfdwRelInfo *) fp->input_rel->fdw_private;
		remote = Min(fp->remote_total, path->total_cost);

		for (i = 0; i < nservers; i++)
		{
			if (servers[i] == fp->server->serverid)
				break;
		}
		if (i == nservers)
			servers[nservers++] = fp->server->serverid;
		work[i] += remote;
		summed += remote;
		busiest = Max(busiest, work[i]);
	}
	pfree(servers);
	pfree(work);
	return summed - busiest;
}

/*
 * join_copies_paths
 *		set_join_pathlist_hook: offer for JOINREL, the join of OUTERREL and
 *		INNERREL of type JOINTYPE, the Append of each partition's join with
 *		the replicated table INNERREL made on the partition's server, when
 *		OUTERREL's partitions (or partitions' joins) are all async_fdw's on
 *		servers that hold a copy.
 */
static void
join_copies_paths(PlannerInfo *root, RelOptInfo *joinrel,
				  RelOptInfo *outerrel, RelOptInfo *innerrel,
				  JoinType jointype, JoinPathExtraData *extra)
{
	AfdwRelInfo *ifp = (AfdwRelInfo *) innerrel->fdw_private;
	List	   *parts;
	List	   *servers;
	List	   *paths = NIL;
	ListCell   *lc;
	AppendPath *append;

	if (prev_join_pathlist_hook != NULL)
		prev_join_pathlist_hook(root, joinrel, outerrel, innerrel, jointype,
								extra);
	/*
	 * The other side: a foreign table of ours, or a remote join of ours
	 * (offered, not a partition's), whose tables copy_servers reads.
	 */
	if (!join_copies || IS_OTHER_REL(joinrel) ||
		(jointype != JOIN_INNER && jointype != JOIN_LEFT &&
		 jointype != JOIN_SEMI && jointype != JOIN_ANTI) ||
		root->parse->commandType != CMD_SELECT || root->rowMarks != NIL ||
		(innerrel->reloptkind != RELOPT_BASEREL &&
		 innerrel->reloptkind != RELOPT_JOINREL) ||
		ifp == NULL || innerrel->fdwroutine == NULL ||
		innerrel->fdwroutine->GetForeignJoinPaths != afdwGetForeignJoinPaths ||
		(innerrel->reloptkind == RELOPT_JOINREL &&
		 (!ifp->join_offered || ifp->copy_join)))
		return;
	parts = partition_joins(outerrel);
	if (parts == NIL)
		return;
	servers = copy_servers(root, innerrel);
	if (servers == NIL)
		return;
	foreach(lc, parts)
	{
		Path	   *path = partition_join_path(root, joinrel, outerrel,
											   (RelOptInfo *) lfirst(lc), innerrel,
											   servers, jointype, extra);

		if (path == NULL)
			return;
		paths = lappend(paths, path);
	}
	append = create_append_path(root, joinrel, paths, NIL, NIL, NULL, 0, false,
								-1);
	append->path.total_cost -= serial_excess(paths);
	add_path(joinrel, (Path *) append);
}

/*
 * partial_grouping_target
 *		The target of the partial aggregation that computes GROUPED, the
 *		target of a grouping relation whose HAVING is HAVING: the query's
 *		grouping items, then the aggregates, columns and placeholders its other items
 *		and HAVING are computed from, each aggregate made partial (its state,
 *		serialized, for a Finalize Aggregate to combine).
 */
static PathTarget *
partial_grouping_target(PlannerInfo *root, PathTarget *grouped, Node *having)
{
	PathTarget *partial = create_empty_pathtarget();
	List	   *others = NIL;
	List	   *parts;
	ListCell   *lc;
	int			i = 0;

	foreach(lc, grouped->exprs)
	{
		Expr	   *expr = (Expr *) lfirst(lc);
		Index		sgref = get_pathtarget_sortgroupref(grouped, i++);

		/*
		 * Every item of the query's GROUP BY, also one the planner found
		 * constant (from 16): the remote GROUP BY keeps it, so that no rows
		 * make no group there either.
		 */
		if (sgref != 0 &&
			get_sortgroupref_clause_noerr(sgref, root->parse->groupClause) != NULL)
			add_column_to_pathtarget(partial, expr, sgref);
		else
			others = lappend(others, expr);
	}
	if (having != NULL)
		others = lappend(others, having);
	parts = pull_var_clause((Node *) others,
							PVC_INCLUDE_AGGREGATES |
							PVC_RECURSE_WINDOWFUNCS |
							PVC_INCLUDE_PLACEHOLDERS);
	add_new_columns_to_pathtarget(partial, parts);
	foreach(lc, partial->exprs)
	{
		if (IsA(lfirst(lc), Aggref))
		{
			Aggref	   *agg = copyObject((Aggref *) lfirst(lc));

			mark_partial_aggref(agg, AGGSPLIT_INITIAL_SERIAL);
			lfirst(lc) = agg;
		}
	}
	return set_pathtarget_cost_width(root, partial);
}

/*
 * partition_partial_path
 *		The cheapest remote partial aggregate of PART, one partition's join
 *		with replicated tables (made by partition_join_path), computing
 *		PARTIAL (in the partitioned tables' columns) for the grouping that
 *		EXTRA describes; NULL when its server cannot compute it.
 */
static Path *
partition_partial_path(PlannerInfo *root, RelOptInfo *part, PathTarget *partial,
					   GroupPathExtraData *extra)
{
	RelOptInfo *grouped = makeNode(RelOptInfo);
	GroupPathExtraData part_extra = *extra;
	AppendRelInfo **appinfos;
	int			nappinfos;

	appinfos = partition_appinfos(root, part->relids, &nappinfos);
	grouped->reloptkind = RELOPT_OTHER_UPPER_REL;
	grouped->relids = bms_copy(part->relids);
	grouped->reltarget = copy_pathtarget(partial);
	grouped->reltarget->exprs = (List *)
		adjust_appendrel_attrs(root, (Node *) partial->exprs, nappinfos, appinfos);
	grouped->rows = part->rows;
	grouped->consider_startup = part->consider_startup;
	grouped->serverid = part->serverid;
	grouped->userid = part->userid;
	grouped->useridiscurrent = part->useridiscurrent;
	grouped->fdwroutine = part->fdwroutine;
	part_extra.havingQual =
		adjust_appendrel_attrs(root, extra->havingQual, nappinfos, appinfos);
	part_extra.targetList = (List *)
		adjust_appendrel_attrs(root, (Node *) extra->targetList, nappinfos,
							   appinfos);
	part_extra.patype = PARTITIONWISE_AGGREGATE_PARTIAL;
	pfree(appinfos);

	afdwGetForeignUpperPaths(root, UPPERREL_PARTIAL_GROUP_AGG, part, grouped,
							 &part_extra);
	if (grouped->pathlist == NIL)
		return NULL;
	set_cheapest(grouped);
	return grouped->cheapest_total_path;
}

/*
 * over_copy_joins
 *		Whether PATH, a path of a grouping relation, aggregates here the
 *		rows of an Append of the partitions' joins with replicated tables
 *		(through sorts and projections).
 */
static bool
over_copy_joins(Path *path)
{
	for (;;)
	{
		if (IsA(path, AggPath))
			path = ((AggPath *) path)->subpath;
		else if (IsA(path, GroupPath))
			path = ((GroupPath *) path)->subpath;
		else if (IsA(path, SortPath) || IsA(path, IncrementalSortPath))
			path = ((SortPath *) path)->subpath;
		else if (IsA(path, ProjectionPath))
			path = ((ProjectionPath *) path)->subpath;
		else
			break;
	}
	return copy_joins_under(path) != NIL;
}

/*
 * copies_grouping_paths
 *		create_upper_paths_hook: for the grouping relation GROUPED of
 *		INPUT, when INPUT's rows can come from an Append of the partitions'
 *		joins with replicated tables (join_copies_paths), offer each
 *		partition's join partially aggregated on its server, the partial
 *		aggregates under an Append, and a Finalize Aggregate here: a shard
 *		sends its groups, not its joined rows.  (Partitionwise aggregation
 *		does this for a partitioned relation; INPUT is none, its partitions
 *		being the joins made here.)
 */
static void
copies_grouping_paths(PlannerInfo *root, UpperRelationKind stage,
					  RelOptInfo *input, RelOptInfo *grouped, void *extra)
{
	GroupPathExtraData *gx = (GroupPathExtraData *) extra;
	Query	   *parse = root->parse;
	List	   *group_clause = afdw_group_clause(root);
	List	   *parts = NIL;
	List	   *paths = NIL;
	PathTarget *partial;
	RelOptInfo *partial_rel;
	AppendPath *append;
	AggClauseCosts final_costs;
	double		ngroups;
	List	   *finals = NIL;
	bool		few = true;
	ListCell   *lc;

	if (prev_upper_paths_hook != NULL)
		prev_upper_paths_hook(root, stage, input, grouped, extra);
	if (!join_copies || stage != UPPERREL_GROUP_AGG || IS_OTHER_REL(input) ||
		(gx->flags & GROUPING_CAN_PARTIAL_AGG) == 0 ||
		parse->groupingSets != NIL || root->hasPseudoConstantQuals ||
		parse->commandType != CMD_SELECT || root->rowMarks != NIL)
		return;
	foreach(lc, input->pathlist)
	{
		parts = copy_joins_under((Path *) lfirst(lc));
		if (parts != NIL)
			break;
	}
	if (parts == NIL)
		return;

	partial = partial_grouping_target(root, grouped->reltarget, gx->havingQual);
	foreach(lc, parts)
	{
		Path	   *path = partition_partial_path(root, (RelOptInfo *) lfirst(lc),
												  partial, gx);

		if (path == NULL)
			return;
		if (path->rows > ((AfdwRelInfo *) path->parent->fdw_private)->fetch_size)
			few = false;
		paths = lappend(paths, path);
	}

	/* The relation of the partial aggregates' Append: theirs, all of them. */
	partial_rel = makeNode(RelOptInfo);
	partial_rel->reloptkind = RELOPT_UPPER_REL;
	partial_rel->relids = bms_copy(input->relids);
	partial_rel->reltarget = partial;
	append = create_append_path(root, partial_rel, paths, NIL, NIL, NULL, 0,
								false, -1);
	append->path.total_cost -= serial_excess(paths);

	MemSet(&final_costs, 0, sizeof(AggClauseCosts));
	get_agg_clause_costs(root, AGGSPLIT_FINAL_DESERIAL, &final_costs);
	if (group_clause == NIL)
		ngroups = 1;
	else
		ngroups = estimate_num_groups(root,
									  get_sortgrouplist_exprs(group_clause,
															  gx->targetList),
									  input->rows, NULL, NULL);

	/*
	 * A GROUP BY whose items the planner found constant (from 16: each
	 * fixed by a condition, or a parameter) groups by nothing, and still
	 * makes no group of no rows: sorted, without columns.
	 */
	if (group_clause == NIL)
		finals = lappend(finals,
						 create_agg_path(root, grouped, (Path *) append,
										 grouped->reltarget,
										 parse->groupClause != NIL ?
										 AGG_SORTED : AGG_PLAIN,
										 AGGSPLIT_FINAL_DESERIAL, NIL,
										 (List *) gx->havingQual, &final_costs,
										 ngroups));
	else
	{
		if (grouping_is_hashable(group_clause))
			finals = lappend(finals,
							 create_agg_path(root, grouped, (Path *) append,
											 grouped->reltarget, AGG_HASHED,
											 AGGSPLIT_FINAL_DESERIAL,
											 group_clause,
											 (List *) gx->havingQual,
											 &final_costs, ngroups));
		if (grouping_is_sortable(group_clause) && root->group_pathkeys != NIL)
			finals = lappend(finals,
							 create_agg_path(root, grouped, (Path *)
											 create_sort_path(root, grouped,
															  (Path *) append,
															  root->group_pathkeys,
															  -1.0),
											 grouped->reltarget, AGG_SORTED,
											 AGGSPLIT_FINAL_DESERIAL,
											 group_clause,
											 (List *) gx->havingQual,
											 &final_costs, ngroups));
	}
	if (finals == NIL)
		return;

	/*
	 * When each partition's groups are expected to fit in one batch
	 * (fetch_size, as for combined scans), the aggregates computed here
	 * from the same joins' rows give way.  The partial aggregates read the
	 * same joins on the same servers and send a group for each group of a
	 * partition's rows, one batch, however many rows the joins turn out to
	 * have; the estimates of those are often far too low (a LIKE, a join
	 * of several tables: TPC-H's Q9 expects 216 joined rows and gets
	 * 61,719), and while they are low the two plans cost about the same,
	 * so costs alone would keep the plan that sends every row.  With more
	 * groups, costs decide.
	 */
	if (few)
	{
		foreach(lc, grouped->pathlist)
		{
			if (over_copy_joins((Path *) lfirst(lc)))
				grouped->pathlist = foreach_delete_current(grouped->pathlist,
														   lc);
		}
	}
	foreach(lc, finals)
		add_path(grouped, (Path *) lfirst(lc));
}

/*
 * afdw_copies_init
 *		At load: the setting async_fdw.join_copies and its hook.
 */
void
afdw_copies_init(void)
{
	DefineCustomBoolVariable("async_fdw.join_copies",
							 "Joins each partition with a replicated table on the partition's server.",
							 "A join of a partitioned table whose partitions are async_fdw's with a foreign table whose option copies names every partition's server is offered as each partition's remote join with the copy on its server.",
							 &join_copies,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	prev_join_pathlist_hook = set_join_pathlist_hook;
	set_join_pathlist_hook = join_copies_paths;
	prev_upper_paths_hook = create_upper_paths_hook;
	create_upper_paths_hook = copies_grouping_paths;
}
