/*-------------------------------------------------------------------------
 *
 * commit_fence.c
 *		The commit fence: reads of several servers never see part of a
 *		transaction that committed on several servers through this
 *		coordinator, when async_fdw is in shared_preload_libraries.
 *
 * A transaction that wrote on several servers commits on each in turn
 * (COMMIT PREPARED, or COMMIT without two-phase commit), and for a moment
 * one server shows its writes and another does not.  A reader that takes
 * its snapshots of two servers in that moment sees half of it.  The fence
 * keeps the two apart, in shared memory:
 *
 * - A committer holds it from before its first remote commit is sent until
 *   the last one has answered.
 * - A statement that takes snapshots of several servers at once holds it
 *   from before it sends their first commands until every one of them has
 *   taken its snapshot (shared_snapshot.c's marker).
 *
 * Committers hold it together, and so do readers; a committer and a reader
 * never do.  Neither side starves the other: while one side holds it and
 * the other waits, newcomers of the holding side wait too, and when the
 * holders leave, the waiters of the other side get tickets to enter.
 *
 * Snapshots taken at different moments (a server first read by a later
 * statement of a REPEATABLE READ transaction) cannot be fenced together:
 * they are checked instead.  Each committer takes a number from a sequence
 * when it enters, and records it, before sending any commit, in the slot of
 * each server it commits on (servers hash into a fixed array of slots;
 * two servers sharing a slot only make the check more cautious).  A
 * transaction notes the floor of the sequence when it takes its first
 * snapshots: every commit numbered at or below it was over by then.  A
 * server whose slot, read once its snapshot is taken, holds a larger number
 * may show a commit that the earlier snapshots do not: the reader fails
 * with a serialization failure (shared_snapshot.c decides when to check).
 *
 * Without preloading nothing here is set up, nothing is fenced, and a
 * backend that commits on several servers says so in the log once.
 *
 * Neighbours: async_fdw.c calls afdw_fence_preload and afdw_fence_init
 * from _PG_init; shared_snapshot.c fences and checks readers; twophase.c and
 * xact_callbacks.c fence committers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "async_fdw.h"

/* Slots of servers' last commit numbers (a power of two). */
#define AFDW_FENCE_SLOTS		1024

/* How long a waiter sleeps before it looks again (a waiter that left). */
#define AFDW_FENCE_RECHECK_MS	50

/* The shared state of the fence. */
typedef struct FenceShared
{
	slock_t		mutex;			/* guards the counters below */
	int			active[2];		/* holders, per side (AfdwFenceSide) */
	int			waiting[2];		/* waiters, per side */
	int			tickets[2];		/* waiters let in past the other side's */
	uint64		last_number;	/* the last number a committer took */
	uint64		floor;			/* while committers hold it: every number
								 * at or below is over */
	ConditionVariable turn;		/* broadcast when holders leave */
	pg_atomic_uint64 slots[AFDW_FENCE_SLOTS];	/* a server's last number */
} FenceShared;

static FenceShared *fence = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* async_fdw.atomic_visibility */
static bool atomic_visibility = true;

/* The side this backend holds the fence on, or -1, and its number. */
static int	held_side = -1;
static uint64 held_number = 0;
static bool exit_registered = false;
static bool unfenced_logged = false;

static void fence_shmem_request(void);
static void fence_shmem_startup(void);
static void fence_at_exit(int code, Datum arg);
static void stop_waiting(AfdwFenceSide side, bool counted);
static int	slot_of(Oid serverid);

/*
 * afdw_fence_init
 *		Define async_fdw.atomic_visibility.
 */
void
afdw_fence_init(void)
{
	DefineCustomBoolVariable("async_fdw.atomic_visibility",
							 "Keeps reads of several servers from seeing part of a transaction that committed on several servers.",
							 "Works when async_fdw is in shared_preload_libraries. Off: commits and reads are not fenced.",
							 &atomic_visibility,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
}

/*
 * afdw_fence_preload
 *		Ask for the fence's shared memory, when async_fdw is being
 *		preloaded; otherwise there is no fence.
 */
void
afdw_fence_preload(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = fence_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = fence_shmem_startup;
}

/*
 * fence_shmem_request
 *		Reserve the fence's shared memory.
 */
static void
fence_shmem_request(void)
{
	if (prev_shmem_request_hook != NULL)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(FenceShared)));
}

