/*-------------------------------------------------------------------------
 *
 * scan.c
 *		Executor callbacks of async_fdw's scans, and ANALYZE.
 *
 * A scan reads its remote SELECT in one of three ways: streamed with
 * COPY (query) TO STDOUT, in text or binary format; through a cursor,
 * fetch_size rows per FETCH; or, for a parameterized scan, by executing a
 * statement prepared in the remote session.  Each remote row becomes a
 * virtual tuple in the scan's slot when the executor asks for it, through
 * the local types' input (or receive) functions.
 *
 * Work may be asked for before it is needed (a FETCH ahead, a stream read
 * ahead, a query started eagerly for a scan the plan may never run): an
 * error then waits in place of the rows it stands for and is raised only
 * if they are used, while the remote savepoint around each command keeps
 * the remote transaction usable (afdw_send_in_xact).  A stream whose
 * connection another scan needs is read on into a tuplestore
 * (spill_stream).  Under an asynchronous Append, scans sharing a
 * connection wait on its socket once (socket_in_wait, wake_append).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "commands/vacuum.h"
#include "executor/execAsync.h"
#include "executor/executor.h"
#include "executor/instrument.h"
#include "foreign/fdwapi.h"
#include "funcapi.h"
#include "lib/ilist.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/nodeFuncs.h"
#include "port/pg_bswap.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sampling.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "async_fdw.h"

/* What turns rows of text values into local tuples, with its scratch space. */
typedef struct RowBuilder
{
	Relation	rel;
	AttInMetadata *attinmeta;
	List	   *retrieved_attrs;	/* local column numbers of the values */
	Datum	   *values;			/* natts of them */
	bool	   *nulls;
	char	  **fields;			/* one row's text values */
	int			max_fields;
	char	   *in_kinds;		/* IN_ kind of each column */
	FmgrInfo   *recv_funcs;		/* receive functions, for binary streams */
	Oid		   *recv_ioparams;
	char	   *recv_kinds;		/* RECV_ kind of each column */
	MemoryContext row_cxt;		/* input functions' garbage; reset per batch */
	ItemPointerData ctid;		/* the latest row's remote ctid, if fetched */
} RowBuilder;

/*
 * Text values that convert_row reads itself, as their input functions
 * would (these call exactly this), without a function call.
 */
#define IN_CALL			'c'		/* call the input function */
#define IN_INT4			'4'
#define IN_INT8			'8'
#define IN_TEXT			't'

/*
 * Binary values that convert_binary_row reads itself, as their receive
 * functions would, without a function call: the most common types.
 * (Text needs no encoding check: the remote server sends the database's
 * encoding, as for the text format, which is not checked either.)
 */
#define RECV_CALL		'c'		/* call the receive function */
#define RECV_INT4		'4'
#define RECV_INT8		'8'
#define RECV_FLOAT8		'f'
#define RECV_TEXT		't'

/* Where the scan's latest command to the remote server stands. */
typedef enum AfdwRequest
{
	REQ_NONE,					/* nothing in flight */
	REQ_INFLIGHT				/* sent; results not all read */
} AfdwRequest;

/*
 * FETCH commands per message after the first: while the coordinator works
 * through one message's batches, the next message is on its way, so a
 * round trip brings AFDW_FETCH_DEPTH batches rather than one.
 */
#define AFDW_FETCH_DEPTH	2

/* Batches received and not yet used: at most two messages' worth. */
#define AFDW_QUEUE_SIZE		(2 * AFDW_FETCH_DEPTH)

/*
 * Lines of a stream per batch, at most, whatever fetch_size says: the rows
 * are read from the socket as the batch needs them, so a bigger batch
 * saves nothing, and the arrays of a batch are allocated at its size.
 */
#define AFDW_STREAM_BATCH_MAX	100000

/* A stream batch's line buffer: first size, and most kept between batches. */
#define LINEBUF_INITIAL		8192
#define LINEBUF_KEEP		(8 * 1024 * 1024)
#define LINE(st, i)			((st)->linebuf + (st)->line_offs[i])

/* State of one foreign scan, in ForeignScanState->fdw_state. */
typedef struct AfdwScanState
{
	ForeignScanState *node;
	EState	   *estate;
	Relation	rel;
	RowBuilder	rb;				/* remote rows to tuples */
	char	   *sql;			/* remote SELECT */
	List	   *retrieved_attrs;	/* local column numbers of its columns */
	int			fetch_size;

	AfdwConn   *conn;
	bool		released;		/* conn given back to the pool */
	unsigned int cursor_number;
	bool		cursor_open;
	bool		declaring;		/* the request in flight declares it */
	bool		cursor_gone;	/* ... and failed: the savepoint took it */
	bool		draining;		/* another scan reads our results (drain) */

	/* Parameters: expressions and their output functions. */
	int			nparams;
	List	   *param_exprs;	/* ExprStates */
	FmgrInfo   *param_flinfo;
	const char **param_values;

	/* The command in flight, and the batches that arrived. */
	AfdwRequest req;
	char	   *req_sql;		/* its text, for error messages */
	PGresult   *queue[AFDW_QUEUE_SIZE];
	int			qhead;
	int			qcount;
	bool		remote_eof;		/* a short batch arrived: no more to fetch */

	/*
	 * The current batch, converted a row at a time as the rows are asked
	 * for: a FETCH's result, or lines of a stream.  A stream's lines are
	 * copied one after the other into linebuf, and each line libpq gave is
	 * freed at once: libpq mallocs every line, and a malloc'd line held
	 * until its batch ends is costly for the allocator.
	 */
	PGresult   *batch_res;
	char	   *linebuf;		/* the lines, each with libpq's zero byte */
	Size		linebuf_size;
	Size		linebuf_used;
	Size	   *line_offs;		/* room for fetch_size of them */
	int		   *line_lens;
	int			nlines;
	int			ntuples;
	int			next_tuple;
	int			nbatches;		/* batches used since the cursor opened */

	/* Streaming with COPY (query) TO STDOUT. */
	bool		stream_planned; /* the plan chose streaming */
	bool		stream_off;		/* rescanned before the end: use a cursor */
	bool		streaming;		/* the current remote query is a stream */
	bool		copying;		/* its rows are arriving */
	bool		binary_capable; /* every column's type has a binary form */
	bool		binary;			/* the stream is in binary format */
	bool		header_pending; /* ... and its header is still to come */
	bool		checking;		/* a check of the remote types follows it */

	/*
	 * Parameterized scans run a statement prepared in the remote session
	 * (text in prepared_sql), with a LIMIT of fetch_size + 1 rows: a
	 * rescan that overflows it is run again with a cursor, as are the
	 * later ones (prepare_off).
	 */
	char	   *prepared_sql;
	bool		executing;		/* the request in flight is an EXECUTE */
	unsigned int preparing;		/* ... after the PREPARE of this number */
	bool		overflow;		/* ... whose rows overflowed the LIMIT */
	bool		prepare_off;

	/* Set while the Append asks for a row without waiting for it. */
	bool		nowait;
	bool		not_ready;		/* ... and no row had arrived */
	AsyncRequest *areq;			/* the Append's request, once it asked */

	/*
	 * The scan waits, under an asynchronous Append, for a sibling of the
	 * same Append whose command occupies the shared connection: that
	 * sibling waits on the socket, this one sends when the connection is
	 * free (a socket can be waited on once per wait).
	 */
	bool		conn_wait;

	/*
	 * The socket this scan added to its Append's wait set, until its
	 * request is served: no sibling of the same Append adds it again.
	 */
	pgsocket	wait_sock;

	/*
	 * Whether the executor has asked the scan for a row yet.  A scan that
	 * was started eagerly and never asked is stopped rather than waited
	 * for at its end, and its errors are never seen.
	 */
	bool		demanded;

	/* The query runs inside another statement (see afdw_send_in_xact). */
	bool		nested;

	/* SELECT ... FOR UPDATE/SHARE: the scan locks the remote rows. */
	bool		locks_rows;

	/*
	 * An error that ended a stream after rows that are still to be used:
	 * raised when the scan needs the rows after them.
	 */
	PGresult   *held_error;
	char	   *held_sql;

	/*
	 * The rest of a stream read into memory (spilling to disk past
	 * work_mem) because another scan needed its connection: raw COPY
	 * lines, one bytea per row, read back in batches.
	 */
	Tuplestorestate *spill;
	TupleTableSlot *spill_slot;
	bool		spill_eof;		/* the spill's rows are all used */

	/* Scans whose query is sent at the first fetch of any of them. */
	dlist_node	pending_node;
	bool		pending;

	/*
	 * Asynchronous children of one Append (async_parent, its plan) may
	 * stream on a connection they share, one after the other: a stream
	 * that finds the connection streaming for a sibling waits (queued)
	 * and starts when that stream ends.
	 */
	Plan	   *async_parent;
	bool		queued;
	dlist_node	active_node;	/* in active_scans from Begin to End */
	bool		active;

	MemoryContext scan_cxt;		/* long-lived bits of the scan */
	MemoryContext batch_cxt;	/* parameter values of the current query */
	MemoryContext row_cxt;		/* values of the current batch's rows */
	MemoryContextCallback cleanup;
} AfdwScanState;

/*
 * Scans of this backend that have not sent their query yet.  The first
 * fetch of any scan sends the queries of all the others of the same
 * executor too, so that every remote server starts working at once, even
 * under a MergeAppend or a plan that reads its children one by one.
 */
static dlist_head pending_scans = DLIST_STATIC_INIT(pending_scans);

/* Scans of this backend between their Begin and End, with a connection. */
static dlist_head active_scans = DLIST_STATIC_INIT(active_scans);

static void drain_scan(void *arg);
static void forget_waits(AfdwScanState *st, bool all);
static void send_start(AfdwScanState *st);
static void spill_stream(AfdwScanState *st);

/*
 * The wait set of an asynchronous Append whose wait must end at once (see
 * wake_append): the backend's latch is set again after each preparation of
 * the wait by a child, since a child's own waits may have reset it.
 */
static WaitEventSet *wake_set = NULL;

#if PG_VERSION_NUM < 150007
/*
 * The wait sets of asynchronous Appends (nested in one another's
 * conditions) to which the backend's latch was added in their current wait
 * (see wake_append); a set can hold one latch.  A set leaves the list when
 * its Append's next wait begins (forget_waits).
 */
#define AFDW_MAX_LATCH_SETS		16
static WaitEventSet *latch_sets[AFDW_MAX_LATCH_SETS];
static int	n_latch_sets = 0;
#endif

