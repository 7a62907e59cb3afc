/*-------------------------------------------------------------------------
 *
 * bulk_loads.c
 *		INSERTs whose rows nobody looks at again, loaded in bulk: the rows
 *		kept, streamed with COPY FROM STDIN on the table's writer, or sent
 *		as one multi-row INSERT at the end of the statement.
 *
 * An INSERT with no RETURNING, no ON CONFLICT, no check option and no AFTER
 * trigger (modify_rows.c decides) keeps its rows, as lines of COPY's text
 * format, until batch_size of them are there; then it starts a COPY FROM
 * STDIN on the writer and streams every later row, without waiting for any
 * answer until the end of the statement.  A load that never reaches
 * batch_size is sent as one INSERT of all its rows at the end (one round
 * trip, with the remote COMMIT when the statement is its own transaction).
 * So COPY into a partitioned table, or INSERT ... SELECT, loads every shard
 * at the same time, each at the speed its server takes the data.
 *
 * Foreign tables on the same server share the writer: one of them streams at
 * a time.  Another command that needs the writer ends the stream first (the
 * writer's drain callback); the table then keeps its rows until it has
 * BULK_SWITCH_BYTES of them before taking the stream back.  At the end of the
 * statement the end of every stream is sent before the first answer is
 * awaited, so that the remote servers finish together.
 *
 * A query of the same statement that starts reading a server meanwhile (a
 * trigger of another table, a function) has the rows kept for that server's
 * tables sent first (afdw_flush_kept_rows), so that it finds them.  A query
 * in a subtransaction of the statement's (a function's exception block)
 * must not take the rows into that subtransaction, whose rollback would
 * lose them while the statement goes on: they go into the remote
 * transaction at the statement's own level, in an INSERT, while the writer
 * has taken no remote savepoint past that level; else they stay kept, and
 * that query does not see them (as postgres_fdw's batch not yet sent).  The
 * failure of rows sent that way (or of a stream ended in a subtransaction)
 * is the statement's: the subtransaction may catch the error, but the rows
 * are not in the remote table, so the load raises it again at its next row
 * or at its end.
 *
 * Two lists of this backend hold the loads: the loads streaming now, and
 * every load under way.  A load is in them exactly while its statement's
 * memory lives: afdw_bulk_forget takes it out when an error ends the
 * statement.
 *
 * Neighbours: modify_rows.c begins, feeds and ends the loads; remote_xact.c
 * sends their statements (afdw_send_write, afdw_run_write, afdw_defer_write)
 * and remote_commands.c streams the COPY data.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "foreign/foreign.h"
#include "lib/ilist.h"
#include "lib/stringinfo.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "async_fdw.h"

/*
 * COPY data is handed to libpq in pieces of about this size: large enough
 * to make a send worth its system call, small enough to be sent as soon as
 * the socket takes it.
 */
#define BULK_SEND_BYTES		(64 * 1024)

/*
 * A bulk load that lost its server's writer to another foreign table of
 * the same server keeps its rows until this many bytes are there before
 * taking the stream back: each switch costs two round trips.
 */
#define BULK_SWITCH_BYTES	(4 * 1024 * 1024)

/* One foreign table's bulk load in one statement. */
struct AfdwBulkLoad
{
	const char *relname;		/* for messages */
	Oid			serverid;		/* of the table: see afdw_flush_kept_rows */
	EState	   *estate;			/* of the statement */
	AfdwConn  **writer;			/* the writer's place in the caller's
								 * state; a stream may move it to the
								 * mapping's current writer */
	int			level;			/* local nesting level of the statement */
	int			nfields;		/* values a row */
	int			batch_size;		/* rows kept before a stream starts */
	const char *head;			/* the INSERT up to its rows */
	const char *tail;			/* what follows them */
	char	   *copy_sql;		/* COPY ... FROM STDIN */

