#!/usr/bin/env python3
"""check_layers.py: async_fdw's files call only downward.

Reads the call graph from the LLVM bitcode that the PGXS build writes next
to each object (src/*.bc, when PostgreSQL was built with LLVM), and checks
that no function calls (or takes the address of) a function defined in a
file of a higher layer.  Every file of src/ must be in LAYERS, and a
function exported from a file must be used by another.  Exit status
1 on an upward call or an unassigned file, 2 when the bitcode or llvm-dis
is missing.

Usage: scripts/check_layers.py [SRC_DIR]       (default: src)
       scripts/check_layers.py --graph [SRC_DIR]  print every cross-file call
       scripts/check_layers.py --trip FUNCTION [SRC_DIR]
           the files and layers a depth-first walk of the calls from
           FUNCTION passes through: its moves between files, those back
           into a file already left, and its moves up the layers
"""
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

# Top first.  A file may call files of its own layer and of the layers
# below it, never above.
LAYERS = [
    ('entry', ['async_fdw', 'connection_functions', 'check_copies', 'recovery_worker']),
    ('planner', ['scan_paths', 'aggregate_paths', 'decorrelate', 'replicated_joins', 'join_paths', 'hash_join_keys', 'pushed_keys', 'remote_rels',
                 'direct_modify_plan', 'order_limit', 'shippable']),
    ('execution', ['scan', 'key_collector', 'plan_census', 'combined_scans', 'scan_commands', 'copy_stream', 'row_builder', 'modify_rows', 'direct_modify', 'replica_writes',
                   'explain', 'analyze', 'truncate', 'import_schema', 'scan_state']),
    ('session', ['remote_xact', 'xact_callbacks', 'visibility', 'shared_snapshot', 'prepared_statements', 'twophase', 'twophase_recovery', 'commit_fence']),
    ('wire', ['connection_setup', 'connection_pool', 'remote_commands', 'connection_budget', 'connection_state']),
    ('common', ['options', 'deparse_statements', 'deparse_join', 'deparse_context', 'deparse_expr', 'join_subqueries', 'shippable_subplans', 'plan_private']),
]

# Upward calls not yet removed, each "file function file callee" on a line
# of its own (none left).  The check fails on any other upward call, and
# on an entry here that is gone (remove it): the list only shrinks.
KNOWN_UPWARD = set(tuple(l.split()) for l in """

""".split('\n') if l.strip())


def llvm_dis():
    """The llvm-dis to read the bitcode with."""
    found = os.environ.get('LLVM_DIS') or shutil.which('llvm-dis')
    if found:
        return found
    cands = sorted(glob.glob('/usr/lib/llvm-*/bin/llvm-dis'),
                   key=lambda p: int(re.search(r'llvm-(\d+)', p).group(1)))
    return cands[-1] if cands else None


def call_graph(src):
    """(file, function) -> set of (file, function) it refers to."""
    dis = llvm_dis()
    bcs = sorted(glob.glob(os.path.join(src, '*.bc')) + glob.glob(os.path.join(src, '*', '*.bc')))
    if dis is None or not bcs:
        sys.stderr.write('check_layers: no %s (build with a PostgreSQL built with LLVM first)\n'
                         % ('llvm-dis' if dis is None else 'src/*.bc'))
        sys.exit(2)
    globals_, locals_, body = {}, set(), {}
    for bc in bcs:
        f = os.path.basename(bc)[:-3]
        text = subprocess.run([dis, '-o', '-', bc], check=True,
                              capture_output=True, text=True).stdout
        cur = None
        for line in text.split('\n'):
            m = re.match(r'define (.*?)@([\w.]+)\(', line)
            if m:
                cur = (f, m.group(2))
                if 'internal' in m.group(1):
                    locals_.add(cur)
                else:
                    globals_[m.group(2)] = f
                body[cur] = set()
            elif line.startswith('}'):
                cur = None
            elif cur is not None:
                body[cur].update(re.findall(r'@([\w.]+)', line))
    graph = collections.defaultdict(set)
    for (f, fn), refs in body.items():
        for r in refs:
            if (f, r) in locals_:
                target = (f, r)
            elif r in globals_:
                target = (globals_[r], r)
            else:
                continue
            if target != (f, fn):
                graph[(f, fn)].add(target)
    return graph, globals_


