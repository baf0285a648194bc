"""Shared fixtures. Program runs are cached per (worker, stack): each stack's real
program runs once under the recording mocks and every test reads the same record."""

from __future__ import annotations

import functools
import os
from collections import Counter

import pytest

from tests.pulumi_kit import Run, run_program

STACKS = ("dev", "staging", "prod")


# The niceness an xdist worker takes on once it runs a test not marked `latency` (make unit runs more
# workers than cores). A scenario judged on latency (the gray release's p99 against stable) keeps
# its worker, and the servers it starts, at normal priority; the other workers take the CPU it
# leaves idle, as the checks lane does (nice 19). Without it, three workers on two cores slowed a
# fresh canary's first requests enough to fail an identical version on p99 (91.2 ms against 21.7 ms).
UNIT_NICE = 10


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules marked `latency` first, then modules with end-to-end tests, the most end-to-end
    tests first, then the rest with the most tests first (stable within a module). `make unit`
    runs `--dist loadscope --no-loadscope-reorder`, which hands modules to the workers in this
    order: each latency module is the first its worker runs (before the worker yields its
    priority, UNIT_NICE), the modules that hold real tritonservers for tens of seconds start at
    once, and the many short modules fill the end. xdist's own reorder (by test count alone) sent
    them last and left one worker idle for minutes (measured: the last 9 % of the tests took 5 of
    the 8.7 minutes)."""
    module = {id(item): item.nodeid.split("::", 1)[0] for item in items}
    tests = Counter(module.values())
    e2e = Counter(module[id(item)] for item in items if item.get_closest_marker("e2e"))
    latency = {module[id(item)] for item in items if item.get_closest_marker("latency")}
    first_seen = {m: i for i, m in reversed(list(enumerate(module[id(item)] for item in items)))}
    items.sort(
        key=lambda item: (
            module[id(item)] not in latency,
            -e2e[module[id(item)]],
            -tests[module[id(item)]],
            first_seen[module[id(item)]],
        )
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """An xdist worker yields its CPU priority (UNIT_NICE, for good) at its first test that is not
    judged on latency; a worker that has not yet run one keeps normal priority."""
    if os.environ.get("PYTEST_XDIST_WORKER") and item.get_closest_marker("latency") is None:
        current = os.nice(0)
        if current < UNIT_NICE:
            os.nice(UNIT_NICE - current)


@functools.cache
def stack_run(stack: str) -> Run:
    return run_program(stack)


@pytest.fixture(params=STACKS)
def any_stack(request: pytest.FixtureRequest) -> Run:
    """The recorded run of each stack in turn."""
    return stack_run(request.param)


@pytest.fixture
def dev() -> Run:
    return stack_run("dev")


@pytest.fixture
def staging() -> Run:
    return stack_run("staging")


@pytest.fixture
def prod() -> Run:
    return stack_run("prod")
