/*-------------------------------------------------------------------------
 *
 * scan_commands.c
 *		The remote commands of a scan, and the reading of their results.
 *
 * The query of a scan is sent (afdw_send_start) as a cursor's DECLARE and
 * first FETCH, an EXECUTE of a statement prepared in the remote session (a
 * parameterized scan; through a transaction pooler, the statement with its
 * values inline), or a COPY stream, whose rows copy_stream.c reads; more
 * FETCHes follow ahead of need (afdw_send_fetch).  Results arrive into a
 * queue of batches (afdw_read_request), which next_batch (scan.c) takes one
 * at a time (afdw_take_batch); row_builder.c turns their rows into tuples.
 * Commands go through the connection's calls (connection_pool.c), which wrap
 * each in a savepoint.
 *
 * Asynchronous siblings under one Append may stream on a connection they
 * share, one after the other: a scan that finds it streaming for a sibling
 * waits (afdw_sibling_streaming), and the sibling's stream, once over,
 * starts its query (afdw_hand_over).
 *
 * Work may be asked for before it is needed (a FETCH ahead, a query
 * started eagerly for a scan the plan may never run): an error then waits
 * in the queue in place of the rows it stands for and is raised only if
 * they are used, while the remote savepoint around each command keeps the
 * remote transaction usable (afdw_send_in_xact).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

static void drain_scan(void *arg);
static uint64 result_bytes(PGresult *res);
static afdw_noreturn void refuse_answer(AfdwScanState *st, PGresult *res,
						  const char *detail);

/*
 * afdw_clear_queue
 *		Drop the batches that arrived and were not used.
 */
void
afdw_clear_queue(AfdwScanState *st)
{
	while (st->qcount > 0)
	{
		PQclear(st->queue[st->qhead]);
		st->queue[st->qhead] = NULL;
		st->qhead = (st->qhead + 1) % AFDW_QUEUE_SIZE;
		st->qcount--;
	}
	st->qhead = 0;
}

/*
 * compute_params
 *		Evaluate the scan's parameters as text, as the remote side reads it.
 */
