/*-------------------------------------------------------------------------
 *
 * connection_internal.h
 *		The remote connection as the connection-side files of async_fdw
 *		share it.
 *
 * Included only by connection_pool.c (the pool, invalidation),
 * prepared_statements.c (the statements prepared in a remote session),
 * connection_setup.c (opening one connection), remote_commands.c (send, wait,
 * results, cancel, remote errors), shared_snapshot.c (the shared snapshot of a
 * server), remote_xact.c (the remote transactions), twophase.c (two-phase
 * commit), twophase_recovery.c (its recovery), connection_budget.c (the
 * connection budget shared by all backends) and connection_state.c (the hash
 * of all connections, their memory context and the session layer's hooks).
 * For every other file AfdwConn is opaque (async_fdw.h), and only these call
 * libpq on a connection (prepared_statements.c reads results only).
 * Declarations are grouped by the file that defines them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONNECTION_INTERNAL_H
#define CONNECTION_INTERNAL_H

#include "access/xact.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "storage/latch.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "async_fdw.h"

/* Where a scan's command stands in its savepoint afdw_ra (AfdwConn). */
typedef enum AfdwWrap
{
	AFDW_WRAP_NONE,				/* no command in flight is wrapped */
	AFDW_WRAP_PENDING,			/* the SAVEPOINT's result is still to come */
	AFDW_WRAP_OPEN				/* it came; the command's end has not */
} AfdwWrap;

/*
 * What is in flight on a connection (AfdwConn's in_flight): nothing, or a
 * command whose results are not all read yet, and what kind.  It moves only
 * through afdw_set_in_flight (remote_commands.c), which asserts that each move
 * is one of those listed: remote_commands.c's sends and reads move it, and the
 * session layer names what it just sent (a COPY FROM STDIN, a COMMIT not
 * waited for); afdw_forget_in_flight resets it with the rest of what is in
 * flight when the session goes.
 */
typedef enum AfdwInFlight
{
	AFDW_IN_FLIGHT_NONE,		/* nothing: the connection is idle */
	AFDW_IN_FLIGHT_PLAIN,		/* a command read as its results come */
	AFDW_IN_FLIGHT_COMMIT,		/* a COMMIT not waited for (remote_xact.c): its
								 * answer is read before the next use */
	AFDW_IN_FLIGHT_COPY_AWAITED,	/* a COPY FROM STDIN (afdw_send_write),
									 * its CopyInResponse still to come */
	AFDW_IN_FLIGHT_COPY_IN		/* it came: the COPY data is being sent */
} AfdwInFlight;

/*
 * Whether the state of a connection's remote transaction is known
 * (AfdwConn's xact_state): xact_depth says what is open while it is.
 * remote_xact.c moves it, one function per move (afdw_xact_changing,
 * afdw_xact_changed, xact_lost), and the session layer's reset
 * (its forget hook) sets it known again for a new session; the wire
 * only reads it, and tells the session layer a cut session through its
 * lost hook (AfdwSessionHooks).
 */
typedef enum AfdwXactState
{
	AFDW_XACT_KNOWN,			/* as xact_depth says: none (0), or open */
	AFDW_XACT_CHANGING,			/* a command that ends the transaction or
								 * a savepoint is in flight: until its
								 * answer the state is not known, and an
								 * error that cuts the wait short leaves
								 * it so */
	AFDW_XACT_LOST				/* not known: a cleanup failed or was not
								 * tried, or the session was cut; only a
								 * command that settles it (ROLLBACK
								 * PREPARED) makes it known again, else the
								 * connection is dropped at the end of the
								 * local transaction */
} AfdwXactState;

/*
 * The part of a connection in its user mapping's writes of the current local
 * transaction (AfdwConn's role): afdw_set_role (connection_pool.c) moves it
 * and asserts each move.  In a local transaction every write of a user mapping
 * goes through one connection of its pool, the writer; once it wrote, every
 * later command of the mapping goes through it too (connections that imported
 * the shared snapshot could not see the writes), and its COMMIT is waited for.
 */
typedef enum AfdwRole
{
	AFDW_ROLE_READER,			/* not the writer */
	AFDW_ROLE_WRITER,			/* chosen to write, wrote nothing yet: the
								 * role may still move to another
								 * connection */
	AFDW_ROLE_WROTE				/* the writer, and it wrote */
} AfdwRole;

