#!/usr/bin/env python3
"""test/bench/tpch.py
   Measurement half of the TPC-H-shaped scenario (issue 26): generates the
   eight tables in SQL on the shards and as local copies on the coordinator,
   defines them through postgres_fdw (sync and async_capable) and async_fdw,
   runs the 22 query shapes of tpch_queries.sql through each and locally,
   checks every wrapper's rows against the local ones, and writes tpch.md,
   tpch.csv and the plans.  tpch.sh starts and stops the servers and the
   latency proxies (with run.sh's functions) and calls this script; run it
   through tpch.sh.  Uses bench.py's psql sessions and helpers.  Standard
   library only.
"""

import argparse
import csv
import math
import os
import re
import statistics
import sys
import time

from bench import (DB, USER, Psql, cluster_args, cluster_config, fmt_ms, fmt_num, ints, log,
                   psql_script, rtt_tag, run_parallel, split_range)

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = (                    # key, wrapper, label, server options
    ("pgsync", "postgres_fdw", "postgres_fdw sync", {"async_capable": "false"}),
    ("pgasync", "postgres_fdw", "postgres_fdw async", {"async_capable": "true"}),
    ("afdw", "async_fdw", "async_fdw", {}),
)
TIMEOUT_MSG = "canceling statement due to statement timeout"

# ---- the data ---------------------------------------------------------

# Words of the generated text; none comes from the TPC-H kit.  Nation names
# are countries, five per region (the region is nationkey / 5).
REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
NATIONS = ("KENYA", "NIGERIA", "GHANA", "ETHIOPIA", "SENEGAL",
           "CANADA", "MEXICO", "CHILE", "PERU", "COLOMBIA",
           "JAPAN", "KOREA", "INDIA", "VIETNAM", "THAILAND",
           "FRANCE", "SPAIN", "POLAND", "SWEDEN", "AUSTRIA",
           "JORDAN", "OMAN", "QATAR", "LEBANON", "KUWAIT")
WORDS = ("amber", "brisk", "calm", "dense", "eager", "faint", "grand", "hazy", "idle",
         "jolly", "keen", "lucid", "mellow", "neat", "odd", "plain", "quick", "rapid",
         "sharp", "tidy", "vivid", "warm", "young", "special", "notes", "packages",
         "deposits", "accounts", "ideas", "plans", "crates", "boxes", "requests",
         "pallets", "tokens", "parcels", "bundles", "above", "along", "across")
COLORS = ("amber", "azure", "beige", "black", "blue", "bronze", "brown", "coral", "cream",
          "crimson", "cyan", "ebony", "forest", "gold", "gray", "green", "indigo", "ivory",
          "jade", "khaki", "lemon", "lilac", "linen", "magenta", "maroon", "mint", "navy",
          "ochre", "olive", "orange", "peach", "pearl", "pink", "plum", "purple", "red",
          "rose", "ruby", "rust", "sand", "silver", "slate", "snow", "tan", "teal", "violet")
GRADES = ("BASIC", "COMPACT", "HEAVY", "LIGHT", "PREMIUM", "PROMO")
FINISHES = ("BRUSHED", "COATED", "PAINTED", "POLISHED", "RAW")
MATERIALS = ("ALUMINUM", "BRASS", "COPPER", "STEEL", "TIN")
CONT_SIZES = ("SM", "MD", "LG", "XL", "BULK")
CONT_KINDS = ("BOX", "BAG", "CASE", "CAN", "JAR", "PACK", "DRUM", "TUBE")
SEGMENTS = ("AUTO", "ENERGY", "RETAIL", "HOTELS", "INDUSTRY")
PRIORITIES = ("1-CRITICAL", "2-HIGH", "3-NORMAL", "4-LOW", "5-DEFERRED")
INSTRUCTS = ("DELIVER IN PERSON", "LEAVE AT DOOR", "SIGNATURE REQUIRED", "NONE")
MODES = ("AIR", "COURIER", "MAIL", "RAIL", "ROAD", "SEA", "PIPELINE")

