/*-------------------------------------------------------------------------
 *
 * row_builder.c
 *		Remote rows to local tuples, and the check of remote column types.
 *
 * A row arrives as text values (a FETCH's result, a line of a text COPY
 * stream) or as a binary COPY row; it becomes a virtual tuple in the scan's
 * slot (afdw_store_row, once per row, called by afdwIterateForeignScan) or a
 * heap tuple (afdw_make_tuple for analyze.c and modify_rows.c,
 * afdw_make_tuple_at for direct_modify.c's RETURNING), through the local
 * types' input or receive functions, the commonest types read inline. Streams
 * may use the binary format once a remote check (sent by scan_commands.c,
 * answered in copy_stream.c) found the remote columns of the local types: the
 * answers are cached here per foreign table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "async_fdw.h"
#include "executor/scan_internal.h"

/*
 * Text values that convert_row reads itself, as their input functions
 * would (these call exactly this), without a function call.
 */
#define IN_CALL			'c'		/* call the input function */
#define IN_INT4			'4'
#define IN_INT8			'8'
#define IN_TEXT			't'

/*
 * Binary values that convert_binary_row reads itself, as their receive
 * functions would, without a function call: the most common types.
 * (Text needs no encoding check: the remote server sends the database's
 * encoding, as for the text format, which is not checked either.)
 */
#define RECV_CALL		'c'		/* call the receive function */
#define RECV_INT4		'4'
#define RECV_INT8		'8'
#define RECV_FLOAT8		'f'
#define RECV_TEXT		't'

/* What is known of the remote types of foreign tables, per local table. */
typedef struct BinaryEntry
{
	Oid			relid;			/* hash key */
	BinaryStatus status;
} BinaryEntry;

static HTAB *binary_cache = NULL;

/* Where a conversion error happened, for its context line. */
typedef struct ConversionPosition
{
	RowBuilder *rb;
	AttrNumber	attnum;			/* 0 while not in a column */
} ConversionPosition;


/*
 * conversion_error_context
 *		Name the foreign table and column whose remote value did not convert
 *		(for a value computed remotely, its place in the remote result).
 */
static void
conversion_error_context(void *arg)
{
	ConversionPosition *pos = (ConversionPosition *) arg;

	if (pos->attnum <= 0)
		return;
	if (pos->rb->computed)
		errcontext("column %d of the remote result computed from foreign table \"%s\"",
				   pos->attnum, pos->rb->relname);
	else
		errcontext("column \"%s\" of foreign table \"%s\"",
				   NameStr(TupleDescAttr(pos->rb->tupdesc, pos->attnum - 1)->attname),
				   pos->rb->relname);
}

/*
 * afdw_init_row_builder
 *		Prepare RB to turn rows of text values of the columns
 *		RETRIEVED_ATTRS of TUPDESC into tuples: those of foreign table
 *		RELNAME, or values COMPUTED remotely from it (aggregates); scratch
 *		space comes from the current memory context, input-function garbage
 *		goes to ROW_CXT, which the caller resets once per batch.
 */
void
afdw_init_row_builder(RowBuilder *rb, TupleDesc tupdesc, const char *relname,
					  bool computed, List *retrieved_attrs, MemoryContext row_cxt)
{
	int			natts = tupdesc->natts;

	rb->tupdesc = tupdesc;
	rb->relname = relname;
	rb->computed = computed;
	rb->attinmeta = TupleDescGetAttInMetadata(tupdesc);
	rb->retrieved_attrs = retrieved_attrs;
	rb->values = palloc0(sizeof(Datum) * Max(natts, 1));
	rb->nulls = palloc(sizeof(bool) * Max(natts, 1));
	rb->max_fields = list_length(retrieved_attrs) + 1;
	rb->fields = palloc(sizeof(char *) * rb->max_fields);
	rb->in_kinds = palloc(Max(natts, 1));
	for (int i = 0; i < natts; i++)
	{
		switch (TupleDescAttr(tupdesc, i)->atttypid)
		{
			case INT4OID:
				rb->in_kinds[i] = IN_INT4;
				break;
			case INT8OID:
				rb->in_kinds[i] = IN_INT8;
				break;
			case TEXTOID:
				rb->in_kinds[i] = IN_TEXT;
				break;
			default:
				rb->in_kinds[i] = IN_CALL;
				break;
		}
	}
	rb->row_cxt = row_cxt;
	ItemPointerSetInvalid(&rb->ctid);
}

