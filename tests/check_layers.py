#!/usr/bin/env python3
"""The layering of src/: check_layers.py SRC_DIR DESIGN_MD

Reads the layer table and the knot table of docs/design.md ("## Layers") and the
`#include "..."` lines of every .c and .h under SRC_DIR. `x.c`, `x.h` and `x_impl.h` (the
private header of a module split over several files) are one module, x, and live in the
folder of SRC_DIR that the table gives for its layer. Fails (exit 1, one line per problem)
when a module includes a module of a higher layer, when a module is missing from the table,
sits in another folder than the table's, or the table names a module that does not exist,
when a function declared in one module's header is defined in another module's source
(a call that no include shows), when the include graph has a cycle that is not a listed
knot, or when a listed knot is no longer a cycle.
"""
import os
import re
import sys
from typing import Dict, List, Set


def read_tables(design: str) -> "tuple[Dict[str, int], Dict[str, str], List[Set[str]]]":
    text = open(design, encoding="utf-8").read()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers: Dict[str, int] = {}
    folders: Dict[str, str] = {}
    knots: List[Set[str]] = []
    for line in section.splitlines():
        m = re.match(r"\|\s*L(\d+)\s[^|]*\|\s*`?([a-z_]+)/`?\s*\|\s*([^|]+)\|", line)
        if m:
            for mod in m.group(3).split():
                layers[mod] = int(m.group(1))
                folders[mod] = m.group(2)
            continue
        m = re.match(r"\|\s*([a-z_]+(?:\s+[a-z_]+)+)\s*\|\s*$", line)
        if m:
            knots.append(set(m.group(1).split()))
    return layers, folders, knots


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(name: str) -> str:
    """`x.c`, `x.h` and `x_impl.h` (a module's private header) are module x."""
    stem = os.path.splitext(os.path.basename(name))[0]
    return stem[: -len("_impl")] if stem.endswith("_impl") else stem


def file_module(name: str, text: str) -> str:
    """module_of, and `x_part.c` is module x too when it includes x's private header: a
    module split over several files that share its handle."""
    stem = os.path.splitext(os.path.basename(name))[0]
    if name.endswith(".c"):
        for inc in INCLUDE.findall(text):
            owner = os.path.basename(inc)[: -len("_impl.h")]
            if inc.endswith("_impl.h") and stem.startswith(owner + "_"):
                return owner
    return module_of(name)


def read_graph(src: str) -> "tuple[Dict[str, Set[str]], Dict[str, Set[str]]]":
    """The include graph between modules, and the folders each module's files are in."""
    graph: Dict[str, Set[str]] = {}
    places: Dict[str, Set[str]] = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith((".c", ".cc", ".h")):
                continue
            text = open(os.path.join(root, name), encoding="utf-8").read()
            mod = file_module(name, text)
            graph.setdefault(mod, set())
            places.setdefault(mod, set()).add(os.path.relpath(root, src))
            for inc in INCLUDE.findall(text):
                if inc.startswith("sharc/") or inc == "config.h":
                    continue
                dep = module_of(inc)
                if dep != mod:
                    graph[mod].add(dep)
    return graph, places


DECL = re.compile(r"^[a-z][^;(){}#]*?\b(sharc__[a-z0-9_]+)\s*\([^;{]*\)\s*;", re.M | re.S)
DEF = re.compile(r"^[a-z][^;(){}#=]*?\b(sharc__[a-z0-9_]+)\s*\([^;{]*\)\s*\{", re.M | re.S)


def foreign_definitions(src: str) -> List[str]:
    """Functions declared in one module's headers and defined in another module's sources."""
    declared: Dict[str, Set[str]] = {}
    defined: Dict[str, str] = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith((".c", ".cc", ".h")):
                continue
            text = open(os.path.join(root, name), encoding="utf-8").read()
            mod = file_module(name, text)
            if name.endswith(".h"):
                for m in DECL.finditer(text):
                    declared.setdefault(m.group(1), set()).add(mod)
            else:
                for m in DEF.finditer(text):
                    defined.setdefault(m.group(1), mod)
    out = []
    for fn in sorted(defined):
        for mod in sorted(declared.get(fn, set()) - {defined[fn]}):
            out.append(f"{fn}: declared by module {mod} but defined in module {defined[fn]}")
    return out


def cycles(graph: Dict[str, Set[str]]) -> List[Set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[Set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    src, design = sys.argv[1], sys.argv[2]
    layers, folders, knots = read_tables(design)
    graph, places = read_graph(src)
    problems = foreign_definitions(src)
    for mod in sorted(set(graph) & set(layers)):
        if places[mod] != {folders[mod]}:
            problems.append(f"{mod}: in {', '.join(sorted(places[mod]))} of {src}, but the "
                            f"layer table puts it in {folders[mod]}/")
    for mod in sorted(set(graph) - set(layers)):
        problems.append(f"{mod}: not in the layer table of {design}")
    for mod in sorted(set(layers) - set(graph)):
        problems.append(f"{mod}: in the layer table of {design} but not in {src}")
    for mod in sorted(graph):
        for dep in sorted(graph[mod]):
            if mod in layers and dep in layers and layers[dep] > layers[mod]:
                problems.append(f"{mod} (L{layers[mod]}) includes {dep} (L{layers[dep]}), "
                                "a layer above it")
    found = cycles(graph)
    for comp in found:
        if comp not in knots:
            problems.append("include cycle: " + " ".join(sorted(comp)))
    for knot in knots:
        if knot not in found:
            problems.append("listed knot " + " ".join(sorted(knot)) + " is no longer a cycle: "
                            f"remove it from {design}")
    for p in problems:
        print(p)
    print(f"{len(graph)} modules, {len(found)} cycles, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