/* A connection being opened: its handshake's state (connection_setup.c). */
typedef struct AfdwConnecting AfdwConnecting;

/* Hash key of a connection: a user mapping and a slot in its pool. */
typedef struct AfdwConnKey
{
	Oid			umid;
	int			slot;
} AfdwConnKey;

/*
 * One remote connection and the state of its remote transaction, which
 * afdw_reset_xact_state (remote_xact.c) resets.
 */
struct AfdwConn
{
	AfdwConnKey key;			/* hash key */
	PGconn	   *conn;			/* NULL when not connected */

	/*
	 * Not NULL while the connection is being opened (conn is then not
	 * NULL but not usable): afdw_connect_finish ends the handshake
	 * before any command is sent.
	 */
	AfdwConnecting *connecting;
	Oid			serverid;
	NameData	servername;		/* for messages */
	uint32		server_hash;	/* syscache hash values, for invalidation */
	uint32		mapping_hash;
	int			xact_depth;		/* 0: no remote transaction; 1: one is
								 * open; n > 1: savepoints s2 .. sn too */
	AfdwXactState xact_state;	/* whether xact_depth is known */
	bool		invalidated;	/* server or mapping changed: reconnect */
	bool		keep;			/* keep_connections */
	bool		parallel_commit;	/* parallel_commit: COMMIT sent with the
									 * others' at once, else alone, after
									 * the previous one's answer */
	bool		parallel_abort; /* parallel_abort: ABORT sent with the
								 * others' at once, else alone */
	int			keep_idle;		/* idle_connections: of the pool, how many
								 * stay open between transactions */
	int			idle_limit;		/* idle_timeout: ms after which the server
								 * is to close the session once idle, when
								 * it is not kept for good */
	int			idle_timeout;	/* ms after which the server closes the
								 * session once idle, as set (0: it does
								 * not; see afdw_append_idle_setting) */
	TimestampTz idle_since;		/* when the last local transaction that
								 * opened a remote one on it ended (0: one
								 * is open now, or none since it was opened):
								 * the remote idle timeout runs from then */
	Oid			userid;			/* the local user it was opened for */

	/*
	 * What stands between the session and the server, as the pooler option
	 * says or auto found (never AFDW_POOLER_AUTO once connected); and
	 * whether the server refused the options of a startup packet, which
	 * auto remembers across reconnections, in this entry and in slot 0's
	 * (read by afdw_pool_acquire), until the server or user mapping
	 * changes.
	 */
	AfdwPooler	pooler;
	bool		refuses_options;
	unsigned int cursor_number; /* last cursor number used in this xact */

	/*
	 * The cursors of the remote transaction, each with the local nesting
	 * level whose remote savepoint holds it; those no scan needs any more
	 * are closed by the next command that opens a cursor, or ended by the
	 * transaction or the rollback of their savepoint.
	 */
	struct RemoteCursor *cursors;
	int			ncursors;
	int			maxcursors;
	bool		locks_rows;		/* a scan of this transaction locks remote
								 * rows: its COMMIT is waited for (a fact
								 * of the transaction: afdw_note_row_locks
								 * sets it, afdw_reset_xact_state clears
								 * it) */
	bool		streaming;		/* a scan streams on it: not to be shared
								 * (a fact of the scan: afdw_set_streaming
								 * sets it, afdw_reset_xact_state clears
								 * it with the scans of the level) */
	char	   *savepoint_op;	/* RELEASE or ROLLBACK TO of the savepoint
								 * around the last stream, to send first
								 * with the next command */
	int			savepoint_level;	/* local nesting level it belongs to */
	int			nusers;			/* scans holding this connection */
	TimestampTz opened_at;		/* when the session was opened */

	/*
	 * The command in flight starts with a snapshot export (the transaction
	 * leader's, in the same send as its first command), whose result has
	 * not been read yet.  afdw_expect_export sets it, afdw_pop_result clears
	 * it when the export's result comes (afdw_get_result takes it in), and
	 * afdw_forget_in_flight with the session (all in remote_commands.c);
	 * held_result keeps an error that await_export read ahead of the
	 * export, for the owner.
	 */
	bool		export_pending;
	bool		pad_pending;	/* the row that pushes the export out is due */
	PGresult   *held_result;

