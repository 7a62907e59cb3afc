/*-------------------------------------------------------------------------
 *
 * async_fdw.h
 *		Shared types and cross-file declarations of async_fdw.
 *
 * Declarations are grouped by the file that defines them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ASYNC_FDW_H
#define ASYNC_FDW_H

#include "datatype/timestamp.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "portability/instr_time.h"
#include "utils/relcache.h"

#include "pg_compat.h"

/* Defaults of the numeric options. */
#define AFDW_DEFAULT_FETCH_SIZE			100
#define AFDW_DEFAULT_STARTUP_COST		100.0
#define AFDW_DEFAULT_TUPLE_COST			0.01
#define AFDW_DEFAULT_MAX_CONNECTIONS	4
#define AFDW_DEFAULT_IDLE_CONNECTIONS	1
#define AFDW_DEFAULT_IDLE_TIMEOUT_MS	1000

/*
 * Upper bound of max_connections.  Each connection is a backend on the
 * remote server, whose own max_connections is 100 by default, so a pool
 * far larger could never be filled; and each scan start walks the pool's
 * slots, creating those it visits, so the bound also bounds that walk.
 */
#define AFDW_MAX_MAX_CONNECTIONS		256

/* How a scan reads its rows: the fetch_mode option. */
typedef enum AfdwFetchMode
{
	AFDW_FETCH_AUTO,			/* stream unless the scan may stop early */
	AFDW_FETCH_STREAM,			/* COPY (query) TO STDOUT */
	AFDW_FETCH_CURSOR			/* DECLARE and FETCH fetch_size rows */
} AfdwFetchMode;

/*
 * What stands between async_fdw and a server: the pooler option.  The
 * session settings of a connection travel in its startup packet when
 * nothing does, are set once after connecting through a pooler that keeps
 * a server session per client connection, and at the start of every
 * remote transaction through one that may hand each transaction another
 * server session (which keeps no prepared statement either).
 */
/*
 * How ANALYZE samples a remote table: the analyze_sampling option.  The
 * words of options.c are in this order.
 */
typedef enum AfdwSampling
{
	AFDW_SAMPLE_OFF,			/* read every row */
	AFDW_SAMPLE_AUTO,			/* bernoulli for a table, random otherwise */
	AFDW_SAMPLE_RANDOM,			/* WHERE random() < fraction */
	AFDW_SAMPLE_SYSTEM,			/* TABLESAMPLE SYSTEM */
	AFDW_SAMPLE_BERNOULLI		/* TABLESAMPLE BERNOULLI */
} AfdwSampling;

/*
 * When remote transactions commit with two-phase commit: the setting
 * async_fdw.two_phase_commit and the server option two_phase_commit
 * (twophase.c).  The words of options.c are in this order.
 */
typedef enum AfdwTwoPhase
{
	AFDW_2PC_OFF,				/* never */
	AFDW_2PC_AUTO,				/* where atomicity is at stake and every
								 * written server can prepare */
	AFDW_2PC_ON					/* whenever a remote server was written;
								 * an error if one cannot prepare */
} AfdwTwoPhase;

typedef enum AfdwPooler
{
	AFDW_POOLER_AUTO,			/* none, unless the server refuses startup
								 * options as pgbouncer does: transaction */
	AFDW_POOLER_NONE,			/* a PostgreSQL server, or a pooler that
								 * passes startup options on */
	AFDW_POOLER_SESSION,		/* a session-mode pooler */
	AFDW_POOLER_TRANSACTION		/* a transaction-mode pooler */
} AfdwPooler;

/*
 * Planner-side state of one foreign base relation, kept in
 * RelOptInfo->fdw_private between the planner callbacks.
 */
