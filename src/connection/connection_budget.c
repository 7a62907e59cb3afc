/*-------------------------------------------------------------------------
 *
 * connection_budget.c
 *		The connection budget of async_fdw: how many connections all the
 *		backends of this server together hold to each remote server, in
 *		shared memory, when async_fdw is in shared_preload_libraries.
 *
 * Each remote server (per database) has an entry in a shared hash with the
 * connections charged to it, the backends waiting for room and a condition
 * variable they sleep on.  The pool charges one unit before it opens a
 * connection and gives it back when the connection closes.  A required
 * connection (the first of a pool) waits for room; an optional one is
 * opened only when there is room and nobody waits, else its scan shares.
 *
 * A connection left idle after its transaction with a remote
 * idle_session_timeout is closed by the remote server while its backend
 * runs no code, so its backend cannot give its unit back: the backend
 * records in shared memory (its own slot of an array indexed by backend
 * id) until when it may still use such connections, and past that time the
 * others no longer count them.  The backend never uses one again past that
 * time.
 *
 * Without preloading nothing here is set up and every call is a no-op that
 * allows the connection: point 1 of the pool (optional connections shared
 * when the server refuses them) still holds.
 *
 * A unit stands for a place on the remote server, so a connection that
 * holds one is closed by afdw_budget_finish, which waits for the remote
 * backend to exit before the unit is given back: a backend that takes the
 * unit at once finds the place free, not still held by an exiting process.
 *
 * Neighbours: connection_pool.c (the pool) calls afdw_budget_charge,
 * afdw_budget_finish, afdw_budget_release and the idle calls, and reads
 * afdw_budget_wanted at the end of a transaction; async_fdw.c calls
 * afdw_budget_preload from _PG_init; connection_functions.c shows the figures
 * through afdw_budget_figures.  It sees struct AfdwConn through
 * connection_internal.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

/* Servers with a budget, at most; past them a server has none. */
#define AFDW_BUDGET_SERVERS		1024

/* Servers per backend whose idle connections expire by time, at most. */
#define AFDW_BUDGET_IDLE_SLOTS	4

/*
 * How long a waiter sleeps before it counts again: idle connections
 * expire by time, which nobody signals.
 */
#define AFDW_BUDGET_RECHECK_MS	100

/*
 * Past the remote idle_session_timeout, how long before an idle
 * connection's unit counts as free: the remote backend needs a moment to
 * exit and free its place.
 */
#define AFDW_BUDGET_IDLE_MARGIN_MS	250

/*
 * How long the closing of connections that hold units waits, at most, for
 * their remote backends to exit before the units are given back anyway (a
 * remote server that does not answer).
 */
#define AFDW_BUDGET_CLOSE_WAIT_MS	1000

/* A server of a database. */
typedef struct BudgetKey
{
	Oid			dbid;
	Oid			serverid;
} BudgetKey;

/* The shared state of one server. */
typedef struct BudgetEntry
{
	BudgetKey	key;			/* hash key */
	int			charged;		/* connections open or opening */
	int			idle_recorded;	/* of them, idle ones in backends' records */
	int			waiting;		/* backends waiting for a required one */
	ConditionVariable room;		/* broadcast when a unit comes back */
} BudgetEntry;

/*
 * What one backend left idle on one server with a remote idle timeout:
 * COUNT connections, all closed by the remote server by UNTIL (margin
 * included).
 */
typedef struct BudgetIdle
{
	BudgetKey	key;
	int			count;			/* 0: the slot is free */
	TimestampTz until;
} BudgetIdle;

/* The shared memory of the budget, besides the hash. */
typedef struct BudgetShared
{
	LWLock	   *lock;			/* guards the hash, the entries, the records */
	bool		full_logged;	/* the hash filled up, and the log says so */
	BudgetIdle	idle[FLEXIBLE_ARRAY_MEMBER];	/* MaxBackends slots of
												 * AFDW_BUDGET_IDLE_SLOTS */
} BudgetShared;