# TPC-H's columns and types; the foreign tables repeat them.
COLUMNS = {
    "region": "r_regionkey int NOT NULL, r_name char(25) NOT NULL, r_comment varchar(152)",
    "nation": "n_nationkey int NOT NULL, n_name char(25) NOT NULL, n_regionkey int NOT NULL, "
              "n_comment varchar(152)",
    "supplier": "s_suppkey int NOT NULL, s_name char(25) NOT NULL, s_address varchar(40) NOT NULL, "
                "s_nationkey int NOT NULL, s_phone char(15) NOT NULL, "
                "s_acctbal numeric(15,2) NOT NULL, s_comment varchar(101) NOT NULL",
    "customer": "c_custkey int NOT NULL, c_name varchar(25) NOT NULL, c_address varchar(40) NOT NULL, "
                "c_nationkey int NOT NULL, c_phone char(15) NOT NULL, "
                "c_acctbal numeric(15,2) NOT NULL, c_mktsegment char(10) NOT NULL, "
                "c_comment varchar(117) NOT NULL",
    "part": "p_partkey int NOT NULL, p_name varchar(55) NOT NULL, p_mfgr char(25) NOT NULL, "
            "p_brand char(10) NOT NULL, p_type varchar(25) NOT NULL, p_size int NOT NULL, "
            "p_container char(10) NOT NULL, p_retailprice numeric(15,2) NOT NULL, "
            "p_comment varchar(23) NOT NULL",
    "partsupp": "ps_partkey int NOT NULL, ps_suppkey int NOT NULL, ps_availqty int NOT NULL, "
                "ps_supplycost numeric(15,2) NOT NULL, ps_comment varchar(199) NOT NULL",
    "orders": "o_orderkey int NOT NULL, o_custkey int NOT NULL, o_orderstatus char(1) NOT NULL, "
              "o_totalprice numeric(15,2) NOT NULL, o_orderdate date NOT NULL, "
              "o_orderpriority char(15) NOT NULL, o_clerk char(15) NOT NULL, "
              "o_shippriority int NOT NULL, o_comment varchar(79) NOT NULL",
    "lineitem": "l_orderkey int NOT NULL, l_partkey int NOT NULL, l_suppkey int NOT NULL, "
                "l_linenumber int NOT NULL, l_quantity numeric(15,2) NOT NULL, "
                "l_extendedprice numeric(15,2) NOT NULL, l_discount numeric(15,2) NOT NULL, "
                "l_tax numeric(15,2) NOT NULL, l_returnflag char(1) NOT NULL, "
                "l_linestatus char(1) NOT NULL, l_shipdate date NOT NULL, "
                "l_commitdate date NOT NULL, l_receiptdate date NOT NULL, "
                "l_shipinstruct char(25) NOT NULL, l_shipmode char(10) NOT NULL, "
                "l_comment varchar(44) NOT NULL",
}
SMALL = ("region", "nation", "supplier", "customer", "part", "partsupp")
BIG = ("orders", "lineitem")
# The indexes a user would make: primary keys and the foreign keys joined on.
INDEXES = {
    "region": ["ALTER TABLE {t} ADD PRIMARY KEY (r_regionkey)"],
    "nation": ["ALTER TABLE {t} ADD PRIMARY KEY (n_nationkey)"],
    "supplier": ["ALTER TABLE {t} ADD PRIMARY KEY (s_suppkey)",
                 "CREATE INDEX ON {t} (s_nationkey)"],
    "customer": ["ALTER TABLE {t} ADD PRIMARY KEY (c_custkey)",
                 "CREATE INDEX ON {t} (c_nationkey)"],
    "part": ["ALTER TABLE {t} ADD PRIMARY KEY (p_partkey)"],
    "partsupp": ["ALTER TABLE {t} ADD PRIMARY KEY (ps_partkey, ps_suppkey)",
                 "CREATE INDEX ON {t} (ps_suppkey)"],
    "orders": ["ALTER TABLE {t} ADD PRIMARY KEY (o_orderkey)",
               "CREATE INDEX ON {t} (o_custkey)"],
    "lineitem": ["ALTER TABLE {t} ADD PRIMARY KEY (l_orderkey, l_linenumber)",
                 "CREATE INDEX ON {t} (l_partkey, l_suppkey)"],
}


def sizes(sf):
    """sizes: the row counts of scale factor sf (TPC-H's proportions)."""
    n = lambda base: max(4, int(round(base * sf)))
    return {"supplier": n(10000), "customer": n(150000), "part": n(200000),
            "orders": n(1500000)}


def arr(words):
    """arr: a text[] literal of words."""
    return "ARRAY[%s]" % ", ".join("'%s'" % w for w in words)