/*
 * check_width
 *		Complain unless a remote row of NFIELDS columns has the columns RB
 *		expects.  With no column needed the remote SELECT list is a lone
 *		NULL.
 */
static void
check_width(RowBuilder *rb, int nfields)
{
	if (list_length(rb->retrieved_attrs) != nfields &&
		!(rb->retrieved_attrs == NIL && nfields == 1))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("remote query of foreign table \"%s\" returned %d columns, expected %d",
						rb->relname, nfields,
						list_length(rb->retrieved_attrs))));
}

/*
 * push_conversion_context
 *		Make errors name RB's table and POS's column until the caller pops
 *		ERRCB off error_context_stack.
 */
static void
push_conversion_context(RowBuilder *rb, ConversionPosition *pos,
						ErrorContextCallback *errcb)
{
	pos->rb = rb;
	pos->attnum = 0;
	errcb->callback = conversion_error_context;
	errcb->arg = pos;
	errcb->previous = error_context_stack;
	error_context_stack = errcb;
}

/*
 * convert_row
 *		Turn the NFIELDS text values in RB->fields (NULL for a null) into
 *		VALUES and NULLS, arrays of the relation's width; columns not
 *		retrieved are NULL.  By-reference values are allocated in
 *		RB->row_cxt.
 */
static void
convert_row(RowBuilder *rb, int nfields, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc = rb->tupdesc;
	ConversionPosition pos;
	ErrorContextCallback errcb;
	MemoryContext oldcxt;
	ListCell   *lc;
	int			col = 0;

	check_width(rb, nfields);
	memset(nulls, true, sizeof(bool) * tupdesc->natts);
	push_conversion_context(rb, &pos, &errcb);

	oldcxt = MemoryContextSwitchTo(rb->row_cxt);
	foreach(lc, rb->retrieved_attrs)
	{
		int			attnum = lfirst_int(lc);
		char	   *value = rb->fields[col++];

		if (attnum == SelfItemPointerAttributeNumber)
		{
			/* The remote ctid, for the slot's tts_tid. */
			pos.attnum = 0;
			if (value == NULL)
				ItemPointerSetInvalid(&rb->ctid);
			else
				ItemPointerCopy((ItemPointer) DatumGetPointer(DirectFunctionCall1(tidin,
																		CStringGetDatum(value))),
								&rb->ctid);
			continue;
		}
		pos.attnum = attnum;
		nulls[attnum - 1] = (value == NULL);
		if (value == NULL && rb->in_kinds[attnum - 1] != IN_CALL)
		{
			/* Their input functions are strict. */
			values[attnum - 1] = (Datum) 0;
			continue;
		}
		switch (rb->in_kinds[attnum - 1])
		{
			case IN_INT4:
				values[attnum - 1] = Int32GetDatum(pg_strtoint32(value));
				break;
			case IN_INT8:
				values[attnum - 1] = Int64GetDatum(pg_strtoint64(value));
				break;
			case IN_TEXT:
				values[attnum - 1] = PointerGetDatum(cstring_to_text(value));
				break;
			default:
				values[attnum - 1] =
					InputFunctionCall(&rb->attinmeta->attinfuncs[attnum - 1], value,
									  rb->attinmeta->attioparams[attnum - 1],
									  rb->attinmeta->atttypmods[attnum - 1]);
				break;
		}
	}
	MemoryContextSwitchTo(oldcxt);
	error_context_stack = errcb.previous;
}

/*
 * bad_binary_row
 *		Report a binary COPY row that cannot be read.
 */
static void
bad_binary_row(RowBuilder *rb)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("incorrect binary data format in a remote row of foreign table \"%s\"",
					rb->relname)));
}

/*
 * convert_binary_row
 *		Like convert_row, for DATA, LEN bytes of one row of binary COPY:
 *		the number of fields, then each field's length (-1 for NULL) and
 *		bytes, read with the local types' receive functions.  DATA must
 *		have one writable byte past its end.  With IN_PLACE, values may
 *		point into DATA, which is rewritten and must outlive them.
 */
