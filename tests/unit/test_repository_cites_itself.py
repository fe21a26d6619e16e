"""The repository explains itself: what its code and docs cite is in the clone.

A reader with only this repository cannot follow a section of a design document, a behavioural
specification or a notes file kept elsewhere, an issue number, or a simulation seed number (a fix's
history is in its commit message). Where a rule needs its source, the source is a page under
``docs/``, cited by its path; these tests keep both promises.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# What the product ships and what a newcomer reads first.
_TEXT_SUFFIXES = {".py", ".md", ".json", ".yaml", ".yml", ".toml", ".txt", ".html", ".css", ".js", ""}
_ROOTS = ("shared", "functions", "docs", "events")
_FILES = ("README.md", "template.yaml", "Makefile", "pyproject.toml", ".ci/run")

# A citation of something the clone does not have.
FOREIGN_CITATION = re.compile(
    r"§"                                             # a section of a document kept elsewhere
    r"|\b[Ii]ssues?\s+#?\d+"                         # an issue number
    r"|(?<![-\w])[Ss]eeds?\s+\d{3,}"                 # a simulation seed number (not ``--seeds 100``)
    r"|\.\./shared\b|\bteam kit\b"                   # the team kit beside the checkout
    r"|\bpixivflow-core\.md\b|\bDESIGN\.md\b|\bnotes/[\w.-]+\.md\b"
    r"|\b[Tt]he spec\b|\bspec's\b"
)
DOCS_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]+?\.md\b")
MARKDOWN_LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def _shipped_and_read_files() -> list[Path]:
    files = [REPO / name for name in _FILES if (REPO / name).is_file()]
    for root in _ROOTS:
        for path in sorted((REPO / root).rglob("*")):
            if (path.is_file() and path.suffix in _TEXT_SUFFIXES and "__pycache__" not in path.parts
                    and not any(part.endswith(".egg-info") for part in path.parts)):
                files.append(path)
    return files


def _hits(pattern: re.Pattern[str], files: list[Path]) -> list[str]:
    found = []
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for match in pattern.finditer(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {match.group(0)!r} in {line.strip()[:120]!r}")
    return found


def test_no_code_or_doc_cites_a_document_an_issue_or_a_seed_the_clone_does_not_have() -> None:
    files = _shipped_and_read_files()
    assert len(files) > 100  # the walk found the package, not an empty folder
    hits = _hits(FOREIGN_CITATION, files)
    assert not hits, "cite a docs/ page by path, or say why in the repository's own terms:\n" + "\n".join(hits)


def test_every_cited_docs_page_exists() -> None:
    files = _shipped_and_read_files() + sorted((REPO / "tests").rglob("*.py"))
    missing = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for cited in set(DOCS_PATH.findall(text)):
            if not (REPO / cited).is_file():
                missing.append(f"{path.relative_to(REPO)} cites {cited}")
    assert not missing, "\n".join(sorted(missing))


def test_every_relative_link_of_the_docs_resolves() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in MARKDOWN_LINK.findall(page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).resolve().is_file():
                broken.append(f"{page.relative_to(REPO)} links {target}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("text", [
    "the retry budget (spec §10.5)", "see DESIGN §4", "note §2 edge cases", "(issue 24)", "Issues 20 and 25",
    "make sim seed 5206", "seeds 3574, 8143", "read ../shared/notes", "the team kit", "as the spec says",
    "notes/pixiv-app-api.md",
])
def test_the_rule_recognises_each_kind_of_foreign_citation(text: str) -> None:
    assert FOREIGN_CITATION.search(text)


@pytest.mark.parametrize("text", [
    "make sim --seeds 100", "10,000 seeds", "SEED=n replays one seed", "an OpenAPI specification",
    "spec = importlib.util.spec_from_file_location(name, path)", "docs/explanation/ledger.md",
    "the first 12 issues of a magazine",
])
def test_the_rule_leaves_ordinary_text_alone(text: str) -> None:
    assert not FOREIGN_CITATION.search(text)