static void
compute_params(AfdwScanState *st)
{
	ExprContext *econtext = st->node->ss.ps.ps_ExprContext;
	MemoryContext oldcxt;
	ListCell   *lc;
	int			nestlevel;
	int			i = 0;

	/* The values live until the next query's. */
	MemoryContextReset(st->batch_cxt);
	oldcxt = MemoryContextSwitchTo(st->batch_cxt);
	nestlevel = afdw_set_transmission_modes();
	foreach(lc, st->param_exprs)
	{
		ExprState  *expr = (ExprState *) lfirst(lc);
		bool		isnull;
		Datum		value = ExecEvalExpr(expr, econtext, &isnull);

		st->param_values[i] = isnull ? NULL :
			OutputFunctionCall(&st->param_flinfo[i], value);
		i++;
	}
	for (int k = 0; k < st->nkey_uses && i < st->nparams; k++)
	{
		if (st->key_used[k])
			st->param_values[i++] = OutputFunctionCall(&st->key_out, st->key_arrays[k]);
	}
	Assert(i == st->nparams);
	afdw_reset_transmission_modes(nestlevel);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * remember_sql
 *		Keep the text of the command in flight, for error messages.
 */
static void
remember_sql(AfdwScanState *st, const char *sql)
{
	if (st->req_sql != NULL)
		pfree(st->req_sql);
	st->req_sql = MemoryContextStrdup(st->scan_cxt, sql);
}

/*
 * append_execute
 *		Append to BUF the EXECUTE of the scan's prepared statement with the
 *		parameter values compute_params gave, after its PREPARE when the
 *		remote session does not have it yet; false, with nothing appended,
 *		when the session may not prepare one more.
 *
 * Rescans of a parameterized scan then cost the remote server no parsing
 * or planning (it keeps a generic plan when that is as good), and no
 * cursor.  The LIMIT bounds the rows, and so the memory, of one EXECUTE.
 * Where the session keeps no statement (afdw_keeps_statements), the
 * statement itself is appended with its values inline instead.
 */
static bool
append_execute(AfdwScanState *st, StringInfo buf)
{
	unsigned int number;

	if (st->prepared_sql == NULL)
		st->prepared_sql = MemoryContextStrdup(st->scan_cxt, st->own_limit ? st->sql :
											   psprintf("%s LIMIT " INT64_FORMAT, st->sql,
														(int64) st->fetch_size + 1));
	number = afdw_prepared_statement(st->conn, st->prepared_sql);
	if (number == 0 && !afdw_keeps_statements(st->conn))
	{
		/*
		 * Through a transaction pooler the next transaction may find
		 * another session: the statement goes with its values inline,
		 * still one command, planned each time.
		 */
		afdw_bind_params(buf, st->prepared_sql, st->nparams,
						 (const char *const *) st->param_values);
		return true;
	}
	if (number == 0)
	{
		number = afdw_next_statement_number(st->conn);
		if (number == 0)
			return false;
		appendStringInfo(buf, "PREPARE afdw_s%u AS %s; ", number, st->prepared_sql);
		st->preparing = number;
	}

	appendStringInfo(buf, "EXECUTE afdw_s%u(", number);
	for (int i = 0; i < st->nparams; i++)
	{
		if (i > 0)
			appendStringInfoString(buf, ", ");
		if (st->param_values[i] == NULL)
			appendStringInfoString(buf, "NULL");
		else
			appendStringInfoString(buf, quote_literal_cstr(st->param_values[i]));
	}
	appendStringInfoChar(buf, ')');
	return true;
}

/*
 * append_query
 *		Append the scan's remote SELECT to BUF, with the parameter values
 *		of compute_params inline (so that it goes in one message with the
 *		transaction's start, the CLOSE of cursors no longer needed and the
 *		first FETCH), wrapped for a binary stream.
 */
static void
append_query(AfdwScanState *st, StringInfo buf)
{
	StringInfoData query;
	bool		binary = (st->mode == READ_BINARY_STREAM);

	if (st->nparams == 0 && !binary)
	{
		appendStringInfoString(buf, st->sql);
		return;
	}

	initStringInfo(&query);
	if (st->nparams == 0)
		appendStringInfoString(&query, st->sql);
	else
		afdw_bind_params(&query, st->sql, st->nparams,
						 (const char *const *) st->param_values);
	if (binary)
		afdw_deparse_binary_select(buf, query.data, st->outer_order, st->rel,
								   st->retrieved_attrs);
	else
		appendStringInfoString(buf, query.data);
	pfree(query.data);
}

/*
 * siblings_may_stream
 *		Whether ST may stream on a connection that other scans hold: only
 *		if each of them is an asynchronous sibling of ST (a child of the
 *		same Append of the same executor) that may stream too.  The Append
 *		reads all of them as their rows come, so a sibling that finds the
 *		connection streaming can wait for that stream to end; any other
 *		scan could be read first and wait forever.
 */
static bool
siblings_may_stream(AfdwScanState *st)
{
	dlist_iter	it;

	if (st->async_parent == NULL)
		return false;
	dlist_foreach(it, &afdw_active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other == st || other->conn != st->conn)
			continue;
		if (other->estate != st->estate ||
			other->async_parent != st->async_parent || !other->may_stream)
			return false;
	}
	return true;
}

/*
 * afdw_sibling_streaming
 *		Whether ST should wait for the stream of a sibling that occupies its
 *		connection, so as to stream after it.
 */
bool
afdw_sibling_streaming(AfdwScanState *st)
{
	dlist_iter	it;

	if (!st->may_stream || !afdw_is_busy(st->conn) ||
		!siblings_may_stream(st))
		return false;
	dlist_foreach(it, &afdw_active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other != st && other->conn == st->conn && afdw_streaming(other))
			return true;
	}
	return false;
}

/*
 * afdw_hand_over
 *		ST's stream has ended: start the stream of a sibling waiting for
 *		the connection, if any.
 *
 * Called where a stream ends: a failure before its rows (afdw_read_request),
 * its last batch (next_batch, scan.c) and its spill (drain_scan); not where
 * it is abandoned (afdw_finish_request).
 */
