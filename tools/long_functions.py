#!/usr/bin/env python3
"""Functions longer than N lines (signature to closing brace) in the given directories' .rs files."""
import os, re, sys
limit = int(sys.argv[1]); roots = sys.argv[2:]
fn_re = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)')
found = []
for root in roots:
    for dp, _, fs in os.walk(root):
        if '/tests' in dp or 'target' in dp: continue
        for f in fs:
            if not f.endswith('.rs'): continue
            p = os.path.join(dp, f); lines = open(p).read().split('\n')
            i = 0
            while i < len(lines):
                m = fn_re.match(lines[i])
                if m and not lines[i].rstrip().endswith(';'):
                    depth = 0; started = False; j = i
                    while j < len(lines):
                        code = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j])
                        code = re.sub(r"'(\\.|[^'\\])'", "''", code)
                        code = code.split('//')[0]
                        for ch in code:
                            if ch == '{': depth += 1; started = True
                            elif ch == '}': depth -= 1
                        if started and depth <= 0: break
                        if not started and code.rstrip().endswith(';'): break
                        j += 1
                    n = j - i + 1
                    if started and n > limit: found.append((n, p, i + 1, m.group(6)))
                i += 1
for n, p, l, name in sorted(found, reverse=True):
    print(f"{n:4} {p}:{l} {name}")
