/*-------------------------------------------------------------------------
 *
 * connection_setup.c
 *		Opening remote connections of async_fdw: their session settings,
 *		the rules on passwords, their application_name, and the wait for
 *		their handshakes with their refusals; and closing them.
 *
 * The settings that make values travel alike on both sides go in the startup
 * packet, or, through a connection pooler (the pooler option), as SQL: once
 * per connection behind a session pooler, with each remote transaction behind
 * a transaction pooler (afdw_append_xact_settings, used by remote_xact.c).  A
 * connection the server refuses for lack of room is reported to the pool
 * rather than raised when the pool can do without it; a pool's first is asked
 * for again, and without preloading other backends learn through a lock that
 * it waits (afdw_room_wanted), and make room.
 *
 * A connection is started without waiting (afdw_connect_start) and its
 * handshake ended later, together with the others a query needs, in one
 * wait on all their sockets (afdw_connect_finish): they open in parallel.
 *
 * A connection is closed here too (afdw_disconnect_entry), whoever closes
 * it: the pool, the end of a local transaction (xact_callbacks.c), or a
 * handshake that failed.  With it goes what the connection kept of its
 * session (reset_session), which a new session also starts without.
 *
 * Neighbours: connection_pool.c keeps the pool and decides which connections
 * to open and whether one is optional (it alone calls afdw_connect_start),
 * and asks afdw_room_wanted before it opens or keeps a further one;
 * scan.c ends the handshakes of a statement's scans together with
 * afdw_connect_finish, and connection_pool.c that of a connection needed at
 * once; remote_commands.c runs the session settings' command, and forgets
 * what was in flight on a session that closes; options.c reads the options.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "common/hashfn.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "async_fdw.h"
#include "connection/connection_internal.h"

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
 * pooler: before 1.20 "unsupported startup parameter: options", from 1.20
 * on (which takes some settings in options) "unsupported startup parameter
 * in options: search_path".  async_fdw sends no other parameter pgbouncer
 * could refuse.
 */
#define AFDW_OPTIONS_REFUSED	"unsupported startup parameter"

/*
 * A pool's only connection refused for lack of room is asked for again,
 * the first time after AFDW_FIRST_RETRY_MS, each wait twice the one before:
 * with the budget (connection_budget.c, which keeps room for first connections)
 * AFDW_FIRST_RETRIES times (about 0.6 s in all); without it, the waits
 * capped at AFDW_FIRST_RETRY_MAX_MS, for up to AFDW_FIRST_WAIT_MS, while the
 * other backends give room back (see afdw_room_wanted).
 */
#define AFDW_FIRST_RETRIES		5
#define AFDW_FIRST_RETRY_MS		20
#define AFDW_FIRST_RETRY_MAX_MS	250
#define AFDW_FIRST_WAIT_MS		5000

/*
 * The last field of the advisory lock through which a backend waiting for
 * room for a first connection on a server tells the others (PostgreSQL's
 * own advisory locks use 1 and 2); pg_locks shows it as objsubid.
 */
#define AFDW_ROOM_LOCK_KIND		175

/*
 * A connection being opened (AfdwConn.connecting): what its handshake
 * needs until it ends, in a memory context of its own.
 */
struct AfdwConnecting
{
	MemoryContext cxt;
	const char **keywords;
	const char **values;
	int			options_index;	/* of "options" in keywords */
	char	   *users_options;	/* the users' own startup options */
	AfdwPooler	pooler;			/* as chosen; auto until the server tells */
	bool		optional;
	bool		held;			/* waits for the pool's first (held_back),
								 * or to be asked for again */
	int			retries;		/* of a first connection refused for lack
								 * of room */
	TimestampTz retry_at;		/* when to ask for it again (0: not) */
	TimestampTz refused_since;	/* its first refusal (0: none) */
	bool		announced;		/* holds room_tag: other backends know
								 * that it waits for room */
	LOCKTAG		room_tag;
	bool		one_through_pooler; /* optional, and a transaction pooler
									 * gets one connection (max_connections
									 * not set) */
	bool		check_password; /* the password rules apply */
	char	   *password;		/* the user mapping's, if any */
	long		timeout_ms;		/* connect_timeout, -1 for none */
	TimestampTz start;
	bool		last_look;		/* past its time: one wait without sleeping
								 * is left to find its socket ready */
	PostgresPollingStatusType poll;
};

