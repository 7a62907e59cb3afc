/*-------------------------------------------------------------------------
 *
 * scan_internal.h
 *		The state of one foreign scan, shared by the files that run scans.
 *
 * Included only by scan.c (executor and asynchronous callbacks),
 * scan_commands.c (remote commands and their results), copy_stream.c (COPY
 * streams), row_builder.c (rows to tuples, the remote type check),
 * scan_state.c (the primitives of the state that these share), analyze.c
 * (ANALYZE), explain.c (EXPLAIN) and modify_rows.c (a RETURNING row into a
 * tuple, with a RowBuilder). Declarations are grouped by the file that defines
 * them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SCAN_INTERNAL_H
#define SCAN_INTERNAL_H

#include "access/htup.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/ilist.h"
#include "nodes/execnodes.h"
#include "utils/relcache.h"
#include "utils/tuplestore.h"

#include "async_fdw.h"

/* What turns rows of text values into local tuples, with its scratch space. */
typedef struct RowBuilder
{
	TupleDesc	tupdesc;		/* the rows' local columns */
	const char *relname;		/* the foreign table, for messages */
	bool		computed;		/* the columns are computed remotely
								 * (aggregates), not the table's */
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
 * How the scan reads its current remote query.  send_start chooses; the
 * choice holds until the query's next run, rows of the last batch
 * included.
 */
typedef enum AfdwReadMode
{
	READ_TEXT_STREAM,			/* COPY (query) TO STDOUT */
	READ_BINARY_STREAM,			/* COPY (query) TO STDOUT (FORMAT binary) */
	READ_CURSOR,				/* DECLARE, then FETCH fetch_size rows */
	READ_EXECUTE				/* EXECUTE a prepared statement, LIMIT
								 * fetch_size + 1 rows */
} AfdwReadMode;

/*
 * Where the scan's current remote query stands.  afdw_set_phase
 * (scan_state.c) makes every change (and keeps pending_scans in step); the
 * row loop, next_batch in scan.c, is a switch over it.
 */
typedef enum AfdwPhase
{
	PHASE_PENDING,				/* not sent; in pending_scans, so that the
								 * first fetch of any scan of the statement
								 * sends it (eager start) */
	PHASE_UNSENT,				/* not sent; sent at the scan's next fetch */
	PHASE_QUEUED,				/* not sent; waits for a sibling's stream on
								 * the shared connection (afdw_hand_over) */
	PHASE_IN_FLIGHT,			/* a command sent, its results not all read;
								 * a stream's rows have not begun */
	PHASE_COPYING,				/* a stream's rows are arriving */
	PHASE_STREAM_FAILED,		/* a stream failed before its rows: the rest
								 * of its results are still to be read, then
								 * the connection goes to a sibling */
	PHASE_SPILLED,				/* the rest of the stream waits in a
								 * tuplestore (afdw_spill_stream) */
	PHASE_OPEN,					/* results read; the cursor has more rows */
	PHASE_OVERFLOW,				/* an EXECUTE returned more rows than its
								 * LIMIT: the query runs again by cursor */
	PHASE_DONE					/* every row (or the error standing for the
								 * rest) has arrived */
} AfdwPhase;

/*
 * FETCH commands per message after the first: while the coordinator works
 * through one message's batches, the next message is on its way, so a
 * round trip brings AFDW_FETCH_DEPTH batches rather than one.
 */
#define AFDW_FETCH_DEPTH	2

/* Batches received and not yet used: at most two messages' worth. */
#define AFDW_QUEUE_SIZE		(2 * AFDW_FETCH_DEPTH)

/*
 * What the scan did remotely, for EXPLAIN (ANALYZE, VERBOSE): counted per
 * query run, command, batch or wait, never per row of a batch (except the
 * rows of a spill, read one by one anyway).
 */
typedef struct AfdwScanStats
{
	int			runs[READ_EXECUTE + 1]; /* query runs, by AfdwReadMode */
	int			spills;			/* streams read into a tuplestore */
	int			overflows;		/* EXECUTEs past their LIMIT */
	int			stopped;		/* streams cancelled before their end */
	int64		rows;			/* rows received: results, stream batches,
								 * spilled lines */
	uint64		bytes;			/* value bytes of FETCH/EXECUTE results
								 * (summed only when count_bytes) and
								 * spilled lines; streamed lines are in
								 * lines.received */
	int64		round_trips;	/* messages sent that get an answer */
	int			carried;		/* siblings' queries carried by its own */
	int			absorbed;		/* runs carried by a sibling's query */
	int			users;			/* most scans seen holding the connection */
	bool		count_bytes;	/* the node is instrumented (ANALYZE) */
	bool		timed;			/* ... with timing: waits are timed */
	instr_time	wait;			/* time blocked for the scan's data */
	instr_time	pending_since;	/* an Append waits for the scan since */
} AfdwScanStats;

/* A stream batch's line buffer: the most kept between batches. */
#define LINEBUF_KEEP		(8 * 1024 * 1024)
#define LINE(st, i)			AFDW_LINE(&(st)->lines, i)

/* State of one foreign scan, in ForeignScanState->fdw_state. */
typedef struct AfdwScanState
{
	ForeignScanState *node;
	EState	   *estate;
	Relation	rel;			/* the foreign table */
	bool		computed;		/* the remote query computes the columns
								 * (aggregates) and rel is ours to close */
	RowBuilder	rb;				/* remote rows to tuples */
	char	   *sql;			/* remote SELECT */
	char	   *outer_order;	/* ORDER BY of its binary wrapper, or NULL */
	List	   *retrieved_attrs;	/* local column numbers of its columns */
	int			fetch_size;

	AfdwConn   *conn;
	bool		released;		/* conn given back to the pool */
	bool		draining;		/* another scan reads our results (drain) */
	int			start_level;	/* transaction nesting level of its start */

	/*
	 * Parameters: expressions and their output functions, then the arrays
	 * of keys the current query takes (nparams counts them too).
	 */
	int			nparams;
	List	   *param_exprs;	/* ExprStates */
	FmgrInfo   *param_flinfo;
	const char **param_values;

	/*
	 * Keys of hash joins' inner sides (hash_join_keys.c): the query takes those
	 * the collectors have when the scan is first read (or read again after
	 * a rescan), with a condition each; with none, it is the plan's own.
	 */
	int			nkey_uses;		/* arrays the plan lets the query take */
	bool		keys_taken;		/* asked for since the last rescan */
	bool	   *key_used;		/* which the collectors had */
	Datum	   *key_arrays;		/* ... and the arrays */
	int64		keys_sent;		/* keys in them, for EXPLAIN ANALYZE */
	char	   *plain_sql;		/* the query without keys */
	int			plain_nparams;	/* ... and its parameters */
	FmgrInfo	key_out;		/* array_out */

	/*
	 * The current remote query: how it is read, and where it stands.
	 * While a command is in flight, outcome is the phase that the results
	 * read so far lead to once all are in: PHASE_OPEN, PHASE_DONE (a short
	 * batch, an EXECUTE's rows, an error) or PHASE_OVERFLOW.
	 */
	AfdwReadMode mode;
	AfdwPhase	phase;
	AfdwPhase	outcome;
	dlist_node	pending_node;	/* in pending_scans while PHASE_PENDING */

	/*
	 * The ways later runs of the query may take, tried in this order
	 * before a cursor (send_start).  A scan rescanned before the end of
	 * its stream, or whose stream was spilled, may stop early again: it
	 * uses a cursor from then on; so does a parameterized scan once a run
	 * overflowed the LIMIT of its prepared statement.
	 */
	bool		may_stream;		/* the plan chose streaming, and still does */
	bool		may_prepare;	/* a parameterized scan, not yet overflowed */

	/*
	 * The scan's remote cursor (READ_CURSOR), or 0: none, or its DECLARE
	 * failed and the savepoint's rollback took it.
	 */
	unsigned int cursor_number;
	bool		declaring;		/* the command in flight declares it */

	/* The command in flight, and the batches that arrived. */
	char	   *req_sql;		/* its text, for error messages */
	PGresult   *queue[AFDW_QUEUE_SIZE];
	int			qhead;
	int			qcount;

	/*
	 * The current batch, converted a row at a time as the rows are asked
	 * for: a FETCH's result, or lines of a stream (or of a spill).
	 */
	PGresult   *batch_res;
	AfdwLines	lines;			/* room for fetch_size lines, at most
								 * AFDW_STREAM_BATCH_MAX */
	int			ntuples;
	int			next_tuple;
	int			nbatches;		/* batches used since the query was sent */

	/* Streams (READ_TEXT_STREAM, READ_BINARY_STREAM). */
	bool		binary_capable; /* every column's type has a binary form */
	bool		header_pending; /* the binary COPY header is still to come */
	bool		checking;		/* a check of the remote types follows */

	/*
	 * Parameterized scans run a statement prepared in the remote session
	 * (text in prepared_sql), with a LIMIT of fetch_size + 1 rows, or with
	 * the query's own LIMIT (own_limit) when that is no more rows.
	 */
	char	   *prepared_sql;
	bool		own_limit;
	unsigned int preparing;		/* the command in flight PREPAREs this */

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

	/*
	 * The scan's query is the whole remote transaction: one command that
	 * returns all its rows (or tells there are more), with the COMMIT (see
	 * choose_read_mode, scan.c).  Not after an overflow or a rescan.
	 */
	bool		one_shot;

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
	 * lines, one bytea per row, read back in batches (PHASE_SPILLED).
	 */
	Tuplestorestate *spill;
	TupleTableSlot *spill_slot;

	/*
	 * Asynchronous children of one Append (async_parent, its plan) may
	 * stream on a connection they share, one after the other: a stream
	 * that finds the connection streaming for a sibling waits
	 * (PHASE_QUEUED) and starts when that stream ends.
	 */
	Plan	   *async_parent;

	/*
	 * The Append under which the scan's query may go with its siblings'
	 * (combined_scans.c), or NULL; of the current query, how many siblings' it
	 * carries (the leader), or that a sibling's carries this one's
	 * (absorbed: the scan returns no row).
	 */
	Plan	   *combine_parent;
	int			carrying;
	bool		absorbed;

	dlist_node	active_node;	/* in active_scans from Begin to End */
	bool		active;

	AfdwScanStats stats;		/* for EXPLAIN ANALYZE */

	MemoryContext scan_cxt;		/* long-lived bits of the scan */
	MemoryContext batch_cxt;	/* parameter values of the current query */
	MemoryContext row_cxt;		/* values of the current batch's rows */
	MemoryContextCallback cleanup;
} AfdwScanState;

/*
 * afdw_is_stream
 *		Whether the scan's current query is a stream.
 */
static inline bool
afdw_is_stream(AfdwScanState *st)
{
	return st->mode == READ_TEXT_STREAM || st->mode == READ_BINARY_STREAM;
}

/*
 * afdw_query_sent
 *		Whether the scan's current query has been sent: from send_start
 *		until a rescan or the end of the scan.
 */
static inline bool
afdw_query_sent(AfdwScanState *st)
{
	return st->phase != PHASE_PENDING && st->phase != PHASE_UNSENT &&
		st->phase != PHASE_QUEUED;
}

/*
 * afdw_in_flight
 *		Whether a command of the scan has results still to be read.
 */
static inline bool
afdw_in_flight(AfdwScanState *st)
{
	return st->phase == PHASE_IN_FLIGHT || st->phase == PHASE_COPYING ||
		st->phase == PHASE_STREAM_FAILED;
}

/*
 * afdw_streaming
 *		Whether the scan's stream occupies its connection: sent, and
 *		neither over nor failed.
 */
static inline bool
afdw_streaming(AfdwScanState *st)
{
	return st->phase == PHASE_COPYING ||
		(st->phase == PHASE_IN_FLIGHT && afdw_is_stream(st));
}

/*
 * What is known of the remote types of a foreign table's columns (see
 * row_builder.c): whether they are the local types, so that streams of the
 * table can be in binary format.
 */
typedef enum BinaryStatus
{
	BINARY_UNKNOWN,
	BINARY_SAME_TYPES,
	BINARY_OTHER_TYPES
} BinaryStatus;

/* scan_state.c */
extern dlist_head afdw_active_scans;
extern void afdw_scan_error_context(void *arg);
extern void afdw_set_phase(AfdwScanState *st, AfdwPhase phase);
extern void afdw_drop_batch(AfdwScanState *st);
extern void afdw_wake_append(AfdwScanState *st);
extern void afdw_forget_wake(struct WaitEventSet *set);
extern void afdw_wake_again(struct WaitEventSet *set);
extern bool afdw_is_client_statement(EState *estate);

/* scan_commands.c */
extern void afdw_clear_queue(AfdwScanState *st);
extern bool afdw_sibling_streaming(AfdwScanState *st);
extern void afdw_hand_over(AfdwScanState *st);
extern void afdw_send_start(AfdwScanState *st);
extern void afdw_send_fetch(AfdwScanState *st);
extern bool afdw_read_request(AfdwScanState *st, bool block);
extern void afdw_take_batch(AfdwScanState *st);
extern void afdw_raise_held_error(AfdwScanState *st);
extern void afdw_finish_request(AfdwScanState *st);
extern void afdw_close_cursor(AfdwScanState *st);

/* copy_stream.c */
extern bool afdw_take_stream_batch(AfdwScanState *st, bool block);
extern void afdw_spill_stream(AfdwScanState *st);
extern void afdw_take_spill_batch(AfdwScanState *st);
extern void afdw_end_spill(AfdwScanState *st);
extern void afdw_abandon_stream(AfdwScanState *st);

/* row_builder.c */
extern void afdw_init_row_builder(RowBuilder *rb, TupleDesc tupdesc,
								  const char *relname, bool computed,
								  List *retrieved_attrs, MemoryContext row_cxt);
extern HeapTuple afdw_make_tuple(RowBuilder *rb, PGresult *res, int row,
								 MemoryContext cxt);
extern HeapTuple afdw_make_tuple_at(RowBuilder *rb, PGresult *res, int row,
								   int first, MemoryContext cxt);
extern TupleTableSlot *afdw_store_row(AfdwScanState *st, TupleTableSlot *slot);
extern bool afdw_prepare_binary(AfdwScanState *st);
extern bool afdw_binary_allowed(AfdwScanState *st);
extern BinaryStatus afdw_binary_status(Oid relid);
extern void afdw_set_binary_status(Oid relid, BinaryStatus status);

/* explain.c */
struct ExplainState;
extern void afdwExplainForeignScan(ForeignScanState *node,
								   struct ExplainState *es);

/*
 * Where a ForeignScan stands in its executor's plan (plan_census.c).
 */
typedef struct AfdwScanPlace
{
	Plan	   *scan;			/* a ForeignScan; NULL: a free slot */
	Plan	   *parent;			/* the Append it is an asynchronous child of */
	Oid			server;
	bool		once;			/* run once per run of the plan */
	bool		only;			/* its server's only ForeignScan */
	bool		alone;			/* once, and its server's only ForeignScan */
} AfdwScanPlace;

extern const AfdwScanPlace *afdw_find_scan_place(EState *estate, Plan *scan);

/* combined_scans.c */
extern bool afdw_may_combine(AfdwScanState *st, ForeignScan *plan, EState *estate);
extern Plan *afdw_combine_parent(const AfdwScanPlace *place);
extern void afdw_combine_scans(AfdwScanState **scans, int n);

#endif							/* SCAN_INTERNAL_H */
