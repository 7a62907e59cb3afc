/*-------------------------------------------------------------------------
 *
 * remote_rels.c
 *		What the planners of joins and aggregates share about the
 *		relations the remote server computes: the state of a join or an
 *		aggregate made from another relation's, and the parameters of its
 *		remote query kept out of its select list.
 *
 * Planner layer: called by join_paths.c and aggregate_paths.c, which
 * scan_paths.c calls; it calls no file of the planner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "optimizer/tlist.h"

#include "async_fdw.h"

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
