/*-------------------------------------------------------------------------
 *
 * visibility.c
 *		The snapshots a statement takes of several servers at once, under
 *		the commit fence, so that they never show part of a transaction
 *		that committed on several servers.
 *
 * When a statement's scans send their first commands together (scan.c's start
 * of pending scans), the servers they open remote transactions on take their
 * snapshots.  If two or more do, the backend holds the commit fence
 * (commit_fence.c) on the readers' side from before the first command goes
 * until every one of those servers has taken its snapshot: each leader's first
 * command carries a marker (shared_snapshot.c) whose answer comes as soon as
 * the snapshot is taken, ahead of the query's rows.  No transaction commits on
 * several servers meanwhile, so every such transaction is either visible on
 * all of them or on none.  A server of the statement whose scan cannot send
 * its query yet (it takes parameters or a hash join's keys) opens its remote
 * transaction now, in the same fence.
 *
 * A statement that also reads servers whose snapshots an earlier statement
 * of the transaction took, or any new snapshot of a REPEATABLE READ or
 * SERIALIZABLE transaction, is checked against the transaction's first
 * snapshots instead (afdw_snapshot_check: the fence's commit numbers), and
 * so is a statement that could not have the fence, or hold it while its
 * servers answered, within AFDW_FENCE_READER_MS.
 *
 * The first write of a REPEATABLE READ transaction block, when it comes
 * before any read, takes the snapshots of its table's other servers in the
 * same way (afdw_visibility_first_write).
 *
 * Neighbours: scan.c calls afdw_visibility_begin before sending the first
 * commands of a statement's scans and afdw_visibility_end after (or
 * afdw_visibility_abort when it fails); modify_rows.c and direct_modify.c call
 * afdw_visibility_first_write for a write's connection; this file uses
 * shared_snapshot.c (which servers are new, the markers, the check),
 * remote_xact.c (a remote transaction opened without a query) and
 * commit_fence.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "foreign/foreign.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

/* async_fdw.snapshot_scope (AfdwSnapshotScope) */
typedef enum AfdwSnapshotScope
{
	AFDW_SCOPE_SERVERS_READ,	/* the servers the first statement reads */
	AFDW_SCOPE_PARTITIONED_TABLES	/* and every server of their
									 * partitioned tables */
} AfdwSnapshotScope;

static const struct config_enum_entry scope_options[] = {
	{"servers_read", AFDW_SCOPE_SERVERS_READ, false},
	{"partitioned_tables", AFDW_SCOPE_PARTITIONED_TABLES, false},
	{NULL, 0, false}
};

static int	snapshot_scope = AFDW_SCOPE_PARTITIONED_TABLES;

/*
 * Whether a batch of first commands is being sent, and how: under the
 * fence, checked against the fence's numbers above BATCH_FLOOR, or both.
 */
static bool batch_open = false;
static bool batch_fenced = false;
static bool batch_checks = false;
static uint64 batch_floor = 0;
static TimestampTz batch_began = 0;

/*
 * Connections opened for servers the statement does not read, whose
 * snapshots a REPEATABLE READ transaction takes with the first ones
 * (snapshot_scope), held until afdw_visibility_end opens their remote
 * transactions.
 */
static AfdwConn **extra = NULL;
static int	nextra = 0;

/*
 * afdw_visibility_init
 *		Define async_fdw.snapshot_scope.
 */
