/*-------------------------------------------------------------------------
 *
 * explain.c
 *		EXPLAIN of async_fdw's foreign scans: the remote SQL and fetch mode
 *		with VERBOSE, and with ANALYZE what each scan did remotely.
 *
 * The counts come from the scan's statistics (AfdwScanStats), which the
 * scan files keep as they read: runs by read mode, rows, bytes, round trips,
 * time spent waiting, and how many scans shared the connection.
 *
 * The EXPLAIN of writes (modify_rows.c, direct_modify.c) adds where commits go
 * without the commit fence (afdw_explain_commit_fence).
 *
 * Neighbours: scan.c registers afdwExplainForeignScan with the other scan
 * callbacks; plan_private.c gives the plan's remote SQL (afdw_scan_private).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "commands/explain.h"
#include "foreign/foreign.h"
#include "executor/executor.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

/*
 * several_servers
 *		Whether the tables of RTABLE, a statement's range table, are on
 *		several async_fdw servers (a replicated table's copies count).
 */
static bool
several_servers(List *rtable)
{
	Oid			first = InvalidOid;
	ListCell   *lc;

	foreach(lc, rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);
		ForeignTable *table;

		if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_FOREIGN_TABLE)
			continue;
		table = GetForeignTable(rte->relid);
		if (!afdw_server_is_ours(table->serverid))
			continue;
		if (afdw_copy_servers(table) != NIL)
			return true;
		if (!OidIsValid(first))
			first = table->serverid;
		else if (table->serverid != first)
			return true;
	}
	return false;
}

/*
 * first_written
 *		Whether RINFO is the first of ESTATE's result relations that is a
 *		foreign table of async_fdw.
 */
static bool
first_written(EState *estate, ResultRelInfo *rinfo)
{
	ListCell   *lc;

	foreach(lc, estate->es_opened_result_relations)
	{
		ResultRelInfo *r = (ResultRelInfo *) lfirst(lc);
		Relation	rel = r->ri_RelationDesc;

		if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE &&
			afdw_server_is_ours(GetForeignTable(RelationGetRelid(rel))->serverid))
			return r == rinfo;
	}
	return false;
}

/*
 * afdw_explain_commit_fence
 *		EXPLAIN VERBOSE of RINFO, a write to a foreign table of async_fdw
 *		(in ESTATE), in a statement over several async_fdw servers, when
 *		commits on several servers go without the commit fence (commit_fence.c):
 *		"Commit Fence" says why ("not preloaded", "turned off"), for reads
 *		of several servers may then see part of such a commit
 *		(doc/visibility.md).  Once a statement: on its first such write.
 */
void
afdw_explain_commit_fence(ExplainState *es, EState *estate, ResultRelInfo *rinfo)
{
	AfdwFenceState state = afdw_fence_state();

	if (!es->verbose || state == AFDW_FENCE_ON || es->pstmt == NULL ||
		rinfo == NULL || !first_written(estate, rinfo) ||
		!several_servers(es->pstmt->rtable))
		return;
	ExplainPropertyText("Commit Fence", afdw_fence_state_name(state), es);
}

/*
 * explain_reads
 *		The ways the scan's query ran, e.g. "binary stream 1, cursor 3;
 *		stopped early 1": runs by read mode (and those a sibling's query
 *		carried), then what its queries carried and what ended runs early.
 */
