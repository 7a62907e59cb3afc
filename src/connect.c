/*-------------------------------------------------------------------------
 *
 * connect.c
 *		Opening one remote connection of async_fdw: its session settings,
 *		the rules on passwords, its application_name, and the wait for the
 *		connection with its refusals.
 *
 * The settings that make values travel alike on both sides go in the
 * startup packet, or, through a connection pooler (the pooler option), as
 * SQL: once per connection behind a session pooler, with each remote
 * transaction behind a transaction pooler (afdw_append_xact_settings, used
 * by xact.c).  A connection the server refuses for lack of room is reported
 * to the pool rather than raised when the pool can do without it.
 *
 * Neighbours: connection.c keeps the pool and decides which connections
 * to open and whether one is optional (afdw_connect_entry is its only
 * caller); remote.c runs the session settings' command; option.c reads
 * the options.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "async_fdw.h"
#include "connection_internal.h"

/*
 * Session settings every connection gets in its startup packet, so that
 * values travel in formats both sides read alike and remote SQL resolves
 * names in pg_catalog only.  They cost no round trip.
 */
#define AFDW_SESSION_OPTIONS \
	"-c search_path=pg_catalog -c TimeZone=UTC -c DateStyle=ISO " \
	"-c IntervalStyle=postgres -c extra_float_digits=3"

/*
 * The same settings as SQL, for a pooler that refuses startup options or
 * drops them: set once after connecting when the pooler keeps a server
 * session per connection, at the start of every remote transaction, in
 * the same send, when it may hand each transaction another server session.
 * The three lists say the same.
 */
#define AFDW_SESSION_SETS \
	"SET search_path = pg_catalog; SET TimeZone = 'UTC'; SET DateStyle = ISO; " \
	"SET IntervalStyle = postgres; SET extra_float_digits = 3"
#define AFDW_XACT_SETS \
	"SET LOCAL search_path = pg_catalog; SET LOCAL TimeZone = 'UTC'; " \
	"SET LOCAL DateStyle = ISO; SET LOCAL IntervalStyle = postgres; " \
	"SET LOCAL extra_float_digits = 3"

/*
 * How pgbouncer refuses a startup packet with options (its default
 * configuration), which the pooler option auto takes for a transaction
 * pooler.
 */
#define AFDW_OPTIONS_REFUSED	"unsupported startup parameter: options"

static bool password_required(UserMapping *user);
static void check_password_rules(UserMapping *user, PGconn *conn,
								 const char *servername);
static void notice_receiver(void *arg, const PGresult *res);
static long connect_timeout_ms(List *options);
static char *expand_application_name(const char *fmt);
static char *choose_application_name(ForeignServer *server, UserMapping *user);
static char *plain_connect_error(const char *msg, char *sqlstate);

/*
 * afdw_append_xact_settings
 *		Append to SQL, which opens a remote transaction through a
 *		transaction pooler, the session settings made for that transaction
 *		only: the server session may change with each transaction.
 */
void
afdw_append_xact_settings(StringInfo sql)
{
	appendStringInfoString(sql, "; " AFDW_XACT_SETS);
}

/*
 * password_required
 *		Whether USER's mapping demands that the remote server asks for a
 *		password (true unless a superuser said otherwise).
 */
static bool
password_required(UserMapping *user)
{
	return afdw_bool_option(user->options, "password_required", true);
}

/*
 * check_password_rules
 *		Refuse a non-superuser a connection that did not prove a password.
 *
 * Without this, a non-superuser could log in to the remote server as
 * whatever the local server's operating system account is trusted as.
 * Called before connecting (CONN NULL) and once connected.
 */
static void
check_password_rules(UserMapping *user, PGconn *conn, const char *servername)
{
	const char *password = NULL;
	ListCell   *lc;

	if (superuser_arg(user->userid) || !password_required(user))
		return;

	foreach(lc, user->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "password") == 0)
			password = defGetString(def);
	}

	/*
	 * An empty password counts as none: libpq then looks the password up
	 * in the local server's password file, which is not the user's.
	 */
	if (conn == NULL && (password == NULL || password[0] == '\0'))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("A non-superuser must give a password in the user mapping for server \"%s\".",
						   servername),
				 errhint("Add option \"password\" to the user mapping, or have a superuser set \"password_required\" to false.")));

	if (conn != NULL && !PQconnectionUsedPassword(conn))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Server \"%s\" did not ask for the password, and a non-superuser may only connect with one.",
						   servername),
				 errhint("Make the remote server ask for a password, or have a superuser set \"password_required\" to false.")));

	/*
	 * The password that libpq sent must be the mapping's own, not one it
	 * found elsewhere (a password file, a service file): a non-empty
	 * password keeps libpq from looking, but do not depend on that.
	 */
	if (conn != NULL &&
		(password == NULL || PQpass(conn) == NULL ||
		 strcmp(PQpass(conn), password) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("The connection to server \"%s\" used a password other than the user mapping's.",
						   servername),
				 errhint("A non-superuser may only connect with the password of the user mapping.")));
}

