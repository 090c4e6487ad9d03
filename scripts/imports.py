#!/usr/bin/env python3
"""greenup's import structure, read from the source: which file of a crate uses which,
and every circle among them, file by file and between a crate's top-level modules.

Usage: python3 scripts/imports.py [CRATE_SRC_DIR ...]   (default: every crate's src/)
Exit status 1 when a crate has a circle, or the library an import up its layers or a
call outside its tests that writes a file or starts a process (PURE).

Every file is read whole, comments and string and char literals blanked out. Only the
bodies of `#[cfg(test)]` modules (found by matching braces) and the files of
`#[cfg(test)] mod NAME;` are left out: a test may reach anywhere. An import is every
path a `use` names (`pub use`, nested groups `crate::a::{b, c::{d}}`, `self`, `super::`,
aliases, globs) and every path written inline from `crate::`, `super::` or `self::`, or
through one of the module's own child modules (`book::Totals` in budget/mod.rs). A
module's use of its own ancestors (the crate root included) is not counted: a parent
holds its children's re-exports. tests/structure.rs plants back-imports in a copy of a
crate, in each of these forms, and expects this check to fail.
"""
import os
import re
import sys

# The decision library's layers, bottom first (docs/architecture.md): a top-level module
# may import from its own layer or below, never from above.
LAYERS = {
    "crates/greenup/src": [
        ["expr", "names", "hostlist", "input", "units"],
        ["model"],
        ["optimize", "comm"],
        ["policy"],
        ["budget", "site"],
        ["power"],
        ["record", "query"],
        ["profile"],
        ["plan"],
        ["slurm", "report"],
    ],
}

# Crates that decide and never act (docs/architecture.md): outside their tests they name
# no call that writes, removes or renames a file or starts a process. What such a crate
# decides to write it returns as data (`greenup_core::fs::FileWrite`), and greenupd or a
# command writes it.
PURE = ["crates/greenup/src"]
ACTS = re.compile(r"(?<![\w$])(write_atomic\w*|write_files|remove_if_present|fs\s*::\s*(?:write|create_dir\w*|remove_\w+|rename|set_permissions|hard_link)"
                  r"|File\s*::\s*create\w*|OpenOptions|Command\s*::\s*new)(?![\w$])")

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# A `use` item, `pub`, `pub(crate)` and `pub(in path)` included; its tree runs to the `;`.
USE = re.compile(r"(?<![\w$])(?:pub\s*(?:\([^)]*\)\s*)?)?use\s+([^;]*);")
# A path written inline, in code or in a use tree: `crate::x::y()`, `super::super::x`.
INLINE = re.compile(r"(?<![\w$:])(crate|super|self)((?:\s*::\s*" + IDENT + r")+)")


def module_files(src):
    """Map module path (tuple) -> file, for one crate's src/ directory."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel[0] == "bin":
                continue
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            mods[tuple(rel)] = path
    return mods


def blank(text):
    """The source with comments, string literals and char literals blanked out (their
    bytes become spaces, newlines kept), so braces and paths inside them do not count."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif re.match(r'b?r#*"', text[i:i + 260]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', '{'), not a lifetime ('a, 'static).
            m = re.match(r"'(?:\\(?:u\{[0-9A-Fa-f]+\}|x[0-9A-Fa-f]{2}|.)|[^\\'\n])'", text[i:])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#!?\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*([{;])")


def strip_tests(text):
    """`text` (already blanked) without the bodies of its `#[cfg(test)]` modules, found
    by matching braces; everything else is read, however far down the file it is."""
    out, i = [], 0
    while True:
        m = TEST_MOD.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:m.start()])
        j = m.end()
        if m.group(1) == "{":
            depth = 1
            while j < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
        i = j


def test_module_files(src, mods):
    """Files that are `#[cfg(test)] mod NAME;` of their parent: test code, left out."""
    out = set()
    for mod, path in mods.items():
        text = blank(open(path, encoding="utf-8").read())
        for m in TEST_MOD.finditer(text):
            if m.group(1) == ";":
                name = re.search(r"mod\s+(" + IDENT + r")\s*;$", m.group(0)).group(1)
                out.add(mod + (name,))
    return out


def use_paths(tree):
    """Every path a use tree names: `a::{b, c::{d, e as f}, self}` gives a::b, a::c::d,
    a::c::e and a (each a list of segments); a glob names its prefix."""
    toks = re.findall(IDENT + r"|::|[{},*]", tree)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        pos[0] += 1
        return toks[pos[0] - 1]

    def parse(prefix):
        path = list(prefix)
        if peek() == "::":  # a leading `::`: another crate
            take()
            path.append("::")
        while True:
            t = peek()
            if t == "{":
                take()
                out = []
                while peek() not in (None, "}"):
                    out += parse(path)
                    if peek() == ",":
                        take()
                if peek() == "}":
                    take()
                return out
            if t == "*":
                take()
                return [path]
            if t is None or t in (",", "}"):
                return [path]
            seg = take()
            if seg == "as":
                take()  # the alias
                return [path]
            if seg == "self" and path:
                pass  # `a::{self}` names `a`
            else:
                path.append(seg)
            if peek() == "::":
                take()
            elif peek() == "as":
                take()
                if peek() not in (None, ",", "}"):
                    take()
                return [path]
            else:
                return [path]

    out = []
    while pos[0] < len(toks):
        before = pos[0]
        out += parse([])
        if peek() == ",":
            take()
        if pos[0] == before:
            take()
    return out


