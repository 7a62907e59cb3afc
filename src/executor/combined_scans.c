/*-------------------------------------------------------------------------
 *
 * combined_scans.c
 *		One remote query for the small scans that share a connection under
 *		one Append: which scans may be combined, and the combined query.
 *
 * A table partitioned by time as well as by shard puts hundreds of
 * partitions on each server.  Their scans under an asynchronous Append
 * share the server's few connections and take turns on them, one remote
 * statement and one round trip each: 256 partial aggregates of one
 * shard cost 256 round trips, where the shard itself would run them as
 * one statement.  So the scans of one Append that share a connection,
 * each expected to return at most fetch_size rows, send their queries as
 * one: (q1) UNION ALL (q2) ... .  The first of them, the leader, reads
 * all the rows; the others return none.  An Append returns the union of
 * its children's rows in no particular order, so which child returns a
 * row does not matter, provided each row is made as its own scan would
 * have made it: the scans combined have the same columns (types, typmods,
 * collations, as the leader converts them), the same projection, no
 * local condition and no tableoid (which names the scan's table), and
 * the scans have no parameters, run no key collector, lock no row and
 * read no row identity.  Nothing is combined under an Append that prunes
 * partitions while it runs (it may skip a child whose rows the leader
 * would return).  Rescans run each scan's own query.
 *
 * Setting async_fdw.combine_scans (on) turns it off.
 *
 * Neighbours: scan.c finds the scans of a statement still to be sent on
 * each connection and asks here which of them go with which; scan_commands.c
 * sends the leader's query as it sends any other.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "executor/executor.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "rewrite/rewriteManip.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

/* async_fdw.combine_scans */
static bool combine_scans = true;

/*
 * reads_tableoid
 *		Whether NODE refers to a table's tableoid column, which a scan
 *		computes from its own table.
 */
static bool
reads_tableoid(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
		return ((Var *) node)->varattno == TableOidAttributeNumber;
	return expression_tree_walker(node, reads_tableoid, context);
}

/*
 * afdw_combine_init
 *		Define async_fdw.combine_scans (from _PG_init).
 */