	/*
	 * The command in flight opens the remote transaction with a marker
	 * (SELECT 1) and a wide row after it: the marker's result says that
	 * the server has taken the transaction's snapshot, and the wide row
	 * pushes it out at once (shared_snapshot.c marks the snapshots of a statement
	 * that the commit fence covers).  afdw_expect_marker sets it,
	 * afdw_pop_result clears it when the marker's result comes (showing it
	 * as a command's result, and expecting the wide row as pad_pending) or
	 * cannot come any more.
	 */
	bool		marker_pending;

	/*
	 * Every command of a scan runs in the savepoint afdw_ra, taken after
	 * the statements that open the transaction (the last of opening's), so
	 * that a failure of work the query may never need leaves the remote
	 * transaction usable: the savepoint is rolled back with the next
	 * command, and the scan raises the error only if it needs the rows.  A
	 * savepoint whose command succeeded is released with the next command,
	 * or ended by COMMIT at no cost.  A failure before the savepoint
	 * leaves the remote transaction failed: xact_failed_msg, NULL until
	 * then, is the message of the failure, xact_failed_state its SQLSTATE.
	 */
	AfdwWrap	wrap;

	/*
	 * How many results of the command in flight are still to come from
	 * the statements sent ahead of the caller's own: the start of the
	 * remote transaction with its snapshot, the savepoints of the local
	 * nesting level, a scan's SAVEPOINT afdw_ra.  A cancel that lands
	 * among them would abort the remote transaction, or leave a savepoint
	 * untaken that the local transaction counts on (afdw_cancel_harmless).
	 * Counted down as their results come; 0 after any failure or the end.
	 */
	int			opening;

	/*
	 * The command in flight ends with the COMMIT of the remote transaction
	 * it opened (afdw_send_in_xact), whose result has not come yet.
	 */
	bool		commit_rides;
	int			wrap_level;		/* local nesting level of the savepoint */
	char		xact_failed_state[6];
	char	   *xact_failed_msg;

	/*
	 * What is in flight (AFDW_IN_FLIGHT_NONE: nothing; else a command
	 * whose results are not all read yet).  Its owner, if still there,
	 * reads them through drain(); otherwise they are thrown away before
	 * the connection's next use.
	 */
	AfdwInFlight in_flight;
	void	   *owner;
	AfdwDrainFn drain;

	/*
	 * What waits on the socket: the latch, postmaster death and the socket,
	 * kept for the connection's life so that a wait costs one system call.
	 */
	WaitEventSet *waitset;
	pgsocket	waitset_sock;

	/*
	 * Statements prepared in the remote session (PreparedStatements by
	 * hash of their text), with their memory; names are afdw_s<number>
	 * and never used twice in a session.
	 */
	HTAB	   *prepared;
	MemoryContext prepared_cxt;
	unsigned int statement_number;

	/*
	 * The statement whose PREPARE is part of the command in flight (0:
	 * none), known to exist once its PREPARE's result comes in; and the
	 * "DEALLOCATE afdw_sN; " of statements no longer used, sent with a
	 * later command in a healthy remote transaction, or after the end of
	 * the remote transaction.  Prepared statements outlive transactions
	 * and rollbacks, so nothing else removes them.
	 */
	unsigned int preparing;
	char	   *preparing_sql;
	StringInfoData deallocs;

	/*
	 * How the remote server broke the protocol, once it did (the
	 * connection is then cut, and every later error on it says this).
	 */
	const char *violation;

	/*
	 * Slot 0 only: when the server last refused a further connection of
	 * the pool for lack of room (0: never), see open_or_share.
	 */
	TimestampTz refused_at;

	/*
	 * The server's message when it last refused this connection for lack
	 * of room (afdw_conn_cxt), for the error if no connection of the pool
	 * could be opened.
	 */
	char	   *refusal;

	/*
	 * The server whose connection budget (connection_budget.c) this connection is
	 * charged to (InvalidOid: none); and, while it sits idle with a remote
	 * idle timeout, the time past which it is not to be used again (0:
	 * not idle, or counted until closed).
	 */
	Oid			charged_server;
	TimestampTz idle_until;

