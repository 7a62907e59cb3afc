/*-------------------------------------------------------------------------
 *
 * connection_state.c
 *		What the connections of a backend share: the hash that holds them
 *		all, the memory context of what they keep, and the hooks through
 *		which the wire tells the session layer about them.
 *
 * Every file of the wire reaches the connections through these: the pool
 * (connection_pool.c) takes its entries from the hash, connection_setup.c
 * opens and closes their sessions, remote_commands.c hands what it reads
 * to the session layer's hooks, connection_budget.c closes them all when
 * the backend exits.  They are made once, before the first connection, by
 * afdw_connection_init (connection_pool.c) with the hooks the session
 * layer gives it (remote_xact.c).  This file is the lowest of the wire and
 * calls none of the others.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

/* The connections of this backend (connection_internal.h). */
HTAB	   *afdw_conn_hash = NULL;
MemoryContext afdw_conn_cxt = NULL;
const AfdwSessionHooks *afdw_session_hooks = NULL;

/*
 * afdw_make_conn_hash
 *		Create the connection hash and its memory context, and keep HOOKS,
 *		what the wire tells the session layer (see AfdwSessionHooks).
 */
void
afdw_make_conn_hash(const AfdwSessionHooks *hooks)
{
	HASHCTL		ctl;

	afdw_session_hooks = hooks;
	ctl.keysize = sizeof(AfdwConnKey);
	ctl.entrysize = sizeof(AfdwConn);
	afdw_conn_cxt = AllocSetContextCreate(TopMemoryContext, "async_fdw connections",
										  ALLOCSET_SMALL_SIZES);
	ctl.hcxt = afdw_conn_cxt;
	afdw_conn_hash = hash_create("async_fdw connections", 16, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * afdw_slot_zero
 *		The entry of slot 0 of user mapping UMID, where auto's finding is
 *		kept for the pool; NULL if there is none yet.
 */
AfdwConn *
afdw_slot_zero(Oid umid)
{
	AfdwConnKey key;

	key.umid = umid;
	key.slot = 0;
	return (AfdwConn *) hash_search(afdw_conn_hash, &key, HASH_FIND, NULL);
}