void
afdw_visibility_init(void)
{
	DefineCustomEnumVariable("async_fdw.snapshot_scope",
							 "Sets which servers a REPEATABLE READ or SERIALIZABLE transaction takes snapshots of at its first statement.",
							 "servers_read: those its first statement reads or writes; partitioned_tables: also every other server of the partitioned tables it reads or writes. A server first used later is checked against the commit fence, and may fail with a serialization failure.",
							 &snapshot_scope,
							 AFDW_SCOPE_PARTITIONED_TABLES,
							 scope_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

/*
 * has_mapping
 *		Whether USERID (or PUBLIC) has a user mapping for SERVERID.
 */
static bool
has_mapping(Oid userid, Oid serverid)
{
	return SearchSysCacheExists2(USERMAPPINGUSERSERVER,
								 ObjectIdGetDatum(userid),
								 ObjectIdGetDatum(serverid)) ||
		SearchSysCacheExists2(USERMAPPINGUSERSERVER,
							  ObjectIdGetDatum(InvalidOid),
							  ObjectIdGetDatum(serverid));
}

/*
 * open_partition_servers
 *		The first statement of a REPEATABLE READ or SERIALIZABLE transaction
 *		block reads the N tables RELIDS through CONNS: open connections to
 *		the other async_fdw servers of their partitioned tables (for the
 *		same local user, where a user mapping exists), into EXTRA, so that
 *		their snapshots are taken with the first ones; WRITERS when the
 *		statement writes rather than reads.
 */
static void
open_partition_servers(AfdwConn **conns, Oid *relids, int n, bool writers)
{
	List	   *roots = NIL;
	List	   *servers = NIL;
	ListCell   *lc;
	Oid			userid = conns[0]->userid;

	for (int i = 0; i < n; i++)
	{
		List	   *ancestors;

		if (!OidIsValid(relids[i]) || !get_rel_relispartition(relids[i]))
			continue;
		ancestors = get_partition_ancestors(relids[i]);
		if (ancestors != NIL)
			roots = list_append_unique_oid(roots, llast_oid(ancestors));
		list_free(ancestors);
	}
	foreach(lc, roots)
	{
		List	   *leaves = find_all_inheritors(lfirst_oid(lc), NoLock, NULL);
		ListCell   *lc2;

		foreach(lc2, leaves)
		{
			Oid			leaf = lfirst_oid(lc2);
			Oid			serverid;
			bool		read = false;

			if (get_rel_relkind(leaf) != RELKIND_FOREIGN_TABLE)
				continue;
			serverid = GetForeignTable(leaf)->serverid;
			for (int i = 0; i < n && !read; i++)
				read = (conns[i]->serverid == serverid);
			if (!read && afdw_server_is_ours(serverid) &&
				has_mapping(userid, serverid))
				servers = list_append_unique_oid(servers, serverid);
		}
		list_free(leaves);
	}
	list_free(roots);
	if (servers == NIL)
		return;

	extra = MemoryContextAlloc(TopTransactionContext,
							   sizeof(AfdwConn *) * list_length(servers));
	nextra = 0;
	if (writers)
	{
		/*
		 * The first statement writes: the servers it may write next open
		 * on the connections that would write there, which export no
		 * snapshot (one that did could not be prepared, and a write would
		 * take another connection, opened then).
		 */
		foreach(lc, servers)
			extra[nextra++] =
				afdw_acquire_writer(GetUserMapping(userid, lfirst_oid(lc)));
	}
	else
	{
		foreach(lc, servers)
			extra[nextra++] =
				afdw_acquire_connection(GetUserMapping(userid, lfirst_oid(lc)));
		/* Their handshakes together, then each ready (or shared). */
		afdw_connect_finish(extra, nextra);
		for (int i = 0; i < nextra; i++)
			extra[i] = afdw_connection_ready(extra[i]);
	}
	list_free(servers);
}

/*
 * release_extra
 *		Give back the connections open_partition_servers took.
 */
static void
release_extra(void)
{
	for (int i = 0; i < nextra; i++)
		afdw_release_connection(extra[i]);
	if (extra != NULL)
		pfree(extra);
	extra = NULL;
	nextra = 0;
}

/*
 * count_new
 *		How many servers (and user mappings) among the N connections CONNS
 *		would take a snapshot of their own with their first command, counted
 *		up to 2 (all the caller asks: none, one, or several); *MIXES tells
 *		whether one of them reads a snapshot taken before.  One pass: a
 *		statement over many partitions has many scans.
 */
static int
count_new(AfdwConn **conns, int n, bool *mixes)
{
	AfdwConn   *first = NULL;
	int			nnew = 0;

	*mixes = false;
	for (int i = 0; i < n; i++)
	{
		if (!afdw_snapshot_is_new(conns[i]))
			*mixes = true;
		else if (first == NULL)
		{
			first = conns[i];
			nnew = 1;
		}
		else if (conns[i]->serverid != first->serverid ||
				 conns[i]->key.umid != first->key.umid)
			nnew = 2;
	}
	return nnew;
}

static void visibility_begin(AfdwConn **conns, Oid *relids, int n, bool writes,
							 bool nested);

/*
 * afdw_visibility_begin
 *		The first commands of a statement's scans of the N tables RELIDS,
 *		on the connections CONNS (repeats allowed), are about to be sent:
 *		hold the commit fence if their new snapshots must be taken under
 *		it, and have them marked.  The first statement of a REPEATABLE READ
 *		transaction block also takes the snapshots of the other servers of
 *		the partitioned tables it reads (async_fdw.snapshot_scope), so that
 *		a later statement reading them needs no check.  NESTED: the
 *		statement is a function's (afdw_snapshot_note_floor).
 */
void
afdw_visibility_begin(AfdwConn **conns, Oid *relids, int n, bool nested)
{
	visibility_begin(conns, relids, n, false, nested);
}

/*
 * visibility_begin
 *		afdw_visibility_begin's work; WRITES when CONNS write (the other
 *		servers are opened on their writers' connections).
 */
static void
visibility_begin(AfdwConn **conns, Oid *relids, int n, bool writes, bool nested)
{
	bool		mixes;
	int			nnew;

	Assert(!batch_open && nextra == 0);
	if (!afdw_fence_active() || n == 0)
		return;
	nnew = count_new(conns, n, &mixes);
	if (nnew == 0)
		return;
	if (!afdw_snapshot_floor(&batch_floor) && IsTransactionBlock() &&
		IsolationUsesXactSnapshot() &&
		snapshot_scope == AFDW_SCOPE_PARTITIONED_TABLES)
	{
		open_partition_servers(conns, relids, n, writes);
		for (int i = 0; i < nextra; i++)
		{
			if (afdw_snapshot_is_new(extra[i]))
				nnew++;
		}
	}

	if (afdw_snapshot_check_wanted(mixes))
	{
		/*
		 * Checked against the transaction's first snapshots: the fence
		 * would spare no failure.
		 */
		batch_checks = true;
	}
	else if (nnew >= 2)
	{
		/*
		 * Taken together under the fence; a reader that cannot have it
		 * soon (a commit that does not end) checks them instead.
		 */
		batch_fenced = afdw_fence_enter(AFDW_FENCE_READER, AFDW_FENCE_READER_MS);
		batch_checks = !batch_fenced;
		batch_floor = afdw_fence_floor();
		afdw_snapshot_note_floor(nested);
	}
	else
	{
		release_extra();
		return;
	}
	batch_open = true;
	batch_began = GetCurrentTimestamp();
	afdw_snapshot_marking(true);
}

/*
 * afdw_visibility_end
 *		The first commands have gone: open the remote transactions of the
 *		servers among CONNS whose scans could not send theirs, wait until
 *		every new snapshot is taken, check them if need be, and let go of
 *		the fence.  A reader holds the fence AFDW_FENCE_READER_MS at most
 *		(a server slow to answer would hold every commit up): then it lets
 *		go, and checks its snapshots once they are taken.
 */
void
afdw_visibility_end(AfdwConn **conns, int n)
{
	ListCell   *lc;
	TimestampTz deadline;

	if (!batch_open)
		return;
	for (int i = 0; i < n; i++)
	{
		if (afdw_snapshot_is_new(conns[i]))
			afdw_begin_xact_async(conns[i]);
	}
	for (int i = 0; i < nextra; i++)
	{
		if (afdw_snapshot_is_new(extra[i]))
			afdw_begin_xact_async(extra[i]);
	}
	deadline = batch_fenced ?
		TimestampTzPlusMilliseconds(batch_began, AFDW_FENCE_READER_MS) : -1;
	foreach(lc, afdw_snapshot_marked())
	{
		AfdwConn   *leader = (AfdwConn *) lfirst(lc);

		if (afdw_snapshot_await_taken(leader, deadline))
			continue;
		afdw_fence_leave();
		batch_fenced = false;
		batch_checks = true;
		deadline = -1;
		(void) afdw_snapshot_await_taken(leader, -1);
	}
	if (batch_checks)
	{
		foreach(lc, afdw_snapshot_marked())
			afdw_snapshot_check((AfdwConn *) lfirst(lc), batch_floor);
	}
	afdw_visibility_abort();
}

/*
 * afdw_visibility_first_write
 *		CONN, the writer of foreign table RELID, is about to open its
 *		server's remote transaction with its first write, in the first
 *		statement of a REPEATABLE READ or SERIALIZABLE transaction block
 *		that takes snapshots: take the snapshots of the other servers of
 *		the table's partitioned tables with it, under the fence, as the
 *		first reading statement does (async_fdw.snapshot_scope), so that
 *		a later statement writing or reading them needs no check and fails
 *		with no serialization failure for a commit that came between.  A
 *		round trip of its own, only when there are such servers.
 */
void
afdw_visibility_first_write(AfdwConn *conn, Oid relid)
{
	uint64		floor;

	if (!afdw_fence_active() || !IsTransactionBlock() ||
		!IsolationUsesXactSnapshot() ||
		snapshot_scope != AFDW_SCOPE_PARTITIONED_TABLES ||
		afdw_snapshot_floor(&floor) || !afdw_snapshot_is_new(conn) ||
		!get_rel_relispartition(relid))
		return;
	PG_TRY();
	{
		visibility_begin(&conn, &relid, 1, true, false);
		afdw_visibility_end(&conn, 1);
	}
	PG_CATCH();
	{
		afdw_visibility_abort();
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * afdw_visibility_abort
 *		The batch is over, sent or failed: stop marking and let go of the
 *		fence.  Never raises an error.
 */
void
afdw_visibility_abort(void)
{
	release_extra();
	if (!batch_open)
		return;
	batch_open = false;
	batch_fenced = false;
	batch_checks = false;
	afdw_snapshot_marking(false);
	afdw_fence_leave();
}
