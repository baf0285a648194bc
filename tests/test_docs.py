"""No file of the repository cites a document that is not in it: every `<path>.md` a tracked file
names (outside a URL) resolves to a tracked file, relative to the repository root, to the citing
file's folder or to docs/. Links inside the docs resolve the same way, anchors included."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# A path ending in .md that is not part of a URL, a glob, a format string or a generated file's name.
MD_REF = re.compile(r"(?<![\w/.:{}*<>-])((?:\.{1,2}/)?(?:[\w-]+/)*[\w-]+\.md)(#[\w-]+)?\b")
GENERATED = ("build/", "render-summary/")
# Names that tests write into temporary folders, not documents (tests/workflows).
NOT_DOCUMENTS = {"summary.md", "dev.md"}


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if (ROOT / p).is_file()]


def anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file (lower case, punctuation dropped, spaces to '-')."""
    heads = re.findall(r"^#+\s+(.+?)\s*$", doc.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.replace("`", "")).strip().lower().replace(" ", "-") for h in heads}


def missing_references(files: list[str], root: Path = ROOT) -> list[str]:
    """`file:line: reference` for each document a file of `files` (under `root`) cites that is not tracked here."""
    known = set(tracked())
    problems = []
    for name in files:
        try:
            text = (root / name).read_text()
        except UnicodeDecodeError:
            continue
        folder = str(Path(name).parent)
        for n, line in enumerate(text.splitlines(), 1):
            for m in MD_REF.finditer(line):
                ref, anchor = m.group(1), m.group(2)
                if ref.startswith(GENERATED) or ref in NOT_DOCUMENTS:
                    continue
                candidates = [os.path.normpath(os.path.join(base, ref)) for base in (".", folder, "docs")]
                found = next((c for c in candidates if c in known), None)
                if found is None:
                    problems.append(f"{name}:{n}: {ref}")
                elif anchor and anchor[1:] not in anchors(ROOT / found):
                    problems.append(f"{name}:{n}: {ref}{anchor} (no such heading)")
    return problems


def test_no_file_cites_a_document_outside_the_repository() -> None:
    assert missing_references(tracked()) == []


def test_the_check_finds_a_missing_document_and_a_missing_heading(tmp_path: Path) -> None:
    assert missing_references(["README.md"]) == []
    md = ".md"  # spelled apart so that this file does not cite the documents it makes up
    (tmp_path / "cites.txt").write_text(
        f"see DESIGN{md} and docs/architecture{md}#no-such-heading and https://example.com/x{md}\n"
        f"and docs/architecture{md}#the-agents-pass\n"
    )
    assert missing_references(["cites.txt"], tmp_path) == [
        f"cites.txt:1: DESIGN{md}",
        f"cites.txt:1: docs/architecture{md}#no-such-heading (no such heading)",
    ]


@pytest.mark.parametrize("ref", ["docs/architecture.md#the-agents-pass", "docs/architecture.md#the-publish-protocol"])
def test_the_design_of_record_has_the_sections_the_code_cites(ref: str) -> None:
    doc, anchor = ref.split("#")
    assert anchor in anchors(ROOT / doc)


# A repository path to a source file named in the docs: `components/x.py`, tests/model_sync/test_x.py::case.
PY_REF = re.compile(r"(?<![\w/.-])((?:[\w-]+/)+[\w-]+\.py)\b")


def test_every_source_file_the_docs_name_exists() -> None:
    known = set(tracked())
    docs = [p for p in known if p.endswith(".md")]
    named = [(doc, m.group(1)) for doc in docs for m in PY_REF.finditer((ROOT / doc).read_text())]
    assert len(named) > 50  # the docs name the modules they describe (the check has something to check)
    assert [f"{doc}: {path}" for doc, path in named if path not in known and not path.startswith(GENERATED)] == []


def test_no_test_cites_a_tracker_issue() -> None:
    """A test's docstring and comments say what it protects: an issue number is nothing a reader of
    the repository can open."""
    cited = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\b[Ii]ssue \d+", line)
    ]
    assert cited == []


def test_the_push_protocol_is_numbered_once_in_the_docs_and_the_code() -> None:
    """docs/architecture.md and model_sync/push/publish.py's docstring list the same steps, in the
    same order, under the same names: a step added to one without the other fails here."""
    import model_sync.push.publish as publish

    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc[doc.index("**Push** (`model_sync/push/publish.py`") : doc.index("**Verify** (")]
    documented = [t.lower().rstrip(".") for t in re.findall(r"^\s*\d+\. \*\*([^*]+?)\*\*", section, re.M)]
    coded = [t.lower() for t in re.findall(r"^\s*\d+\. ([a-z][a-z -]+?):", publish.__doc__ or "", re.M)]
    assert len(documented) == 10
    assert documented == coded
