"""checkov over rendered folders, one process per folder: `python -m tools.scan DIR...` (`make scan`).

checkov 3.3.30 builds its Kubernetes definitions from the FIRST `-d` of a run and reuses them for
every later one (checkov/kubernetes/runner.py), so `checkov -d a -d b` reports folder a twice and
never reads b. Each folder therefore gets its own run, two at a time. `.checkov.yaml` is the only
place a finding may be accepted.

Prints one line per folder (`scan: DIR: passed N, failed M`), checkov's own report for a folder
with findings, and exits 1 when any folder has a finding or checkov fails, 0 otherwise.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"Passed checks: (\d+), Failed checks: (\d+), Skipped checks: (\d+)")


def scan(checkov: Path, config: Path, folder: Path) -> tuple[bool, str]:
    """(clean, report) for one folder."""
    if not folder.is_dir() or not any(folder.glob("*.yaml")):
        return False, f"scan: {folder}: no rendered manifests (run tools.render first)"
    done = subprocess.run(
        [str(checkov), "--config-file", str(config), "-d", str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    found = SUMMARY.search(done.stdout)
    if found is None:
        return False, f"scan: {folder}: checkov exited {done.returncode} without a summary\n{done.stdout}{done.stderr}"
    passed, failed = int(found.group(1)), int(found.group(2))
    line = f"scan: {folder}: passed {passed}, failed {failed}"
    clean = done.returncode == 0 and failed == 0 and passed > 0
    return clean, line if clean else f"{line}\n{done.stdout}{done.stderr}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scan", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="rendered folders (build/<stack>/manifests, .../charts)")
    parser.add_argument(
        "--checkov", type=Path, default=ROOT / ".venv-scan" / "bin" / "checkov", help="the checkov executable"
    )
    parser.add_argument(
        "--config", type=Path, default=ROOT / ".checkov.yaml", help="checkov's config file (the skip list)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="folders scanned at a time (default 2)")
    args = parser.parse_args(argv)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda f: scan(args.checkov, args.config, f), args.folders))
    for _, report in results:
        print(report)
    return 0 if all(clean for clean, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
