/*-------------------------------------------------------------------------
 *
 * remote_rels.c
 *		What the planner's files share about async_fdw's relations:
 *		whether a relation, or a plan's server, is async_fdw's (by its
 *		FdwRoutine), the state of a join or an aggregate the remote server
 *		computes from another relation's, and the parameters of its remote
 *		query kept out of its select list.
 *
 * Planner layer: called by join_paths.c, aggregate_paths.c, pushed_keys.c
 * and hash_join_keys.c, which scan_paths.c calls; it calls no file of the
 * planner but direct_modify_plan.c's callback it compares (see
 * afdw_routine_is_ours).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "foreign/fdwapi.h"
#include "optimizer/tlist.h"

#include "async_fdw.h"

/*
 * afdw_routine_is_ours
 *		Whether ROUTINE, the FdwRoutine of a relation or of a plan's
 *		server, is async_fdw's: the one async_fdw_handler fills.
 *
 * The handler gives every routine of ours the same callbacks, and no other
 * wrapper's routine has any of them: one tells ours.  It is
 * afdwPlanDirectModify, whose file is below the files that ask (not
 * afdwGetForeignPlan: scan_paths.c calls those files).
 */
bool
afdw_routine_is_ours(FdwRoutine *routine)
{
	return routine->PlanDirectModify == afdwPlanDirectModify;
}

/*
 * afdw_derived_relinfo
 *		The planner-side state of a relation the remote server computes
 *		from FROM's (a join, an aggregate): the same server, user mapping
 *		and options; the rest is the caller's to fill.
 */
AfdwRelInfo *
afdw_derived_relinfo(AfdwRelInfo *from)
{
	AfdwRelInfo *fp = palloc0(sizeof(AfdwRelInfo));

	fp->server = from->server;
	fp->user = from->user;
	fp->fetch_size = from->fetch_size;
	fp->fetch_mode = from->fetch_mode;
	fp->fdw_startup_cost = from->fdw_startup_cost;
	fp->fdw_tuple_cost = from->fdw_tuple_cost;
	fp->async_capable = from->async_capable;
	fp->extensions = from->extensions;
	fp->use_remote_estimate = from->use_remote_estimate;
	return fp;
}

/*
 * afdw_check_params_apart
 *		Raise an internal error if an expression of PARAMS (a scan's
 *		fdw_exprs, the values sent as $1, $2, ...) is an item of its scan
 *		target list SCAN_TLIST.
 *
 * set_plan_references would turn such a parameter into a reference to the
 * scan's own output, which is read only after the parameters are sent:
 * the scan would read a tuple that is not there.  The planners of remote
 * joins and aggregates keep parameters out of their select lists (see
 * aggregate_paths.c's grouping_ok); this keeps a slip from becoming a crash.
 */
void
afdw_check_params_apart(List *params, List *scan_tlist)
{
	ListCell   *lc;

	foreach(lc, params)
	{
		if (tlist_member((Expr *) lfirst(lc), scan_tlist) != NULL)
			elog(ERROR, "parameter of a remote query is also in its select list");
	}
}
