#!/usr/bin/env python3
"""The layering of src/: check_layers.py SRC_DIR DESIGN_MD

Reads the layer table and the knot table of docs/design.md ("## Layers") and the
`#include "..."` lines of every .c and .h under SRC_DIR. Fails (exit 1, one line per
problem) when a module includes a module of a higher layer, when a module is missing from
the table or the table names a module that does not exist, when the include graph has a
cycle that is not a listed knot, or when a listed knot is no longer a cycle.
"""
import os
import re
import sys
from typing import Dict, List, Set


def read_tables(design: str) -> "tuple[Dict[str, int], List[Set[str]]]":
    text = open(design, encoding="utf-8").read()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers: Dict[str, int] = {}
    knots: List[Set[str]] = []
    for line in section.splitlines():
        m = re.match(r"\|\s*L(\d+)\s[^|]*\|\s*([^|]+)\|", line)
        if m:
            for mod in m.group(2).split():
                layers[mod] = int(m.group(1))
            continue
        m = re.match(r"\|\s*([a-z_]+(?:\s+[a-z_]+)+)\s*\|\s*$", line)
        if m:
            knots.append(set(m.group(1).split()))
    return layers, knots


def read_graph(src: str) -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith((".c", ".h")):
                continue
            mod = os.path.splitext(name)[0]
            graph.setdefault(mod, set())
            for line in open(os.path.join(root, name), encoding="utf-8"):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m or m.group(1).startswith("sharc/") or m.group(1) == "config.h":
                    continue
                dep = os.path.splitext(os.path.basename(m.group(1)))[0]
                if dep != mod:
                    graph[mod].add(dep)
    return graph


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
    layers, knots = read_tables(design)
    graph = read_graph(src)
    problems = []
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
    print(f"{len(graph)} modules, {len(found)} knots, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
