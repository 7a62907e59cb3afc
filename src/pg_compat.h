/*-------------------------------------------------------------------------
 *
 * pg_compat.h
 *		What differs between the PostgreSQL major versions async_fdw builds
 *		against (15, 17 and 18), in one place.
 *
 * Every other file calls the names defined here and never tests
 * PG_VERSION_NUM itself; a new major version changes this file only,
 * unless the behaviour (not the spelling) of something changed.  Each
 * definition names the version that changed the server's API.
 *
 *-------------------------------------------------------------------------
 */
#ifndef AFDW_PG_COMPAT_H
#define AFDW_PG_COMPAT_H

#include "access/stratnum.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/pathnodes.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "storage/latch.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"

#if PG_VERSION_NUM < 150000 || (PG_VERSION_NUM >= 160000 && PG_VERSION_NUM < 170000) || \
	PG_VERSION_NUM >= 190000
#error "async_fdw builds against PostgreSQL 15, 17 or 18"
#endif

#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#endif
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#include "common/base64.h"
/*
 * libpq-be.h (MyProcPort, for the SCRAM keys) includes the GSSAPI headers
 * when the server was built with GSSAPI, and a machine that builds
 * extensions may lack them (Debian's postgresql-server-dev-18 does not
 * pull libkrb5-dev in).  Port's layout does not depend on them (its GSSAPI
 * state is behind a pointer either way), so without them the header is
 * read as for a server without GSSAPI; async_fdw uses none of it.
 */
#if defined(ENABLE_GSS) && defined(__has_include)
#if !__has_include(<gssapi/gssapi.h>) && !__has_include(<gssapi.h>)
#define AFDW_WITHOUT_GSSAPI_HEADERS
#undef ENABLE_GSS
#endif
#endif
#include "libpq/libpq-be.h"
#ifdef AFDW_WITHOUT_GSSAPI_HEADERS
#define ENABLE_GSS 1
#undef AFDW_WITHOUT_GSSAPI_HEADERS
#endif
#endif

/*
 * A function that never returns, written before its return type.  18
 * replaced the attribute written after the parameters by this prefix.
 */
#ifdef pg_noreturn
#define afdw_noreturn pg_noreturn
#else
#define afdw_noreturn pg_attribute_noreturn()
#endif

/*
 * Paths of foreign scans, joins and upper relations.  17 added the
 * restriction clauses a path of a join enforces (fdw_restrictinfo), from
 * which the core planner takes the pseudoconstant ones into a gating Result
 * above the join: async_fdw passes those (GATING; its join paths check
 * their other conditions in the remote query), and before 17 the core
 * planner offers no remote join with such conditions.  18 added the count
 * of disabled nodes under a path (none here: a remote path is never one a
 * planner setting disabled).
 */
#if PG_VERSION_NUM >= 170000
#define afdw_gates_join_pseudoconstants() true
#else
#define afdw_gates_join_pseudoconstants() false
#endif
#if PG_VERSION_NUM >= 180000
#define afdw_scan_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, priv) \
	create_foreignscan_path(root, rel, target, rows, 0, startup, total, pathkeys, outer, epq, NIL, priv)
#define afdw_join_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, gating, priv) \
	create_foreign_join_path(root, rel, target, rows, 0, startup, total, pathkeys, outer, epq, gating, priv)
#define afdw_upper_path(root, rel, target, rows, startup, total, pathkeys, epq, priv) \
	create_foreign_upper_path(root, rel, target, rows, 0, startup, total, pathkeys, epq, NIL, priv)
#elif PG_VERSION_NUM >= 170000
#define afdw_scan_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, priv) \
	create_foreignscan_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, NIL, priv)
#define afdw_join_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, gating, priv) \
	create_foreign_join_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, gating, priv)
#define afdw_upper_path(root, rel, target, rows, startup, total, pathkeys, epq, priv) \
	create_foreign_upper_path(root, rel, target, rows, startup, total, pathkeys, epq, NIL, priv)
#else
#define afdw_scan_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, priv) \
	create_foreignscan_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, priv)
#define afdw_join_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, gating, priv) \
	((void) (gating), \
	 create_foreign_join_path(root, rel, target, rows, startup, total, pathkeys, outer, epq, priv))
#define afdw_upper_path(root, rel, target, rows, startup, total, pathkeys, epq, priv) \
	create_foreign_upper_path(root, rel, target, rows, startup, total, pathkeys, epq, priv)
#endif

/*
 * A role's privilege MODE on foreign server SERVERID (an AclResult).  16
 * replaced the function of each kind of object by one for all.
 */
#if PG_VERSION_NUM >= 160000
#define afdw_server_aclcheck(serverid, roleid, mode) \
	object_aclcheck(ForeignServerRelationId, serverid, roleid, mode)
