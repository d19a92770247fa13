"""docs/findings.md, written from the finding registry (gpudiag.layout.families: every
family's id, in its order, with its question and its evidence record) and the prose of
each family in scripts/findings.toml.

    python scripts/findings_doc.py          # writes docs/findings.md
    python scripts/findings_doc.py --check  # exit 1 when docs/findings.md is not current

tests/unit/test_findings_doc.py holds the page to what this writes. Imports no TensorFlow.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpudiag.layout.families import FAMILIES, QUESTIONS, Family  # noqa: E402

TEXT = REPO / "scripts" / "findings.toml"
PAGE = REPO / "docs" / "findings.md"

STATUSES = """| status | meaning | exit code |
|---|---|---|
| ok | the check passed | 0 |
| warn | works, but not the way a GPU user wants (e.g. no GPU here) | 0 |
| fail | the check failed; the message says what and the evidence shows it | 1 (`run` and \
`monitor`: only with `--strict`; they end with the program's own code) |
| skip | the check could not run here; the message says why (never a pass) | 0 |"""


def command_of(family: Family) -> str:
    """The section a family's row stands in: the id's first word (``<command>``: any)."""
    return family.id.split(".", 1)[0]


def prose_problems(text: dict[str, Any]) -> list[str]:
    """Families without prose and prose without a family, each said once."""
    ids = [f.id for f in FAMILIES]
    written = list(text.get("family", {}))
    return ([f"no entry in scripts/findings.toml for {i}" for i in ids if i not in written]
            + [f"scripts/findings.toml: {i} is no family of gpudiag.layout.families"
               for i in written if i not in ids])


def _row(family: Family, entry: dict[str, str]) -> str:
    cell = f"`{family.id}{entry.get('suffix', '')}`"
    if "aside" in entry:
        cell += " " + entry["aside"]
    question = f"{family.question}"
    if family.evidence:
        question += f" (`{family.evidence}`)"
    return f"| {cell} | {question} | {entry['checks']} | {entry['not_ok']} |"


def render(text: dict[str, Any]) -> str:
    """The whole page, from the registry's order and the prose."""
    sections: dict[str, list[Family]] = {}
    for family in FAMILIES:
        sections.setdefault(command_of(family), []).append(family)
    order = ["<command>", *[c for c in sections if c != "<command>"]]
    questions = ", ".join(f"`{q}` ({words})" for q, words in QUESTIONS.items())
    out = ["# Findings", "",
           "<!-- Written by scripts/findings_doc.py from gpudiag/layout/families.py and "
           "scripts/findings.toml: edit those, then run it. -->", "",
           text["intro"]["text"], "",
           f"The questions, in the order the terminal and the tab ask them: {questions}.", "",
           STATUSES, "",
           text["intro"]["no_gpu"], ""]
    for command in order:
        section = text["section"][command]
        out += [f"## {section['title']}", ""]
        if section.get("text"):
            out += [section["text"], ""]
        out += ["| id | question (evidence record) | what it checks | when it is not ok |",
                "|---|---|---|---|"]
        out += [_row(f, text["family"][f.id]) for f in sections[command]]
        out.append("")
        if section.get("after"):
            out += [section["after"], ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = tomllib.loads(TEXT.read_text())
    problems = prose_problems(text)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    page = render(text)
    if argv == ["--check"]:
        if PAGE.read_text() != page:
            print("docs/findings.md is not current: run python scripts/findings_doc.py",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
