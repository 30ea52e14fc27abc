#!/usr/bin/env python3
"""Report import cycles between the modules of treecast's crates.

A module may use its descendants and anything outside it; what must not happen is two
modules that each need the other, at any level of the tree: `plan` <-> `sim` at the crate's
top, `infer::driver` <-> `infer::refine` inside `infer`. For every path a file names
(`crate::a::b`, `super::x`, `self::y`, in `use` lines and in code) the script finds the two
siblings under the paths' common ancestor and draws an edge between them; a use of an item
that a parent module re-exports (`pub use child::Item`) counts as a use of that child. Test
code (`#[cfg(test)]` modules and files) and comments are left out: a test may look across.

Usage: scripts/module-cycles.py [CRATE_SRC_DIR ...]   (default: crates/model/src src preload/src)
Exit status 1 and one line per cycle when there is one; 0 and "no cycles" otherwise.
"""

import os
import re
import sys


def module_files(src):
    """{module path tuple: file} for every .rs file under src (lib.rs/main.rs/mod.rs = parent)."""
    mods = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            if "bin" in rel[:1]:
                continue
            mods[tuple(rel)] = os.path.join(dirpath, f)
    return mods


def strip(text):
    """The file without comments, string literals and `#[cfg(test)]` modules."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s+\w+\s*(;|\{)", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        if m.group(2) == ";":
            i = m.end()
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def test_modules(text):
    return set(re.findall(r"#\[cfg\(test\)\]\s*(?:pub\s+)?mod\s+(\w+)\s*;", text))


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [tree]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    return [p2 for p in parts if p for p2 in expand_use(prefix + p)]


def paths(text):
    """Every path a file names: expanded `use` trees and `crate::`/`super::`/`self::` paths."""
    found = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        found += expand_use(m.group(1))
    found += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text)
    return [p.split(" as ")[0].split("as")[0] if " as " in p else p for p in found]


def resolve(path, here, mods):
    """The module a path names (longest known prefix), absolute, or None if outside the crate."""
    segs = [s for s in re.split(r"::", path) if s and s != "*"]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    elif segs[0] in ("super", "self"):
        base = list(here)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    else:
        return None  # an external crate or a name in scope
    full = base + segs
    for k in range(len(full), -1, -1):
        if tuple(full[:k]) in mods:
            return tuple(full[:k]), full[k:]
    return None


def reexports(mods, texts):
    """{(module, item): child module} for `pub use child::...::Item` in a module's file."""
    out = {}
    for mod, text in texts.items():
        for m in re.finditer(r"\bpub\s+use\s+([^;]+);", text):
            for p in expand_use(m.group(1)):
                item = p.split("::")[-1]
                r = resolve(p if p.startswith(("crate", "super", "self")) else "self::" + p, mod, mods)
                if r and r[0] != mod:
                    out[(mod, item)] = r[0]
    return out


def edges(src):
    mods = module_files(src)
    raw = {m: open(f, encoding="utf-8").read() for m, f in mods.items()}
    tests = set()
    for m, t in raw.items():
        for name in test_modules(t):
            tests.add(m + (name,))
    live = {m for m in mods if not any(m[: len(t)] == t for t in tests)}
    texts = {m: strip(raw[m]) for m in live}
    rex = reexports(mods, texts)
    out = set()
    for a in live:
        for p in paths(texts[a]):
            r = resolve(p, a, mods)
            if not r:
                continue
            b, rest = r
            if rest and (b, rest[0]) in rex:
                b = rex[(b, rest[0])]
            k = 0
            while k < min(len(a), len(b)) and a[k] == b[k]:
                k += 1
            if k == len(a) or k == len(b):
                continue  # a module and its own ancestor or descendant
            out.add((a[: k + 1], b[: k + 1]))
    return out


def cycles(es):
    graph = {}
    for a, b in es:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
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
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    srcs = sys.argv[1:] or [os.path.join(root, d) for d in ("crates/model/src", "src", "preload/src")]
    found = 0
    for src in srcs:
        for comp in cycles(edges(src)):
            found += 1
            names = ["::".join(m) for m in comp]
            print(f"{os.path.relpath(src, root)}: cycle between {', '.join(names)}")
    if not found:
        print("no cycles")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