def absolute(mod, path, mods):
    """`path` as written in module `mod`, as a module path from the crate root; None for
    another crate's."""
    if not path or path[0] == "::":
        return None
    path = list(path)
    if path[0] == "crate":
        return tuple(path[1:])
    base = list(mod)
    if path[0] == "self":
        return tuple(base + path[1:])
    if path[0] == "super":
        while path and path[0] == "super":
            base, path = base[:-1], path[1:]
        return tuple(base + path)
    # A path that starts with a child module's name (2018 edition's relative paths).
    if tuple(base + path[:1]) in mods:
        return tuple(base + path)
    return None


def refs(mod, text, mods):
    """Module paths this file refers to (as written, before resolving to a file): every
    `use` tree's paths, every path written inline from `crate`, `super` or `self`, and
    every inline path through one of the module's own child modules."""
    out = []
    for m in USE.finditer(text):
        for p in use_paths(m.group(1)):
            a = absolute(mod, p, mods)
            if a is not None:
                out.append(a)
    code = USE.sub(lambda m: " " * len(m.group(0)), text)
    for m in INLINE.finditer(code):
        p = [m.group(1)] + re.findall(IDENT, m.group(2))
        a = absolute(mod, p, mods)
        if a is not None:
            out.append(a)
    children = {k[-1] for k in mods if len(k) == len(mod) + 1 and k[:-1] == mod}
    if children:
        child = re.compile(r"(?<![\w$:])(" + "|".join(sorted(children)) + r")((?:\s*::\s*" + IDENT + r")+)")
        for m in child.finditer(code):
            out.append(tuple(mod) + (m.group(1),) + tuple(re.findall(IDENT, m.group(2))))
    return out


def resolve(path, mods):
    while path and path not in mods:
        path = path[:-1]
    return path if path in mods else None


def circles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def crate(src):
    mods = module_files(src)
    for t in test_module_files(src, mods):
        mods.pop(t, None)
    files, tops = {}, {}
    pure = any(os.path.normpath(src).endswith(k) for k in PURE)
    acts = []
    for mod, path in mods.items():
        text = strip_tests(blank(open(path, encoding="utf-8").read()))
        if pure:
            acts += [(path, text.count("\n", 0, m.start()) + 1, re.sub(r"\s+", "", m.group(1)))
                     for m in ACTS.finditer(text)]
        for r in refs(mod, text, mods):
            to = resolve(r, mods)
            if to is None or mod[: len(to)] == to:
                continue  # itself, or a parent module (the crate root included)
            files.setdefault(mod, set()).add(to)
            if mod and to and mod[0] != to[0]:
                tops.setdefault(mod[0], set()).add(to[0])
    name = lambda m: "::".join(m) or "(root)"
    file_circles = circles(mods.keys(), files)
    top_circles = circles({m[0] for m in mods if m}, tops)
    edges = sum(len(v) for v in files.values())
    print(f"{src}: {len(mods)} modules, {edges} imports between them, "
          f"{len(file_circles)} circles of modules, {len(top_circles)} circles of top-level modules")
    for c in file_circles:
        print("  circle: " + " <-> ".join(name(m) for m in c))
    for c in top_circles:
        back = [f"{a} -> {b}" for a in c for b in sorted(tops.get(a, ())) if b in c]
        print("  top-level circle: " + ", ".join(back))
    bad = len(file_circles) + len(top_circles)
    if pure:
        print(f"  {len(acts)} acts (file writes or processes) outside tests")
        for path, line, what in acts:
            print(f"  acts: {path}:{line}: {what} (a deciding crate returns what to write)")
        bad += len(acts)
    layers = next((v for k, v in LAYERS.items() if os.path.normpath(src).endswith(k)), None)
    if layers:
        level = {m: i for i, layer in enumerate(layers) for m in layer}
        up = [(a, b) for a in sorted(tops) for b in sorted(tops[a])
              if level.get(a, -1) < level.get(b, -1) or a not in level or b not in level]
        print(f"  {sum(len(v) for v in tops.values())} imports between top-level modules, "
              f"{len(up)} up the layers")
        for a, b in up:
            print(f"  up the layers (or a module missing from LAYERS): {a} -> {b}")
        bad += len(up)
    return bad


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # Bottom layers first, then the rest of crates/, the plugin, the runtime and the
    # CLI (its modules are src/bin/greenup/; greenupd is one file).
    low = ["crates/core", "crates/comm", "crates/platform"]
    dirs = low + sorted("crates/" + c for c in os.listdir(os.path.join(here, "crates"))
                        if "crates/" + c not in low)
    srcs = sys.argv[1:] or [
        os.path.join(here, d)
        for d in [d + "/src" for d in dirs + ["plugin", "runtime"]] + ["src/bin/greenup"]
        if os.path.isdir(os.path.join(here, d))
    ]
    bad = sum(crate(os.path.normpath(s)) for s in srcs)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
