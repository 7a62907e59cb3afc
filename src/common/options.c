/*-------------------------------------------------------------------------
 *
 * options.c
 *		The option validator of async_fdw and the lookup of option values.
 *
 * The names follow postgres_fdw so that moving a table from postgres_fdw is
 * a change of the wrapper's name.  The libpq connection options are taken
 * from libpq itself at run time, so a newer libpq brings its new options.
 * The planner (scan_paths.c), connection_pool.c and analyze.c read the values
 * through the lookups here.  afdw_server_is_ours says whether a server is
 * async_fdw's, for every caller.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/reloptions.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "async_fdw.h"

/* Kinds of option value, used for validation. */
typedef enum AfdwOptionKind
{
	AFDW_OPT_STRING,			/* anything goes; libpq checks it */
	AFDW_OPT_BOOL,
	AFDW_OPT_POSITIVE_INT,
	AFDW_OPT_MILLISECONDS,		/* 0 to INT_MAX */
	AFDW_OPT_COST,
	AFDW_OPT_FETCH_MODE,		/* auto, stream or cursor */
	AFDW_OPT_EXTENSIONS,		/* a list of extension names */
	AFDW_OPT_POOLER,			/* auto, none, session or transaction */
	AFDW_OPT_CONNECTIONS,		/* 1 to AFDW_MAX_MAX_CONNECTIONS */
	AFDW_OPT_BUDGET,			/* 0 (none) to INT_MAX */
	AFDW_OPT_SAMPLING,			/* off, auto, random, system or bernoulli */
	AFDW_OPT_TWO_PHASE,			/* off, auto or on */
	AFDW_OPT_SERVERS			/* a list of async_fdw server names */
} AfdwOptionKind;

/* One valid option: its name, where it may appear, how its value looks. */
typedef struct AfdwOption
{
	const char *name;
	Oid			catalog;		/* pg_foreign_server etc. */
	AfdwOptionKind kind;
	bool		is_libpq;		/* passed to PQconnectStartParams */
} AfdwOption;

/* Options of async_fdw's own, on top of libpq's. */
static const AfdwOption own_options[] = {
	/* servers */
	{"fetch_size", ForeignServerRelationId, AFDW_OPT_POSITIVE_INT, false},
	{"async_capable", ForeignServerRelationId, AFDW_OPT_BOOL, false},
	{"fdw_startup_cost", ForeignServerRelationId, AFDW_OPT_COST, false},
	{"fdw_tuple_cost", ForeignServerRelationId, AFDW_OPT_COST, false},
	{"keep_connections", ForeignServerRelationId, AFDW_OPT_BOOL, false},
	{"max_connections", ForeignServerRelationId, AFDW_OPT_CONNECTIONS, false},
	{"idle_connections", ForeignServerRelationId, AFDW_OPT_CONNECTIONS, false},
	{"idle_timeout", ForeignServerRelationId, AFDW_OPT_MILLISECONDS, false},
	{"fetch_mode", ForeignServerRelationId, AFDW_OPT_FETCH_MODE, false},
	{"extensions", ForeignServerRelationId, AFDW_OPT_EXTENSIONS, false},
	{"pooler", ForeignServerRelationId, AFDW_OPT_POOLER, false},
	{"max_shared_connections", ForeignServerRelationId, AFDW_OPT_BUDGET, false},
	{"analyze_sampling", ForeignServerRelationId, AFDW_OPT_SAMPLING, false},
	{"use_remote_estimate", ForeignServerRelationId, AFDW_OPT_BOOL, false},
	{"updatable", ForeignServerRelationId, AFDW_OPT_BOOL, false},
	{"truncatable", ForeignServerRelationId, AFDW_OPT_BOOL, false},
	{"batch_size", ForeignServerRelationId, AFDW_OPT_POSITIVE_INT, false},
	{"parallel_commit", ForeignServerRelationId, AFDW_OPT_BOOL, false},
	{"parallel_abort", ForeignServerRelationId, AFDW_OPT_BOOL, false},
	{"two_phase_commit", ForeignServerRelationId, AFDW_OPT_TWO_PHASE, false},
	{"use_scram_passthrough", ForeignServerRelationId, AFDW_OPT_BOOL, false},
	/* user mappings */
	{"password_required", UserMappingRelationId, AFDW_OPT_BOOL, false},
	{"use_scram_passthrough", UserMappingRelationId, AFDW_OPT_BOOL, false},
	{"sslcert", UserMappingRelationId, AFDW_OPT_STRING, true},
	{"sslkey", UserMappingRelationId, AFDW_OPT_STRING, true},
	/* foreign tables */
	{"schema_name", ForeignTableRelationId, AFDW_OPT_STRING, false},
	{"table_name", ForeignTableRelationId, AFDW_OPT_STRING, false},
	{"fetch_size", ForeignTableRelationId, AFDW_OPT_POSITIVE_INT, false},
	{"async_capable", ForeignTableRelationId, AFDW_OPT_BOOL, false},
	{"fetch_mode", ForeignTableRelationId, AFDW_OPT_FETCH_MODE, false},
	{"analyze_sampling", ForeignTableRelationId, AFDW_OPT_SAMPLING, false},
	{"use_remote_estimate", ForeignTableRelationId, AFDW_OPT_BOOL, false},
	{"updatable", ForeignTableRelationId, AFDW_OPT_BOOL, false},
	{"truncatable", ForeignTableRelationId, AFDW_OPT_BOOL, false},
	{"batch_size", ForeignTableRelationId, AFDW_OPT_POSITIVE_INT, false},
	{"copies", ForeignTableRelationId, AFDW_OPT_SERVERS, false},
	/* columns of foreign tables */
	{"column_name", AttributeRelationId, AFDW_OPT_STRING, false},
	{"key", AttributeRelationId, AFDW_OPT_BOOL, false},
	{NULL, InvalidOid, AFDW_OPT_STRING, false}
};