/*
 * notice_receiver
 *		Pass remote notices on at DEBUG1: they concern the remote session.
 */
static void
notice_receiver(void *arg, const PGresult *res)
{
	char	   *msg = pchomp(PQresultErrorMessage(res));

	ereport(DEBUG1,
			(errmsg_internal("remote server \"%s\": %s", (char *) arg, msg)));
	pfree(msg);
}

/*
 * connect_timeout_ms
 *		The connect_timeout of OPTIONS in milliseconds, or -1 for none.
 *
 * libpq ignores connect_timeout when the caller drives the connection with
 * PQconnectPoll, so async_fdw enforces it itself, over the whole attempt.
 */
static long
connect_timeout_ms(List *options)
{
	int			secs = afdw_int_option(options, "connect_timeout", 0);

	if (secs <= 0)
		return -1;
	return (long) Max(secs, 2) * 1000L;
}

/*
 * expand_application_name
 *		FMT with its escapes replaced by facts about the local session.
 *
 * The escapes are postgres_fdw 15's: %a the local application_name, %c the
 * session id (as in log_line_prefix), %C cluster_name, %d the database,
 * %p the backend's process id, %u the user who logged in, %% a percent
 * sign.  Like postgres_fdw, an unknown escape and a lone trailing '%' are
 * dropped, and there is no padding (%-10u).  Characters other than
 * printable ASCII and the length are left to the remote server, which
 * treats them as for any client (replaced by '?', cut at 63 bytes).
 */
static char *
expand_application_name(const char *fmt)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (const char *p = fmt; *p != '\0'; p++)
	{
		if (*p != '%')
		{
			appendStringInfoChar(&buf, *p);
			continue;
		}
		if (p[1] == '\0')
			break;
		p++;
		switch (*p)
		{
			case '%':
				appendStringInfoChar(&buf, '%');
				break;
			case 'a':
				if (application_name != NULL)
					appendStringInfoString(&buf, application_name);
				break;
			case 'c':
				appendStringInfo(&buf, "%lx.%x", (long) MyStartTime, MyProcPid);
				break;
			case 'C':
				if (cluster_name != NULL)
					appendStringInfoString(&buf, cluster_name);
				break;
			case 'p':
				appendStringInfo(&buf, "%d", MyProcPid);
				break;
			case 'd':
			case 'u':
				/*
				 * The names the client logged in with, looked up rather
				 * than read from MyProcPort, whose header needs GSSAPI's.
				 * A background worker has no client: nothing, as in
				 * postgres_fdw.
				 */
				if (MyProcPort != NULL)
				{
					const char *name = (*p == 'd') ?
						get_database_name(MyDatabaseId) :
						GetUserNameFromId(GetAuthenticatedUserId(), true);

					appendStringInfoString(&buf, name != NULL ? name : "[unknown]");
				}
				break;
			default:
				break;
		}
	}
	return buf.data;
}

/*
 * choose_application_name
 *		The application_name of a new connection for SERVER and USER, or
 *		NULL to leave it to fallback_application_name.
 *
 * As in postgres_fdw 15, the async_fdw.application_name setting comes
 * first, then the user mapping's and the server's application_name; the
 * first that is not empty once its escapes are replaced wins.
 */
static char *
choose_application_name(ForeignServer *server, UserMapping *user)
{
	List	   *candidates = NIL;
	List	   *option_lists[2];
	ListCell   *lc;

	if (afdw_application_name != NULL && afdw_application_name[0] != '\0')
		candidates = lappend(candidates, afdw_application_name);

	option_lists[0] = user->options;
	option_lists[1] = server->options;
	for (size_t i = 0; i < lengthof(option_lists); i++)
	{
		foreach(lc, option_lists[i])
		{
			DefElem    *def = (DefElem *) lfirst(lc);

			if (strcmp(def->defname, "application_name") == 0)
				candidates = lappend(candidates, defGetString(def));
		}
	}

	foreach(lc, candidates)
	{
		char	   *name = expand_application_name((const char *) lfirst(lc));

		if (name[0] != '\0')
			return name;
		pfree(name);
	}
	return NULL;
}

/*
 * plain_connect_error
 *		MSG, libpq's message of a failed connection attempt in verbose form,
 *		as libpq gives it by default (without SQLSTATEs and locations),
 *		palloc'd and without its final newline; the SQLSTATE of the first
 *		server error in it goes to SQLSTATE ("" if the server sent none).
 *
 * The verbose form puts "XXXXX: " after the severity of each server error,
 * and ends each with a line "LOCATION:  ...".
 */