/*
 * What is known of the remote types of foreign tables' columns, per local
 * table: whether they are the local types, so that streams of the table
 * can be in binary format.  Built from the answers of remote checks; a
 * change to a foreign table, server or user mapping forgets it.
 */
typedef enum BinaryStatus
{
	BINARY_UNKNOWN,
	BINARY_SAME_TYPES,
	BINARY_OTHER_TYPES
} BinaryStatus;

typedef struct BinaryEntry
{
	Oid			relid;			/* hash key */
	BinaryStatus status;
} BinaryEntry;

static HTAB *binary_cache = NULL;

/* Where a conversion error happened, for its context line. */
typedef struct ConversionPosition
{
	Relation	rel;
	AttrNumber	attnum;			/* 0 while not in a column */
} ConversionPosition;

/*
 * conversion_error_context
 *		Name the foreign table and column whose remote value did not convert.
 */
static void
conversion_error_context(void *arg)
{
	ConversionPosition *pos = (ConversionPosition *) arg;

	if (pos->attnum > 0)
		errcontext("column \"%s\" of foreign table \"%s\"",
				   NameStr(TupleDescAttr(RelationGetDescr(pos->rel),
										 pos->attnum - 1)->attname),
				   RelationGetRelationName(pos->rel));
}

/*
 * scan_error_context
 *		Name the foreign table whose scan failed.
 */
static void
scan_error_context(void *arg)
{
	errcontext("scan of foreign table \"%s\"",
			   RelationGetRelationName((Relation) arg));
}

/*
 * init_row_builder
 *		Prepare RB to turn rows of text values of REL's columns
 *		RETRIEVED_ATTRS into tuples; scratch space comes from the current
 *		memory context, input-function garbage goes to ROW_CXT, which the
 *		caller resets once per batch.
 */
static void
init_row_builder(RowBuilder *rb, Relation rel, List *retrieved_attrs,
				 MemoryContext row_cxt)
{
	int			natts = RelationGetDescr(rel)->natts;

	rb->rel = rel;
	rb->attinmeta = TupleDescGetAttInMetadata(RelationGetDescr(rel));
	rb->retrieved_attrs = retrieved_attrs;
	rb->values = palloc0(sizeof(Datum) * Max(natts, 1));
	rb->nulls = palloc(sizeof(bool) * Max(natts, 1));
	rb->max_fields = list_length(retrieved_attrs) + 1;
	rb->fields = palloc(sizeof(char *) * rb->max_fields);
	rb->in_kinds = palloc(Max(natts, 1));
	for (int i = 0; i < natts; i++)
	{
		switch (TupleDescAttr(RelationGetDescr(rel), i)->atttypid)
		{
			case INT4OID:
				rb->in_kinds[i] = IN_INT4;
				break;
			case INT8OID:
				rb->in_kinds[i] = IN_INT8;
				break;
			case TEXTOID:
				rb->in_kinds[i] = IN_TEXT;
				break;
			default:
				rb->in_kinds[i] = IN_CALL;
				break;
		}
	}
	rb->row_cxt = row_cxt;
	ItemPointerSetInvalid(&rb->ctid);
}

/*
 * check_width
 *		Complain unless a remote row of NFIELDS columns has the columns RB
 *		expects.  With no column needed the remote SELECT list is a lone
 *		NULL.
 */
static void
check_width(RowBuilder *rb, int nfields)
{
	if (list_length(rb->retrieved_attrs) != nfields &&
		!(rb->retrieved_attrs == NIL && nfields == 1))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("remote query of foreign table \"%s\" returned %d columns, expected %d",
						RelationGetRelationName(rb->rel), nfields,
						list_length(rb->retrieved_attrs))));
}

/*
 * push_conversion_context
 *		Make errors name RB's table and POS's column until the caller pops
 *		ERRCB off error_context_stack.
 */
static void
push_conversion_context(RowBuilder *rb, ConversionPosition *pos,
						ErrorContextCallback *errcb)
{
	pos->rel = rb->rel;
	pos->attnum = 0;
	errcb->callback = conversion_error_context;
	errcb->arg = pos;
	errcb->previous = error_context_stack;
	error_context_stack = errcb;
}

/*
 * convert_row
 *		Turn the NFIELDS text values in RB->fields (NULL for a null) into
 *		VALUES and NULLS, arrays of the relation's width; columns not
 *		retrieved are NULL.  By-reference values are allocated in
 *		RB->row_cxt.
 */
static void
convert_row(RowBuilder *rb, int nfields, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc = RelationGetDescr(rb->rel);
	ConversionPosition pos;
	ErrorContextCallback errcb;
	MemoryContext oldcxt;
	ListCell   *lc;
	int			col = 0;

	check_width(rb, nfields);
	memset(nulls, true, sizeof(bool) * tupdesc->natts);
	push_conversion_context(rb, &pos, &errcb);

	oldcxt = MemoryContextSwitchTo(rb->row_cxt);
	foreach(lc, rb->retrieved_attrs)
	{
		int			attnum = lfirst_int(lc);
		char	   *value = rb->fields[col++];

		if (attnum == SelfItemPointerAttributeNumber)
		{
			/* The remote ctid, for the slot's tts_tid. */
			pos.attnum = 0;
			if (value == NULL)
				ItemPointerSetInvalid(&rb->ctid);
			else
				ItemPointerCopy((ItemPointer) DatumGetPointer(DirectFunctionCall1(tidin,
																		CStringGetDatum(value))),
								&rb->ctid);
			continue;
		}
		pos.attnum = attnum;
		nulls[attnum - 1] = (value == NULL);
		if (value == NULL && rb->in_kinds[attnum - 1] != IN_CALL)
		{
			/* Their input functions are strict. */
			values[attnum - 1] = (Datum) 0;
			continue;
		}
		switch (rb->in_kinds[attnum - 1])
		{
			case IN_INT4:
				values[attnum - 1] = Int32GetDatum(pg_strtoint32(value));
				break;
			case IN_INT8:
				values[attnum - 1] = Int64GetDatum(pg_strtoint64(value));
				break;
			case IN_TEXT:
				values[attnum - 1] = PointerGetDatum(cstring_to_text(value));
				break;
			default:
				values[attnum - 1] =
					InputFunctionCall(&rb->attinmeta->attinfuncs[attnum - 1], value,
									  rb->attinmeta->attioparams[attnum - 1],
									  rb->attinmeta->atttypmods[attnum - 1]);
				break;
		}
	}
	MemoryContextSwitchTo(oldcxt);
	error_context_stack = errcb.previous;
}

/*
 * bad_binary_row
 *		Report a binary COPY row that cannot be read.
 */
static void
bad_binary_row(RowBuilder *rb)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("incorrect binary data format in a remote row of foreign table \"%s\"",
					RelationGetRelationName(rb->rel))));
}

/*
 * convert_binary_row
 *		Like convert_row, for DATA, LEN bytes of one row of binary COPY:
 *		the number of fields, then each field's length (-1 for NULL) and
 *		bytes, read with the local types' receive functions.  DATA must
 *		have one writable byte past its end.  With IN_PLACE, values may
 *		point into DATA, which is rewritten and must outlive them.
 */
static void
convert_binary_row(RowBuilder *rb, char *data, int len, bool in_place,
				   Datum *values, bool *nulls)
{
	TupleDesc	tupdesc = RelationGetDescr(rb->rel);
	char	   *p = data;
	char	   *end = data + len;
	ConversionPosition pos;
	ErrorContextCallback errcb;
	MemoryContext oldcxt;
	ListCell   *lc;
	uint16		n16;

	if (len < 2)
		bad_binary_row(rb);
	memcpy(&n16, p, 2);
	p += 2;
	check_width(rb, (int16) pg_ntoh16(n16));
	memset(nulls, true, sizeof(bool) * tupdesc->natts);
	push_conversion_context(rb, &pos, &errcb);

	oldcxt = MemoryContextSwitchTo(rb->row_cxt);
	foreach(lc, rb->retrieved_attrs)
	{
		int			i = lfirst_int(lc) - 1;
		uint32		n32;
		int32		flen;
		StringInfoData buf;
		char		saved;

		pos.attnum = i + 1;
		if (end - p < 4)
			bad_binary_row(rb);
		memcpy(&n32, p, 4);
		p += 4;
		flen = (int32) pg_ntoh32(n32);
		if (i + 1 == SelfItemPointerAttributeNumber)
		{
			uint16		n16b;

			/* The remote ctid: a block number and an offset. */
			pos.attnum = 0;
			ItemPointerSetInvalid(&rb->ctid);
			if (flen == -1)
				continue;
			if (flen != 6 || end - p < 6)
				bad_binary_row(rb);
			memcpy(&n32, p, 4);
			memcpy(&n16b, p + 4, 2);
			ItemPointerSet(&rb->ctid, pg_ntoh32(n32), pg_ntoh16(n16b));
			p += 6;
			continue;
		}
		if (flen == -1)
			continue;
		if (flen < 0 || flen > end - p)
			bad_binary_row(rb);

		switch (rb->recv_kinds[i])
		{
			case RECV_INT4:
				if (flen != 4)
					bad_binary_row(rb);
				memcpy(&n32, p, 4);
				values[i] = Int32GetDatum((int32) pg_ntoh32(n32));
				nulls[i] = false;
				p += flen;
				continue;
			case RECV_INT8:
			case RECV_FLOAT8:
				{
					uint64		n64;

					if (flen != 8)
						bad_binary_row(rb);
					memcpy(&n64, p, 8);
					n64 = pg_ntoh64(n64);
					if (rb->recv_kinds[i] == RECV_INT8)
						values[i] = Int64GetDatum((int64) n64);
					else
					{
						float8		f;

						memcpy(&f, &n64, 8);
						values[i] = Float8GetDatum(f);
					}
					nulls[i] = false;
					p += flen;
					continue;
				}
			case RECV_TEXT:

				/*
				 * A short text becomes a datum where it lies: the last
				 * byte of its length word, already read, takes a one-byte
				 * varlena header, which needs no alignment.
				 */
				if (in_place && flen <= (int32) (VARATT_SHORT_MAX - VARHDRSZ_SHORT))
				{
					SET_VARSIZE_SHORT(p - 1, flen + VARHDRSZ_SHORT);
					values[i] = PointerGetDatum(p - 1);
				}
				else
					values[i] = PointerGetDatum(cstring_to_text_with_len(p, flen));
				nulls[i] = false;
				p += flen;
				continue;
		}

		/* Receive functions may count on a terminating zero byte. */
		buf.data = p;
		buf.len = flen;
		buf.maxlen = flen + 1;
		buf.cursor = 0;
		saved = p[flen];
		p[flen] = '\0';
		values[i] = ReceiveFunctionCall(&rb->recv_funcs[i], &buf,
										rb->recv_ioparams[i],
										rb->attinmeta->atttypmods[i]);
		p[flen] = saved;
		if (buf.cursor != buf.len)
			bad_binary_row(rb);
		nulls[i] = false;
		p += flen;
	}
	MemoryContextSwitchTo(oldcxt);
	error_context_stack = errcb.previous;

	if (p != end)
		bad_binary_row(rb);
}