/*
 * libpq options async_fdw sets itself, or that belong to the local user
 * rather than to the server object.
 */
static const char *const reserved_libpq_options[] = {
	"client_encoding",
	"fallback_application_name",
	/* libpq 18: the client's keys, which use_scram_passthrough passes on */
	"scram_client_key",
	"scram_server_key",
	NULL
};

/* All valid options, built on first use; lives as long as the backend. */
static AfdwOption *all_options = NULL;

static List *extension_list(const char *value, bool warn_missing);
static List *server_list(const char *value);
static void check_copies_usage(List *servers);

/*
 * is_reserved_libpq_option
 *		True if libpq's option NAME may not be set by users.
 */
static bool
is_reserved_libpq_option(const char *name)
{
	for (int i = 0; reserved_libpq_options[i] != NULL; i++)
	{
		if (strcmp(reserved_libpq_options[i], name) == 0)
			return true;
	}
	return false;
}

/*
 * build_option_table
 *		Merge libpq's connection options with async_fdw's own.
 *
 * The table is allocated in TopMemoryContext because libpq's list of
 * options cannot change while the backend runs, so it is built once.
 */
static void
build_option_table(void)
{
	PQconninfoOption *lopts;
	PQconninfoOption *lopt;
	int			n_libpq = 0;
	int			n_own = lengthof(own_options) - 1;
	int			n = 0;
	AfdwOption *table;

	lopts = PQconndefaults();
	if (lopts == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Could not get the connection options of libpq.")));

	for (lopt = lopts; lopt->keyword != NULL; lopt++)
		n_libpq++;

	table = MemoryContextAllocZero(TopMemoryContext,
								   sizeof(AfdwOption) * (n_libpq + n_own + 1));

	for (lopt = lopts; lopt->keyword != NULL; lopt++)
	{
		Oid			catalog;

		/*
		 * Debug options are not for users; some options are ours.  libpq
		 * 18's OAuth options (oauth_issuer, ...) ask for an interactive
		 * login flow a server process cannot follow: refused, as postgres_fdw
		 * refuses them.
		 */
		if (strchr(lopt->dispchar, 'D') != NULL ||
			is_reserved_libpq_option(lopt->keyword) ||
			strncmp(lopt->keyword, "oauth_", 6) == 0)
			continue;

		/* Who one is and how one proves it belong to the user mapping. */
		if (strcmp(lopt->keyword, "user") == 0 ||
			strchr(lopt->dispchar, '*') != NULL)
			catalog = UserMappingRelationId;
		else
			catalog = ForeignServerRelationId;

		table[n].name = MemoryContextStrdup(TopMemoryContext, lopt->keyword);
		table[n].catalog = catalog;
		table[n].kind = AFDW_OPT_STRING;
		table[n].is_libpq = true;
		n++;
	}
	PQconninfoFree(lopts);

	for (int i = 0; i < n_own; i++)
		table[n++] = own_options[i];
	table[n].name = NULL;

	all_options = table;
}

/*
 * find_option
 *		The entry for option NAME in CATALOG, or NULL.
 */
static const AfdwOption *
find_option(const char *name, Oid catalog)
{
	if (all_options == NULL)
		build_option_table();

	for (const AfdwOption *opt = all_options; opt->name != NULL; opt++)
	{
		if (opt->catalog == catalog && strcmp(opt->name, name) == 0)
			return opt;
	}
	return NULL;
}

/*
 * afdw_is_libpq_option
 *		True if NAME is a libpq connection option a user may set.
 */
bool
afdw_is_libpq_option(const char *name)
{
	if (all_options == NULL)
		build_option_table();

	for (const AfdwOption *opt = all_options; opt->name != NULL; opt++)
	{
		if (opt->is_libpq && strcmp(opt->name, name) == 0)
			return true;
	}
	return false;
}

/*
 * report_unknown_option
 *		Reject option NAME, listing the valid names for CATALOG in the hint.
 */
static void
report_unknown_option(const char *name, Oid catalog)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (const AfdwOption *opt = all_options; opt->name != NULL; opt++)
	{
		if (opt->catalog != catalog)
			continue;
		/* Own and libpq options may share a name; list it once. */
		if (find_option(opt->name, catalog) != opt)
			continue;
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", opt->name);
	}

	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
			 errmsg("invalid option \"%s\"", name),
			 buf.len > 0 ?
			 errhint("Valid options in this context are: %s.", buf.data) :
			 errhint("There are no valid options in this context.")));
}