static void
convert_binary_row(RowBuilder *rb, char *data, int len, bool in_place,
				   Datum *values, bool *nulls)
{
	TupleDesc	tupdesc = rb->tupdesc;
	char	   *p = data;
	char	   *end = data + len;
	ConversionPosition pos;
	ErrorContextCallback errcb;
	MemoryContext oldcxt;
	ListCell   *lc;
	uint16		n16;

	if (len < 2)
		bad_binary_row(rb);
	memcpy(&n16, p, 2);
	p += 2;
	check_width(rb, (int16) pg_ntoh16(n16));
	memset(nulls, true, sizeof(bool) * tupdesc->natts);
	push_conversion_context(rb, &pos, &errcb);

	oldcxt = MemoryContextSwitchTo(rb->row_cxt);
	foreach(lc, rb->retrieved_attrs)
	{
		int			i = lfirst_int(lc) - 1;
		uint32		n32;
		int32		flen;
		StringInfoData buf;
		char		saved;

		pos.attnum = i + 1;
		if (end - p < 4)
			bad_binary_row(rb);
		memcpy(&n32, p, 4);
		p += 4;
		flen = (int32) pg_ntoh32(n32);
		if (i + 1 == SelfItemPointerAttributeNumber)
		{
			uint16		n16b;

			/* The remote ctid: a block number and an offset. */
			pos.attnum = 0;
			ItemPointerSetInvalid(&rb->ctid);
			if (flen == -1)
				continue;
			if (flen != 6 || end - p < 6)
				bad_binary_row(rb);
			memcpy(&n32, p, 4);
			memcpy(&n16b, p + 4, 2);
			ItemPointerSet(&rb->ctid, pg_ntoh32(n32), pg_ntoh16(n16b));
			p += 6;
			continue;
		}
		if (flen == -1)
			continue;
		if (flen < 0 || flen > end - p)
			bad_binary_row(rb);

		switch (rb->recv_kinds[i])
		{
			case RECV_INT4:
				if (flen != 4)
					bad_binary_row(rb);
				memcpy(&n32, p, 4);
				values[i] = Int32GetDatum((int32) pg_ntoh32(n32));
				nulls[i] = false;
				p += flen;
				continue;
			case RECV_INT8:
			case RECV_FLOAT8:
				{
					uint64		n64;

					if (flen != 8)
						bad_binary_row(rb);
					memcpy(&n64, p, 8);
					n64 = pg_ntoh64(n64);
					if (rb->recv_kinds[i] == RECV_INT8)
						values[i] = Int64GetDatum((int64) n64);
					else
					{
						float8		f;

						memcpy(&f, &n64, 8);
						values[i] = Float8GetDatum(f);
					}
					nulls[i] = false;
					p += flen;
					continue;
				}
			case RECV_TEXT:

				/*
				 * A short text becomes a datum where it lies: the last
				 * byte of its length word, already read, takes a one-byte
				 * varlena header, which needs no alignment.
				 */
				if (in_place && flen <= (int32) (VARATT_SHORT_MAX - VARHDRSZ_SHORT))
				{
					SET_VARSIZE_SHORT(p - 1, flen + VARHDRSZ_SHORT);
					values[i] = PointerGetDatum(p - 1);
				}
				else
					values[i] = PointerGetDatum(cstring_to_text_with_len(p, flen));
				nulls[i] = false;
				p += flen;
				continue;
		}

		/* Receive functions may count on a terminating zero byte. */
		buf.data = p;
		buf.len = flen;
		buf.maxlen = flen + 1;
		buf.cursor = 0;
		saved = p[flen];
		p[flen] = '\0';
		values[i] = ReceiveFunctionCall(&rb->recv_funcs[i], &buf,
										rb->recv_ioparams[i],
										rb->attinmeta->atttypmods[i]);
		p[flen] = saved;
		if (buf.cursor != buf.len)
			bad_binary_row(rb);
		nulls[i] = false;
		p += flen;
	}
	MemoryContextSwitchTo(oldcxt);
	error_context_stack = errcb.previous;

	if (p != end)
		bad_binary_row(rb);
}

