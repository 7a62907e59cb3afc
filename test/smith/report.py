#!/usr/bin/env python3
"""test/smith/report.py DIR...: the findings of sqlsmith runs (run.sh).

Each DIR is one configuration's results: server.log (the part of the
cluster's log written while sqlsmith ran, with log_line_prefix
'%m [%p] %q<%d|%a|%e> '), sqlsmith.err (its progress and report),
coverage.txt and, when the rows changed, data_check.txt.  Prints, over all
the DIRs together: crashes and assertion failures with the statement of
the process, PANICs, internal errors (XX000 and messages of the kind),
remote errors of the SQL async_fdw wrote, leak warnings, and the errors
by SQLSTATE on the coordinator (database coord) and on the shards.  Exits
1 on a crash, an assertion failure, a PANIC or changed rows.
"""
import collections
import os
import re
import sys

HEAD = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+) \[(\d+)\] '
                  r'(?:<([^|>]*)\|([^|>]*)\|([0-9A-Z]{5})> )?([A-Z]+):  ?(.*)$')
TRAP = re.compile(r'^TRAP: (.*)PID: (\d+)')
CRASH = re.compile(r'server process \(PID (\d+)\) (was terminated by (?:signal|exception).*|exited with exit code \d+)')
# Messages of errors that a user's query should never see.
INTERNAL = re.compile(r'cache lookup failed|unrecognized node type|unexpected|could not find|'
                      r'wrong varno|plan should not reference|variable not found|'
                      r'no relation entry|invalid memory alloc|negative bitmapset|'
                      r'failed to build|could not devise|unrecognized (?:join|path|plan|scan|command)',
                      re.I)
LEAK = re.compile(r'leak|not closed|still referenced|left over', re.I)
COORD = 'coord'
SHARDS = ('shard1', 'shard2')
SECONDARY = ('DETAIL', 'HINT', 'CONTEXT', 'STATEMENT', 'QUERY', 'LOCATION')


class Entry:
    def __init__(self, cfg, ts, pid, db, app, state, level, text):
        self.cfg, self.ts, self.pid = cfg, ts, pid
        self.db, self.app, self.state, self.level = db, app, state, level
        self.lines = [text]
        self.extra = {}		# DETAIL, CONTEXT, STATEMENT, ...

    @property
    def text(self):
        return '\n'.join(self.lines)


def read_log(cfg, path):
    """The log's entries, the secondary ones folded into their primary."""
    entries = []
    last_of_pid = {}
    cur = None
    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            line = line.rstrip('\n')
            m = HEAD.match(line)
            t = TRAP.match(line)
            if m:
                ts, pid, db, app, state, level, text = m.groups()
                if level in SECONDARY and pid in last_of_pid:
                    prim = last_of_pid[pid]
                    prim.extra[level] = [text]
                    cur = (prim, level)
                    continue
                e = Entry(cfg, ts, pid, db or '', app or '', state or '', level, text)
                entries.append(e)
                last_of_pid[pid] = e
                cur = (e, None)
            elif t:
                e = Entry(cfg, '', t.group(2), '', '', '', 'TRAP', line)
                entries.append(e)
                cur = (e, None)
            elif cur is not None:
                e, key = cur
                if key is None:
                    e.lines.append(line)
                else:
                    e.extra[key].append(line)
    return entries


def extra(e, key):
    return '\n'.join(e.extra.get(key, []))


def shorten(s, n=3000):
    return s if len(s) <= n else s[:n] + ' ...[%d more characters]' % (len(s) - n)


def normalize(msg):
    """A message without its numbers, oids and names in quotes: one group."""
    msg = msg.split('\n')[0]
    msg = re.sub(r'\d+', 'N', msg)
    return msg


def sqlsmith_counts(d):
    """From sqlsmith's progress characters (. ok, e error, t timeout, S or s
    syntax error, C or c connection lost) and its last "queries: N"."""
    c = collections.Counter()
    path = os.path.join(d, 'sqlsmith.err')
    if not os.path.exists(path):
        return c, ''
    tail = ''
    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            s = line.rstrip('\n')
            if s and re.fullmatch(r'[.A-Za-z]+', s) and '.' in s or re.fullmatch(r'[etsScC]+', s):
                for ch in s:
                    c[{'S': 's', 'C': 'c'}.get(ch, ch)] += 1
            elif s.startswith('sqlsmith exit status'):
                tail = s
    return c, tail