/*
 * parse_int_from
 *		Parse VALUE as a whole number from MIN to INT_MAX, spaces after it
 *		allowed, into *RESULT (if not NULL); false if it is anything else,
 *		fractions and exponents included.
 */
static bool
parse_int_from(const char *value, int min, int *result)
{
	char	   *end;
	long		l;

	errno = 0;
	l = strtol(value, &end, 10);
	while (*end == ' ')
		end++;
	if (errno != 0 || end == value || *end != '\0' || l < min || l > INT_MAX)
		return false;
	if (result)
		*result = (int) l;
	return true;
}

/*
 * The words the fetch_mode, pooler, analyze_sampling and two_phase_commit
 * options take, any case, in the order of AfdwFetchMode, AfdwPooler,
 * AfdwSampling and AfdwTwoPhase.
 */
static const char *const fetch_mode_words[] = {"auto", "stream", "cursor", NULL};
static const char *const pooler_words[] = {"auto", "none", "session", "transaction", NULL};
static const char *const sampling_words[] = {"off", "auto", "random", "system", "bernoulli", NULL};
static const char *const two_phase_words[] = {"off", "auto", "on", NULL};

StaticAssertDecl(lengthof(fetch_mode_words) == AFDW_FETCH_CURSOR + 2,
				 "fetch_mode_words does not match AfdwFetchMode");
StaticAssertDecl(lengthof(pooler_words) == AFDW_POOLER_TRANSACTION + 2,
				 "pooler_words does not match AfdwPooler");
StaticAssertDecl(lengthof(sampling_words) == AFDW_SAMPLE_BERNOULLI + 2,
				 "sampling_words does not match AfdwSampling");
StaticAssertDecl(lengthof(two_phase_words) == AFDW_2PC_ON + 2,
				 "two_phase_words does not match AfdwTwoPhase");

/*
 * words_of
 *		The words an option of KIND, one of the word kinds, takes.
 */
static const char *const *
words_of(AfdwOptionKind kind)
{
	switch (kind)
	{
		case AFDW_OPT_FETCH_MODE:
			return fetch_mode_words;
		case AFDW_OPT_POOLER:
			return pooler_words;
		case AFDW_OPT_SAMPLING:
			return sampling_words;
		case AFDW_OPT_TWO_PHASE:
			return two_phase_words;
		default:
			elog(ERROR, "option kind %d takes no words", (int) kind);
	}
	return NULL;				/* keep the compiler quiet */
}

/*
 * word_choices
 *		WORDS as a message lists them: "a, b or c".
 */