/* How far connect_advance brought a handshake. */
typedef enum AfdwConnectStep
{
	CONNECT_WAITING,			/* wait for the socket as poll says */
	CONNECT_DONE,				/* the connection is open */
	CONNECT_REFUSED,			/* refused for lack of room, when the pool
								 * can do without it */
	CONNECT_DECLINED			/* an optional one that the pool does not
								 * want through the pooler found */
} AfdwConnectStep;

static bool password_required(UserMapping *user);
static bool password_exempt(UserMapping *user, ForeignServer *server);
static bool scram_passthrough(ForeignServer *server, UserMapping *user,
							  char **client_key, char **server_key);
static void check_password_rules(UserMapping *user, ForeignServer *server,
								  bool scram);
static void check_connection_password(PGconn *conn, const char *password,
									  const char *servername);
static void notice_receiver(void *arg, const PGresult *res);
static long connect_timeout_ms(List *options);
static char *expand_application_name(const char *fmt);
static char *choose_application_name(ForeignServer *server, UserMapping *user);
static char *plain_connect_error(const char *msg, char *sqlstate);
static void begin_attempt(AfdwConn *entry);
static void room_lock_tag(PGconn *conn, LOCKTAG *tag);
static void announce_wait(AfdwConn *entry);
static bool retry_first(AfdwConn *entry);
static bool held_back(AfdwConn *entry, AfdwConn **entries, int n);
static bool other_connection(AfdwConn *entry);
static AfdwConnectStep connect_failed(AfdwConn *entry);
static void connect_succeeded(AfdwConn *entry);
static AfdwConnectStep connect_advance(AfdwConn *entry, bool poll);
static void reset_session(AfdwConn *entry);

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
 * scram_passthrough
 *		Whether connections for USER to SERVER authenticate with the keys of
 *		this session's client's SCRAM authentication (use_scram_passthrough,
 *		PostgreSQL 18): if so, the keys in base64 in CLIENT_KEY and
 *		SERVER_KEY.
 *
 * The user mapping's setting wins over the server's; off by default.
 * With the option on, a session whose client did not authenticate with
 * SCRAM (trust, peer, a certificate, or an md5 verifier) has no keys to
 * pass: its connections follow the password rules as without the option.
 */
static bool
scram_passthrough(ForeignServer *server, UserMapping *user,
				  char **client_key, char **server_key)
{
	bool		on;

	on = afdw_bool_option(server->options, "use_scram_passthrough", false);
	on = afdw_bool_option(user->options, "use_scram_passthrough", on);
	return on && afdw_client_scram_keys(client_key, server_key);
}

/*
 * Whether a superuser's user mapping is held to the password rules on a
 * server that a non-superuser owns (afdw_hold_owners_to_passwords).
 */
static bool owners_held = false;

/*
 * afdw_hold_owners_to_passwords
 *		From now on, while ON, hold the user mappings of superusers to the
 *		password rules too on a server that a non-superuser owns; the
 *		setting before, to restore it.
 *
 * The owner of a server may create a user mapping on it for any role, a
 * superuser's too, with no password.  A superuser who queries a table of
 * that server chose to (as with postgres_fdw), but the recovery of prepared
 * transactions visits every server of the database by itself, as a
 * superuser: without this, the owner would have it log in to the host and
 * port of his choosing as whatever the local operating system account is
 * trusted as.
 */
bool
afdw_hold_owners_to_passwords(bool on)
{
	bool		before = owners_held;

	owners_held = on;
	return before;
}

/*
 * password_exempt
 *		Whether connections for USER to SERVER need not prove a password:
 *		USER is a superuser's mapping, on a server a superuser owns when
 *		afdw_hold_owners_to_passwords asks so.
 */
static bool
password_exempt(UserMapping *user, ForeignServer *server)
{
	if (!superuser_arg(user->userid))
		return false;
	return !owners_held || superuser_arg(server->owner);
}

