"""checkov over rendered folders in one run: `python -m tools.scan DIR...` (`make scan`).

checkov 3.3.30 builds its Kubernetes definitions from the FIRST `-d` of a run and reuses them for
every later one (checkov/kubernetes/runner.py), so `checkov -d a -d b` reports folder a twice and
never reads b. A run of its own per folder paid checkov's start-up (4.5 s of CPU, `checkov
--version`) each time: six folders took 34 s of CPU against 12.7 s for one run (measured, same
findings). So every folder is copied under one scratch folder (`<i>/`, the i-th folder given) and
checkov reads that one `-d`; each finding's path names its folder. `.checkov.yaml` is the only
place a finding may be accepted; the run reads it with `quiet: false` (the passed checks are what
prove a folder was read).

Prints one line per folder (`scan: DIR: passed N, failed M`), then each finding (check, resource,
file) of a folder with findings, and exits 1 when any folder has a finding, a file checkov cannot
parse, or no passed check (not read), or when checkov fails; 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _outcome(doc: dict, kind: str) -> list[Any]:
    """The run's checks of `kind` (passed_checks, failed_checks) or its parsing errors (file paths)."""
    return list(doc.get("results", {}).get(kind, []))


def _folder(path: str) -> int:
    """The index of the folder a result's path (`/<i>/...`, relative to the scratch folder) lies in."""
    return int(Path(path).parts[1])


def run_checkov(checkov: Path, config: Path, folders: list[Path], scratch: Path) -> dict:
    """checkov's JSON report of one run over copies of `folders` (scratch/<i>/)."""
    for i, folder in enumerate(folders):
        shutil.copytree(folder, scratch / "tree" / str(i))
    settings = yaml.safe_load(config.read_text())
    settings["quiet"] = False
    (scratch / "checkov.yaml").write_text(yaml.safe_dump(settings))
    done = subprocess.run(
        [str(checkov), "--config-file", str(scratch / "checkov.yaml"), "-d", str(scratch / "tree"), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        doc = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise SystemExit(
            f"scan: checkov exited {done.returncode} without a JSON report\n{done.stdout}{done.stderr}"
        ) from None
    if isinstance(doc, list) or "summary" not in doc:
        raise SystemExit(f"scan: checkov's report is not one Kubernetes report: {done.stdout[:2000]}")
    return doc


def report(folders: list[Path], doc: dict) -> tuple[bool, list[str]]:
    """(clean, lines): a line per folder, then its findings and unparsed files."""
    passed = Counter(_folder(c["file_path"]) for c in _outcome(doc, "passed_checks"))
    failed = _outcome(doc, "failed_checks")
    unparsed = [str(p) for p in _outcome(doc, "parsing_errors")]
    lines, clean = [], not unparsed
    for i, folder in enumerate(folders):
        mine = [c for c in failed if _folder(c["file_path"]) == i]
        lines.append(f"scan: {folder}: passed {passed[i]}, failed {len(mine)}")
        if not any(folder.glob("*.yaml")):  # main() refused a folder that does not exist
            lines[-1] += " (no rendered manifests: run tools.render first)"
        elif passed[i] == 0:
            lines[-1] += " (checkov read nothing here)"
        clean = clean and passed[i] > 0 and not mine
        for c in mine:
            where = Path(*Path(c["file_path"]).parts[2:])
            lines.append(f"  {c['check_id']} {c['check_name']}: {c['resource']} in {folder / where}")
    lines += [f"scan: checkov could not parse {p}" for p in unparsed]
    return clean, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scan", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="rendered folders (build/<stack>/manifests, .../charts)")
    parser.add_argument(
        "--checkov", type=Path, default=ROOT / ".venv-scan" / "bin" / "checkov", help="the checkov executable"
    )
    parser.add_argument(
        "--config", type=Path, default=ROOT / ".checkov.yaml", help="checkov's config file (the skip list)"
    )
    args = parser.parse_args(argv)
    missing = [f for f in args.folders if not f.is_dir()]
    if missing:
        print(
            f"scan: {', '.join(map(str, missing))}: no such folder; allowed: rendered folders (run tools.render first)"
        )
        return 1
    with tempfile.TemporaryDirectory(prefix="scan-") as scratch:
        clean, lines = report(args.folders, run_checkov(args.checkov, args.config, args.folders, Path(scratch)))
    print("\n".join(lines))
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
