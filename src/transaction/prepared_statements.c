/*-------------------------------------------------------------------------
 *
 * prepared_statements.c
 *		The statements prepared in each remote session: which text has
 *		which name, the numbers of new ones, and the DEALLOCATEs of those
 *		no longer used, queued to ride with a later command.
 *
 * A parameterized scan prepares its query once per remote session
 * (scan_commands.c) and EXECUTEs it at each rescan; this file remembers, per
 * connection, the statement of each text, at most AFDW_MAX_PREPARED of them.
 * A statement counts as prepared only once its PREPARE is seen to succeed,
 * whoever reads the results (afdw_note_prepare, which remote_commands.c
 * reaches through remote_xact.c's result hook).  Through a transaction pooler
 * nothing is kept.
 *
 * Neighbours: scan_commands.c asks for and remembers statements;
 * remote_commands.c notes PREPAREs among the results it reads; remote_xact.c
 * sends the queued DEALLOCATEs with the commands that end or open remote
 * transactions, and forgets them all when connection_pool.c reports a remote
 * session gone.  The per-connection fields are in struct AfdwConn
 * (connection_internal.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

/* A statement prepared in a remote session. */
typedef struct PreparedStatement
{
	uint32		hash;			/* hash key: hash of the text */
	char	   *sql;
	unsigned int number;
} PreparedStatement;

/* Statements kept prepared per remote session, at most. */
#define AFDW_MAX_PREPARED	1000

static void queue_dealloc(AfdwConn *conn, unsigned int number);

/*
 * afdw_prepared_statement
 *		The number of the statement prepared in CONN's session with text
 *		SQL, or 0 if there is none.
 */
unsigned int
afdw_prepared_statement(AfdwConn *conn, const char *sql)
{
	uint32		hash = hash_bytes((const unsigned char *) sql, strlen(sql));
	PreparedStatement *ps;

	if (conn->prepared == NULL)
		return 0;
	ps = hash_search(conn->prepared, &hash, HASH_FIND, NULL);
	return (ps != NULL && strcmp(ps->sql, sql) == 0) ? ps->number : 0;
}

/*
 * afdw_keeps_statements
 *		Whether a statement prepared in CONN's session is there for later
 *		transactions: not through a transaction pooler, where each
 *		transaction may run in another server session.
 */
bool
afdw_keeps_statements(AfdwConn *conn)
{
	return conn->pooler != AFDW_POOLER_TRANSACTION;
}

/*
 * afdw_next_statement_number
 *		A number for a new statement to prepare in CONN's session, or 0
 *		when the session has as many as it may keep.
 */
unsigned int
afdw_next_statement_number(AfdwConn *conn)
{
	if (conn->prepared != NULL &&
		hash_get_num_entries(conn->prepared) >= AFDW_MAX_PREPARED)
		return 0;
	return ++conn->statement_number;
}

/*
 * queue_dealloc
 *		Statement NUMBER of CONN's session is no longer used: deallocate it
 *		with a later command.
 */
static void
queue_dealloc(AfdwConn *conn, unsigned int number)
{
	if (conn->deallocs.data == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(afdw_conn_cxt);

		initStringInfo(&conn->deallocs);
		MemoryContextSwitchTo(old);
	}
	appendStringInfo(&conn->deallocs, "DEALLOCATE afdw_s%u; ", number);
}

/*
 * afdw_remember_statement
 *		Note that statement NUMBER, with text SQL, is prepared in CONN's
 *		session (once its PREPARE succeeded).
 */
