/*-------------------------------------------------------------------------
 *
 * analyze.c
 *		ANALYZE of foreign tables: the remote size and a sample of rows.
 *
 * The remote server samples the rows when it can (the analyze_sampling
 * option, as postgres_fdw 16's), and they are read through a cursor on a
 * connection of the pool (connection_pool.c) and sampled again as they come,
 * down to the rows ANALYZE asks for (Vitter's reservoir algorithm);
 * row_builder.c turns the sampled ones into heap tuples.  The handler
 * (async_fdw.c) registers the callback through afdw_analyze_routines.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/vacuum.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sampling.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

/* State of ANALYZE's reservoir sampling. */
typedef struct Sampler
{
	RowBuilder	rb;				/* remote rows to tuples */
	MemoryContext anl_cxt;		/* where sampled rows live */
	ReservoirStateData rstate;
	int			targrows;
	double		seen;			/* rows read so far */
	double		skip;			/* rows to pass over before the next pick */
} Sampler;

/*
 * sample_batch
 *		Offer the rows of RES to the sample ROWS (*NUMROWS long); return how
 *		many rows RES had.  RES is freed.
 */
static int
sample_batch(PGresult *res, Sampler *s, HeapTuple *rows, int *numrows)
{
	int			n = PQntuples(res);

	PG_TRY();
	{
		for (int i = 0; i < n; i++)
		{
			int			slot = -1;

			s->seen += 1;
			if (*numrows < s->targrows)
				slot = (*numrows)++;
			else
			{
				if (s->skip < 0)
					s->skip = reservoir_get_next_S(&s->rstate, s->seen, s->targrows);
				if (s->skip <= 0)
				{
					slot = (int) (s->targrows * sampler_random_fract(&s->rstate.randstate));
					heap_freetuple(rows[slot]);
				}
				s->skip -= 1;
			}
			if (slot >= 0)
				rows[slot] = afdw_make_tuple(&s->rb, res, i, s->anl_cxt);
		}
		MemoryContextReset(s->rb.row_cxt);
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();

	return n;
}

/*
 * choose_sampling
 *		How ANALYZE reads the rows of REL, whose remote relation CONN
 *		serves, to sample TARGROWS of them: *METHOD (from the
 *		analyze_sampling option, never auto on return) and *FRACTION of the
 *		rows; *RELTUPLES gets the remote estimate of its rows (-1 unknown).
 *
 * The remote server samples when it knows the relation's size
 * (pg_class.reltuples, set by its ANALYZE or VACUUM) and the sample is
 * smaller than the relation; otherwise every row is read (a view: its
 * size is not known).  TABLESAMPLE takes only tables, partitioned tables
 * and materialized views: other relations (foreign tables of the remote
 * server) are sampled with random().  auto is bernoulli where TABLESAMPLE
 * applies.
 */
static void
choose_sampling(AfdwConn *conn, Relation rel, int targrows,
				AfdwSampling *method, double *fraction, double *reltuples)
{
	StringInfoData name;
	StringInfoData sql;
	PGresult   *volatile res;
	volatile char relkind = '\0';

	*reltuples = -1;
	*fraction = 1.0;
	if (*method == AFDW_SAMPLE_OFF)
		return;

	initStringInfo(&name);
	afdw_deparse_relation(&name, rel);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT reltuples, relkind FROM pg_catalog.pg_class "
					 "WHERE oid = %s::pg_catalog.regclass",
					 quote_literal_cstr(name.data));
	res = afdw_run_query(conn, sql.data, 0, NULL);
	PG_TRY();
	{
		if (PQntuples(res) == 1 && PQnfields(res) == 2 &&
			!PQgetisnull(res, 0, 0) && !PQgetisnull(res, 0, 1))
		{
			*reltuples = strtod(PQgetvalue(res, 0, 0), NULL);
			relkind = PQgetvalue(res, 0, 1)[0];
		}
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();

	/* (Also a NaN or an infinity from a misbehaving server.) */
	if (!(*reltuples > 0 && *reltuples < 1e300) || targrows >= *reltuples)
	{
		*method = AFDW_SAMPLE_OFF;
		return;
	}
	*fraction = targrows / *reltuples;
	if (relkind != 'r' && relkind != 'm' && relkind != 'p')
		*method = AFDW_SAMPLE_RANDOM;
	else if (*method == AFDW_SAMPLE_AUTO)
		*method = AFDW_SAMPLE_BERNOULLI;
}

/*
 * acquire_sample_rows
 *		Keep a random sample of TARGROWS rows of REL in ROWS, sampled on the
 *		remote server (choose_sampling) and from what it sends (Vitter's
 *		reservoir algorithm); ANALYZE's callback.
 */
static int
acquire_sample_rows(Relation rel, int elevel, HeapTuple *rows, int targrows,
					double *totalrows, double *totaldeadrows)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	ForeignServer *server = GetForeignServer(table->serverid);
	UserMapping *user = GetUserMapping(rel->rd_rel->relowner, table->serverid);
	AfdwConn   *conn = afdw_get_connection(user);
	Sampler		sampler;
	List	   *retrieved_attrs;
	StringInfoData sql;
	unsigned int cursor = afdw_next_cursor_number(conn);
	int			fetch_size;
	int			numrows = 0;
	char		fetch[64];
	bool		done = false;
	AfdwSampling method;
	double		fraction;
	double		reltuples;
	static const char *const method_names[] = {
		"off", "auto", "random", "system", "bernoulli"
	};

	fetch_size = afdw_fetch_size_option(server->options, AFDW_DEFAULT_FETCH_SIZE);
	fetch_size = afdw_fetch_size_option(table->options, fetch_size);

	sampler.anl_cxt = CurrentMemoryContext;
	sampler.targrows = targrows;
	sampler.seen = 0;
	sampler.skip = -1;
	reservoir_init_selection_state(&sampler.rstate, targrows);

	method = afdw_sampling_option(server->options, AFDW_SAMPLE_AUTO);
	method = afdw_sampling_option(table->options, method);

	/* The connection is given back however the sampling ends. */
	PG_TRY();
	{
		choose_sampling(conn, rel, targrows, &method, &fraction, &reltuples);

		initStringInfo(&sql);
		appendStringInfo(&sql, "DECLARE c%u CURSOR FOR ", cursor);
		afdw_deparse_analyze(&sql, rel, method, fraction, &retrieved_attrs);
		afdw_init_row_builder(&sampler.rb, RelationGetDescr(rel),
							  RelationGetRelationName(rel), false, retrieved_attrs,
							  AllocSetContextCreate(CurrentMemoryContext,
													"async_fdw analyze row",
													ALLOCSET_DEFAULT_SIZES));
		afdw_run_command(conn, sql.data);

		snprintf(fetch, sizeof(fetch), "FETCH %d FROM c%u", fetch_size, cursor);
		while (!done)
		{
			afdw_analyze_delay_point();
			done = sample_batch(afdw_run_query(conn, fetch, 0, NULL), &sampler,
								rows, &numrows) < fetch_size;
		}

		snprintf(fetch, sizeof(fetch), "CLOSE c%u", cursor);
		afdw_run_command(conn, fetch);
	}
	PG_FINALLY();
	{
		afdw_release_connection(conn);
	}
	PG_END_TRY();
	MemoryContextDelete(sampler.rb.row_cxt);

	*totaldeadrows = 0;
	if (method == AFDW_SAMPLE_OFF)
	{
		*totalrows = sampler.seen;
		ereport(elevel,
				(errmsg("\"%s\": foreign table contains %.0f rows, %d rows in sample",
						RelationGetRelationName(rel), sampler.seen, numrows)));
	}
	else
	{
		/* The remote estimate, which the sample does not tell. */
		*totalrows = reltuples;
		ereport(elevel,
				(errmsg("\"%s\": foreign table contains about %.0f rows, %.0f rows read (sampled by %s), %d rows in sample",
						RelationGetRelationName(rel), reltuples, sampler.seen,
						method_names[method], numrows)));
	}
	return numrows;
}

