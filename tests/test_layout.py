"""The package layout of src/clawgym as docs/development.md draws it: the import graph between its packages has
no cycle, every package imports only packages below it in :data:`LAYERS`, and nothing but the CLI (and
synthesis itself) imports `clawgym.synth`, the leaf wing.

The graph is built from the source with `ast`, so it counts every import: at module level, inside functions,
under ``if TYPE_CHECKING:``, relative ones. What a registry names as a lazy ``"module:attribute"`` string (the
`ray` executor in `clawgym.rollout.executor.EXECUTORS`, for one) is not an import: that is how a lower package
offers a plug-in from a higher one without depending on it.

`CLAWGYM_LAYOUT_ROOT` points the test at another tree's `src/clawgym` (an older commit's worktree, to see it fail
there)."""

from __future__ import annotations

import ast
import os
from collections import defaultdict
from pathlib import Path

ROOT = Path(os.environ.get("CLAWGYM_LAYOUT_ROOT") or Path(__file__).resolve().parents[1] / "src" / "clawgym")

# Lowest first: a package imports only packages before it. Top-level modules (httpguard, __main__) count as
# packages of their own.
LAYERS = (
    "core",  # records, errors, JSONL, taxonomy, the plug-in registry, the Hub client: imports nothing of clawgym
    "httpguard",  # the HTTP body limits shared by every server
    "checks",  # the check library and the grading contract
    "workspace",  # building workspaces from task specs
    "sandbox",  # sandbox backends (registry: clawgym.sandbox_backends)
    "serve",  # the embedded model server and the local models it loads
    "llm",  # the OpenAI-compatible client, endpoints (starting `serve` for a local model), conversation checks
    "verify",  # grading a workspace: checks, the rubric judge
    "importers",  # tasks of other formats (PinchBench, folders, the ClawGym hub)
    "rl",  # RL advantages and losses (registries: clawgym.rl_advantages, clawgym.rl_losses)
    "pool",  # the trajectory pool and its credit assignment
    "gateway",  # the recording model gateway
    "agent",  # agents and agent kinds (registry: clawgym.agents)
    "rollout",  # episodes and runs; the executor seam (registry: clawgym.executors)
    "cluster",  # the Ray executor
    "evaluation",  # benchmark suites and reports
    "train",  # SFT and RL training
    "hf",  # Hugging Face datasets of tasks and trajectories
    "view",  # the web viewer
    "skills",  # skill catalogs
    "synth",  # task synthesis: the leaf wing (registry: clawgym.synth_operations)
    "cli",
    "__main__",
)
SYNTH_IMPORTERS = {"synth", "cli"}


def _package(path: Path, root: Path) -> str:
    rel = path.relative_to(root).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _module_name(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ["clawgym", *parts]


def import_graph(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """{package: {imported package: ["file:line", ...]}} over every `.py` file under `root`."""
    top = {p.name.removesuffix(".py") for p in root.iterdir() if p.is_dir() or p.suffix == ".py"}
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(root.rglob("*.py")):
        pkg = _package(path, root)
        here = _module_name(path, root)
        is_init = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[list[str]] = []
            if isinstance(node, ast.Import):
                targets = [a.name.split(".") for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package, one level up per extra dot
                    base = here if is_init else here[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    mod = base + (node.module.split(".") if node.module else [])
                else:
                    mod = node.module.split(".") if node.module else []
                # `from clawgym import httpguard`: the names are modules of the root package
                targets = [mod + [a.name] for a in node.names] if mod == ["clawgym"] else [mod]
            for target in targets:
                if len(target) < 2 or target[0] != "clawgym" or target[1] not in top or target[1] == pkg:
                    continue
                graph[pkg][target[1]].append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
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

    for v in sorted(set(graph) | {w for edges in graph.values() for w in edges}):
        if v not in index:
            visit(v)
    return out


def _where(graph: dict[str, dict[str, list[str]]], src: str, dst: str) -> str:
    sites = graph[src][dst]
    return f"{src} -> {dst} ({', '.join(sites[:3])}{', ...' if len(sites) > 3 else ''})"


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """The graph builder itself, on a small tree: module level, inside a function, TYPE_CHECKING, relative,
    `from clawgym import module`."""
    root = tmp_path / "clawgym"
    for pkg in ("a", "b", "c", "d", "e"):
        (root / pkg).mkdir(parents=True)
        (root / pkg / "__init__.py").write_text("")
    (root / "mod.py").write_text("")
    (root / "a" / "x.py").write_text(
        "from typing import TYPE_CHECKING\nimport clawgym.b.y\nif TYPE_CHECKING:\n    from clawgym.c import z\n"
        "def f():\n    from ..d import w\n    from clawgym import mod\n")
    (root / "e" / "__init__.py").write_text("from .sub import thing\nfrom ..a import x\n")
    g = import_graph(root)
    assert sorted(g["a"]) == ["b", "c", "d", "mod"]
    assert sorted(g["e"]) == ["a"]  # `.sub` is e's own
    assert cycles({"a": {"b": []}, "b": {"a": []}, "c": {"a": []}}) == [["a", "b"]]


def test_every_package_has_a_layer():
    top = {_package(p, ROOT) for p in ROOT.rglob("*.py")} - {"__init__"}
    assert top <= set(LAYERS), f"packages missing from LAYERS (and docs/development.md): {sorted(top - set(LAYERS))}"


def test_no_cycle_between_packages():
    graph = import_graph()
    found = cycles(graph)
    rank = {name: i for i, name in enumerate(LAYERS)}
    # the edges of a cycle that go up the layers: the imports to remove
    up = [_where(graph, a, b) for comp in found for a in comp for b in comp
          if b in graph.get(a, {}) and rank.get(b, -1) > rank.get(a, -1)]
    assert not found, f"import cycles between packages: {found}; upward edges in them:\n" + "\n".join(up)


def test_packages_import_only_packages_below_them():
    graph = import_graph()
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = [_where(graph, src, dst) for src in sorted(graph) for dst in sorted(graph[src])
              if rank.get(dst, -1) >= rank.get(src, len(LAYERS))]
    assert not upward, "imports of a package at or above the importer's layer:\n" + "\n".join(upward)


def test_only_the_cli_imports_synthesis():
    graph = import_graph()
    bad = [_where(graph, src, "synth") for src in sorted(graph) if "synth" in graph[src] and src not in SYNTH_IMPORTERS]
    assert not bad, "clawgym.synth imported from outside synth and cli:\n" + "\n".join(bad)


def test_the_docs_draw_the_same_layers():
    """docs/development.md's layer order is this test's."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "development.md").read_text(encoding="utf-8")
    start = text.index("core < ")
    drawn = " ".join(text[start:text.index("```", start)].split()).split(" < ")
    assert drawn == [name for name in LAYERS if name != "__main__"]