/*
 * form_tuple
 *		A local heap tuple, built in CXT, from the NFIELDS text values in
 *		RB->fields.
 */
static HeapTuple
form_tuple(RowBuilder *rb, int nfields, MemoryContext cxt)
{
	MemoryContext oldcxt;
	HeapTuple	tuple;

	convert_row(rb, nfields, rb->values, rb->nulls);
	oldcxt = MemoryContextSwitchTo(cxt);
	tuple = heap_form_tuple(rb->tupdesc, rb->values, rb->nulls);
	MemoryContextSwitchTo(oldcxt);
	return tuple;
}

/*
 * fields_of_result
 *		Point RB->fields at the NFIELDS values of row ROW of RES from column
 *		FIRST on; returns NFIELDS.
 */
static int
fields_of_result(RowBuilder *rb, PGresult *res, int row, int first, int nfields)
{
	if (nfields > rb->max_fields || first + nfields > PQnfields(res))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("remote query of foreign table \"%s\" returned %d columns, expected %d",
						rb->relname, PQnfields(res) - first,
						list_length(rb->retrieved_attrs))));
	for (int i = 0; i < nfields; i++)
		rb->fields[i] = PQgetisnull(res, row, first + i) ? NULL :
			PQgetvalue(res, row, first + i);
	return nfields;
}

/*
 * afdw_make_tuple
 *		A local heap tuple from row ROW of RES, built in CXT.
 */
HeapTuple
afdw_make_tuple(RowBuilder *rb, PGresult *res, int row, MemoryContext cxt)
{
	return form_tuple(rb, fields_of_result(rb, res, row, 0, PQnfields(res)), cxt);
}

/*
 * afdw_make_tuple_at
 *		A local heap tuple, built in CXT, from the columns of row ROW of RES
 *		that RB reads, from column FIRST on: a result that holds more than
 *		one relation's row (RETURNING of a remote join: the target's, then
 *		the join's scan tuple).
 */
HeapTuple
afdw_make_tuple_at(RowBuilder *rb, PGresult *res, int row, int first,
				   MemoryContext cxt)
{
	return form_tuple(rb, fields_of_result(rb, res, row, first,
										   list_length(rb->retrieved_attrs)),
					  cxt);
}

/*
 * split_copy_line
 *		Split LINE, LEN bytes of COPY's text format, into its fields in
 *		place: tabs become terminators, escapes are undone (an escape is
 *		never shorter than what it stands for), \N becomes NULL.  Returns
 *		how many fields there are, at most MAX (more is an error).
 */
static int
split_copy_line(char *line, int len, char **fields, int max)
{
	char	   *p = line;
	char	   *end = line + len;
	int			n = 0;

	if (len > 0 && end[-1] == '\n')
		end--;

	for (;;)
	{
		char	   *out = p;
		char	   *start = p;
		bool		null;

		if (n >= max)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("remote COPY returned more columns than expected")));

		/* Written as \N, the field is NULL. */
		null = (end - p >= 2 && p[0] == '\\' && p[1] == 'N' &&
				(end - p == 2 || p[2] == '\t'));

		/* Most fields have no escape: find the tab and cut there. */
		if (!null)
		{
			char	   *tab = memchr(p, '\t', end - p);
			char	   *fend = tab ? tab : end;

			if (memchr(p, '\\', fend - p) == NULL)
			{
				*fend = '\0';
				fields[n++] = start;
				if (tab == NULL)
					break;
				p = tab + 1;
				continue;
			}
		}

		while (p < end && *p != '\t')
		{
			char		c = *p++;

			if (c == '\\' && p < end)
			{
				c = *p++;
				switch (c)
				{
					case 'b':
						c = '\b';
						break;
					case 'f':
						c = '\f';
						break;
					case 'n':
						c = '\n';
						break;
					case 'r':
						c = '\r';
						break;
					case 't':
						c = '\t';
						break;
					case 'v':
						c = '\v';
						break;
					case 'N':
						/* \N alone is NULL; COPY never writes it otherwise */
						break;
					case 'x':
						{
							int			v = 0;
							int			digits = 0;

							while (digits < 2 && p < end && isxdigit((unsigned char) *p))
							{
								v = v * 16 + (isdigit((unsigned char) *p) ? *p - '0' :
											  (tolower((unsigned char) *p) - 'a' + 10));
								p++;
								digits++;
							}
							if (digits > 0)
								c = (char) v;
							break;
						}
					default:
						if (c >= '0' && c <= '7')
						{
							int			v = c - '0';

							for (int i = 0; i < 2 && p < end && *p >= '0' && *p <= '7'; i++)
								v = v * 8 + (*p++ - '0');
							c = (char) v;
						}
						/* any other character stands for itself */
						break;
				}
			}
			*out++ = c;
		}

		fields[n++] = null ? NULL : start;

		if (p >= end)
		{
			*out = '\0';
			break;
		}
		*out = '\0';
		p++;					/* the tab */
	}
	return n;
}

