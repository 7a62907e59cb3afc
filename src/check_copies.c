/*-------------------------------------------------------------------------
 *
 * check_copies.c
 *		async_fdw_check_copies(regclass): whether every server holding a
 *		copy of a replicated foreign table (option copies) has the remote
 *		table with each of the foreign table's columns, of its type, and a
 *		unique index on the key it declares (column option key).
 *
 * The option itself is checked when set only for what the catalogs say
 * (its servers exist and are async_fdw's): a validator does not connect.
 * This function connects to each server of the copies, with the calling
 * user's mapping, and reads the remote table's columns from its catalog.
 * Both sides print their types with search_path set to pg_catalog alone
 * (the remote session always runs so), so that a type names itself alike
 * on both.  The key by which a row-by-row UPDATE or DELETE finds a row on
 * every copy must identify one row there: a unique index (not partial, of
 * columns only) whose columns are all among the key's proves it.  It
 * returns a row for each problem, none when the copies agree with the
 * foreign table; the rows themselves are not compared.
 *
 * Neighbours: options.c lists the copies' servers; deparse_context.c names
 * the remote table and deparse_expr.c its columns; connection_pool.c lends
 * a connection and remote_commands.c runs the query.
 * async_fdw--1.4--1.5.sql declares the function.  Entry layer.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "async_fdw.h"

/* Columns of async_fdw_check_copies. */
#define CHECK_COPIES_COLS	5

/* The remote query's columns. */
enum
{
	REMOTE_FOUND,				/* the remote table exists */
	REMOTE_ATTNAME,
	REMOTE_TYPE
};

PG_FUNCTION_INFO_V1(async_fdw_check_copies);

static void check_one_copy(Relation rel, char **local_types,
						   ForeignServer *server, Tuplestorestate *store,
						   TupleDesc desc);
static char **local_type_names(TupleDesc tupdesc);
static void check_key(Relation rel, AfdwConn *conn, const char *table,
					  ForeignServer *server, Tuplestorestate *store,
					  TupleDesc desc);
static void put_problem(Tuplestorestate *store, TupleDesc desc,
						ForeignServer *server, const char *column,
						const char *local_type, const char *remote_type,
						const char *problem);

/*
 * async_fdw_check_copies
 *		For the foreign table of argument 1, one row (server_name,
 *		column_name, local_type, remote_type, problem) for each thing a
 *		server of its copies does not hold as the foreign table declares:
 *		the remote table, a column, a column's type, or a unique index on
 *		the declared key.  No row: each copy has every column, of its type,
 *		and its key is unique.
 *
 * The caller needs SELECT on the table, and a user mapping for every
 * server of its copies, as a query of each copy would.
 */
Datum
async_fdw_check_copies(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *relname = get_rel_name(relid);
	Relation	rel;
	char	  **local_types;
	List	   *servers;
	ListCell   *lc;
	AclResult	aclresult;

	InitMaterializedSRF(fcinfo, 0);

	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE ||
		!afdw_table_reads_ours(relid, false))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a foreign table of async_fdw", relname)));
	aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FOREIGN_TABLE, relname);

	servers = afdw_copy_servers(GetForeignTable(relid));
	if (servers == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("foreign table \"%s\" is not replicated", relname),
				 errdetail("It has no option \"copies\".")));

	rel = table_open(relid, AccessShareLock);
	local_types = local_type_names(RelationGetDescr(rel));
	foreach(lc, servers)
		check_one_copy(rel, local_types, GetForeignServer(lfirst_oid(lc)),
					   rsinfo->setResult, rsinfo->setDesc);
	table_close(rel, AccessShareLock);
	return (Datum) 0;
}

/*
 * check_one_copy
 *		Compare REL's columns (LOCAL_TYPES their types, local_type_names)
 *		with those of its remote table on SERVER, and
 *		put a row into STORE (of DESC) for each difference that matters: a
 *		missing table or column, a column of another type, a key without a
 *		unique index (check_key).  A remote column the foreign table does
 *		not declare is not one.
 */