void
afdw_hand_over(AfdwScanState *st)
{
	dlist_iter	it;

	dlist_foreach(it, &afdw_active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other != st && other->conn == st->conn &&
			other->phase == PHASE_QUEUED)
		{
			afdw_set_phase(other, PHASE_UNSENT);
			/*
			 * While another scan takes the connection over (drain_scan),
			 * the sibling starts at its next request instead.
			 */
			if (!st->draining)
				afdw_send_start(other);
			return;
		}
	}
}

/*
 * afdw_send_start
 *		Open the scan's cursor (or run its statement, or start its stream)
 *		and ask for its first batch, without waiting.
 */
void
afdw_send_start(AfdwScanState *st)
{
	StringInfoData sql;
	bool		stream;
	bool		last = false;

	/* Its first run, a rerun after a rescan, or a rerun by cursor. */
	Assert(!afdw_query_sent(st) || st->phase == PHASE_OVERFLOW);
	/* A scan that may take keys has asked for them (scan.c, take_keys). */
	Assert(st->nkey_uses == 0 || st->keys_taken);
	afdw_set_phase(st, PHASE_UNSENT);

	/*
	 * The parameters first: one may be a subplan's value, computed now, and
	 * that may take long (and run other scans, on this very connection
	 * too).  The connection's idle time is judged after it, just before
	 * the command goes.
	 */
	if (st->nparams > 0)
		compute_params(st);

	/*
	 * A session the server may close now is opened again; a connection
	 * that cannot be opened again, or cannot join the remote transaction,
	 * is shared with another.
	 */
	st->conn = afdw_renew_idle(st->conn);
	st->conn = afdw_join_target(st->conn);
	if (st->locks_rows)
		afdw_note_row_locks(st->conn);

	initStringInfo(&sql);

	/*
	 * A stream needs a connection of its own: rows flow without a break
	 * until the end, so no other scan could take a turn on it; only
	 * asynchronous siblings take turns, each stream after the other.  (A
	 * scan that needs the connection anyway reads the rest of the stream
	 * into memory first: see afdw_spill_stream.)
	 */
	stream = st->may_stream &&
		(afdw_conn_users(st->conn) == 1 || siblings_may_stream(st));
	st->checking = false;
	st->preparing = 0;
	st->declaring = false;
	if (stream)
	{
		bool		binary = false;

		/*
		 * Binary format once a remote check has found the remote columns of
		 * the local types; the first stream of a table asks, after its
		 * COPY, in the same message.  Text for a query that carries its
		 * siblings' (combined_scans.c): their tables were not checked.
		 */
		if (st->carrying == 0 && afdw_binary_allowed(st))
		{
			BinaryStatus status = afdw_binary_status(RelationGetRelid(st->rel));

			binary = (status == BINARY_SAME_TYPES);
			st->checking = (status == BINARY_UNKNOWN);
		}
		st->mode = binary ? READ_BINARY_STREAM : READ_TEXT_STREAM;
		last = st->one_shot;
		st->header_pending = binary;
		st->cursor_number = 0;
		appendStringInfoString(&sql, "COPY (");
		append_query(st, &sql);
		appendStringInfoString(&sql, binary ? ") TO STDOUT (FORMAT binary)" :
							   ") TO STDOUT");
	}
	else if (st->one_shot && st->nparams == 0 && !st->may_stream)
	{
		/*
		 * All the rows in one command, or one more than fetch_size to tell
		 * that there are more (the query then runs again with a cursor).
		 * Not prepared: without parameters its text changes with its
		 * values.
		 */
		st->mode = READ_EXECUTE;
		st->cursor_number = 0;
		if (st->own_limit)
			appendStringInfoString(&sql, st->sql);
		else
			appendStringInfo(&sql, "%s LIMIT %d", st->sql, st->fetch_size + 1);
		last = true;
	}
	else if (st->may_prepare && append_execute(st, &sql))
	{
		st->mode = READ_EXECUTE;
		st->cursor_number = 0;
		last = st->one_shot;
	}
	else
	{
		st->mode = READ_CURSOR;
		st->cursor_number = afdw_next_cursor_number(st->conn);
		st->declaring = true;
		appendStringInfo(&sql, "DECLARE c%u CURSOR FOR ", st->cursor_number);
		append_query(st, &sql);
		appendStringInfo(&sql, "; FETCH %d FROM c%u", st->fetch_size,
						 st->cursor_number);
	}
	remember_sql(st, sql.data);
	if (st->checking)
	{
		/* Error messages show the stream's query, not the check. */
		appendStringInfoString(&sql, "; ");
		afdw_deparse_type_check(&sql, st->rel);
	}
	afdw_send_in_xact(st->conn, sql.data, st, drain_scan, st->nested, last);
	st->stats.runs[st->mode]++;
	st->stats.round_trips++;
	st->stats.users = Max(st->stats.users, afdw_conn_users(st->conn));
	if (st->preparing != 0)
		afdw_preparing_statement(st->conn, st->prepared_sql, st->preparing);
	if (stream)
		afdw_set_streaming(st->conn, true);
	pfree(sql.data);

	afdw_set_phase(st, PHASE_IN_FLIGHT);
	st->outcome = PHASE_OPEN;
	st->nbatches = 0;
}

