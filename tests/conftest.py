"""Shared fixtures. Program runs are cached per (worker, stack): each stack's real
program runs once under the recording mocks and every test reads the same record."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from tests.pulumi_kit import Run, run_program

STACKS = ("dev", "staging", "prod")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with end-to-end tests first, the most end-to-end tests first, then the rest with
    the most tests first (stable within a module). `make unit` runs `--dist loadscope
    --no-loadscope-reorder`, which hands modules to the workers in this order: the modules
    that hold real tritonservers for tens of seconds start at once, and the many short modules
    fill the end. xdist's own reorder (by test count alone) sent them last and left one worker
    idle for minutes (measured: the last 9 % of the tests took 5 of the 8.7 minutes)."""
    module = {id(item): item.nodeid.split("::", 1)[0] for item in items}
    tests = Counter(module.values())
    e2e = Counter(module[id(item)] for item in items if item.get_closest_marker("e2e"))
    first_seen = {m: i for i, m in reversed(list(enumerate(module[id(item)] for item in items)))}
    items.sort(key=lambda item: (-e2e[module[id(item)]], -tests[module[id(item)]], first_seen[module[id(item)]]))


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