typedef struct AfdwRelInfo
{
	/* Catalog objects of the relation. */
	ForeignTable *table;
	ForeignServer *server;
	UserMapping *user;

	/* Options after merging server and table level. */
	int			fetch_size;
	AfdwFetchMode fetch_mode;
	Cost		fdw_startup_cost;
	Cost		fdw_tuple_cost;
	bool		async_capable;

	/* Restriction clauses split by where they can be evaluated. */
	List	   *remote_conds;
	List	   *local_conds;

	/*
	 * A join's pseudoconstant conditions (no column of either side), which
	 * PostgreSQL 17 and later check once, in a gating Result above the
	 * join's ForeignScan (the paths' fdw_restrictinfo); NIL before 17.
	 */
	List	   *gating_conds;

	/* Columns needed locally (offset by FirstLowInvalidHeapAttributeNumber). */
	Bitmapset  *attrs_used;

	/* Cost of evaluating local_conds, and their selectivity. */
	QualCost	local_conds_cost;
	Selectivity local_conds_sel;

	/* OIDs of the extensions whose objects may be shipped (server option). */
	List	   *extensions;

	/*
	 * use_remote_estimate: the remote server's EXPLAIN of the scan gave its
	 * rows and costs (remote_estimated), which replace the local guess.
	 */
	bool		use_remote_estimate;
	bool		remote_estimated;
	Cost		remote_startup;
	Cost		remote_total;

	/*
	 * A grouping relation whose aggregates the remote server computes
	 * (aggregate_paths.c): the foreign table's relation it reads (NULL for a base
	 * relation), the remote select list (TargetEntries), the positions in
	 * it of the GROUP BY items, the GROUP BY items sent as parameter
	 * values (Params, which the select list may not hold: see
	 * grouping_ok), the remote HAVING conditions and those checked
	 * locally (not shippable, on sent aggregates and grouping items), and
	 * whether the aggregates are partial (transition states for a local
	 * Finalize Aggregate).
	 */
	RelOptInfo *input_rel;
	List	   *grouped_tlist;
	List	   *group_positions;
	List	   *group_values;
	List	   *having;
	List	   *local_having;
	bool		partial;

	/*
	 * A join computed by the remote server (join_paths.c): its two sides (base
	 * relations or joins of ours), the join type, the conditions of its ON
	 * clause and those of the WHERE clause that ends up around it
	 * (expressions; a side's own conditions are placed in one or the
	 * other), and how EXPLAIN names it.
	 */
	RelOptInfo *outer_rel;
	RelOptInfo *inner_rel;
	JoinType	jointype;
	List	   *join_on;
	List	   *where_conds;
	char	   *relations;

	/*
	 * A remote join's costs as offered (before its first row, after its
	 * remote read, in all) and the local join that rechecks a row (NULL
	 * when none is needed), kept to offer its paths again once the local
	 * joins that look rows up one by one are dropped (join_paths.c).
	 */
	bool		join_offered;	/* its paths were offered */
	bool		copy_join;		/* a partition's join with copies of
								 * replicated tables (replicated_joins.c) */
	Cost		join_startup;
	Cost		join_read;
	Cost		join_total;
	Path	   *epq_path;

	/*
	 * The cheapest unparameterized path of ours offered for the relation
	 * in the query's final order (or any order, with no ORDER BY): its
	 * rows, costs and keys, kept for the final stage when a local path
	 * beat it (afdw_keep_final_candidate, order_limit.c).
	 */
	bool		final_kept;
	double		final_rows;
	Cost		final_startup;
	Cost		final_total;
	List	   *final_pathkeys;

	/*
	 * The arrays of this table's join keys that InitPlans compute for the
	 * large scans joined to it (pushed_keys.c), one per column.
	 */
	List	   *key_arrays;
} AfdwRelInfo;

/*
 * Opaque handle of a pooled remote connection (connection_pool.c); its fields
 * are for the connection-side files only (connection_internal.h).
 */
typedef struct AfdwConn AfdwConn;

/* options.c */
extern int	afdw_fetch_size_option(List *options, int current);
extern int	afdw_fetch_mode_option(List *options, int current);
extern AfdwPooler afdw_pooler_option(List *options);
extern AfdwSampling afdw_sampling_option(List *options, AfdwSampling current);
extern int	afdw_two_phase_option(List *options);
extern bool afdw_bool_option(List *options, const char *name, bool current);
extern double afdw_real_option(List *options, const char *name, double current);
extern int	afdw_int_option(List *options, const char *name, int current);
extern bool afdw_is_libpq_option(const char *name);
extern List *afdw_extensions_option(List *options);
extern List *afdw_copy_servers(ForeignTable *table);
extern List *afdw_copy_key(Relation rel, bool *replicated);
extern List *afdw_copy_key_required(Relation rel);
extern bool afdw_server_is_ours(Oid serverid);
extern bool afdw_table_reads_ours(Oid relid, bool partitions);
extern bool afdw_mapping_ids(Oid umid, Oid *serverid, Oid *userid);

/* async_fdw.c */

/*
 * The async_fdw.application_name setting: when it is not empty after its
 * escapes are replaced, the application_name of new remote connections.
 */
extern PGDLLIMPORT char *afdw_application_name;

/* scan_paths.c */
extern void afdwGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel,
								  Oid foreigntableid);
extern void afdwGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel,
								Oid foreigntableid);
extern ForeignScan *afdwGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel,
									   Oid foreigntableid, ForeignPath *best_path,
									   List *tlist, List *scan_clauses,
									   Plan *outer_plan);

/* plan_private.c */
/*
 * Indexes of the items of the fdw_private list of a ForeignScan that is a
 * direct modification: written by direct_modify_plan.c, read by
 * direct_modify.c.
 */