def functions_sql():
    """functions_sql: the generator's helpers, the same on every instance:
    tpch_r(k, salt) a deterministic pseudo-random float in [0, 1) from a
    hash of k; tpch_i(k, salt, lo, hi) an int in [lo, hi]; tpch_pick a
    word of an array; tpch_text four words; tpch_price a part's price.
    Plain SQL expressions, so that the planner inlines them."""
    return """
CREATE FUNCTION tpch_r(k bigint, salt int) RETURNS float8
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (hashint8extended(k, salt) & 2147483647)::float8 / 2147483648.0 $$;
CREATE FUNCTION tpch_i(k bigint, salt int, lo int, hi int) RETURNS int
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT lo + floor(tpch_r(k, salt) * (hi - lo + 1))::int $$;
CREATE FUNCTION tpch_pick(k bigint, salt int, words text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT words[tpch_i(k, salt, 1, cardinality(words))] $$;
CREATE FUNCTION tpch_text(k bigint, salt int) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT tpch_pick(k, salt, %(w)s) || ' ' || tpch_pick(k, salt + 1, %(w)s) || ' '
              || tpch_pick(k, salt + 2, %(w)s) || ' ' || tpch_pick(k, salt + 3, %(w)s) $$;
CREATE FUNCTION tpch_price(p int) RETURNS numeric
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ((100000 + (p %% 20011) * 5 + (p * 7) %% 100)::numeric / 100)::numeric(15,2) $$;
CREATE FUNCTION tpch_phone(k bigint, salt int, nation int) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (10 + nation)::text || '-' || tpch_i(k, salt, 100, 999)::text || '-'
              || tpch_i(k, salt + 1, 100, 999)::text || '-' || tpch_i(k, salt + 2, 1000, 9999)::text $$;
""" % {"w": arr(WORDS)}


def small_sql(sf, schema):
    """small_sql: create and fill region, nation, supplier, customer, part
    and partsupp in `schema`, in one transaction (no WAL at wal_level
    minimal)."""
    n = sizes(sf)
    S, C, P = n["supplier"], n["customer"], n["part"]
    t = lambda name: "%s.%s" % (schema, name)
    sql = ["BEGIN;"]
    for name in SMALL:
        sql.append("CREATE TABLE %s (%s);" % (t(name), COLUMNS[name]))
    sql.append("INSERT INTO %s SELECT i, (%s)[i + 1], tpch_text(i, 1) FROM generate_series(0, 4) i;"
               % (t("region"), arr(REGIONS)))
    sql.append("INSERT INTO %s SELECT i, (%s)[i + 1], i / 5, tpch_text(i, 2) "
               "FROM generate_series(0, 24) i;" % (t("nation"), arr(NATIONS)))
    # about one supplier in 200 has a comment with "Client ... Complaints" (Q16)
    sql.append("""INSERT INTO {t} SELECT s, 'Supplier#' || lpad(s::text, 9, '0'),
    tpch_text(s, 10), nk, tpch_phone(s, 14, nk),
    round((-999.99 + tpch_r(s, 17) * 10999.98)::numeric, 2),
    CASE WHEN tpch_r(s, 18) < 0.005 THEN 'Client ' || tpch_text(s, 19) || ' Complaints'
         ELSE tpch_text(s, 19) || ' ' || tpch_text(s, 23) END
FROM (SELECT s, tpch_i(s, 13, 0, 24) AS nk FROM generate_series(1, {S}) s) g;""".format(
        t=t("supplier"), S=S))
    sql.append("""INSERT INTO {t} SELECT c, 'Customer#' || lpad(c::text, 9, '0'),
    tpch_text(c, 30), nk, tpch_phone(c, 34, nk),
    round((-999.99 + tpch_r(c, 37) * 10999.98)::numeric, 2),
    tpch_pick(c, 38, {seg}), tpch_text(c, 39) || ' ' || tpch_text(c, 43)
FROM (SELECT c, tpch_i(c, 33, 0, 24) AS nk FROM generate_series(1, {C}) c) g;""".format(
        t=t("customer"), C=C, seg=arr(SEGMENTS)))
    sql.append("""INSERT INTO {t} SELECT p,
    tpch_pick(p, 50, {col}) || ' ' || tpch_pick(p, 51, {col}) || ' ' || tpch_pick(p, 52, {col})
        || ' ' || tpch_pick(p, 53, {col}) || ' ' || tpch_pick(p, 54, {col}),
    'Maker#' || m, 'Brand#' || m || tpch_i(p, 56, 1, 5),
    tpch_pick(p, 57, {gr}) || ' ' || tpch_pick(p, 58, {fi}) || ' ' || tpch_pick(p, 59, {ma}),
    tpch_i(p, 60, 1, 50), tpch_pick(p, 61, {cs}) || ' ' || tpch_pick(p, 62, {ck}),
    tpch_price(p), left(tpch_text(p, 63), 23)
FROM (SELECT p, tpch_i(p, 55, 1, 5) AS m FROM generate_series(1, {P}) p) g;""".format(
        t=t("part"), P=P, col=arr(COLORS), gr=arr(GRADES), fi=arr(FINISHES), ma=arr(MATERIALS),
        cs=arr(CONT_SIZES), ck=arr(CONT_KINDS)))
    # four suppliers per part, distinct as long as there are 4 or more
    sql.append("""INSERT INTO {t} SELECT p, ((p * 7 + j * ({S} / 4)) % {S}) + 1,
    tpch_i(p * 4 + j, 70, 1, 9999), round((1.00 + tpch_r(p * 4 + j, 71) * 999.00)::numeric, 2),
    tpch_text(p * 4 + j, 72) || ' ' || tpch_text(p * 4 + j, 76) || ' ' || tpch_text(p * 4 + j, 80)
FROM generate_series(1, {P}) p, generate_series(0, 3) j;""".format(t=t("partsupp"), S=S, P=P))
    sql.append("COMMIT;")
    return "\n".join(sql)


