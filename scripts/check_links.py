#!/usr/bin/env python3
"""check_links.py: every relative link of the project's Markdown files leads
somewhere: the file exists and, for a link with #anchor, the file has a
heading of that anchor (GitHub's rule: lower case, punctuation dropped,
spaces to hyphens).  Web links are not followed.  Exit status 1 on a broken
link.

Usage: scripts/check_links.py [ROOT]      (default: the current directory)
"""
import glob
import os
import re
import sys

LINK = re.compile(r'(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')


def anchors(path):
    """The anchors of the headings of the Markdown file PATH."""
    seen = {}
    out = set()
    in_code = False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            in_code = not in_code
        if in_code:
            continue
        m = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        text = re.sub(r'`|\*\*?|_(?=\w)|(?<=\w)_', '', m.group(1))
        text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)
        a = re.sub(r'[^\w\- ]', '', text.lower()).replace(' ', '-')
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else '%s-%d' % (a, n))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    files = [f for f in glob.glob(os.path.join(root, '**', '*.md'), recursive=True)
             if '/.git/' not in f and '/results/' not in f]
    bad = 0
    cache = {}
    for f in sorted(files):
        text = open(f, encoding='utf-8').read()
        text = re.sub(r'```.*?```', '', text, flags=re.S)
        text = re.sub(r'`[^`\n]*`', '', text)
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r'[a-z]+:', target):
                continue
            path, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(dest):
                print('%s: link to %s: no such file' % (os.path.relpath(f, root), target))
                bad += 1
                continue
            if anchor and dest.endswith('.md'):
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if anchor not in cache[dest]:
                    print('%s: link to %s: no such heading' % (os.path.relpath(f, root), target))
                    bad += 1
    if bad:
        print('check_links: %d broken link(s)' % bad)
        return 1
    print('check_links: %d files, every relative link leads somewhere' % len(files))
    return 0


if __name__ == '__main__':
    sys.exit(main())