/*
 * afdw_store_row
 *		Convert the batch's next row into the scan's slot, as a virtual
 *		tuple whose values live until the batch is dropped; return SLOT.
 *
 * An error names the foreign table (afdw_scan_error_context) as those of
 * the rest of the scan do.
 */
TupleTableSlot *
afdw_store_row(AfdwScanState *st, TupleTableSlot *slot)
{
	RowBuilder *rb = &st->rb;
	int			row = st->next_tuple++;
	int			nfields;
	ErrorContextCallback errcb;

	/*
	 * Only a stream's one and only batch can be read again (by
	 * afdwReScanForeignScan); the lines of any other may be rewritten.
	 */
	bool		reread = (st->nbatches == 1 && st->phase == PHASE_DONE);

	errcb.callback = afdw_scan_error_context;
	errcb.arg = st;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	ExecClearTuple(slot);
	if (st->mode == READ_BINARY_STREAM)
	{
		/* libpq ends each message with a zero byte: room for the trick. */
		convert_binary_row(rb, LINE(st, row), st->lines.lens[row], !reread,
						   slot->tts_values, slot->tts_isnull);
	}
	else
	{
		if (st->batch_res != NULL)
			nfields = fields_of_result(rb, st->batch_res, row, 0,
									   PQnfields(st->batch_res));
		else
		{
			int			len = st->lines.lens[row];
			char	   *line = LINE(st, row);

			/* Splitting rewrites the line. */
			if (reread)
			{
				line = MemoryContextAlloc(st->row_cxt, len + 1);
				memcpy(line, LINE(st, row), len + 1);
			}
			nfields = split_copy_line(line, len, rb->fields, rb->max_fields);
		}
		convert_row(rb, nfields, slot->tts_values, slot->tts_isnull);
	}
	ExecStoreVirtualTuple(slot);
	/* Invalid unless the remote ctid is fetched (it is referenced). */
	slot->tts_tid = rb->ctid;
	error_context_stack = errcb.previous;
	return slot;
}

/*
 * forget_binary_status
 *		Forget what is known of the remote types of foreign table RELID, or
 *		of every table when RELID is InvalidOid.
 */
static void
forget_binary_status(Oid relid)
{
	HASH_SEQ_STATUS seq;
	BinaryEntry *entry;

	if (binary_cache == NULL)
		return;
	if (OidIsValid(relid))
	{
		(void) hash_search(binary_cache, &relid, HASH_REMOVE, NULL);
		return;
	}
	hash_seq_init(&seq, binary_cache);
	while ((entry = hash_seq_search(&seq)) != NULL)
		(void) hash_search(binary_cache, &entry->relid, HASH_REMOVE, NULL);
}

/*
 * binary_relcache_callback
 *		A relation changed (RELID, or every one when InvalidOid): forget its
 *		remote types.
 */
static void
binary_relcache_callback(Datum arg pg_attribute_unused(), Oid relid)
{
	forget_binary_status(relid);
}

/*
 * binary_syscache_callback
 *		A foreign server or user mapping changed: forget the remote types of
 *		every table, whichever server they are on.
 */
static void
binary_syscache_callback(Datum arg pg_attribute_unused(),
						 int cacheid pg_attribute_unused(),
						 uint32 hashvalue pg_attribute_unused())
{
	forget_binary_status(InvalidOid);
}

