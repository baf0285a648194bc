"""Shared fixtures. Program runs are cached per (worker, stack): each stack's real
program runs once under the recording mocks and every test reads the same record."""

from __future__ import annotations

import functools

import pytest

from tests.pulumi_kit import Run, run_program

STACKS = ("dev", "staging", "prod")


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