def main(dirs):
    failed = False
    out = []
    p = out.append
    entries = []
    per_cfg = []
    for d in dirs:
        cfg = os.path.basename(os.path.normpath(d))
        entries += read_log(cfg, os.path.join(d, 'server.log'))
        c, tail = sqlsmith_counts(d)
        per_cfg.append((cfg, c, tail))

    p('== statements (from sqlsmith: . ok, e error, t timeout, s syntax error, c connection lost;')
    p('   sqlsmith 1.4 counts its timeouts as errors: they are the 57014 below)')
    total = collections.Counter()
    for cfg, c, tail in per_cfg:
        n = sum(c.values())
        total.update(c)
        p('%-28s %6d statements: %6d ok, %6d errors, %5d timeouts, %4d syntax, %3d lost connections  (%s)'
          % (cfg, n, c['.'], c['e'], c['t'], c['s'], c['c'], tail))
        if n != sum(c[k] for k in '.etsc'):
            p('%28s unknown progress characters: %s' % ('', {k: v for k, v in c.items() if k not in '.etsc'}))
    if len(per_cfg) > 1:
        p('%-28s %6d statements: %6d ok, %6d errors, %5d timeouts, %4d syntax, %3d lost connections'
          % ('total', sum(total.values()), total['.'], total['e'], total['t'], total['s'], total['c']))

    # Crashes, with the TRAP of the same process.
    traps = collections.defaultdict(list)
    for e in entries:
        if e.level == 'TRAP':
            traps[e.pid].append(e)
    crashes = [e for e in entries if e.level == 'LOG' and CRASH.search(e.text)]
    panics = [e for e in entries if e.level == 'PANIC']
    p('')
    p('== crashes: %d, assertion failures: %d, PANICs: %d'
      % (len(crashes), sum(len(v) for v in traps.values()), len(panics)))
    seen_trap = set()
    for e in crashes:
        failed = True
        m = CRASH.search(e.text)
        pid = m.group(1)
        p('--- [%s] %s server process %s %s' % (e.cfg, e.ts, pid, m.group(2)))
        for t in traps.get(pid, []):
            seen_trap.add(id(t))
            p(shorten(t.text, 6000))
        p('statement: ' + shorten(extra(e, 'DETAIL').replace('Failed process was running: ', '', 1)))
    for pid, ts in traps.items():
        for t in ts:
            if id(t) not in seen_trap:
                failed = True
                p('--- [%s] assertion failure in process %s (no crash line found)' % (t.cfg, pid))
                p(shorten(t.text, 6000))
    for e in panics:
        failed = True
        p('--- [%s] %s PANIC in %s: %s' % (e.cfg, e.ts, e.db, e.text))
        p('statement: ' + shorten(extra(e, 'STATEMENT')))

    # Errors.
    errs = [e for e in entries if e.level == 'ERROR']
    coord = [e for e in errs if e.db == COORD and e.app != 'smith-harness']
    shard = [e for e in errs if e.db in SHARDS]
    harness = [e for e in errs if e.app == 'smith-harness']

    def groups(es):
        g = collections.OrderedDict()
        for e in es:
            g.setdefault((e.state, normalize(e.text)), []).append(e)
        return sorted(g.items(), key=lambda kv: -len(kv[1]))

    def show(title, es, n_stmt=1):
        p('')
        p('== %s: %d (%d distinct)' % (title, len(es), len(groups(es))))
        for (state, msg), g in groups(es):
            e = g[0]
            p('--- %dx %s %s   [first: %s, %s pid %s]' % (len(g), state, e.text.split('\n')[0],
                                                         e.cfg, e.ts, e.pid))
            for key in ('DETAIL', 'HINT', 'CONTEXT'):
                if key in e.extra:
                    p('%s: %s' % (key, shorten(extra(e, key))))
            for e2 in g[:n_stmt]:
                p('statement: ' + shorten(extra(e2, 'STATEMENT')))

    internal = [e for e in coord if e.state.startswith('XX') or INTERNAL.search(e.text.split('\n')[0])]
    show('internal errors on the coordinator (XX000 and the like)', internal)
    remote42 = [e for e in coord if 'remote SQL command' in extra(e, 'CONTEXT') and
                (e.state.startswith('42') or e.state.startswith('0A') or e.state.startswith('XX'))]
    show('errors of the remote SQL async_fdw wrote (class 42, 0A or XX on a shard)', remote42)
    warnings = [e for e in entries if e.level == 'WARNING' and e.db == COORD and LEAK.search(e.text)]
    show('leak warnings on the coordinator', warnings)
    if harness:
        show("errors of the harness's own statements (check.sql, coverage.sql)", harness)

    def by_state(title, es):
        p('')
        p('== %s by SQLSTATE: %d errors' % (title, len(es)))
        c = collections.Counter(e.state for e in es)
        example = {}
        for e in es:
            example.setdefault(e.state, e.text.split('\n')[0])
        for state, n in c.most_common():
            p('%6d  %s  e.g. %s' % (n, state, shorten(example[state], 150)))

    by_state('coordinator errors', coord)
    by_state('shard errors (remote statements)', shard)

    p('')
    p('== coverage and data')
    for d in dirs:
        cfg = os.path.basename(os.path.normpath(d))
        cov = os.path.join(d, 'coverage.txt')
        if os.path.exists(cov):
            p('--- ' + cfg)
            with open(cov, encoding='utf-8', errors='replace') as f:
                p(f.read().rstrip())
        chk = os.path.join(d, 'data_check.txt')
        if os.path.exists(chk):
            failed = True
            with open(chk, encoding='utf-8', errors='replace') as f:
                p('ROWS CHANGED after %s:\n%s' % (cfg, f.read().rstrip()))
    p('')
    p('RESULT: ' + ('FAILED (crash, assertion failure, PANIC or changed rows)' if failed
                    else 'no crash, no assertion failure'))
    print('\n'.join(out))
    return 1 if failed else 0


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