def big_sql(sf, schema, lo, hi):
    """big_sql: create orders and lineitem in `schema` holding the orders
    lo..hi (and their lines), in one transaction.  An order has 1 to 7
    lines; its status and total price come from its lines, as in TPC-H."""
    n = sizes(sf)
    S, C, P = n["supplier"], n["customer"], n["part"]
    t = lambda name: "%s.%s" % (schema, name)
    return """BEGIN;
CREATE TABLE {o} ({ocols});
CREATE TABLE {l} ({lcols});
CREATE TEMP TABLE tpch_ob ON COMMIT DROP AS
    SELECT k, ck + (ck - 1) / 2 AS custkey,
           date '1992-01-01' + tpch_i(k, 101, 0, 2284) AS orderdate,
           tpch_i(k, 102, 1, 7) AS nlines
    FROM (SELECT k, tpch_i(k, 100, 1, greatest(1, {C2})) AS ck
          FROM generate_series({lo}, {hi}) k) g;
INSERT INTO {l}
SELECT k, partkey, ((partkey * 7 + tpch_i(key, 112, 0, 3) * ({S} / 4)) % {S}) + 1, ln,
       qty, qty * tpch_price(partkey), tpch_i(key, 114, 0, 10)::numeric / 100,
       tpch_i(key, 115, 0, 8)::numeric / 100,
       CASE WHEN shipdate + rdelay <= date '1995-06-17'
            THEN CASE WHEN tpch_r(key, 116) < 0.5 THEN 'R' ELSE 'A' END ELSE 'N' END,
       CASE WHEN shipdate > date '1995-06-17' THEN 'O' ELSE 'F' END,
       shipdate, orderdate + tpch_i(key, 117, 30, 90), shipdate + rdelay,
       tpch_pick(key, 118, {ins}), tpch_pick(key, 119, {modes}), left(tpch_text(key, 120), 44)
FROM (SELECT k, ln, key, orderdate, tpch_i(key, 111, 1, {P}) AS partkey,
             tpch_i(key, 113, 1, 50)::numeric AS qty,
             orderdate + tpch_i(key, 121, 1, 121) AS shipdate, tpch_i(key, 122, 1, 30) AS rdelay
      FROM (SELECT b.k, ln, b.k::bigint * 8 + ln AS key, b.orderdate
            FROM tpch_ob b, generate_series(1, b.nlines) ln) x) y;
INSERT INTO {o}
SELECT b.k, b.custkey,
       CASE WHEN s.nf = b.nlines THEN 'F' WHEN s.nf = 0 THEN 'O' ELSE 'P' END,
       s.total, b.orderdate, tpch_pick(b.k, 103, {prio}),
       'Clerk#' || lpad(tpch_i(b.k, 104, 1, {clerks})::text, 9, '0'), 0,
       left(tpch_text(b.k, 105) || ' ' || tpch_text(b.k, 109), 79)
FROM tpch_ob b JOIN (
    SELECT l_orderkey, count(*) FILTER (WHERE l_linestatus = 'F') AS nf,
           round(sum(l_extendedprice * (1 + l_tax) * (1 - l_discount)), 2) AS total
    FROM {l} GROUP BY l_orderkey) s ON s.l_orderkey = b.k;
COMMIT;""".format(o=t("orders"), l=t("lineitem"), ocols=COLUMNS["orders"],
                  lcols=COLUMNS["lineitem"], lo=lo, hi=hi, C2=(C * 2) // 3, S=S, P=P,
                  ins=arr(INSTRUCTS), modes=arr(MODES), prio=arr(PRIORITIES),
                  clerks=max(1, int(sf * 1000)))


def index_sql(schema, names):
    """index_sql: the indexes of the tables `names` in `schema`, then
    VACUUM ANALYZE of each."""
    sql = []
    for name in names:
        for ddl in INDEXES[name]:
            sql.append(ddl.format(t="%s.%s" % (schema, name)) + ";")
    for name in names:
        sql.append("VACUUM (FREEZE, ANALYZE) %s.%s;" % (schema, name))
    return "\n".join(sql)