/*
 * check_password_rules
 *		Refuse a non-superuser a connection for USER to SERVER that could not
 *		prove a password, before connecting.
 *
 * Without this, a non-superuser could log in to the remote server as
 * whatever the local server's operating system account is trusted as.
 * check_connection_password checks the connection once it is open.  A
 * connection by SCRAM pass-through (SCRAM) proves the client's own SCRAM
 * keys instead, and libpq is told to accept no other authentication
 * (require_auth): that counts as a password, as in postgres_fdw 18.
 */
static void
check_password_rules(UserMapping *user, ForeignServer *server, bool scram)
{
	const char *password = NULL;
	ListCell   *lc;

	if (password_exempt(user, server) || !password_required(user) || scram)
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
	if ((password == NULL || password[0] == '\0') && superuser_arg(user->userid))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("Server \"%s\" belongs to a non-superuser, and the recovery of prepared transactions connects through a superuser's user mapping there only with a password.",
						   server->servername),
				 errhint("Add option \"password\" to the user mapping, make a superuser the server's owner, or have a superuser set \"password_required\" to false.")));
	if (password == NULL || password[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required"),
				 errdetail("A non-superuser must give a password in the user mapping for server \"%s\".",
						   server->servername),
				 errhint("Add option \"password\" to the user mapping, or have a superuser set \"password_required\" to false.")));
}

/*
 * check_connection_password
 *		Refuse CONN, opened for a non-superuser whose user mapping gives
 *		PASSWORD, unless the server asked for that very password.
 */
static void
check_connection_password(PGconn *conn, const char *password,
						  const char *servername)
{
	if (!PQconnectionUsedPassword(conn))
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
	if (password == NULL || PQpass(conn) == NULL ||
		strcmp(PQpass(conn), password) != 0)
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
 * begin_attempt
 *		Start the handshake of ENTRY's connection with the parameters of
 *		its AfdwConnecting.
 */
static void
begin_attempt(AfdwConn *entry)
{
	AfdwConnecting *c = entry->connecting;
	PGconn	   *conn;

	conn = PQconnectStartParams(c->keywords, c->values, false);
	if (conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not allocate a connection to server \"%s\".",
						   NameStr(entry->servername))));
	/* The SQLSTATE of a refusal tells a full server from the rest. */
	PQsetErrorVerbosity(conn, PQERRORS_VERBOSE);
	entry->conn = conn;
	/* libpq's rule: start as if PQconnectPoll had asked to write. */
	c->poll = PGRES_POLLING_WRITING;
}

/*
 * afdw_connect_start
 *		Start opening ENTRY's connection for USER without waiting for it;
 *		afdw_connect_finish ends the handshake.  An OPTIONAL connection that
 *		the server refuses for lack of room (SQLSTATE class 53) is reported
 *		there, not raised.
 *
 * Connections started together open in parallel: the handshakes of a
 * query's connections cost about one connection's, not one each.
 */
