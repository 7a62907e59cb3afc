/*-------------------------------------------------------------------------
 *
 * import_schema.c
 *		IMPORT FOREIGN SCHEMA: foreign tables made from a remote schema.
 *
 * The remote server's catalogs give the tables, views, foreign tables,
 * materialized views and partitioned tables of the schema, with their
 * columns' types as the remote server prints them (its search_path is
 * pg_catalog only, so other types come schema-qualified), and, as the
 * statement's options ask (those of postgres_fdw, with its defaults),
 * their defaults, generated expressions, collations and NOT NULL
 * constraints.  Each becomes a CREATE FOREIGN TABLE naming the remote
 * schema, table and columns in options, so that renaming the local ones
 * keeps them pointing at the same remote objects.  Partitions are left out
 * unless LIMIT TO names them: their partitioned table brings their rows.
 *
 * Neighbours: async_fdw.c registers afdwImportForeignSchema; connection_pool.c
 * lends the connection, remote_commands.c runs the catalog query.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "foreign/fdwapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "async_fdw.h"

/* What the statement's options ask to import besides names and types. */
typedef struct ImportOptions
{
	bool		defaults;		/* import_default, default false */
	bool		generated;		/* import_generated, default true */
	bool		collations;		/* import_collate, default true */
	bool		not_null;		/* import_not_null, default true */
} ImportOptions;

/* The columns of the catalog query's result. */
enum ImportColumn
{
	IMPORT_RELNAME,
	IMPORT_ATTNAME,
	IMPORT_TYPE,
	IMPORT_NOT_NULL,
	IMPORT_DEFAULT,
	IMPORT_GENERATED,
	IMPORT_COLLATION,
	IMPORT_COLLATION_SCHEMA
};

/*
 * import_options
 *		Read STMT's options; an unknown one, or a value that is no Boolean,
 *		is an error.
 */
static ImportOptions
import_options(ImportForeignSchemaStmt *stmt)
{
	ImportOptions opts = {false, true, true, true};
	ListCell   *lc;

	foreach(lc, stmt->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "import_default") == 0)
			opts.defaults = defGetBoolean(def);
		else if (strcmp(def->defname, "import_generated") == 0)
			opts.generated = defGetBoolean(def);
		else if (strcmp(def->defname, "import_collate") == 0)
			opts.collations = defGetBoolean(def);
		else if (strcmp(def->defname, "import_not_null") == 0)
			opts.not_null = defGetBoolean(def);
		else
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\"", def->defname),
					 errhint("Valid options in this context are: import_default, import_generated, import_collate, import_not_null.")));
	}
	return opts;
}

/*
 * catalog_query
 *		The remote query listing the columns of the relations STMT imports,
 *		one row per column (a relation without columns has one row with a
 *		null column name, a schema without relations one row with a null
 *		relation name, a missing schema no row), by relation name and column
 *		number.  $1 is the remote schema's name.
 */
static char *
catalog_query(ImportForeignSchemaStmt *stmt)
{
	StringInfoData sql;
	ListCell   *lc;
	bool		first = true;

	initStringInfo(&sql);

	/*
	 * From the schema's row, so that a schema without relations gives one
	 * row (a null relation name) and a missing schema none: one round trip.
	 */
	appendStringInfoString(&sql,
						   "SELECT c.relname, a.attname, "
						   "pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, "
						   "pg_catalog.pg_get_expr(d.adbin, d.adrelid), a.attgenerated, "
						   "CASE WHEN a.attcollation <> t.typcollation THEN co.collname END, "
						   "CASE WHEN a.attcollation <> t.typcollation THEN cn.nspname END "
						   "FROM pg_catalog.pg_namespace n "
						   "LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid "
						   "AND c.relkind IN ('r', 'v', 'f', 'm', 'p')");

	/* Partitions come with their partitioned table, unless named. */
	if (stmt->list_type != FDW_IMPORT_SCHEMA_LIMIT_TO)
		appendStringInfoString(&sql, " AND NOT c.relispartition");

	if (stmt->list_type != FDW_IMPORT_SCHEMA_ALL)
	{
		appendStringInfo(&sql, " AND c.relname %sIN (",
						 stmt->list_type == FDW_IMPORT_SCHEMA_EXCEPT ? "NOT " : "");
		foreach(lc, stmt->table_list)
		{
			RangeVar   *rv = (RangeVar *) lfirst(lc);

			if (!first)
				appendStringInfoString(&sql, ", ");
			first = false;
			appendStringInfoString(&sql, quote_literal_cstr(rv->relname));
		}
		appendStringInfoChar(&sql, ')');
	}
	appendStringInfoString(&sql,
						   " LEFT JOIN pg_catalog.pg_attribute a "
						   "ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
						   "LEFT JOIN pg_catalog.pg_attrdef d "
						   "ON d.adrelid = c.oid AND d.adnum = a.attnum "
						   "LEFT JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
						   "LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation "
						   "LEFT JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace "
						   "WHERE n.nspname = $1");
	appendStringInfoString(&sql, " ORDER BY c.relname, a.attnum");
	return sql.data;
}

