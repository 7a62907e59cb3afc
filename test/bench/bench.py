#!/usr/bin/env python3
"""test/bench/bench.py
   Measurement half of the benchmark harness: loads the data, defines the
   scenarios on the coordinator, times them (scans, raw COPY, point lookups),
   and writes the CSV, Markdown and chart files.  run.sh starts and stops the
   servers and the latency proxies and calls this script; run it through
   run.sh, not by hand.  The write scenarios (W) live in writes.py, which
   uses this file's sessions and helpers.  Standard library only.
"""

import argparse
import csv
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

QUERY = "SELECT count(*), sum(a), max(c) FROM (SELECT * FROM {rel} OFFSET 0) s"
# Starts a scan of every foreign partition (BeginForeignScan opens the
# connections) without fetching a row: cheap, and after it a timed run pays
# no connection set-up.
WARMUP = "SELECT * FROM {rel} LIMIT 0"
# The raw limit copies the columns the query needs, which are exactly what
# every FDW fetches (Remote SQL: SELECT a, c FROM ...); with SELECT * the
# "limit" would also ship column b and an FDW could beat it.
RAW_COPY = "COPY (SELECT a, c FROM %s) TO STDOUT"
DB = "bench"
USER = "postgres"

# Scenarios L and S (connections under load, first query of a session) use a
# small data set of their own, whatever --rows says: the figure is about
# connections, not about moving rows.
LOAD_ROWS = 10000
LOAD_CLIENTS = 64
LOAD_THREADS = 2
LOAD_QUERY = "SELECT count(*), max(c) FROM (SELECT * FROM {rel} OFFSET 0) s"
# What the sampler counts on each shard every LOAD_SAMPLE_MS during a load
# run; its own session is left out.
SHARD_CLIENTS = ("SELECT count(*) FROM pg_stat_activity "
                 "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
LOAD_SAMPLE_MS = 100
FIRST_QUERY = "SELECT count(*) FROM {rel}"
FIRST_SESSIONS = 15
LOAD_TABLES = {
    "ld": "4 foreign partitions of 2,500 rows on shard 1, one server object",
    "le": "one foreign partition per shard, 10,000 rows in all",
}

SCENARIOS = {
    "A": "local table",
    "B": "local partitioned table, 4 partitions",
    "C": "one foreign table holding all rows (shard 1)",
    "D": "4 foreign partitions on shard 1, one server object",
    "E": "one foreign partition on each shard",
    "F": "16 foreign partitions on shard 1, one server object",
    "G": "16 foreign partitions spread over the shards",
    "L": "load: %d pgbench clients on ld and le" % LOAD_CLIENTS,
    "S": "first query of a new session on ld",
    "W": "writes: bulk load, UPDATE of every row, single-row INSERT, 4-shard transaction",
}
LOCAL_SCENARIOS = ("A", "B")
# scenarios with their own tables and measurement (not scans of --rows rows)
CONNECTION_SCENARIOS = ("L", "S", "W")
FDW_NAMES = ("postgres_fdw_sync", "postgres_fdw_async", "async_fdw")
FDW_LABEL = {
    "local": "local",
    "postgres_fdw_sync": "postgres_fdw sync",
    "postgres_fdw_async": "postgres_fdw async",
    "async_fdw": "async_fdw",
    "raw_copy": "raw COPY",
    "direct": "direct to shard",
}


def log(msg=""):
    """log: print a progress line at once (stdout may be a pipe)."""
    print(msg, flush=True)


def fail(msg):
    """fail: stop the whole run with a message; run.sh then cleans up."""
    print("bench: error: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def split_range(rows, parts):
    """split_range: cut 1..rows into `parts` contiguous (lo, hi) ranges, hi inclusive."""
    bounds = [rows * k // parts for k in range(parts + 1)]
    return [(bounds[k] + 1, bounds[k + 1]) for k in range(parts)]


def rtt_tag(rtt):
    """rtt_tag: a round-trip time as it appears in object names (1 -> "1", 0.5 -> "0_5")."""
    return fmt_num(rtt).replace(".", "_")


def fmt_num(x):
    """fmt_num: a number without a useless ".0"."""
    return str(int(x)) if float(x) == int(x) else str(x)


def fmt_ms(x):
    """fmt_ms: milliseconds for the tables: 3 significant digits, no exponent."""
    if x is None:
        return "–"
    if x >= 100:
        return "%d" % round(x)
    if x >= 10:
        return "%.1f" % x
    return "%.2f" % x


class Partition:
    """Partition: one range of rows and the shard table holding it.

    Shard tables are named after their range (t_<lo>_<hi>), so scenarios
    needing the same range on the same shard (E's and D's first partition
    with 4 shards, G's and F's on shard 1) share one table and it is loaded
    once.
    """

    def __init__(self, name, lo, hi, shard):
        self.name, self.lo, self.hi, self.shard = name, lo, hi, shard
        self.table = "t_%d_%d" % (lo, hi)


def layout(scenario, rows, shards):
    """layout: the partitions of a foreign scenario (shards numbered from 1)."""
    if scenario == "C":
        return [Partition("c", 1, rows, 1)]
    count, place = {
        "D": (4, lambda k: 1),
        "E": (shards, lambda k: k + 1),
        "F": (16, lambda k: 1),
        "G": (16, lambda k: k % shards + 1),
    }[scenario]
    return [Partition("%s_p%d" % (scenario.lower(), k + 1), lo, hi, place(k))
            for k, (lo, hi) in enumerate(split_range(rows, count))]


def load_layout(name, shards):
    """load_layout: the partitions of ld (like D) or le (like E) holding
    LOAD_ROWS rows; their shard tables are named l_<lo>_<hi> so that they
    never meet a table of the --rows data set."""
    count, place = {"ld": (4, lambda k: 1), "le": (shards, lambda k: k + 1)}[name]
    parts = []
    for k, (lo, hi) in enumerate(split_range(LOAD_ROWS, count)):
        p = Partition("%s_p%d" % (name, k + 1), lo, hi, place(k))
        p.table = "l_%d_%d" % (lo, hi)
        parts.append(p)
    return parts


class Variant:
    """Variant: one FDW configuration being compared (its servers and schema)."""

    def __init__(self, key, fdw, wrapper, mode, options):
        self.key, self.fdw, self.wrapper, self.mode = key, fdw, wrapper, mode
        self.options = options          # extra server options

    def label(self):
        """label: how the variant is named in tables and the chart."""
        if self.fdw == "async_fdw":
            return "async_fdw" if self.mode == "default" else "async_fdw %s" % self.mode
        return FDW_LABEL[self.fdw]

    def schema(self, rtt):
        """schema: the coordinator schema holding this variant's tables at one RTT."""
        return "%s_r%s" % (self.key, rtt_tag(rtt))

    def server(self, rtt, shard):
        """server: the server object for one shard at one RTT."""
        return "%s_r%s_s%d" % (self.key, rtt_tag(rtt), shard)


class Psql:
    """Psql: a persistent psql session driven through a pipe, with \\timing on."""

    MARK = "@@bench-end@@"

    def __init__(self, cfg, port, name):
        self.name = name
        self.proc = subprocess.Popen(
            [cfg.psql, "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", str(port),
             "-U", USER, "-d", DB],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1)
        self.run("\\timing on")

    def run(self, sql):
        """run: execute one statement; return (output lines, server-side ms).

        Aborts the benchmark on any ERROR: a benchmark of a failing query
        means nothing.
        """
        out, ms, err = self.try_run(sql)
        if err:
            fail("%s: %s\n  %s" % (self.name, sql.strip(), "\n  ".join(out + [err])))
        return out, ms

    def alive(self):
        """alive: whether the psql process still runs (it exits when its
        connection is lost)."""
        return self.proc.poll() is None

    def try_run(self, sql):
        """try_run: execute one statement; return (output lines, ms, error):
        error is the first error line (None when the statement succeeded).
        The write scenarios use it, where a failure is a result to report."""
        sql = sql.strip()
        if not sql.startswith("\\"):
            sql = sql.rstrip(";") + ";"
        try:
            self.proc.stdin.write(sql + "\n\\echo " + self.MARK + "\n")
            self.proc.stdin.flush()
        except OSError:
            return [], None, "psql session %s has ended" % self.name
        out, ms = [], None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                return out, None, "psql session %s ended unexpectedly: %s" % (
                    self.name, " / ".join(out[-3:]))
            line = line.rstrip("\n")
            if line == self.MARK:
                break
            m = re.match(r"^Time: ([0-9.]+) ms", line)
            if m:
                ms = float(m.group(1))
            else:
                out.append(line)
        for l in out:
            if l.startswith(("ERROR:", "FATAL:", "psql:", "unrecognized", "invalid")):
                return out, ms, l
        return out, ms, None

    def close(self):
        """close: end the session."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


def psql_script(cfg, port, sql, db=DB):
    """psql_script: run SQL in a fresh psql, stop at the first error; return stdout."""
    r = subprocess.run(
        [cfg.psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
         "-p", str(port), "-U", USER, "-d", db],
        input=sql, text=True, capture_output=True)
    if r.returncode != 0:
        fail("psql on port %s failed:\n%s" % (port, r.stderr.strip()))
    return r.stdout


def run_parallel(cfg, jobs):
    """run_parallel: run (port, sql) scripts concurrently, each in its own psql."""
    procs = []
    for port, sql in jobs:
        p = subprocess.Popen(
            [cfg.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
             "-p", str(port), "-U", USER, "-d", DB],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        procs.append((port, p, sql))
    for port, p, sql in procs:
        _, err = p.communicate(sql)
        if p.returncode != 0:
            fail("loading on port %s failed:\n%s" % (port, err.strip()))


def table_sql(table, lo, hi, index=False):
    """table_sql: create and fill one data table; created and filled in one
    transaction so that wal_level=minimal skips WAL for it."""
    sql = ("BEGIN;\n"
           "CREATE TABLE %s (a int, b int, c text);\n"
           "INSERT INTO %s SELECT g, g %% 1000, md5(g::text) "
           "FROM generate_series(%d, %d) g;\n" % (table, table, lo, hi))
    if index:
        sql += "CREATE INDEX ON %s (a);\n" % table
    return sql + "COMMIT;\nVACUUM (FREEZE, ANALYZE) %s;\n" % table


class Bench:
    """Bench: the whole run: configuration, sessions and collected results."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.started = time.time()
        self.rows = cfg.rows
        self.variants = []
        self.scan_results = []      # dicts, one per CSV row
        self.lookup_results = []
        self.proxy_results = []
        self.load_results = []
        self.first_results = []
        self.writes = None          # WriteBench when W is selected
        self.skipped = []           # human-readable notes
        self.reference = None       # (count, sum, max) every query must return
        self.sessions = {}
        self.admin = None

    # ---- set-up -------------------------------------------------------

    def choose_variants(self):
        """choose_variants: the FDW configurations to compare, in table order."""
        for fdw in self.cfg.fdws:
            if fdw == "postgres_fdw_sync":
                self.variants.append(Variant("pgsync", fdw, "postgres_fdw", "-",
                                             {"async_capable": "false"}))
            elif fdw == "postgres_fdw_async":
                self.variants.append(Variant("pgasync", fdw, "postgres_fdw", "-",
                                             {"async_capable": "true"}))
            elif fdw == "async_fdw":
                for mode in self.cfg.modes:
                    opts = {} if mode == "default" else {"fetch_mode": mode}
                    self.variants.append(Variant("afdw_" + re.sub(r"\W", "_", mode),
                                                 fdw, "async_fdw", mode, opts))

    def foreign_scenarios(self):
        """foreign_scenarios: the selected scenarios that go through an FDW."""
        return [s for s in self.cfg.scenarios
                if s not in LOCAL_SCENARIOS and s not in CONNECTION_SCENARIOS]

    def load_tables(self):
        """load_tables: the small tables (ld, le) scenarios L and S query."""
        names = []
        if "L" in self.cfg.scenarios or "S" in self.cfg.scenarios:
            names.append("ld")
        if "L" in self.cfg.scenarios:
            names.append("le")
        return names

    def load_variants(self):
        """load_variants: the variants L and S compare: async_fdw against
        postgres_fdw with async_capable on (the sync one is left out to keep
        the run short)."""
        return [v for v in self.variants if v.fdw != "postgres_fdw_sync"]

    def load(self):
        """load: create the shard tables every selected scenario (and the
        lookups) need, plus the local tables on the coordinator, all
        instances in parallel."""
        cfg = self.cfg
        needed = list(self.foreign_scenarios())
        if cfg.lookups and "E" not in needed:
            needed.append("E")
        tables = {}     # (shard, table) -> [lo, hi, needs an index on a]
        for scen in needed:
            for part in layout(scen, self.rows, cfg.shards):
                t = tables.setdefault((part.shard, part.table), [part.lo, part.hi, False])
                t[2] = t[2] or scen == "E"
        for name in self.load_tables():
            for part in load_layout(name, cfg.shards):
                tables.setdefault((part.shard, part.table), [part.lo, part.hi, False])
        per_shard = {k: "" for k in range(1, cfg.shards + 1)}
        for (shard, table), (lo, hi, index) in sorted(tables.items()):
            per_shard[shard] += table_sql(table, lo, hi, index)
        jobs = [(cfg.shard_ports[k - 1], sql) for k, sql in per_shard.items() if sql]

        local = ""
        if "A" in cfg.scenarios:
            local += table_sql("a_local", 1, self.rows)
        if "B" in cfg.scenarios:
            local += "BEGIN;\nCREATE TABLE b_part (a int, b int, c text) PARTITION BY RANGE (a);\n"
            for k, (lo, hi) in enumerate(split_range(self.rows, 4)):
                local += ("CREATE TABLE b_part_p%d PARTITION OF b_part "
                          "FOR VALUES FROM (%d) TO (%d);\n" % (k + 1, lo, hi + 1))
            local += ("INSERT INTO b_part SELECT g, g %% 1000, md5(g::text) "
                      "FROM generate_series(1, %d) g;\nCOMMIT;\n"
                      "VACUUM (FREEZE, ANALYZE) b_part;\n" % self.rows)
        if local:
            jobs.append((cfg.coord_port, local))

        t = time.time()
        log("loading %d rows per scenario (%s) on %d shard(s) and the coordinator ..."
            % (self.rows, ",".join(needed + [s for s in cfg.scenarios if s in LOCAL_SCENARIOS]
                                   + self.load_tables()), cfg.shards))
        run_parallel(cfg, jobs)
        log("  loaded in %.1f s" % (time.time() - t))

    def host_port(self, rtt, shard):
        """host_port: where a server object for `shard` points at round trip `rtt`:
        the shard itself at 0 ms, the latency proxy otherwise."""
        if rtt == 0:
            return self.cfg.shard_ports[shard - 1]
        return self.cfg.proxies[rtt][shard - 1]

    def define(self):
        """define: create extensions, servers, user mappings and foreign tables
        for every variant and RTT on the coordinator."""
        cfg = self.cfg
        sql = ["CREATE EXTENSION IF NOT EXISTS postgres_fdw;"]
        if any(v.wrapper == "async_fdw" for v in self.variants):
            sql.append("CREATE EXTENSION IF NOT EXISTS async_fdw;")
        for v in self.variants:
            for rtt in cfg.rtts:
                for shard in range(1, cfg.shards + 1):
                    opts = {"host": "127.0.0.1", "port": str(self.host_port(rtt, shard)),
                            "dbname": DB, "fetch_size": str(cfg.fetch_sizes[0])}
                    opts.update(v.options)
                    srv = v.server(rtt, shard)
                    sql.append("CREATE SERVER %s FOREIGN DATA WRAPPER %s OPTIONS (%s);" % (
                        srv, v.wrapper,
                        ", ".join("%s '%s'" % (k, val) for k, val in opts.items())))
                    sql.append("CREATE USER MAPPING FOR CURRENT_USER SERVER %s "
                               "OPTIONS (user '%s');" % (srv, USER))
                schema = v.schema(rtt)
                sql.append("CREATE SCHEMA %s;" % schema)
                for scen in self.foreign_scenarios() + (
                        ["E"] if cfg.lookups and "E" not in cfg.scenarios else []):
                    sql.extend(self.foreign_ddl(v, rtt, schema, scen))
                if v in self.load_variants():
                    for name in self.load_tables():
                        sql.extend(self.load_ddl(v, rtt, schema, name))
        psql_script(cfg, cfg.coord_port, "\n".join(sql) + "\n")

    def foreign_ddl(self, v, rtt, schema, scen):
        """foreign_ddl: statements defining one scenario's relation in a schema."""
        parts = layout(scen, self.rows, self.cfg.shards)
        rel = "%s.%s" % (schema, scen.lower())
        opts = lambda p: "OPTIONS (schema_name 'public', table_name '%s')" % p.table
        if scen == "C":
            p = parts[0]
            return ["CREATE FOREIGN TABLE %s (a int, b int, c text) SERVER %s %s;"
                    % (rel, v.server(rtt, p.shard), opts(p))]
        out = ["CREATE TABLE %s (a int, b int, c text) PARTITION BY RANGE (a);" % rel]
        for p in parts:
            out.append("CREATE FOREIGN TABLE %s.%s PARTITION OF %s FOR VALUES FROM (%d) TO (%d) "
                       "SERVER %s %s;" % (schema, p.name, rel, p.lo, p.hi + 1,
                                          v.server(rtt, p.shard), opts(p)))
        return out

    def load_ddl(self, v, rtt, schema, name):
        """load_ddl: statements defining ld or le in a variant's schema."""
        rel = "%s.%s" % (schema, name)
        out = ["CREATE TABLE %s (a int, b int, c text) PARTITION BY RANGE (a);" % rel]
        for p in load_layout(name, self.cfg.shards):
            out.append("CREATE FOREIGN TABLE %s.%s PARTITION OF %s FOR VALUES FROM (%d) TO (%d) "
                       "SERVER %s OPTIONS (schema_name 'public', table_name '%s');"
                       % (schema, p.name, rel, p.lo, p.hi + 1, v.server(rtt, p.shard), p.table))
        return out

    def relation(self, scen, v=None, rtt=0):
        """relation: the name to query for a scenario (and variant, RTT)."""
        if scen == "A":
            return "a_local"
        if scen == "B":
            return "b_part"
        return "%s.%s" % (v.schema(rtt), scen.lower())

    def measured_at(self, scen, rtt):
        """measured_at: whether a foreign scenario is measured at an RTT (by
        default only --rtt-scenarios are, at RTT > 0)."""
        return rtt == 0 or not self.cfg.rtt_scenarios or scen in self.cfg.rtt_scenarios

    def fetch_sizes_for(self, rtt):
        """fetch_sizes_for: the fetch sizes measured at one RTT (slow ones may
        be skipped by default, see --slow-fetch-limit)."""
        limit = self.cfg.slow_fetch_limit
        if rtt == 0 or limit <= 0:
            return list(self.cfg.fetch_sizes)
        return [f for f in self.cfg.fetch_sizes if f >= limit]

    # ---- checks -------------------------------------------------------

    def check_result(self, what, out):
        """check_result: every scan must return the same (count, sum, max)."""
        row = tuple(out[-1].split("|")) if out else None
        expect_sum = self.rows * (self.rows + 1) // 2
        if row is None or len(row) != 3 or int(row[0]) != self.rows or int(row[1]) != expect_sum:
            fail("%s returned %r, expected count %d and sum %d" % (what, out, self.rows, expect_sum))
        if self.reference is None:
            self.reference = row
        elif row != self.reference:
            fail("%s returned %r but earlier queries returned %r" % (what, row, self.reference))

    def proxy_check(self):
        """proxy_check: SELECT 1 round trip to shard 1, directly and through
        each proxy, with one pgbench connection; warn if a proxy is off."""
        cfg = self.cfg
        path = os.path.join(cfg.work, "select1.sql")
        with open(path, "w") as f:
            f.write("SELECT 1;\n")
        log("checking the latency proxy (pgbench, SELECT 1, 1 connection, %d s each) ..."
            % cfg.check_seconds)
        points = [("direct", None, cfg.shard_ports[0])]
        for rtt in sorted(cfg.proxies):
            points.append(("proxy", rtt, cfg.proxies[rtt][0]))
        base = None
        for kind, rtt, port in points:
            lat, tps, _ = self.pgbench(port, path, 1, cfg.check_seconds)
            if kind == "direct":
                base = lat
            self.proxy_results.append({"path": kind, "configured_rtt_ms": "" if rtt is None else fmt_num(rtt),
                                       "avg_latency_ms": "%.3f" % lat, "tps": "%.1f" % tps})
            label = "direct" if rtt is None else "through proxy, RTT %s ms" % fmt_num(rtt)
            log("  %-28s %.3f ms" % (label, lat))
            if rtt is not None and base is not None:
                extra = lat - base
                if abs(extra - rtt) > 0.25 + 0.2 * rtt:
                    log("  WARNING: proxy adds %.3f ms, configured %s ms" % (extra, fmt_num(rtt)))

    # ---- measurements -------------------------------------------------

    def pgbench(self, port, script, clients, seconds):
        """pgbench: run a custom script; return (avg latency ms, tps, transactions)."""
        r = subprocess.run(
            [self.cfg.pgbench, "-n", "-T", str(seconds), "-c", str(clients), "-j", str(clients),
             "-f", script, "-h", "127.0.0.1", "-p", str(port), "-U", USER, DB],
            text=True, capture_output=True)
        if r.returncode != 0:
            fail("pgbench failed:\n%s\n%s" % (r.stdout, r.stderr))
        lat = re.search(r"latency average = ([0-9.]+) ms", r.stdout)
        tps = re.search(r"tps = ([0-9.]+)", r.stdout)
        n = re.search(r"number of transactions actually processed: (\d+)", r.stdout)
        if not (lat and tps and n):
            fail("cannot parse pgbench output:\n" + r.stdout)
        return float(lat.group(1)), float(tps.group(1)), int(n.group(1))

    def drop_session(self, key):
        """drop_session: forget a session whose psql has ended (the next
        session() call opens a new one)."""
        sess = self.sessions.pop(key, None)
        if sess:
            sess.close()

    def session(self, key, port=None):
        """session: the persistent psql session of a variant (or "local"/"admin")."""
        if key not in self.sessions:
            self.sessions[key] = Psql(self.cfg, port or self.cfg.coord_port, key)
        return self.sessions[key]

    def record(self, scen, fdw, mode, fetch, rtt, times):
        """record: keep one measured cell (all its run times)."""
        self.scan_results.append({
            "scenario": scen, "fdw": fdw, "mode": mode,
            "fetch_size": "" if fetch is None else fetch,
            "rtt_ms": fmt_num(rtt), "median_ms": statistics.median(times),
            "runs": len(times), "run_ms": times})

    def measure_local(self, scen):
        """measure_local: warm-up, then the timed runs of a local scenario."""
        s = self.session("local")
        rel = self.relation(scen)
        s.run(QUERY.format(rel=rel))
        times = []
        for _ in range(self.cfg.runs):
            out, ms = s.run(QUERY.format(rel=rel))
            self.check_result("scenario %s" % scen, out)
            times.append(ms)
        self.record(scen, "local", "-", None, 0, times)
        log("  %s  local: %s ms" % (scen, fmt_ms(statistics.median(times))))

    def measure_foreign(self, scen, rtt, fetch):
        """measure_foreign: one (scenario, RTT, fetch_size) cell for every variant,
        runs interleaved: run 1 of each variant, then run 2 of each, ...
        The variant order rotates from run to run so no one always goes first."""
        cfg = self.cfg
        admin = self.session("admin")
        alters = []
        for v in self.variants:
            for shard in range(1, cfg.shards + 1):
                alters.append("ALTER SERVER %s OPTIONS (SET fetch_size '%d')"
                              % (v.server(rtt, shard), fetch))
        admin.run(";\n".join(alters))
        # the option change makes every FDW reconnect: pay for it here, untimed
        for v in self.variants:
            self.session(v.key).run(WARMUP.format(rel=self.relation(scen, v, rtt)))
        times = {v.key: [] for v in self.variants}
        n = len(self.variants)
        for run in range(cfg.runs):
            for i in range(n):
                v = self.variants[(run + i) % n]
                out, ms = self.session(v.key).run(QUERY.format(rel=self.relation(scen, v, rtt)))
                self.check_result("scenario %s, %s, fetch_size %d, RTT %s ms"
                                  % (scen, v.label(), fetch, fmt_num(rtt)), out)
                times[v.key].append(ms)
        parts = []
        for v in self.variants:
            self.record(scen, v.fdw, v.mode, fetch, rtt, times[v.key])
            parts.append("%s %s" % (v.label(), fmt_ms(statistics.median(times[v.key]))))
        log("  %s  rtt %s ms  fetch %5d:  %s ms" % (scen, fmt_num(rtt), fetch, ", ".join(parts)))

    def measure_raw(self, scen, rtt):
        """measure_raw: wall time of one concurrent psql COPY per partition,
        straight from the shards (through the proxy when rtt > 0).  Includes
        starting psql and connecting, a few ms."""
        cfg = self.cfg
        parts = layout(scen, self.rows, cfg.shards)
        times = []
        for _ in range(cfg.runs):
            t = time.perf_counter()
            procs = [subprocess.Popen(
                [cfg.psql, "-X", "-q", "-h", "127.0.0.1", "-p", str(self.host_port(rtt, p.shard)),
                 "-U", USER, "-d", DB, "-c", RAW_COPY % p.table],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for p in parts]
            for p in procs:
                _, err = p.communicate()
                if p.returncode != 0:
                    fail("raw COPY failed: " + err)
            times.append((time.perf_counter() - t) * 1000.0)
        self.record(scen, "raw_copy", "-", None, rtt, times)
        log("  %s  rtt %s ms  raw COPY x%d: %s ms" % (scen, fmt_num(rtt), len(parts),
                                                     fmt_ms(statistics.median(times))))

    def run_scans(self):
        """run_scans: every selected scenario at every setting."""
        cfg = self.cfg
        log("scans (%d runs each, median reported) ..." % cfg.runs)
        for scen in cfg.scenarios:
            if scen in LOCAL_SCENARIOS:
                self.measure_local(scen)
                continue
            if not self.variants or scen in CONNECTION_SCENARIOS:
                continue
            for rtt in cfg.rtts:
                if not self.measured_at(scen, rtt):
                    continue
                for fetch in self.fetch_sizes_for(rtt):
                    self.measure_foreign(scen, rtt, fetch)
        if not (self.foreign_scenarios() and self.variants):
            return
        for rtt in cfg.rtts:
            dropped = [f for f in cfg.fetch_sizes if f not in self.fetch_sizes_for(rtt)]
            if dropped:
                self.skipped.append(
                    "RTT %s ms: fetch_size %s not measured (at 1 ms and fetch_size 100 one "
                    "query takes 7-25 s; --full or an explicit --fetch-sizes runs them)"
                    % (fmt_num(rtt), ", ".join(map(str, dropped))))
            left = [s for s in self.foreign_scenarios() if not self.measured_at(s, rtt)]
            if left:
                self.skipped.append(
                    "RTT %s ms: scenario %s not measured (to stay under 10 minutes; --full or "
                    "an explicit --scenarios runs them)" % (fmt_num(rtt), ", ".join(left)))

    def run_raw(self):
        """run_raw: the raw COPY limit of every selected foreign scenario."""
        if not self.foreign_scenarios():
            return
        log("raw limit: concurrent COPY ... TO STDOUT straight from the shards ...")
        for scen in self.foreign_scenarios():
            for rtt in self.cfg.rtts:
                if self.measured_at(scen, rtt):
                    self.measure_raw(scen, rtt)

    def run_lookups(self):
        """run_lookups: pgbench point lookups through scenario E, 1 and N clients,
        plus the same lookup sent straight to shard 1 (one round trip: the limit)."""
        cfg = self.cfg
        log("point lookups (pgbench -T %d) ..." % cfg.lookup_seconds)
        part1 = layout("E", self.rows, cfg.shards)[0]
        direct = os.path.join(cfg.work, "lookup_direct.sql")
        with open(direct, "w") as f:
            f.write("\\set id random(%d, %d)\nSELECT * FROM %s WHERE a = :id;\n"
                    % (part1.lo, part1.hi, part1.table))
        for rtt in cfg.rtts:
            for clients in cfg.lookup_clients:
                cells = [("direct", "-", direct, self.host_port(rtt, 1), "direct to shard 1")]
                for v in self.variants:
                    path = os.path.join(cfg.work, "lookup_%s_%s.sql" % (v.key, rtt_tag(rtt)))
                    with open(path, "w") as f:
                        f.write("\\set id random(1, %d)\nSELECT * FROM %s.e WHERE a = :id;\n"
                                % (self.rows, v.schema(rtt)))
                    cells.append((v.fdw, v.mode, path, cfg.coord_port, v.label()))
                parts = []
                for fdw, mode, path, port, label in cells:
                    lat, tps, n = self.pgbench(port, path, clients, cfg.lookup_seconds)
                    self.lookup_results.append({
                        "rtt_ms": fmt_num(rtt), "clients": clients, "fdw": fdw, "mode": mode,
                        "seconds": cfg.lookup_seconds, "avg_latency_ms": "%.3f" % lat,
                        "tps": "%.1f" % tps, "transactions": n})
                    parts.append("%s %.3f ms" % (label, lat))
                log("  rtt %s ms  %d client(s): %s" % (fmt_num(rtt), clients, ", ".join(parts)))

    # ---- connections: load (L) and first query of a session (S) -----------

    def close_sessions(self):
        """close_sessions: end every persistent psql session, so that the
        shards see only the connections of the figure being measured (an
        idle async_fdw session keeps connections open)."""
        for sess in self.sessions.values():
            sess.close()
        self.sessions = {}

    def set_load_fetch_size(self, variants):
        """set_load_fetch_size: put every server of the compared variants at
        the fetch_size L and S use (the first of --fetch-sizes)."""
        cfg = self.cfg
        alters = ["ALTER SERVER %s OPTIONS (SET fetch_size '%d');"
                  % (v.server(rtt, shard), cfg.fetch_sizes[0])
                  for v in variants for rtt in cfg.rtts for shard in range(1, cfg.shards + 1)]
        psql_script(cfg, cfg.coord_port, "\n".join(alters) + "\n")

    def shard_clients(self):
        """shard_clients: client connections on each shard now (one short
        psql each, its own session left out)."""
        return [int(psql_script(self.cfg, port, SHARD_CLIENTS + ";\n").strip())
                for port in self.cfg.shard_ports]

    def settle(self):
        """settle: wait (10 s at most) until no client is left on any shard,
        so that the backends of the previous run have exited; return what is
        left."""
        deadline = time.time() + 10
        while True:
            left = self.shard_clients()
            if sum(left) == 0 or time.time() > deadline:
                return left
            time.sleep(0.2)

    def load_run(self, v, rtt, name, script):
        """load_run: one pgbench load run on a variant's ld or le while a
        sampler process counts the client connections of every shard; the
        run's errors are counted, never fatal."""
        cfg = self.cfg
        stop = os.path.join(cfg.work, "sampler.stop")
        if os.path.exists(stop):
            os.unlink(stop)
        sampler = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--sampler", cfg.psql, stop,
             str(cfg.load_seconds + 120)] + [str(p) for p in cfg.shard_ports],
            stdout=subprocess.PIPE, text=True)
        if sampler.stdout.readline().strip() != "ready":
            fail("the connection sampler did not start")
        t = time.time()
        r = subprocess.run(
            [cfg.pgbench, "-n", "-c", str(LOAD_CLIENTS), "-j", str(LOAD_THREADS),
             "-T", str(cfg.load_seconds), "-P", "5", "-f", script,
             "-h", "127.0.0.1", "-p", str(cfg.coord_port), "-U", USER, DB],
            text=True, capture_output=True)
        wall = time.time() - t
        with open(stop, "w"):
            pass
        out, _ = sampler.communicate(timeout=60)
        peaks, samples = [], 0
        for line in out.split("\n"):
            if line.startswith("peak "):
                peaks = [int(x) for x in line.split()[1:]]
            elif line.startswith("samples "):
                samples = int(line.split()[1])
        text = r.stdout + "\n" + r.stderr
        num = lambda pat: (lambda m: m.group(1) if m else None)(re.search(pat, text))
        # pgbench 15: "pgbench: error: client 7 script 0 aborted in command 0 ..."
        aborted = len(re.findall(r"client \d+ (?:script \d+ )?aborted", text))
        errors = {}     # each distinct error message and how often it came
        for line in r.stderr.split("\n"):
            m = re.search(r"(ERROR|FATAL):\s+(.*)", line)
            if m:
                key = "%s: %s" % (m.group(1), m.group(2))
                errors[key] = errors.get(key, 0) + 1
        res = {
            "rtt_ms": fmt_num(rtt), "table": name, "fdw": v.fdw, "mode": v.mode,
            "label": v.label(), "fetch_size": cfg.fetch_sizes[0],
            "clients": LOAD_CLIENTS, "seconds": cfg.load_seconds,
            "wall_s": "%.1f" % wall, "exit_status": r.returncode,
            "tps": (lambda x: x and "%.1f" % float(x))(num(r"tps = ([0-9.]+)")),
            "transactions": num(r"number of transactions actually processed: (\d+)"),
            "failed_transactions": num(r"number of failed transactions: (\d+)"),
            "aborted_clients": aborted,
            "peak_shard_clients": max(peaks) if peaks else None,
            "peak_per_shard": ";".join(map(str, peaks)),
            "samples": samples,
            "errors": "; ".join("%s (x%d)" % kv for kv in errors.items()),
        }
        with open(os.path.join(cfg.results, "load_%s_%s_r%s.log" % (name, v.key, rtt_tag(rtt))),
                  "w") as f:
            f.write("$ %s\nexit status %d\n--- stdout\n%s--- stderr\n%s"
                    % (" ".join(r.args), r.returncode, r.stdout, r.stderr))
        return res

    def run_load(self):
        """run_load: scenario L: LOAD_CLIENTS pgbench clients for
        --load-seconds on ld and on le, per variant and RTT, variants in
        turn (the first one changes from table to table)."""
        cfg = self.cfg
        vs = self.load_variants()
        if not vs:
            return
        self.close_sessions()
        self.set_load_fetch_size(vs)
        log("load: %d clients (-j %d) for %d s per figure, fetch_size %d, sampling shard "
            "connections every %d ms ..." % (LOAD_CLIENTS, LOAD_THREADS, cfg.load_seconds,
                                             cfg.fetch_sizes[0], LOAD_SAMPLE_MS))
        turn = 0
        for rtt in cfg.rtts:
            for name in ("ld", "le"):
                for i in range(len(vs)):
                    v = vs[(turn + i) % len(vs)]
                    script = os.path.join(cfg.work, "load_%s_%s_r%s.sql"
                                          % (name, v.key, rtt_tag(rtt)))
                    with open(script, "w") as f:
                        f.write(LOAD_QUERY.format(rel="%s.%s" % (v.schema(rtt), name)) + ";\n")
                    left = self.settle()
                    if sum(left):
                        log("  note: %s client(s) still on the shards before this run" % left)
                    res = self.load_run(v, rtt, name, script)
                    res["left_before"] = ";".join(map(str, left))
                    self.load_results.append(res)
                    log("  rtt %s ms  %s  %-18s tps %s, aborted clients %d, failed %s, exit %d, "
                        "peak shard clients %s%s" % (
                            res["rtt_ms"], name, v.label(), res["tps"], res["aborted_clients"],
                            res["failed_transactions"], res["exit_status"],
                            res["peak_per_shard"] or "?",
                            ("  (" + res["errors"] + ")") if res["errors"] else ""))
                turn += 1

    def first_query_session(self, v, rtt):
        """first_query_session: a brand-new psql session runs FIRST_QUERY on
        ld twice; return the two \\timing figures in ms."""
        cfg = self.cfg
        q = FIRST_QUERY.format(rel="%s.ld" % v.schema(rtt))
        r = subprocess.run(
            [cfg.psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
             "-p", str(cfg.coord_port), "-U", USER, "-d", DB],
            input="\\timing on\n%s;\n%s;\n" % (q, q), text=True, capture_output=True)
        times = [float(x) for x in re.findall(r"^Time: ([0-9.]+) ms", r.stdout, re.M)]
        counts = [l for l in r.stdout.split("\n") if re.match(r"^\d+$", l)]
        if r.returncode != 0 or len(times) != 2 or counts != [str(LOAD_ROWS)] * 2:
            fail("first query on %s.ld failed:\n%s\n%s" % (v.schema(rtt), r.stdout, r.stderr))
        return times

    def run_first_query(self):
        """run_first_query: scenario S: FIRST_SESSIONS new sessions per
        variant and RTT, variants interleaved; median of the first query
        (it opens the connections to the shard) and of the second."""
        cfg = self.cfg
        vs = self.load_variants()
        if not vs:
            return
        self.close_sessions()
        self.set_load_fetch_size(vs)
        log("first query of a new session on ld (%d sessions per figure) ..." % FIRST_SESSIONS)
        for rtt in cfg.rtts:
            times = {v.key: ([], []) for v in vs}
            for i in range(FIRST_SESSIONS):
                for j in range(len(vs)):
                    v = vs[(i + j) % len(vs)]
                    first, second = self.first_query_session(v, rtt)
                    times[v.key][0].append(first)
                    times[v.key][1].append(second)
            parts = []
            for v in vs:
                first, second = times[v.key]
                self.first_results.append({
                    "rtt_ms": fmt_num(rtt), "fdw": v.fdw, "mode": v.mode, "label": v.label(),
                    "sessions": FIRST_SESSIONS, "first_median_ms": statistics.median(first),
                    "second_median_ms": statistics.median(second),
                    "first_ms": first, "second_ms": second})
                parts.append("%s %s / %s" % (v.label(), fmt_ms(statistics.median(first)),
                                             fmt_ms(statistics.median(second))))
            log("  rtt %s ms  first / second query, median ms: %s" % (fmt_num(rtt), ", ".join(parts)))

    def save_plans(self):
        """save_plans: EXPLAIN VERBOSE of each scenario's query per variant, so a
        reader can see which plans ran (Async Foreign Scan or not)."""
        cfg = self.cfg
        s = self.session("admin")
        text = []
        for scen in cfg.scenarios:
            if scen in CONNECTION_SCENARIOS:
                continue
            if scen in LOCAL_SCENARIOS:
                rels = [("local", self.relation(scen))]
            else:
                rels = [(v.label(), self.relation(scen, v, 0 if 0 in cfg.rtts else cfg.rtts[0]))
                        for v in self.variants]
            for label, rel in rels:
                out, _ = s.run("EXPLAIN (VERBOSE, COSTS OFF) " + QUERY.format(rel=rel))
                text.append("-- scenario %s, %s\n%s\n" % (scen, label, "\n".join(out)))
        with open(os.path.join(cfg.results, "plans.txt"), "w") as f:
            f.write("\n".join(text))

    # ---- output ------------------------------------------------------------

    def cell(self, scen, fdw, mode, fetch, rtt):
        """cell: the median of one measured cell, or None."""
        for r in self.scan_results:
            if (r["scenario"], r["fdw"], r["mode"], r["fetch_size"], r["rtt_ms"]) == \
                    (scen, fdw, mode, "" if fetch is None else fetch, fmt_num(rtt)):
                return r["median_ms"]
        return None

    def pg_best(self, scen, rtt):
        """pg_best: postgres_fdw's best median over all fetch sizes and both
        async settings, with the fetch size and setting that gave it."""
        best = None
        for r in self.scan_results:
            if r["scenario"] == scen and r["rtt_ms"] == fmt_num(rtt) and \
                    r["fdw"].startswith("postgres_fdw"):
                if best is None or r["median_ms"] < best[0]:
                    best = (r["median_ms"], r["fetch_size"], r["fdw"].split("_")[-1])
        return best

    def write_csv(self):
        """write_csv: results.csv, lookups.csv and proxy.csv."""
        res = self.cfg.results
        with open(os.path.join(res, "results.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["scenario", "fdw", "mode", "fetch_size", "rtt_ms", "median_ms", "runs",
                        "run_ms", "rows"])
            for r in self.scan_results:
                w.writerow([r["scenario"], r["fdw"], r["mode"], r["fetch_size"], r["rtt_ms"],
                            "%.3f" % r["median_ms"], r["runs"],
                            ";".join("%.3f" % t for t in r["run_ms"]), self.rows])
        if self.load_results:
            with open(os.path.join(res, "load.csv"), "w", newline="") as f:
                cols = ["rtt_ms", "table", "fdw", "mode", "fetch_size", "clients", "seconds",
                        "wall_s", "tps", "transactions", "failed_transactions",
                        "aborted_clients", "exit_status", "peak_shard_clients",
                        "peak_per_shard", "samples", "left_before", "errors"]
                w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
                w.writeheader()
                w.writerows(self.load_results)
        if self.first_results:
            with open(os.path.join(res, "first_query.csv"), "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["rtt_ms", "fdw", "mode", "sessions", "first_median_ms",
                            "second_median_ms", "first_ms", "second_ms"])
                for r in self.first_results:
                    w.writerow([r["rtt_ms"], r["fdw"], r["mode"], r["sessions"],
                                "%.3f" % r["first_median_ms"], "%.3f" % r["second_median_ms"],
                                ";".join("%.3f" % t for t in r["first_ms"]),
                                ";".join("%.3f" % t for t in r["second_ms"])])
        for name, rows, cols in (
                ("lookups.csv", self.lookup_results,
                 ["rtt_ms", "clients", "fdw", "mode", "seconds", "avg_latency_ms", "tps",
                  "transactions"]),
                ("proxy.csv", self.proxy_results,
                 ["path", "configured_rtt_ms", "avg_latency_ms", "tps"])):
            if not rows and name == "lookups.csv" and not self.cfg.lookups:
                continue
            with open(os.path.join(res, name), "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=cols)
                w.writeheader()
                w.writerows(rows)

    def markdown(self):
        """markdown: the report (results.md), also printed to the terminal."""
        cfg = self.cfg
        afdw = [v for v in self.variants if v.fdw == "async_fdw"]
        pgv = [v for v in self.variants if v.fdw != "async_fdw"]
        L = []
        L.append("# async_fdw benchmark results")
        L.append("")
        L.append("- date: %s" % datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"))
        L.append("- machine: %s cores (nproc), %s GiB RAM, %s" % (
            os.cpu_count(), cfg.mem_gib, cfg.kernel))
        L.append("- PostgreSQL: %s" % cfg.pg_version)
        L.append("- async_fdw: %s" % cfg.afdw_note)
        L.append("- command: `%s`" % cfg.command)
        scans = self.foreign_scenarios() or [s for s in cfg.scenarios if s in LOCAL_SCENARIOS]
        if scans:
            L.append("- %d rows `(a int, b int, c text)`, %d shards, median of %d runs, runs "
                     "interleaved across FDWs; total time %s" % (self.rows, cfg.shards, cfg.runs,
                                                                 "%%TOTAL%%"))
            L.append("- query: `%s`" % QUERY.format(rel="<rel>"))
        else:
            # only scenarios with data sets of their own (L, S, W): --rows means nothing
            L.append("- %d shards, median of %d runs, runs interleaved across FDWs; total time %s"
                     % (cfg.shards, cfg.runs, "%%TOTAL%%"))
        for note in self.skipped:
            L.append("- skipped: %s" % note)
        L.append("")

        if self.proxy_results:
            L.append("## Latency proxy check (pgbench, `SELECT 1`, 1 connection)")
            L.append("")
            L.append("| path | configured RTT ms | avg latency ms |")
            L.append("| --- | ---: | ---: |")
            for r in self.proxy_results:
                L.append("| %s | %s | %s |" % (r["path"], r["configured_rtt_ms"] or "–",
                                               r["avg_latency_ms"]))
            L.append("")

        locals_ = [s for s in cfg.scenarios if s in LOCAL_SCENARIOS]
        if locals_:
            L.append("## Local floor (median ms)")
            L.append("")
            L.append("| scenario | relation | median ms |")
            L.append("| --- | --- | ---: |")
            for s in locals_:
                L.append("| %s | %s | %s |" % (s, SCENARIOS[s], fmt_ms(self.cell(s, "local", "-", None, 0))))
            L.append("")

        if self.foreign_scenarios() and self.variants:
            L.append("## Scans (median ms)")
            L.append("")
            L.append("Ratios are async_fdw's median divided by postgres_fdw's: below 1 means "
                     "async_fdw is faster. \"÷ pg best\" divides by postgres_fdw's best median "
                     "over all fetch sizes and both async settings at the same scenario and RTT.")
            L.append("")
            head = ["scenario", "RTT ms", "fetch_size"] + [v.label() for v in pgv] + ["pg best"]
            for v in afdw:
                head += [v.label(), "÷ pg async", "÷ pg best"]
            if cfg.raw:
                head.append("raw COPY")
            L.append("| " + " | ".join(head) + " |")
            L.append("| " + " | ".join(["---"] * 3 + ["---:"] * (len(head) - 3)) + " |")
            for scen in self.foreign_scenarios():
                for rtt in cfg.rtts:
                    if not self.measured_at(scen, rtt):
                        continue
                    best = self.pg_best(scen, rtt)
                    raw = self.cell(scen, "raw_copy", "-", None, rtt)
                    for fetch in self.fetch_sizes_for(rtt):
                        row = [scen, fmt_num(rtt), str(fetch)]
                        for v in pgv:
                            row.append(fmt_ms(self.cell(scen, v.fdw, v.mode, fetch, rtt)))
                        row.append("%s (%s, %s)" % (fmt_ms(best[0]), best[2], best[1]) if best else "–")
                        pga = self.cell(scen, "postgres_fdw_async", "-", fetch, rtt)
                        for v in afdw:
                            a = self.cell(scen, v.fdw, v.mode, fetch, rtt)
                            row.append(fmt_ms(a))
                            row.append("%.2f" % (a / pga) if a and pga else "–")
                            row.append("%.2f" % (a / best[0]) if a and best else "–")
                        if cfg.raw:
                            row.append(fmt_ms(raw))
                        L.append("| " + " | ".join(row) + " |")
            L.append("")
            L.append("Scenarios: " + "; ".join("%s = %s" % (s, SCENARIOS[s])
                                               for s in self.foreign_scenarios()) + ".")
            if cfg.raw:
                L.append("raw COPY = one concurrent `psql -c \"%s\" > /dev/null` "
                         "per partition straight from the shards (through the proxy when RTT > 0), "
                         "wall time of the slowest, psql start-up included." % (RAW_COPY % "t"))
            L.append("")

        if self.load_results:
            L.extend(self.load_markdown())
        if self.first_results:
            L.extend(self.first_markdown())
        if self.writes:
            L.extend(self.writes.markdown())

        if self.lookup_results:
            L.append("## Point lookups through E (pgbench -T %d, `SELECT * FROM e WHERE a = :id`)"
                     % cfg.lookup_seconds)
            L.append("")
            L.append("| RTT ms | clients | fdw | avg latency ms | tps | round trips |")
            L.append("| ---: | ---: | --- | ---: | ---: | ---: |")
            for r in self.lookup_results:
                label = FDW_LABEL.get(r["fdw"], r["fdw"])
                if r["fdw"] == "async_fdw" and r["mode"] != "default":
                    label += " " + r["mode"]
                L.append("| %s | %s | %s | %s | %s | %s |" % (r["rtt_ms"], r["clients"], label,
                                                              r["avg_latency_ms"], r["tps"],
                                                              self.lookup_round_trips(r)))
            L.append("")
            L.append("\"direct to shard\" sends the same lookup straight to shard 1 "
                     "(one round trip: the physical limit).  \"round trips\" at RTT > 0: "
                     "(latency − the same figure's latency at 0 ms) ÷ (direct to shard's "
                     "latency − its latency at 0 ms), that is, how many of the measured "
                     "round trips one lookup waits for.")
            L.append("")

        if os.path.exists(os.path.join(cfg.results, "chart.png")):
            L.append("![chart](chart.png)")
            L.append("")
        return "\n".join(L)

    def lookup_round_trips(self, r):
        """lookup_round_trips: how many round trips the lookup figure R waits
        for, from its latency and the direct one's at R's RTT and at 0 ms
        (same clients, same fdw and mode); "" at 0 ms or without those."""
        def latency(rtt, fdw, mode):
            for x in self.lookup_results:
                if (float(x["rtt_ms"]) == rtt and x["clients"] == r["clients"] and
                        x["fdw"] == fdw and x["mode"] == mode):
                    return float(x["avg_latency_ms"])
            return None
        rtt = float(r["rtt_ms"])
        if rtt == 0:
            return ""
        here = float(r["avg_latency_ms"])
        base = latency(0, r["fdw"], r["mode"])
        d1 = latency(rtt, "direct", "-")
        d0 = latency(0, "direct", "-")
        if base is None or d1 is None or d0 is None or d1 <= d0:
            return ""
        return "%.2f" % ((here - base) / (d1 - d0))

    def load_markdown(self):
        """load_markdown: the lines of the load (L) section of the report."""
        cfg = self.cfg
        L = ["## Load (scenario L): %d clients, pgbench -n -c %d -j %d -T %d -P 5"
             % (LOAD_CLIENTS, LOAD_CLIENTS, LOAD_THREADS, cfg.load_seconds), ""]
        L.append("Query `%s`; ld = %s, le = %s; fetch_size %d; postgres_fdw with "
                 "async_capable on. Shards: max_connections = 200; coordinator: "
                 "shared_preload_libraries = %s. \"aborted\" counts pgbench's `client N "
                 "aborted` lines (pgbench 15 stops a client at its first error); \"failed\" is "
                 "pgbench's number of failed transactions; \"peak\" is the most client "
                 "connections a shard had (other than the sampler's own), sampled about every %d ms "
                 "(less often under load: `samples` in load.csv), per shard; \"errors\" are "
                 "the distinct ERROR/FATAL messages of pgbench's output with their count." % (LOAD_QUERY.format(rel="<tbl>"), LOAD_TABLES["ld"],
                                 LOAD_TABLES["le"], cfg.fetch_sizes[0],
                                 cfg.preload or "''", LOAD_SAMPLE_MS))
        L.append("")
        L.append("| RTT ms | table | fdw | tps | transactions | aborted clients | failed "
                 "| exit status | peak shard clients | errors (count) |")
        L.append("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
        for r in self.load_results:
            L.append("| %s | %s | %s | %s | %s | %d | %s | %d | %s | %s |" % (
                r["rtt_ms"], r["table"], r["label"], r["tps"] or "–", r["transactions"] or "–",
                r["aborted_clients"], r["failed_transactions"] or "–", r["exit_status"],
                r["peak_per_shard"] or "–", r["errors"].replace("|", "/") or "–"))
        L.append("")
        L.append("pgbench's whole output per run: `load_<table>_<variant>_r<rtt>.log` beside "
                 "this file.")
        L.append("")
        return L

    def first_markdown(self):
        """first_markdown: the lines of the first-query (S) section of the report."""
        L = ["## First query of a new session (scenario S)", ""]
        L.append("`%s` on ld (4 partitions on shard 1, one server object), fetch_size %d, in "
                 "%d brand-new psql sessions per figure (variants interleaved); psql's `\\timing`, "
                 "median ms. The first query opens the connections to the shard, the second runs "
                 "in the same session on open connections."
                 % (FIRST_QUERY.format(rel="ld"), self.cfg.fetch_sizes[0], FIRST_SESSIONS))
        L.append("")
        L.append("| RTT ms | fdw | first query ms | second query ms | first − second | "
                 "first: min–max |")
        L.append("| ---: | --- | ---: | ---: | ---: | --- |")
        for r in self.first_results:
            L.append("| %s | %s | %s | %s | %s | %s–%s |" % (
                r["rtt_ms"], r["label"], fmt_ms(r["first_median_ms"]),
                fmt_ms(r["second_median_ms"]),
                fmt_ms(r["first_median_ms"] - r["second_median_ms"]),
                fmt_ms(min(r["first_ms"])), fmt_ms(max(r["first_ms"]))))
        L.append("")
        return L

    def chart(self):
        """chart: chart.png via gnuplot: per RTT, bars of median ms per scenario
        for each FDW at the smallest measured fetch size and at its best."""
        cfg = self.cfg
        res = cfg.results
        if not shutil.which("gnuplot"):
            log("gnuplot not found: no chart")
            return
        fscen = self.foreign_scenarios() if self.variants else []
        scen_list = [s for s in cfg.scenarios if s in LOCAL_SCENARIOS] + fscen
        if not scen_list:
            return
        rtts = cfg.rtts if fscen else [0]
        labels = [v.label() for v in self.variants]
        blocks = []
        titles = []
        for rtt in rtts:
            fetches = self.fetch_sizes_for(rtt)
            fmin = min(fetches) if fetches else None
            head = ["scenario", "local"] + ["%s@%s" % (l, fmin) for l in labels] + \
                   ["%s@best" % l for l in labels] + ["raw COPY"]
            lines = [" ".join('"%s"' % h for h in head)]
            for scen in scen_list:
                if scen not in LOCAL_SCENARIOS and not self.measured_at(scen, rtt):
                    continue
                vals = [self.cell(scen, "local", "-", None, 0)]
                for v in self.variants:
                    vals.append(self.cell(scen, v.fdw, v.mode, fmin, rtt) if fmin else None)
                for v in self.variants:
                    meds = [self.cell(scen, v.fdw, v.mode, f, rtt) for f in fetches]
                    meds = [m for m in meds if m is not None]
                    vals.append(min(meds) if meds else None)
                vals.append(self.cell(scen, "raw_copy", "-", None, rtt))
                lines.append('"%s" ' % scen + " ".join("?" if x is None else "%.3f" % x for x in vals))
            blocks.append("\n".join(lines))
            titles.append("RTT %s ms (fetch_size %s and best of %s)" % (
                fmt_num(rtt), fmin, ",".join(map(str, fetches))))
        with open(os.path.join(res, "chart.dat"), "w") as f:
            f.write("\n\n\n".join(blocks) + "\n")

        palette_min = ["#a6cee3", "#b2df8a", "#fdbf6f", "#fb9a99", "#cab2d6", "#ffff99"]
        palette_best = ["#1f78b4", "#33a02c", "#ff7f00", "#e31a1c", "#6a3d9a", "#b15928"]
        ncols = 2 + 2 * len(self.variants) + 1
        colors = ["#999999"] + [palette_min[i % 6] for i in range(len(self.variants))] + \
                 [palette_best[i % 6] for i in range(len(self.variants))] + ["#222222"]
        gp = ['set terminal pngcairo size 1400,%d font "DejaVu Sans,10"' % (420 * len(rtts) + 60),
              'set output "chart.png"',
              'set termoption noenhanced',
              'set datafile missing "?"',
              'set style data histograms',
              'set style histogram clustered gap 1',
              'set style fill solid 0.9 border rgb "#555555"',
              'set logscale y',
              'set yrange [10:*]',
              'set grid ytics mytics',
              'set ylabel "median ms (log scale)"',
              'set key outside right top vertical noenhanced',
              'set multiplot layout %d,1 title "async_fdw benchmark: %d rows, %d shards, median of %d runs"'
              % (len(rtts), self.rows, cfg.shards, cfg.runs)]
        for i, title in enumerate(titles):
            gp.append('set title "%s"' % title)
            plots = []
            for c in range(2, ncols + 1):
                plots.append('%s index %d using %d%s title columnhead lc rgb "%s"'
                             % ('"chart.dat"' if c == 2 else "''",
                                i, c, ":xtic(1)" if c == 2 else "", colors[c - 2]))
            gp.append("plot " + ", \\\n     ".join(plots))
        gp.append("unset multiplot")
        script = os.path.join(res, "chart.gp")
        with open(script, "w") as f:
            f.write("\n".join(gp) + "\n")
        # relative names, so `cd results && gnuplot chart.gp` redraws it
        r = subprocess.run(["gnuplot", "chart.gp"], cwd=res, capture_output=True, text=True)
        if r.returncode != 0:
            log("gnuplot failed (no chart):\n" + r.stderr)

    # ---- driver --------------------------------------------------------

    def main(self):
        """main: the whole measurement sequence."""
        cfg = self.cfg
        os.makedirs(cfg.results, exist_ok=True)
        for name in ("results.csv", "results.md", "lookups.csv", "proxy.csv", "chart.png",
                     "chart.dat", "chart.gp", "plans.txt", "load.csv", "first_query.csv",
                     "writes.csv", "write_latency.csv", "write_plans.txt"):
            try:
                os.unlink(os.path.join(cfg.results, name))
            except FileNotFoundError:
                pass
        self.choose_variants()
        log("comparing: %s" % (", ".join(v.label() for v in self.variants) or "local only"))
        self.proxy_check()
        self.load()
        self.define()
        if "W" in cfg.scenarios:
            self.writes = WriteBench(self)
            self.writes.define()
        self.save_plans()
        self.run_scans()
        if cfg.raw:
            self.run_raw()
        if cfg.lookups:
            self.run_lookups()
        if "L" in cfg.scenarios:
            self.run_load()
        if "S" in cfg.scenarios:
            self.run_first_query()
        if self.writes:
            self.writes.run()
        self.close_sessions()
        self.write_csv()
        if self.writes:
            self.writes.write_csv()
        self.chart()
        total = time.time() - self.started + cfg.setup_seconds
        md = self.markdown().replace("%%TOTAL%%", "%d min %02d s" % (total // 60, total % 60))
        with open(os.path.join(cfg.results, "results.md"), "w") as f:
            f.write(md + "\n")
        log("")
        log(md)
        log("")
        for note in self.skipped:
            log("skipped: " + note)
        log("results in %s (results.csv, results.md, lookups.csv, proxy.csv, chart.png, plans.txt)"
            % cfg.results)


def ints(s):
    """ints: "1,2,3" as [1, 2, 3]."""
    return [int(x) for x in s.split(",") if x]


def nums(s):
    """nums: "0,0.5,1" as [0, 0.5, 1]."""
    return [float(x) if "." in x else int(x) for x in s.split(",") if x]


def cluster_args(ap):
    """cluster_args: the options of the throwaway cluster that run.sh's
    functions start, common to bench.py and tpch.py."""
    ap.add_argument("--work", required=True)
    ap.add_argument("--bindir", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--coord-port", type=int, required=True)
    ap.add_argument("--shard-ports", type=ints, required=True)
    ap.add_argument("--proxies", required=True,
                    help="RTT=port,port,...;RTT=... (proxy ports per shard)")
    ap.add_argument("--rtt", type=nums, required=True)
    ap.add_argument("--command", default="")
    ap.add_argument("--setup-seconds", type=float, default=0.0)


def cluster_config(cfg):
    """cluster_config: what cluster_args' options give: the shards, the
    RTTs, the proxy ports per RTT, psql and the server's version."""
    cfg.shards = len(cfg.shard_ports)
    cfg.rtts = cfg.rtt
    spec, cfg.proxies = cfg.proxies, {}
    for item in spec.split(";"):
        if item:
            rtt, ports = item.split("=")
            cfg.proxies[nums(rtt)[0]] = ints(ports)
    cfg.psql = os.path.join(cfg.bindir, "psql")
    r = subprocess.run([os.path.join(cfg.bindir, "postgres"), "--version"],
                       capture_output=True, text=True)
    cfg.pg_version = r.stdout.strip() or "PostgreSQL"


def parse_args():
    """parse_args: the options run.sh passes (already validated there)."""
    ap = argparse.ArgumentParser(description="run through test/bench/run.sh")
    cluster_args(ap)
    ap.add_argument("--scenarios", required=True)
    ap.add_argument("--fetch-sizes", type=ints, required=True)
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--fdws", default="")
    ap.add_argument("--modes", default="default")
    ap.add_argument("--lookups", type=int, default=1)
    ap.add_argument("--lookup-clients", type=ints, default=[1, 8])
    ap.add_argument("--lookup-seconds", type=int, default=5)
    ap.add_argument("--check-seconds", type=int, default=3)
    ap.add_argument("--raw", type=int, default=1)
    ap.add_argument("--slow-fetch-limit", type=int, default=0)
    ap.add_argument("--rtt-scenarios", default="",
                    help="foreign scenarios measured at RTT > 0 (empty: all)")
    ap.add_argument("--load-seconds", type=int, default=20)
    ap.add_argument("--preload", default="",
                    help="the coordinator's shared_preload_libraries (for the report)")
    ap.add_argument("--write-rows", type=int, default=1000000)
    ap.add_argument("--write-batch-sizes", type=ints, default=[100, 1000, 10000])
    ap.add_argument("--write-copy-sample", type=int, default=10000)
    ap.add_argument("--write-afdw-batch-sizes", type=ints, default=[],
                    help="async_fdw batch_size values for INSERT ... SELECT (empty: its default)")
    ap.add_argument("--write-seconds", type=int, default=3)
    ap.add_argument("--write-two-phase", default="off,on",
                    help="async_fdw.two_phase_commit settings of W-insert1/W-xact4 (empty: default)")
    ap.add_argument("--writes", default=",".join(WRITE_TESTS),
                    help="write tests of scenario W: copy,update,insert1,xact4")
    ap.add_argument("--afdw-note", default="")
    cfg = ap.parse_args()

    cluster_config(cfg)
    cfg.scenarios = [s for s in "ABCDEFGLSW" if s in cfg.scenarios.upper().split(",")]
    cfg.rtt_scenarios = [s for s in cfg.rtt_scenarios.upper().split(",") if s]
    cfg.fdws = [f for f in FDW_NAMES if f in cfg.fdws.split(",")]
    cfg.modes = [m for m in cfg.modes.split(",") if m]
    cfg.writes = [t for t in WRITE_TESTS if t in cfg.writes.split(",")]
    cfg.write_two_phase = [t for t in cfg.write_two_phase.split(",") if t]
    cfg.pgbench = os.path.join(cfg.bindir, "pgbench")
    cfg.kernel = "Linux " + os.uname().release
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        cfg.mem_gib = "%d" % round(kb / 1048576)
    except (OSError, ValueError, IndexError):
        cfg.mem_gib = "?"
    return cfg


def sampler_main(argv):
    """sampler_main: the connection sampler, a separate process started by
    load_run: argv = psql, stop file, max seconds, shard ports.  Opens one
    psql session per shard, prints "ready", then every LOAD_SAMPLE_MS counts
    each shard's client connections until the stop file appears (or the time
    is up), and prints the peak per shard and the number of samples."""
    psql, stop, seconds, ports = argv[0], argv[1], float(argv[2]), argv[3:]
    cfg = argparse.Namespace(psql=psql)
    sessions = [Psql(cfg, port, "sampler %s" % port) for port in ports]
    peaks = [0] * len(ports)
    samples = 0
    print("ready", flush=True)
    deadline = time.time() + seconds
    while not os.path.exists(stop) and time.time() < deadline:
        t = time.time()
        for k, sess in enumerate(sessions):
            out, _ = sess.run(SHARD_CLIENTS)
            peaks[k] = max(peaks[k], int(out[-1]))
        samples += 1
        time.sleep(max(0.0, LOAD_SAMPLE_MS / 1000.0 - (time.time() - t)))
    for sess in sessions:
        sess.close()
    print("peak " + " ".join(map(str, peaks)))
    print("samples %d" % samples, flush=True)


if __name__ == "__main__":
    # writes.py imports this file's helpers as the module "bench": import
    # it only now, when they are all defined
    from writes import WRITE_TESTS, WriteBench
    if len(sys.argv) > 1 and sys.argv[1] == "--sampler":
        sampler_main(sys.argv[2:])
        sys.exit(0)
    try:
        Bench(parse_args()).main()
    except KeyboardInterrupt:
        print("\nbench: interrupted", file=sys.stderr)
        sys.exit(130)