void
afdw_connect_start(AfdwConn *entry, UserMapping *user, bool optional)
{
	ForeignServer *server = GetForeignServer(user->serverid);
	AfdwConnecting *c;
	MemoryContext cxt;
	MemoryContext old;
	int			n = 0;
	int			max;
	StringInfoData options;
	ListCell   *lc;
	char	   *appname;
	AfdwConn   *first = afdw_slot_zero(user->umid);
	char	   *scram_client_key = NULL;
	char	   *scram_server_key = NULL;
	bool		scram;

	Assert(entry->conn == NULL && entry->connecting == NULL);
	scram = scram_passthrough(server, user, &scram_client_key, &scram_server_key);
	check_password_rules(user, server, scram);

	entry->serverid = server->serverid;
	entry->userid = user->userid;
	namestrcpy(&entry->servername, server->servername);
	entry->server_hash = GetSysCacheHashValue1(FOREIGNSERVEROID,
											   ObjectIdGetDatum(server->serverid));
	entry->mapping_hash = GetSysCacheHashValue1(USERMAPPINGOID,
												ObjectIdGetDatum(user->umid));
	entry->keep = afdw_bool_option(server->options, "keep_connections", true);
	entry->parallel_commit = afdw_bool_option(server->options, "parallel_commit", true);
	entry->parallel_abort = afdw_bool_option(server->options, "parallel_abort", false);
	entry->two_phase = afdw_two_phase_option(server->options);
	/* A new session may reach another server, or one restarted since. */
	entry->can_prepare = -1;
	entry->keep_idle = afdw_int_option(server->options, "idle_connections",
									   AFDW_DEFAULT_IDLE_CONNECTIONS);
	entry->idle_limit = afdw_int_option(server->options, "idle_timeout",
										AFDW_DEFAULT_IDLE_TIMEOUT_MS);
	/* No idle timeout before its first transaction ends (remote_xact.c). */
	entry->idle_timeout = 0;
	/* A new session has nothing in flight and no remote transaction. */
	reset_session(entry);
	entry->idle_since = 0;

	cxt = AllocSetContextCreate(afdw_conn_cxt, "async_fdw connection attempt",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	c = palloc0(sizeof(AfdwConnecting));
	c->cxt = cxt;
	c->optional = optional;
	c->start = GetCurrentTimestamp();
	c->timeout_ms = connect_timeout_ms(server->options);
	c->pooler = afdw_pooler_option(server->options);
	/* What auto found before, for this connection or the first. */
	if (c->pooler == AFDW_POOLER_AUTO &&
		(entry->refuses_options || (first != NULL && first->refuses_options)))
		c->pooler = AFDW_POOLER_TRANSACTION;
	c->check_password = !password_exempt(user, server) && password_required(user) &&
		!scram;
	c->one_through_pooler = optional &&
		afdw_int_option(server->options, "max_connections", 0) <= 0;

	/*
	 * The users' options, then options, application_name,
	 * fallback_application_name, client_encoding, the three of SCRAM
	 * pass-through and the end.
	 */
	max = list_length(server->options) + list_length(user->options) + 8;
	c->keywords = palloc(sizeof(char *) * max);
	c->values = palloc(sizeof(char *) * max);

	initStringInfo(&options);
	foreach(lc, list_concat_copy(server->options, user->options))
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "password") == 0 &&
			list_member_ptr(user->options, def))
			c->password = pstrdup(defGetString(def));
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
		c->keywords[n] = pstrdup(def->defname);
		c->values[n] = pstrdup(defGetString(def));
		n++;
	}

	/*
	 * Only the users' own options go to a pooler: pgbouncer refuses
	 * startup options, and a pooler that takes them may drop them.  An
	 * empty string is not sent.
	 */
	c->users_options = pstrdup(options.data);
	if (c->pooler == AFDW_POOLER_NONE || c->pooler == AFDW_POOLER_AUTO)
		appendStringInfoString(&options, AFDW_SESSION_OPTIONS);
	c->options_index = n;
	c->keywords[n] = "options";
	c->values[n++] = options.data;
	appname = choose_application_name(server, user);
	if (appname != NULL)
	{
		c->keywords[n] = "application_name";
		c->values[n++] = appname;
	}
	c->keywords[n] = "fallback_application_name";
	c->values[n++] = "async_fdw";
	c->keywords[n] = "client_encoding";
	c->values[n++] = pstrdup(GetDatabaseEncodingName());

	/*
	 * After the users' options, so that theirs cannot replace them (libpq
	 * takes a keyword's last value): the keys, and no authentication but
	 * SCRAM, which proves them; a server that asks for a password or none
	 * is refused by libpq.
	 */
	if (scram)
	{
		c->keywords[n] = "scram_client_key";
		c->values[n++] = pstrdup(scram_client_key);
		c->keywords[n] = "scram_server_key";
		c->values[n++] = pstrdup(scram_server_key);
		c->keywords[n] = "require_auth";
		c->values[n++] = "scram-sha-256";
	}
	c->keywords[n] = NULL;
	c->values[n] = NULL;
	MemoryContextSwitchTo(old);
	/* The keys live on in the attempt's context only, gone with it. */
	if (scram)
	{
		pfree(scram_client_key);
		pfree(scram_server_key);
	}

	entry->connecting = c;
	begin_attempt(entry);
}

/*
 * afdw_connect_forget
 *		Drop what ENTRY's handshake kept, if any (afdw_disconnect_entry
 *		closes the connection itself).
 */
void
afdw_connect_forget(AfdwConn *entry)
{
	if (entry->connecting == NULL)
		return;
	if (entry->connecting->announced)
		LockRelease(&entry->connecting->room_tag, ShareLock, true);
	MemoryContextDelete(entry->connecting->cxt);
	entry->connecting = NULL;
}