void
afdw_combine_init(void)
{
	DefineCustomBoolVariable("async_fdw.combine_scans",
							 "Sends the small scans of an Append that share a connection as one remote query.",
							 "Scans under one Append, each expected to return at most fetch_size rows, with no parameters, that share a connection, send one UNION ALL of their queries rather than one query each.",
							 &combine_scans,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
}

/*
 * afdw_combine_parent
 *		The Append under which the scan at PLACE, of a kind that
 *		afdw_may_combine accepts, may send its query with its siblings',
 *		or NULL: its Append, unless that prunes partitions.
 */
Plan *
afdw_combine_parent(const AfdwScanPlace *place)
{
	if (place == NULL || place->parent == NULL || !IsA(place->parent, Append) ||
		afdw_append_prunes((Append *) place->parent))
		return NULL;
	return place->parent;
}

/*
 * afdw_may_combine
 *		Whether ST, the scan of PLAN in ESTATE, is of a kind whose query
 *		may go with its siblings' (see the file's comment), before its
 *		place in the plan is looked at.
 */
bool
afdw_may_combine(AfdwScanState *st, ForeignScan *plan, EState *estate)
{
	PlannedStmt *stmt = estate->es_plannedstmt;

	return combine_scans && plan->scan.plan.async_capable &&
		estate->es_epq_active == NULL &&
		st->nparams == 0 && st->nkey_uses == 0 && !st->locks_rows &&
		plan->operation == CMD_SELECT && stmt->commandType == CMD_SELECT &&
		stmt->rowMarks == NIL && !stmt->hasModifyingCTE &&
		plan->scan.plan.plan_rows <= st->fetch_size &&
		plan->scan.plan.qual == NIL &&
		!reads_tableoid((Node *) plan->scan.plan.targetlist, NULL);
}

/*
 * same_projection
 *		Whether the scans of A and B project their scan tuples alike: the
 *		same target list, B's own table's columns read as A's.
 */
static bool
same_projection(ForeignScan *a, ForeignScan *b)
{
	List	   *tlist = b->scan.plan.targetlist;

	if (a->scan.scanrelid != b->scan.scanrelid)
	{
		tlist = copyObject(tlist);
		ChangeVarNodes((Node *) tlist, b->scan.scanrelid, a->scan.scanrelid, 0);
	}
	return equal(a->scan.plan.targetlist, tlist);
}

/*
 * rows_alike
 *		Whether the rows of B's query may be read by A, the leader, as B
 *		would read them: the same remote columns in the same local columns
 *		of the same types, projected alike.
 */
static bool
rows_alike(AfdwScanState *a, AfdwScanState *b)
{
	TupleDesc	da = a->node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	TupleDesc	db = b->node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;

	if (a->computed != b->computed || da->natts != db->natts ||
		!equal(a->retrieved_attrs, b->retrieved_attrs))
		return false;
	for (int i = 0; i < da->natts; i++)
	{
		Form_pg_attribute x = TupleDescAttr(da, i);
		Form_pg_attribute y = TupleDescAttr(db, i);

		if (x->attisdropped != y->attisdropped || x->atttypid != y->atttypid ||
			x->atttypmod != y->atttypmod || x->attcollation != y->attcollation)
			return false;
	}
	return same_projection((ForeignScan *) a->node->ss.ps.plan,
						   (ForeignScan *) b->node->ss.ps.plan);
}

/*
 * combine_queries
 *		Make LEADER's query carry the queries of the N scans of MEMBERS:
 *		the UNION ALL of them all, in the leader's memory, until a rescan
 *		gives it back its own.
 */
static void
combine_queries(AfdwScanState *leader, AfdwScanState **members, int n)
{
	StringInfoData sql;

	Assert(n > 0 && leader->sql == leader->plain_sql);
	initStringInfo(&sql);
	appendStringInfo(&sql, "(%s)", leader->sql);
	for (int i = 0; i < n; i++)
		appendStringInfo(&sql, " UNION ALL (%s)", members[i]->sql);
	leader->sql = MemoryContextStrdup(leader->scan_cxt, sql.data);
	pfree(sql.data);
	leader->carrying = n;
	leader->stats.carried += n;
	for (int i = 0; i < n; i++)
		members[i]->stats.absorbed++;
}

/*
 * afdw_combine_scans
 *		Give the queries of the N scans of SCANS (a statement's scans still
 *		waiting to start, in order, each with a combine_parent) that may go
 *		together to the first of them on each connection under each Append,
 *		the leader, which sends them as one; the others are marked absorbed.
 *
 * A leader's query goes when its connection is free, as any other.  A
 * group holds at most AFDW_COMBINE_MAX scans, which keeps the remote
 * statement of a server with thousands of partitions of a reasonable
 * size; past that, another leader starts another group.
 */
#define AFDW_COMBINE_MAX	128

void
afdw_combine_scans(AfdwScanState **scans, int n)
{
	AfdwScanState **leaders = NULL;
	AfdwScanState ***members = NULL;
	int		   *nmembers = NULL;
	int			ngroups = 0;
	int			maxgroups = 0;

	for (int k = 0; k < n; k++)
	{
		AfdwScanState *st = scans[k];
		int			g;

		for (g = 0; g < ngroups; g++)
		{
			AfdwScanState *leader = leaders[g];

			if (leader->conn == st->conn &&
				leader->combine_parent == st->combine_parent &&
				nmembers[g] < AFDW_COMBINE_MAX - 1 && rows_alike(leader, st))
				break;
		}
		if (g < ngroups)
		{
			members[g][nmembers[g]++] = st;
			st->absorbed = true;
			continue;
		}
		if (ngroups == maxgroups)
		{
			maxgroups = Max(8, maxgroups * 2);
			leaders = (leaders == NULL) ?
				palloc(sizeof(AfdwScanState *) * maxgroups) :
				repalloc(leaders, sizeof(AfdwScanState *) * maxgroups);
			members = (members == NULL) ?
				palloc(sizeof(AfdwScanState **) * maxgroups) :
				repalloc(members, sizeof(AfdwScanState **) * maxgroups);
			nmembers = (nmembers == NULL) ? palloc(sizeof(int) * maxgroups) :
				repalloc(nmembers, sizeof(int) * maxgroups);
		}
		leaders[ngroups] = st;
		members[ngroups] = palloc(sizeof(AfdwScanState *) * (AFDW_COMBINE_MAX - 1));
		nmembers[ngroups] = 0;
		ngroups++;
	}
	for (int g = 0; g < ngroups; g++)
	{
		if (nmembers[g] > 0)
			combine_queries(leaders[g], members[g], nmembers[g]);
		pfree(members[g]);
	}
	if (ngroups > 0)
	{
		pfree(leaders);
		pfree(members);
		pfree(nmembers);
	}
}