static char *
word_choices(const char *const *words)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; words[i] != NULL; i++)
	{
		if (i > 0)
			appendStringInfoString(&buf, words[i + 1] == NULL ? " or " : ", ");
		appendStringInfoString(&buf, words[i]);
	}
	return buf.data;
}

/*
 * word_index
 *		The position of VALUE, in any case, in WORDS (ended by NULL), or -1.
 */
static int
word_index(const char *value, const char *const *words)
{
	for (int i = 0; words[i] != NULL; i++)
	{
		if (pg_strcasecmp(value, words[i]) == 0)
			return i;
	}
	return -1;
}

/*
 * check_option_value
 *		Reject a value that does not fit the option's kind.
 *
 * The SQLSTATE of each rejection is the one postgres_fdw 15 raises for the
 * same bad value, so that code which catches these errors keeps working
 * when a server moves from postgres_fdw to async_fdw: a number that does not
 * parse or is out of range is ERRCODE_INVALID_PARAMETER_VALUE (22023), a
 * word that is not a Boolean is ERRCODE_SYNTAX_ERROR (42601).
 */
static void
check_option_value(const AfdwOption *opt, const char *value)
{
	bool		b;
	double		d;
	int			i;
	const char *expected = NULL;	/* what the value should have been:
									 * a whole sentence, translated */
	int			sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;

	switch (opt->kind)
	{
		case AFDW_OPT_STRING:
			break;
		case AFDW_OPT_BOOL:
			if (!parse_bool(value, &b))
			{
				expected = _("The option takes a Boolean value: true, false, on, off, yes, no, 1 or 0.");
				sqlstate = ERRCODE_SYNTAX_ERROR;
			}
			break;
		case AFDW_OPT_POSITIVE_INT:
			if (!parse_int_from(value, 1, NULL))
				expected = _("The option takes an integer between 1 and 2147483647.");
			break;
		case AFDW_OPT_MILLISECONDS:
			if (!parse_int_from(value, 0, NULL))
				expected = _("The option takes a number of milliseconds between 0 and 2147483647.");
			break;
		case AFDW_OPT_BUDGET:
			/* A number, as for max_connections. */
			if (!parse_int_from(value, 0, NULL))
				expected = _("The option takes an integer between 0 and 2147483647.");
			break;
		case AFDW_OPT_CONNECTIONS:

			/*
			 * postgres_fdw has no such option; an integer that does not parse
			 * or lies outside its range gets the code postgres_fdw gives such
			 * a fetch_size.
			 */
			if (!parse_int_from(value, 1, &i) || i > AFDW_MAX_MAX_CONNECTIONS)
				expected = psprintf(_("The option takes an integer between 1 and %d."),
									AFDW_MAX_MAX_CONNECTIONS);
			break;
		case AFDW_OPT_FETCH_MODE:
		case AFDW_OPT_POOLER:
		case AFDW_OPT_SAMPLING:
		case AFDW_OPT_TWO_PHASE:

			/*
			 * A word outside a fixed set is what a bad Boolean is, so it gets
			 * the same code (postgres_fdw has fetch_mode and pooler not at
			 * all); but analyze_sampling, which postgres_fdw has since
			 * version 16 with these words, gets the code it gives there.
			 */
			if (word_index(value, words_of(opt->kind)) < 0)
			{
				expected = psprintf(_("The option takes %s."),
									word_choices(words_of(opt->kind)));
				if (opt->kind != AFDW_OPT_SAMPLING)
					sqlstate = ERRCODE_SYNTAX_ERROR;
			}
			break;
		case AFDW_OPT_COST:

			/*
			 * postgres_fdw 15 takes an infinite cost; async_fdw does not, and
			 * reports it with the code of a negative one, out of range too.
			 */
			if (!parse_real(value, &d, 0, NULL) || d < 0 || isinf(d) || isnan(d))
				expected = _("The option takes a finite, non-negative number.");
			break;
		case AFDW_OPT_EXTENSIONS:
			/* Names not installed here are only warned of. */
			list_free(extension_list(value, true));
			break;
		case AFDW_OPT_SERVERS:
			/* Each server must exist and be async_fdw's. */
			check_copies_usage(server_list(value));
			break;
	}

	if (expected != NULL)
		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("invalid value for option \"%s\": \"%s\"", opt->name, value),
				 errdetail_internal("%s", expected)));
}