def main():
    args = sys.argv[1:]
    show = '--graph' in args
    args = [a for a in args if a != '--graph']
    trip = None
    if '--trip' in args:
        i = args.index('--trip')
        trip = args[i + 1]
        del args[i:i + 2]
    src = args[0] if args else 'src'
    rank = {}
    for i, (name, files) in enumerate(LAYERS):
        for f in files:
            rank[f] = (i, name)
    graph, exported = call_graph(src)
    if trip is not None:
        return walk(graph, trip, rank)
    files = {os.path.basename(p)[:-2] for p in glob.glob(os.path.join(src, '*.c')) + glob.glob(os.path.join(src, '*', '*.c'))}
    bad = 0
    for f in sorted(files - set(rank)):
        print('check_layers: src/%s.c is in no layer (add it to LAYERS)' % f)
        bad += 1
    crossings = collections.Counter()
    seen_known = set()
    for (f, fn), targets in sorted(graph.items()):
        for (g, callee) in sorted(targets):
            if f == g:
                continue
            if show:
                print('%s %s -> %s %s' % (f, fn, g, callee))
            if f in rank and g in rank:
                crossings[(rank[f][1], rank[g][1])] += 1
                if rank[g][0] < rank[f][0]:
                    if (f, fn, g, callee) in KNOWN_UPWARD:
                        seen_known.add((f, fn, g, callee))
                        print('check_layers: known upward call: %s.c %s -> %s.c %s'
                              % (f, fn, g, callee))
                        continue
                    print('check_layers: upward call: %s.c %s (%s) -> %s.c %s (%s)'
                          % (f, fn, rank[f][1], g, callee, rank[g][1]))
                    bad += 1
    # An exported function that no other file uses belongs in its file
    # (static); SQL-callable functions, background worker entry points
    # (named in a string) and PostgreSQL's module symbols are used from
    # outside.
    used_elsewhere = {callee for (f, _), ts in graph.items()
                      for (g, callee) in ts if f != g}
    outside = set()
    top = os.path.dirname(os.path.abspath(src))
    for path in glob.glob(os.path.join(top, '*.sql')):
        outside.update(re.findall(r'\w+', open(path).read()))
    for path in glob.glob(os.path.join(src, '*.c')) + glob.glob(os.path.join(src, '*', '*.c')):
        outside.update(re.findall(r'"(\w+)"', open(path).read()))
    for name, f in sorted(exported.items()):
        if (name not in used_elsewhere and name not in outside and
                name not in ('_PG_init', 'Pg_magic_func') and
                not name.startswith('pg_finfo_')):
            print('check_layers: %s (%s.c) is used in its file only: make it static' % (name, f))
            bad += 1
    for k in sorted(KNOWN_UPWARD - seen_known):
        print('check_layers: %s.c %s -> %s.c %s is gone: remove it from KNOWN_UPWARD' % k)
        bad += 1
    if not show:
        for (a, b), n in sorted(crossings.items(),
                                key=lambda x: ([l for l, _ in LAYERS].index(x[0][0]),
                                               [l for l, _ in LAYERS].index(x[0][1]))):
            if a != b:
                print('  %-9s -> %-9s %4d calls' % (a, b, n))
    if bad:
        print('check_layers: %d problem(s)' % bad)
        return 1
    if seen_known:
        print('check_layers: no new upward call (%d known ones left)' % len(seen_known))
    else:
        print('check_layers: every call between files goes down the layers')
    return 0


def walk(graph, root, rank):
    """Print the depth-first trip of the calls from ROOT (each function
    entered once) across files and layers."""
    starts = [k for k in graph if k[1] == root]
    if not starts:
        print('check_layers: no function %s' % root)
        return 1
    seen = set()
    moves = back = up = 0
    files = set()

    def visit(node, left):
        nonlocal moves, back, up
        seen.add(node)
        files.add(node[0])
        for target in sorted(graph.get(node, ())):
            if target in seen:
                continue
            if target[0] != node[0]:
                moves += 1
                if target[0] in left:
                    back += 1
                if rank.get(target[0], (0,))[0] < rank.get(node[0], (0,))[0]:
                    up += 1
                visit(target, left | {node[0]})
            else:
                visit(target, left)

    sys.setrecursionlimit(10000)
    visit(starts[0], frozenset())
    print('%s: %d functions in %d files; %d moves between files, %d of them back '
          'into a file already left; %d up the layers'
          % (root, len(seen), len(files), moves, back, up))
    return 0


if __name__ == '__main__':
    sys.exit(main())