/*
 * afdw_send_fetch
 *		Ask for the next batch.
 */
void
afdw_send_fetch(AfdwScanState *st)
{
	char		sql[64 * AFDW_FETCH_DEPTH];
	int			len = 0;

	Assert(st->phase == PHASE_OPEN && st->outcome == PHASE_OPEN);
	Assert(st->qcount <= AFDW_QUEUE_SIZE - AFDW_FETCH_DEPTH);
	for (int i = 0; i < AFDW_FETCH_DEPTH; i++)
		len += snprintf(sql + len, sizeof(sql) - len, "%sFETCH %d FROM c%u",
						i > 0 ? "; " : "", st->fetch_size, st->cursor_number);
	remember_sql(st, sql);
	st->declaring = false;
	afdw_send_in_xact(st->conn, sql, st, drain_scan, st->nested, false);
	st->stats.round_trips++;
	afdw_set_phase(st, PHASE_IN_FLIGHT);
}

/*
 * enqueue
 *		Add RES, a batch or the error that stands in its place, to the
 *		batches that arrived.
 */
static void
enqueue(AfdwScanState *st, PGresult *res)
{
	if (st->qcount >= AFDW_QUEUE_SIZE)
	{
		/* Room is made before each request: this cannot happen. */
		PQclear(res);
		elog(ERROR, "batch queue of a foreign scan overflowed");
	}
	st->queue[(st->qhead + st->qcount) % AFDW_QUEUE_SIZE] = res;
	st->qcount++;
}

/*
 * refuse_answer
 *		The server answered the scan's command with a result the command
 *		cannot have (DETAIL, a sentence marked for translation, says which):
 *		cut the connection and raise the error.
 */
static void
refuse_answer(AfdwScanState *st, PGresult *res, const char *detail)
{
	PQclear(res);
	afdw_forget_owner(st->conn, st);
	afdw_set_phase(st, st->outcome);
	afdw_protocol_violation(st->conn, detail, st->req_sql);
}

/*
 * result_bytes
 *		The bytes of RES's values: what EXPLAIN ANALYZE counts as received
 *		for a FETCH or EXECUTE.  A loop over every value, so it runs only
 *		for an instrumented scan.
 */
static uint64
result_bytes(PGresult *res)
{
	int			nrows = PQntuples(res);
	int			nfields = PQnfields(res);
	uint64		total = 0;

	for (int i = 0; i < nrows; i++)
		for (int j = 0; j < nfields; j++)
			total += PQgetlength(res, i, j);
	return total;
}

/*
 * afdw_read_request
 *		Read the results of the scan's command in flight; true when all are
 *		in.  Without BLOCK, reads only what has arrived.
 *
 * An error is queued in place of the rows it stands for, and raised only
 * when the scan needs them (afdw_take_batch): a FETCH sent ahead, or a query
 * started eagerly, may fail on rows the query never uses.  The savepoint
 * around the command keeps the remote transaction usable meanwhile.
 */