/*
 * local_credentials_detail
 *		Why only a superuser may set libpq option NAME, or NULL if anyone may.
 *
 * These options name files of the local server's operating system account
 * that prove who the local server is: a non-superuser must not make the
 * local server authenticate on their behalf.  postgres_fdw 15 restricts
 * sslcert and sslkey on user mappings only; async_fdw restricts them on
 * servers too (whoever may create a server could otherwise point them at
 * the local server's key, or at an OpenSSL engine with "engine:"), and
 * passfile and service as well.  Options that only check the remote server
 * (sslrootcert, sslcrl, sslcrldir) and the Kerberos ones (GSSAPI
 * authentication never asks for a password, so check_password_rules
 * refuses it to non-superusers) stay open, as in postgres_fdw.
 */
static const char *
local_credentials_detail(const char *name)
{
	if (strcmp(name, "sslcert") == 0 || strcmp(name, "sslkey") == 0)
		return _("A certificate file on the local server would let the user authenticate as the local server.");
	if (strcmp(name, "passfile") == 0)
		return _("A password file on the local server holds the local server's passwords, not the user's.");
	if (strcmp(name, "service") == 0)
		return _("A connection service file on the local server may hold the local server's passwords and certificate files.");
	return NULL;
}

PG_FUNCTION_INFO_V1(async_fdw_validator);

/*
 * async_fdw_validator
 *		Check the options of a CREATE or ALTER of an object of async_fdw.
 *
 * Called with the options as a text[] of "name=value" and the OID of the
 * catalog the object lives in.
 */
Datum
async_fdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);
		const AfdwOption *opt;
		char	   *value;

		opt = find_option(def->defname, catalog);
		if (opt == NULL)
			report_unknown_option(def->defname, catalog);

		value = defGetString(def);
		check_option_value(opt, value);

		/*
		 * Refused rather than unknown before 18, so that a setup (or a
		 * dump) made for postgres_fdw 18 says what it lacks.
		 */
		if (strcmp(opt->name, "use_scram_passthrough") == 0 &&
			!afdw_scram_passthrough_supported())
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("option \"use_scram_passthrough\" requires PostgreSQL 18 or later"),
					 errdetail("This server runs PostgreSQL %s, which does not keep the keys of its clients' SCRAM authentication.",
							   PG_VERSION)));

		/*
		 * Without a password, libpq may authenticate with whatever the
		 * server's operating system account has (a .pgpass, a peer or trust
		 * rule, a certificate): only a superuser may allow that.
		 */
		if (strcmp(opt->name, "password_required") == 0)
		{
			bool		required;

			(void) parse_bool(value, &required);
			if (!required && !superuser())
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("only a superuser may set option \"password_required\" to false"),
						 errhint("Ask a superuser to create or alter this user mapping.")));
		}
		else if (catalog == UserMappingRelationId &&
				 local_credentials_detail(opt->name) != NULL &&
				 !superuser())
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("only a superuser may set option \"%s\" on a user mapping",
							opt->name),
					 errdetail("%s", local_credentials_detail(opt->name))));
		else if (local_credentials_detail(opt->name) != NULL && !superuser())
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("only a superuser may set option \"%s\" on a server",
							opt->name),
					 errdetail("%s", local_credentials_detail(opt->name)),
					 errhint("Ask a superuser to create or alter this server.")));
	}

	PG_RETURN_VOID();
}

/*
 * find_def
 *		The value of option NAME in OPTIONS, or NULL.
 */
static const char *
find_def(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, name) == 0)
			return defGetString(def);
	}
	return NULL;
}

/*
 * afdw_bool_option
 *		The Boolean option NAME from OPTIONS, or CURRENT when absent.
 */
bool
afdw_bool_option(List *options, const char *name, bool current)
{
	const char *value = find_def(options, name);
	bool		result = current;

	if (value != NULL && !parse_bool(value, &result))
		elog(ERROR, "invalid stored value for option \"%s\": \"%s\"", name, value);
	return result;
}

/*
 * afdw_int_option
 *		The integer option NAME from OPTIONS, or CURRENT when absent.
 */
int
afdw_int_option(List *options, const char *name, int current)
{
	const char *value = find_def(options, name);
	int			result = current;

	if (value != NULL && !parse_int(value, &result, 0, NULL))
		elog(ERROR, "invalid stored value for option \"%s\": \"%s\"", name, value);
	return result;
}

/*
 * afdw_real_option
 *		The numeric option NAME from OPTIONS, or CURRENT when absent.
 */