void
afdw_remember_statement(AfdwConn *conn, const char *sql, unsigned int number)
{
	uint32		hash = hash_bytes((const unsigned char *) sql, strlen(sql));
	PreparedStatement *ps;
	bool		found;

	if (conn->prepared == NULL)
	{
		HASHCTL		ctl;

		conn->prepared_cxt = AllocSetContextCreate(afdw_conn_cxt,
												   "async_fdw prepared statements",
												   ALLOCSET_SMALL_SIZES);
		ctl.keysize = sizeof(uint32);
		ctl.entrysize = sizeof(PreparedStatement);
		ctl.hcxt = conn->prepared_cxt;
		conn->prepared = hash_create("async_fdw prepared statements", 64, &ctl,
									 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	ps = hash_search(conn->prepared, &hash, HASH_ENTER, &found);
	if (found)
	{
		/*
		 * Another text of the same hash is replaced: its statement, which
		 * stays in the remote session, goes.
		 */
		if (ps->number != number)
			queue_dealloc(conn, ps->number);
		pfree(ps->sql);
	}
	ps->sql = MemoryContextStrdup(conn->prepared_cxt, sql);
	ps->number = number;
}

/*
 * afdw_forget_statement
 *		Stop using the statement prepared in CONN's session with text SQL:
 *		an EXECUTE of it failed, maybe because the remote table changed
 *		under its plan.  The next use prepares it again, under a new name.
 */
void
afdw_forget_statement(AfdwConn *conn, const char *sql)
{
	uint32		hash = hash_bytes((const unsigned char *) sql, strlen(sql));
	PreparedStatement *ps;

	if (conn->prepared == NULL)
		return;
	ps = hash_search(conn->prepared, &hash, HASH_FIND, NULL);
	if (ps != NULL && strcmp(ps->sql, sql) == 0)
	{
		/* It stays in the remote session until deallocated there. */
		queue_dealloc(conn, ps->number);
		pfree(ps->sql);
		(void) hash_search(conn->prepared, &hash, HASH_REMOVE, NULL);
	}
}

/*
 * afdw_preparing_statement
 *		The command just sent on CONN prepares statement NUMBER with text
 *		SQL: remember it as soon as its PREPARE is seen to succeed, whoever
 *		reads the results, since it stays in the session even if the rest
 *		of the command fails.
 */
void
afdw_preparing_statement(AfdwConn *conn, const char *sql, unsigned int number)
{
	if (conn->preparing_sql != NULL)
		pfree(conn->preparing_sql);
	conn->preparing_sql = MemoryContextStrdup(afdw_conn_cxt, sql);
	conn->preparing = number;
}

/*
 * afdw_note_prepare
 *		RES is the next result of CONN's command in flight, which prepares
 *		a statement: if it is the PREPARE's success, the statement exists.
 *		The end of the results without it means the PREPARE did not run or
 *		failed.
 */
void
afdw_note_prepare(AfdwConn *conn, PGresult *res)
{
	if (res != NULL && (PQresultStatus(res) != PGRES_COMMAND_OK ||
						strcmp(PQcmdStatus(res), "PREPARE") != 0))
		return;
	if (res != NULL)
		afdw_remember_statement(conn, conn->preparing_sql, conn->preparing);
	conn->preparing = 0;
	pfree(conn->preparing_sql);
	conn->preparing_sql = NULL;
}

/*
 * afdw_append_deallocs
 *		Append to SQL (commands separated by "; ") the DEALLOCATEs of the
 *		statements no longer used, now sent.  Only where the remote
 *		transaction is not in a failed state, or outside any.
 */
void
afdw_append_deallocs(AfdwConn *entry, StringInfo sql)
{
	if (entry->deallocs.data == NULL || entry->deallocs.len == 0)
		return;
	if (sql->len > 0)
		appendStringInfoString(sql, "; ");
	appendBinaryStringInfo(sql, entry->deallocs.data, entry->deallocs.len - 2);
	resetStringInfo(&entry->deallocs);
}

/*
 * afdw_forget_statements
 *		ENTRY's remote session is gone, and its statements with it: forget
 *		them, the DEALLOCATEs queued and a PREPARE in flight.
 */
void
afdw_forget_statements(AfdwConn *entry)
{
	if (entry->prepared_cxt != NULL)
	{
		MemoryContextDelete(entry->prepared_cxt);
		entry->prepared_cxt = NULL;
		entry->prepared = NULL;
	}
	entry->statement_number = 0;
	if (entry->deallocs.data != NULL)
		resetStringInfo(&entry->deallocs);
	entry->preparing = 0;
	if (entry->preparing_sql != NULL)
	{
		pfree(entry->preparing_sql);
		entry->preparing_sql = NULL;
	}
}