static void
check_one_copy(Relation rel, char **local_types, ForeignServer *server,
			   Tuplestorestate *store, TupleDesc desc)
{
	UserMapping *user = GetUserMapping(GetUserId(), server->serverid);
	AfdwConn   *conn = afdw_get_connection(user);
	TupleDesc	tupdesc = RelationGetDescr(rel);
	PGresult   *volatile res = NULL;
	StringInfoData name;
	const char *param;

	initStringInfo(&name);
	afdw_deparse_relation(&name, rel);
	param = name.data;
	PG_TRY();
	{
		int			n;

		res = afdw_run_query(conn,
							 "SELECT r.oid IS NOT NULL, a.attname, "
							 "pg_catalog.format_type(a.atttypid, a.atttypmod) "
							 "FROM (SELECT pg_catalog.to_regclass($1) AS oid) r "
							 "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid "
							 "AND a.attnum > 0 AND NOT a.attisdropped",
							 1, &param);
		n = PQntuples(res);
		if (n == 0 || strcmp(PQgetvalue(res, 0, REMOTE_FOUND), "t") != 0)
			put_problem(store, desc, server, NULL, NULL, NULL,
						psprintf(_("remote table %s does not exist"), name.data));
		else
		{
			for (int i = 1; i <= tupdesc->natts; i++)
			{
				Form_pg_attribute att = TupleDescAttr(tupdesc, i - 1);
				const char *remote = afdw_remote_column_name(rel, i);
				const char *remote_type = NULL;
				char	   *local_type = local_types[i - 1];

				if (att->attisdropped)
					continue;
				for (int row = 0; row < n; row++)
				{
					if (!PQgetisnull(res, row, REMOTE_ATTNAME) &&
						strcmp(PQgetvalue(res, row, REMOTE_ATTNAME), remote) == 0)
					{
						remote_type = PQgetvalue(res, row, REMOTE_TYPE);
						break;
					}
				}
				if (remote_type == NULL)
					put_problem(store, desc, server, NameStr(att->attname),
								local_type, NULL,
								psprintf(_("remote column \"%s\" does not exist"), remote));
				else if (strcmp(local_type, remote_type) != 0)
					put_problem(store, desc, server, NameStr(att->attname),
								local_type, remote_type,
								pstrdup(_("types differ")));
			}
			check_key(rel, conn, name.data, server, store, desc);
		}
	}
	PG_FINALLY();
	{
		PQclear(res);
		afdw_release_connection(conn);
	}
	PG_END_TRY();
}

/*
 * check_key
 *		Put a row into STORE (of DESC) if REL declares a key (column option
 *		key) and its remote table TABLE on SERVER, read through CONN, has no
 *		unique index that proves it: valid, not partial, of plain columns
 *		that are all among the key's.
 */
static void
check_key(Relation rel, AfdwConn *conn, const char *table,
		  ForeignServer *server, Tuplestorestate *store, TupleDesc desc)
{
	List	   *key = afdw_copy_key(rel, NULL);
	const char **params;
	StringInfoData sql;
	StringInfoData names;
	PGresult   *volatile res = NULL;
	ListCell   *lc;

	if (key == NIL)
		return;
	params = palloc(sizeof(char *) * (list_length(key) + 1));
	params[0] = table;
	initStringInfo(&sql);
	initStringInfo(&names);
	appendStringInfoString(&sql,
						   "SELECT EXISTS (SELECT FROM pg_catalog.pg_index i "
						   "WHERE i.indrelid = pg_catalog.to_regclass($1) "
						   "AND i.indisunique AND i.indisvalid "
						   "AND i.indpred IS NULL AND i.indexprs IS NULL "
						   "AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a "
						   "WHERE a.attrelid = i.indrelid "
						   "AND a.attnum = ANY ((i.indkey::pg_catalog.int2[])[0:i.indnkeyatts - 1]) "
						   "AND a.attname <> ALL (ARRAY[");
	foreach(lc, key)
	{
		int			i = foreach_current_index(lc);
		const char *remote = afdw_remote_column_name(rel, lfirst_int(lc));

		params[i + 1] = remote;
		appendStringInfo(&sql, "%s$%d::pg_catalog.name", i > 0 ? ", " : "", i + 2);
		appendStringInfo(&names, "%s%s", i > 0 ? ", " : "", quote_identifier(remote));
	}
	appendStringInfoString(&sql, "])))");
	PG_TRY();
	{
		res = afdw_run_query(conn, sql.data, list_length(key) + 1, params);
		if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "t") != 0)
			put_problem(store, desc, server, NULL, NULL, NULL,
						psprintf(_("no unique index of remote table %s on key (%s)"),
								 table, names.data));
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
}

/*
 * local_type_names
 *		The type of each column of TUPDESC (NULL for a dropped one) as
 *		format_type prints it with search_path pg_catalog, as the remote
 *		session prints its own.
 */
static char **
local_type_names(TupleDesc tupdesc)
{
	char	  **names = palloc0(sizeof(char *) * Max(tupdesc->natts, 1));
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	for (int i = 0; i < tupdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		if (!att->attisdropped)
			names[i] = format_type_with_typemod(att->atttypid, att->atttypmod);
	}
	AtEOXact_GUC(true, nestlevel);
	return names;
}

/*
 * put_problem
 *		One row of the result: on SERVER, COLUMN (NULL: the table) is
 *		LOCAL_TYPE here and REMOTE_TYPE there (NULL: not known), with
 *		PROBLEM in words.
 */
static void
put_problem(Tuplestorestate *store, TupleDesc desc, ForeignServer *server,
			const char *column, const char *local_type,
			const char *remote_type, const char *problem)
{
	Datum		values[CHECK_COPIES_COLS];
	bool		nulls[CHECK_COPIES_COLS];
	const char *texts[CHECK_COPIES_COLS];

	texts[0] = server->servername;
	texts[1] = column;
	texts[2] = local_type;
	texts[3] = remote_type;
	texts[4] = problem;
	for (int i = 0; i < CHECK_COPIES_COLS; i++)
	{
		nulls[i] = (texts[i] == NULL);
		values[i] = nulls[i] ? (Datum) 0 : CStringGetTextDatum(texts[i]);
	}
	tuplestore_putvalues(store, desc, values, nulls);
}