double
afdw_real_option(List *options, const char *name, double current)
{
	const char *value = find_def(options, name);
	double		result = current;

	if (value != NULL && !parse_real(value, &result, 0, NULL))
		elog(ERROR, "invalid stored value for option \"%s\": \"%s\"", name, value);
	return result;
}

/*
 * word_option
 *		The position in WORDS of the value of option NAME in OPTIONS, or
 *		CURRENT when absent.
 */
static int
word_option(List *options, const char *name, const char *const *words,
			int current)
{
	const char *value = find_def(options, name);
	int			i;

	if (value == NULL)
		return current;
	i = word_index(value, words);
	if (i < 0)
		elog(ERROR, "invalid stored value for option \"%s\": \"%s\"", name, value);
	return i;
}

/*
 * afdw_fetch_mode_option
 *		The fetch_mode in OPTIONS, or CURRENT when absent.
 */
int
afdw_fetch_mode_option(List *options, int current)
{
	return word_option(options, "fetch_mode", fetch_mode_words, current);
}

/*
 * afdw_pooler_option
 *		The pooler in OPTIONS (a server's), auto when absent.
 */
AfdwPooler
afdw_pooler_option(List *options)
{
	return (AfdwPooler) word_option(options, "pooler", pooler_words,
									AFDW_POOLER_AUTO);
}

/*
 * afdw_sampling_option
 *		The analyze_sampling in OPTIONS, or CURRENT when absent.
 */
AfdwSampling
afdw_sampling_option(List *options, AfdwSampling current)
{
	return (AfdwSampling) word_option(options, "analyze_sampling",
									  sampling_words, current);
}

/*
 * afdw_two_phase_option
 *		The two_phase_commit in OPTIONS (a server's) as an AfdwTwoPhase, or
 *		-1 when absent: the session's setting then decides.
 */
int
afdw_two_phase_option(List *options)
{
	return word_option(options, "two_phase_commit", two_phase_words, -1);
}

/*
 * afdw_fetch_size_option
 *		The fetch_size in OPTIONS, or CURRENT when absent.
 */
int
afdw_fetch_size_option(List *options, int current)
{
	return afdw_int_option(options, "fetch_size", current);
}

/*
 * extension_list
 *		The OIDs of the extensions named in VALUE, a comma-separated list of
 *		names (quoted as identifiers where needed).  Names of extensions not
 *		installed here are left out, with a warning if WARN_MISSING.
 */
static List *
extension_list(const char *value, bool warn_missing)
{
	char	   *copy = pstrdup(value);
	List	   *names;
	List	   *oids = NIL;
	ListCell   *lc;

	/* 22023, as postgres_fdw 15 reports a list it cannot split. */
	if (!SplitIdentifierString(copy, ',', &names))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"",
						"extensions", value),
				 errdetail("The option takes a comma-separated list of extension names.")));

	foreach(lc, names)
	{
		const char *name = (const char *) lfirst(lc);
		Oid			oid = get_extension_oid(name, true);

		if (OidIsValid(oid))
			oids = lappend_oid(oids, oid);
		else if (warn_missing)
			ereport(WARNING,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("extension \"%s\" is not installed", name)));
	}
	list_free(names);
	pfree(copy);
	return oids;
}

/*
 * check_copies_usage
 *		Refuse option copies naming a server of SERVERS (then freed) that the
 *		current user may not use.
 *
 * The table's rows are read from, and written to, every server named, with
 * the user mappings there: naming one is creating a foreign table on it,
 * which takes USAGE on the server (as CREATE FOREIGN TABLE checks for the
 * table's own).  Checked when the option is set, as PostgreSQL checks the
 * table's own server when the table is created, not when it is used.
 */
static void
check_copies_usage(List *servers)
{
	ListCell   *lc;

	foreach(lc, servers)
	{
		Oid			serverid = lfirst_oid(lc);
		AclResult	aclresult = afdw_server_aclcheck(serverid, GetUserId(), ACL_USAGE);

		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER,
						   GetForeignServer(serverid)->servername);
	}
	list_free(servers);
}

/*
 * server_list
 *		The OIDs of the foreign servers named in VALUE (the copies option),
 *		a comma-separated list of names, each an existing server of
 *		async_fdw, none twice; an error otherwise.
 */
