/*-------------------------------------------------------------------------
 *
 * copy_stream.c
 *		COPY (query) TO STDOUT streams of scans, and their turns on a
 *		shared connection.
 *
 * A streaming scan's rows are read from the socket as its batches need them
 * (afdw_take_stream_batch): remote_commands.c copies a batch of lines off the
 * socket into the batch's line buffer (afdw_read_copy_lines), this file takes
 * the binary format's framing off them, and row_builder.c turns each into a
 * tuple when the executor asks (afdw_store_row).  A stream whose connection
 * another scan needs is read on into a tuplestore (afdw_spill_stream); one
 * stopped early is cancelled (afdw_abandon_stream).  scan_commands.c sends the
 * COPY and reads its first result, and gives the connection of a stream that
 * ended to a sibling waiting for it (afdw_hand_over): this file sends no
 * command.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

/*
 * Lines of a stream per batch, at most, whatever fetch_size says: the rows
 * are read from the socket as the batch needs them, so a bigger batch
 * saves nothing, and the arrays of a batch are allocated at its size.
 */
#define AFDW_STREAM_BATCH_MAX	100000

/*
 * end_stream
 *		The stream's rows are all read (or abandoned): read the results of
 *		the COPY, of the type check after it and of the savepoint's release,
 *		and free the connection.  A failure is kept in held_error, to be
 *		raised when the rows after the last one read are needed; an
 *		abandoned stream's is dropped (the connection rolls the savepoint
 *		back with its next command).
 *
 * The callers of a stream that ended, not abandoned, then give the
 * connection to a sibling waiting for it (afdw_hand_over, scan_commands.c).
 */
static void
end_stream(AfdwScanState *st, bool abandoned)
{
	for (;;)
	{
		PGresult   *res;
		ExecStatusType status;

		while (!afdw_result_ready(st->conn))
			afdw_wait_socket(st->conn, st->req_sql);
		res = afdw_get_result(st->conn);
		if (res == NULL)
			break;
		status = PQresultStatus(res);
		if (status == PGRES_COPY_OUT)
		{
			/* Rows of another COPY cannot follow: a broken server. */
			PQclear(res);
			afdw_discard_copy(st->conn, st->req_sql);
			continue;
		}
		if (status == PGRES_TUPLES_OK && st->checking && !abandoned &&
			PQntuples(res) == 1 && PQnfields(res) == 1)
			afdw_set_binary_status(RelationGetRelid(st->rel),
								   strcmp(PQgetvalue(res, 0, 0), "t") == 0 ?
								   BINARY_SAME_TYPES : BINARY_OTHER_TYPES);
		if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
		{
			bool		lost = afdw_result_lost(st->conn, res);

			if (st->held_error == NULL)
			{
				st->held_error = res;
				if (st->held_sql != NULL)
					pfree(st->held_sql);
				st->held_sql = MemoryContextStrdup(st->scan_cxt, st->req_sql);
			}
			else
				PQclear(res);
			if (lost)
				break;
			continue;
		}
		PQclear(res);
	}
	afdw_set_idle(st->conn);
	st->checking = false;
	afdw_set_phase(st, PHASE_DONE);
	afdw_set_streaming(st->conn, false);

	if (abandoned)
	{
		if (st->held_error != NULL)
		{
			PQclear(st->held_error);
			st->held_error = NULL;
		}
		if (!afdw_connection_ok(st->conn))
			afdw_report_remote_error(NULL, st->conn, st->req_sql);
	}
}

/*
 * binary_line
 *		Make BUF, *LEN bytes of a binary stream's message, a row: take
 *		COPY's header off the first message, where the first row or the
 *		trailer follows it.  False when what is left is the trailer.
 */
static bool
binary_line(AfdwScanState *st, char *buf, int *len)
{
	static const char signature[] = "PGCOPY\n\377\r\n\0";
	int16		n16;

	if (st->header_pending)
	{
		uint32		flags;
		uint32		extlen;
		int			hdrlen;

		if (*len < 19 || memcmp(buf, signature, sizeof(signature) - 1) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("remote COPY of foreign table \"%s\" did not start with a binary COPY header",
							RelationGetRelationName(st->rel))));
		memcpy(&flags, buf + 11, 4);
		memcpy(&extlen, buf + 15, 4);
		flags = pg_ntoh32(flags);
		extlen = pg_ntoh32(extlen);
		if ((flags & (1 << 16)) != 0 || extlen > (uint32) (*len - 19))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("remote COPY of foreign table \"%s\" sent an unsupported binary COPY header",
							RelationGetRelationName(st->rel))));
		hdrlen = 19 + extlen;
		memmove(buf, buf + hdrlen, *len - hdrlen + 1);
		*len -= hdrlen;
		st->header_pending = false;
	}
	if (*len == 0)
		return false;
	if (*len == 2)
	{
		memcpy(&n16, buf, 2);
		if ((int16) pg_ntoh16(n16) == -1)
			return false;
	}
	return true;
}

/*
 * binary_lines
 *		Take the binary COPY header off the first line of the stream, and
 *		drop what is not a row (the trailer, a line of nothing but the
 *		header) from the lines of the batch.
 */
static void
binary_lines(AfdwScanState *st)
{
	AfdwLines  *lines = &st->lines;
	int			kept = 0;

	for (int i = 0; i < lines->n; i++)
	{
		int			len = lines->lens[i];

		if (!binary_line(st, AFDW_LINE(lines, i), &len))
			continue;
		lines->offs[kept] = lines->offs[i];
		lines->lens[kept++] = len;
	}
	lines->n = kept;
}

/*
 * alloc_lines
 *		Make room for the lines of one batch of a stream.
 */