#else
#define afdw_server_aclcheck(serverid, roleid, mode) \
	pg_foreign_server_aclcheck(serverid, roleid, mode)
#endif

/*
 * The cost of sorting ROWS rows of WIDTH bytes by PATHKEYS, at most BOUND
 * of them kept (0: all), into SORT_PATH.  18 counts disabled input nodes.
 */
#if PG_VERSION_NUM >= 180000
#define afdw_cost_sort(sort_path, root, pathkeys, rows, width, bound) \
	cost_sort(sort_path, root, pathkeys, 0, 0.0, rows, width, 0.0, work_mem, bound)
#else
#define afdw_cost_sort(sort_path, root, pathkeys, rows, width, bound) \
	cost_sort(sort_path, root, pathkeys, 0.0, rows, width, 0.0, work_mem, bound)
#endif

/*
 * Take a lock of the lock manager's without waiting, as a session lock,
 * without an error when shared memory runs out.  18 added whether a lock
 * not granted is logged (log_lock_failures): never here, where not getting
 * it is an answer, not a failure.
 */
#if PG_VERSION_NUM >= 180000
#define afdw_try_session_lock(tag, mode) \
	LockAcquireExtended(tag, mode, true, true, false, NULL, false)
#else
#define afdw_try_session_lock(tag, mode) \
	LockAcquireExtended(tag, mode, true, true, false, NULL)
#endif

/*
 * Pause for cost-based vacuum delay during ANALYZE's sampling.  18 tells
 * whether the caller is ANALYZE.
 */
#if PG_VERSION_NUM >= 180000
#define afdw_analyze_delay_point()	vacuum_delay_point(true)
#else
#define afdw_analyze_delay_point()	vacuum_delay_point()
#endif

/*
 * Relation sets.  From 16 a join relation's relids (and a ForeignScan's
 * fs_relids) also hold the range table indexes of the outer joins it
 * computes, which name no table: afdw_base_relids gives its tables only,
 * afdw_scan_base_relids the same for a plan, afdw_all_query_relids the
 * relids of the join of the whole query's FROM.
 */
#if PG_VERSION_NUM >= 160000
#define afdw_base_relids(root, rel) \
	bms_difference((rel)->relids, (root)->outer_join_rels)
#define afdw_scan_base_relids(plan)		((plan)->fs_base_relids)
#define afdw_all_query_relids(root)		((root)->all_query_rels)
#else
#define afdw_base_relids(root, rel)		((rel)->relids)
#define afdw_scan_base_relids(plan)		((plan)->fs_relids)
#define afdw_all_query_relids(root)		((root)->all_baserels)
#endif

/*
 * The GROUP BY items the planner groups by: from 16 it keeps them apart
 * from the query's, without the items it found redundant.
 */
#if PG_VERSION_NUM >= 160000
#define afdw_group_clause(root)		((root)->processed_groupClause)
#else
#define afdw_group_clause(root)		((root)->parse->groupClause)
#endif

/*
 * The planner's record of placeholder PHV, which must exist.  16 dropped
 * the argument that asked to create a missing one.
 */
#if PG_VERSION_NUM >= 160000
#define afdw_placeholder_info(root, phv)	find_placeholder_info(root, phv)
#else
#define afdw_placeholder_info(root, phv)	find_placeholder_info(root, phv, false)
#endif

/*
 * The relations a Var's value depends on, as an equivalence member of it
 * lists them: its table, and from 16 the outer joins that can make it
 * NULL (varnullingrels).
 */
#if PG_VERSION_NUM >= 160000
#define afdw_var_relids(var) \
	bms_add_members(bms_make_singleton((var)->varno), (var)->varnullingrels)
#else
#define afdw_var_relids(var)	bms_make_singleton((var)->varno)
#endif

/*
 * The members of an equivalence class that may name the columns of a
 * relation of RELIDS: its own members and those of the child relations
 * among RELIDS (partitions).  18 keeps children's members apart from the
 * class's list, behind an iterator.
 */
typedef struct AfdwMemberIter
{
#if PG_VERSION_NUM >= 180000
	EquivalenceMemberIterator it;
#else
	List	   *members;
	int			next;
#endif
} AfdwMemberIter;

static inline void
afdw_members_begin(AfdwMemberIter *iter, EquivalenceClass *ec, Relids relids)
{
#if PG_VERSION_NUM >= 180000
	setup_eclass_member_iterator(&iter->it, ec, relids);
#else
	(void) relids;
	iter->members = ec->ec_members;
	iter->next = 0;
#endif
}

static inline EquivalenceMember *
afdw_members_next(AfdwMemberIter *iter)
{
#if PG_VERSION_NUM >= 180000
	return eclass_member_iterator_next(&iter->it);
#else
	if (iter->next >= list_length(iter->members))
		return NULL;
	return (EquivalenceMember *) list_nth(iter->members, iter->next++);
#endif
}

