"""test/bench/writes.py
   The write scenarios (W) of the benchmark: bulk load (W-copy), an UPDATE
   of every row (W-update), single-row INSERT latency (W-insert1) and a
   transaction writing one row to each shard (W-xact4), async_fdw against
   postgres_fdw in the same run, at every RTT.  A write that fails is a
   cell reading "error: <first line of the message>", never a number, and
   never stops the run: async_fdw's write path may not exist yet.
   Relies on bench.py (the Bench object: configuration, variants, server
   names, persistent psql sessions, helpers); bench.py calls WriteBench's
   define(), run(), write_csv() and markdown().  Standard library only.
"""

import csv
import hashlib
import os
import re
import statistics
import subprocess
import time

from bench import DB, USER, fmt_ms, fmt_num, log, rtt_tag, run_parallel, split_range

WRITE_TESTS = ("copy", "update", "insert1", "xact4")
WRITE_TEST_LABEL = {
    "copy": "W-copy",
    "update": "W-update",
    "insert1": "W-insert1",
    "xact4": "W-xact4",
}
# Method names in writes.csv, and how the report shows them.
METHOD_LABEL = {
    "copy": "COPY FROM STDIN",
    "insert_select": "INSERT ... SELECT",
    "raw_copy": "raw COPY x%d",
    "update": "UPDATE",
    "raw_update": "raw UPDATE x%d",
}
UPDATE_SQL = "UPDATE {rel} SET b = b + 1"


def error_line(lines):
    """error_line: the first line of an error in psql or pgbench output,
    as "error: <message>", or None when there is none.  psql reading a pipe
    prefixes errors with "psql:<stdin>:N: "; pgbench with "client N script
    N aborted in command N query N: "."""
    for line in lines:
        m = re.search(r"\b(?:ERROR|FATAL|PANIC):\s+(.*)", line)
        if m:
            return "error: " + m.group(1).strip()
    for line in lines:
        if line.startswith("psql:") or "connection to server" in line or \
                "server closed the connection" in line:
            return "error: " + re.sub(r"^psql:[^:]*:\d+:\s*", "", line).strip()
    return None


def md5_row(a):
    """md5_row: the data row of key a, as a COPY text line: the same values
    as the staging table's (a, a % 1000, md5(a::text))."""
    return "%d\t%d\t%s\n" % (a, a % 1000, hashlib.md5(str(a).encode()).hexdigest())


class Cell:
    """Cell: one timed figure of W-copy or W-update (a method of one FDW
    variant, or the raw limit, at one RTT) and its runs."""

    def __init__(self, test, variant, label, method, batch, rows, rtt):
        self.test, self.variant, self.label = test, variant, label
        # the raw limits have no variant: their fdw is the method's name
        self.fdw = variant.fdw if variant else method
        self.mode = variant.mode if variant else "-"
        self.method, self.batch, self.rows, self.rtt = method, batch, rows, rtt
        self.times = []
        self.error = None

    def median(self):
        """median: the median run time in ms, or None (error or no run)."""
        return None if self.error or not self.times else statistics.median(self.times)

    def figure(self, total_rows):
        """figure: the median scaled to total_rows (the extrapolation of a
        cell measured on a sample; the median itself otherwise)."""
        m = self.median()
        return None if m is None else m * total_rows / self.rows