/*
 * afdw_binary_status
 *		What is known of the remote types of foreign table RELID.
 */
BinaryStatus
afdw_binary_status(Oid relid)
{
	BinaryEntry *entry;

	if (binary_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(BinaryEntry);
		binary_cache = hash_create("async_fdw remote types", 64, &ctl,
								   HASH_ELEM | HASH_BLOBS);
		CacheRegisterRelcacheCallback(binary_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(FOREIGNSERVEROID,
									  binary_syscache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(USERMAPPINGOID,
									  binary_syscache_callback, (Datum) 0);
	}
	entry = hash_search(binary_cache, &relid, HASH_FIND, NULL);
	return entry ? entry->status : BINARY_UNKNOWN;
}

/*
 * afdw_set_binary_status
 *		Remember what a remote check said of foreign table RELID.
 */
void
afdw_set_binary_status(Oid relid, BinaryStatus status)
{
	BinaryEntry *entry;

	(void) afdw_binary_status(relid);
	entry = hash_search(binary_cache, &relid, HASH_ENTER, NULL);
	entry->status = status;
}

/*
 * afdw_prepare_binary
 *		Whether the scan's rows may stream in binary format: every column
 *		has a built-in type (the same type, with the same binary form, on a
 *		server of the same major version) with a receive function, and
 *		whose binary form means the same on both servers (not an OID).  If
 *		so, look the receive functions up.
 */
bool
afdw_prepare_binary(AfdwScanState *st)
{
	RowBuilder *rb = &st->rb;
	TupleDesc	tupdesc = rb->tupdesc;
	ListCell   *lc;

	if (st->retrieved_attrs == NIL)
		return false;

	rb->recv_funcs = palloc0(sizeof(FmgrInfo) * tupdesc->natts);
	rb->recv_ioparams = palloc0(sizeof(Oid) * tupdesc->natts);
	rb->recv_kinds = palloc(tupdesc->natts);
	memset(rb->recv_kinds, RECV_CALL, tupdesc->natts);
	foreach(lc, st->retrieved_attrs)
	{
		int			attnum = lfirst_int(lc);
		Form_pg_attribute att;
		HeapTuple	tup;
		Form_pg_type typ;
		bool		ok;

		/* convert_binary_row reads the ctid itself. */
		if (attnum == SelfItemPointerAttributeNumber)
			continue;
		att = TupleDescAttr(tupdesc, attnum - 1);
		if (att->atttypid >= FirstGenbkiObjectId || afdw_type_names_by_oid(att->atttypid))
			return false;
		tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(att->atttypid));
		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for type %u", att->atttypid);
		typ = (Form_pg_type) GETSTRUCT(tup);
		ok = OidIsValid(typ->typreceive) && OidIsValid(typ->typsend) &&
			typ->typtype != TYPTYPE_PSEUDO && typ->typtype != TYPTYPE_DOMAIN;
		if (ok)
		{
			fmgr_info(typ->typreceive, &rb->recv_funcs[attnum - 1]);
			rb->recv_ioparams[attnum - 1] = getTypeIOParam(tup);
		}
		ReleaseSysCache(tup);
		if (!ok)
			return false;
		if (att->atttypid == INT4OID)
			rb->recv_kinds[attnum - 1] = RECV_INT4;
		else if (att->atttypid == INT8OID)
			rb->recv_kinds[attnum - 1] = RECV_INT8;
		else if (att->atttypid == FLOAT8OID)
			rb->recv_kinds[attnum - 1] = RECV_FLOAT8;
		else if (att->atttypid == TEXTOID)
			rb->recv_kinds[attnum - 1] = RECV_TEXT;
	}
	return true;
}

/*
 * afdw_binary_allowed
 *		Whether this stream of a binary-capable scan may use binary format
 *		now: receive functions read text in the session's client encoding,
 *		which must then be the database's (the remote side sends that), and
 *		binary forms are only sure to match within a major version.
 */
bool
afdw_binary_allowed(AfdwScanState *st)
{
	return st->binary_capable &&
		pg_get_client_encoding() == GetDatabaseEncoding() &&
		afdw_server_version(st->conn) / 10000 == PG_VERSION_NUM / 10000;
}