	AfdwRole	role;			/* in its user mapping's writes (AfdwRole) */
	int			wrote_level;	/* AFDW_ROLE_WROTE: the outermost local
								 * nesting level that holds a write of it
								 * (a rollback to it undoes them all) */

	/*
	 * A write not sent yet, with what opens its remote transaction
	 * (afdw_defer_write): it goes with the COMMIT, or alone before any
	 * other command on the connection.
	 */
	char	   *deferred;
	char	   *deferred_sent;	/* the one sent with the COMMIT, for its
								 * error's context */

	/*
	 * The global identifier of its remote transaction once two-phase commit
	 * sent its PREPARE (twophase.c), until COMMIT or ROLLBACK PREPARED is
	 * sent after the local transaction.
	 */
	char	   *prepared_gid;

	/*
	 * Two-phase commit (twophase.c): the server option two_phase_commit
	 * (an AfdwTwoPhase, -1 when not set), and whether the session's server
	 * takes PREPARE TRANSACTION (its max_prepared_transactions is not 0): 1
	 * yes, 0 no, -1 not known yet.  Learned once per session, when a
	 * PREPARE succeeds or fails for that reason, or asked at the first
	 * commit that auto must decide on.
	 */
	int			two_phase;
	int			can_prepare;
};

/*
 * How long cleanup may wait for remote servers: after an abort, for all of
 * them together (remote_xact.c); for the answer to a COMMIT that was not waited
 * for, for one (connection_pool.c).
 */
#define AFDW_CLEANUP_TIMEOUT_MS		30000

/*
 * What the wire (connection_setup.c, connection_pool.c, remote_commands.c)
 * tells the session layer (remote_xact.c, shared_snapshot.c,
 * prepared_statements.c, twophase.c) above it, which it cannot call: the
 * session hands these to afdw_connection_init before the first connection
 * exists (remote_xact.c), so every connection has them.
 *
 * result: RES is the next result of CONN's command in flight (NULL: its
 * end), whoever reads it: the session follows the commands it sent ahead of
 * the caller's (the savepoint around a scan's command, a PREPARE).
 * export: RES is the result of the snapshot export that rode ahead of
 * CONN's command, to keep (it frees RES); with RAISE an unusable one raises
 * an error, else it returns false.
 * forget: CONN's remote session is gone or about to be opened: what the
 * session layer kept of the one before (its remote transaction and its
 * state, prepared statements, a deferred write, a prepared transaction's
 * name) is over.
 * lost: CONN's remote session was cut (break_connection, remote_commands.c):
 * the state of its remote transaction is not known any more.
 */
typedef struct AfdwSessionHooks
{
	void		(*result) (AfdwConn *conn, PGresult *res);
	bool		(*export) (AfdwConn *conn, PGresult *res, bool raise);
	void		(*forget) (AfdwConn *conn);
	void		(*lost) (AfdwConn *conn);
} AfdwSessionHooks;

/* connection_state.c */

/*
 * All connections of this backend.  The hash and its entries live in
 * TopMemoryContext's child "async_fdw connections" (afdw_conn_cxt), with
 * what the connections keep, because connections outlive transactions;
 * entries are never removed, so pointers to them stay valid.
 */
extern HTAB *afdw_conn_hash;
extern MemoryContext afdw_conn_cxt;
extern const AfdwSessionHooks *afdw_session_hooks;

extern void afdw_make_conn_hash(const AfdwSessionHooks *hooks);
extern AfdwConn *afdw_slot_zero(Oid umid);

/* connection_budget.c */
extern bool afdw_budget_charge(AfdwConn *entry, ForeignServer *server,
							   bool optional);
extern void afdw_budget_release(AfdwConn *entry);
extern void afdw_budget_finish(AfdwConn *entry);
extern void afdw_budget_idle(AfdwConn *entry, int idle_timeout_ms);
extern bool afdw_budget_idle_expired(AfdwConn *entry);
extern void afdw_budget_in_use(AfdwConn *entry);
extern bool afdw_budget_wanted(Oid serverid);