class WriteBench:
    """WriteBench: set-up, measurement and report of the W scenarios."""

    def __init__(self, bench):
        self.b = bench
        self.cfg = bench.cfg
        self.rows = self.cfg.write_rows
        self.tests = self.cfg.writes
        self.parts = split_range(self.rows, self.cfg.shards)
        self.tables = ["w_%d_%d" % p for p in self.parts]
        self.cells = []             # Cell, W-copy and W-update
        self.latency = []           # dicts, W-insert1 and W-xact4
        self.batch_set = {}         # foreign table -> batch_size now set (None: default)
        pgs = [v for v in bench.variants if v.wrapper == "postgres_fdw"]
        # postgres_fdw's async_capable changes nothing for writes: one of
        # its two variants is enough (the sync one when both are there).
        self.variants = pgs[:1] + [v for v in bench.variants if v.fdw == "async_fdw"]
        self.sample = min(self.cfg.write_copy_sample, self.rows)

    # ---- set-up -------------------------------------------------------

    def label(self, v):
        """label: a variant's name in the write tables."""
        return "postgres_fdw" if v.wrapper == "postgres_fdw" else v.label()

    def shard_session(self, k):
        """shard_session: a persistent session straight to shard k (1-based),
        for the untimed truncation, vacuum and checks."""
        return self.b.session("wshard%d" % k, self.cfg.shard_ports[k - 1])

    def define(self):
        """define: the shard tables w_<lo>_<hi> (no key: inserts never
        conflict), the coordinator's staging table w_src (the source of
        INSERT ... SELECT), the COPY files, and per variant and RTT a
        partitioned table w with one foreign partition per shard."""
        cfg = self.cfg
        jobs = [(cfg.shard_ports[k], "CREATE TABLE %s (a int, b int, c text);\n" % t)
                for k, t in enumerate(self.tables)]
        sql = ["BEGIN;", "CREATE TABLE w_src (a int, b int, c text);",
               "INSERT INTO w_src SELECT g, g %% 1000, md5(g::text) "
               "FROM generate_series(1, %d) g;" % self.rows, "COMMIT;",
               "VACUUM (FREEZE, ANALYZE) w_src;"]
        for v in self.variants:
            for rtt in cfg.rtts:
                rel = "%s.w" % v.schema(rtt)
                sql.append("CREATE TABLE %s (a int, b int, c text) PARTITION BY RANGE (a);" % rel)
                for k, (lo, hi) in enumerate(self.parts):
                    sql.append("CREATE FOREIGN TABLE %s.w_p%d PARTITION OF %s FOR VALUES FROM "
                               "(%d) TO (%d) SERVER %s OPTIONS (schema_name 'public', "
                               "table_name '%s');" % (v.schema(rtt), k + 1, rel, lo, hi + 1,
                                                      v.server(rtt, k + 1), self.tables[k]))
        jobs.append((cfg.coord_port, "\n".join(sql) + "\n"))
        t = time.time()
        log("writes: %d rows over %d shard table(s), staging table and COPY files ..."
            % (self.rows, cfg.shards))
        run_parallel(self.cfg, jobs)
        self.write_files()
        log("  ready in %.1f s" % (time.time() - t))

    def write_files(self):
        """write_files: the COPY text files: every row (the coordinator's
        COPY), each shard's quarter (the raw limit) and an evenly spread
        sample (postgres_fdw's row-by-row COPY, see --write-copy-sample)."""
        work = self.cfg.work
        self.all_file = os.path.join(work, "w_all.tsv")
        self.shard_files = [os.path.join(work, "w_shard%d.tsv" % (k + 1))
                            for k in range(self.cfg.shards)]
        self.sample_file = os.path.join(work, "w_sample.tsv")
        step = self.rows / self.sample
        sample = set(int(k * step) + 1 for k in range(self.sample))
        self.sample_keys = sorted(sample)
        with open(self.all_file, "w") as fa, open(self.sample_file, "w") as fs:
            for k, (lo, hi) in enumerate(self.parts):
                with open(self.shard_files[k], "w") as fk:
                    for a in range(lo, hi + 1):
                        line = md5_row(a)
                        fa.write(line)
                        fk.write(line)
                        if a in sample:
                            fs.write(line)
        for path in [self.all_file, self.sample_file] + self.shard_files:
            os.chmod(path, 0o644)

    def expected(self, keys=None):
        """expected: (count, sum of a) per shard table after loading `keys`
        (every row when None)."""
        out = []
        for lo, hi in self.parts:
            if keys is None:
                out.append((hi - lo + 1, (lo + hi) * (hi - lo + 1) // 2))
            else:
                ks = [a for a in keys if lo <= a <= hi]
                out.append((len(ks), sum(ks)))
        return out

    def shard_state(self, what="count(*), coalesce(sum(a), 0)"):
        """shard_state: one aggregate row per shard table, as tuples of ints."""
        res = []
        for k, t in enumerate(self.tables):
            out, _ = self.shard_session(k + 1).run("SELECT %s FROM %s" % (what, t))
            res.append(tuple(int(x) for x in out[-1].split("|")))
        return res

    def truncate(self):
        """truncate: empty every shard table, straight on the shards."""
        for k, t in enumerate(self.tables):
            self.shard_session(k + 1).run("TRUNCATE %s" % t)

    def set_batch_size(self, v, rtt, size):
        """set_batch_size: the batch_size option of a variant's partitions
        of w (None: drop it, back to the wrapper's default); return the
        error of a wrapper that refuses it, or None."""
        for k in range(self.cfg.shards):
            ft = "%s.w_p%d" % (v.schema(rtt), k + 1)
            now = self.batch_set.get(ft)
            if now == size:
                continue
            if size is None:
                sql = "ALTER FOREIGN TABLE %s OPTIONS (DROP batch_size)" % ft
            else:
                sql = "ALTER FOREIGN TABLE %s OPTIONS (%s batch_size '%d')" % (
                    ft, "SET" if now is not None else "ADD", size)
            out, _, err = self.live_session("admin").try_run(sql)
            if err:
                return error_line(out + [err]) or "error: " + err
            self.batch_set[ft] = size
        return None

    # ---- timed runs ---------------------------------------------------

    def coordinator_ready(self):
        """coordinator_ready: wait (60 s at most) until the coordinator
        accepts connections: a crash of a backend during a write restarts
        it, and the figures after it must not fail for that."""
        deadline = time.time() + 60
        while time.time() < deadline:
            r = subprocess.run([os.path.join(self.cfg.bindir, "pg_isready"), "-q", "-h",
                                "127.0.0.1", "-p", str(self.cfg.coord_port), "-U", USER, "-d", DB])
            if r.returncode == 0:
                return
            time.sleep(0.5)

    def live_session(self, key):
        """live_session: a coordinator session that answers (a new one when
        the old one's psql ended, e.g. after a crash restarted the server)."""
        sess = self.b.session(key)
        if sess.alive():
            _, _, err = sess.try_run("SELECT 1")
            if not err:
                return sess
        log("    (the coordinator session %s was lost: opening a new one)" % key)
        self.b.drop_session(key)
        self.coordinator_ready()
        return self.b.session(key)

    def timed(self, v, sql):
        """timed: run one statement in a variant's persistent session; return
        (wall ms, error or None).  Python's clock around the round trip to
        psql, so that \\copy (which psql's \\timing does not time) and SQL
        are measured alike; the session is already connected."""
        sess = self.live_session("w_" + v.key)
        t = time.perf_counter()
        out, _, err = sess.try_run(sql)
        ms = (time.perf_counter() - t) * 1000.0
        if err:
            err = error_line(out + [err]) or "error: " + err
            if not sess.alive():
                self.b.drop_session("w_" + v.key)
        return ms, err

    def raw_parallel(self, rtt, commands):
        """raw_parallel: one psql per shard at once, straight to the shard
        (through the proxy at RTT > 0), each running (sql, stdin file or
        None); return (wall ms of the slowest, error or None)."""
        cfg = self.cfg
        t = time.perf_counter()
        procs = []
        for k, (sql, path) in enumerate(commands):
            stdin = open(path) if path else subprocess.DEVNULL
            procs.append((subprocess.Popen(
                [cfg.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                 "-p", str(self.b.host_port(rtt, k + 1)), "-U", USER, "-d", DB, "-c", sql],
                stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), stdin))
        errs = []
        for p, stdin in procs:
            _, err = p.communicate()
            if stdin is not subprocess.DEVNULL:
                stdin.close()
            if p.returncode != 0:
                errs.append(error_line(err.split("\n")) or "error: psql exit %d" % p.returncode)
        return (time.perf_counter() - t) * 1000.0, (errs[0] if errs else None)

    def run_cells(self, cells, one_run):
        """run_cells: --runs rounds over cells, the order rotating each round
        so that no cell always goes first; one_run(cell) returns (ms, error).
        A cell stops at its first error (its figure is the error)."""
        n = len(cells)
        for r in range(self.cfg.runs):
            for i in range(n):
                c = cells[(r + i) % n]
                if c.error:
                    continue
                ms, err = one_run(c)
                if err:
                    c.error = err
                    log("    %s %s: %s" % (c.label, self.method_label(c), err))
                else:
                    c.times.append(ms)

    def method_label(self, c):
        """method_label: a cell's method as the report names it."""
        text = METHOD_LABEL[c.method]
        if "%d" in text:
            text = text % self.cfg.shards
        if c.batch:
            text += ", batch_size %d" % c.batch
        return text

    def copy_cells(self, rtt):
        """copy_cells: the W-copy figures at one RTT: postgres_fdw INSERT ...
        SELECT at each --write-batch-sizes and its COPY on the sample,
        async_fdw COPY and INSERT ... SELECT (its default batch_size, or each
        of --write-afdw-batch-sizes), raw COPY."""
        cells = []
        for v in self.variants:
            lab = self.label(v)
            if v.wrapper == "postgres_fdw":
                for bs in self.cfg.write_batch_sizes:
                    cells.append(Cell("copy", v, lab, "insert_select", bs, self.rows, rtt))
                cells.append(Cell("copy", v, lab, "copy", None, self.sample, rtt))
            else:
                cells.append(Cell("copy", v, lab, "copy", None, self.rows, rtt))
                for bs in self.cfg.write_afdw_batch_sizes or [None]:
                    cells.append(Cell("copy", v, lab, "insert_select", bs, self.rows, rtt))
        if self.cfg.raw:
            cells.append(Cell("copy", None, "direct to shards", "raw_copy", None, self.rows, rtt))
        return cells

    def copy_run(self, c):
        """copy_run: one timed load of a W-copy cell into emptied shard
        tables, then the shards' contents checked."""
        self.truncate()
        v = c.variant
        if c.method == "raw_copy":
            ms, err = self.raw_parallel(c.rtt, [("COPY %s FROM STDIN" % t, self.shard_files[k])
                                                for k, t in enumerate(self.tables)])
        else:
            rel = "%s.w" % v.schema(c.rtt)
            err = self.set_batch_size(v, c.rtt, c.batch)
            if err:
                return 0.0, err
            if c.method == "copy":
                path = self.all_file if c.rows == self.rows else self.sample_file
                ms, err = self.timed(v, "\\copy %s FROM '%s'" % (rel, path))
            else:
                ms, err = self.timed(v, "INSERT INTO %s SELECT * FROM w_src" % rel)
        if err:
            return ms, err
        want = self.expected(None if c.rows == self.rows else self.sample_keys)
        got = self.shard_state()
        if got != want:
            return ms, "error: wrong contents on the shards: (count, sum(a)) %r, expected %r" \
                % (got, want)
        return ms, None

    def run_copy(self, rtt):
        """run_copy: W-copy at one RTT."""
        cells = self.copy_cells(rtt)
        self.warm(rtt)
        self.run_cells(cells, self.copy_run)
        for v in self.variants:
            err = self.set_batch_size(v, rtt, None)
            if err:
                log("    could not reset batch_size of %s: %s" % (self.label(v), err))
        self.cells.extend(cells)
        log("  W-copy   rtt %s ms: %s" % (fmt_num(rtt), "; ".join(
            "%s %s %s" % (c.label, self.method_label(c), self.cell_text(c)) for c in cells)))

    def warm(self, rtt):
        """warm: open each variant's connections to every shard before the
        timed runs (a scan of w that fetches no row), untimed; a failure is
        left to the timed runs to report."""
        for v in self.variants:
            self.timed(v, "SELECT * FROM %s.w LIMIT 0" % v.schema(rtt))

    def fill(self):
        """fill: load every row into the shard tables straight on the shards
        (untimed, in parallel) and freeze them, for W-update."""
        run_parallel(self.cfg, [
            (self.cfg.shard_ports[k], "TRUNCATE %s;\nINSERT INTO %s SELECT g, g %% 1000, "
             "md5(g::text) FROM generate_series(%d, %d) g;\nVACUUM (FREEZE, ANALYZE) %s;\n"
             % (t, t, lo, hi, t)) for k, (t, (lo, hi)) in enumerate(zip(self.tables, self.parts))])

    def update_run(self, c):
        """update_run: vacuum the shard tables (untimed: each run leaves a dead
        version of every row), one timed UPDATE, then check that every row's
        b went up by one."""
        for k, t in enumerate(self.tables):
            self.shard_session(k + 1).run("VACUUM %s" % t)
        before = self.shard_state("count(*), sum(b)")
        if c.method == "raw_update":
            ms, err = self.raw_parallel(c.rtt, [(UPDATE_SQL.format(rel=t), None)
                                                for t in self.tables])
        else:
            ms, err = self.timed(c.variant, UPDATE_SQL.format(rel="%s.w" % c.variant.schema(c.rtt)))
        if err:
            return ms, err
        after = self.shard_state("count(*), sum(b)")
        want = [(n, s + n) for n, s in before]
        if after != want:
            return ms, "error: wrong contents on the shards: (count, sum(b)) %r, expected %r" \
                % (after, want)
        return ms, None

    def run_update(self, rtt):
        """run_update: W-update at one RTT: each FDW's UPDATE of every row of
        w, and the raw limit (the same UPDATE on every shard at once)."""
        cells = []
        for v in self.variants:
            cells.append(Cell("update", v, self.label(v), "update", None, self.rows, rtt))
        if self.cfg.raw:
            cells.append(Cell("update", None, "direct to shards", "raw_update", None, self.rows, rtt))
        self.warm(rtt)
        self.run_cells(cells, self.update_run)
        self.cells.extend(cells)
        log("  W-update rtt %s ms: %s" % (fmt_num(rtt), "; ".join(
            "%s %s" % (c.label, self.cell_text(c)) for c in cells)))

    def pgbench(self, port, script, two_phase=None):
        """pgbench: one client for --write-seconds on a script; return
        (avg latency ms, tps, transactions, error or None).  two_phase, when
        given, is the client's async_fdw.two_phase_commit (through
        PGOPTIONS, so that the session starts with it)."""
        cfg = self.cfg
        self.coordinator_ready()
        env = dict(os.environ)
        if two_phase:
            env["PGOPTIONS"] = "-c async_fdw.two_phase_commit=%s" % two_phase
        r = subprocess.run(
            [cfg.pgbench, "-n", "-T", str(cfg.write_seconds), "-c", "1", "-j", "1",
             "-f", script, "-h", "127.0.0.1", "-p", str(port), "-U", USER, DB],
            text=True, capture_output=True, env=env)
        lat = re.search(r"latency average = ([0-9.]+) ms", r.stdout)
        tps = re.search(r"tps = ([0-9.]+)", r.stdout)
        n = re.search(r"number of transactions actually processed: (\d+)", r.stdout)
        if r.returncode != 0 or not (lat and tps and n):
            err = error_line((r.stderr + "\n" + r.stdout).split("\n"))
            return None, None, None, err or "error: pgbench exit %d" % r.returncode
        return float(lat.group(1)), float(tps.group(1)), int(n.group(1)), None

    def latency_scripts(self, test, rtt):
        """latency_scripts: the figures of W-insert1 or W-xact4 at one RTT, as
        dicts (fdw, mode, label, two_phase, port, script); W-insert1 adds the
        same INSERT straight into shard 1 (one round trip, the limit).  Each
        async_fdw variant gives one figure per --write-two-phase setting
        (none: one at its default)."""
        cfg = self.cfg
        row = "(:{v}, :{v} % 1000, md5(CAST(:{v} AS text)))"
        out = []
        if test == "insert1":
            path = os.path.join(cfg.work, "w_insert1_direct_r%s.sql" % rtt_tag(rtt))
            with open(path, "w") as f:
                f.write("\\set id random(%d, %d)\nINSERT INTO %s VALUES %s;\n"
                        % (self.parts[0][0], self.parts[0][1], self.tables[0],
                           row.format(v="id")))
            out.append({"fdw": "direct", "mode": "-", "label": "direct to shard 1",
                        "two_phase": "", "port": self.b.host_port(rtt, 1), "script": path})
        for v in self.variants:
            path = os.path.join(cfg.work, "w_%s_%s_r%s.sql" % (test, v.key, rtt_tag(rtt)))
            rel = "%s.w" % v.schema(rtt)
            with open(path, "w") as f:
                if test == "insert1":
                    f.write("\\set id random(1, %d)\nINSERT INTO %s VALUES %s;\n"
                            % (self.rows, rel, row.format(v="id")))
                else:
                    for k, (lo, hi) in enumerate(self.parts):
                        f.write("\\set i%d random(%d, %d)\n" % (k + 1, lo, hi))
                    f.write("BEGIN;\n")
                    for k in range(len(self.parts)):
                        f.write("INSERT INTO %s VALUES %s;\n"
                                % (rel, row.format(v="i%d" % (k + 1))))
                    f.write("COMMIT;\n")
            settings = [""]
            if v.fdw == "async_fdw" and cfg.write_two_phase:
                settings = cfg.write_two_phase
            for tp in settings:
                out.append({"fdw": v.fdw, "mode": v.mode,
                            "label": self.label(v) + (", 2PC %s" % tp if tp else ""),
                            "two_phase": tp, "port": cfg.coord_port, "script": path})
        return out

    def prepared_count(self):
        """prepared_count: how many rows were ever inserted into
        async_fdw_prepared_xacts on the coordinator (one per remote
        transaction two-phase commit prepared; a backend deletes its own at
        its next two-phase commit, so the table's size says nothing), from
        pg_stat_user_tables.n_tup_ins; or None without the table.  A backend
        flushes its counts as it exits, a moment after pgbench has returned:
        read until two reads 0.3 s apart agree (at most 5 s)."""
        sql = ("SELECT n_tup_ins FROM pg_stat_user_tables"
               " WHERE relname = 'async_fdw_prepared_xacts'")
        last = None
        for _ in range(17):
            out, _, err = self.live_session("admin").try_run(sql)
            if err or not out or not out[-1].strip().isdigit():
                return None
            n = int(out[-1].strip())
            if n == last:
                return n
            last = n
            time.sleep(0.3)
        return last

    def prepared_left(self):
        """prepared_left: the prepared transactions left on the shards
        (pg_prepared_xacts, every shard): 0 after a clean two-phase commit."""
        n = 0
        for k in range(self.cfg.shards):
            out, _ = self.shard_session(k + 1).run("SELECT count(*) FROM pg_prepared_xacts")
            n += int(out[-1])
        return n

    def run_latency(self, test, rtt):
        """run_latency: W-insert1 or W-xact4 at one RTT, one pgbench client
        per figure (postgres_fdw at its default batch_size), --runs rounds
        interleaved with the order rotating each round; the median of the
        runs' average latency and tps is reported.  For async_fdw, the rows
        two-phase commit recorded per transaction are counted (0 means no
        PREPARE), and the prepared transactions left on the shards."""
        figs = self.latency_scripts(test, rtt)
        for fig in figs:
            fig.update(lats=[], tpss=[], n=0, err=None, prepared=0, counted=True)
        n = len(figs)
        for r in range(self.cfg.runs):
            for i in range(n):
                fig = figs[(r + i) % n]
                if fig["err"]:
                    continue
                before = self.prepared_count() if fig["fdw"] == "async_fdw" else None
                lat, tps, cnt, err = self.pgbench(fig["port"], fig["script"], fig["two_phase"])
                if err:
                    fig["err"] = err
                    continue
                fig["lats"].append(lat)
                fig["tpss"].append(tps)
                fig["n"] += cnt
                after = self.prepared_count() if before is not None else None
                if before is None or after is None:
                    fig["counted"] = False
                else:
                    fig["prepared"] += after - before
        left = self.prepared_left()
        parts = []
        for fig in figs:
            err = fig["err"]
            lat = statistics.median(fig["lats"]) if fig["lats"] else None
            tps = statistics.median(fig["tpss"]) if fig["tpss"] else None
            if err is None and lat is None:
                err = "error: no run"
            per = ""
            if fig["fdw"] == "async_fdw" and fig["counted"] and fig["n"]:
                per = "%.2f" % (fig["prepared"] / fig["n"])
            self.latency.append({
                "test": test, "rtt_ms": fmt_num(rtt), "rtt": rtt, "fdw": fig["fdw"],
                "mode": fig["mode"], "two_phase": fig["two_phase"], "label": fig["label"],
                "clients": 1, "seconds": self.cfg.write_seconds, "runs": len(fig["lats"]),
                "avg_latency_ms": err or "%.3f" % lat, "tps": err or "%.1f" % tps,
                "run_latency_ms": ";".join("%.3f" % x for x in fig["lats"]),
                "transactions": "" if err else fig["n"], "prepared_per_xact": per,
                "prepared_left": left, "lat": None if err else lat})
            parts.append("%s %s" % (fig["label"], err or "%.3f ms" % lat))
        log("  %-8s rtt %s ms: %s" % (WRITE_TEST_LABEL[test], fmt_num(rtt), ", ".join(parts)))
        if left:
            log("    %d prepared transaction(s) left on the shards" % left)

    def run(self):
        """run: every selected write test at every RTT, in the order copy,
        update, insert1, xact4 (the last two insert into the table the
        update left)."""
        cfg = self.cfg
        log("writes (%s; %d rows, %d runs each, median reported) ..."
            % (", ".join(WRITE_TEST_LABEL[t] for t in self.tests), self.rows, cfg.runs))
        for rtt in cfg.rtts:
            if "copy" in self.tests:
                self.run_copy(rtt)
        if "update" in self.tests:
            self.fill()
            for rtt in cfg.rtts:
                self.run_update(rtt)
        for test in ("insert1", "xact4"):
            if test in self.tests:
                for rtt in cfg.rtts:
                    self.run_latency(test, rtt)
        self.save_plans()

    def save_plans(self):
        """save_plans: EXPLAIN VERBOSE of each variant's write statements
        (write_plans.txt), to show what each FDW sends; an error is kept as
        the plan's text."""
        rtt = self.cfg.rtts[0]
        text = []
        for v in self.variants:
            rel = "%s.w" % v.schema(rtt)
            for sql in ("INSERT INTO %s SELECT * FROM w_src" % rel, UPDATE_SQL.format(rel=rel),
                        "INSERT INTO %s VALUES (1, 1, 'x')" % rel):
                out, _, err = self.live_session("admin").try_run("EXPLAIN (VERBOSE, COSTS OFF) " + sql)
                text.append("-- %s\n-- %s\n%s\n" % (self.label(v), sql, err or "\n".join(out)))
        with open(os.path.join(self.cfg.results, "write_plans.txt"), "w") as f:
            f.write("\n".join(text))

    # ---- output ------------------------------------------------------------

    def measured_round_trip(self, rtt):
        """measured_round_trip: the proxy check's SELECT 1 latency (ms)
        through the proxy of one RTT > 0 (the path the coordinator's servers
        take there), or None.  On loopback the cost of two-phase commit is
        the servers' work, not round trips: no figure at 0 ms."""
        for r in self.b.proxy_results:
            if rtt != 0 and r["path"] == "proxy" and r["configured_rtt_ms"] == fmt_num(rtt):
                return float(r["avg_latency_ms"])
        return None

    def two_phase_markdown(self):
        """two_phase_markdown: the cost of two-phase commit: per test and RTT,
        async_fdw with async_fdw.two_phase_commit on against off, the
        difference in ms and, at RTT > 0, in round trips (issue 15's goal: at
        most one), next to postgres_fdw (which has no two-phase commit)."""
        L = []
        rows = []
        for test in ("xact4", "insert1"):
            for rtt in self.cfg.rtts:
                rs = [r for r in self.latency if r["test"] == test and r["rtt"] == rtt]
                pg = [r for r in rs if r["fdw"].startswith("postgres_fdw")]
                for v in self.variants:
                    if v.fdw != "async_fdw":
                        continue
                    by = {r["two_phase"]: r for r in rs
                          if r["fdw"] == "async_fdw" and r["mode"] == v.mode}
                    off, on = by.get("off"), by.get("on")
                    if not off or not on:
                        continue
                    diff = on["lat"] - off["lat"] if on["lat"] is not None and \
                        off["lat"] is not None else None
                    trip = self.measured_round_trip(rtt)
                    rows.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                        WRITE_TEST_LABEL[test], fmt_num(rtt), v.label(),
                        pg[0]["avg_latency_ms"] if pg else "–",
                        off["avg_latency_ms"], on["avg_latency_ms"],
                        "%+.3f" % diff if diff is not None else "–",
                        "%+.2f" % (diff / rtt) if diff is not None and rtt else "–",
                        "%+.2f (%.3f ms)" % (diff / trip, trip)
                        if diff is not None and trip and rtt else "–"))
        if not rows:
            return L
        L.append("### Two-phase commit: async_fdw.two_phase_commit on against off")
        L.append("")
        L.append("| test | RTT ms | fdw | postgres_fdw ms | 2PC off ms | 2PC on ms | on − off ms "
                 "| on − off in round trips | ÷ measured round trip |")
        L.append("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        L.extend(rows)
        L.append("")
        L.append("Average latency, 1 pgbench client (medians as above). The pgbench session "
                 "sets the setting through `PGOPTIONS='-c async_fdw.two_phase_commit=off|on'`; "
                 "the default, auto, uses two-phase commit for W-xact4 (4 servers written) and "
                 "not for W-insert1 (one). \"in round trips\" = (on − off) ÷ RTT; issue 15's "
                 "goal: at most one extra round trip. \"÷ measured round trip\" divides by the "
                 "proxy check's `SELECT 1` latency through the proxy of that RTT (the "
                 "coordinator's path to the shards), given in brackets: the round trip this run "
                 "really had (none at 0 ms, where the cost is the servers' work). Reference: Citus 13 (always two-phase for "
                 "a multi-shard write) takes 2.7 ms for W-xact4's transaction on loopback and "
                 "0.35 ms for a one-row, one-shard insert (median, issue 15). Prepared "
                 "transactions left on the shards at the end of the last test: %s."
                 % self.latency[-1]["prepared_left"])
        L.append("")
        return L

    def cell_text(self, c):
        """cell_text: a cell's figure for the report: its median (or its
        extrapolation, marked), or its error."""
        if c.error:
            return c.error
        m = c.figure(self.rows)
        if m is None:
            return "–"
        if c.rows != self.rows:
            return "%s (extrapolated from %d rows: %s)" % (fmt_ms(m), c.rows, fmt_ms(c.median()))
        return fmt_ms(m)

    def write_csv(self):
        """write_csv: writes.csv (W-copy, W-update) and write_latency.csv
        (W-insert1, W-xact4); a failed figure reads "error: ..." in place of
        its number."""
        res = self.cfg.results
        with open(os.path.join(res, "writes.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["test", "fdw", "mode", "method", "batch_size", "rtt_ms", "median_ms",
                        "runs", "run_ms", "rows", "extrapolated_ms", "total_rows"])
            for c in self.cells:
                m = c.median()
                w.writerow([c.test, c.fdw, c.mode, c.method, c.batch or "", fmt_num(c.rtt),
                            c.error or "%.3f" % m, len(c.times),
                            ";".join("%.3f" % t for t in c.times), c.rows,
                            "%.3f" % c.figure(self.rows) if c.rows != self.rows and m else "",
                            self.rows])
        with open(os.path.join(res, "write_latency.csv"), "w", newline="") as f:
            cols = ["test", "rtt_ms", "fdw", "mode", "two_phase", "clients", "seconds", "runs",
                    "avg_latency_ms", "tps", "run_latency_ms", "transactions",
                    "prepared_per_xact", "prepared_left"]
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(self.latency)

    def pg_best(self, test, rtt):
        """pg_best: postgres_fdw's fastest measured (not extrapolated) cell of
        a test at one RTT, or None."""
        cs = [c for c in self.cells if c.test == test and c.rtt == rtt and
              c.fdw.startswith("postgres_fdw") and c.rows == self.rows and c.median()]
        return min(cs, key=lambda c: c.median()) if cs else None

    def find(self, test, rtt, fdw, method):
        """find: the cells of a test, RTT, FDW and method."""
        return [c for c in self.cells if (c.test, c.rtt, c.fdw, c.method) == (test, rtt, fdw, method)]

    def ratio_rows(self, test, rtt, methods, raw_method):
        """ratio_rows: the summary lines of a test at one RTT: each async_fdw
        method against postgres_fdw's best and against the raw limit."""
        best = self.pg_best(test, rtt)
        raw = (self.find(test, rtt, raw_method, raw_method) or [None])[0]
        rows = []
        for v in self.variants:
            if v.fdw != "async_fdw":
                continue
            for method in methods:
                for c in self.find(test, rtt, v.fdw, method):
                    if c.mode != v.mode:
                        continue
                    m = c.median()
                    rows.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                        fmt_num(rtt), "%s %s" % (c.label, self.method_label(c)),
                        self.cell_text(c),
                        "%s (%s)" % (fmt_ms(best.median()), self.method_label(best)) if best else "–",
                        "%.1fx" % (best.median() / m) if m and best else "–",
                        self.cell_text(raw) if raw else "–",
                        "%.2f" % (m / raw.median()) if m and raw and raw.median() else "–"))
        return rows

    def markdown(self):
        """markdown: the lines of the writes section of the report."""
        cfg = self.cfg
        L = ["## Writes (scenario W): %d rows `(a int, b int, c text)` over %d shards"
             % (self.rows, cfg.shards), ""]
        L.append("The table `w` is range-partitioned on `a`, one foreign partition per shard "
                 "(like E), shard tables without a key. Times are medians of %d runs in ms; a "
                 "failed figure reads `error: ` and the first line of its message (its "
                 "remaining runs are skipped). Every load and update is checked against the "
                 "shards' contents (count and sum)." % cfg.runs)
        L.append("")
        copies = [c for c in self.cells if c.test == "copy"]
        if copies:
            L.append("### W-copy: load %d rows into the emptied partitioned table" % self.rows)
            L.append("")
            L.append("| RTT ms | fdw | method | median ms |")
            L.append("| ---: | --- | --- | ---: |")
            for c in copies:
                L.append("| %s | %s | %s | %s |" % (fmt_num(c.rtt), c.label, self.method_label(c),
                                                   self.cell_text(c)))
            L.append("")
            L.append("COPY FROM STDIN = `\\copy w FROM '<file>'` in an open psql session on the "
                     "coordinator; INSERT ... SELECT = `INSERT INTO w SELECT * FROM w_src` (a "
                     "local staging table holding the same rows); both timed by the harness "
                     "around the statement (connections already open). postgres_fdw's COPY sends "
                     "one row per round trip in PostgreSQL 15: it loads an evenly spread sample "
                     "of %d rows and its figure is extrapolated linearly to %d rows (marked). "
                     "raw COPY x%d = one `psql -c \"COPY <shard table> FROM STDIN\" < <its "
                     "quarter>` per shard at once, straight to the shards (through the proxy at "
                     "RTT > 0), wall time of the slowest, psql start-up included. async_fdw "
                     "INSERT ... SELECT runs at its default batch_size."
                     % (self.sample, self.rows, cfg.shards))
            L.append("")
        updates = [c for c in self.cells if c.test == "update"]
        if updates:
            L.append("### W-update: `%s` over every row" % UPDATE_SQL.format(rel="w"))
            L.append("")
            L.append("| RTT ms | fdw | method | median ms |")
            L.append("| ---: | --- | --- | ---: |")
            for c in updates:
                L.append("| %s | %s | %s | %s |" % (fmt_num(c.rtt), c.label, self.method_label(c),
                                                   self.cell_text(c)))
            L.append("")
            L.append("The shard tables are vacuumed before each run (untimed). raw UPDATE x%d = "
                     "the same UPDATE sent straight to every shard at once by one psql each, "
                     "wall time of the slowest, psql start-up included." % cfg.shards)
            L.append("")
        if copies or updates:
            L.append("### Write ratios")
            L.append("")
            L.append("\"pg best ÷ async_fdw\" is how many times faster async_fdw is than "
                     "postgres_fdw's fastest measured figure (issue 14's goals: COPY 3x on "
                     "loopback and 10x at 1 ms, UPDATE 2x on loopback); \"÷ raw\" is async_fdw's "
                     "time over the raw limit (goal for COPY: at most 1.5).")
            L.append("")
            L.append("| RTT ms | async_fdw | median ms | pg best | pg best ÷ async_fdw "
                     "| raw | ÷ raw |")
            L.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
            for rtt in cfg.rtts:
                if copies:
                    L.extend(self.ratio_rows("copy", rtt, ("copy", "insert_select"), "raw_copy"))
                if updates:
                    L.extend(self.ratio_rows("update", rtt, ("update",), "raw_update"))
            L.append("")
        if self.latency:
            L.append("### W-insert1 and W-xact4: pgbench, 1 client, -T %d" % cfg.write_seconds)
            L.append("")
            L.append("| test | RTT ms | fdw | avg latency ms | tps | prepared per xact |")
            L.append("| --- | ---: | --- | ---: | ---: | ---: |")
            for r in self.latency:
                L.append("| %s | %s | %s | %s | %s | %s |" % (
                    WRITE_TEST_LABEL[r["test"]], r["rtt_ms"], r["label"], r["avg_latency_ms"],
                    r["tps"] if not r["tps"].startswith("error") else "–",
                    r["prepared_per_xact"] or "–"))
            L.append("")
            L.append("Median of %d pgbench runs of %d s each (the figures take turns); \"prepared "
                     "per xact\" = rows async_fdw's two-phase commit recorded in "
                     "`async_fdw_prepared_xacts` per transaction (one per PREPAREd remote "
                     "transaction; 0: committed without two-phase commit)." % (cfg.runs,
                                                                             cfg.write_seconds))
            L.append("")
            L.extend(self.two_phase_markdown())
            L.append("W-insert1: `\\set id random(1, rows)` / `INSERT INTO w VALUES (:id, :id % "
                     "1000, md5(CAST(:id AS text)))` (postgres_fdw at its default batch_size); "
                     "\"direct to shard 1\" inserts the same row straight into shard 1 (one round "
                     "trip, the limit). W-xact4: `BEGIN`, one such INSERT into each shard's range, "
                     "`COMMIT`.")
            L.append("")
        return L