static BudgetShared *budget = NULL;
static HTAB *budget_hash = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static bool exit_registered = false;

/*
 * The entry this backend waits on, if any, for the exit callback: a
 * FATAL error (pg_terminate_backend) exits without unwinding the wait.
 */
static BudgetEntry *waiting_on = NULL;

static void budget_shmem_request(void);
static void budget_shmem_startup(void);
static Size budget_shared_size(void);
static BudgetEntry *budget_entry(Oid serverid, bool create);
static int	budget_limit(ForeignServer *server);
static int	budget_usage(BudgetEntry *e, TimestampTz now, int *expiring);
static BudgetIdle *my_idle_slot(BudgetKey *key, bool create);
static void budget_at_exit(int code, Datum arg);
static int	finish_keeping_socket(AfdwConn *entry);
static void await_remote_exits(int *socks, int n);

/*
 * afdw_budget_preload
 *		Ask for the shared memory of the budget, when async_fdw is being
 *		preloaded; otherwise there is no budget.
 */
void
afdw_budget_preload(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = budget_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = budget_shmem_startup;
}

/*
 * budget_shared_size
 *		Bytes of BudgetShared with every backend's idle records.
 */
static Size
budget_shared_size(void)
{
	return add_size(offsetof(BudgetShared, idle),
					mul_size(sizeof(BudgetIdle),
							 mul_size(MaxBackends, AFDW_BUDGET_IDLE_SLOTS)));
}

/*
 * budget_shmem_request
 *		Reserve the budget's shared memory and its lock.
 */
static void
budget_shmem_request(void)
{
	if (prev_shmem_request_hook != NULL)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(MAXALIGN(budget_shared_size()),
									hash_estimate_size(AFDW_BUDGET_SERVERS,
													   sizeof(BudgetEntry))));
	RequestNamedLWLockTranche("async_fdw budget", 1);
}

/*
 * budget_shmem_startup
 *		Create or attach to the budget's shared memory.
 */