/*
 * form_tuple
 *		A local heap tuple, built in CXT, from the NFIELDS text values in
 *		RB->fields.
 */
static HeapTuple
form_tuple(RowBuilder *rb, int nfields, MemoryContext cxt)
{
	MemoryContext oldcxt;
	HeapTuple	tuple;

	convert_row(rb, nfields, rb->values, rb->nulls);
	oldcxt = MemoryContextSwitchTo(cxt);
	tuple = heap_form_tuple(RelationGetDescr(rb->rel), rb->values, rb->nulls);
	MemoryContextSwitchTo(oldcxt);
	return tuple;
}

/*
 * fields_of_result
 *		Point RB->fields at the values of row ROW of RES; returns how many.
 */
static int
fields_of_result(RowBuilder *rb, PGresult *res, int row)
{
	int			nfields = PQnfields(res);

	if (nfields > rb->max_fields)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("remote query of foreign table \"%s\" returned %d columns, expected %d",
						RelationGetRelationName(rb->rel), nfields,
						list_length(rb->retrieved_attrs))));
	for (int i = 0; i < nfields; i++)
		rb->fields[i] = PQgetisnull(res, row, i) ? NULL : PQgetvalue(res, row, i);
	return nfields;
}

/*
 * make_tuple
 *		A local heap tuple from row ROW of RES, built in CXT.
 */
static HeapTuple
make_tuple(RowBuilder *rb, PGresult *res, int row, MemoryContext cxt)
{
	return form_tuple(rb, fields_of_result(rb, res, row), cxt);
}

/*
 * split_copy_line
 *		Split LINE, LEN bytes of COPY's text format, into its fields in
 *		place: tabs become terminators, escapes are undone (an escape is
 *		never shorter than what it stands for), \N becomes NULL.  Returns
 *		how many fields there are, at most MAX (more is an error).
 */
static int
split_copy_line(char *line, int len, char **fields, int max)
{
	char	   *p = line;
	char	   *end = line + len;
	int			n = 0;

	if (len > 0 && end[-1] == '\n')
		end--;

	for (;;)
	{
		char	   *out = p;
		char	   *start = p;
		bool		null;

		if (n >= max)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("remote COPY returned more columns than expected")));

		/* Written as \N, the field is NULL. */
		null = (end - p >= 2 && p[0] == '\\' && p[1] == 'N' &&
				(end - p == 2 || p[2] == '\t'));

		/* Most fields have no escape: find the tab and cut there. */
		if (!null)
		{
			char	   *tab = memchr(p, '\t', end - p);
			char	   *fend = tab ? tab : end;

			if (memchr(p, '\\', fend - p) == NULL)
			{
				*fend = '\0';
				fields[n++] = start;
				if (tab == NULL)
					break;
				p = tab + 1;
				continue;
			}
		}

		while (p < end && *p != '\t')
		{
			char		c = *p++;

			if (c == '\\' && p < end)
			{
				c = *p++;
				switch (c)
				{
					case 'b':
						c = '\b';
						break;
					case 'f':
						c = '\f';
						break;
					case 'n':
						c = '\n';
						break;
					case 'r':
						c = '\r';
						break;
					case 't':
						c = '\t';
						break;
					case 'v':
						c = '\v';
						break;
					case 'N':
						/* \N alone is NULL; COPY never writes it otherwise */
						break;
					case 'x':
						{
							int			v = 0;
							int			digits = 0;

							while (digits < 2 && p < end && isxdigit((unsigned char) *p))
							{
								v = v * 16 + (isdigit((unsigned char) *p) ? *p - '0' :
											  (tolower((unsigned char) *p) - 'a' + 10));
								p++;
								digits++;
							}
							if (digits > 0)
								c = (char) v;
							break;
						}
					default:
						if (c >= '0' && c <= '7')
						{
							int			v = c - '0';

							for (int i = 0; i < 2 && p < end && *p >= '0' && *p <= '7'; i++)
								v = v * 8 + (*p++ - '0');
							c = (char) v;
						}
						/* any other character stands for itself */
						break;
				}
			}
			*out++ = c;
		}

		fields[n++] = null ? NULL : start;

		if (p >= end)
		{
			*out = '\0';
			break;
		}
		*out = '\0';
		p++;					/* the tab */
	}
	return n;
}

/*
 * forget_binary_status
 *		Invalidation callbacks: forget what is known of the remote types of
 *		a changed foreign table, or of every table when a server or user
 *		mapping changed (or when RELID is InvalidOid).
 */
static void
forget_binary_status(Oid relid)
{
	HASH_SEQ_STATUS seq;
	BinaryEntry *entry;

	if (binary_cache == NULL)
		return;
	if (OidIsValid(relid))
	{
		(void) hash_search(binary_cache, &relid, HASH_REMOVE, NULL);
		return;
	}
	hash_seq_init(&seq, binary_cache);
	while ((entry = hash_seq_search(&seq)) != NULL)
		(void) hash_search(binary_cache, &entry->relid, HASH_REMOVE, NULL);
}

static void
binary_relcache_callback(Datum arg pg_attribute_unused(), Oid relid)
{
	forget_binary_status(relid);
}

static void
binary_syscache_callback(Datum arg pg_attribute_unused(),
						 int cacheid pg_attribute_unused(),
						 uint32 hashvalue pg_attribute_unused())
{
	forget_binary_status(InvalidOid);
}

/*
 * binary_status
 *		What is known of the remote types of foreign table RELID.
 */
static BinaryStatus
binary_status(Oid relid)
{
	BinaryEntry *entry;

	if (binary_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(BinaryEntry);
		binary_cache = hash_create("async_fdw remote types", 64, &ctl,
								   HASH_ELEM | HASH_BLOBS);
		CacheRegisterRelcacheCallback(binary_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(FOREIGNSERVEROID,
									  binary_syscache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(USERMAPPINGOID,
									  binary_syscache_callback, (Datum) 0);
	}
	entry = hash_search(binary_cache, &relid, HASH_FIND, NULL);
	return entry ? entry->status : BINARY_UNKNOWN;
}

/*
 * set_binary_status
 *		Remember what a remote check said of foreign table RELID.
 */
static void
set_binary_status(Oid relid, BinaryStatus status)
{
	BinaryEntry *entry;

	(void) binary_status(relid);
	entry = hash_search(binary_cache, &relid, HASH_ENTER, NULL);
	entry->status = status;
}

/*
 * prepare_binary
 *		Whether the scan's rows may stream in binary format: every column
 *		has a built-in type (the same type, with the same binary form, on a
 *		server of the same major version) with a receive function, and
 *		whose binary form means the same on both servers (not an OID).  If
 *		so, look the receive functions up.
 */
static bool
prepare_binary(AfdwScanState *st)
{
	TupleDesc	tupdesc = RelationGetDescr(st->rel);
	RowBuilder *rb = &st->rb;
	ListCell   *lc;

	if (st->retrieved_attrs == NIL)
		return false;

	rb->recv_funcs = palloc0(sizeof(FmgrInfo) * tupdesc->natts);
	rb->recv_ioparams = palloc0(sizeof(Oid) * tupdesc->natts);
	rb->recv_kinds = palloc(tupdesc->natts);
	memset(rb->recv_kinds, RECV_CALL, tupdesc->natts);
	foreach(lc, st->retrieved_attrs)
	{
		int			attnum = lfirst_int(lc);
		Form_pg_attribute att;
		HeapTuple	tup;
		Form_pg_type typ;
		bool		ok;

		/* convert_binary_row reads the ctid itself. */
		if (attnum == SelfItemPointerAttributeNumber)
			continue;
		att = TupleDescAttr(tupdesc, attnum - 1);
		if (att->atttypid >= FirstGenbkiObjectId || afdw_type_names_by_oid(att->atttypid))
			return false;
		tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(att->atttypid));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for type %u", att->atttypid);
		typ = (Form_pg_type) GETSTRUCT(tup);
		ok = OidIsValid(typ->typreceive) && OidIsValid(typ->typsend) &&
			typ->typtype != TYPTYPE_PSEUDO && typ->typtype != TYPTYPE_DOMAIN;
		if (ok)
		{
			fmgr_info(typ->typreceive, &rb->recv_funcs[attnum - 1]);
			rb->recv_ioparams[attnum - 1] = getTypeIOParam(tup);
		}
		ReleaseSysCache(tup);
		if (!ok)
			return false;
		if (att->atttypid == INT4OID)
			rb->recv_kinds[attnum - 1] = RECV_INT4;
		else if (att->atttypid == INT8OID)
			rb->recv_kinds[attnum - 1] = RECV_INT8;
		else if (att->atttypid == FLOAT8OID)
			rb->recv_kinds[attnum - 1] = RECV_FLOAT8;
		else if (att->atttypid == TEXTOID)
			rb->recv_kinds[attnum - 1] = RECV_TEXT;
	}
	return true;
}

/*
 * binary_allowed
 *		Whether this stream of a binary-capable scan may use binary format
 *		now: receive functions read text in the session's client encoding,
 *		which must then be the database's (the remote side sends that), and
 *		binary forms are only sure to match within a major version.
 */
static bool
binary_allowed(AfdwScanState *st)
{
	return st->binary_capable &&
		pg_get_client_encoding() == GetDatabaseEncoding() &&
		PQserverVersion(afdw_pgconn(st->conn)) / 10000 == PG_VERSION_NUM / 10000;
}

/*
 * scan_user
 *		The user mapping a scan of a relation in PLAN runs under.
 */
static UserMapping *
scan_user(ForeignScan *plan, EState *estate, Relation rel)
{
	Oid			userid;
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));

	/*
	 * PostgreSQL 16 moved the permission-checking user from the range table
	 * entry to the plan; the guard keeps the code ready for it.
	 */
