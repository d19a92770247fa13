"""The package's shape, read from the source (ast), so it stays as docs/architecture.md
draws it: no import cycle, and no import that climbs a layer.

Every module belongs to a layer (the longest matching prefix in LAYERS); a module imports
only from its own layer or lower ones, function-level and TYPE_CHECKING imports included.
Within a layer any import is allowed as long as no cycle forms."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import REPO

PKG = REPO / "gpudiag"

#: Lowest first. A module's layer is that of the longest prefix listed.
LAYERS: tuple[tuple[str, ...], ...] = (
    # shared leaves
    ("gpudiag", "gpudiag.errors", "gpudiag.devnames", "gpudiag.markdown", "gpudiag.ui"),
    # the contract (every name on disk) and safe writing
    ("gpudiag.layout", "gpudiag.files"),
    # the typed records that cross a process boundary (children, the user's program, the
    # parent's verdicts all read them)
    ("gpudiag.records",),
    # core services: report records and the reader of a run directory, process handling,
    # NVML, TensorBoard, readers of TensorFlow's output, the catalogue of its messages
    ("gpudiag.report", "gpudiag.reportmd", "gpudiag.rundir", "gpudiag.procs", "gpudiag.nvml",
     "gpudiag.tb", "gpudiag.readers", "gpudiag.catalogue", "gpudiag.fixes"),
    # what runs in children (probes and their workload, the code inside the user's
    # program)
    ("gpudiag.probes", "gpudiag.train", "gpudiag.inprogram", "gpudiag.examples"),
    # pure judging
    ("gpudiag.verdicts",),
    # a command's session
    ("gpudiag.session",),
    # orchestration of each area
    ("gpudiag.run", "gpudiag.cluster", "gpudiag.scaling"),
    # one module per command
    ("gpudiag.commands",),
    # the library: the commands' bodies as functions that return a Run (no CLI, no rich)
    ("gpudiag.api",),
    # the command line, and `gpudiag mcp`'s server (a face of the library, like the CLI)
    ("gpudiag.execute", "gpudiag.cliopts", "gpudiag.cli", "gpudiag.__main__", "gpudiag.mcp"),
    # the TensorBoard plugin: a view of runs and diffs, like the command line
    ("gpudiag.tbplugin",),
    # the notebook: watch() and %%gpudiag run `run`'s hooks and analysis in the kernel
    ("gpudiag.notebook",),
)


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rsplit(".", 1)[0] if "." in name else ""
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the gpudiag modules it imports (a package's imports of its own
    submodules, and a submodule's of its package, are not edges)."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src
                           for a in node.names]
            for target in targets:
                if target.split(".")[0] != "gpudiag":
                    continue
                found = _resolve(target, mods)
                if (found and found != mod and not found.startswith(mod + ".")
                        and not mod.startswith(found + ".")):
                    edges[mod].add(found)
    return edges


def layer_of(module: str) -> int:
    best, rank = "", -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, rank = prefix, i
    assert rank >= 0, f"{module} is in no layer: add it to LAYERS"
    return rank


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_no_import_climbs_a_layer() -> None:
    upward = sorted(f"{m} -> {t}" for m, targets in import_graph().items() for t in targets
                    if layer_of(t) > layer_of(m))
    assert upward == []


def test_the_checks_see_a_cycle_and_a_climb() -> None:
    """The two checks above can fail: a made-up graph with both."""
    edges = {"gpudiag.verdicts.a": {"gpudiag.session"}, "gpudiag.session": {"gpudiag.report"},
             "gpudiag.report": {"gpudiag.session"}}
    assert cycles(edges) == [["gpudiag.report", "gpudiag.session"]]
    assert layer_of("gpudiag.session") > layer_of("gpudiag.verdicts.a")


def test_top_level_holds_the_cli_the_session_core_and_shared_leaves() -> None:
    top = sorted(p.stem for p in PKG.glob("*.py"))
    assert len(top) <= 12, top


def test_no_package_cycle() -> None:
    """The packages (gpudiag.<package>) form no loop either: a module's imports lifted to
    its package; top-level modules are the command line's and the shared leaves'."""
    edges: dict[str, set[str]] = {}
    for mod, targets in import_graph().items():
        src = _package(mod)
        edges.setdefault(src, set())
        for target in targets:
            dst = _package(target)
            if dst != src and "gpudiag" not in (src, dst):
                edges[src].add(dst)
    for node in {d for ds in edges.values() for d in ds}:
        edges.setdefault(node, set())
    assert cycles(edges) == []


def _package(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "gpudiag"
    return parts[1] if len(parts) > 2 or PKG.joinpath(parts[1]).is_dir() else "gpudiag"


def test_architecture_md_draws_these_layers() -> None:
    """docs/architecture.md's numbered list under "Layers" names LAYERS' packages, in
    order (short names, the package root as `gpudiag`)."""
    text = (PKG.parent / "docs/architecture.md").read_text()
    section = text[text.index("## Layers"):text.index("## Where new work goes")]
    items = re.findall(r"^\d+\. (.+?)(?=^\d+\. |^\s*$)", section, re.M | re.S)
    assert len(items) == len(LAYERS)
    for item, prefixes in zip(items, LAYERS, strict=True):
        named = set(re.findall(r"[A-Za-z_]\w*(?:\.\w+)*", item.split(":", 1)[1]))
        short = {p if p == "gpudiag" else p.removeprefix("gpudiag.") for p in prefixes}
        assert short <= named, (item, short)


#: Functions allowed over the line limit, with the reason (none today). ruff has no rule for
#: a function's lines; its C901, PLR0912, PLR0913 and PLR0915 (pyproject.toml) hold the
#: rest of a function's size: paths, branches, parameters (at most 8) and statements.
LONG_FUNCTION_EXCEPTIONS: dict[str, str] = {}
MAX_LINES = 80


def oversized_functions() -> list[str]:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            where = f"{path.relative_to(PKG.parent)}:{node.name}"
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_LINES and where not in LONG_FUNCTION_EXCEPTIONS:
                found.append(f"{where} ({lines} lines)")
    return found


def test_no_function_over_80_lines() -> None:
    assert oversized_functions() == []


#: A module a reader holds: at most this many lines. A module that outgrows it is split by
#: subject (never by counting lines), as the seventeen over it were (issue 44).
MAX_MODULE_LINES = 400


def oversized_modules() -> list[str]:
    found = []
    for path in sorted(PKG.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(PKG.parent)} ({lines} lines)")
    return found


def test_no_module_over_400_lines() -> None:
    assert oversized_modules() == []
