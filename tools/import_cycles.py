#!/usr/bin/env python3
"""Module-level import graph of a crate's src/ (use crate::..., super::..., crate:: paths in code), and its cycles."""
import os, re, sys
root = sys.argv[1]
mods = {}
for dp, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, root)[:-3].split(os.sep)
            if rel[-1] in ('mod', 'lib'):
                rel = rel[:-1]
            mods['::'.join(rel)] = p
def resolve(cur, path):
    parts = path.split('::')
    if parts[0] == 'crate':
        parts = parts[1:]; base = []
    elif parts[0] == 'super':
        base = cur.split('::') if cur else []
        # file module: super = parent
        while parts and parts[0] == 'super':
            base = base[:-1]; parts = parts[1:]
    elif parts[0] == 'self':
        base = cur.split('::') if cur else []; parts = parts[1:]
    else:
        return None
    full = base + parts
    while full:
        k = '::'.join(full)
        if k in mods: return k
        full = full[:-1]
    return None
edges = {m: set() for m in mods}
for m, p in mods.items():
    src = open(p).read()
    src = re.sub(r'#\[cfg\(test\)\]\s*mod tests\s*\{.*', '', src, flags=re.S)
    src = re.sub(r'^\s*//.*$', '', src, flags=re.M)
    for mt in re.finditer(r'\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)', src):
        t = resolve(m, mt.group(1))
        if t is not None and t != m:
            edges[m].add(t)
    for mt in re.finditer(r'use\s+(crate|super)::\{([^;]*)\};', src, flags=re.S):
        for item in re.findall(r'([A-Za-z_][A-Za-z0-9_:]*)', mt.group(2)):
            t = resolve(m, mt.group(1) + '::' + item)
            if t is not None and t != m:
                edges[m].add(t)
# Tarjan SCC
idx = {}; low = {}; st = []; on = set(); sccs = []; i = [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = i[0]; i[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in mods:
    if v not in idx: sc(v)
print(f"{len(mods)} modules, {sum(len(e) for e in edges.values())} edges, {len(sccs)} cycle(s)")
for c in sccs:
    print(f"  cycle through {len(c)}: {', '.join(c)}")
    for v in c:
        print(f"    {v} -> {', '.join(sorted(w for w in edges[v] if w in c))}")