#if PG_VERSION_NUM >= 160000
	userid = OidIsValid(plan->checkAsUser) ? plan->checkAsUser : GetUserId();
#else
	RangeTblEntry *rte = exec_rt_fetch(plan->scan.scanrelid, estate);

	userid = OidIsValid(rte->checkAsUser) ? rte->checkAsUser : GetUserId();
#endif
	return GetUserMapping(userid, table->serverid);
}

/*
 * clear_queue
 *		Drop the batches that arrived and were not used.
 */
static void
clear_queue(AfdwScanState *st)
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
	st->nlines = 0;
	st->linebuf_used = 0;
	/* A batch of huge rows leaves no huge buffer behind. */
	if (st->linebuf_size > LINEBUF_KEEP)
	{
		pfree(st->linebuf);
		st->linebuf = NULL;
		st->linebuf_size = 0;
	}
	st->ntuples = 0;
	st->next_tuple = 0;
}

/*
 * free_libpq_memory
 *		Give back what the scan holds outside PostgreSQL's memory contexts:
 *		the results queued and the current batch's result.
 *
 * Used when the scan's memory is going away: the line buffer and the rest
 * live in contexts that are deleted with (or before) the scan, so nothing
 * palloc'd may be touched here.
 */
static void
free_libpq_memory(AfdwScanState *st)
{
	clear_queue(st);
	if (st->batch_res != NULL)
	{
		PQclear(st->batch_res);
		st->batch_res = NULL;
	}
	if (st->held_error != NULL)
	{
		PQclear(st->held_error);
		st->held_error = NULL;
	}
	st->linebuf = NULL;
	st->linebuf_size = 0;
	st->linebuf_used = 0;
	st->nlines = 0;
	st->ntuples = 0;
	st->next_tuple = 0;
	/* The tuplestore's temporary file goes with the resource owner. */
	st->spill = NULL;
	st->spill_slot = NULL;
}

/*
 * drop_batch
 *		Done with the current batch: empty the slot, which may point into
 *		its values, and free it.
 */
static void
drop_batch(AfdwScanState *st)
{
	ExecClearTuple(st->node->ss.ss_ScanTupleSlot);
	free_batch(st);
	MemoryContextReset(st->row_cxt);
}

/*
 * scan_cleanup
 *		Memory-context callback: the executor state of the scan is going
 *		away, normally or on error.  Drop every reference to the scan held
 *		elsewhere, and give its connection back.
 *
 * It runs on the query context, whose child contexts (the scan's line
 * buffer among them) are already deleted: only the scan state itself,
 * which lives in the query context, and libpq memory may be touched.
 */
static void
scan_cleanup(void *arg)
{
	AfdwScanState *st = (AfdwScanState *) arg;

	if (st->pending)
	{
		dlist_delete(&st->pending_node);
		st->pending = false;
	}
	if (st->active)
	{
		dlist_delete(&st->active_node);
		st->active = false;
	}
	afdw_forget_owner(st->conn, st);
	if (!st->released)
	{
		afdw_release_connection(st->conn);
		st->released = true;
	}
	free_libpq_memory(st);
}

/*
 * find_async_parent_in
 *		The Append plan under PLAN that has CHILD among its subplans, or
 *		NULL.
 */
static Plan *
find_async_parent_in(Plan *plan, Plan *child)
{
	List	   *children = NIL;
	ListCell   *lc;
	Plan	   *found;

	check_stack_depth();
	if (plan == NULL)
		return NULL;
	switch (nodeTag(plan))
	{
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
			{
				if (lfirst(lc) == child)
					return plan;
			}
			children = ((Append *) plan)->appendplans;
			break;
		case T_MergeAppend:
			children = ((MergeAppend *) plan)->mergeplans;
			break;
		case T_SubqueryScan:
			children = list_make1(((SubqueryScan *) plan)->subplan);
			break;
		case T_CustomScan:
			children = ((CustomScan *) plan)->custom_plans;
			break;
		default:
			break;
	}
	foreach(lc, children)
	{
		if ((found = find_async_parent_in(lfirst(lc), child)) != NULL)
			return found;
	}
	if ((found = find_async_parent_in(plan->lefttree, child)) != NULL)
		return found;
	return find_async_parent_in(plan->righttree, child);
}

/*
 * find_async_parent
 *		The Append of STMT whose asynchronous child CHILD is, or NULL.
 */
static Plan *
find_async_parent(PlannedStmt *stmt, Plan *child)
{
	Plan	   *found = find_async_parent_in(stmt->planTree, child);
	ListCell   *lc;

	foreach(lc, stmt->subplans)
	{
		if (found != NULL)
			break;
		found = find_async_parent_in(lfirst(lc), child);
	}
	return found;
}

/*
 * afdwBeginForeignScan
 *		Take a connection and prepare the scan.  The query is sent at the
 *		first fetch of this or any other scan of the same query.
 */
static void
afdwBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	AfdwScanState *st;
	MemoryContext oldcxt;
	ListCell   *lc;
	int			i = 0;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	st = palloc0(sizeof(AfdwScanState));
	node->fdw_state = st;
	st->wait_sock = PGINVALID_SOCKET;
	st->node = node;
	st->estate = estate;
	st->rel = node->ss.ss_currentRelation;
	afdw_scan_private(plan, &st->sql, &st->retrieved_attrs, &st->fetch_size,
					  &st->stream_planned);

	st->scan_cxt = AllocSetContextCreate(estate->es_query_cxt,
										 "async_fdw scan",
										 ALLOCSET_SMALL_SIZES);
	st->batch_cxt = AllocSetContextCreate(estate->es_query_cxt,
										  "async_fdw batch",
										  ALLOCSET_DEFAULT_SIZES);
	st->row_cxt = AllocSetContextCreate(estate->es_query_cxt,
										"async_fdw row",
										ALLOCSET_DEFAULT_SIZES);
	init_row_builder(&st->rb, st->rel, st->retrieved_attrs, st->row_cxt);
	if (st->stream_planned)
		st->binary_capable = prepare_binary(st);

	st->nparams = list_length(plan->fdw_exprs);
	if (st->nparams > 0)
	{
		st->param_exprs = ExecInitExprList(plan->fdw_exprs, (PlanState *) node);
		st->param_flinfo = palloc0(sizeof(FmgrInfo) * st->nparams);
		st->param_values = palloc0(sizeof(char *) * st->nparams);
		foreach(lc, plan->fdw_exprs)
		{
			Oid			typoutput;
			bool		isvarlena;

			getTypeOutputInfo(exprType((Node *) lfirst(lc)), &typoutput, &isvarlena);
			fmgr_info(typoutput, &st->param_flinfo[i++]);
		}
	}

	/*
	 * A query that runs inside another statement (a function's) is not the
	 * statement the client sent: more scans may join its remote
	 * transaction later (see afdw_send_in_xact).
	 */
	st->nested = (debug_query_string == NULL || estate->es_sourceText == NULL ||
				  strcmp(estate->es_sourceText, debug_query_string) != 0);

	if (plan->scan.plan.async_capable && estate->es_epq_active == NULL &&
		st->stream_planned && st->nparams == 0)
		st->async_parent = find_async_parent(estate->es_plannedstmt,
											 (Plan *) plan);

	st->conn = afdw_acquire_connection(scan_user(plan, estate, st->rel));

	/*
	 * SELECT ... FOR UPDATE/SHARE: the remote rows stay locked until the
	 * remote COMMIT, which must be over when the local one is.
	 */
	st->locks_rows = (estate->es_rowmarks != NULL &&
					  estate->es_rowmarks[plan->scan.scanrelid - 1] != NULL &&
					  estate->es_rowmarks[plan->scan.scanrelid - 1]->strength != LCS_NONE);
	if (st->locks_rows)
		afdw_note_row_locks(st->conn);

	/* From here on the scan is referenced from outside its memory. */
	st->cleanup.func = scan_cleanup;
	st->cleanup.arg = st;
	MemoryContextRegisterResetCallback(estate->es_query_cxt, &st->cleanup);

	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	dlist_push_tail(&pending_scans, &st->pending_node);
	st->pending = true;
	dlist_push_tail(&active_scans, &st->active_node);
	st->active = true;
	MemoryContextSwitchTo(oldcxt);
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
 *		current parameter values, after its PREPARE when the remote session
 *		does not have it yet; false, with nothing appended, when the session
 *		may not prepare one more.
 *
 * Rescans of a parameterized scan then cost the remote server no parsing
 * or planning (it keeps a generic plan when that is as good), and no
 * cursor.  The LIMIT bounds the rows, and so the memory, of one EXECUTE.
 */
static bool
append_execute(AfdwScanState *st, StringInfo buf)
{
	unsigned int number;

	if (st->prepared_sql == NULL)
		st->prepared_sql = MemoryContextStrdup(st->scan_cxt,
											   psprintf("%s LIMIT " INT64_FORMAT, st->sql,
														(int64) st->fetch_size + 1));
	number = afdw_prepared_statement(st->conn, st->prepared_sql);
	if (number == 0)
	{
		number = afdw_next_statement_number(st->conn);
		if (number == 0)
			return false;
		appendStringInfo(buf, "PREPARE afdw_s%u AS %s; ", number, st->prepared_sql);
		st->preparing = number;
	}

	compute_params(st);
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
	st->executing = true;
	return true;
}

/*
 * append_query
 *		Append the scan's remote SELECT to BUF, with the parameter values
 *		inline (so that it goes in one message with the transaction's start,
 *		the CLOSE of cursors no longer needed and the first FETCH), wrapped
 *		for a binary stream.
 */
static void
append_query(AfdwScanState *st, StringInfo buf)
{
	StringInfoData query;

	if (st->nparams == 0 && !st->binary)
	{
		appendStringInfoString(buf, st->sql);
		return;
	}

	initStringInfo(&query);
	if (st->nparams == 0)
		appendStringInfoString(&query, st->sql);
	else
	{
		compute_params(st);
		afdw_bind_params(&query, st->sql, st->nparams,
						 (const char *const *) st->param_values);
	}
	if (st->binary)
		afdw_deparse_binary_select(buf, query.data, st->rel, st->retrieved_attrs);
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
	dlist_foreach(it, &active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other == st || other->conn != st->conn)
			continue;
		if (other->estate != st->estate ||
			other->async_parent != st->async_parent || other->stream_off)
			return false;
	}
	return true;
}