def read_queries(path):
    """read_queries: [(number, title, sql)] from tpch_queries.sql."""
    text = open(path).read()
    out = []
    for m in re.finditer(r"^-- Q(\d+): ([^\n]*)\n(.*?);[ \t]*$", text, re.M | re.S):
        out.append((int(m.group(1)), m.group(2).strip(), m.group(3).strip()))
    if [q[0] for q in out] != list(range(1, 23)):
        sys.exit("tpch: %s must hold Q1..Q22 in order (found %s)" % (path, [q[0] for q in out]))
    return out


# ---- the run ----------------------------------------------------------

class Tpch:
    """Tpch: the whole scenario: load, define, measure, report."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.started = time.time()
        self.queries = [q for q in read_queries(os.path.join(HERE, "tpch_queries.sql"))
                        if not cfg.queries or q[0] in cfg.queries]
        self.variants = [v for v in VARIANTS if v[0] in cfg.fdws]
        self.results = []       # dicts: rtt, query, variant, ms (None), state, runs
        self.failures = []

    def load(self):
        """load: the shards get the six small tables (replicated, as a user
        of a sharded cluster keeps dimension tables) and their range of
        orders and lineitem; the coordinator gets local copies of all
        eight in schema tpch_local.  All instances in parallel."""
        cfg = self.cfg
        n = sizes(cfg.sf)
        self.ranges = split_range(n["orders"], cfg.shards)
        fn = functions_sql()
        jobs = []
        for k, (lo, hi) in enumerate(self.ranges):
            jobs.append((cfg.shard_ports[k], fn + small_sql(cfg.sf, "public") + "\n" +
                         big_sql(cfg.sf, "public", lo, hi) + "\n" +
                         index_sql("public", SMALL + BIG)))
        jobs.append((cfg.coord_port, fn + "CREATE SCHEMA tpch_local;\n" +
                     small_sql(cfg.sf, "tpch_local") + "\n" +
                     big_sql(cfg.sf, "tpch_local", 1, n["orders"]) + "\n" +
                     index_sql("tpch_local", SMALL + BIG)))
        t = time.time()
        log("loading scale factor %s (%s orders, %s suppliers, %s customers, %s parts) ..."
            % (fmt_num(cfg.sf), n["orders"], n["supplier"], n["customer"], n["part"]))
        run_parallel(cfg, jobs)
        out = psql_script(cfg, cfg.coord_port, "SELECT count(*) FROM tpch_local.lineitem;")
        self.lineitems = int(out.split()[0])
        log("  loaded in %.1f s: %d lineitem rows" % (time.time() - t, self.lineitems))
        for k, port in enumerate(cfg.shard_ports):
            if cfg.shard_parallel >= 0:
                psql_script(cfg, port, "ALTER DATABASE %s SET max_parallel_workers_per_gather = %d;"
                            % (DB, cfg.shard_parallel))
            out = psql_script(cfg, port, "SELECT count(*) FROM lineitem;")
            log("  shard %d: orders %d..%d, %s lineitem rows" % (k + 1, self.ranges[k][0],
                                                             self.ranges[k][1], out.split()[0]))

    def host_port(self, rtt, shard):
        """host_port: the shard at 0 ms, its latency proxy otherwise."""
        return self.cfg.shard_ports[shard - 1] if rtt == 0 else self.cfg.proxies[rtt][shard - 1]

    def schema(self, key, rtt):
        """schema: the coordinator schema of one wrapper at one RTT."""
        return "tpch_%s_r%s" % (key, rtt_tag(rtt))

    def define(self):
        """define: per wrapper and RTT, a server per shard, the small tables
        as foreign tables on shard 1, orders and lineitem range-partitioned
        on the order key with one foreign partition per shard; then ANALYZE
        of every foreign table and partitioned table."""
        cfg = self.cfg
        sql = ["CREATE EXTENSION IF NOT EXISTS postgres_fdw;"]
        if any(v[1] == "async_fdw" for v in self.variants):
            sql.append("CREATE EXTENSION IF NOT EXISTS async_fdw;")
        analyze = []
        for key, wrapper, _, options in self.variants:
            for rtt in cfg.rtts:
                sch = self.schema(key, rtt)
                sql.append("CREATE SCHEMA %s;" % sch)
                for shard in range(1, cfg.shards + 1):
                    srv = "%s_s%d" % (sch, shard)
                    opts = {"host": "127.0.0.1", "port": str(self.host_port(rtt, shard)),
                            "dbname": DB, "fetch_size": str(cfg.fetch_size)}
                    opts.update(options)
                    sql.append("CREATE SERVER %s FOREIGN DATA WRAPPER %s OPTIONS (%s);" % (
                        srv, wrapper, ", ".join("%s '%s'" % kv for kv in opts.items())))
                    sql.append("CREATE USER MAPPING FOR CURRENT_USER SERVER %s OPTIONS (user '%s');"
                               % (srv, USER))
                # The layout with replicated tables (--copies): async_fdw's
                # small tables name every other shard's copy.
                copies = ""
                if cfg.copies and wrapper == "async_fdw" and cfg.shards > 1:
                    copies = ", copies '%s'" % ", ".join(
                        "%s_s%d" % (sch, s) for s in range(2, cfg.shards + 1))
                for name in SMALL:
                    sql.append("CREATE FOREIGN TABLE %s.%s (%s) SERVER %s_s1 "
                               "OPTIONS (schema_name 'public', table_name '%s'%s);"
                               % (sch, name, COLUMNS[name], sch, name, copies))
                    analyze.append("ANALYZE %s.%s;" % (sch, name))
                for name, col in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
                    sql.append("CREATE TABLE %s.%s (%s) PARTITION BY RANGE (%s);"
                               % (sch, name, COLUMNS[name], col))
                    for k, (lo, hi) in enumerate(self.ranges):
                        sql.append("CREATE FOREIGN TABLE %s.%s_p%d PARTITION OF %s.%s "
                                   "FOR VALUES FROM (%d) TO (%d) SERVER %s_s%d "
                                   "OPTIONS (schema_name 'public', table_name '%s');"
                                   % (sch, name, k + 1, sch, name, lo, hi + 1, sch, k + 1, name))
                        analyze.append("ANALYZE %s.%s_p%d;" % (sch, name, k + 1))
                    analyze.append("ANALYZE %s.%s;" % (sch, name))
        t = time.time()
        psql_script(cfg, cfg.coord_port, "\n".join(sql))
        psql_script(cfg, cfg.coord_port, "\n".join(analyze))
        log("defined and analyzed the foreign tables in %.1f s" % (time.time() - t))

    def session(self, key, rtt):
        """session: a psql session with search_path on one wrapper's schema
        (or the local copies), the per-query timeout, and for postgres_fdw
        the partitionwise settings a user of a sharded cluster turns on
        (async_fdw turns them on itself, per query)."""
        cfg = self.cfg
        s = Psql(cfg, cfg.coord_port, "tpch %s rtt %s" % (key, fmt_num(rtt)))
        s.run("SET search_path = %s, public" % (
            "tpch_local" if key == "local" else self.schema(key, rtt)))
        s.run("SET statement_timeout = '%ds'" % cfg.timeout)
        if key.startswith("pg") or (key == "afdw" and cfg.afdw_partitionwise):
            s.run("SET enable_partitionwise_join = on")
            s.run("SET enable_partitionwise_aggregate = on")
        return s

    def execute(self, sess, sql):
        """execute: one run: (rows, ms, state) with state "ok", "timeout"
        or "error: <message>"."""
        out, ms, err = sess.try_run(sql)
        if err is None:
            return out, ms, "ok"
        if TIMEOUT_MSG in err or any(TIMEOUT_MSG in l for l in out):
            return None, None, "timeout"
        return None, None, "error: " + re.sub(r"^(psql:[^:]*:\d+: )?ERROR:\s*", "", err)

    def measure(self, rtt, plans_dir):
        """measure: every query at one RTT through local and each wrapper:
        one warm-up each, then `runs` rounds in which each runs once in
        turn (none after a warm-up that timed out or failed), so that a
        change of the machine's load touches every variant alike; the rows
        of every run compared with the local rows; the plans saved once per
        query."""
        cfg = self.cfg
        keys = ["local"] + [v[0] for v in self.variants]
        sessions = {k: self.session(k, rtt) for k in keys}
        for num, title, sql in self.queries:
            expected = None
            state, times, bad = {}, {}, {}
            for key in keys:
                rows, _, state[key] = self.execute(sessions[key], sql)
                times[key], bad[key] = [], None
                if state[key] == "ok":
                    got = sorted(rows)
                    if key == "local":
                        expected = got
                    elif got != expected:
                        bad[key] = got
            for _ in range(cfg.runs):
                for key in keys:
                    if state[key] != "ok":
                        continue
                    rows, ms, state[key] = self.execute(sessions[key], sql)
                    if state[key] != "ok":
                        continue
                    times[key].append(ms)
                    if key != "local" and sorted(rows) != expected:
                        bad[key] = sorted(rows)
            for key in keys:
                if state[key] != "ok" and not sessions[key].alive():
                    sessions[key] = self.session(key, rtt)
                ms = statistics.median(times[key]) if state[key] == "ok" else None
                correct = "-" if key == "local" else (
                    "no" if bad[key] is not None else ("yes" if state[key] == "ok" else "?"))
                if bad[key] is not None:
                    self.failures.append((rtt, num, key, expected, bad[key]))
                    log("FAIL: Q%d through %s at %s ms: rows differ from local (%d rows "
                        "against %d)" % (num, key, fmt_num(rtt), len(bad[key]),
                                         len(expected or [])))
                if state[key].startswith("error") and key == "local":
                    self.failures.append((rtt, num, key, [], [state[key]]))
                self.results.append({"rtt": rtt, "query": num, "variant": key, "ms": ms,
                                     "state": state[key], "correct": correct,
                                     "runs": ";".join("%.1f" % t for t in times[key]),
                                     "rows": len(expected or [])})
                log("  Q%-2d rtt %-3s %-8s %s%s" % (num, fmt_num(rtt), key,
                                                   fmt_ms(ms) + " ms" if ms is not None
                                                   else state[key],
                                                   "" if correct != "no" else "  ROWS DIFFER"))
            if plans_dir:
                self.save_plan(plans_dir, sessions, num, title, sql)
        for s in sessions.values():
            s.close()

    def save_plan(self, plans_dir, sessions, num, title, sql):
        """save_plan: EXPLAIN (VERBOSE) of the query through each wrapper,
        in the session that timed it, into tpch_plans/qNN.txt."""
        parts = ["-- Q%d: %s\n%s;\n" % (num, title, sql)]
        for key, _, label, _ in self.variants:
            out, _, err = sessions[key].try_run("EXPLAIN (VERBOSE) " + sql)
            parts.append("==== %s%s\n%s\n" % (label, " (EXPLAIN failed)" if err else "",
                                              "\n".join(out)))
        with open(os.path.join(plans_dir, "q%02d.txt" % num), "w") as f:
            f.write("\n".join(parts))

    def cell(self, rtt, num, key):
        """cell: the result dict of one query, wrapper and RTT."""
        for r in self.results:
            if r["rtt"] == rtt and r["query"] == num and r["variant"] == key:
                return r
        return None

    def markdown(self):
        """markdown: the report, one table per RTT."""
        cfg = self.cfg
        total = time.time() - self.started + cfg.setup_seconds
        L = ["# TPC-H-shaped scenario (issue 26)", "",
             "Command: `%s`; %s; scale factor %s (%d lineitem rows), %d shards, fetch_size %d, "
             "one warm-up and %d timed runs each, the variants in turns (median ms), timeout %d s, "
             "total %d min %02d s%s."
             % (cfg.command, cfg.pg_version, fmt_num(cfg.sf), self.lineitems, cfg.shards,
                cfg.fetch_size, cfg.runs, cfg.timeout, total // 60, total % 60,
                "" if cfg.shard_parallel < 0 else
                "; shards at max_parallel_workers_per_gather = %d" % cfg.shard_parallel), "",
             "orders and lineitem: range-partitioned on the order key, one foreign partition "
             "per shard (co-located); region, nation, supplier, customer, part, partsupp: on "
             "every shard, foreign tables to shard 1%s; local: the same rows in plain tables on "
             "the coordinator. postgres_fdw runs with enable_partitionwise_join/aggregate on; "
             "async_fdw %s. Speed-up = best postgres_fdw ms / async_fdw ms (above 1: async_fdw "
             "faster); a timed-out postgres_fdw counts as the timeout (a lower bound, marked "
             "≥). Correct: every run's rows, sorted, equal the local rows exactly (no float "
             "columns)." % ("" if not cfg.copies else
                            " (async_fdw's declare their copies on every shard: option copies)",
                            "with them on too" if cfg.afdw_partitionwise else "at its defaults"),
             ""]
        for rtt in cfg.rtts:
            L += ["## RTT %s ms" % fmt_num(rtt), "",
                  "| query | local | pg_fdw sync | pg_fdw async | async_fdw | speed-up | "
                  "async_fdw / local | correct |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
            ratios, finished = [], []
            for num, title, _ in self.queries:
                cells = {k: self.cell(rtt, num, k) for k in ["local"] + [v[0] for v in self.variants]}
                show = lambda c: "–" if c is None else (
                    fmt_ms(c["ms"]) if c["state"] == "ok" else c["state"][:40])
                pg = [c for k, c in cells.items() if k.startswith("pg") and c]
                pg_ms = [c["ms"] for c in pg if c["state"] == "ok"]
                pg_to = any(c["state"] == "timeout" for c in pg)
                af = cells.get("afdw")
                ratio, rtext = None, "–"
                if af and af["state"] == "ok" and pg:
                    if pg_ms:
                        best = min(pg_ms)
                        ratio, rtext = best / af["ms"], "%.2f" % (best / af["ms"])
                        finished.append(ratio)
                    elif pg_to:
                        ratio = cfg.timeout * 1000.0 / af["ms"]
                        rtext = "≥ %.1f" % ratio
                    ratios.append(ratio)
                loc = cells["local"]
                vs_local = ("%.1f" % (af["ms"] / loc["ms"]) if af and af["state"] == "ok" and
                            loc and loc["state"] == "ok" and loc["ms"] else "–")
                marks = {c["correct"] for k, c in cells.items() if k != "local" and c}
                correct = "**NO**" if "no" in marks else ("yes" if "yes" in marks else "–")
                L.append("| Q%d %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    num, title, show(loc), show(cells.get("pgsync")), show(cells.get("pgasync")),
                    show(af), rtext, vs_local, correct))
            gm = lambda xs: "%.2f" % math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else "–"
            L += ["", "Geometric mean of the speed-ups: **%s** over %d queries (timeouts of "
                  "postgres_fdw counted as %d s); %s over the %d where a postgres_fdw variant "
                  "finished." % (gm(ratios), len(ratios), cfg.timeout, gm(finished), len(finished)),
                  ""]
        bad = [f for f in self.failures]
        L.append("Correctness: %s" % (
            "every wrapper returned the local rows for every query it finished." if not bad else
            "**FAILED** for " + ", ".join("Q%d %s (RTT %s)" % (f[1], f[2], fmt_num(f[0]))
                                          for f in bad)))
        return "\n".join(L)

    def write_csv(self):
        """write_csv: one row per query, wrapper and RTT."""
        with open(os.path.join(self.cfg.results, "tpch.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["rtt_ms", "query", "variant", "median_ms", "state", "correct",
                        "rows", "runs_ms"])
            for r in self.results:
                w.writerow([fmt_num(r["rtt"]), r["query"], r["variant"],
                            "" if r["ms"] is None else "%.1f" % r["ms"], r["state"],
                            r["correct"], r["rows"], r["runs"]])

    def write_diffs(self):
        """write_diffs: the rows of every failed comparison, local first."""
        path = os.path.join(self.cfg.results, "tpch_diffs.txt")
        if not self.failures:
            if os.path.exists(path):
                os.unlink(path)
            return
        with open(path, "w") as f:
            for rtt, num, key, expected, got in self.failures:
                f.write("==== Q%d %s RTT %s\n-- local\n%s\n-- %s\n%s\n" % (
                    num, key, fmt_num(rtt), "\n".join(expected), key, "\n".join(got)))

    def main(self):
        """main: load, define, measure at every RTT, report."""
        cfg = self.cfg
        os.makedirs(cfg.results, exist_ok=True)
        plans_dir = os.path.join(cfg.results, "tpch_plans")
        os.makedirs(plans_dir, exist_ok=True)
        for name in os.listdir(plans_dir):
            os.unlink(os.path.join(plans_dir, name))
        self.load()
        self.define()
        for i, rtt in enumerate(cfg.rtts):
            log("RTT %s ms:" % fmt_num(rtt))
            self.measure(rtt, plans_dir if i == 0 else None)
        self.write_csv()
        self.write_diffs()
        md = self.markdown()
        with open(os.path.join(cfg.results, "tpch.md"), "w") as f:
            f.write(md + "\n")
        log("")
        log(md)
        log("")
        log("results in %s (tpch.md, tpch.csv, tpch_plans/)" % cfg.results)
        if self.failures:
            log("FAIL: rows differ from the local rows (see tpch_diffs.txt)")
            sys.exit(1)


def parse_args():
    """parse_args: the options tpch.sh passes (already validated there)."""
    ap = argparse.ArgumentParser(description="run through test/bench/tpch.sh")
    cluster_args(ap)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sf", type=float, default=0.1)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--fetch-size", type=int, default=10000)
    ap.add_argument("--fdws", default="postgres_fdw_sync,postgres_fdw_async,async_fdw")
    ap.add_argument("--queries", type=ints, default=[])
    ap.add_argument("--afdw-partitionwise", type=int, default=0)
    ap.add_argument("--copies", type=int, default=0)
    ap.add_argument("--shard-parallel", type=int, default=-1,
                    help="max_parallel_workers_per_gather of the shards' database (-1: untouched; tpch.sh turns auto into a number)")
    cfg = ap.parse_args()
    cluster_config(cfg)
    names = {"postgres_fdw_sync": "pgsync", "postgres_fdw_async": "pgasync", "async_fdw": "afdw"}
    cfg.fdws = [names[f] for f in cfg.fdws.split(",") if f in names]
    return cfg


if __name__ == "__main__":
    try:
        Tpch(parse_args()).main()
    except KeyboardInterrupt:
        print("\ntpch: interrupted", file=sys.stderr)
        sys.exit(130)