static void
alloc_lines(AfdwScanState *st)
{
	AfdwLines  *lines = &st->lines;

	if (lines->offs == NULL)
	{
		lines->max = Min(st->fetch_size, AFDW_STREAM_BATCH_MAX);
		lines->offs = MemoryContextAlloc(st->scan_cxt, sizeof(Size) * lines->max);
		lines->lens = MemoryContextAlloc(st->scan_cxt, sizeof(int) * lines->max);
		lines->cxt = st->scan_cxt;
		lines->table = RelationGetRelationName(st->rel);
	}
}

/*
 * afdw_take_stream_batch
 *		Take up to fetch_size streamed rows as the current batch; false
 *		when BLOCK is false and no row has arrived yet.
 *
 * Rows are read from the socket only as the batch needs them, so TCP
 * flow control keeps the remote server from running far ahead.
 */
bool
afdw_take_stream_batch(AfdwScanState *st, bool block)
{
	AfdwCopyRead got;

	/*
	 * A batch may hold no row (binary trailers, a header alone), and the
	 * caller then asks for the next one: a server sending such lines
	 * without end is still interrupted, by statement_timeout or a cancel.
	 */
	CHECK_FOR_INTERRUPTS();

	afdw_drop_batch(st);
	alloc_lines(st);

	got = afdw_read_copy_lines(st->conn, &st->lines, block, st->req_sql);
	if (got == AFDW_COPY_NONE)
		return false;
	if (st->mode == READ_BINARY_STREAM)
		binary_lines(st);
	st->stats.rows += st->lines.n;
	/* The stream is over, or failed: an error waits its turn. */
	if (got == AFDW_COPY_END)
		end_stream(st, false);
	st->ntuples = st->lines.n;
	st->nbatches++;
	return true;
}

/*
 * afdw_spill_stream
 *		Another scan needs the connection of this scan's stream, which
 *		cannot be interrupted: read the rest of the stream into a
 *		tuplestore (memory up to work_mem, then a temporary file), one row
 *		per raw line, converted only when the scan reads it back
 *		(afdw_take_spill_batch).  The current batch is left as it is.
 *
 * The rows have begun: the caller (drain_scan) read the COPY's first
 * result.
 */
void
afdw_spill_stream(AfdwScanState *st)
{
	MemoryContext oldcxt;
	TupleDesc	desc;

	Assert(st->phase == PHASE_COPYING);
	st->stats.spills++;
	oldcxt = MemoryContextSwitchTo(st->scan_cxt);
	desc = CreateTemplateTupleDesc(1);
	TupleDescInitEntry(desc, (AttrNumber) 1, "line", BYTEAOID, -1, 0);
	st->spill = tuplestore_begin_heap(false, false, work_mem);
	st->spill_slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	MemoryContextSwitchTo(oldcxt);

	for (;;)
	{
		char	   *buf = NULL;
		int			len = afdw_get_copy_line(st->conn, &buf, true, st->req_sql);
		bytea	   *line;
		Datum		value;
		bool		isnull = false;

		if (len < 0)
			break;

		/*
		 * Copied with libpq's zero byte before anything can fail, so that
		 * libpq's line is never left behind by an error (a bad binary
		 * header).
		 */
		line = palloc_extended(len + VARHDRSZ + 1, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
		if (line == NULL)
		{
			PQfreemem(buf);
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		}
		memcpy(VARDATA(line), buf, len + 1);
		PQfreemem(buf);
		st->stats.bytes += len;
		if (st->mode == READ_BINARY_STREAM && !binary_line(st, VARDATA(line), &len))
		{
			pfree(line);
			continue;
		}
		st->stats.rows++;
		SET_VARSIZE(line, len + VARHDRSZ);
		value = PointerGetDatum(line);
		tuplestore_putvalues(st->spill, desc, &value, &isnull);
		pfree(line);
	}
	end_stream(st, false);
	afdw_set_phase(st, PHASE_SPILLED);
}

/*
 * afdw_take_spill_batch
 *		Take up to fetch_size rows of a spilled stream as the current batch.
 */
void
afdw_take_spill_batch(AfdwScanState *st)
{
	afdw_drop_batch(st);
	alloc_lines(st);
	while (st->lines.n < st->lines.max)
	{
		bool		isnull;
		bytea	   *line;

		if (!tuplestore_gettupleslot(st->spill, true, false, st->spill_slot))
		{
			afdw_set_phase(st, PHASE_DONE);
			break;
		}
		line = DatumGetByteaPP(slot_getattr(st->spill_slot, 1, &isnull));
		afdw_add_line(&st->lines, VARDATA_ANY(line), VARSIZE_ANY_EXHDR(line));
	}
	ExecClearTuple(st->spill_slot);
	st->ntuples = st->lines.n;
	st->nbatches++;
}

/*
 * afdw_end_spill
 *		Forget a spilled stream's rows.
 */
void
afdw_end_spill(AfdwScanState *st)
{
	if (st->spill == NULL)
		return;
	ExecDropSingleTupleTableSlot(st->spill_slot);
	tuplestore_end(st->spill);
	st->spill = NULL;
	st->spill_slot = NULL;
}

/*
 * afdw_abandon_stream
 *		Stop a stream before its end: cancel the COPY remotely, throw away
 *		what is still on its way, and roll back to the savepoint before it.
 *
 * The rows have begun: the caller (afdw_finish_request) read the COPY's
 * first result.
 */
void
afdw_abandon_stream(AfdwScanState *st)
{
	Assert(st->phase == PHASE_COPYING);
	afdw_cancel(st->conn);
	afdw_discard_copy(st->conn, st->req_sql);
	end_stream(st, true);
}
