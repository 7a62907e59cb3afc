/*-------------------------------------------------------------------------
 *
 * scan_state.c
 *		What every file that runs scans does to a scan's state: the scans
 *		of the backend, the change of a scan's phase, the drop of its
 *		current batch, the context of its errors, and the wake of an
 *		asynchronous Append whose wait must end at once.
 *
 * The lowest of the scan files: scan.c (the executor callbacks and the row
 * loop), scan_commands.c (commands and their results), copy_stream.c
 * (streams) and row_builder.c (rows to tuples) call it, and it calls none
 * of them.  It also answers whether a query is the client's statement
 * itself, for the scans and the direct modifications alike.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

/* Scans of this backend between their Begin and End, with a connection. */
dlist_head afdw_active_scans = DLIST_STATIC_INIT(afdw_active_scans);

/*
 * The wait set of an asynchronous Append whose wait must end at once (see
 * afdw_wake_append): the backend's latch is set again after each
 * preparation of the wait by a child, since a child's own waits may have
 * reset it.
 */
static WaitEventSet *wake_set = NULL;

/*
 * On a server whose Append does not wait on the latch (see
 * executor_waits_on_latch), the wait sets of asynchronous Appends (nested
 * in one another's conditions) to which the backend's latch was added in
 * their current wait (see afdw_wake_append); a set can hold one latch.  A
 * set leaves the list when its Append's next wait begins
 * (afdw_forget_wake).
 */
#define AFDW_MAX_LATCH_SETS		16
static WaitEventSet *latch_sets[AFDW_MAX_LATCH_SETS];
static int	n_latch_sets = 0;

/*
 * Whether the running server's asynchronous Append waits on the backend's
 * latch: -1 until first asked.
 */
static int	append_waits_on_latch = -1;

/*
 * afdw_scan_error_context
 *		Name the foreign table whose scan (ARG, its AfdwScanState) failed,
 *		or the tables of a remote join (as EXPLAIN's Relations line does),
 *		and say when its query carried its siblings'.
 */
void
afdw_scan_error_context(void *arg)
{
	AfdwScanState *st = (AfdwScanState *) arg;
	ForeignScan *plan = (ForeignScan *) st->node->ss.ps.plan;

	if (st->computed && bms_num_members(afdw_scan_base_relids(plan)) > 1)
		errcontext("remote scan: %s", afdw_scan_relations(plan));
	else
		errcontext("scan of foreign table \"%s\"",
				   RelationGetRelationName(st->rel));
	/* The error may be a sibling's: its query went with this one. */
	if (st->carrying == 1)
		errcontext("its remote query carried that of one sibling scan (async_fdw.combine_scans)");
	else if (st->carrying > 1)
		errcontext("its remote query carried those of %d sibling scans (async_fdw.combine_scans)",
				   st->carrying);
}

/*
 * afdw_set_phase
 *		Move ST's query to PHASE; it leaves pending_scans (scan.c) when it
 *		leaves PHASE_PENDING, which only afdwBeginForeignScan enters.
 */
void
afdw_set_phase(AfdwScanState *st, AfdwPhase phase)
{
#ifdef USE_ASSERT_CHECKING
	/* Each phase is entered from the phases listed. */
	switch (phase)
	{
		case PHASE_PENDING:
			Assert(false);
			break;
		case PHASE_UNSENT:
			/* From any: an eager start, a rescan, the end of the scan. */
			break;
		case PHASE_QUEUED:
			Assert(st->phase == PHASE_UNSENT);
			break;
		case PHASE_IN_FLIGHT:
			/* afdw_send_start, afdw_send_fetch */
			Assert(st->phase == PHASE_UNSENT || st->phase == PHASE_OPEN);
			break;
		case PHASE_COPYING:
		case PHASE_STREAM_FAILED:
			Assert(st->phase == PHASE_IN_FLIGHT && afdw_is_stream(st));
			break;
		case PHASE_SPILLED:
			Assert(st->phase == PHASE_DONE && st->spill != NULL);
			break;
		case PHASE_OPEN:
		case PHASE_OVERFLOW:
			/* The results of a command are all read. */
			Assert(st->phase == PHASE_IN_FLIGHT ||
				   st->phase == PHASE_STREAM_FAILED);
			break;
		case PHASE_DONE:
			/*
			 * The last results, a stream's end, the query stopped, or a
			 * sibling's query carries it (combined_scans.c).
			 */
			Assert(afdw_query_sent(st) || st->absorbed);
			break;
	}
#endif
	if (st->phase == PHASE_PENDING && phase != PHASE_PENDING)
		dlist_delete(&st->pending_node);
	st->phase = phase;
}

/*
 * free_batch
 *		Give back the libpq memory of the current batch.
 */
