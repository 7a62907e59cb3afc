#!/usr/bin/env python3
"""check_layers.py: async_fdw's files call only downward.

The layer of a source file is its folder: the entry points at the top of
src/, then the folders of FOLDERS below, top first.  Within a folder the
files are in the order its README.md lists them (lines beginning with
"- `name.c`", top first; src/README.md for the entry points).  A file may
call the files listed below it in its own folder and the files of the
folders below; never a file above it, never a folder above.  Such an order
leaves no circle between files; the check also looks for circles by
themselves, to name their calls when a README's order is what is wrong.

The call graph is read from the LLVM bitcode that the PGXS build writes
next to each object (src/**/*.bc, when PostgreSQL was built with LLVM): a
function refers to another when it calls it or takes its address.  A
function exported from a file must be used by another file (or from
outside: SQL, a worker's name, PostgreSQL's module symbols).

Exit status 1 on a call up, a circle, a file in no folder's order or a
folder in no layer, an export used in its own file only; 2 when the
bitcode or llvm-dis is missing.

Usage: scripts/check_layers.py [SRC_DIR]       (default: src)
       scripts/check_layers.py --graph [SRC_DIR]  print every call between files
       scripts/check_layers.py --self-test   the check on made-up graphs
       scripts/check_layers.py --trip FUNCTION [--files] [SRC_DIR]
           the files and folders a depth-first walk of the calls from
           FUNCTION passes through: its moves between files, those back into
           a file already left (on the way down) and those up the order;
           with --files, the walk itself, one line per file entered
"""
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

# The folders of src/, top first ('' is src/ itself: the entry points).
FOLDERS = ['', 'planner', 'executor', 'transaction', 'connection', 'sql', 'common']


def llvm_dis():
    """The llvm-dis to read the bitcode with."""
    found = os.environ.get('LLVM_DIS') or shutil.which('llvm-dis')
    if found:
        return found
    cands = sorted(glob.glob('/usr/lib/llvm-*/bin/llvm-dis'),
                   key=lambda p: int(re.search(r'llvm-(\d+)', p).group(1)))
    return cands[-1] if cands else None


def sources(src, ext):
    """Files of SRC and of its folders ending in EXT, as (folder, name)."""
    found = []
    for path in glob.glob(os.path.join(src, '*' + ext)) + \
            glob.glob(os.path.join(src, '*', '*' + ext)):
        rel = os.path.relpath(path, src)
        found.append((os.path.dirname(rel), os.path.basename(rel)[:-len(ext)]))
    return sorted(found)


def call_graph(src):
    """(file, function) -> set of (file, function) it refers to, and the
    file of each exported function."""
    dis = llvm_dis()
    bcs = sources(src, '.bc')
    if dis is None or not bcs:
        sys.stderr.write('check_layers: no %s (build with a PostgreSQL built with LLVM first)\n'
                         % ('llvm-dis' if dis is None else 'src/**/*.bc'))
        sys.exit(2)
    globals_, locals_, body = {}, set(), {}
    for folder, f in bcs:
        text = subprocess.run([dis, '-o', '-', os.path.join(src, folder, f + '.bc')],
                              check=True, capture_output=True, text=True).stdout
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


def read_order(src, problems):
    """file -> (folder index, place in its folder, folder) from the folders'
    READMEs; every .c file must be listed once, in the README of its own
    folder, and every folder must be one of FOLDERS."""
    rank = {}
    on_disk = sources(src, '.c')
    for folder in sorted({d for d, _ in on_disk} - set(FOLDERS)):
        problems.append('src/%s/ is in no layer (add it to FOLDERS)' % folder)
    for i, folder in enumerate(FOLDERS):
        readme = os.path.join(src, folder, 'README.md')
        listed = []
        if os.path.exists(readme):
            listed = re.findall(r'^- `(\w+)\.c`', open(readme).read(), re.M)
        here = {f for d, f in on_disk if d == folder}
        shown = os.path.join('src', folder, 'README.md')
        for j, f in enumerate(listed):
            if f not in here:
                problems.append('%s lists %s.c, which is not in that folder' % (shown, f))
            elif f in rank:
                problems.append('%s lists %s.c twice' % (shown, f))
            else:
                rank[f] = (i, j, folder)
        for f in sorted(here - set(listed)):
            problems.append('%s.c is not in the order of %s' % (os.path.join('src', folder, f), shown))
    return rank


def circles(graph):
    """The sets of files that call each other around a loop (Tarjan's
    strongly connected components of the graph between files)."""
    edges = collections.defaultdict(set)
    for (f, _), targets in graph.items():
        for (g, _) in targets:
            if f != g:
                edges[f].add(g)
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            connect(v)
    return found


def name(rank, f):
    """src-relative path of file F."""
    folder = rank[f][2] if f in rank else '?'
    return os.path.join(folder, f + '.c')