enum AfdwDirectPrivate
{
	AFDW_DIRECT_SQL,			/* String: the remote UPDATE or DELETE */
	AFDW_DIRECT_RETURNING,		/* Boolean: it has a RETURNING list */
	AFDW_DIRECT_RETRIEVED,		/* List of Integer: local column numbers of
								 * the RETURNING columns */
	AFDW_DIRECT_COUNT,			/* Boolean: its rows count for the
								 * statement's tag (es_processed) */
	AFDW_DIRECT_EAGER,			/* Boolean: sent at executor start (its
								 * parameters are known then) */
	AFDW_DIRECT_CHECK_PARTITION,	/* Boolean: each changed row is checked
									 * against the table's partition
									 * constraint (it returns the columns
									 * the constraint reads) */
	AFDW_DIRECT_JOIN_COLS		/* Integer, over a remote join only: how many
								 * of the RETURNING columns, after the
								 * target's, are the join's scan tuple */
};
extern List *afdw_make_scan_private(const char *sql, List *retrieved_attrs,
									int fetch_size, bool stream,
									const char *outer_order,
									const char *relations);
extern const char *afdw_scan_relations(ForeignScan *plan);
extern void afdw_mark_own_limit(PlannerInfo *root, ForeignScan *scan);
extern void afdw_mark_limit_bound(ForeignScan *scan, int64 bound);
extern bool afdw_scan_own_limit(ForeignScan *plan, int *bound);
extern bool afdw_make_scan_distinct(ForeignScan *plan);
extern void afdw_scan_private(ForeignScan *plan, char **sql,
							  List **retrieved_attrs, int *fetch_size,
							  bool *stream, char **outer_order);
extern const char *afdw_scan_sql(ForeignScan *plan);
extern List *afdw_scan_retrieved(ForeignScan *plan);
extern void afdw_mark_recheck_only(Plan *plan);
extern void afdw_mark_when_read(ForeignScan *scan);
extern bool afdw_scan_when_read(ForeignScan *plan);
extern void afdw_set_key_slots(ForeignScan *scan, int at, bool where, List *slots);
extern List *afdw_make_key_slot(AttrNumber attno, Oid opno, Oid collation,
								const char *before, const char *after);
extern int	afdw_scan_key_slots(ForeignScan *plan);
extern void afdw_scan_key_slot(ForeignScan *plan, int i, AttrNumber *attno,
							   Oid *opno, Oid *collation);
extern void afdw_add_key_use(ForeignScan *plan, int collector, int column, int slot);
extern int	afdw_scan_key_uses(ForeignScan *plan);
extern void afdw_scan_key_use(ForeignScan *plan, int i, int *collector, int *column);
extern char *afdw_keyed_sql(ForeignScan *plan, const bool *used, int first_param);

/*
 * commit_fence.c: the two sides that hold the commit fence, and how long a
 * reader holds it or waits for it at most (then its snapshots are checked
 * instead).
 */
#define AFDW_FENCE_READER_MS	1000

typedef enum AfdwFenceSide
{
	AFDW_FENCE_READER = 0,		/* a statement taking several snapshots */
	AFDW_FENCE_COMMITTER = 1	/* a transaction committing on several
								 * servers */
} AfdwFenceSide;

/* Whether commits and reads of several servers go through the fence. */
typedef enum AfdwFenceState
{
	AFDW_FENCE_ON,				/* they do */
	AFDW_FENCE_NOT_PRELOADED,	/* async_fdw is not preloaded */
	AFDW_FENCE_TURNED_OFF		/* async_fdw.atomic_visibility is off */
} AfdwFenceState;

extern void afdw_fence_init(void);
extern void afdw_fence_preload(void);
extern bool afdw_fence_active(void);
extern AfdwFenceState afdw_fence_state(void);
extern const char *afdw_fence_state_name(AfdwFenceState state);
extern void afdw_fence_note_unfenced(void);
extern bool afdw_fence_enter(AfdwFenceSide side, int timeout_ms);
extern void afdw_fence_leave(void);
extern bool afdw_fence_holding(void);
extern void afdw_fence_publish(Oid serverid);
extern uint64 afdw_fence_floor(void);
extern bool afdw_fence_committed_since(Oid serverid, uint64 floor);

/* visibility.c */
extern void afdw_visibility_init(void);
extern void afdw_visibility_begin(AfdwConn **conns, Oid *relids, int n,
								  bool nested);
extern void afdw_visibility_end(AfdwConn **conns, int n);
extern void afdw_visibility_abort(void);
extern void afdw_visibility_first_write(AfdwConn *conn, Oid relid);

/* connection_budget.c */
extern void afdw_budget_preload(void);
extern bool afdw_budget_active(void);
extern bool afdw_budget_figures(ForeignServer *server, int *limit, int *held,
								int *idle_expiring, int *waiting);

/* connection_setup.c */
extern void afdw_connect_finish(AfdwConn **entries, int n);
extern bool afdw_hold_owners_to_passwords(bool on);

/* connection_pool.c */

/*
 * One open connection of this backend, as afdw_list_connections describes
 * it for async_fdw_get_connections (connection_functions.c).
 */