/*
 * afdw_disconnect_entry
 *		Close ENTRY's connection, if any.
 */
void
afdw_disconnect_entry(AfdwConn *entry)
{
	if (entry->waitset != NULL)
	{
		FreeWaitEventSet(entry->waitset);
		entry->waitset = NULL;
	}
	if (entry->conn != NULL)
	{
		afdw_budget_finish(entry);
		ReleaseExternalFD();
	}
	afdw_connect_forget(entry);
	afdw_budget_release(entry);
	reset_session(entry);
}

/*
 * reset_session
 *		ENTRY's remote session is gone, or a new one is being opened: the
 *		one reset of what a connection kept of its session.  The wire's
 *		part here (what was in flight, whether the session was to be
 *		dropped or broke the protocol), the session layer's through its
 *		forget hook: the remote transaction and its state, prepared
 *		statements, a write deferred for its COMMIT (a prepared transaction
 *		of the session is left to recovery).
 */
static void
reset_session(AfdwConn *entry)
{
	afdw_forget_in_flight(entry);
	afdw_session_hooks->forget(entry);
	/* The next session starts trusted. */
	entry->invalidated = false;
	entry->violation = NULL;
}

/*
 * other_connection
 *		True if another connection of ENTRY's pool is open.
 */
static bool
other_connection(AfdwConn *entry)
{
	HASH_SEQ_STATUS scan;
	AfdwConn   *other;

	hash_seq_init(&scan, afdw_conn_hash);
	while ((other = (AfdwConn *) hash_seq_search(&scan)) != NULL)
	{
		if (other != entry && other->key.umid == entry->key.umid &&
			other->conn != NULL && other->connecting == NULL)
		{
			hash_seq_term(&scan);
			return true;
		}
	}
	return false;
}

/*
 * room_lock_tag
 *		The lock tag that stands for the room on the server CONN is opened
 *		to, or connected to: its host and port, whatever the database, the
 *		server object or the user mapping, since they all share its
 *		max_connections.
 */
static void
room_lock_tag(PGconn *conn, LOCKTAG *tag)
{
	const char *host = PQhost(conn);
	const char *port = PQport(conn);
	uint32		host_hash = 0;

	if (host != NULL)
		host_hash = hash_bytes((const unsigned char *) host, strlen(host));
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, host_hash,
						 (port != NULL) ? (uint32) atoi(port) : 0,
						 AFDW_ROOM_LOCK_KIND);
}

/*
 * announce_wait
 *		Tell the other backends that ENTRY, a pool's first connection, waits
 *		for room on its server: hold the server's lock in share mode, for
 *		the session, until the handshake ends (afdw_connect_forget).
 *
 * Without preloading the backends share no memory, but the lock table is
 * there for all: afdw_room_wanted, in the other backends, finds the lock
 * taken.  Waiters take it in share mode, so they do not exclude each other.
 * It is not waited for (another backend may test it in exclusive mode at
 * this moment): the next refusal tries again.
 */