/*
 * afdwAnalyzeForeignTable
 *		Offer acquire_sample_rows to ANALYZE, with the remote table's size
 *		in pages.
 */
static bool
afdwAnalyzeForeignTable(Relation rel, AcquireSampleRowsFunc *func,
						BlockNumber *totalpages)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	UserMapping *user = GetUserMapping(rel->rd_rel->relowner, table->serverid);
	AfdwConn   *conn = afdw_get_connection(user);
	StringInfoData name;
	StringInfoData sql;
	PGresult   *volatile res = NULL;

	initStringInfo(&name);
	afdw_deparse_relation(&name, rel);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT pg_catalog.pg_relation_size(");
	appendStringInfoString(&sql, quote_literal_cstr(name.data));
	appendStringInfoString(&sql, "::pg_catalog.regclass)");

	PG_TRY();
	{
		double		bytes = 0;
		double		pages;

		res = afdw_run_query(conn, sql.data, 0, NULL);

		if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
			bytes = strtod(PQgetvalue(res, 0, 0), NULL);

		/*
		 * Whatever the remote server answered (a size past what a local
		 * table can have, a negative number, NaN), the cast must stay
		 * within BlockNumber.
		 */
		pages = bytes / BLCKSZ;
		if (!(pages >= 1))
			*totalpages = 1;
		else if (pages >= (double) MaxBlockNumber)
			*totalpages = MaxBlockNumber;
		else
			*totalpages = (BlockNumber) pages;
	}
	PG_FINALLY();
	{
		PQclear(res);
		afdw_release_connection(conn);
	}
	PG_END_TRY();

	*func = acquire_sample_rows;
	return true;
}

/*
 * afdw_analyze_routines
 *		Fill in the ANALYZE callback of ROUTINE.
 */
void
afdw_analyze_routines(FdwRoutine *routine)
{
	routine->AnalyzeForeignTable = afdwAnalyzeForeignTable;
}
