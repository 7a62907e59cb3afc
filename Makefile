# Makefile
#   PGXS build of async_fdw, its pg_regress suite and its TAP tests.

MODULE_big = async_fdw
OBJS = \
	$(WIN32RES) \
	src/async_fdw.o \
	src/check_copies.o \
	src/connection_functions.o \
	src/recovery_worker.o \
	src/planner/aggregate_paths.o \
	src/planner/decorrelate.o \
	src/planner/direct_modify_plan.o \
	src/planner/hash_join_keys.o \
	src/planner/initplans.o \
	src/planner/join_paths.o \
	src/planner/order_limit.o \
	src/planner/pushed_keys.o \
	src/planner/remote_rels.o \
	src/planner/replicated_joins.o \
	src/planner/scan_paths.o \
	src/planner/shippable.o \
	src/executor/analyze.o \
	src/executor/bulk_loads.o \
	src/executor/combined_scans.o \
	src/executor/copy_stream.o \
	src/executor/direct_modify.o \
	src/executor/explain.o \
	src/executor/import_schema.o \
	src/executor/key_collector.o \
	src/executor/modify_rows.o \
	src/executor/plan_census.o \
	src/executor/replica_writes.o \
	src/executor/row_builder.o \
	src/executor/scan.o \
	src/executor/scan_commands.o \
	src/executor/scan_state.o \
	src/executor/truncate.o \
	src/transaction/commit_fence.o \
	src/transaction/prepared_statements.o \
	src/transaction/remote_xact.o \
	src/transaction/shared_snapshot.o \
	src/transaction/twophase.o \
	src/transaction/twophase_recovery.o \
	src/transaction/visibility.o \
	src/transaction/xact_callbacks.o \
	src/connection/connection_budget.o \
	src/connection/connection_pool.o \
	src/connection/connection_setup.o \
	src/connection/connection_state.o \
	src/connection/remote_commands.o \
	src/sql/deparse_context.o \
	src/sql/deparse_expr.o \
	src/sql/deparse_join.o \
	src/sql/deparse_statements.o \
	src/sql/join_subqueries.o \
	src/sql/shippable_subplans.o \
	src/common/options.o \
	src/common/plan_private.o

EXTENSION = async_fdw
DATA = async_fdw--1.0.sql async_fdw--1.0--1.1.sql async_fdw--1.1--1.2.sql async_fdw--1.2--1.3.sql async_fdw--1.3--1.4.sql async_fdw--1.4--1.5.sql async_fdw--1.5--1.6.sql
PGFILEDESC = "async_fdw - asynchronous foreign data wrapper for PostgreSQL servers"

# The server headers are not -Wextra clean: treat them as system headers.
PG_CPPFLAGS = -I$(libpq_srcdir) -I$(srcdir)/src -isystem $(includedir_server)
SHLIB_LINK_INTERNAL = $(libpq)

# pg_regress reads sql/ and expected/ (contrib's layout) and writes results/
# and regression.diffs in this directory.
REGRESS = setup options connection xact scan types pushdown errors planner async stream prepared remote_types ctid locking appname cleanup safety explain functions pooler budget orderby estimate aggregate aggregate_order join join_gating semi_nested remote_lookups join_rowmarks ordered final_limit params lookup_commit first_query import idle_window modify modify_errors holds truncate direct_modify direct_join join_shapes modify_partitioned partition_key returning_old_new mapping_isolation twophase planner_nested bulk_visibility shippable_exprs subquery keys hashkeys decorrelate combine copies

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
