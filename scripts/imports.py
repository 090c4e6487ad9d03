#!/usr/bin/env python3
"""greenup's import structure, read from the source: which file of a crate uses which,
and every circle among them, file by file and between a crate's top-level modules.

Usage: python3 scripts/imports.py [CRATE_SRC_DIR ...]   (default: every crate's src/)
Exit status 1 when a crate has a circle. Test code (`#[cfg(test)] mod tests`) is left
out: a test may reach anywhere.
"""
import os
import re
import sys

# The decision library's layers, bottom first (docs/architecture.md): a top-level module
# may import from its own layer or below, never from above.
LAYERS = {
    "crates/greenup/src": [
        ["expr", "names", "hostlist", "input", "users", "units", "dvfs", "meter"],
        ["model"],
        ["optimize", "comm"],
        ["policy"],
        ["budget", "site"],
        ["power"],
        ["record", "query"],
        ["profile"],
        ["plan"],
        ["slurm", "report", "gpu_start"],
    ],
}

REF = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)(::\{([^}]*)\})?")


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


def strip_tests(text):
    i = text.find("#[cfg(test)]")
    return text if i < 0 else text[:i]


def refs(mod, text):
    """Module paths this file refers to (as written, before resolving to a file)."""
    out = []
    text = re.sub(r"//[^\n]*", "", text)
    for m in REF.finditer(text):
        base = list(mod) if m.group(1) == "super" else []
        if m.group(1) == "super":
            base = base[:-1]
        parts = base + m.group(2).strip(":").split("::")
        out.append(tuple(parts))
        if m.group(4):
            for name in m.group(4).split(","):
                name = name.strip().split(" as ")[0].split("::")[0]
                if name and name != "self":
                    out.append(tuple(parts + [name]))
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
    files, tops = {}, {}
    for mod, path in mods.items():
        for r in refs(mod, strip_tests(open(path, encoding="utf-8").read())):
            to = resolve(r, mods)
            if to is None or to == mod or (to and mod[: len(to)] == to):
                continue  # itself, or a parent module (its re-exports)
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