static void
budget_shmem_startup(void)
{
	HASHCTL		ctl;
	bool		found;

	if (prev_shmem_startup_hook != NULL)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	budget = ShmemInitStruct("async_fdw budget", budget_shared_size(), &found);
	if (!found)
	{
		memset(budget, 0, budget_shared_size());
		budget->lock = &(GetNamedLWLockTranche("async_fdw budget"))->lock;
	}
	ctl.keysize = sizeof(BudgetKey);
	ctl.entrysize = sizeof(BudgetEntry);
	budget_hash = ShmemInitHash("async_fdw budget servers",
								AFDW_BUDGET_SERVERS, AFDW_BUDGET_SERVERS,
								&ctl, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * afdw_budget_active
 *		Whether async_fdw was preloaded, so that the budget holds.
 */
bool
afdw_budget_active(void)
{
	return budget != NULL;
}

/*
 * budget_entry
 *		The entry of SERVERID in this database, made if CREATE; NULL if it
 *		has none (and the hash is full).  The caller holds the lock, in
 *		exclusive mode if CREATE.
 */
static BudgetEntry *
budget_entry(Oid serverid, bool create)
{
	BudgetKey	key;
	BudgetEntry *e;
	bool		found;

	key.dbid = MyDatabaseId;
	key.serverid = serverid;
	e = hash_search(budget_hash, &key, create ? HASH_ENTER_NULL : HASH_FIND,
					&found);
	if (e == NULL && create && !budget->full_logged)
	{
		budget->full_logged = true;
		ereport(LOG,
				(errmsg("async_fdw has no connection budget for server %u: budgets for %d servers are in use",
						serverid, AFDW_BUDGET_SERVERS),
				 errdetail("Servers past that number are used without a budget until the server restarts.")));
	}
	if (e != NULL && !found)
	{
		e->charged = 0;
		e->idle_recorded = 0;
		e->waiting = 0;
		ConditionVariableInit(&e->room);
	}
	return e;
}

/*
 * budget_limit
 *		SERVER's budget: its max_shared_connections option, else this
 *		server's max_connections (0: no budget).
 */
static int
budget_limit(ForeignServer *server)
{
	return afdw_int_option(server->options, "max_shared_connections",
						   MaxConnections);
}

/*
 * budget_usage
 *		How many of E's connections count against the budget at NOW: those
 *		charged, less the idle ones whose remote timeout has closed them.
 *		EXPIRING, if not NULL, gets how many idle ones still count but will
 *		expire.  The caller holds the lock.
 */
static int
budget_usage(BudgetEntry *e, TimestampTz now, int *expiring)
{
	int			expired = 0;
	int			pending = 0;

	if (e->idle_recorded > 0)
	{
		int			n = MaxBackends * AFDW_BUDGET_IDLE_SLOTS;

		for (int i = 0; i < n; i++)
		{
			BudgetIdle *rec = &budget->idle[i];

			if (rec->count == 0 || rec->key.serverid != e->key.serverid ||
				rec->key.dbid != e->key.dbid)
				continue;
			if (rec->until <= now)
				expired += rec->count;
			else
				pending += rec->count;
		}
	}
	if (expiring != NULL)
		*expiring = pending;
	return e->charged - expired;
}

/*
 * afdw_budget_charge
 *		Charge one unit of SERVER's budget for ENTRY, which is about to
 *		connect; false if an OPTIONAL connection may not be opened now.
 *
 * An optional connection needs room and no backend waiting for a required
 * one, which comes first.  A required one waits for room, as long as the
 * statement lets it (statement_timeout and cancel end the wait with their
 * usual errors), showing the wait event Extension in pg_stat_activity.
 */
bool
afdw_budget_charge(AfdwConn *entry, ForeignServer *server, bool optional)
{
	int			limit = budget_limit(server);
	BudgetEntry *e;

	Assert(!OidIsValid(entry->charged_server));
	if (budget == NULL)
		return true;

	if (!exit_registered)
	{
		before_shmem_exit(budget_at_exit, (Datum) 0);
		exit_registered = true;
	}

	LWLockAcquire(budget->lock, LW_EXCLUSIVE);
	e = budget_entry(server->serverid, true);
	if (e == NULL)
	{
		LWLockRelease(budget->lock);
		return true;
	}
	if (limit <= 0 ||
		(budget_usage(e, GetCurrentTimestamp(), NULL) < limit &&
		 (e->waiting == 0 || !optional)))
	{
		e->charged++;
		entry->charged_server = server->serverid;
		LWLockRelease(budget->lock);
		return true;
	}
	if (optional)
	{
		LWLockRelease(budget->lock);
		return false;
	}

	/*
	 * A required connection waits.  The count of waiters goes back down
	 * on an error too (cancel, statement_timeout), so that optional
	 * connections are not refused for a waiter that left.
	 */
	e->waiting++;
	waiting_on = e;
	LWLockRelease(budget->lock);

	PG_TRY();
	{
		for (;;)
		{
			ConditionVariableTimedSleep(&e->room, AFDW_BUDGET_RECHECK_MS,
										afdw_wait_event(AFDW_WAIT_BUDGET));
			CHECK_FOR_INTERRUPTS();

			/*
			 * The budget stays the one read when the wait began: a change
			 * of the option counts from the next connection on.
			 */
			LWLockAcquire(budget->lock, LW_EXCLUSIVE);
			if (limit <= 0 ||
				budget_usage(e, GetCurrentTimestamp(), NULL) < limit)
			{
				e->waiting--;
				waiting_on = NULL;
				e->charged++;
				entry->charged_server = server->serverid;
				LWLockRelease(budget->lock);
				break;
			}
			LWLockRelease(budget->lock);
		}
	}
	PG_CATCH();
	{
		ConditionVariableCancelSleep();
		if (waiting_on != NULL)
		{
			LWLockAcquire(budget->lock, LW_EXCLUSIVE);
			e->waiting--;
			waiting_on = NULL;
			LWLockRelease(budget->lock);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();
	ConditionVariableCancelSleep();
	return true;
}

/*
 * my_idle_slot
 *		This backend's idle record of KEY, or a free one if CREATE; NULL if
 *		there is none.  The caller holds the lock.
 */
static BudgetIdle *
my_idle_slot(BudgetKey *key, bool create)
{
	BudgetIdle *mine = &budget->idle[afdw_backend_slot() * AFDW_BUDGET_IDLE_SLOTS];
	BudgetIdle *free_slot = NULL;

	Assert(afdw_backend_slot() >= 0 && afdw_backend_slot() < MaxBackends);
	for (int i = 0; i < AFDW_BUDGET_IDLE_SLOTS; i++)
	{
		if (mine[i].count > 0 && mine[i].key.dbid == key->dbid &&
			mine[i].key.serverid == key->serverid)
			return &mine[i];
		if (mine[i].count == 0 && free_slot == NULL)
			free_slot = &mine[i];
	}
	return create ? free_slot : NULL;
}

/*
 * forget_idle
 *		ENTRY, recorded as idle, is used again or closed: it leaves its
 *		backend's record.  The caller holds the lock.
 */
static void
forget_idle(AfdwConn *entry)
{
	BudgetKey	key;
	BudgetIdle *rec;
	BudgetEntry *e;

	key.dbid = MyDatabaseId;
	key.serverid = entry->charged_server;
	rec = my_idle_slot(&key, false);
	e = budget_entry(entry->charged_server, false);
	if (rec != NULL)
		rec->count--;
	if (e != NULL && e->idle_recorded > 0)
		e->idle_recorded--;
	entry->idle_until = 0;
}

/*
 * afdw_budget_release
 *		Give back ENTRY's unit, if it has one: its connection closed or
 *		never opened.
 */
void
afdw_budget_release(AfdwConn *entry)
{
	BudgetEntry *e;

	if (!OidIsValid(entry->charged_server))
		return;
	Assert(budget != NULL);
	LWLockAcquire(budget->lock, LW_EXCLUSIVE);
	if (entry->idle_until != 0)
		forget_idle(entry);
	e = budget_entry(entry->charged_server, false);
	if (e != NULL && e->charged > 0)
		e->charged--;

	/*
	 * The waiters are woken under the lock.  An entry that counts nothing
	 * and that no backend waits on goes, so that the servers dropped and
	 * created over time do not fill the table: a waiter counts itself in
	 * before it sleeps on the entry, and every other use of it is under the
	 * lock.
	 */
	if (e != NULL && e->waiting > 0)
		ConditionVariableBroadcast(&e->room);
	else if (e != NULL && e->charged == 0 && e->idle_recorded == 0)
		(void) hash_search(budget_hash, &e->key, HASH_REMOVE, NULL);
	LWLockRelease(budget->lock);
	entry->charged_server = InvalidOid;
}

/*
 * afdw_budget_idle
 *		ENTRY stays open idle after its transaction, and the remote server
 *		closes it once idle for IDLE_TIMEOUT_MS: past that (and a margin)
 *		the other backends no longer count its unit.
 */
void
afdw_budget_idle(AfdwConn *entry, int idle_timeout_ms)
{
	BudgetKey	key;
	BudgetIdle *rec;
	TimestampTz until;

	if (!OidIsValid(entry->charged_server) || entry->idle_until != 0)
		return;
	until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										idle_timeout_ms);
	key.dbid = MyDatabaseId;
	key.serverid = entry->charged_server;
	LWLockAcquire(budget->lock, LW_EXCLUSIVE);
	rec = my_idle_slot(&key, true);

	/*
	 * Without a free record the unit keeps counting until the backend
	 * finds the connection closed: the budget errs on the safe side.
	 */
	if (rec != NULL)
	{
		BudgetEntry *e = budget_entry(entry->charged_server, false);
		TimestampTz shared_until = TimestampTzPlusMilliseconds(until,
															   AFDW_BUDGET_IDLE_MARGIN_MS);

		if (rec->count == 0 || rec->until < shared_until)
			rec->until = shared_until;
		rec->key = key;
		rec->count++;
		if (e != NULL)
			e->idle_recorded++;
		entry->idle_until = until;
	}
	LWLockRelease(budget->lock);
}

/*
 * afdw_budget_idle_expired
 *		Whether ENTRY, left idle, is past the time after which others no
 *		longer count it: it must not be used again, only closed.
 */
bool
afdw_budget_idle_expired(AfdwConn *entry)
{
	return entry->idle_until != 0 && GetCurrentTimestamp() >= entry->idle_until;
}

/*
 * afdw_budget_in_use
 *		ENTRY, maybe left idle, is used again: its unit counts again until
 *		it is closed.  Called before its expiry (afdw_budget_idle_expired),
 *		so that others have not stopped counting it.
 */
void
afdw_budget_in_use(AfdwConn *entry)
{
	if (entry->idle_until == 0)
		return;
	LWLockAcquire(budget->lock, LW_EXCLUSIVE);
	forget_idle(entry);
	LWLockRelease(budget->lock);
}

/*
 * afdw_budget_wanted
 *		Whether a backend waits for room on SERVERID, so that idle
 *		connections to it should be closed now.
 */
bool
afdw_budget_wanted(Oid serverid)
{
	BudgetEntry *e;
	bool		wanted;

	if (budget == NULL)
		return false;
	LWLockAcquire(budget->lock, LW_SHARED);
	e = budget_entry(serverid, false);
	wanted = (e != NULL && e->waiting > 0);
	LWLockRelease(budget->lock);
	return wanted;
}

/*
 * afdw_budget_figures
 *		SERVER's budget (0: none), and, if preloaded (else false), its
 *		connections counted now, the idle ones of them that will expire by
 *		time, and the backends waiting for room.
 */
bool
afdw_budget_figures(ForeignServer *server, int *limit, int *held,
					int *idle_expiring, int *waiting)
{
	BudgetEntry *e;

	*limit = budget_limit(server);
	*held = *idle_expiring = *waiting = 0;
	if (budget == NULL)
		return false;
	LWLockAcquire(budget->lock, LW_SHARED);
	e = budget_entry(server->serverid, false);
	if (e != NULL)
	{
		*held = budget_usage(e, GetCurrentTimestamp(), idle_expiring);
		*waiting = e->waiting;
	}
	LWLockRelease(budget->lock);
	return true;
}

/*
 * afdw_budget_finish
 *		Close ENTRY's connection (entry->conn becomes NULL).  When it holds a
 *		unit of the budget, return only once the remote backend has exited
 *		(at most AFDW_BUDGET_CLOSE_WAIT_MS), so that the unit the caller
 *		gives back next stands for a place the remote server has freed:
 *		another backend that takes it at once must not find the server full.
 */
void
afdw_budget_finish(AfdwConn *entry)
{
	int			sock;

	if (entry->conn == NULL)
		return;
	sock = finish_keeping_socket(entry);
	if (sock >= 0)
		await_remote_exits(&sock, 1);
}

/*
 * finish_keeping_socket
 *		PQfinish ENTRY's connection.  If it holds a unit and stands idle
 *		between commands, first keep a duplicate of its socket, returned
 *		(else -1): libpq's Terminate message ends the remote backend, and the
 *		server closes its end of the socket last, when the backend's process
 *		exits, after it has left the server's count of clients.
 *
 * A connection busy with a command, or broken, is closed at once: its
 * remote backend leaves when it notices, which nobody here can wait for
 * without holding up an error or a cancel.  But not one whose command in
 * flight is the COMMIT of a transaction that only read, sent with the
 * statement's last command or at the local commit and not waited for:
 * its answer comes at once, then the Terminate is read, and closing it at
 * once gave the unit back while the remote backend still counted (the
 * budget test saw 11 connections under a budget of 10).
 */
static int
finish_keeping_socket(AfdwConn *entry)
{
	int			sock = -1;

	if (OidIsValid(entry->charged_server) &&
		PQstatus(entry->conn) == CONNECTION_OK &&
		(PQtransactionStatus(entry->conn) != PQTRANS_ACTIVE ||
		 entry->in_flight == AFDW_IN_FLIGHT_COMMIT) &&
		PQsocket(entry->conn) >= 0)
		sock = dup(PQsocket(entry->conn));	/* -1 on failure: no wait */
	PQfinish(entry->conn);
	entry->conn = NULL;
	return sock;
}

/*
 * await_remote_exits
 *		Read and drop what comes on the N sockets SOCKS until each reports
 *		its end (or an error), or AFDW_BUDGET_CLOSE_WAIT_MS have passed;
 *		then close them all.  Signals do not end the wait early: it runs at
 *		the end of a transaction and at backend exit, where an error cannot
 *		be raised, and it is bounded.
 */
static void
await_remote_exits(int *socks, int n)
{
	struct pollfd fds[64];
	TimestampTz start = GetCurrentTimestamp();
	int			open = 0;

	Assert(n <= (int) lengthof(fds));
	for (int i = 0; i < n; i++)
	{
		fds[i].fd = socks[i];
		fds[i].events = POLLIN;
		if (socks[i] >= 0)
			open++;
		else
			fds[i].fd = -1;		/* poll skips it */
	}
	while (open > 0)
	{
		long		left = AFDW_BUDGET_CLOSE_WAIT_MS -
			TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());
		int			ready;

		if (left <= 0)
			break;
		ready = poll(fds, n, (int) left);
		if (ready < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n && ready > 0; i++)
		{
			char		drop[512];
			ssize_t		got;

			if (fds[i].fd < 0 || fds[i].revents == 0)
				continue;
			got = recv(fds[i].fd, drop, sizeof(drop), MSG_DONTWAIT);
			if (got > 0 || (got < 0 && (errno == EAGAIN ||
										errno == EWOULDBLOCK ||
										errno == EINTR)))
				continue;
			/* Its end (0) or an error: the remote side is gone. */
			close(fds[i].fd);
			fds[i].fd = -1;
			open--;
		}
	}
	for (int i = 0; i < n; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
}

/*
 * budget_at_exit
 *		Give back every unit of the exiting backend.  The connections are
 *		closed first, so that their places on the remote servers are free
 *		by the time others may take them.
 */
static void
budget_at_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *entry;
	int			socks[64];
	int			nsocks = 0;
	int			sock;

	if (waiting_on != NULL)
	{
		LWLockAcquire(budget->lock, LW_EXCLUSIVE);
		waiting_on->waiting--;
		waiting_on = NULL;
		LWLockRelease(budget->lock);
	}
	if (afdw_conn_hash == NULL)
		return;

	/*
	 * Close every connection, then wait for their remote backends to exit
	 * all at once, then give back every unit.
	 */
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (entry->conn == NULL)
			continue;
		sock = finish_keeping_socket(entry);
		if (sock < 0)
			continue;
		if (nsocks == lengthof(socks))
		{
			await_remote_exits(socks, nsocks);
			nsocks = 0;
		}
		socks[nsocks++] = sock;
	}
	await_remote_exits(socks, nsocks);
	hash_seq_init(&scan, afdw_conn_hash);
	while ((entry = (AfdwConn *) hash_seq_search(&scan)) != NULL)
		afdw_budget_release(entry);
}