typedef struct AfdwConnInfo
{
	Oid			serverid;
	Oid			umid;			/* the user mapping */
	int			slot;			/* its place in the mapping's pool */
	bool		valid;			/* false: server or mapping changed, the
								 * connection goes at the end of the
								 * transaction */
	bool		in_use;			/* scans hold it, or a remote transaction
								 * is open on it */
	bool		used_in_xact;	/* a remote transaction of the current
								 * local one is open on it */
	int			closed;			/* the server closed it: 1 or 0, -1 when
								 * not checked (or not checkable) */
	int			nusers;			/* scans holding it */
	bool		streaming;		/* one of them streams on it */
	int			remote_pid;		/* the remote backend's process id */
	TimestampTz opened_at;
	int			can_prepare;	/* the server takes PREPARE TRANSACTION: 1,
								 * 0, or -1 when not known yet */
} AfdwConnInfo;

extern AfdwConn *afdw_current_writer(AfdwConn *conn);
extern AfdwConn *afdw_route_to_writer(AfdwConn *conn);
extern void afdw_release_connection(AfdwConn *conn);
extern bool afdw_is_connecting(AfdwConn *conn);
extern AfdwConn *afdw_connection_ready(AfdwConn *conn);
extern AfdwConn *afdw_renew_idle(AfdwConn *conn);
extern int	afdw_conn_users(AfdwConn *conn);
extern List *afdw_list_connections(bool check_closed);
extern bool afdw_close_connection(Oid umid, int slot);
extern void afdw_set_streaming(AfdwConn *conn, bool streaming);

/* prepared_statements.c */
extern unsigned int afdw_prepared_statement(AfdwConn *conn, const char *sql);
extern bool afdw_keeps_statements(AfdwConn *conn);
extern unsigned int afdw_next_statement_number(AfdwConn *conn);
extern void afdw_remember_statement(AfdwConn *conn, const char *sql,
									unsigned int number);
extern void afdw_forget_statement(AfdwConn *conn, const char *sql);
extern void afdw_preparing_statement(AfdwConn *conn, const char *sql,
									 unsigned int number);

/* remote_commands.c */
typedef void (*AfdwDrainFn) (void *owner);

/*
 * Lines of a COPY TO STDOUT, read as a batch (afdw_read_copy_lines).  Each
 * line is copied into buf after the one before, at a MAXALIGNed offset and
 * followed by a zero byte, and the line libpq gave is freed at once: libpq
 * mallocs every line, and a malloc'd line held until its batch ends is
 * costly for the allocator.  The owner allocates offs and lens (room for
 * max lines) and empties the batch by setting n and used to 0.
 */
typedef struct AfdwLines
{
	char	   *buf;			/* the lines */
	Size		size;			/* bytes allocated at buf */
	Size		used;			/* bytes used */
	Size	   *offs;			/* where each line starts in buf */
	int		   *lens;			/* the length of each line */
	int			n;				/* lines in the batch */
	int			max;			/* room in offs and lens */
	MemoryContext cxt;			/* where buf is allocated */
	const char *table;			/* the foreign table, for messages */
	uint64		received;		/* bytes of the lines read off the socket
								 * by afdw_read_copy_lines, over all the
								 * batches (for EXPLAIN ANALYZE) */
} AfdwLines;

#define AFDW_LINE(lines, i)		((lines)->buf + (lines)->offs[i])

/* What afdw_read_copy_lines found. */
typedef enum AfdwCopyRead
{
	AFDW_COPY_LINES,			/* lines added; more may follow */
	AFDW_COPY_NONE,				/* no line has arrived (not waiting) */
	AFDW_COPY_END				/* the data is over, after the lines added */
} AfdwCopyRead;

/*
 * Time blocked in waits on remote sockets, over the backend's life, counted
 * while afdw_timed_scans (scans under EXPLAIN ANALYZE with timing) is not
 * zero: a scan takes the difference across its own calls.
 */
extern int	afdw_timed_scans;
extern instr_time afdw_wait_time;

extern void afdw_send_query(AfdwConn *conn, const char *sql, int nparams,
							const char *const *values);
extern PGresult *afdw_wait_result(AfdwConn *conn, const char *sql);
extern PGresult *afdw_command_result(AfdwConn *conn, const char *sql);
extern uint64 afdw_rows_changed(const PGresult *res);
extern PGresult *afdw_run_query(AfdwConn *conn, const char *sql, int nparams,
								const char *const *values);
extern void afdw_run_command(AfdwConn *conn, const char *sql);
extern void afdw_wait_socket(AfdwConn *conn, const char *sql);
extern bool afdw_wait_socket_until(AfdwConn *conn, const char *sql,
								   TimestampTz deadline);