/*
 * sibling_streaming
 *		Whether ST should wait for the stream of a sibling that occupies its
 *		connection, so as to stream after it.
 */
static bool
sibling_streaming(AfdwScanState *st)
{
	dlist_iter	it;

	if (!st->stream_planned || st->stream_off || !afdw_is_busy(st->conn) ||
		!siblings_may_stream(st))
		return false;
	dlist_foreach(it, &active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other != st && other->conn == st->conn && other->streaming &&
			other->req == REQ_INFLIGHT)
			return true;
	}
	return false;
}

/*
 * hand_over
 *		ST's stream has ended: start the stream of a sibling waiting for
 *		the connection, if any.
 */
static void
hand_over(AfdwScanState *st)
{
	dlist_iter	it;

	dlist_foreach(it, &active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other != st && other->conn == st->conn && other->queued)
		{
			other->queued = false;
			/*
			 * While another scan takes the connection over (drain_scan),
			 * the sibling starts at its next request instead.
			 */
			if (!st->draining)
				send_start(other);
			return;
		}
	}
}

/*
 * send_start
 *		Open the scan's cursor (or run its statement, or start its stream)
 *		and ask for its first batch, without waiting.
 */
static void
send_start(AfdwScanState *st)
{
	StringInfoData sql;

	Assert(!st->cursor_open && st->req == REQ_NONE);

	if (st->pending)
	{
		dlist_delete(&st->pending_node);
		st->pending = false;
	}

	/* A connection that cannot join the remote transaction shares another. */
	st->conn = afdw_join_target(st->conn);
	if (st->locks_rows)
		afdw_note_row_locks(st->conn);

	initStringInfo(&sql);

	/*
	 * A stream needs a connection of its own: rows flow without a break
	 * until the end, so no other scan could take a turn on it; only
	 * asynchronous siblings take turns, each stream after the other.  (A
	 * scan that needs the connection anyway reads the rest of the stream
	 * into memory first: see spill_stream.)
	 */
	st->streaming = st->stream_planned && !st->stream_off &&
		(afdw_conn_users(st->conn) == 1 || siblings_may_stream(st));
	st->binary = false;
	st->checking = false;
	st->executing = false;
	st->preparing = 0;
	st->overflow = false;
	st->declaring = false;
	if (st->streaming)
	{
		/*
		 * Binary format once a remote check has found the remote columns of
		 * the local types; the first stream of a table asks, after its
		 * COPY, in the same message.
		 */
		if (binary_allowed(st))
		{
			BinaryStatus status = binary_status(RelationGetRelid(st->rel));

			st->binary = (status == BINARY_SAME_TYPES);
			st->checking = (status == BINARY_UNKNOWN);
		}
		st->header_pending = st->binary;
		st->cursor_number = 0;
		appendStringInfoString(&sql, "COPY (");
		append_query(st, &sql);
		appendStringInfoString(&sql, st->binary ? ") TO STDOUT (FORMAT binary)" :
							   ") TO STDOUT");
	}
	else if (st->nparams > 0 && !st->prepare_off && append_execute(st, &sql))
		st->cursor_number = 0;
	else
	{
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
	afdw_send_in_xact(st->conn, sql.data, st, drain_scan, st->nested);
	if (st->preparing != 0)
		afdw_preparing_statement(st->conn, st->prepared_sql, st->preparing);
	if (st->streaming)
		afdw_set_streaming(st->conn, true);
	pfree(sql.data);

	st->copying = false;
	st->cursor_open = true;
	st->cursor_gone = false;
	st->req = REQ_INFLIGHT;
	st->nbatches = 0;
	st->remote_eof = false;
}

/*
 * send_fetch
 *		Ask for the next batch.
 */
static void
send_fetch(AfdwScanState *st)
{
	char		sql[64 * AFDW_FETCH_DEPTH];
	int			len = 0;

	Assert(st->cursor_open && st->req == REQ_NONE);
	Assert(st->qcount <= AFDW_QUEUE_SIZE - AFDW_FETCH_DEPTH);
	for (int i = 0; i < AFDW_FETCH_DEPTH; i++)
		len += snprintf(sql + len, sizeof(sql) - len, "%sFETCH %d FROM c%u",
						i > 0 ? "; " : "", st->fetch_size, st->cursor_number);
	remember_sql(st, sql);
	st->declaring = false;
	afdw_send_in_xact(st->conn, sql, st, drain_scan, st->nested);
	st->req = REQ_INFLIGHT;
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
 * refuse_copy_out
 *		The server answered the scan's FETCH or EXECUTE with COPY data (RES):
 *		never take its rows for the query's.
 */
static void
refuse_copy_out(AfdwScanState *st, PGresult *res)
{
	PQclear(res);
	afdw_forget_owner(st->conn, st);
	st->req = REQ_NONE;
	afdw_protocol_violation(st->conn,
							"It answered with CopyOutResponse to a query that is not a COPY.",
							st->req_sql);
}

/*
 * read_request
 *		Read the results of the scan's command in flight; true when all are
 *		in.  Without BLOCK, reads only what has arrived.
 *
 * An error is queued in place of the rows it stands for, and raised only
 * when the scan needs them (take_batch): a FETCH sent ahead, or a query
 * started eagerly, may fail on rows the query never uses.  The savepoint
 * around the command keeps the remote transaction usable meanwhile.
 */
static bool
read_request(AfdwScanState *st, bool block)
{
	PGconn	   *pgconn = afdw_pgconn(st->conn);
	bool		stream_failed = false;
	bool		lost = false;

	Assert(st->req == REQ_INFLIGHT);

	/* A rollback to a savepoint cancelled it under us. */
	if (!afdw_is_owner(st->conn, st))
	{
		st->req = REQ_NONE;
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("remote query of foreign table \"%s\" was cancelled",
						RelationGetRelationName(st->rel)),
				 errdetail("A rollback to a savepoint cancelled the query in flight on its connection.")));
	}

	if (!block && !PQconsumeInput(pgconn))
		afdw_report_remote_error(NULL, st->conn, st->req_sql);

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
				if (st->executing && PQntuples(res) > st->fetch_size)
				{
					/* Past the LIMIT: no lookup; next_row starts over. */
					PQclear(res);
					st->overflow = true;
					break;
				}
				enqueue(st, res);
				if (PQntuples(res) < st->fetch_size || st->executing)
					st->remote_eof = true;
				break;
			case PGRES_COMMAND_OK:
				PQclear(res);
				break;
			case PGRES_COPY_OUT:
				if (!st->streaming)
					refuse_copy_out(st, res);
				/* The stream's rows follow; next_row reads them. */
				PQclear(res);
				st->copying = true;
				return true;
			default:
				/* Kept for when the rows are needed; nothing more comes. */
				st->preparing = 0;	/* whether it was prepared is unknown */
				if (st->executing)
					afdw_forget_statement(st->conn, st->prepared_sql);
				/* The savepoint's rollback took the cursor declared in it. */
				if (st->declaring)
					st->cursor_gone = true;
				st->overflow = false;
				st->remote_eof = true;
				if (st->streaming)
				{
					st->streaming = false;
					stream_failed = true;
				}
				lost = afdw_result_lost(st->conn, res);
				enqueue(st, res);
				break;
		}
		if (lost)
			break;
	}

	afdw_set_idle(st->conn);
	st->req = REQ_NONE;
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
		hand_over(st);
	}
	return true;
}

/*
 * wake_append
 *		ST's results were read by another scan while ST's Append waits for
 *		them on the socket (a scan of a subplan that a sibling's condition
 *		ran during the Append's preparation of its wait): no event would
 *		come.  Make the Append's wait end at once, through the backend's
 *		latch, so that its next wait finds ST's rows ready.
 *
 * Since PostgreSQL 15.7 the Append waits on the latch too, added after
 * its children prepared the wait; before, the latch is added here.
 */
static void
wake_append(AfdwScanState *st)
{
	WaitEventSet *set;

	if (st->wait_sock == PGINVALID_SOCKET || st->areq == NULL ||
		!st->areq->callback_pending)
		return;
	/* (The socket stays in the set: no sibling may add it again.) */
	set = ((AppendState *) st->areq->requestor)->as_eventset;
	if (set == NULL)
		return;					/* its wait is over already */
#if PG_VERSION_NUM < 150007
	for (int i = 0; i < n_latch_sets; i++)
	{
		if (latch_sets[i] == set)
		{
			SetLatch(MyLatch);
			return;
		}
	}
	if (n_latch_sets >= AFDW_MAX_LATCH_SETS)
		n_latch_sets = 0;		/* sets of waits long over: forget them */
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	latch_sets[n_latch_sets++] = set;
#endif
	wake_set = set;
	SetLatch(MyLatch);
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
	if (st->streaming)
		spill_stream(st);
	else
		(void) read_request(st, true);
	st->draining = false;
	wake_append(st);
}

/*
 * take_batch
 *		Turn the next batch that arrived into the current one, after asking
 *		for more if the rows in hand are all that is left, so that the
 *		remote server works meanwhile.  An error that arrived in place of
 *		the batch is raised now that the rows are needed.
 */
static void
take_batch(AfdwScanState *st)
{
	PGresult   *res;

	Assert(st->qcount > 0);
	drop_batch(st);
	res = st->queue[st->qhead];
	st->queue[st->qhead] = NULL;
	st->qhead = (st->qhead + 1) % AFDW_QUEUE_SIZE;
	st->qcount--;
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		clear_queue(st);
		afdw_report_remote_error(res, st->conn, st->req_sql);
	}
	st->batch_res = res;
	st->ntuples = PQntuples(res);
	st->nbatches++;

	/*
	 * Ask ahead, unless another scan's command occupies the connection:
	 * taking it over would mean waiting for that command here.
	 */
	if (!st->remote_eof && st->req == REQ_NONE &&
		st->qcount <= AFDW_QUEUE_SIZE - AFDW_FETCH_DEPTH &&
		!afdw_is_busy(st->conn))
		send_fetch(st);
}

/*
 * raise_held_error
 *		The rows before the error that ended the stream are used: raise it.
 */
static void
raise_held_error(AfdwScanState *st)
{
	PGresult   *res = st->held_error;

	st->held_error = NULL;
	afdw_report_remote_error(res, st->conn, st->held_sql ? st->held_sql : st->req_sql);
}