/*
 * fence_shmem_startup
 *		Create or attach to the fence's shared memory.
 */
static void
fence_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook != NULL)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	fence = ShmemInitStruct("async_fdw commit fence", sizeof(FenceShared), &found);
	if (!found)
	{
		memset(fence, 0, sizeof(FenceShared));
		SpinLockInit(&fence->mutex);
		ConditionVariableInit(&fence->turn);
		for (int i = 0; i < AFDW_FENCE_SLOTS; i++)
			pg_atomic_init_u64(&fence->slots[i], 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * afdw_fence_active
 *		Whether commits and reads are fenced: preloaded, and the setting on.
 */
bool
afdw_fence_active(void)
{
	return fence != NULL && atomic_visibility;
}

/*
 * afdw_fence_state
 *		Whether this backend's commits on several servers, and its reads of
 *		several servers, go through the fence, or why they do not: async_fdw
 *		is not in shared_preload_libraries, or async_fdw.atomic_visibility
 *		is off.
 */
AfdwFenceState
afdw_fence_state(void)
{
	if (fence == NULL)
		return AFDW_FENCE_NOT_PRELOADED;
	if (!atomic_visibility)
		return AFDW_FENCE_TURNED_OFF;
	return AFDW_FENCE_ON;
}

/*
 * afdw_fence_state_name
 *		STATE as async_fdw_get_connections() and EXPLAIN show it: "on", "not
 *		preloaded", "turned off".
 */
const char *
afdw_fence_state_name(AfdwFenceState state)
{
	switch (state)
	{
		case AFDW_FENCE_ON:
			return "on";
		case AFDW_FENCE_NOT_PRELOADED:
			return "not preloaded";
		case AFDW_FENCE_TURNED_OFF:
			return "turned off";
	}
	return "unknown";			/* keep the compiler quiet */
}

/*
 * afdw_fence_note_unfenced
 *		A commit on several servers goes without the fence: say so in the
 *		log, once per backend, with the reason afdw_fence_state gives.
 */
void
afdw_fence_note_unfenced(void)
{
	if (unfenced_logged)
		return;
	unfenced_logged = true;
	ereport(LOG,
			(errmsg("async_fdw commits a transaction on several servers without the commit fence"),
			 errdetail(afdw_fence_state() == AFDW_FENCE_NOT_PRELOADED ?
					   "async_fdw is not in shared_preload_libraries." :
					   "async_fdw.atomic_visibility is off."),
			 errhint("Reads of several servers may see part of such a transaction.")));
}

/*
 * slot_of
 *		The slot of SERVERID (of this database) in the fence's array.
 */
static int
slot_of(Oid serverid)
{
	uint32		h = hash_combine(murmurhash32((uint32) MyDatabaseId),
								 murmurhash32((uint32) serverid));

	return (int) (h & (AFDW_FENCE_SLOTS - 1));
}

/*
 * afdw_fence_enter
 *		Hold the fence on SIDE, waiting while the other side holds it or
 *		has its turn, at most TIMEOUT_MS milliseconds (-1: no limit); false
 *		if the time ran out.  A cancel or statement_timeout ends the wait
 *		with the usual errors; it shows the wait event AsyncFdwCommitFence.
 *		A committer gets a number (afdw_fence_publish records it).
 */
bool
afdw_fence_enter(AfdwFenceSide side, int timeout_ms)
{
	int			other = 1 - side;
	volatile bool counted = false;
	volatile bool entered = false;
	TimestampTz start = timeout_ms >= 0 ? GetCurrentTimestamp() : 0;

	Assert(fence != NULL && held_side < 0);
	if (!exit_registered)
	{
		before_shmem_exit(fence_at_exit, (Datum) 0);
		exit_registered = true;
	}

	PG_TRY();
	{
		for (;;)
		{
			long		wait = AFDW_FENCE_RECHECK_MS;

			SpinLockAcquire(&fence->mutex);
			if (fence->active[other] == 0 &&
				(fence->waiting[other] == 0 || fence->tickets[side] > 0 ||
				 (fence->active[side] == 0 && fence->tickets[other] == 0)))
			{
				if (fence->waiting[other] > 0 && fence->tickets[side] > 0)
					fence->tickets[side]--;
				if (counted)
					fence->waiting[side]--;
				counted = false;
				if (side == AFDW_FENCE_COMMITTER)
				{
					if (fence->active[side] == 0)
						fence->floor = fence->last_number;
					held_number = ++fence->last_number;
				}
				fence->active[side]++;
				held_side = side;
				entered = true;
			}
			else if (!counted)
			{
				fence->waiting[side]++;
				counted = true;
			}
			SpinLockRelease(&fence->mutex);
			if (entered)
				break;
			if (timeout_ms >= 0)
			{
				long		left = timeout_ms -
					TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());

				if (left <= 0)
					break;
				wait = Min(wait, left);
			}
			ConditionVariableTimedSleep(&fence->turn, wait,
										afdw_wait_event(AFDW_WAIT_FENCE));
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		stop_waiting(side, counted);
		PG_RE_THROW();
	}
	PG_END_TRY();
	/* Entered, or timed out (and no longer waiting). */
	stop_waiting(side, counted);
	return entered;
}

/*
 * stop_waiting
 *		This backend no longer waits for the fence on SIDE: if it was
 *		COUNTED among the waiters, it leaves their count, and the others
 *		look again (a side may now enter).
 */
static void
stop_waiting(AfdwFenceSide side, bool counted)
{
	ConditionVariableCancelSleep();
	if (!counted)
		return;
	SpinLockAcquire(&fence->mutex);
	fence->waiting[side]--;
	SpinLockRelease(&fence->mutex);
	ConditionVariableBroadcast(&fence->turn);
}

/*
 * afdw_fence_leave
 *		Give up this backend's hold on the fence, if any.  When the last
 *		holder of a side leaves, the waiters of the other side get their
 *		tickets.  Never raises an error.
 */
void
afdw_fence_leave(void)
{
	int			side = held_side;
	int			other;

	if (side < 0 || fence == NULL)
		return;
	other = 1 - side;
	SpinLockAcquire(&fence->mutex);
	fence->active[side]--;
	if (fence->active[side] == 0)
	{
		fence->tickets[side] = 0;
		fence->tickets[other] = fence->waiting[other];
	}
	SpinLockRelease(&fence->mutex);
	held_side = -1;
	held_number = 0;
	ConditionVariableBroadcast(&fence->turn);
}

/*
 * afdw_fence_holding
 *		Whether this backend holds the fence.
 */
bool
afdw_fence_holding(void)
{
	return held_side >= 0;
}

/*
 * afdw_fence_publish
 *		The committer holding the fence is about to send its commit to
 *		SERVERID: record its number in the server's slot first.
 */
void
afdw_fence_publish(Oid serverid)
{
	pg_atomic_uint64 *slot;
	uint64		seen;

	if (held_side != AFDW_FENCE_COMMITTER)
		return;
	slot = &fence->slots[slot_of(serverid)];
	seen = pg_atomic_read_u64(slot);
	while (seen < held_number &&
		   !pg_atomic_compare_exchange_u64(slot, &seen, held_number))
		;
	pg_memory_barrier();
}

/*
 * afdw_fence_floor
 *		The floor of the commit numbers now: every commit numbered at or
 *		below it has answered on every server.
 */
uint64
afdw_fence_floor(void)
{
	uint64		floor;

	Assert(fence != NULL);
	SpinLockAcquire(&fence->mutex);
	floor = (fence->active[AFDW_FENCE_COMMITTER] > 0) ?
		fence->floor : fence->last_number;
	SpinLockRelease(&fence->mutex);
	return floor;
}

/*
 * afdw_fence_committed_since
 *		Whether a commit numbered above FLOOR may have reached SERVERID: to
 *		be asked once a snapshot of the server has been taken.
 */
bool
afdw_fence_committed_since(Oid serverid, uint64 floor)
{
	Assert(fence != NULL);
	pg_memory_barrier();
	return pg_atomic_read_u64(&fence->slots[slot_of(serverid)]) > floor;
}

/*
 * fence_at_exit
 *		A backend that exits while holding the fence (a FATAL error in the
 *		middle of a commit) lets go of it.
 */
static void
fence_at_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	afdw_fence_leave();
}