static void
free_batch(AfdwScanState *st)
{
	if (st->batch_res != NULL)
	{
		PQclear(st->batch_res);
		st->batch_res = NULL;
	}
	st->lines.n = 0;
	st->lines.used = 0;
	/* A batch of huge rows leaves no huge buffer behind. */
	if (st->lines.size > LINEBUF_KEEP)
	{
		pfree(st->lines.buf);
		st->lines.buf = NULL;
		st->lines.size = 0;
	}
	st->ntuples = 0;
	st->next_tuple = 0;
}

/*
 * afdw_drop_batch
 *		Done with the current batch: empty the slot, which may point into
 *		its values, and free it.
 */
void
afdw_drop_batch(AfdwScanState *st)
{
	ExecClearTuple(st->node->ss.ss_ScanTupleSlot);
	free_batch(st);
	MemoryContextReset(st->row_cxt);
}

/*
 * executor_waits_on_latch
 *		Whether the running server's asynchronous Append adds the backend's
 *		latch to its wait set itself, after its children prepared the wait:
 *		since PostgreSQL 15.7 (and the minor releases of the same day, 14.12
 *		and 16.3).  Asked of the server, not of the headers built against:
 *		the ABI is stable across minor releases, so a module built against
 *		15.6 may run on 15.7 and one built against 15.7 on 15.6, and adding
 *		the latch twice, or not at all, would overflow the set or hang the
 *		wait.
 */
static bool
executor_waits_on_latch(void)
{
	if (append_waits_on_latch < 0)
	{
		const char *v = GetConfigOption("server_version_num", false, false);
		int			num = v != NULL ? atoi(v) : 0;

		append_waits_on_latch =
			num >= 170000 ||
			(num >= 160003 && num < 170000) ||
			(num >= 150007 && num < 160000) ||
			(num >= 140012 && num < 150000);
	}
	return append_waits_on_latch == 1;
}

/*
 * afdw_wake_append
 *		ST's results were read by another scan while ST's Append waits for
 *		them on the socket (a scan of a subplan that a sibling's condition
 *		ran during the Append's preparation of its wait): no event would
 *		come.  Make the Append's wait end at once, through the backend's
 *		latch, so that its next wait finds ST's rows ready.
 *
 * Since PostgreSQL 15.7 the Append waits on the latch too, added after
 * its children prepared the wait; on an older server the latch is added
 * here (executor_waits_on_latch).
 */
void
afdw_wake_append(AfdwScanState *st)
{
	WaitEventSet *set;

	if (st->wait_sock == PGINVALID_SOCKET || st->areq == NULL ||
		!st->areq->callback_pending)
		return;
	/* (The socket stays in the set: no sibling may add it again.) */
	set = ((AppendState *) st->areq->requestor)->as_eventset;
	if (set == NULL)
		return;					/* its wait is over already */
	if (!executor_waits_on_latch())
	{
		for (int i = 0; i < n_latch_sets; i++)
		{
			if (latch_sets[i] == set)
			{
				SetLatch(MyLatch);
				return;
			}
		}
		if (n_latch_sets >= AFDW_MAX_LATCH_SETS)
			n_latch_sets = 0;	/* sets of waits long over: forget them */
		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		latch_sets[n_latch_sets++] = set;
	}
	wake_set = set;
	SetLatch(MyLatch);
}


/*
 * afdw_forget_wake
 *		A new wait of the Append whose wait set is SET begins (scan.c's
 *		forget_waits): its earlier wait's wake is over, and the latch is no
 *		longer in the set.
 */
void
afdw_forget_wake(WaitEventSet *set)
{
	if (wake_set == set)
		wake_set = NULL;
	for (int i = 0; i < n_latch_sets; i++)
	{
		if (latch_sets[i] == set)
			latch_sets[i--] = latch_sets[--n_latch_sets];
	}
}

/*
 * afdw_wake_again
 *		A child of the Append whose wait set is SET has prepared the wait:
 *		set the latch again if the wait must end at once (afdw_wake_append),
 *		since the child's own waits may have reset it.
 */
void
afdw_wake_again(WaitEventSet *set)
{
	if (wake_set != NULL && wake_set == set)
		SetLatch(MyLatch);
}

/*
 * afdw_is_client_statement
 *		Whether the query that ESTATE runs is the statement the client sent
 *		itself, whole: its text is the client's, and the portal being run
 *		holds no other plan.
 *
 * Only then may its remote work end its remote transactions early (a
 * COMMIT riding with a read or a write): nothing of the local transaction
 * runs after it.  A query of a function, a trigger or a procedure is run
 * by another statement, which goes on after it, and has a text of its own
 * (a function's cursor too, though it has a portal of its own).  A
 * statement that a rule turned into several plans has one text for all,
 * and runs the others after the first.  (A utility statement that runs a
 * query, such as EXPLAIN ANALYZE, is one plan of its portal, and its
 * query counts as the client's.)
 */
bool
afdw_is_client_statement(EState *estate)
{
	if (debug_query_string == NULL || estate->es_sourceText == NULL ||
		strcmp(estate->es_sourceText, debug_query_string) != 0)
		return false;
	return ActivePortal != NULL && list_length(ActivePortal->stmts) == 1;
}