/*
 * end_stream
 *		The stream's rows are all read (or abandoned): read the results of
 *		the COPY, of the type check after it and of the savepoint's release,
 *		and free the connection.  A failure is kept in held_error, to be
 *		raised when the rows after the last one read are needed; an
 *		abandoned stream's is dropped (the connection rolls the savepoint
 *		back with its next command).
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
			set_binary_status(RelationGetRelid(st->rel),
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
	st->copying = false;
	st->streaming = false;
	st->req = REQ_NONE;
	st->remote_eof = true;
	afdw_set_streaming(st->conn, false);

	if (abandoned)
	{
		if (st->held_error != NULL)
		{
			PQclear(st->held_error);
			st->held_error = NULL;
		}
		if (PQstatus(afdw_pgconn(st->conn)) != CONNECTION_OK)
			afdw_report_remote_error(NULL, st->conn, st->req_sql);
		return;
	}
	hand_over(st);
}

/*
 * store_row
 *		Convert the batch's next row into the scan's slot, as a virtual
 *		tuple whose values live until the batch is dropped.
 */
static void
store_row(AfdwScanState *st, TupleTableSlot *slot)
{
	RowBuilder *rb = &st->rb;
	int			row = st->next_tuple++;
	int			nfields;

	/*
	 * Only a stream's one and only batch can be read again (by
	 * afdwReScanForeignScan); the lines of any other may be rewritten.
	 */
	bool		reread = (st->nbatches == 1 && st->remote_eof);

	ExecClearTuple(slot);
	if (st->binary)
	{
		/* libpq ends each message with a zero byte: room for the trick. */
		convert_binary_row(rb, LINE(st, row), st->line_lens[row], !reread,
						   slot->tts_values, slot->tts_isnull);
		ExecStoreVirtualTuple(slot);
		slot->tts_tid = rb->ctid;
		return;
	}
	if (st->batch_res != NULL)
		nfields = fields_of_result(rb, st->batch_res, row);
	else
	{
		int			len = st->line_lens[row];
		char	   *line = LINE(st, row);

		/* Splitting rewrites the line. */
		if (reread)
		{
			line = MemoryContextAlloc(st->row_cxt, len + 1);
			memcpy(line, LINE(st, row), len + 1);
		}
		nfields = split_copy_line(line, len, rb->fields, rb->max_fields);
	}
	convert_row(rb, nfields, slot->tts_values, slot->tts_isnull);
	ExecStoreVirtualTuple(slot);
	/* Invalid unless the remote ctid is fetched (it is referenced). */
	slot->tts_tid = rb->ctid;
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
	static const char signature[11] = "PGCOPY\n\377\r\n\0";
	int16		n16;

	if (st->header_pending)
	{
		uint32		flags;
		uint32		extlen;
		int			hdrlen;

		if (*len < 19 || memcmp(buf, signature, 11) != 0)
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
 * append_line
 *		Add LEN bytes at BUF, a line followed by a zero byte, to the current
 *		batch.  BUF is libpq's when OWNED_BY_LIBPQ: given back on failure.
 */
static void
append_line(AfdwScanState *st, char *buf, int len, bool owned_by_libpq)
{
	Size		start = MAXALIGN(st->linebuf_used);
	Size		need = start + (Size) len + 1;

	if (need > st->linebuf_size)
	{
		Size		newsize = Max(st->linebuf_size * 2, LINEBUF_INITIAL);
		char	   *newbuf;

		while (newsize < need)
			newsize *= 2;
		newbuf = MemoryContextAllocExtended(st->scan_cxt, newsize,
											MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
		if (newbuf == NULL)
		{
			/* Give libpq's line back before failing. */
			if (owned_by_libpq)
				PQfreemem(buf);
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("A batch of rows of foreign table \"%s\" needed %zu bytes.",
							   RelationGetRelationName(st->rel), newsize)));
		}
		if (st->linebuf_used > 0)
			memcpy(newbuf, st->linebuf, st->linebuf_used);
		if (st->linebuf != NULL)
			pfree(st->linebuf);
		st->linebuf = newbuf;
		st->linebuf_size = newsize;
	}
	memcpy(st->linebuf + start, buf, (Size) len);
	st->linebuf[start + len] = '\0';
	st->line_offs[st->nlines] = start;
	st->line_lens[st->nlines++] = len;
	st->linebuf_used = need;
}

/*
 * alloc_lines
 *		Make room for the lines of one batch of a stream.
 */
static void
alloc_lines(AfdwScanState *st)
{
	int			n = Min(st->fetch_size, AFDW_STREAM_BATCH_MAX);

	if (st->line_offs == NULL)
	{
		st->line_offs = MemoryContextAlloc(st->scan_cxt, sizeof(Size) * n);
		st->line_lens = MemoryContextAlloc(st->scan_cxt, sizeof(int) * n);
	}
}

/*
 * take_stream_batch
 *		Take up to fetch_size streamed rows as the current batch; false
 *		when BLOCK is false and no row has arrived yet.
 *
 * Rows are read from the socket only as the batch needs them, so TCP
 * flow control keeps the remote server from running far ahead.
 */
static bool
take_stream_batch(AfdwScanState *st, bool block)
{
	PGconn	   *pgconn = afdw_pgconn(st->conn);
	int			batch_lines = Min(st->fetch_size, AFDW_STREAM_BATCH_MAX);
	bool		consumed = false;

	drop_batch(st);
	alloc_lines(st);

	for (;;)
	{
		char	   *buf = NULL;
		int			len = PQgetCopyData(pgconn, &buf, 1);

		if (len > 0)
		{
			append_line(st, buf, len, true);
			PQfreemem(buf);
			if (st->binary &&
				!binary_line(st, LINE(st, st->nlines - 1),
							 &st->line_lens[st->nlines - 1]))
			{
				/* The trailer: the end of the rows.  It takes no room. */
				st->nlines--;
				st->linebuf_used = st->line_offs[st->nlines];
				continue;
			}
			consumed = false;
			if (st->nlines >= batch_lines)
				break;
			continue;
		}
		if (len == 0)
		{
			if (st->nlines > 0)
				break;
			if (!consumed)
			{
				if (!PQconsumeInput(pgconn))
					afdw_report_remote_error(NULL, st->conn, st->req_sql);
				consumed = true;
				continue;
			}
			if (!block)
				return false;
			afdw_wait_socket(st->conn, st->req_sql);
			continue;
		}
		/* -1: the stream is over; -2: it failed.  An error waits its turn. */
		end_stream(st, false);
		break;
	}
	st->ntuples = st->nlines;
	st->nbatches++;
	return true;
}

/*
 * spill_stream
 *		Another scan needs the connection of this scan's stream, which
 *		cannot be interrupted: read the rest of the stream into a
 *		tuplestore (memory up to work_mem, then a temporary file), one row
 *		per raw line, converted only when the scan reads it back
 *		(take_spill_batch).  The current batch is left as it is.
 */
static void
spill_stream(AfdwScanState *st)
{
	PGconn	   *pgconn;
	MemoryContext oldcxt;
	TupleDesc	desc;

	if (!st->copying)
	{
		(void) read_request(st, true);
		if (!st->copying)
			return;				/* it failed before its rows: queued */
	}

	oldcxt = MemoryContextSwitchTo(st->scan_cxt);
	desc = CreateTemplateTupleDesc(1);
	TupleDescInitEntry(desc, (AttrNumber) 1, "line", BYTEAOID, -1, 0);
	st->spill = tuplestore_begin_heap(false, false, work_mem);
	st->spill_slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	st->spill_eof = false;
	MemoryContextSwitchTo(oldcxt);

	pgconn = afdw_pgconn(st->conn);
	for (;;)
	{
		char	   *buf = NULL;
		int			len = PQgetCopyData(pgconn, &buf, 1);
		bytea	   *line;
		Datum		value;
		bool		isnull = false;

		if (len == 0)
		{
			afdw_wait_socket(st->conn, st->req_sql);
			continue;
		}
		if (len < 0)
			break;
		if (st->binary && !binary_line(st, buf, &len))
		{
			PQfreemem(buf);
			continue;
		}
		line = palloc_extended(len + VARHDRSZ, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
		if (line == NULL)
		{
			PQfreemem(buf);
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		}
		SET_VARSIZE(line, len + VARHDRSZ);
		memcpy(VARDATA(line), buf, len);
		PQfreemem(buf);
		value = PointerGetDatum(line);
		tuplestore_putvalues(st->spill, desc, &value, &isnull);
		pfree(line);
	}
	end_stream(st, false);
}

/*
 * take_spill_batch
 *		Take up to fetch_size rows of a spilled stream as the current batch.
 */
static void
take_spill_batch(AfdwScanState *st)
{
	int			batch_lines = Min(st->fetch_size, AFDW_STREAM_BATCH_MAX);

	drop_batch(st);
	alloc_lines(st);
	while (st->nlines < batch_lines)
	{
		bool		isnull;
		bytea	   *line;

		if (!tuplestore_gettupleslot(st->spill, true, false, st->spill_slot))
		{
			st->spill_eof = true;
			break;
		}
		line = DatumGetByteaPP(slot_getattr(st->spill_slot, 1, &isnull));
		append_line(st, VARDATA_ANY(line), VARSIZE_ANY_EXHDR(line), false);
	}
	ExecClearTuple(st->spill_slot);
	st->ntuples = st->nlines;
	st->nbatches++;
}

/*
 * end_spill
 *		Forget a spilled stream's rows.
 */
static void
end_spill(AfdwScanState *st)
{
	if (st->spill == NULL)
		return;
	ExecDropSingleTupleTableSlot(st->spill_slot);
	tuplestore_end(st->spill);
	st->spill = NULL;
	st->spill_slot = NULL;
	st->spill_eof = false;
}

/*
 * abandon_stream
 *		Stop a stream before its end: cancel the COPY remotely, throw away
 *		what is still on its way, and roll back to the savepoint before it.
 */
static void
abandon_stream(AfdwScanState *st)
{
	if (!st->copying)
		(void) read_request(st, true);
	if (!st->copying)
	{
		/* It failed before the rows began: the error is queued, unused. */
		return;
	}

	afdw_cancel(st->conn);
	afdw_discard_copy(st->conn, st->req_sql);
	end_stream(st, true);
}

/*
 * start_pending_scans
 *		Send the queries of every scan of ESTATE still waiting to start,
 *		when they need no parameter and their connection is free.
 *
 * A query started for a scan that the plan never runs (the inner side of
 * a join whose outer side is empty, a subplan never evaluated) costs
 * nothing visible: its errors are never raised (read_request), and at its
 * end it is cancelled rather than waited for (finish_request).
 */
static void
start_pending_scans(EState *estate)
{
	dlist_mutable_iter it;
	dlist_iter	it2;

	/*
	 * Snapshots first: a connection joining a remote transaction that an
	 * earlier statement opened on another connection imports its snapshot,
	 * which that connection exports while it is still free.
	 */
	dlist_foreach(it2, &pending_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, pending_node, it2.cur);

		if (other->estate == estate)
			afdw_prepare_snapshot(other->conn);
	}

	dlist_foreach_modify(it, &pending_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, pending_node, it.cur);

		if (other->estate != estate)
			continue;
		dlist_delete(it.cur);
		other->pending = false;
		if (other->nparams == 0 && !other->cursor_open &&
			other->req == REQ_NONE && !afdw_is_busy(other->conn))
			send_start(other);
	}
}