static char *
explain_reads(AfdwScanStats *stats)
{
	static const char *const mode_names[] = {
		[READ_TEXT_STREAM] = "text stream",
		[READ_BINARY_STREAM] = "binary stream",
		[READ_CURSOR] = "cursor",
		[READ_EXECUTE] = "prepared statement"
	};
	StringInfoData buf;
	const char *sep = "";

	initStringInfo(&buf);
	for (int m = 0; m <= READ_EXECUTE; m++)
	{
		if (stats->runs[m] > 0)
		{
			appendStringInfo(&buf, "%s%s %d", sep, mode_names[m], stats->runs[m]);
			sep = ", ";
		}
	}
	if (stats->absorbed > 0)
		appendStringInfo(&buf, "%sin a sibling's query %d", sep, stats->absorbed);
	if (buf.len == 0)
		appendStringInfoString(&buf, "none");
	sep = "; ";
	if (stats->carried > 0)
	{
		appendStringInfo(&buf, "%scarried %d sibling %s", sep, stats->carried,
						 stats->carried == 1 ? "query" : "queries");
		sep = ", ";
	}
	if (stats->stopped > 0)
	{
		appendStringInfo(&buf, "%sstopped early %d", sep, stats->stopped);
		sep = ", ";
	}
	if (stats->spills > 0)
	{
		appendStringInfo(&buf, "%sspilled %d", sep, stats->spills);
		sep = ", ";
	}
	if (stats->overflows > 0)
		appendStringInfo(&buf, "%soverflowed %d", sep, stats->overflows);
	return buf.data;
}

/*
 * explain_analyze
 *		What the scan did remotely, for EXPLAIN (ANALYZE, VERBOSE): one
 *		line of counts in text format, a property each in the others.
 */
static void
explain_analyze(AfdwScanState *st, ExplainState *es)
{
	AfdwScanStats *stats = &st->stats;
	int64		bytes = (int64) (stats->bytes + st->lines.received);
	double		wait_ms = INSTR_TIME_GET_MILLISEC(stats->wait);
	char	   *connection = stats->users > 1 ?
		psprintf("shared by %d scans", stats->users) : "own";

	ExplainPropertyText("Remote Reads", explain_reads(stats), es);
	if (es->format == EXPLAIN_FORMAT_TEXT)
	{
		appendStringInfoSpaces(es->str, es->indent * 2);
		appendStringInfo(es->str, "Remote Received: " INT64_FORMAT " rows, "
						 INT64_FORMAT " bytes, " INT64_FORMAT " round trips\n",
						 stats->rows, bytes, stats->round_trips);
		if (stats->timed)
		{
			appendStringInfoSpaces(es->str, es->indent * 2);
			appendStringInfo(es->str, "Remote Wait: %.3f ms\n", wait_ms);
		}
	}
	else
	{
		ExplainPropertyInteger("Remote Rows", NULL, stats->rows, es);
		ExplainPropertyInteger("Remote Bytes", NULL, bytes, es);
		ExplainPropertyInteger("Round Trips", NULL, stats->round_trips, es);
		if (stats->timed)
			ExplainPropertyFloat("Remote Wait Time", "ms", wait_ms, 3, es);
	}
	ExplainPropertyText("Connection", connection, es);
	if (st->nkey_uses > 0)
		ExplainPropertyText("Keys Sent", st->keys_sent < 0 ? "none" :
							psprintf(INT64_FORMAT, st->keys_sent), es);
}

/*
 * afdwExplainForeignScan
 *		Name the tables of a remote join or aggregate; show the remote SQL in
 *		EXPLAIN VERBOSE, and with ANALYZE what the scan did remotely.
 */
void
afdwExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	char	   *sql;
	List	   *retrieved_attrs;
	int			fetch_size;
	bool		stream;
	char	   *outer_order;
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;

	/* A remote join or aggregate names its tables, as a scan node would. */
	if (afdw_scan_relations(plan) != NULL)
		ExplainPropertyText("Relations", afdw_scan_relations(plan), es);
	if (!es->verbose)
		return;
	afdw_scan_private(plan, &sql, &retrieved_attrs,
					  &fetch_size, &stream, &outer_order);
	/* With the keys of hash joins, as it runs when they have few. */
	if (afdw_scan_key_uses(plan) > 0)
		sql = afdw_keyed_sql(plan, NULL, list_length(plan->fdw_exprs) + 1);
	ExplainPropertyText("Remote SQL", sql, es);
	ExplainPropertyText("Fetch Mode", stream ? "stream" : "cursor", es);
	if (es->analyze && node->fdw_state != NULL)
		explain_analyze((AfdwScanState *) node->fdw_state, es);
}