/*
 * append_column
 *		Append the definition of the column of row ROW of RES.
 */
static void
append_column(StringInfo buf, PGresult *res, int row, ImportOptions *opts)
{
	const char *name = PQgetvalue(res, row, IMPORT_ATTNAME);
	const char *generated = PQgetvalue(res, row, IMPORT_GENERATED);
	bool		is_generated = generated[0] != '\0';

	appendStringInfo(buf, "  %s %s OPTIONS (column_name %s)",
					 quote_identifier(name), PQgetvalue(res, row, IMPORT_TYPE),
					 quote_literal_cstr(name));
	if (opts->collations && !PQgetisnull(res, row, IMPORT_COLLATION))
		appendStringInfo(buf, " COLLATE %s.%s",
						 quote_identifier(PQgetvalue(res, row, IMPORT_COLLATION_SCHEMA)),
						 quote_identifier(PQgetvalue(res, row, IMPORT_COLLATION)));
	if (!PQgetisnull(res, row, IMPORT_DEFAULT))
	{
		/* A generated column's expression is not a default. */
		if (is_generated && opts->generated)
			appendStringInfo(buf, " GENERATED ALWAYS AS (%s) STORED",
							 PQgetvalue(res, row, IMPORT_DEFAULT));
		else if (!is_generated && opts->defaults)
			appendStringInfo(buf, " DEFAULT %s", PQgetvalue(res, row, IMPORT_DEFAULT));
	}
	if (opts->not_null && strcmp(PQgetvalue(res, row, IMPORT_NOT_NULL), "t") == 0)
		appendStringInfoString(buf, " NOT NULL");
}

/*
 * afdwImportForeignSchema
 *		The CREATE FOREIGN TABLE commands that IMPORT FOREIGN SCHEMA STMT
 *		runs for server SERVEROID.
 */
List *
afdwImportForeignSchema(ImportForeignSchemaStmt *stmt, Oid serveroid)
{
	ImportOptions opts = import_options(stmt);
	ForeignServer *server = GetForeignServer(serveroid);
	UserMapping *user = GetUserMapping(GetUserId(), serveroid);
	AfdwConn   *conn = afdw_get_connection(user);
	const char *schema = stmt->remote_schema;
	List	   *commands = NIL;
	PGresult   *volatile res = NULL;

	PG_TRY();
	{
		StringInfoData buf;
		int			n;

		res = afdw_run_query(conn, catalog_query(stmt), 1, &schema);
		if (PQntuples(res) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_SCHEMA_NOT_FOUND),
					 errmsg("schema \"%s\" is not present on foreign server \"%s\"",
							schema, server->servername)));

		initStringInfo(&buf);
		n = PQntuples(res);
		for (int row = 0; row < n;)
		{
			const char *relname = PQgetvalue(res, row, IMPORT_RELNAME);
			bool		first = true;

			/* The schema's own row: it has no relation to import. */
			if (PQgetisnull(res, row, IMPORT_RELNAME))
			{
				row++;
				continue;
			}

			resetStringInfo(&buf);
			appendStringInfo(&buf, "CREATE FOREIGN TABLE %s (\n",
							 quote_identifier(relname));
			for (; row < n && strcmp(PQgetvalue(res, row, IMPORT_RELNAME), relname) == 0; row++)
			{
				if (PQgetisnull(res, row, IMPORT_ATTNAME))
					continue;
				if (!first)
					appendStringInfoString(&buf, ",\n");
				first = false;
				append_column(&buf, res, row, &opts);
			}
			appendStringInfo(&buf, "\n) SERVER %s OPTIONS (schema_name %s, table_name %s)",
							 quote_identifier(server->servername),
							 quote_literal_cstr(schema), quote_literal_cstr(relname));
			commands = lappend(commands, pstrdup(buf.data));
		}
	}
	PG_FINALLY();
	{
		PQclear(res);
		afdw_release_connection(conn);
	}
	PG_END_TRY();
	return commands;
}