static List *
server_list(const char *value)
{
	char	   *copy = pstrdup(value);
	List	   *names;
	List	   *oids = NIL;
	ListCell   *lc;

	if (!SplitIdentifierString(copy, ',', &names) || names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", "copies", value),
				 errdetail("The option takes a comma-separated list of foreign server names.")));
	foreach(lc, names)
	{
		const char *name = (const char *) lfirst(lc);
		ForeignServer *server = GetForeignServerByName(name, true);

		if (server == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("server \"%s\" does not exist", name),
					 errdetail("Option \"copies\" names the servers that hold a copy of the table.")));
		if (!afdw_server_is_ours(server->serverid))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("server \"%s\" is not a server of async_fdw", name),
					 errdetail("Option \"copies\" names servers of async_fdw only.")));
		if (list_member_oid(oids, server->serverid))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("server \"%s\" is named twice in option \"copies\"", name)));
		oids = lappend_oid(oids, server->serverid);
	}
	list_free(names);
	pfree(copy);
	return oids;
}

/*
 * afdw_copy_servers
 *		The servers holding a copy of the foreign table TABLE: its own
 *		server first, then those of its copies option, each once; NIL for
 *		a table without the option (not replicated).
 */
List *
afdw_copy_servers(ForeignTable *table)
{
	const char *value = find_def(table->options, "copies");
	List	   *oids;

	if (value == NULL)
		return NIL;
	oids = list_make1_oid(table->serverid);
	return list_concat_unique_oid(oids, server_list(value));
}

/*
 * afdw_copy_key
 *		The columns (attribute numbers, in order) of REL, a foreign table of
 *		async_fdw, that its column option key declares, by which an
 *		UPDATE or DELETE of a replicated table (option copies) finds a row
 *		again on every copy; NIL for a table that is not replicated or
 *		declares none.  *REPLICATED, if not NULL, says whether it is.
 */
List *
afdw_copy_key(Relation rel, bool *replicated)
{
	Oid			relid = RelationGetRelid(rel);
	TupleDesc	tupdesc = RelationGetDescr(rel);
	ForeignTable *table = GetForeignTable(relid);
	List	   *key = NIL;

	bool		copies = (find_def(table->options, "copies") != NULL);

	if (replicated != NULL)
		*replicated = copies;
	if (!copies)
		return NIL;
	for (AttrNumber attnum = 1; attnum <= tupdesc->natts; attnum++)
	{
		if (TupleDescAttr(tupdesc, attnum - 1)->attisdropped)
			continue;
		if (afdw_bool_option(GetForeignColumnOptions(relid, attnum), "key", false))
			key = lappend_int(key, attnum);
	}
	return key;
}

/*
 * afdw_copy_key_required
 *		The key of REL (see afdw_copy_key) for an UPDATE or DELETE that
 *		changes its rows one by one; NIL for a table that is not replicated.
 *		A replicated table without a key raises an error: its copies keep
 *		their rows in places of their own, so the remote row identity (ctid)
 *		that finds a row on one copy means nothing on the others.
 */
List *
afdw_copy_key_required(Relation rel)
{
	bool		replicated;
	List	   *key = afdw_copy_key(rel, &replicated);

	if (replicated && key == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot change replicated foreign table \"%s\" row by row",
						RelationGetRelationName(rel)),
				 errdetail("Each server holding a copy keeps the rows in places of its own, and the table declares no key that finds a row on every copy; this UPDATE or DELETE needs the rows on the coordinator (a condition, value or RETURNING item the remote servers cannot compute, a row trigger, or a join)."),
				 errhint("Declare the columns of a key that is unique on every copy with the column option \"key\" (ALTER FOREIGN TABLE ... ALTER COLUMN ... OPTIONS (ADD key 'true')), or use conditions and values the remote servers can compute.")));
	return key;
}

/*
 * afdw_extensions_option
 *		The OIDs of the extensions of the extensions option in OPTIONS (a
 *		server's), NIL when absent.
 */
List *
afdw_extensions_option(List *options)
{
	const char *value = find_def(options, "extensions");

	return value ? extension_list(value, false) : NIL;
}

/*
 * The handlers (pg_proc OIDs) of foreign-data wrappers found to be
 * async_fdw's and found to be another's, kept until pg_proc changes.
 */
static List *our_handlers = NIL;
static List *other_handlers = NIL;
static bool handler_callback_set = false;