/* connection_pool.c */
extern void afdw_connection_init(const AfdwSessionHooks *hooks);
extern AfdwConn *afdw_pool_acquire(UserMapping *user);
extern AfdwConn *afdw_find_writer(Oid umid);
extern void afdw_take_open(AfdwConn *entry);

extern bool afdw_connection_alive(AfdwConn *entry);
extern void afdw_set_role(AfdwConn *conn, AfdwRole role);
extern void afdw_trim_idle_pools(void);
extern void afdw_append_idle_setting(AfdwConn *entry, StringInfo sql);
extern bool afdw_idle_setting_changes(AfdwConn *entry);

/* prepared_statements.c */
extern void afdw_note_prepare(AfdwConn *conn, PGresult *res);
extern void afdw_append_deallocs(AfdwConn *entry, StringInfo sql);
extern void afdw_forget_statements(AfdwConn *entry);

/* connection_setup.c */
extern void afdw_connect_start(AfdwConn *entry, UserMapping *user,
							   bool optional);
extern void afdw_connect_forget(AfdwConn *entry);
extern void afdw_disconnect_entry(AfdwConn *entry);
extern bool afdw_room_wanted(AfdwConn *entry);
extern void afdw_append_xact_settings(StringInfo sql);

/* remote_commands.c */
extern bool afdw_cleanup_past_cancel(bool on);
extern bool afdw_wait_cleanup(AfdwConn *entry, TimestampTz deadline,
							  bool ignore_errors, char *failed_state);
extern bool afdw_cleanup_step(AfdwConn *entry, TimestampTz deadline);
extern bool afdw_copy_abandon(AfdwConn *entry, TimestampTz deadline);
extern PGresult *afdw_pop_result(AfdwConn *conn, bool *is_export);
extern void afdw_set_in_flight(AfdwConn *conn, AfdwInFlight state);
extern void afdw_forget_in_flight(AfdwConn *conn);
extern bool afdw_send_cleanup(AfdwConn *entry, const char *sql);
extern void afdw_expect_export(AfdwConn *conn);
extern void afdw_expect_marker(AfdwConn *conn);

/* shared_snapshot.c */
extern bool afdw_store_export(AfdwConn *conn, PGresult *res);
extern void afdw_take_export(AfdwConn *conn, PGresult *res);
extern void afdw_share_snapshot(AfdwConn *entry, bool nested, StringInfo sql);
extern void afdw_forget_snapshots(void);
extern void afdw_snapshot_ended(AfdwConn *conn);
extern AfdwConn *afdw_snapshot_leader(Oid serverid, Oid umid);
extern bool afdw_snapshot_exporter(AfdwConn *conn);
extern void afdw_pass_leadership(AfdwConn *gone, AfdwConn *heir);
extern bool afdw_snapshot_is_new(AfdwConn *conn);
extern void afdw_snapshot_note_floor(bool nested);
extern bool afdw_snapshot_check_wanted(bool mixes);
extern bool afdw_snapshot_start_checked(AfdwConn *entry);
extern void afdw_snapshot_marking(bool on);
extern List *afdw_snapshot_marked(void);
extern bool afdw_snapshot_await_taken(AfdwConn *leader, TimestampTz deadline);
extern bool afdw_snapshot_floor(uint64 *floor);
extern void afdw_snapshot_check(AfdwConn *conn, uint64 floor);

/* twophase.c */
extern void afdw_twophase_prepare(void);
extern void afdw_fence_commit(List *writers, bool publish_now);
extern void afdw_twophase_end(bool committed);

/* remote_xact.c */
extern void afdw_reset_xact_state(AfdwConn *entry, int level);
extern void afdw_xact_changing(AfdwConn *entry);
extern void afdw_xact_changed(AfdwConn *entry);
extern void afdw_xact_lost(AfdwConn *entry);
extern void afdw_drop_deferred(AfdwConn *entry);
extern void afdw_forget_savepoint_op(AfdwConn *entry, int level);
extern void afdw_forget_closes(AfdwConn *entry);
extern void afdw_cursors_to_level(AfdwConn *entry, int level);
extern void afdw_set_xact_callbacks(XactCallback xact, SubXactCallback subxact);
extern bool afdw_xact_got_connection(void);
extern void afdw_xact_forget_use(void);

#endif							/* CONNECTION_INTERNAL_H */