/*
 * sibling_owns_connection
 *		Whether the command in flight on ST's connection belongs to another
 *		scan that waits on the same asynchronous Append: that scan waits on
 *		the socket, and ST must not take the connection over (the socket
 *		would be waited on twice, and the sibling read here, synchronously).
 */
static bool
sibling_owns_connection(AfdwScanState *st)
{
	AfdwScanState *owner = (AfdwScanState *) afdw_conn_owner(st->conn);

	return owner != NULL && owner != st && st->areq != NULL &&
		owner->areq != NULL &&
		owner->areq->requestor == st->areq->requestor &&
		owner->areq->callback_pending;
}

/*
 * next_row
 *		The scan's next row in its slot, an empty slot at the end, or NULL
 *		when BLOCK is false and the rows have not arrived yet.
 */
static TupleTableSlot *
next_row(AfdwScanState *st, bool block)
{
	TupleTableSlot *slot = st->node->ss.ss_ScanTupleSlot;
	ErrorContextCallback errcb;

	errcb.callback = scan_error_context;
	errcb.arg = st->rel;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	st->demanded = true;
	st->conn_wait = false;
	for (;;)
	{
		bool		must_send = false;

		if (st->next_tuple < st->ntuples)
		{
			store_row(st, slot);
			break;
		}
		if (st->copying)
		{
			if (!take_stream_batch(st, block))
			{
				slot = NULL;
				break;
			}
		}
		else if (st->spill != NULL && !st->spill_eof)
			take_spill_batch(st);
		else if (st->qcount > 0)
			take_batch(st);
		else if (st->req == REQ_INFLIGHT)
		{
			if (!read_request(st, block))
			{
				slot = NULL;
				break;
			}
		}
		else if (st->held_error != NULL)
			raise_held_error(st);
		else if (st->queued)
		{
			/* hand_over starts its stream when the sibling's ends. */
			if (block)
				elog(ERROR, "scan of \"%s\" waits for a sibling's stream but was read synchronously",
					 RelationGetRelationName(st->rel));
			slot = NULL;
			break;
		}
		else if (st->overflow || st->cursor_open)
		{
			if (!st->overflow && st->remote_eof)
			{
				ExecClearTuple(slot);
				break;
			}
			must_send = true;
		}
		else
		{
			start_pending_scans(st->estate);
			if (st->cursor_open)
				continue;
			if (sibling_streaming(st))
				st->queued = true;
			else
				must_send = true;
		}

		if (!must_send)
			continue;
		if (!block && sibling_owns_connection(st))
		{
			/* The sibling's event comes first; the next wait sends. */
			st->conn_wait = true;
			slot = NULL;
			break;
		}
		if (st->overflow)
		{
			/* More rows than a lookup: run it again with a cursor. */
			st->prepare_off = true;
			st->cursor_open = false;
			send_start(st);
		}
		else if (st->cursor_open)
			send_fetch(st);
		else
			send_start(st);
	}

	error_context_stack = errcb.previous;
	return slot;
}

/*
 * afdwIterateForeignScan
 *		The next row, waiting for it unless an asynchronous request asked
 *		not to.
 */
static TupleTableSlot *
afdwIterateForeignScan(ForeignScanState *node)
{
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;
	TupleTableSlot *slot = next_row(st, !st->nowait);

	if (slot == NULL)
	{
		st->not_ready = true;
		slot = ExecClearTuple(node->ss.ss_ScanTupleSlot);
	}
	return slot;
}

/*
 * finish_request
 *		Stop whatever the scan has in flight and drop the rows and errors
 *		not used.
 *
 * A query started eagerly that the executor never asked rows of is
 * cancelled if it still runs, rather than waited for: it may wait for a
 * lock, or run long, for nothing.
 */
static void
finish_request(AfdwScanState *st)
{
	st->conn_wait = false;
	if (st->streaming && st->req == REQ_INFLIGHT && afdw_is_owner(st->conn, st))
	{
		abandon_stream(st);
		/* A scan rescanned before its end may stop early again. */
		st->stream_off = true;
	}
	if (st->req == REQ_INFLIGHT && afdw_is_owner(st->conn, st))
	{
		if (!st->demanded && !read_request(st, false))
			afdw_cancel(st->conn);
		if (st->req == REQ_INFLIGHT)
			(void) read_request(st, true);
	}
	if (st->spill != NULL)
	{
		end_spill(st);
		st->stream_off = true;
	}
	clear_queue(st);
	if (st->held_error != NULL)
	{
		PQclear(st->held_error);
		st->held_error = NULL;
	}
	st->req = REQ_NONE;
}

/*
 * close_cursor
 *		Leave the scan's cursor, if it has one, to be closed by the
 *		connection's next command or by the end of the transaction.
 */
static void
close_cursor(AfdwScanState *st)
{
	if (st->cursor_open && st->cursor_number != 0 && !st->cursor_gone)
		afdw_close_cursor_later(st->conn, st->cursor_number);
	st->cursor_number = 0;
	st->cursor_open = false;
	st->cursor_gone = false;
}

/*
 * afdwReScanForeignScan
 *		Start the scan over.
 *
 * With the same parameters and every row already in memory, the batch is
 * read again; otherwise a new cursor is declared at the next fetch.  The
 * remote snapshot does not change within the transaction, so the rows are
 * the same.
 */
static void
afdwReScanForeignScan(ForeignScanState *node)
{
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;

	/* It never started: it starts over like the others. */
	st->queued = false;
	st->conn_wait = false;

	if (node->ss.ps.chgParam == NULL && st->cursor_open && st->remote_eof &&
		st->nbatches == 1 && st->qcount == 0 && st->req == REQ_NONE &&
		st->held_error == NULL && (st->spill == NULL || st->spill_eof))
	{
		/* Convert the rows again: the values of the first pass go. */
		ExecClearTuple(node->ss.ss_ScanTupleSlot);
		MemoryContextReset(st->row_cxt);
		st->next_tuple = 0;
		return;
	}

	finish_request(st);
	if (!st->cursor_open)
		return;

	close_cursor(st);
	st->overflow = false;
	drop_batch(st);
	st->remote_eof = false;
}

/*
 * afdwEndForeignScan
 *		Leave the cursor to be closed by the connection's next command or
 *		by the end of the transaction, and give the connection back.
 */
static void
afdwEndForeignScan(ForeignScanState *node)
{
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;

	if (st == NULL)
		return;

	if (st->pending)
	{
		dlist_delete(&st->pending_node);
		st->pending = false;
	}
	st->queued = false;
	finish_request(st);
	close_cursor(st);

	if (st->active)
	{
		dlist_delete(&st->active_node);
		st->active = false;
	}
	afdw_release_connection(st->conn);
	st->released = true;
}

/*
 * afdwIsForeignPathAsyncCapable
 *		Whether the scan may run asynchronously under an Append: the
 *		async_capable option of the table, else of the server (default on),
 *		in a backend under a postmaster.
 */
static bool
afdwIsForeignPathAsyncCapable(ForeignPath *path)
{
	AfdwRelInfo *fp = (AfdwRelInfo *) path->path.parent->fdw_private;

	/*
	 * PostgreSQL 15's Append waits for its asynchronous children with a
	 * postmaster-death event, which a single-user backend cannot watch
	 * (epoll_ctl fails): there, scans run one after the other.
	 */
	if (!IsUnderPostmaster)
		return false;
	return fp->async_capable;
}

/*
 * afdwForeignAsyncRequest
 *		Give the Append a row if one is at hand; otherwise make sure one is
 *		on its way and say so.
 */
static void
afdwForeignAsyncRequest(AsyncRequest *areq)
{
	ForeignScanState *node = (ForeignScanState *) areq->requestee;
	AfdwScanState *st = (AfdwScanState *) node->fdw_state;
	TupleTableSlot *slot;

	st->areq = areq;
	st->wait_sock = PGINVALID_SOCKET;

	/*
	 * Run the node itself (its quals and projection) without the
	 * instrumentation wrapper, which the async machinery provides.
	 */
	/*
	 * No PG_TRY is needed to clear the flag: an error here ends the
	 * executor state the scan belongs to, and a sigsetjmp per row costs.
	 */
	st->nowait = true;
	st->not_ready = false;
	slot = node->ss.ps.ExecProcNodeReal(&node->ss.ps);
	st->nowait = false;

	if (!TupIsNull(slot))
		ExecAsyncRequestDone(areq, slot);
	else if (st->not_ready)
		ExecAsyncRequestPending(areq);
	else
		ExecAsyncRequestDone(areq, NULL);
}

/*
 * forget_waits
 *		ST is being configured for a new wait: the socket it added to an
 *		earlier wait set is not in this one.  With ALL (the wait set holds
 *		no socket yet: a new wait begins), neither are its siblings'.
 */
static void
forget_waits(AfdwScanState *st, bool all)
{
	dlist_iter	it;

	st->wait_sock = PGINVALID_SOCKET;
	if (!all)
		return;
	if (wake_set == ((AppendState *) st->areq->requestor)->as_eventset)
		wake_set = NULL;
#if PG_VERSION_NUM < 150007
	for (int i = 0; i < n_latch_sets; i++)
	{
		if (latch_sets[i] == ((AppendState *) st->areq->requestor)->as_eventset)
			latch_sets[i--] = latch_sets[--n_latch_sets];
	}
#endif
	dlist_foreach(it, &active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other->areq != NULL && other->areq->requestor == st->areq->requestor)
			other->wait_sock = PGINVALID_SOCKET;
	}
}