extern bool afdw_result_ready(AfdwConn *conn);
extern PGresult *afdw_get_result(AfdwConn *conn);
extern void afdw_set_owner(AfdwConn *conn, void *owner, AfdwDrainFn drain);
extern void afdw_set_idle(AfdwConn *conn);
extern void afdw_forget_owner(AfdwConn *conn, void *owner);
extern bool afdw_is_owner(AfdwConn *conn, void *owner);
extern void *afdw_conn_owner(AfdwConn *conn);
extern bool afdw_is_busy(AfdwConn *conn);
extern void afdw_make_idle(AfdwConn *conn);
extern void afdw_cancel(AfdwConn *conn);
extern void afdw_consume_input(AfdwConn *conn, const char *sql);
extern int	afdw_get_copy_line(AfdwConn *conn, char **line, bool block,
							   const char *sql);
extern AfdwCopyRead afdw_read_copy_lines(AfdwConn *conn, AfdwLines *lines,
										 bool block, const char *sql);
extern void afdw_add_line(AfdwLines *lines, const char *line, int len);
extern void afdw_discard_copy(AfdwConn *conn, const char *sql);
extern pgsocket afdw_socket(AfdwConn *conn);
extern int	afdw_server_version(AfdwConn *conn);
extern bool afdw_connection_ok(AfdwConn *conn);
extern bool afdw_result_lost(AfdwConn *conn, PGresult *res);
extern void afdw_await_copy_in(AfdwConn *conn, const char *sql);
extern void afdw_put_copy(AfdwConn *conn, const char *data, int len,
						  const char *sql);
extern bool afdw_copy_open(AfdwConn *conn);
extern void afdw_copy_done(AfdwConn *conn, const char *sql);
extern PGresult *afdw_copy_result(AfdwConn *conn, const char *sql);
extern afdw_noreturn void afdw_protocol_violation(AfdwConn *conn, const char *detail,
									const char *sql);
extern afdw_noreturn void afdw_report_remote_error(PGresult *res, AfdwConn *conn,
									 const char *sql);

/* shared_snapshot.c */
extern void afdw_prepare_snapshot(AfdwConn *conn);
extern AfdwConn *afdw_join_target(AfdwConn *conn);
extern bool afdw_statement_is_transaction(void);

/* remote_xact.c */
extern AfdwConn *afdw_acquire_connection(UserMapping *user);
extern AfdwConn *afdw_acquire_writer(UserMapping *user);
extern AfdwConn *afdw_open_connection(UserMapping *user);
extern AfdwConn *afdw_get_connection(UserMapping *user);
extern bool afdw_cancel_harmless(AfdwConn *conn);
extern bool afdw_cancel_opened(AfdwConn *entry, TimestampTz deadline);
extern void afdw_send_in_xact(AfdwConn *conn, const char *sql, void *owner,
							  AfdwDrainFn drain, bool nested, bool last);
extern void afdw_send_write(AfdwConn *conn, const char *sql, bool copy,
							void *owner, AfdwDrainFn drain);
extern PGresult *afdw_run_write(AfdwConn *conn, const char *sql);
extern bool afdw_can_write_at(AfdwConn *conn, int level);
extern void afdw_writes_to_level(AfdwConn *entry, int level);
extern PGresult *afdw_run_write_at(AfdwConn *conn, const char *sql, int level);
extern bool afdw_defer_write(AfdwConn *conn, const char *sql);
extern bool afdw_send_final_write(AfdwConn *conn, const char *sql, void *owner,
								  AfdwDrainFn drain);
extern void afdw_note_row_locks(AfdwConn *conn);
extern void afdw_end_read_transactions(AfdwConn *writer, const char *what);
extern unsigned int afdw_next_cursor_number(AfdwConn *conn);
extern void afdw_close_cursor_later(AfdwConn *conn, unsigned int cursor);
extern void afdw_begin_xact_async(AfdwConn *conn);

/*
 * How the remote server computes an aggregate's transition state for a partial
 * aggregate (deparse_expr.c, afdw_partial_form, writes it; aggregate_paths.c
 * plans it).
 */
typedef enum AfdwPartialForm
{
	AFDW_PARTIAL_NONE,			/* it cannot */
	AFDW_PARTIAL_SAME,			/* the aggregate itself */
	AFDW_PARTIAL_AVG_ARRAY,		/* ARRAY[count(x), coalesce(sum(x), 0)] */
	AFDW_PARTIAL_INT8_STATE,	/* int8send(count(x)), then the bytes of
								 * numeric_send(coalesce(sum(x), 0)) in
								 * the serial form of the state */
	AFDW_PARTIAL_FLOAT8_ARRAY,	/* ARRAY[count(x), coalesce(sum(x::float8),
								 * 0), 0 or NaN]::float8[] */
	AFDW_PARTIAL_NUMERIC_STATE	/* the serial form of numeric's state, from
								 * counts, the finite sum and scales */
} AfdwPartialForm;

