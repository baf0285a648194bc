"""Supply chain: the five pin files are pip-compile's hashed output and are installed
with hash checking. Every entry is `name==version` with at least one sha256; requirements.txt
(what `pulumi up` installs) is the whole closure of the program's dependencies, as the installed
distributions' metadata declares it, at requirements-dev.txt's versions; the Makefile installs
each virtualenv with `--require-hashes`.

pip turns hash checking on by itself for a file where any entry has a hash, so the Pulumi CLI's
own `pip install -r requirements.txt` checks them too; the Makefile asks for it explicitly so a
file that lost its hashes fails instead of installing unchecked."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PIN_FILES = (
    "requirements.txt",
    "requirements-dev.txt",
    "requirements-scan.txt",
    "policy/requirements.txt",
    "docker/agent-requirements.txt",
    "requirements-uv.txt",
)
# requirements-uv.txt pins the one installer (uv has no Python dependencies); every other file a closure.
MIN_PINS = {"requirements-uv.txt": 1}
# The file each virtualenv of the Makefile installs, by the target that builds it.
MAKE_INSTALLS = {
    "uv": "requirements-uv.txt",
    "venv": "requirements-dev.txt",
    "policy-venv": "policy/requirements.txt",
    "scan-venv": "requirements-scan.txt",
}

PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[0-9][0-9A-Za-z.+!-]*)$")
HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Pin:
    name: str  # canonical (PEP 503)
    version: str
    hashes: tuple[str, ...]


def entries(text: str) -> Iterator[str]:
    """The logical lines of a requirements file: continuations joined, comments dropped."""
    buf = ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            yield " ".join(buf.split())
        buf = ""
    if buf.strip():
        yield " ".join(buf.split())


def problems(text: str) -> list[str]:
    """Each entry that is not `name==version --hash=sha256:...` (at least one hash)."""
    out = []
    for entry in entries(text):
        spec, *options = entry.split(" ")
        if not PIN.match(spec):
            out.append(f"not name==version: {entry}")
        elif not options or not all(HASH.match(o) for o in options):
            out.append(f"no --hash=sha256 (or another option): {entry}")
    return out


def pins(text: str) -> dict[str, Pin]:
    out: dict[str, Pin] = {}
    for entry in entries(text):
        spec, *options = entry.split(" ")
        m = PIN.match(spec)
        assert m, entry
        name = canonicalize_name(m["name"])
        assert name not in out, f"{name} pinned twice"
        out[name] = Pin(name, m["version"], tuple(o.removeprefix("--hash=") for o in options))
    return out


def closure_gaps(pinned: dict[str, Pin]) -> list[str]:
    """Each dependency a pinned package declares (its installed metadata, markers evaluated for
    this interpreter, extras only where a requirement asks for them) that is not pinned, or
    pinned at a version the requirement excludes."""
    gaps = []
    todo = [(name, frozenset[str]()) for name in pinned]
    seen = set(todo)
    while todo:
        name, extras = todo.pop()
        dist = metadata.distribution(name)
        if Version(dist.version) != Version(pinned[name].version):
            gaps.append(f"{name}: {dist.version} installed, {pinned[name].version} pinned (run `make venv`)")
            continue
        for line in dist.requires or []:
            req = Requirement(line)
            wanted = req.marker is None or any(
                req.marker.evaluate({**default_environment(), "extra": e}) for e in ("", *extras)
            )
            if not wanted:
                continue
            dep = canonicalize_name(req.name)
            if dep not in pinned:
                gaps.append(f"{name} needs {req}: not pinned")
            elif not req.specifier.contains(pinned[dep].version, prereleases=True):
                gaps.append(f"{name} needs {req}: {pinned[dep].version} pinned")
            elif (dep, frozenset(req.extras)) not in seen:
                seen.add((dep, frozenset(req.extras)))
                todo.append((dep, frozenset(req.extras)))
    return sorted(set(gaps))


def version_mismatches(pinned: dict[str, Pin], reference: dict[str, Pin]) -> list[str]:
    return [
        f"{n}=={p.version}, {reference[n].version} in the reference"
        for n, p in sorted(pinned.items())
        if n in reference and reference[n].version != p.version
    ]


def installs_without_hashes(dry_run: str, files: dict[str, str]) -> list[str]:
    """The files of `files` that no `pip install --require-hashes -r FILE` (pip's or `uv pip`'s) line
    of a `make -n` dry run installs."""
    lines = [ln for ln in dry_run.splitlines() if " -m pip install " in ln or "/uv pip install " in ln]
    return sorted(
        f for f in files.values() if not any("--require-hashes" in ln.split() and f"-r {f}" in ln for ln in lines)
    )


def read(name: str) -> str:
    return (ROOT / name).read_text()


# ---- the checks, on the files of the tree ----------------------------------------------


@pytest.mark.parametrize("name", PIN_FILES)
def test_every_entry_is_an_exact_pin_with_a_hash(name: str) -> None:
    assert problems(read(name)) == []
    assert len(pins(read(name))) >= MIN_PINS.get(name, 5)


def test_requirements_txt_is_the_whole_closure_of_the_program() -> None:
    runtime = pins(read("requirements.txt"))
    direct = {canonicalize_name(Requirement(e).name) for e in entries(read("requirements.in"))}
    assert direct == {"pulumi", "pulumi-aws", "pulumi-kubernetes", "pulumi-random", "pyyaml"}
    assert direct <= set(runtime)
    assert closure_gaps(runtime) == []
    assert len(runtime) > len(direct)  # the transitive dependencies are there too (grpcio, protobuf, ...)


def test_the_agent_image_pins_are_closed_too() -> None:
    """docker/agent.Dockerfile installs them with --no-deps: a missing dependency would only show in the image."""
    assert closure_gaps(pins(read("docker/agent-requirements.txt"))) == []


@pytest.mark.parametrize("name", ["requirements.txt", "docker/agent-requirements.txt"])
def test_versions_are_requirements_dev_txt_versions(name: str) -> None:
    dev = pins(read("requirements-dev.txt"))
    assert set(pins(read(name))) <= set(dev)
    assert version_mismatches(pins(read(name)), dev) == []


def test_requirements_in_pins_what_requirements_txt_pins() -> None:
    runtime = pins(read("requirements.txt"))
    for e in entries(read("requirements.in")):
        req = Requirement(e)
        assert str(req.specifier).startswith("=="), e
        assert runtime[canonicalize_name(req.name)].version == str(req.specifier)[2:], e


def test_the_makefile_installs_every_virtualenv_with_require_hashes() -> None:
    dry = subprocess.run(
        ["make", "-n", "-B", *MAKE_INSTALLS], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert installs_without_hashes(dry, MAKE_INSTALLS) == []
    # The editable install stays a separate --no-deps command (pip refuses editables under --require-hashes).
    assert any("--no-deps" in ln and " -e ." in ln and "--require-hashes" not in ln for ln in dry.splitlines())


# ---- the checks catch what they are for (each fails on the files it guards against) --------

UNHASHED = "# header\npulumi==3.272.0\npyyaml==6.0.3\n"
HASHED = "pyyaml==6.0.3 \\\n    --hash=sha256:" + "a" * 64 + "\n    # via -r requirements.in\n"


def test_problems_names_unhashed_unpinned_and_option_lines() -> None:
    assert problems(HASHED) == []
    assert problems(UNHASHED) == [
        "no --hash=sha256 (or another option): pulumi==3.272.0",
        "no --hash=sha256 (or another option): pyyaml==6.0.3",
    ]
    assert problems("pyyaml>=6 --hash=sha256:" + "a" * 64) == ["not name==version: pyyaml>=6 --hash=sha256:" + "a" * 64]
    assert problems("-r other.txt\n") == ["not name==version: -r other.txt"]
    assert problems("pyyaml==6.0.3 --hash=md5:abc\n") != []
    assert pins(HASHED) == {"pyyaml": Pin("pyyaml", "6.0.3", ("sha256:" + "a" * 64,))}


def test_closure_gaps_names_an_unpinned_dependency() -> None:
    # pulumi declares grpcio, protobuf, semver, ... : with pulumi alone they are all missing.
    gaps = closure_gaps({"pulumi": Pin("pulumi", metadata.version("pulumi"), ())})
    assert any(g.startswith("pulumi needs grpcio") and g.endswith("not pinned") for g in gaps), gaps
    stale = closure_gaps({"pulumi": Pin("pulumi", "0.1", ())})
    assert stale == [f"pulumi: {metadata.version('pulumi')} installed, 0.1 pinned (run `make venv`)"]


def test_version_mismatches_and_unhashed_installs_are_named() -> None:
    assert version_mismatches(pins(HASHED), {"pyyaml": Pin("pyyaml", "6.0.2", ())}) == [
        "pyyaml==6.0.3, 6.0.2 in the reference"
    ]
    dry = (
        ".venv/bin/python -m pip install --quiet -r requirements-dev.txt\nx/bin/python -m pip install "
        "--require-hashes -r requirements-scan.txt\n"
    )
    assert installs_without_hashes(dry, {"a": "requirements-dev.txt", "b": "requirements-scan.txt"}) == [
        "requirements-dev.txt"
    ]