/*
 * socket_in_wait
 *		Whether a sibling of ST under the same Append, still waiting, added
 *		SOCK to the Append's wait set.  A sibling takes the connection over
 *		only when its owner does not wait (sibling_owns_connection), but a
 *		scan of another plan node (a subplan evaluated in a sibling's
 *		filter) may take it meanwhile, and then a third sibling finds it
 *		free: the socket is then in the wait set already, and its event
 *		reaches the sibling, after which the next wait serves ST.
 */
static bool
socket_in_wait(AfdwScanState *st, pgsocket sock)
{
	dlist_iter	it;

	dlist_foreach(it, &active_scans)
	{
		AfdwScanState *other = dlist_container(AfdwScanState, active_node, it.cur);

		if (other != st && other->wait_sock == sock && other->areq != NULL &&
			other->areq->requestor == st->areq->requestor &&
			other->areq->callback_pending)
			return true;
	}
	return false;
}

/*
 * configure_wait
 *		Wait on the connection's socket for the rows in flight.
 *
 * When another scan sharing the connection has already read them (it
 * needed the connection), the request is completed here instead, as no
 * event would come for it.
 */
static void
configure_wait(AsyncRequest *areq)
{
	AfdwScanState *st = (AfdwScanState *) ((ForeignScanState *) areq->requestee)->fdw_state;
	WaitEventSet *set = ((AppendState *) areq->requestor)->as_eventset;
	pgsocket	sock;

	st->areq = areq;
	forget_waits(st, GetNumRegisteredWaitEvents(set) <= 1);

	/*
	 * Waiting for a sibling's stream to end, or for a sibling's command to
	 * free the connection: the sibling waits on the socket (a socket can be
	 * waited on once), and this scan goes on when the sibling's event has
	 * been served.
	 */
	if (st->queued || (st->conn_wait && sibling_owns_connection(st)))
	{
		areq->callback_pending = true;
		return;
	}

	/*
	 * Rows of a stream, or results that a connection joining the remote
	 * transaction read ahead to get at its snapshot, may wait in libpq's
	 * buffer, unseen by the socket.
	 */
	if (st->req != REQ_INFLIGHT || st->copying ||
		(afdw_is_owner(st->conn, st) && afdw_result_ready(st->conn)))
	{
		areq->callback_pending = false;
		afdwForeignAsyncRequest(areq);
		if (areq->request_complete)
		{
			/* No notification will count this row: count it here. */
			if (areq->requestee->instrument)
				InstrUpdateTupleCount(areq->requestee->instrument,
									  TupIsNull(areq->result) ? 0.0 : 1.0);
			ExecAsyncResponse(areq);
			return;
		}
		if (st->queued || st->conn_wait)
		{
			areq->callback_pending = true;
			return;
		}
	}

	Assert(st->req == REQ_INFLIGHT);
	areq->callback_pending = true;
	sock = PQsocket(afdw_pgconn(st->conn));
	if (socket_in_wait(st, sock))
		return;
	AddWaitEventToSet(set, WL_SOCKET_READABLE, sock, NULL, areq);
	st->wait_sock = sock;
}

/*
 * afdwForeignAsyncConfigureWait
 *		configure_wait, and the latch set again if the Append's wait must
 *		end at once (wake_append).
 */
static void
afdwForeignAsyncConfigureWait(AsyncRequest *areq)
{
	configure_wait(areq);
	if (wake_set != NULL &&
		wake_set == ((AppendState *) areq->requestor)->as_eventset)
		SetLatch(MyLatch);
}

/*
 * afdwForeignAsyncNotify
 *		Data arrived on the connection: hand over a row if it is complete.
 */
static void
afdwForeignAsyncNotify(AsyncRequest *areq)
{
	afdwForeignAsyncRequest(areq);
}

/*
 * afdwExplainForeignScan
 *		Show the remote SQL in EXPLAIN VERBOSE.
 */
static void
afdwExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	char	   *sql;
	List	   *retrieved_attrs;
	int			fetch_size;
	bool		stream;

	if (!es->verbose)
		return;
	afdw_scan_private((ForeignScan *) node->ss.ps.plan, &sql, &retrieved_attrs,
					  &fetch_size, &stream);
	ExplainPropertyText("Remote SQL", sql, es);
	ExplainPropertyText("Fetch Mode", stream ? "stream" : "cursor", es);
}

/* State of ANALYZE's reservoir sampling. */
typedef struct Sampler
{
	RowBuilder	rb;				/* remote rows to tuples */
	MemoryContext anl_cxt;		/* where sampled rows live */
	ReservoirStateData rstate;
	int			targrows;
	double		seen;			/* rows read so far */
	double		skip;			/* rows to pass over before the next pick */
} Sampler;

/*
 * sample_batch
 *		Offer the rows of RES to the sample ROWS (*NUMROWS long); return how
 *		many rows RES had.  RES is freed.
 */
static int
sample_batch(PGresult *res, Sampler *s, HeapTuple *rows, int *numrows)
{
	int			n = PQntuples(res);

	PG_TRY();
	{
		for (int i = 0; i < n; i++)
		{
			int			slot = -1;

			s->seen += 1;
			if (*numrows < s->targrows)
				slot = (*numrows)++;
			else
			{
				if (s->skip < 0)
					s->skip = reservoir_get_next_S(&s->rstate, s->seen, s->targrows);
				if (s->skip <= 0)
				{
					slot = (int) (s->targrows * sampler_random_fract(&s->rstate.randstate));
					heap_freetuple(rows[slot]);
				}
				s->skip -= 1;
			}
			if (slot >= 0)
				rows[slot] = make_tuple(&s->rb, res, i, s->anl_cxt);
		}
		MemoryContextReset(s->rb.row_cxt);
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();

	return n;
}

/*
 * acquire_sample_rows
 *		Read every remote row of REL and keep a random sample of TARGROWS
 *		of them in ROWS (Vitter's reservoir algorithm); ANALYZE's callback.
 */
static int
acquire_sample_rows(Relation rel, int elevel, HeapTuple *rows, int targrows,
					double *totalrows, double *totaldeadrows)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	ForeignServer *server = GetForeignServer(table->serverid);
	UserMapping *user = GetUserMapping(rel->rd_rel->relowner, table->serverid);
	AfdwConn   *conn = afdw_get_connection(user);
	Sampler		sampler;
	List	   *retrieved_attrs;
	StringInfoData sql;
	unsigned int cursor = afdw_next_cursor_number(conn);
	int			fetch_size;
	int			numrows = 0;
	char		fetch[64];
	bool		done = false;

	fetch_size = afdw_fetch_size_option(server->options, AFDW_DEFAULT_FETCH_SIZE);
	fetch_size = afdw_fetch_size_option(table->options, fetch_size);

	sampler.anl_cxt = CurrentMemoryContext;
	sampler.targrows = targrows;
	sampler.seen = 0;
	sampler.skip = -1;
	reservoir_init_selection_state(&sampler.rstate, targrows);

	initStringInfo(&sql);
	appendStringInfo(&sql, "DECLARE c%u CURSOR FOR ", cursor);
	afdw_deparse_analyze(&sql, rel, &retrieved_attrs);
	init_row_builder(&sampler.rb, rel, retrieved_attrs,
					 AllocSetContextCreate(CurrentMemoryContext,
										   "async_fdw analyze row",
										   ALLOCSET_DEFAULT_SIZES));
	afdw_run_command(conn, sql.data);

	snprintf(fetch, sizeof(fetch), "FETCH %d FROM c%u", fetch_size, cursor);
	while (!done)
	{
		vacuum_delay_point();
		done = sample_batch(afdw_run_query(conn, fetch, 0, NULL), &sampler,
							rows, &numrows) < fetch_size;
	}

	snprintf(fetch, sizeof(fetch), "CLOSE c%u", cursor);
	afdw_run_command(conn, fetch);
	afdw_release_connection(conn);
	MemoryContextDelete(sampler.rb.row_cxt);

	*totalrows = sampler.seen;
	*totaldeadrows = 0;
	ereport(elevel,
			(errmsg("\"%s\": foreign table contains %.0f rows, %d rows in sample",
					RelationGetRelationName(rel), sampler.seen, numrows)));
	return numrows;
}

/*
 * afdwAnalyzeForeignTable
 *		Offer acquire_sample_rows to ANALYZE, with the remote table's size
 *		in pages.
 */
static bool
afdwAnalyzeForeignTable(Relation rel, AcquireSampleRowsFunc *func,
						BlockNumber *totalpages)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	UserMapping *user = GetUserMapping(rel->rd_rel->relowner, table->serverid);
	AfdwConn   *conn = afdw_get_connection(user);
	StringInfoData name;
	StringInfoData sql;
	PGresult   *volatile res;

	initStringInfo(&name);
	afdw_deparse_relation(&name, rel);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT pg_catalog.pg_relation_size(");
	appendStringInfoString(&sql, quote_literal_cstr(name.data));
	appendStringInfoString(&sql, "::pg_catalog.regclass)");

	res = afdw_run_query(conn, sql.data, 0, NULL);
	PG_TRY();
	{
		double		bytes = 0;
		double		pages;

		if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
			bytes = strtod(PQgetvalue(res, 0, 0), NULL);

		/*
		 * Whatever the remote server answered (a size past what a local
		 * table can have, a negative number, NaN), the cast must stay
		 * within BlockNumber.
		 */
		pages = bytes / BLCKSZ;
		if (!(pages >= 1))
			*totalpages = 1;
		else if (pages >= (double) MaxBlockNumber)
			*totalpages = MaxBlockNumber;
		else
			*totalpages = (BlockNumber) pages;
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
	afdw_release_connection(conn);

	*func = acquire_sample_rows;
	return true;
}

/*
 * afdw_scan_routines
 *		Fill in the scan callbacks of ROUTINE.
 */
void
afdw_scan_routines(FdwRoutine *routine)
{
	routine->BeginForeignScan = afdwBeginForeignScan;
	routine->IterateForeignScan = afdwIterateForeignScan;
	routine->ReScanForeignScan = afdwReScanForeignScan;
	routine->EndForeignScan = afdwEndForeignScan;
	routine->ExplainForeignScan = afdwExplainForeignScan;
	routine->IsForeignPathAsyncCapable = afdwIsForeignPathAsyncCapable;
	routine->ForeignAsyncRequest = afdwForeignAsyncRequest;
	routine->ForeignAsyncConfigureWait = afdwForeignAsyncConfigureWait;
	routine->ForeignAsyncNotify = afdwForeignAsyncNotify;
	routine->AnalyzeForeignTable = afdwAnalyzeForeignTable;
}