static void
announce_wait(AfdwConn *entry)
{
	AfdwConnecting *c = entry->connecting;

	if (c->announced)
		return;
	room_lock_tag(entry->conn, &c->room_tag);
	c->announced = afdw_try_session_lock(&c->room_tag, ShareLock) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * afdw_room_wanted
 *		True if, without preloading, another backend waits for room for a
 *		first connection on the server ENTRY is open (or being opened) to.
 *
 * Its lock (announce_wait) is then taken in share mode: taking it here in
 * exclusive mode, without waiting, fails.  Two operations on the shared
 * lock table, made only before a connection past a pool's first opens and
 * when a transaction ends with such connections open.  With the budget
 * (connection_budget.c) the coordinator knows who waits itself: false.
 */
bool
afdw_room_wanted(AfdwConn *entry)
{
	LOCKTAG		tag;

	if (afdw_budget_active() || entry->conn == NULL)
		return false;
	room_lock_tag(entry->conn, &tag);
	if (afdw_try_session_lock(&tag, ExclusiveLock) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, ExclusiveLock, true);
	return false;
}

/*
 * retry_first
 *		ENTRY, a pool's only connection, was just refused for lack of room:
 *		true, with the time to ask again set, if it is to be asked for
 *		again; false when the query is to fail.
 *
 * With the budget, AFDW_FIRST_RETRIES times.  Without it, where sessions
 * that got their connections first would otherwise keep their further
 * ones in use query after query, the wait is announced (announce_wait):
 * the other backends then open no further connection to the server and
 * close theirs at the end of their transactions, and the first connection
 * is asked for again, at most AFDW_FIRST_RETRY_MAX_MS apart, for up to
 * AFDW_FIRST_WAIT_MS or the connect_timeout.  The wait in
 * afdw_connect_finish ends on cancel and statement_timeout.
 */
static bool
retry_first(AfdwConn *entry)
{
	AfdwConnecting *c = entry->connecting;
	TimestampTz now = GetCurrentTimestamp();
	long		delay = AFDW_FIRST_RETRY_MS << Min(c->retries, 8);

	if (afdw_budget_active())
	{
		if (c->retries >= AFDW_FIRST_RETRIES)
			return false;
	}
	else
	{
		if (c->refused_since == 0)
			c->refused_since = now;
		delay = Min(delay, AFDW_FIRST_RETRY_MAX_MS);
		if (TimestampDifferenceExceeds(c->refused_since, now,
									   AFDW_FIRST_WAIT_MS - delay))
			return false;
		if (c->timeout_ms >= 0 &&
			TimestampDifferenceExceeds(c->start, now, c->timeout_ms - delay))
			return false;
		announce_wait(entry);
	}
	c->retry_at = TimestampTzPlusMilliseconds(now, delay);
	c->retries++;
	return true;
}

/*
 * connect_failed
 *		ENTRY's attempt failed: start another when the server refused only
 *		something async_fdw can do without (CONNECT_WAITING), give up an
 *		optional connection that a transaction pooler would not serve well
 *		(CONNECT_DECLINED), report a refusal for lack of room that the pool
 *		can do without (CONNECT_REFUSED), else raise the error.
 */
static AfdwConnectStep
connect_failed(AfdwConn *entry)
{
	AfdwConnecting *c = entry->connecting;
	const char *raw = PQerrorMessage(entry->conn);
	AfdwConn   *first = afdw_slot_zero(entry->key.umid);
	char		sqlstate[6];
	char	   *msg;

	/*
	 * pgbouncer's refusal of our options: auto connects again without
	 * them, within the same connect_timeout, and takes the server for a
	 * transaction pooler, which is right for its session mode too.
	 */
	if (c->pooler == AFDW_POOLER_AUTO && strstr(raw, AFDW_OPTIONS_REFUSED) != NULL)
	{
		entry->refuses_options = true;
		if (first != NULL)
			first->refuses_options = true;

		/*
		 * Through a transaction pooler a pool has one connection unless
		 * max_connections says otherwise (see afdw_pool_acquire): a
		 * further one started before the pooler was known is given up,
		 * and its scans share the first.
		 */
		if (c->one_through_pooler)
			return CONNECT_DECLINED;
		c->pooler = AFDW_POOLER_TRANSACTION;
		c->values[c->options_index] = c->users_options;
		PQfinish(entry->conn);
		entry->conn = NULL;
		begin_attempt(entry);
		return CONNECT_WAITING;
	}

	/*
	 * A refusal for lack of room is reported rather than raised for an
	 * optional connection, or while another connection of the pool is
	 * open: the handshakes of a query run together, and the place the
	 * server had may have gone to a later connection rather than to the
	 * first.  afdw_connection_ready raises it if no connection of the pool
	 * opens.
	 */
	msg = plain_connect_error(raw, sqlstate);
	if (strncmp(sqlstate, "53", 2) == 0 &&
		(c->optional || other_connection(entry)))
	{
		ereport(DEBUG1,
				(errmsg_internal("server \"%s\" refused a further connection: %s",
								 NameStr(entry->servername), msg)));
		if (first != NULL)
			first->refused_at = GetCurrentTimestamp();
		if (entry->refusal != NULL)
			pfree(entry->refusal);
		entry->refusal = MemoryContextStrdup(afdw_conn_cxt, msg);
		return CONNECT_REFUSED;
	}

	/*
	 * The pool's only connection, refused for lack of room: the places of
	 * a busy server come and go (a session gives back its connections past
	 * the first at the end of a transaction in which the server refused
	 * it one, or in which another backend waited, afdw_trim_idle_pools),
	 * so it is asked for again for a while before the query fails.
	 */
	if (strncmp(sqlstate, "53", 2) == 0 && retry_first(entry))
	{
		ereport(DEBUG1,
				(errmsg_internal("server \"%s\" refused a first connection, asking again: %s",
								 NameStr(entry->servername), msg)));
		if (entry->refusal != NULL)
			pfree(entry->refusal);
		entry->refusal = MemoryContextStrdup(afdw_conn_cxt, msg);
		pfree(msg);
		return CONNECT_WAITING;
	}
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not connect to server \"%s\"",
					NameStr(entry->servername)),
			 errdetail_internal("%s", msg)));
	return CONNECT_REFUSED;		/* keep the compiler quiet */
}