	/*
	 * The rows kept, as COPY text lines (pending, npending of them), and
	 * while this table streams on the writer (copying), the COPY data not
	 * handed to libpq yet (out).
	 */
	StringInfoData pending;
	int			npending;
	bool		copying;
	bool		streamed;		/* it streamed before in this statement */
	StringInfoData out;
	dlist_node	bulk_node;		/* in bulk_loads while copying */
	bool		held;			/* in held_loads (its statement not ended) */
	dlist_node	held_node;

	/*
	 * Sending rows failed in a subtransaction of the statement's, which may
	 * have caught the error: its code and message, raised again as the
	 * statement's (lost_code 0: none).
	 */
	int			lost_code;
	char	   *lost_message;
};

/*
 * The bulk loads streaming now, so that the end of a statement sends the
 * end of every stream before it waits for the first answer.
 */
static dlist_head bulk_loads = DLIST_STATIC_INIT(bulk_loads);

/*
 * Every bulk load under way, streaming or not, so that a query that starts
 * reading their server meanwhile finds their rows there first.
 */
static dlist_head held_loads = DLIST_STATIC_INIT(held_loads);

static void bulk_start_copy(AfdwBulkLoad *load);
static void bulk_finish(AfdwBulkLoad *load, bool end_of_statement);
static void check_not_lost(AfdwBulkLoad *load);
static void note_lost(AfdwBulkLoad *load);

/*
 * afdw_write_error_context
 *		Name the foreign table written to (ARG, its name) in an error's
 *		context.
 */
void
afdw_write_error_context(void *arg)
{
	errcontext("writing to foreign table \"%s\"", (const char *) arg);
}

/*
 * afdw_bulk_begin
 *		A bulk load into REL's columns TARGET_ATTRS by ESTATE's statement,
 *		through the writer at *WRITER (the caller's; the load may move it to
 *		the mapping's current writer).  HEAD and TAIL make the INSERT that
 *		carries the rows of a load that never streams; BATCH_SIZE rows kept
 *		start a stream.  Allocated in the current memory context, which must
 *		be the statement's, and listed until afdw_bulk_end or
 *		afdw_bulk_forget.
 */
AfdwBulkLoad *
afdw_bulk_begin(Relation rel, List *target_attrs, const char *head,
				const char *tail, int batch_size, EState *estate,
				AfdwConn **writer)
{
	AfdwBulkLoad *load = palloc0(sizeof(AfdwBulkLoad));
	StringInfoData sql;

	load->relname = RelationGetRelationName(rel);
	load->serverid = GetForeignTable(RelationGetRelid(rel))->serverid;
	load->estate = estate;
	load->writer = writer;
	load->level = GetCurrentTransactionNestLevel();
	load->nfields = list_length(target_attrs);
	load->batch_size = batch_size;
	load->head = head;
	load->tail = tail;
	initStringInfo(&sql);
	afdw_deparse_copy_from(&sql, rel, target_attrs);
	load->copy_sql = sql.data;
	initStringInfo(&load->pending);
	initStringInfo(&load->out);

	/* Nothing below can fail. */
	dlist_push_tail(&held_loads, &load->held_node);
	load->held = true;
	return load;
}

/*
 * The escape letter of each byte that COPY's text format escapes with a
 * backslash, 0 for the others.
 */
static const char copy_escapes[256] = {
	['\\'] = '\\',
	['\n'] = 'n',
	['\r'] = 'r',
	['\t'] = 't',
};

/*
 * append_copy_line
 *		Append VALUES, LOAD's row (NULL for a null), to BUF as a line of
 *		COPY's text format.
 *
 * Per row of every bulk load: room for the worst case (every byte escaped)
 * is made once, and the bytes are written straight into it.
 */