/*
 * What a backend of async_fdw waits for, as pg_stat_activity shows it.
 * From 17 each is a wait event of its own (wait_event_type Extension,
 * wait_event the name below); before, all are the generic Extension.
 */
typedef enum AfdwWaitEvent
{
	AFDW_WAIT_CONNECT,			/* AsyncFdwConnect: a connection opening */
	AFDW_WAIT_RESULT,			/* AsyncFdwGetResult: rows or a result */
	AFDW_WAIT_COPY_ROOM,		/* AsyncFdwCopyRoom: a COPY's data accepted */
	AFDW_WAIT_COMMIT,			/* AsyncFdwCommit: the answer to a remote
								 * COMMIT, PREPARE or ROLLBACK */
	AFDW_WAIT_BUDGET,			/* AsyncFdwConnectionBudget: room to connect */
	AFDW_WAIT_RECOVERY,			/* AsyncFdwRecovery: the worker's idle time */
	AFDW_WAIT_FENCE,			/* AsyncFdwCommitFence: the other side of
								 * the commit fence to leave */
	AFDW_NUM_WAIT_EVENTS
} AfdwWaitEvent;

static inline uint32
afdw_wait_event(AfdwWaitEvent what)
{
#if PG_VERSION_NUM >= 170000
	static const char *const names[AFDW_NUM_WAIT_EVENTS] = {
		"AsyncFdwConnect", "AsyncFdwGetResult", "AsyncFdwCopyRoom",
		"AsyncFdwCommit", "AsyncFdwConnectionBudget", "AsyncFdwRecovery",
		"AsyncFdwCommitFence"
	};
	/* Registered on first use, one shared-memory lookup per name. */
	static uint32 ids[AFDW_NUM_WAIT_EVENTS];

	if (ids[what] == 0)
		ids[what] = WaitEventExtensionNew(names[what]);
	return ids[what];
#else
	(void) what;
	return PG_WAIT_EXTENSION;
#endif
}

/*
 * The direction of a path key's sort, and its btree strategy (the
 * sort's operator in a btree family: callers ask only of ascending or
 * descending keys).  18 replaced the strategy number by a generic
 * comparison type.
 */
#if PG_VERSION_NUM >= 180000
#define afdw_pathkey_ascending(pk)	((pk)->pk_cmptype == COMPARE_LT)
#define afdw_pathkey_descending(pk)	((pk)->pk_cmptype == COMPARE_GT)
#define afdw_pathkey_strategy(pk) \
	((pk)->pk_cmptype == COMPARE_GT ? BTGreaterStrategyNumber : BTLessStrategyNumber)
#else
#define afdw_pathkey_strategy(pk)	((pk)->pk_strategy)
#define afdw_pathkey_ascending(pk)	((pk)->pk_strategy == BTLessStrategyNumber)
#define afdw_pathkey_descending(pk)	((pk)->pk_strategy == BTGreaterStrategyNumber)
#endif

/*
 * This backend's slot among the server's regular backends, from 0 to
 * MaxBackends - 1.  17 numbers processes from 0 (MyProcNumber); before,
 * backend ids started at 1.
 */
#if PG_VERSION_NUM >= 170000
#define afdw_backend_slot()		((int) MyProcNumber)
#else
#define afdw_backend_slot()		((int) MyBackendId - 1)
#endif

/*
 * A wait event set.  A TRANSIENT one is freed by the caller before it
 * returns, or by the error cleanup: in 15 through the current memory
 * context (its kernel handle leaks then), from 17 through the current
 * resource owner, which also closes the handle.  Otherwise it lives as
 * long as the backend, in CXT (15) or in the top memory context (17).
 */
static inline WaitEventSet *
afdw_create_wait_set(bool transient, MemoryContext cxt, int nevents)
{
#if PG_VERSION_NUM >= 170000
	(void) cxt;
	return CreateWaitEventSet(transient ? CurrentResourceOwner : NULL, nevents);
#else
	return CreateWaitEventSet(transient ? CurrentMemoryContext : cxt, nevents);
#endif
}

/*
 * The user whose user mapping a scan or direct modification of a foreign
 * table uses: the view owner's when the table is read through a view, else
 * the current user.  16 moved it from the range table entry to the plan.
 */
static inline Oid
afdw_plan_check_user(ForeignScan *plan, EState *estate, Index rtindex)
{
	Oid			userid;

#if PG_VERSION_NUM >= 160000
	(void) estate;
	(void) rtindex;
	userid = plan->checkAsUser;
#else
	(void) plan;
	userid = exec_rt_fetch(rtindex, estate)->checkAsUser;
#endif
	return OidIsValid(userid) ? userid : GetUserId();
}