static char *
plain_connect_error(const char *msg, char *sqlstate)
{
	StringInfoData out;
	const char *line = msg;

	sqlstate[0] = '\0';
	initStringInfo(&out);
	while (*line != '\0')
	{
		const char *end = strchr(line, '\n');
		int			len = end ? (int) (end - line) + 1 : (int) strlen(line);
		const char *p;

		if (strncmp(line, "LOCATION:  ", 11) == 0)
		{
			line += len;
			continue;
		}
		for (p = line; p + 10 <= line + len; p++)
		{
			if (p[0] == ':' && p[1] == ' ' && p[2] == ' ' &&
				strspn(p + 3, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") >= 5 &&
				p[8] == ':' && p[9] == ' ')
				break;
		}
		if (p + 10 <= line + len)
		{
			if (sqlstate[0] == '\0')
				strlcpy(sqlstate, p + 3, 6);
			appendBinaryStringInfo(&out, line, (int) (p - line) + 3);
			appendBinaryStringInfo(&out, p + 10, len - (int) (p + 10 - line));
		}
		else
			appendBinaryStringInfo(&out, line, len);
		line += len;
	}
	return pchomp(out.data);
}

/*
 * afdw_connect_entry
 *		Open ENTRY's connection for USER, waiting interruptibly; false,
 *		without an error, when OPTIONAL and the server refused it for lack
 *		of room (SQLSTATE class 53).
 */
bool
afdw_connect_entry(AfdwConn *entry, UserMapping *user, bool optional,
			  int idle_timeout_ms)
{
	ForeignServer *server = GetForeignServer(user->serverid);
	const char **keywords;
	const char **values;
	int			n = 0;
	int			max;
	int			options_index;
	StringInfoData options;
	char	   *volatile users_options;
	ListCell   *lc;
	PGconn	   *volatile conn = NULL;
	volatile bool refused = false;
	volatile int idle_timeout = idle_timeout_ms;
	long		timeout;
	TimestampTz start = GetCurrentTimestamp();
	char	   *appname;
	volatile AfdwPooler pooler = afdw_pooler_option(server->options);
	AfdwConn   *first = afdw_slot_zero(user->umid);

	entry->serverid = server->serverid;
	namestrcpy(&entry->servername, server->servername);
	entry->server_hash = GetSysCacheHashValue1(FOREIGNSERVEROID,
											   ObjectIdGetDatum(server->serverid));
	entry->mapping_hash = GetSysCacheHashValue1(USERMAPPINGOID,
												ObjectIdGetDatum(user->umid));
	entry->keep = afdw_bool_option(server->options, "keep_connections", true);
	entry->keep_idle = afdw_int_option(server->options, "idle_connections",
									   AFDW_DEFAULT_IDLE_CONNECTIONS);
	/* A new session has nothing in flight and no remote transaction. */
	entry->invalidated = false;
	entry->changing_xact_state = false;
	entry->busy = false;
	afdw_reset_xact_state(entry, 1);

	/* What auto found before, for this connection or the first. */
	if (pooler == AFDW_POOLER_AUTO &&
		(entry->refuses_options || (first != NULL && first->refuses_options)))
		pooler = AFDW_POOLER_TRANSACTION;

	check_password_rules(user, NULL, server->servername);

	/*
	 * The users' options, then options, application_name,
	 * fallback_application_name, client_encoding and the end.
	 */
	max = list_length(server->options) + list_length(user->options) + 5;
	keywords = palloc(sizeof(char *) * max);
	values = palloc(sizeof(char *) * max);

	initStringInfo(&options);
	foreach(lc, list_concat_copy(server->options, user->options))
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (!afdw_is_libpq_option(def->defname))
			continue;
		/* Its escapes are replaced below. */
		if (strcmp(def->defname, "application_name") == 0)
			continue;
		/* Users' own startup options go first, so that ours win. */
		if (strcmp(def->defname, "options") == 0)
		{
			appendStringInfo(&options, "%s ", defGetString(def));
			continue;
		}
		keywords[n] = def->defname;
		values[n] = defGetString(def);
		n++;
	}
	/*
	 * Only the users' own options go to a pooler: pgbouncer refuses
	 * startup options, and a pooler that takes them may drop them.  An
	 * empty string is not sent.
	 */
	users_options = pstrdup(options.data);
	if (pooler == AFDW_POOLER_NONE || pooler == AFDW_POOLER_AUTO)
	{
		appendStringInfoString(&options, AFDW_SESSION_OPTIONS);
		if (idle_timeout > 0)
			appendStringInfo(&options, " -c idle_session_timeout=%d", idle_timeout);
	}
	else
		idle_timeout = 0;
	options_index = n;
	keywords[n] = "options";
	values[n++] = options.data;
	appname = choose_application_name(server, user);
	if (appname != NULL)
	{
		keywords[n] = "application_name";
		values[n++] = appname;
	}
	keywords[n] = "fallback_application_name";
	values[n++] = "async_fdw";
	keywords[n] = "client_encoding";
	values[n++] = GetDatabaseEncodingName();
	keywords[n] = NULL;
	values[n] = NULL;

	timeout = connect_timeout_ms(server->options);

	PG_TRY();
	{
		PostgresPollingStatusType poll;

retry:
		poll = PGRES_POLLING_WRITING;
		conn = PQconnectStartParams(keywords, values, false);
		if (conn == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Could not allocate a connection to server \"%s\".",
							   server->servername)));
		/* The SQLSTATE of a refusal tells a full server from the rest. */
		PQsetErrorVerbosity(conn, PQERRORS_VERBOSE);

		while (PQstatus(conn) != CONNECTION_BAD &&
			   poll != PGRES_POLLING_OK && poll != PGRES_POLLING_FAILED)
		{
			int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH;
			long		wait = -1;
			int			rc;

			events |= (poll == PGRES_POLLING_READING) ?
				WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
			if (timeout >= 0)
			{
				wait = timeout - (long) (TimestampDifferenceMilliseconds(start,
																		 GetCurrentTimestamp()));
				if (wait <= 0)
					ereport(ERROR,
							(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
							 errmsg("could not connect to server \"%s\"",
									server->servername),
							 errdetail("The connection attempt took longer than connect_timeout.")));
				events |= WL_TIMEOUT;
			}

			rc = WaitLatchOrSocket(MyLatch, events, PQsocket(conn), wait,
								   PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				CHECK_FOR_INTERRUPTS();
			}
			if (rc & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
				poll = PQconnectPoll(conn);
		}

		/*
		 * pgbouncer's refusal of our options: auto connects again without
		 * them, within the same connect_timeout, and takes the server for
		 * a transaction pooler, which is right for its session mode too.
		 */
		if (PQstatus(conn) != CONNECTION_OK && pooler == AFDW_POOLER_AUTO &&
			strstr(PQerrorMessage(conn), AFDW_OPTIONS_REFUSED) != NULL)
		{
			PQfinish(conn);
			conn = NULL;
			pooler = AFDW_POOLER_TRANSACTION;
			entry->refuses_options = true;
			if (first != NULL)
				first->refuses_options = true;
			values[options_index] = users_options;
			idle_timeout = 0;
			goto retry;
		}

		if (PQstatus(conn) != CONNECTION_OK)
		{
			char		sqlstate[6];
			char	   *msg = plain_connect_error(PQerrorMessage(conn), sqlstate);

			if (optional && strncmp(sqlstate, "53", 2) == 0)
			{
				refused = true;
				ereport(DEBUG1,
						(errmsg_internal("server \"%s\" refused a further connection: %s",
										 server->servername, msg)));
			}
			else
				ereport(ERROR,
						(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
						 errmsg("could not connect to server \"%s\"",
								server->servername),
						 errdetail_internal("%s", msg)));
		}
		else
			check_password_rules(user, conn, server->servername);

	}
	PG_CATCH();
	{
		if (conn != NULL)
			PQfinish(conn);
		PG_RE_THROW();
	}
	PG_END_TRY();

	pfree(keywords);
	pfree(values);
	pfree(options.data);
	pfree(users_options);
	if (appname != NULL)
		pfree(appname);

	if (refused)
	{
		PQfinish(conn);
		return false;
	}
	PQsetErrorVerbosity(conn, PQERRORS_DEFAULT);
	PQsetNoticeReceiver(conn, notice_receiver, NameStr(entry->servername));
	entry->conn = conn;
	entry->opened_at = GetCurrentTimestamp();
	entry->pooler = (pooler == AFDW_POOLER_AUTO) ? AFDW_POOLER_NONE : pooler;
	entry->idle_timeout = idle_timeout;

	/*
	 * A session pooler keeps this server session for the connection: the
	 * settings are made once, at one round trip.  On failure the caller
	 * gives the file descriptor back.
	 */
	if (entry->pooler == AFDW_POOLER_SESSION)
	{
		PG_TRY();
		{
			afdw_run_command(entry, AFDW_SESSION_SETS);
		}
		PG_CATCH();
		{
			if (entry->waitset != NULL)
			{
				FreeWaitEventSet(entry->waitset);
				entry->waitset = NULL;
			}
			PQfinish(entry->conn);
			entry->conn = NULL;
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	return true;
}