static void
append_copy_line(AfdwBulkLoad *load, StringInfo buf, const char **values)
{
	Size		need = load->nfields + 1;
	char	   *out;

	for (int i = 0; i < load->nfields; i++)
		need += (values[i] == NULL) ? 2 : 2 * strlen(values[i]);
	if (need >= MaxAllocSize - (Size) buf->len)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("row of foreign table \"%s\" is too large to be loaded",
						load->relname)));
	enlargeStringInfo(buf, (int) need);
	out = buf->data + buf->len;
	for (int i = 0; i < load->nfields; i++)
	{
		if (i > 0)
			*out++ = '\t';
		if (values[i] == NULL)
		{
			*out++ = '\\';
			*out++ = 'N';
			continue;
		}
		for (const unsigned char *p = (const unsigned char *) values[i]; *p; p++)
		{
			char		esc = copy_escapes[*p];

			if (esc != 0)
			{
				*out++ = '\\';
				*out++ = esc;
			}
			else
				*out++ = (char) *p;
		}
	}
	*out++ = '\n';
	buf->len = out - buf->data;
	*out = '\0';
}

/*
 * afdw_bulk_add
 *		Add a row, the text forms of its values (NULL for a null) as the
 *		remote server reads them, to LOAD: to the stream when the table
 *		streams, else to the rows kept, which start a stream once there are
 *		enough of them.  VALUES may go once this returns.
 */
void
afdw_bulk_add(AfdwBulkLoad *load, const char **values)
{
	check_not_lost(load);
	if (load->copying)
	{
		append_copy_line(load, &load->out, values);
		if (load->out.len >= BULK_SEND_BYTES)
		{
			afdw_put_copy(*load->writer, load->out.data, load->out.len,
						  load->copy_sql);
			resetStringInfo(&load->out);
		}
		return;
	}
	append_copy_line(load, &load->pending, values);
	load->npending++;
	if (load->streamed ? load->pending.len >= BULK_SWITCH_BYTES :
		(load->npending >= load->batch_size ||
		 load->pending.len >= BULK_SWITCH_BYTES))
		bulk_start_copy(load);
}

/*
 * bulk_send_end
 *		Send the rest of LOAD's stream and its end, without waiting for the
 *		answer.
 */
static void
bulk_send_end(AfdwBulkLoad *load)
{
	if (load->out.len > 0)
	{
		afdw_put_copy(*load->writer, load->out.data, load->out.len,
					  load->copy_sql);
		resetStringInfo(&load->out);
	}
	afdw_copy_done(*load->writer, load->copy_sql);
}

/*
 * bulk_stop_copy
 *		End LOAD's stream (its end sent unless it was already) and wait for
 *		the remote server's answer, raising its error.
 */