/* shippable.c */
extern bool afdw_is_shippable(PlannerInfo *root, RelOptInfo *baserel, Expr *expr);
extern AttrNumber afdw_sort_key(RelOptInfo *baserel, PathKey *pk,
								bool *descending, bool *nulls_first);
extern Oid	afdw_sort_operator(RelOptInfo *baserel, PathKey *pk, Oid type);
extern bool afdw_constant_key(RelOptInfo *rel, PathKey *pk);
extern void afdw_classify_conditions(PlannerInfo *root, RelOptInfo *baserel,
									 List *conds, List **remote, List **local);
extern bool afdw_is_shippable_grouped(PlannerInfo *root, RelOptInfo *baserel,
									  Expr *expr, bool partial);

/* shippable_subplans.c */
extern SubPlan *afdw_sent_subplan(PlannerInfo *root, Node *node, Oid serverid,
								  Oid umid, ForeignScan **scan);
extern ForeignScan *afdw_sent_initplan(PlannerInfo *root, Param *param,
									   Oid serverid, Oid umid);
extern uint64 afdw_initplans_sent(void);

/* initplans.c */
extern void afdw_mark_unread_initplans(PlannedStmt *stmt);

/* deparse_expr.c */
extern bool afdw_is_builtin(Oid oid);
extern bool afdw_type_names_by_oid(Oid type);
extern Expr *afdw_case_when_value(CaseWhen *cw);
extern AfdwPartialForm afdw_partial_form(Aggref *agg);
extern const char *afdw_remote_column_name(Relation rel, AttrNumber attnum);
extern bool afdw_output_ignores_settings(Oid type);
extern void afdw_append_literal(StringInfo buf, const char *val);
extern int	afdw_set_transmission_modes(void);
extern void afdw_reset_transmission_modes(int nestlevel);

/* deparse_context.c */
extern void afdw_deparse_relation(StringInfo buf, Relation rel);

/* deparse_statements.c */
extern void afdw_deparse_insert(StringInfo head, StringInfo row,
								StringInfo tail, Relation rel,
								List *target_attrs, bool do_nothing,
								bool returning, bool with_ctid,
								List **retrieved_attrs);
extern void afdw_deparse_update(StringInfo head, StringInfo tail,
								Relation rel, List *target_attrs, List *key,
								bool returning, bool with_ctid,
								List **retrieved_attrs);
extern void afdw_deparse_delete(StringInfo head, StringInfo tail,
								Relation rel, List *key, bool returning,
								bool with_ctid, List **retrieved_attrs);
extern void afdw_deparse_copy_from(StringInfo buf, Relation rel,
								   List *target_attrs);
extern void afdw_deparse_select(StringInfo buf, PlannerInfo *root, RelOptInfo *baserel,
								Relation rel,
								Bitmapset *attrs_used, List *remote_conds,
								List **retrieved_attrs, List **params);
extern void afdw_deparse_grouped_select(StringInfo buf, PlannerInfo *root,
										RelOptInfo *baserel,
										Relation rel, List *tlist,
										List *remote_conds, List *group_positions,
										List *group_values, List *having,
										bool partial,
										List **params,
										int *key_at, bool *key_where);
extern char *afdw_deparse_condition(PlannerInfo *root, RelOptInfo *baserel,
									Relation rel, Expr *cond, List *params);
extern void afdw_deparse_limit(StringInfo buf, PlannerInfo *root,
							   RelOptInfo *rel, Relation frel, List **params);
extern bool afdw_deparse_locking_clause(StringInfo buf, PlannerInfo *root,
										RelOptInfo *baserel);
extern void afdw_deparse_binary_select(StringInfo buf, const char *sql,
									   const char *outer_order,
									   Relation rel, List *retrieved_attrs);
extern void afdw_deparse_type_check(StringInfo buf, Relation rel);
extern void afdw_deparse_analyze(StringInfo buf, Relation rel,
								 AfdwSampling method, double fraction,
								 List **retrieved_attrs);
extern void afdw_bind_params(StringInfo buf, const char *sql, int nparams,
							 const char *const *values);

/* deparse_join.c */
extern char *afdw_deparse_join_condition(PlannerInfo *root, RelOptInfo *joinrel,
										 Expr *cond, List *params);
extern void afdw_deparse_join_column(StringInfo buf, PlannerInfo *root,
									 RelOptInfo *joinrel, Var *var);
extern void afdw_deparse_join_select(StringInfo buf, PlannerInfo *root,
									 RelOptInfo *joinrel, List *tlist,
									 List **params);
extern bool afdw_deparse_join_locking_clause(StringInfo buf, PlannerInfo *root,
											 RelOptInfo *joinrel);
extern bool afdw_join_var_readable(RelOptInfo *rel, Var *var);
extern Var *afdw_join_select_var(PlannerInfo *root, RelOptInfo *rel, Var *var);