def order_problems(graph, rank, problems, show=False):
    """Append to PROBLEMS each call up (the folders, or the order within a
    folder) and each circle between files of GRAPH; return the number of
    calls between each pair of folders."""
    crossings = collections.Counter()
    for (f, fn), targets in sorted(graph.items()):
        for (g, callee) in sorted(targets):
            if f == g:
                continue
            if show:
                print('%s %s -> %s %s' % (name(rank, f), fn, name(rank, g), callee))
            if f not in rank or g not in rank:
                continue
            crossings[(rank[f][2], rank[g][2])] += 1
            if rank[g][:2] < rank[f][:2]:
                where = ('up the folders' if rank[g][0] < rank[f][0]
                         else 'up the order of src/%s' % os.path.join(rank[f][2], 'README.md'))
                problems.append('call %s: %s %s -> %s %s'
                                % (where, name(rank, f), fn, name(rank, g), callee))
    for comp in circles(graph):
        calls = []
        for (f, fn), targets in sorted(graph.items()):
            for (g, callee) in sorted(targets):
                if f != g and f in comp and g in comp:
                    calls.append('%s>%s' % (fn, callee))
        problems.append('circle between %s: %s'
                        % (', '.join(name(rank, f) for f in comp), ', '.join(calls)))
    return crossings


def self_test():
    """The check on a made-up graph: a call up the folders, a call up a
    folder's order and a circle are each found; a graph going down is
    clean."""
    rank = {'top': (0, 0, ''), 'a': (1, 0, 'planner'), 'b': (1, 1, 'planner'),
            'c': (2, 0, 'executor')}
    cases = [
        ({('a', 'f'): {('b', 'g')}, ('b', 'g'): {('c', 'h')}, ('top', 'e'): {('a', 'f')}}, []),
        ({('c', 'h'): {('a', 'f')}}, ['call up the folders: executor/c.c h -> planner/a.c f']),
        ({('b', 'g'): {('a', 'f')}}, ['call up the order of src/planner/README.md']),
        ({('a', 'f'): {('b', 'g')}, ('b', 'g'): {('a', 'f2')}},
         ['call up the order', 'circle between planner/a.c, planner/b.c']),
    ]
    failed = 0
    for graph, expected in cases:
        problems = []
        order_problems(collections.defaultdict(set, graph), rank, problems)
        text = ' / '.join(problems)
        if (not expected and problems) or any(e not in text for e in expected) or \
                (expected and not problems):
            print('check_layers: self-test failed on %r: %s' % (graph, text or 'nothing found'))
            failed += 1
    print('check_layers: self-test %s' % ('failed' if failed else 'passed'))
    return 1 if failed else 0


def main():
    args = sys.argv[1:]
    if '--self-test' in args:
        return self_test()
    show = '--graph' in args
    files_walk = '--files' in args
    args = [a for a in args if a not in ('--graph', '--files')]
    trip = None
    if '--trip' in args:
        i = args.index('--trip')
        trip = args[i + 1]
        del args[i:i + 2]
    src = args[0] if args else 'src'
    problems = []
    rank = read_order(src, problems)
    graph, exported = call_graph(src)
    if trip is not None:
        return walk(graph, trip, rank, files_walk)
    crossings = order_problems(graph, rank, problems, show)
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
    for folder, f in sources(src, '.c'):
        outside.update(re.findall(r'"(\w+)"', open(os.path.join(src, folder, f + '.c')).read()))
    for fname, f in sorted(exported.items()):
        if (fname not in used_elsewhere and fname not in outside and
                fname not in ('_PG_init', 'Pg_magic_func') and
                not fname.startswith('pg_finfo_')):
            problems.append('%s (%s) is used in its file only: make it static'
                            % (fname, name(rank, f)))
    for p in problems:
        print('check_layers: ' + p)
    if not show:
        for (a, b), n in sorted(crossings.items(),
                                key=lambda x: (FOLDERS.index(x[0][0]), FOLDERS.index(x[0][1]))):
            print('  %-12s -> %-12s %4d calls' % (a or 'src/', b or 'src/', n))
    if problems:
        print('check_layers: %d problem(s)' % len(problems))
        return 1
    print('check_layers: every call between files goes down the folders and their orders; no circle')
    return 0


def walk(graph, root, rank, show_files):
    """Print the depth-first trip of the calls from ROOT (each function
    entered once) across files and folders."""
    starts = [k for k in graph if k[1] == root]
    if not starts:
        print('check_layers: no function %s' % root)
        return 1
    seen = set()
    moves = back = up = 0
    files = set()
    lines = []

    def visit(node, left, depth):
        nonlocal moves, back, up
        seen.add(node)
        files.add(node[0])
        for target in sorted(graph.get(node, ())):
            if target in seen:
                continue
            if target[0] != node[0]:
                moves += 1
                mark = ''
                if target[0] in left:
                    back += 1
                    mark = '  (back)'
                if rank.get(target[0], (0, 0))[:2] < rank.get(node[0], (0, 0))[:2]:
                    up += 1
                    mark += '  (up)'
                lines.append('%s%s %s%s' % ('  ' * (depth + 1), name(rank, target[0]),
                                            target[1], mark))
                visit(target, left | {node[0]}, depth + 1)
            else:
                visit(target, left, depth)

    sys.setrecursionlimit(10000)
    if show_files:
        lines.append('%s %s' % (name(rank, starts[0][0]), root))
    visit(starts[0], frozenset(), 0)
    if show_files:
        print('\n'.join(lines))
    print('%s: %d functions in %d files; %d moves between files, %d of them back '
          'into a file already left; %d up the order'
          % (root, len(seen), len(files), moves, back, up))
    return 0


if __name__ == '__main__':
    sys.exit(main())