static void
bulk_stop_copy(AfdwBulkLoad *load)
{
	if (afdw_copy_open(*load->writer))
		bulk_send_end(load);
	load->copying = false;
	dlist_delete(&load->bulk_node);
	if (GetCurrentTransactionNestLevel() == load->level)
	{
		PQclear(afdw_copy_result(*load->writer, load->copy_sql));
		return;
	}
	/* Ended from a subtransaction: its failure must not be caught there. */
	PG_TRY();
	{
		PQclear(afdw_copy_result(*load->writer, load->copy_sql));
	}
	PG_CATCH();
	{
		note_lost(load);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * bulk_drain
 *		Another command needs the writer that LOAD (OWNER) streams on: end
 *		the stream now; LOAD keeps its next rows until it takes the stream
 *		back.
 */
static void
bulk_drain(void *owner)
{
	AfdwBulkLoad *load = (AfdwBulkLoad *) owner;
	ErrorContextCallback errcb;

	errcb.callback = afdw_write_error_context;
	errcb.arg = unconstify(char *, load->relname);
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	bulk_stop_copy(load);
	error_context_stack = errcb.previous;
}

/*
 * bulk_start_copy
 *		Start LOAD's stream on its writer (ending another table's stream
 *		there first) and send the rows kept.
 */
static void
bulk_start_copy(AfdwBulkLoad *load)
{
	AfdwConn   *conn = afdw_current_writer(*load->writer);

	*load->writer = conn;
	afdw_send_write(conn, load->copy_sql, true, load, bulk_drain);
	afdw_await_copy_in(conn, load->copy_sql);
	load->copying = true;
	load->streamed = true;
	dlist_push_tail(&bulk_loads, &load->bulk_node);
	if (load->pending.len > 0)
		afdw_put_copy(conn, load->pending.data, load->pending.len,
					  load->copy_sql);
	resetStringInfo(&load->pending);
	load->npending = 0;
}

/*
 * bulk_end_all_streams
 *		Send the end of every stream of ESTATE's statement, without waiting,
 *		so that the remote servers finish their loads at the same time.
 *		(Only at the end of the statement: all its rows are in.)
 */
static void
bulk_end_all_streams(EState *estate)
{
	dlist_iter	it;

	dlist_foreach(it, &bulk_loads)
	{
		AfdwBulkLoad *other = dlist_container(AfdwBulkLoad, bulk_node, it.cur);

		if (other->estate == estate && afdw_copy_open(*other->writer))
			bulk_send_end(other);
	}
}

/*
 * copy_line_as_row
 *		Append LINE, a line of COPY's text format with NFIELDS fields (no
 *		newline), to BUF as a row of literals: (value, NULL, ...).
 */
static void
copy_line_as_row(StringInfo buf, char *line, int nfields)
{
	char	   *p = line;

	appendStringInfoChar(buf, '(');
	for (int i = 0; i < nfields; i++)
	{
		char	   *start = p;
		char	   *out = p;

		if (i > 0)
			appendStringInfoString(buf, ", ");
		if (p[0] == '\\' && p[1] == 'N' && (p[2] == '\t' || p[2] == '\0'))
		{
			appendStringInfoString(buf, "NULL");
			p += (p[2] == '\t') ? 3 : 2;
			continue;
		}
		/* Undo the escapes in place: an escape is longer than its char. */
		while (*p != '\t' && *p != '\0')
		{
			if (*p == '\\' && p[1] != '\0')
			{
				p++;
				*out++ = (*p == 'n') ? '\n' : (*p == 'r') ? '\r' :
					(*p == 't') ? '\t' : *p;
				p++;
				continue;
			}
			*out++ = *p++;
		}
		if (*p == '\t')
			p++;
		*out = '\0';
		afdw_append_literal(buf, start);
	}
	appendStringInfoChar(buf, ')');
}

/*
 * bulk_finish
 *		Send what LOAD holds: end its stream and wait for its answer, or send
 *		the rows kept, as one INSERT when the table never streamed (one
 *		round trip), else as one last stream.  At the END_OF_STATEMENT the
 *		other streams of the statement are ended at the same time, and a
 *		statement that is its own transaction may send its INSERT with the
 *		COMMIT; otherwise (afdw_flush_kept_rows) the rows are in the remote
 *		table on return, and the next rows are kept again.  In a
 *		subtransaction of the statement's, the rows kept go as an INSERT at
 *		the statement's level (afdw_flush_kept_rows has checked that it can).
 */
static void
bulk_finish(AfdwBulkLoad *load, bool end_of_statement)
{
	StringInfoData sql;
	char	   *line = load->pending.data;
	bool		deeper = GetCurrentTransactionNestLevel() > load->level;

	Assert(!(deeper && end_of_statement));

	if (load->copying)
	{
		if (end_of_statement)
			bulk_end_all_streams(load->estate);
		bulk_stop_copy(load);
	}
	if (load->npending == 0)
		return;
	if (load->streamed && !deeper)
	{
		bulk_start_copy(load);
		bulk_stop_copy(load);
		return;
	}

	/* The kept lines back into literals, the row's parameters. */
	initStringInfo(&sql);
	appendStringInfoString(&sql, load->head);
	for (int i = 0; i < load->npending; i++)
	{
		char	   *end = strchr(line, '\n');

		if (i > 0)
			appendStringInfoString(&sql, ", ");
		*end = '\0';
		copy_line_as_row(&sql, line, load->nfields);
		line = end + 1;
	}
	appendStringInfoString(&sql, load->tail);
	load->npending = 0;
	resetStringInfo(&load->pending);
	*load->writer = afdw_current_writer(*load->writer);
	if (deeper)
	{
		PG_TRY();
		{
			PQclear(afdw_run_write_at(*load->writer, sql.data, load->level));
		}
		PG_CATCH();
		{
			note_lost(load);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	/* A statement that is its own transaction: sent with the COMMIT. */
	else if (!end_of_statement || !afdw_defer_write(*load->writer, sql.data))
		PQclear(afdw_run_write(*load->writer, sql.data));
	pfree(sql.data);
}

/*
 * note_lost
 *		Sending LOAD's rows from a subtransaction failed with the error
 *		being raised: keep its code and message for check_not_lost.
 */
static void
note_lost(AfdwBulkLoad *load)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(load));
	ErrorData  *edata = CopyErrorData();

	MemoryContextSwitchTo(old);
	if (load->lost_code == 0)
	{
		load->lost_code = edata->sqlerrcode;
		load->lost_message = edata->message;
	}
}

/*
 * check_not_lost
 *		Raise, as the statement's, the error with which sending LOAD's rows
 *		failed in a subtransaction (which may have caught it).
 */
static void
check_not_lost(AfdwBulkLoad *load)
{
	if (load->lost_code == 0)
		return;
	ereport(ERROR,
			(errcode(load->lost_code),
			 errmsg_internal("%s", load->lost_message),
			 errdetail("Rows of foreign table \"%s\" failed to load in a subtransaction of the statement, which caught the error.",
					   load->relname)));
}

/*
 * afdw_bulk_end
 *		The statement has given LOAD all its rows: send what it holds (see
 *		bulk_finish) and take it out of the lists.
 */
void
afdw_bulk_end(AfdwBulkLoad *load)
{
	check_not_lost(load);
	bulk_finish(load, true);
	if (load->held)
	{
		dlist_delete(&load->held_node);
		load->held = false;
	}
}

/*
 * afdw_bulk_forget
 *		LOAD's statement memory goes (after an error, say) while LOAD did
 *		not end: take it out of the lists and forget its stream (the abort of
 *		the transaction or savepoint fails it remotely).  The caller gives
 *		the writer back.
 */
void
afdw_bulk_forget(AfdwBulkLoad *load)
{
	if (load->copying)
	{
		dlist_delete(&load->bulk_node);
		load->copying = false;
	}
	if (load->held)
	{
		dlist_delete(&load->held_node);
		load->held = false;
	}
	if (*load->writer != NULL)
		afdw_forget_owner(*load->writer, load);
}

/*
 * afdw_flush_kept_rows
 *		A query is about to read SERVERID's tables while a statement keeps
 *		rows for them (a trigger of another table, a function, a sibling
 *		partition's trigger reading the table, in the middle of an INSERT
 *		into it): send those rows first, so that the query finds them, as
 *		it would had every row been sent at once (postgres_fdw's batches
 *		are sent before such a trigger fires).
 */
void
afdw_flush_kept_rows(Oid serverid)
{
	dlist_iter	it;

	dlist_foreach(it, &held_loads)
	{
		AfdwBulkLoad *load = dlist_container(AfdwBulkLoad, held_node, it.cur);
		ErrorContextCallback errcb;

		if (load->serverid != serverid || (!load->copying && load->npending == 0))
			continue;
		/* A stream is the statement's level's: it can end at any level. */
		if (!load->copying && GetCurrentTransactionNestLevel() > load->level)
		{
			*load->writer = afdw_current_writer(*load->writer);
			if (!afdw_can_write_at(*load->writer, load->level))
				continue;
		}
		errcb.callback = afdw_write_error_context;
		errcb.arg = unconstify(char *, load->relname);
		errcb.previous = error_context_stack;
		error_context_stack = &errcb;
		bulk_finish(load, false);
		error_context_stack = errcb.previous;
	}
}