/*
 * The same for a table written through ModifyTable (INSERT, COPY, UPDATE
 * and DELETE row by row): InvalidOid when no user is recorded (a COPY or
 * a tuple routed to a partition of no range table entry).
 */
static inline Oid
afdw_result_rel_check_user(ResultRelInfo *rinfo, EState *estate)
{
#if PG_VERSION_NUM >= 160000
	if (rinfo->ri_RangeTableIndex == 0 && rinfo->ri_RootResultRelInfo == NULL)
		return InvalidOid;
	return ExecGetResultRelCheckAsUser(rinfo, estate);
#else
	Index		rti = rinfo->ri_RangeTableIndex;

	if (rti == 0 && rinfo->ri_RootResultRelInfo != NULL)
		rti = rinfo->ri_RootResultRelInfo->ri_RangeTableIndex;
	if (rti == 0)
		return InvalidOid;
	return exec_rt_fetch(rti, estate)->checkAsUser;
#endif
}

/*
 * SCRAM pass-through (the option use_scram_passthrough).  From 18 the
 * backend keeps the keys its client's SCRAM authentication proved
 * (MyProcPort), and libpq can authenticate to another server with them
 * instead of a password (its parameters scram_client_key and
 * scram_server_key, base64).  Before 18 neither exists.
 */
static inline bool
afdw_scram_passthrough_supported(void)
{
	return PG_VERSION_NUM >= 180000;
}

#if PG_VERSION_NUM >= 180000
/*
 * afdw_encode_scram_key
 *		KEY of LEN bytes in base64, palloc'd.
 */
static inline char *
afdw_encode_scram_key(const uint8 *key, int len)
{
	int			size = pg_b64_enc_len(len);
	char	   *out = palloc0(size + 1);

	if (pg_b64_encode(key, len, out, size) < 0)
		elog(ERROR, "could not encode a SCRAM key");
	return out;
}
#endif

/*
 * afdw_client_scram_keys
 *		The client key and server key of this session's client's SCRAM
 *		authentication, in base64 (palloc'd); false if the client did not
 *		authenticate with SCRAM (or before 18).
 */
static inline bool
afdw_client_scram_keys(char **client_key, char **server_key)
{
#if PG_VERSION_NUM >= 180000
	if (MyProcPort == NULL || !MyProcPort->has_scram_keys)
		return false;
	*client_key = afdw_encode_scram_key(MyProcPort->scram_ClientKey,
										sizeof(MyProcPort->scram_ClientKey));
	*server_key = afdw_encode_scram_key(MyProcPort->scram_ServerKey,
										sizeof(MyProcPort->scram_ServerKey));
	return true;
#else
	(void) client_key;
	(void) server_key;
	return false;
#endif
}

/*
 * afdw_returns_old_or_new
 *		Whether a RETURNING list reads OLD or NEW explicitly (PostgreSQL 18):
 *		the core planner then offers no direct modification, and the rows
 *		are changed one by one.  Before 18 there is no such list.
 */
static inline bool
afdw_returns_old_or_new(List *returning)
{
#if PG_VERSION_NUM >= 180000
	return contain_vars_returning_old_or_new((Node *) returning);
#else
	(void) returning;
	return false;
#endif
}

/*
 * afdw_append_prunes
 *		Whether APPEND may prune its children, at executor start or while
 *		it runs.  18 numbers its pruning information in the statement's
 *		list; before, the Append holds it.
 */
static inline bool
afdw_append_prunes(Append *append)
{
#if PG_VERSION_NUM >= 180000
	return append->part_prune_index >= 0;
#else
	return append->part_prune_info != NULL;
#endif
}

/*
 * afdw_set_parent_rel
 *		Make CHILD, a relation made for one partition's part of PARENT, name
 *		PARENT as its topmost parent; 16 and later keep the parents
 *		themselves too.
 */
static inline void
afdw_set_parent_rel(RelOptInfo *child, RelOptInfo *parent)
{
	child->top_parent_relids = parent->relids;
#if PG_VERSION_NUM >= 160000
	child->parent = parent;
	child->top_parent = parent;
#endif
}

/*
 * afdw_plan_prunes
 *		Whether PLAN, an Append or MergeAppend, prunes its children at run
 *		time: 18 keeps the pruning steps in the PlannedStmt and an index to
 *		them in the plan, 15 and 17 the steps in the plan.
 */
static inline bool
afdw_plan_prunes(Plan *plan)
{
#if PG_VERSION_NUM >= 180000
	if (IsA(plan, Append))
		return ((Append *) plan)->part_prune_index >= 0;
	return ((MergeAppend *) plan)->part_prune_index >= 0;
#else
	if (IsA(plan, Append))
		return ((Append *) plan)->part_prune_info != NULL;
	return ((MergeAppend *) plan)->part_prune_info != NULL;
#endif
}

#endif							/* AFDW_PG_COMPAT_H */
