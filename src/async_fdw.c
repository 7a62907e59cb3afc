/*-------------------------------------------------------------------------
 *
 * async_fdw.c
 *		Module entry point and the FDW handler: the top of the layers.
 *
 * _PG_init defines the settings and starts what the layers below need at load
 * (planner hooks, two-phase commit, the recovery worker, the connection
 * budget); async_fdw_handler hands PostgreSQL the callbacks of the planner
 * (scan_paths.c, join_paths.c, aggregate_paths.c), of the execution (scan.c,
 * analyze.c, modify_rows.c, direct_modify.c, truncate.c, import_schema.c).
 * Nothing calls into this file (scripts/check_layers.py).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "foreign/fdwapi.h"
#include "utils/guc.h"

#include "async_fdw.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* async_fdw.application_name: see afdw_application_name in async_fdw.h. */
char	   *afdw_application_name = NULL;

/*
 * _PG_init
 *		Define async_fdw's settings and reserve their prefix; when
 *		preloaded, register the recovery worker and set up the connection
 *		budget's shared memory.
 */
void
_PG_init(void)
{
	DefineCustomStringVariable("async_fdw.application_name",
							   "Sets the application name used on remote servers.",
							   "Overrides the server's application_name option; escapes such as %u and %d are replaced. Takes effect on new connections.",
							   &afdw_application_name,
							   "",
							   PGC_USERSET,
							   0,
							   NULL, NULL, NULL);

	afdw_upper_init();
	afdw_join_init();
	afdw_copies_init();
	afdw_keys_init();
	afdw_decorrelate_init();
	afdw_collect_init();
	afdw_combine_init();
	afdw_xact_callbacks_init();
	afdw_twophase_init();
	afdw_fence_init();
	afdw_visibility_init();
	afdw_recovery_worker_init();
	MarkGUCPrefixReserved("async_fdw");
	afdw_budget_preload();
	afdw_fence_preload();
}

PG_FUNCTION_INFO_V1(async_fdw_handler);

/*
 * async_fdw_handler
 *		The FdwRoutine of async_fdw.
 */
Datum
async_fdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *routine = makeNode(FdwRoutine);

	routine->GetForeignRelSize = afdwGetForeignRelSize;
	routine->GetForeignPaths = afdwGetForeignPaths;
	routine->GetForeignPlan = afdwGetForeignPlan;
	routine->GetForeignUpperPaths = afdwGetForeignUpperPaths;
	routine->GetForeignJoinPaths = afdwGetForeignJoinPaths;
	routine->ImportForeignSchema = afdwImportForeignSchema;
	afdw_scan_routines(routine);
	afdw_analyze_routines(routine);
	afdw_modify_routines(routine);
	routine->ExecForeignTruncate = afdwExecForeignTruncate;
	routine->PlanDirectModify = afdwPlanDirectModify;
	afdw_direct_routines(routine);

	PG_RETURN_POINTER(routine);
}