/*
 * connect_succeeded
 *		ENTRY's handshake is over: check the password rules, set the
 *		connection up for use and drop the handshake's state.
 */
static void
connect_succeeded(AfdwConn *entry)
{
	AfdwConnecting *c = entry->connecting;
	PGconn	   *conn = entry->conn;

	if (c->check_password)
		check_connection_password(conn, c->password, NameStr(entry->servername));
	PQsetErrorVerbosity(conn, PQERRORS_DEFAULT);
	PQsetNoticeReceiver(conn, notice_receiver, NameStr(entry->servername));
	entry->pooler = (c->pooler == AFDW_POOLER_AUTO) ? AFDW_POOLER_NONE : c->pooler;
	entry->opened_at = GetCurrentTimestamp();
	afdw_connect_forget(entry);

	/*
	 * A session pooler keeps this server session for the connection: the
	 * settings are made once, at one round trip.
	 */
	if (entry->pooler == AFDW_POOLER_SESSION)
	{
		PG_TRY();
		{
			afdw_run_command(entry, AFDW_SESSION_SETS);
		}
		PG_CATCH();
		{
			afdw_disconnect_entry(entry);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
}

/*
 * connect_advance
 *		Take ENTRY's handshake one step further (POLL: the socket is ready
 *		as last asked for, so libpq may read or write) and say where it
 *		stands.
 */
static AfdwConnectStep
connect_advance(AfdwConn *entry, bool poll)
{
	AfdwConnecting *c = entry->connecting;

	if (poll && PQstatus(entry->conn) != CONNECTION_BAD)
		c->poll = PQconnectPoll(entry->conn);
	if (PQstatus(entry->conn) == CONNECTION_BAD || c->poll == PGRES_POLLING_FAILED)
		return connect_failed(entry);
	if (c->poll == PGRES_POLLING_OK)
	{
		connect_succeeded(entry);
		return CONNECT_DONE;
	}
	return CONNECT_WAITING;
}

/*
 * held_back
 *		True if ENTRY, an optional connection among the N of ENTRIES, is to
 *		wait before its handshake goes on: without a budget, until the
 *		first connection of its pool, among ENTRIES, is open or failed.
 *
 * Its TCP connection is made meanwhile; only its startup packet waits. When
 * many sessions start at once on a server with little room, each session's
 * first connection, which the query cannot do without, then comes before the
 * optional ones of the others.  With the budget (connection_budget.c) the
 * coordinator keeps room for first connections itself, and all the handshakes
 * of a query go on together.
 */
static bool
held_back(AfdwConn *entry, AfdwConn **entries, int n)
{
	if (!entry->connecting->optional || afdw_budget_active())
		return false;
	for (int i = 0; i < n; i++)
	{
		AfdwConn   *other = entries[i];

		if (other != entry && other->connecting != NULL &&
			!other->connecting->optional &&
			other->key.umid == entry->key.umid)
			return true;
	}
	return false;
}

/*
 * afdw_connect_finish
 *		End the handshakes of the N connections of ENTRIES that are being
 *		opened (others are skipped), waiting for all of them at once,
 *		interruptibly and within each one's connect_timeout.
 *
 * A connection refused for lack of room while another of its pool may
 * open, or an optional one found to go through a transaction pooler that
 * gets one connection, is closed (its entry's conn is NULL afterwards);
 * any other failure raises an error, after closing every connection of
 * ENTRIES still being opened.
 */
void
afdw_connect_finish(AfdwConn **entries, int n)
{
	WaitEvent  *events = palloc(sizeof(WaitEvent) * (n + 2));

	PG_TRY();
	{
		for (;;)
		{
			WaitEventSet *set;
			long		wait = -1;
			int			waiting = 0;
			int			nevents;

			/* Where each stands, and how long the wait may last. */
			for (int i = 0; i < n; i++)
			{
				AfdwConn   *entry = entries[i];
				AfdwConnecting *c = entry->connecting;
				long		left;

				if (c == NULL)
					continue;

				/* A refused first connection, to be asked for again. */
				if (c->retry_at != 0)
				{
					long		until = (long) TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																		   c->retry_at);

					if (until > 0)
					{
						c->held = true;
						waiting++;
						if (wait < 0 || until < wait)
							wait = until;
						continue;
					}
					c->retry_at = 0;

					/*
					 * Another connection of the pool opened meanwhile: the
					 * scans share it rather than knock again.
					 */
					if (other_connection(entry))
					{
						afdw_disconnect_entry(entry);
						continue;
					}
					PQfinish(entry->conn);
					entry->conn = NULL;
					begin_attempt(entry);
				}
				c->held = held_back(entry, entries, n);
				if (connect_advance(entry, false) != CONNECT_WAITING)
				{
					/* Refused or declined: closed. */
					if (entry->connecting != NULL)
						afdw_disconnect_entry(entry);
					continue;
				}
				waiting++;
				if (c->retry_at != 0)
				{
					/* Refused just now: no socket to wait on until then. */
					c->held = true;
					if (wait < 0 || wait > AFDW_FIRST_RETRY_MS)
						wait = AFDW_FIRST_RETRY_MS;
					continue;
				}
				if (c->timeout_ms < 0)
					continue;
				left = c->timeout_ms -
					(long) TimestampDifferenceMilliseconds(c->start,
														   GetCurrentTimestamp());
				if (left <= 0)
				{
					/*
					 * As libpq does, the time is up only when a wait finds
					 * the socket not ready: a backend that did not run for
					 * a while (a loaded machine) does not give up on an
					 * answer that came meanwhile.
					 */
					if (c->last_look)
						ereport(ERROR,
								(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
								 errmsg("could not connect to server \"%s\"",
										NameStr(entry->servername)),
								 errdetail("The connection attempt took longer than connect_timeout.")));
					c->last_look = true;
					left = 0;
				}
				if (wait < 0 || left < wait)
					wait = left;
			}
			if (waiting == 0)
				break;

			/*
			 * A set of its own each time: libpq may move a handshake to
			 * another socket (the next address of a host).
			 */
			set = afdw_create_wait_set(true, NULL, waiting + 2);
			AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
			/* (A single-user backend has no postmaster to watch.) */
			if (IsUnderPostmaster)
				AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET,
								  NULL, NULL);
			for (int i = 0; i < n; i++)
			{
				AfdwConnecting *c = entries[i]->connecting;

				if (c == NULL || c->held)
					continue;
				AddWaitEventToSet(set, (c->poll == PGRES_POLLING_READING) ?
								  WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE,
								  PQsocket(entries[i]->conn), NULL, entries[i]);
			}
			nevents = WaitEventSetWait(set, wait, events, waiting + 2,
									   afdw_wait_event(AFDW_WAIT_CONNECT));
			FreeWaitEventSet(set);

			for (int i = 0; i < nevents; i++)
			{
				AfdwConn   *entry = (AfdwConn *) events[i].user_data;
				AfdwConnectStep step;

				if (events[i].events & WL_LATCH_SET)
				{
					ResetLatch(MyLatch);
					CHECK_FOR_INTERRUPTS();
					continue;
				}
				if (entry == NULL || entry->connecting == NULL)
					continue;
				/* It moved: past its time, it gets another look. */
				entry->connecting->last_look = false;
				step = connect_advance(entry, true);
				if (step == CONNECT_REFUSED || step == CONNECT_DECLINED)
					afdw_disconnect_entry(entry);
			}
		}
	}
	PG_CATCH();
	{
		for (int i = 0; i < n; i++)
		{
			if (entries[i]->connecting != NULL)
				afdw_disconnect_entry(entries[i]);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();
	pfree(events);
}
