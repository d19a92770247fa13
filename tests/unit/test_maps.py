"""The maps stay true: every module the code's docstrings and docs/ name exists, every
package's docstring lists its modules, and docs/findings.md is the one table of finding
ids, checked against the ids the code produces (read from the source, no import)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import REPO

import gpudiag

PKG = REPO / "gpudiag"
DOCS = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
#: The code that makes findings (the registry of their families names every id: it is held
#: to docs/findings.md by tests/unit/test_families.py, not here).
SOURCES = sorted(p for p in PKG.rglob("*.py") if p != PKG / "layout" / "families.py")

#: A finding id: the command, then dotted words; f-string holes read as ``<>``.
_ID = re.compile(r"^(?:env|placement|memory|scaling|monitor|run|cluster|explain|worker|diff)"
                 r"\.[a-z][a-z0-9-]*(?:\.(?:[a-z0-9-]|<>)+)*(?:<>|\.)?$")
_FILE_LIKE = re.compile(r"\.(?:md|py|json|jsonl|png|txt|pb)$")


def _modules() -> set[str]:
    mods = set()
    for path in SOURCES:
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods.add(".".join(parts))
    return mods


def public_names() -> set[str]:
    """The package root's ``__all__`` (the library's names: ``gpudiag.explain``, ...),
    read from its source."""
    for node in ast.parse((PKG / "__init__.py").read_text()).body:
        if (isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)):
            return set(ast.literal_eval(node.value))
    return set()


def stale_references(texts: dict[str, str], mods: set[str]) -> list[str]:
    """``gpudiag.x.y`` names whose module part resolves to nothing (``gpudiag.<name>`` of
    the root's ``__all__`` aside), and ``gpudiag/...py`` paths (or ``<package>/<module>.py``
    with a gpudiag package first) that do not exist."""
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    public = public_names()
    stale = []
    for where, text in texts.items():
        for ref in re.findall(r"\bgpudiag(?:\.[A-Za-z_]\w*)+", text):
            parts = ref.split(".")
            if any(p.startswith("__") for p in parts) or parts[1] in public:
                continue
            if hasattr(gpudiag, parts[1]):  # the package's own public names (gpudiag.watch)
                continue
            if not any(".".join(parts[:k]) in mods for k in range(2, len(parts) + 1)):
                stale.append(f"{where}: {ref}")
        for ref in re.findall(r"(?<![\w/.])((?:gpudiag/)?([a-z_]+)/[\w/]+\.py)\b", text):
            path, first = ref
            if path.startswith("gpudiag/"):
                if not (REPO / path).exists():
                    stale.append(f"{where}: {path}")
            elif first in packages and not (PKG / path).exists():
                stale.append(f"{where}: {path}")
    return stale


def test_every_module_named_in_docstrings_and_docs_exists() -> None:
    texts = {str(p.relative_to(REPO)): p.read_text() for p in [*SOURCES, *DOCS]}
    assert stale_references(texts, _modules()) == []


def test_the_reference_check_sees_a_stale_name() -> None:
    mods = _modules()
    texts = {"a.md": "see gpudiag.traces.read_events and gpudiag/child.py and "
                     "run/placementwindow.py and gpudiag.explian(path)",
             "b.md": "gpudiag.readers.traces is fine, and so is gpudiag.explain(path)"}
    assert stale_references(texts, mods) == [
        "a.md: gpudiag.traces.read_events", "a.md: gpudiag.explian",
        "a.md: gpudiag/child.py", "a.md: run/placementwindow.py"]


def _docstring_words(init: Path) -> set[str]:
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    return set(re.findall(r"[A-Za-z_]\w*", doc))


def undocumented_modules() -> list[str]:
    missing = []
    for init in sorted(PKG.rglob("__init__.py")):
        folder = init.parent
        if folder == PKG:
            continue  # the root's modules are drawn in docs/design.md
        words = _docstring_words(init)
        members = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
        members += [p.name for p in folder.iterdir()
                    if p.is_dir() and (p / "__init__.py").exists()]
        missing += [f"{folder.relative_to(REPO)}: {m}" for m in sorted(members)
                    if m not in words]
    return missing


def test_every_package_docstring_lists_its_modules() -> None:
    assert undocumented_modules() == []


def code_finding_ids() -> dict[str, str]:
    """Every string in the source that reads as a finding id, with where it stands."""
    found: dict[str, str] = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            text = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "<>"
                               for v in node.values)
            if text and _ID.match(text) and not _FILE_LIKE.search(text):
                found.setdefault(text, str(path.relative_to(REPO)))
    return found


def documented_finding_ids() -> list[str]:
    """The ids in docs/findings.md's tables: ``a`` / ``b`` in one cell, ``[.<x>]`` optional
    parts and ``<placeholders>`` as ``<>``."""
    ids = []
    for cell in re.findall(r"^\| (`[^|]+) \|", (REPO / "docs/findings.md").read_text(), re.M):
        for one in re.findall(r"`([^`]+)`", cell):
            if not _ID.match(re.sub(r"<[^>]*>", "<>", one.replace("[", "").replace("]", ""))):
                continue  # an aside in the cell (`worker`: `.<task>`), not an id
            ids.append(re.sub(r"<[^>]*>", "<>", one.replace("[", "").replace("]", "")))
    return ids


def _pattern(doc_id: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(doc_id).replace("<>", "[^.]+") + "$")


def _stem(code_id: str) -> str:
    """The fixed part of an id built at run time: ``run.devices<>`` -> ``run.devices``."""
    return code_id.split("<>")[0].rstrip(".")


def test_findings_md_is_one_table_per_id() -> None:
    ids = documented_finding_ids()
    assert sorted({i for i in ids if ids.count(i) > 1}) == []


def test_every_finding_the_code_makes_is_documented() -> None:
    documented = documented_finding_ids()
    missing = [f"{cid} ({where})" for cid, where in code_finding_ids().items()
               if not any(_stem(cid) == _stem(d) or _pattern(d).match(_stem(cid))
                          or d.startswith(_stem(cid) + ".") for d in documented)]
    assert missing == []


def test_every_documented_finding_is_made_by_the_code() -> None:
    code = code_finding_ids()
    stems = {_stem(c) for c in code}
    orphans = [d for d in documented_finding_ids()
               if _stem(d) not in stems and not any(_pattern(d).match(s) for s in stems)
               and not any(_stem(d).startswith(s + ".") for s in stems
                           if s.endswith((".bottleneck", ".scaling")))]
    assert orphans == []


def broken_links(pages: list[Path]) -> list[str]:
    """Relative markdown links (``[text](path#anchor)``) in ``pages`` whose file does not
    exist (web addresses and in-page anchors aside)."""
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            path = target.split("#", 1)[0]
            if not path or re.match(r"^[a-z]+:", path):
                continue
            if not (page.parent / path).exists():
                where = page.relative_to(REPO) if page.is_relative_to(REPO) else page.name
                broken.append(f"{where}: {target}")
    return broken


def test_every_link_in_the_docs_and_the_readme_resolves() -> None:
    pages = [*DOCS, REPO / "benchmarks" / "RESULTS.md"]
    assert broken_links(pages) == []


def test_the_link_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    page.write_text("[ok](a.md) [web](https://x.org/y) [here](#top) [gone](docs/gone.md#x)")
    assert broken_links([page]) == ["a.md: docs/gone.md#x"]