/* scan.c */
extern void afdw_scan_routines(FdwRoutine *routine);

/* xact_callbacks.c */
extern void afdw_xact_callbacks_init(void);

/* twophase.c */
extern void afdw_twophase_init(void);
extern char *afdw_twophase_gid_prefix(void);
extern void afdw_twophase_pause_recovery(void);
extern char *afdw_twophase_records_name(void);
extern void afdw_twophase_require(Oid relid);
extern void afdw_twophase_subxact_end(int level, bool committed);

/* twophase_recovery.c */

/*
 * What recovery found of a remote transaction's local transaction: the
 * column local_state of async_fdw_recover_prepared_transactions, in words
 * only there (twophase_recovery.c's local_state_word).
 */
typedef enum AfdwLocalState
{
	AFDW_LOCAL_ABORTED,			/* no record: rolled back, or never committed */
	AFDW_LOCAL_IN_PROGRESS,		/* still running: left alone */
	AFDW_LOCAL_COMMITTED		/* its record is there */
} AfdwLocalState;

/*
 * What recovery did with a remote transaction (or a server): decided and
 * counted as these values, turned into the column action of
 * async_fdw_recover_prepared_transactions only where a row is built
 * (twophase_recovery.c's action_word).
 */
typedef enum AfdwRecoveryAction
{
	AFDW_RECOVERY_LEFT,			/* its local transaction is in progress */
	AFDW_RECOVERY_WOULD_COMMIT, /* dry run, committed locally */
	AFDW_RECOVERY_WOULD_ROLL_BACK,	/* dry run, aborted locally */
	AFDW_RECOVERY_COMMITTED,	/* COMMIT PREPARED succeeded */
	AFDW_RECOVERY_ROLLED_BACK,	/* ROLLBACK PREPARED succeeded */
	AFDW_RECOVERY_FINISHED_BY_SESSION,	/* gone when recovery came */
	AFDW_RECOVERY_LEFT_NO_MAPPING,	/* its user mapping was dropped */
	AFDW_RECOVERY_LEFT_FINISHING,	/* its own session is finishing it */
	AFDW_RECOVERY_FAILED		/* it, or the whole server, failed: see
								 * failure */
} AfdwRecoveryAction;

/* One outcome of recovery, as afdw_recover_prepared reports it. */
typedef struct AfdwRecoveryOutcome
{
	const char *server;			/* the server's name */
	const char *gid;			/* NULL: the server could not be recovered */
	AfdwLocalState state;		/* only with a gid */
	AfdwRecoveryAction action;
	const char *failure;		/* AFDW_RECOVERY_FAILED: why */
} AfdwRecoveryOutcome;

typedef void (*AfdwRecoveryReport) (const AfdwRecoveryOutcome *outcome,
									void *arg);

extern List *afdw_recovery_servers(void);
extern bool afdw_recover_prepared(Oid only, bool dry_run,
								  AfdwRecoveryReport report, void *arg);

/* recovery_worker.c */
extern void afdw_recovery_worker_init(void);

/* modify_rows.c */
extern void afdw_modify_routines(FdwRoutine *routine);
extern bool afdw_update_may_leave_partition(Relation rel, Bitmapset *updated_cols);
extern void afdw_check_partition_row(ResultRelInfo *rinfo, CmdType operation,
									 TupleTableSlot *slot, EState *estate);

/* bulk_loads.c */
typedef struct AfdwBulkLoad AfdwBulkLoad;

extern void afdw_write_error_context(void *arg);
extern AfdwBulkLoad *afdw_bulk_begin(Relation rel, List *target_attrs,
									 const char *head, const char *tail,
									 int batch_size, EState *estate,
									 AfdwConn **writer);
extern void afdw_bulk_add(AfdwBulkLoad *load, const char **values);
extern void afdw_bulk_end(AfdwBulkLoad *load);
extern void afdw_bulk_forget(AfdwBulkLoad *load);
extern void afdw_flush_kept_rows(Oid serverid);

/* direct_modify_plan.c */
extern bool afdwPlanDirectModify(PlannerInfo *root, ModifyTable *plan,
								 Index resultRelation, int subplan_index);
extern bool afdw_direct_join_mode(PlannerInfo *root);
extern bool afdw_direct_join_ok(PlannerInfo *root, RelOptInfo *joinrel);

/* explain.c */
extern void afdw_explain_commit_fence(struct ExplainState *es, EState *estate,
									  ResultRelInfo *rinfo);

/* direct_modify.c */
extern void afdw_direct_routines(FdwRoutine *routine);

/* import_schema.c */
extern List *afdwImportForeignSchema(ImportForeignSchemaStmt *stmt, Oid serveroid);

/* analyze.c */
extern void afdw_analyze_routines(FdwRoutine *routine);