/*
 * forget_handlers
 *		Syscache callback: a function changed; decide each handler again.
 */
static void
forget_handlers(Datum arg pg_attribute_unused(),
				int cacheid pg_attribute_unused(),
				uint32 hashvalue pg_attribute_unused())
{
	list_free(our_handlers);
	list_free(other_handlers);
	our_handlers = NIL;
	other_handlers = NIL;
}

/*
 * handler_is_ours
 *		True if the function HANDLER is async_fdw's handler: a C function
 *		named async_fdw_handler in the library async_fdw, whatever the
 *		wrapper or the SQL function is called.  Read from pg_proc, never by
 *		calling it.
 */
static bool
handler_is_ours(Oid handler)
{
	HeapTuple	tuple;
	bool		ours = false;
	MemoryContext oldcxt;

	if (!OidIsValid(handler))
		return false;
	if (list_member_oid(our_handlers, handler))
		return true;
	if (list_member_oid(other_handlers, handler))
		return false;

	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(handler));
	if (HeapTupleIsValid(tuple))
	{
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tuple);
		bool		isnull;
		Datum		src;
		Datum		bin;

		if (proc->prolang == ClanguageId)
		{
			src = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_prosrc, &isnull);
			if (!isnull && strcmp(TextDatumGetCString(src), "async_fdw_handler") == 0)
			{
				bin = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_probin, &isnull);
				if (!isnull)
				{
					char	   *path = TextDatumGetCString(bin);
					char	   *base = strrchr(path, '/');

					base = base ? base + 1 : path;
					ours = (strcmp(base, "async_fdw") == 0 ||
							strcmp(base, "async_fdw" DLSUFFIX) == 0);
				}
			}
		}
		ReleaseSysCache(tuple);
	}

	if (!handler_callback_set)
	{
		CacheRegisterSyscacheCallback(PROCOID, forget_handlers, (Datum) 0);
		handler_callback_set = true;
	}
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	if (ours)
		our_handlers = lappend_oid(our_handlers, handler);
	else
		other_handlers = lappend_oid(other_handlers, handler);
	MemoryContextSwitchTo(oldcxt);
	return ours;
}

/*
 * afdw_mapping_ids
 *		The server and the user (InvalidOid for a mapping FOR PUBLIC) of
 *		user mapping UMID, in *SERVERID and *USERID; false if the mapping is
 *		gone.  The one reader of pg_user_mapping by OID, for recovery and
 *		the functions that list connections.
 */
bool
afdw_mapping_ids(Oid umid, Oid *serverid, Oid *userid)
{
	HeapTuple	tp = SearchSysCache1(USERMAPPINGOID, ObjectIdGetDatum(umid));

	if (!HeapTupleIsValid(tp))
		return false;
	*serverid = ((Form_pg_user_mapping) GETSTRUCT(tp))->umserver;
	*userid = ((Form_pg_user_mapping) GETSTRUCT(tp))->umuser;
	ReleaseSysCache(tp);
	return true;
}

/*
 * afdw_server_is_ours
 *		True if SERVERID is a server of a foreign-data wrapper whose handler
 *		is async_fdw's.  The one answer to that question, for the planner,
 *		the functions that list servers and recovery.
 */
bool
afdw_server_is_ours(Oid serverid)
{
	ForeignServer *server = GetForeignServerExtended(serverid, FSV_MISSING_OK);

	if (server == NULL)
		return false;
	return handler_is_ours(GetForeignDataWrapper(server->fdwid)->fdwhandler);
}

/*
 * afdw_table_reads_ours
 *		True if RELID is a foreign table of a server of async_fdw or, with
 *		PARTITIONS, a partitioned table with one among its partitions at any
 *		depth.  The partitions are looked up without a lock: the planner
 *		asks before it locks them, and only to decide what to try.
 */
bool
afdw_table_reads_ours(Oid relid, bool partitions)
{
	char		kind = get_rel_relkind(relid);
	ListCell   *lc;

	if (kind == RELKIND_FOREIGN_TABLE)
		return afdw_server_is_ours(GetForeignServerIdByRelId(relid));
	if (!partitions || kind != RELKIND_PARTITIONED_TABLE)
		return false;
	foreach(lc, find_all_inheritors(relid, NoLock, NULL))
	{
		if (afdw_table_reads_ours(lfirst_oid(lc), false))
			return true;
	}
	return false;
}