bool
afdw_read_request(AfdwScanState *st, bool block)
{
	bool		stream_failed;
	bool		lost = false;

	Assert(st->phase == PHASE_IN_FLIGHT || st->phase == PHASE_STREAM_FAILED);

	/* A rollback to a savepoint cancelled it under us. */
	if (!afdw_is_owner(st->conn, st))
	{
		afdw_set_phase(st, st->outcome);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("remote query of foreign table \"%s\" was cancelled",
						RelationGetRelationName(st->rel)),
				 errdetail("A rollback to a savepoint cancelled the query in flight on its connection.")));
	}

	if (!block)
		afdw_consume_input(st->conn, st->req_sql);

	for (;;)
	{
		PGresult   *res;

		if (!afdw_result_ready(st->conn))
		{
			if (!block)
				return false;
			afdw_wait_socket(st->conn, st->req_sql);
			continue;
		}

		res = afdw_get_result(st->conn);
		if (res == NULL)
			break;

		switch (PQresultStatus(res))
		{
			case PGRES_TUPLES_OK:
				/* A binary stream would read lines it never received. */
				if (afdw_streaming(st))
					refuse_answer(st, res,
								  gettext_noop("It answered a COPY with rows, not with CopyOutResponse."));
				st->stats.rows += PQntuples(res);
				if (st->stats.count_bytes)
					st->stats.bytes += result_bytes(res);
				if (st->mode == READ_EXECUTE && PQntuples(res) > st->fetch_size)
				{
					/* Past the LIMIT: no lookup; next_batch starts over. */
					PQclear(res);
					st->outcome = PHASE_OVERFLOW;
					st->stats.overflows++;
					break;
				}
				enqueue(st, res);
				if ((PQntuples(res) < st->fetch_size || st->mode == READ_EXECUTE) &&
					st->outcome != PHASE_OVERFLOW)
					st->outcome = PHASE_DONE;
				break;
			case PGRES_COMMAND_OK:
				PQclear(res);
				break;
			case PGRES_COPY_OUT:
				if (!afdw_streaming(st))
					refuse_answer(st, res,
								  gettext_noop("It answered with CopyOutResponse to a query that is not a COPY."));
				/* The stream's rows follow; next_batch reads them. */
				PQclear(res);
				afdw_set_phase(st, PHASE_COPYING);
				return true;
			default:
				/* Kept for when the rows are needed; nothing more comes. */
				st->preparing = 0;	/* whether it was prepared is unknown */
				if (st->mode == READ_EXECUTE && st->prepared_sql != NULL)
					afdw_forget_statement(st->conn, st->prepared_sql);
				/* The savepoint's rollback took the cursor declared in it. */
				if (st->declaring)
					st->cursor_number = 0;
				st->outcome = PHASE_DONE;
				if (afdw_streaming(st))
					afdw_set_phase(st, PHASE_STREAM_FAILED);
				lost = afdw_result_lost(st->conn, res);
				enqueue(st, res);
				break;
		}
		if (lost)
			break;
	}

	/* A query run whole that gave no rows result: a broken server. */
	if (st->mode == READ_EXECUTE && st->outcome == PHASE_OPEN && !lost)
		refuse_answer(st, NULL,
					  gettext_noop("It answered a query with no rows and no error."));

	afdw_set_idle(st->conn);
	stream_failed = (st->phase == PHASE_STREAM_FAILED);
	afdw_set_phase(st, st->outcome);
	st->declaring = false;
	if (st->preparing != 0)
	{
		afdw_remember_statement(st->conn, st->prepared_sql, st->preparing);
		st->preparing = 0;
	}
	if (stream_failed)
	{
		/* The stream ended before its rows: the siblings go on. */
		afdw_set_streaming(st->conn, false);
		afdw_hand_over(st);
	}
	return true;
}

/*
 * drain_scan
 *		Another scan needs the connection: read this scan's results now,
 *		to be used when it asks for rows.  A stream is read to its end into
 *		memory.
 */
static void
drain_scan(void *arg)
{
	AfdwScanState *st = (AfdwScanState *) arg;

	st->draining = true;
	st->stats.users = Max(st->stats.users, afdw_conn_users(st->conn));
	if (afdw_streaming(st))
	{
		/* Read up to its rows; one that failed before them is queued. */
		if (st->phase != PHASE_COPYING)
			(void) afdw_read_request(st, true);
		if (st->phase == PHASE_COPYING)
		{
			afdw_spill_stream(st);
			afdw_hand_over(st);
		}
	}
	else
		(void) afdw_read_request(st, true);
	st->draining = false;
	afdw_wake_append(st);
}