/* replica_writes.c */
typedef struct AfdwReplicaWrites AfdwReplicaWrites;
extern AfdwReplicaWrites *afdw_replica_writes_begin(Relation rel, Oid userid);
extern void afdw_replica_writes_run(AfdwReplicaWrites *rw, const char *sql,
									uint64 rows, const char *verb);
extern void afdw_replica_writes_end(AfdwReplicaWrites *rw);
extern char *afdw_replica_server_names(Oid relid);
extern List *afdw_replica_other_servers(Oid relid);

/* truncate.c */
extern void afdwExecForeignTruncate(List *rels, DropBehavior behavior,
									bool restart_seqs);

/* join_paths.c */
extern void afdwGetForeignJoinPaths(PlannerInfo *root, RelOptInfo *joinrel,
									RelOptInfo *outerrel, RelOptInfo *innerrel,
									JoinType jointype, JoinPathExtraData *extra);
extern ForeignScan *afdw_join_plan(PlannerInfo *root, RelOptInfo *rel,
								   List *tlist, Plan *outer_plan,
								   bool parameterized);
extern ForeignScan *afdw_join_lock_rows(PlannerInfo *root, RelOptInfo *rel,
										ForeignScan *scan);
extern bool afdw_all_partitions_ours(RelOptInfo *rel);
extern void afdw_join_init(void);

/* replicated_joins.c */
extern void afdw_copies_init(void);

/* order_limit.c */
extern bool afdw_has_exec_param(Node *node, void *context);
extern char *afdw_deparse_order_by(StringInfo buf, RelOptInfo *baserel,
								   Relation rel, List *pathkeys,
								   List *retrieved_attrs);
extern void afdw_add_sorted_join_paths(PlannerInfo *root, RelOptInfo *joinrel,
									   Cost startup, Cost total);
extern void afdw_add_merge_paths(PlannerInfo *root, RelOptInfo *rel,
								 Cost read, Cost total);
extern Cost afdw_remote_sort_cost(PlannerInfo *root, List *pathkeys,
								  double rows, int width, double bound);
extern void afdw_add_sorted_grouping_path(PlannerInfo *root, RelOptInfo *grouped,
										  double ngroups, Cost startup,
										  Cost total);
extern ForeignScan *afdw_finish_remote_plan(PlannerInfo *root, RelOptInfo *rel,
											Path *path, ForeignScan *scan);
extern void afdw_add_final_path(PlannerInfo *root, RelOptInfo *input,
								RelOptInfo *final, FinalPathExtraData *extra);
extern bool afdw_is_final_path(Path *path);
extern void afdw_offer_path(PlannerInfo *root, RelOptInfo *rel, Path *path);

/* aggregate_paths.c */
extern void afdwGetForeignUpperPaths(PlannerInfo *root, UpperRelationKind stage,
									 RelOptInfo *input, RelOptInfo *output,
									 void *extra);
extern ForeignScan *afdw_grouping_plan(PlannerInfo *root, RelOptInfo *rel,
									   List *tlist, Plan *outer_plan);
extern void afdw_upper_init(void);
extern void afdw_late_partitionwise(PlannerInfo *root);

/* pushed_keys.c */
extern void afdw_keys_init(void);
extern List *afdw_key_conditions(PlannerInfo *root, RelOptInfo *rel,
								 ForeignPath *path);
extern List *afdw_key_slots(PlannerInfo *root, RelOptInfo *rel, Relation relation,
							ForeignPath *path, List *params, List *key_conds);
extern List *afdw_join_key_slots(PlannerInfo *root, RelOptInfo *joinrel,
								 List *scan_tlist, List *params,
								 bool parameterized);
extern List *afdw_group_key_slots(PlannerInfo *root, RelOptInfo *input_rel,
								  Relation relation, List *grouped_tlist,
								  List *group_positions, List *params);
extern int	afdw_key_slots_made(void);
extern int	afdw_key_array_limit(void);

/* The most columns of one scan that may take keys at run time. */
#define AFDW_MAX_KEY_SLOTS	4

/* hash_join_keys.c */
extern void afdw_attach_key_collectors(PlannedStmt *stmt);

/* remote_rels.c */
extern bool afdw_routine_is_ours(FdwRoutine *routine);
extern AfdwRelInfo *afdw_derived_relinfo(AfdwRelInfo *from);
extern void afdw_check_params_apart(List *params, List *scan_tlist);

/* decorrelate.c */
extern void afdw_decorrelate_init(void);
extern Query *afdw_decorrelate(Query *query);

/* combined_scans.c */
extern void afdw_combine_init(void);

/* key_collector.c */
extern void afdw_collect_init(void);
extern CustomScan *afdw_make_key_collector(Plan *child, List *columns, int limit,
											int id, bool outer);
extern bool afdw_is_key_collector(Plan *plan);
extern bool afdw_collected_keys(EState *estate, int collector, int column,
								Datum *keys, int *count);

#endif							/* ASYNC_FDW_H */
