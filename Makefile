# Makefile
#   PGXS build of async_fdw, its pg_regress suite and its TAP tests.

MODULE_big = async_fdw
OBJS = \
	$(WIN32RES) \
	src/analyze.o \
	src/async_fdw.o \
	src/budget.o \
	src/check_copies.o \
	src/census.o \
	src/combine.o \
	src/collect.o \
	src/connect.o \
	src/convert.o \
	src/copies.o \
	src/decorrelate.o \
	src/deparse.o \
	src/deparse_join.o \
	src/direct.o \
	src/direct_plan.o \
	src/explain.o \
	src/expr.o \
	src/fetch.o \
	src/funcs.o \
	src/hashkeys.o \
	src/import.o \
	src/join.o \
	src/keys.o \
	src/modify.o \
	src/option.o \
	src/ordered.o \
	src/path.o \
	src/plan_private.o \
	src/pool.o \
	src/recovery.o \
	src/remote.o \
	src/replica_writes.o \
	src/scan.o \
	src/shippable.o \
	src/snapshot.o \
	src/visibility.o \
	src/fence.o \
	src/statements.o \
	src/stream.o \
	src/subplan.o \
	src/truncate.o \
	src/twophase.o \
	src/twophase_worker.o \
	src/upper.o \
	src/xact.o \
	src/xact_end.o

EXTENSION = async_fdw
DATA = async_fdw--1.0.sql async_fdw--1.0--1.1.sql async_fdw--1.1--1.2.sql async_fdw--1.2--1.3.sql async_fdw--1.3--1.4.sql async_fdw--1.4--1.5.sql async_fdw--1.5--1.6.sql
PGFILEDESC = "async_fdw - asynchronous foreign data wrapper for PostgreSQL servers"

# The server headers are not -Wextra clean: treat them as system headers.
PG_CPPFLAGS = -I$(libpq_srcdir) -isystem $(includedir_server)
SHLIB_LINK_INTERNAL = $(libpq)

# pg_regress reads sql/ and expected/ (contrib's layout) and writes results/
# and regression.diffs in this directory.
REGRESS = setup options connection xact scan types pushdown errors planner async stream prepared remote_types ctid locking appname cleanup safety explain functions pooler budget orderby estimate aggregate aggregate_order join join_gating semi_nested remote_lookups join_rowmarks ordered final_limit params lookup_commit first_query import idle_window modify modify_errors truncate direct_modify direct_join join_shapes modify_partitioned partition_key returning_old_new mapping_isolation twophase planner_nested bulk_visibility shippable_exprs subquery keys hashkeys decorrelate combine copies

# TAP tests (several servers, restarts) live in test/t.
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# make dist: async_fdw-<version>.tar.gz, a source tarball of the committed
# tree (HEAD, through git archive: no .git, nothing uncommitted) for PGXN
# and packagers.  The version is the control file's default_version with
# three parts (1.4 -> 1.4.0), as META.json and debian/changelog give it.
EXT_VERSION := $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(srcdir)/async_fdw.control)
DIST_VERSION := $(if $(word 3,$(subst ., ,$(EXT_VERSION))),$(EXT_VERSION),$(EXT_VERSION).0)
DIST_NAME = async_fdw-$(DIST_VERSION)

.PHONY: dist
dist:
	@grep -q '^   "version": "$(DIST_VERSION)",' $(srcdir)/META.json || \
		{ echo "META.json's version is not $(DIST_VERSION)" >&2; exit 1; }
	@head -n 1 $(srcdir)/debian/changelog | grep -q '($(DIST_VERSION)[-)]' || \
		{ echo "debian/changelog's version is not $(DIST_VERSION)" >&2; exit 1; }
	git -C $(srcdir) archive --format=tar.gz --prefix=$(DIST_NAME)/ -o $(CURDIR)/$(DIST_NAME).tar.gz HEAD
	@echo "wrote $(DIST_NAME).tar.gz"
