"""tools/scan.py: every rendered folder is scanned by one real checkov run (the pinned one in
.venv-scan, `make scan`), and each finding is reported against the folder it came from: one run
over copies of the folders, because checkov reads only the first `-d` it is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import scan

CHECKOV = scan.ROOT / ".venv-scan" / "bin" / "checkov"
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: serving}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - {{name: web, image: "registry.example/web:{tag}"}}
"""


def _folder(root: Path, name: str, tag: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "deployment.yaml").write_text(DEPLOYMENT.format(tag=tag))
    return folder


def test_each_folders_findings_are_reported_against_that_folder(tmp_path: Path, capsys) -> None:
    """A floating image tag (CKV_K8S_14, not in .checkov.yaml's skip list) in the second of three
    folders fails the scan and is named under that folder; the first, with a fixed tag, is read
    (it has passed checks) and does not carry the finding; the third, empty (a render that wrote
    nothing), is not a clean scan either."""
    fixed, floating = _folder(tmp_path, "fixed", "1.0.0"), _folder(tmp_path, "floating", "latest")
    (tmp_path / "empty").mkdir()
    code = scan.main([str(fixed), str(floating), str(tmp_path / "empty"), "--checkov", str(CHECKOV)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1, lines
    heads = {line.split(": passed")[0]: line for line in lines if line.startswith("scan: ")}
    assert set(heads) == {f"scan: {fixed}", f"scan: {floating}", f"scan: {tmp_path / 'empty'}"}, lines
    assert " passed 0," not in heads[f"scan: {fixed}"] + heads[f"scan: {floating}"], lines  # both were read
    assert heads[f"scan: {tmp_path / 'empty'}"].endswith(
        ": passed 0, failed 0 (no rendered manifests: run tools.render first)"
    )
    at = lines.index(heads[f"scan: {floating}"])
    mine = [line for line in lines[at + 1 :] if line.startswith("  ")]
    assert any(line.startswith("  CKV_K8S_14 ") and str(floating / "deployment.yaml") in line for line in mine), lines
    assert not any("CKV_K8S_14" in line and str(fixed) in line for line in lines), lines


def test_a_missing_folder_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    assert scan.main([str(tmp_path / "nowhere"), "--checkov", str(CHECKOV)]) == 1
    out = capsys.readouterr().out.strip()
    assert out == f"scan: {tmp_path / 'nowhere'}: no such folder; allowed: rendered folders (run tools.render first)"


@pytest.fixture(autouse=True)
def _checkov_installed() -> None:
    assert CHECKOV.exists(), f"{CHECKOV} is missing: `make scan-venv` installs it (make unit does)"