/*
 * afdw_take_batch
 *		Turn the next batch that arrived into the current one, after asking
 *		for more if the rows in hand are all that is left, so that the
 *		remote server works meanwhile.  An error that arrived in place of
 *		the batch is raised now that the rows are needed.
 */
void
afdw_take_batch(AfdwScanState *st)
{
	PGresult   *res;

	Assert(st->qcount > 0);
	afdw_drop_batch(st);
	res = st->queue[st->qhead];
	st->queue[st->qhead] = NULL;
	st->qhead = (st->qhead + 1) % AFDW_QUEUE_SIZE;
	st->qcount--;
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		afdw_clear_queue(st);
		afdw_report_remote_error(res, st->conn, st->req_sql);
	}
	st->batch_res = res;
	st->ntuples = PQntuples(res);
	st->nbatches++;

	/*
	 * Ask ahead, unless another scan's command occupies the connection:
	 * taking it over would mean waiting for that command here.  Not from a
	 * subtransaction of the scan's start (a cursor fetched in a savepoint):
	 * the rollback of that subtransaction's remote savepoint would cancel
	 * the FETCH in flight, and a remote cursor whose FETCH failed cannot be
	 * read again; a FETCH that ended keeps the cursor where it left it.
	 */
	if (st->phase == PHASE_OPEN &&
		st->qcount <= AFDW_QUEUE_SIZE - AFDW_FETCH_DEPTH &&
		!afdw_is_busy(st->conn) &&
		GetCurrentTransactionNestLevel() <= st->start_level)
		afdw_send_fetch(st);
}

/*
 * afdw_raise_held_error
 *		The rows before the error that ended the stream are used: raise it.
 */
void
afdw_raise_held_error(AfdwScanState *st)
{
	PGresult   *res = st->held_error;

	st->held_error = NULL;
	afdw_report_remote_error(res, st->conn, st->held_sql ? st->held_sql : st->req_sql);
}

/*
 * afdw_finish_request
 *		Stop whatever the scan has in flight and drop the rows and errors
 *		not used.
 *
 * A query started eagerly that the executor never asked rows of is
 * cancelled if it still runs, rather than waited for: it may wait for a
 * lock, or run long, for nothing.
 */
void
afdw_finish_request(AfdwScanState *st)
{
	st->conn_wait = false;
	if (afdw_streaming(st) && afdw_is_owner(st->conn, st))
	{
		st->stats.stopped++;
		/*
		 * Read up to its rows; one that failed before them has its error
		 * queued, unused.
		 */
		if (st->phase != PHASE_COPYING)
			(void) afdw_read_request(st, true);
		if (st->phase == PHASE_COPYING)
			afdw_abandon_stream(st);
		/* A scan rescanned before its end may stop early again. */
		st->may_stream = false;
	}
	if (afdw_in_flight(st) && afdw_is_owner(st->conn, st))
	{
		/*
		 * Before its savepoint has answered, the command is waited for
		 * instead: a cancel could abort the remote transaction.
		 */
		if (!st->demanded && !afdw_read_request(st, false) &&
			afdw_cancel_harmless(st->conn))
			afdw_cancel(st->conn);
		if (afdw_in_flight(st))
			(void) afdw_read_request(st, true);
	}
	if (st->spill != NULL)
	{
		afdw_end_spill(st);
		st->may_stream = false;
	}
	afdw_clear_queue(st);
	if (st->held_error != NULL)
	{
		PQclear(st->held_error);
		st->held_error = NULL;
	}
	/*
	 * The query is over; a command still in flight is no longer ours (a
	 * rollback to a savepoint took it over).
	 */
	if (afdw_query_sent(st))
		afdw_set_phase(st, PHASE_DONE);
}

/*
 * afdw_close_cursor
 *		Leave the scan's cursor, if it has one, to be closed by the
 *		connection's next command or by the end of the transaction.
 */
void
afdw_close_cursor(AfdwScanState *st)
{
	if (afdw_query_sent(st))
	{
		if (st->cursor_number != 0)
			afdw_close_cursor_later(st->conn, st->cursor_number);
		afdw_set_phase(st, PHASE_UNSENT);
	}
	st->cursor_number = 0;
}
