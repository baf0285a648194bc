"""The Pulumi test kit: run the REAL program under Pulumi's mocks and record everything.

`run_program("prod")` feeds `stacks/Pulumi.prod.yaml` through
`pulumi.runtime.set_all_config`, runs `__main__.py` under recording mocks and returns a
`Run`: every resource (type, name, URN, parent, provider, inputs, returned state), every
invoke, every component's registered outputs and the stack exports.

It refuses to return a run that would let a test pass without checking anything:
- nothing recorded (resources created before the mocks, or an empty program);
- the program read an output the mocks did not return: every declared output of every
  resource that `MOCK_OUTPUTS` does not provide comes back as an `unmocked-output:` marker,
  and a marker found in any recorded input, invoke argument or export fails the run;
- the same (type, logical name) registered twice;
- an invoke with no mock;
- `preview=True` is never used: apply callbacks always run.
"""

from __future__ import annotations

import copy
import functools
import json
import runpy
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.stack import wait_for_rpcs
from pulumi.runtime.sync_await import _sync_await

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "triton-platform"
ACCOUNT = "123456789012"
UNMOCKED = "unmocked-output:"


class KitError(AssertionError):
    """The run cannot be trusted (see module docstring)."""


# --------------------------------------------------------------------------------------
# What the mocks return.
# --------------------------------------------------------------------------------------


def _arn(service: str, region: str, kind: str, name: str) -> str:
    return f"arn:aws:{service}:{region}:{ACCOUNT}:{kind}/{name}"


# type token -> function(name, inputs) -> outputs the cloud would return.
MOCK_OUTPUTS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {}


def mock_outputs(
    *tokens: str,
) -> Callable[[Callable[[str, dict[str, Any]], dict[str, Any]]], Callable[[str, dict[str, Any]], dict[str, Any]]]:
    """Register what the mocks return for resource types (decorator)."""

    def register(
        fn: Callable[[str, dict[str, Any]], dict[str, Any]],
    ) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
        for token in tokens:
            MOCK_OUTPUTS[token] = fn
        return fn

    return register


# invoke token -> function(args) -> result.
MOCK_INVOKES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def mock_invoke(
    token: str,
) -> Callable[[Callable[[dict[str, Any]], dict[str, Any]]], Callable[[dict[str, Any]], dict[str, Any]]]:
    def register(fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        MOCK_INVOKES[token] = fn
        return fn

    return register


# The mock tables for the AWS and Kubernetes types the program uses live in
# tests/mock_outputs.py, imported for its registrations.


# --------------------------------------------------------------------------------------
# Records.
# --------------------------------------------------------------------------------------


@dataclass
class Resource:
    type: str
    name: str
    urn: str
    parent: str  # URN of the parent ("" for the stack's direct children)
    provider: str  # provider reference "urn::id" ("" = default provider)
    custom: bool
    inputs: dict[str, Any]
    state: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()  # the names (or URNs) of the aliases it was registered with
    protect: bool = False  # registered with `protect=True` (destroy refuses it)

    @property
    def parent_name(self) -> str:
        return self.parent.rsplit("::", 1)[-1] if self.parent else ""

    @property
    def parent_type(self) -> str:
        return self.parent.split("::")[2].split("$")[-1] if self.parent else ""

    @property
    def provider_name(self) -> str:
        return self.provider.split("::")[-1].split("::")[0] if self.provider else ""


@dataclass
class Invoke:
    token: str
    args: dict[str, Any]


@dataclass
class Run:
    stack: str
    resources: list[Resource]
    invokes: list[Invoke]
    exports: dict[str, Any]
    component_outputs: dict[str, dict[str, Any]]  # URN -> registered outputs

    def of_type(self, token: str) -> list[Resource]:
        return [r for r in self.resources if r.type == token]

    def one(self, token: str, name: str | None = None) -> Resource:
        found = [r for r in self.of_type(token) if name is None or r.name == name]
        if len(found) != 1:
            names = sorted(r.name for r in self.of_type(token))
            raise AssertionError(f"expected exactly one {token} named {name!r}, found {len(found)}; recorded: {names}")
        return found[0]

    def named(self, name: str) -> Resource:
        found = [r for r in self.resources if r.name == name]
        if len(found) != 1:
            raise AssertionError(f"expected one resource named {name!r}, found {len(found)}")
        return found[0]

    def children_of(self, parent: Resource) -> list[Resource]:
        return [r for r in self.resources if r.parent == parent.urn]

    def descendants_of(self, parent: Resource) -> list[Resource]:
        out: list[Resource] = []
        frontier = [parent.urn]
        while frontier:
            urn = frontier.pop()
            for r in self.resources:
                if r.parent == urn:
                    out.append(r)
                    frontier.append(r.urn)
        return out

    def kubernetes_objects(self) -> list[Resource]:
        """Kubernetes objects the program creates itself (not Helm releases or providers)."""
        return [
            r
            for r in self.resources
            if r.type.startswith("kubernetes:")
            and r.custom
            and not r.type.startswith("kubernetes:helm.sh/")
            and r.type != "pulumi:providers:kubernetes"
        ]


# --------------------------------------------------------------------------------------
# Mocks and monitor.
# --------------------------------------------------------------------------------------


def _declared_outputs(cls: type | None) -> list[str]:
    if cls is None:
        return []
    names = []
    for attr in dir(cls):
        prop = getattr(cls, attr, None)
        if isinstance(prop, property) and prop.fget is not None:
            pname = getattr(prop.fget, "_pulumi_name", None)
            if isinstance(pname, str):
                names.append(pname)
    return names


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, region: str) -> None:
        self.region = region
        self.classes: dict[tuple[str, str], type] = {}
        self.invokes: list[Invoke] = []
        self.unmocked_invokes: list[str] = []
        self.unmocked_types: set[str] = set()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        inputs = dict(args.inputs)
        state = dict(inputs)
        maker = MOCK_OUTPUTS.get(args.typ)
        if maker is not None:
            state.update(maker(args.name, inputs))
        elif args.custom:
            self.unmocked_types.add(args.typ)
        for prop in _declared_outputs(self.classes.get((args.typ, args.name))):
            if prop not in state:
                state[prop] = f"{UNMOCKED}{args.typ}.{prop}"
        # A mock table may give the physical id (an S3 bucket's id is its name).
        resource_id = str(state.get("id") or f"{args.name}-id")
        state["id"] = resource_id
        return resource_id, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]]]:
        self.invokes.append(Invoke(args.token, dict(args.args)))
        fn = MOCK_INVOKES.get(args.token)
        if fn is None:
            self.unmocked_invokes.append(args.token)
            return {}, []
        return fn(dict(args.args)), []


class RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.records: list[Resource] = []
        self.outputs: dict[str, dict[str, Any]] = {}

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        urn = self.make_urn(request.parent, request.type, request.name)
        registration = self.resources[urn]
        inputs = rpc.deserialize_properties(request.object)
        stack_urn_suffix = "::pulumi:pulumi:Stack::"
        parent = "" if stack_urn_suffix in request.parent else request.parent
        self.records.append(
            Resource(
                type=request.type,
                name=request.name,
                urn=urn,
                parent=parent,
                provider=request.provider,
                custom=bool(request.custom),
                inputs=_plain(inputs),
                state=_plain(registration.state),
                aliases=(*request.aliasURNs, *(a.spec.name or a.urn for a in request.aliases)),
                protect=bool(request.protect),
            )
        )
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        outputs = rpc.deserialize_properties(request.outputs)
        self.outputs[request.urn] = _plain(outputs)
        return super().RegisterResourceOutputs(request)


def _plain(value: Any) -> Any:
    """Strip the SDK's special markers so tests compare plain data."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:  # type: ignore[attr-defined]
            return _plain(value.get("value"))
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------------------
# Running the program.
# --------------------------------------------------------------------------------------


def stack_config(stack: str, path: Path | None = None) -> dict[str, Any]:
    """The raw `config:` mapping of stacks/Pulumi.<stack>.yaml (or of `path`); a YAML mistake in it is
    the program's ConfigError (components/stack_config/loading.py). A copy of one parse per path and
    text: PyYAML's parser took ~30 ms a read, and the tests' program runs read the same three files
    hundreds of times (11.5 s of CPU in one profile)."""
    path = path or ROOT / "stacks" / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise KitError(f"no stack file {path}")
    return copy.deepcopy(_read_stack_file(path, path.read_text()))


@functools.lru_cache(maxsize=64)
def _read_stack_file(path: Path, text: str) -> dict[str, Any]:
    """read_stack_file(path), once for each `text` the file has held (a key only: it reads `path`)."""
    from components.stack_config.loading import read_stack_file

    del text
    return read_stack_file(path)


# Stand-ins for `secure:` (encrypted) stack values: the mocks cannot decrypt them, so a
# stack that followed the README's `pulumi config set --secret ...` still renders. Each
# stand-in is a valid value for its key, and the key is passed as a secret.
SECRET_STAND_INS: dict[str, str] = {
    "triton-platform:alertmanagerSlackWebhookUrl": "https://hooks.slack.com/services/T000/B000/mock",
}


def secret_keys(config: Mapping[str, Any]) -> list[str]:
    """Keys whose stack value is encrypted (`{secure: v1:...}`)."""
    return sorted(k for k, v in config.items() if isinstance(v, dict) and set(v) == {"secure"})


def to_pulumi_strings(config: Mapping[str, Any]) -> dict[str, str]:
    """Turn YAML values into the strings Pulumi hands a program (JSON for objects);
    encrypted values become their SECRET_STAND_INS entry."""
    out = {}
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            if key not in SECRET_STAND_INS:
                raise KitError(
                    f"{key}: encrypted stack value without a stand-in; add one to SECRET_STAND_INS in "
                    "tests/pulumi_kit.py"
                )
            out[key] = SECRET_STAND_INS[key]
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (dict, list)):
            out[key] = json.dumps(value)
        else:
            out[key] = str(value)
    return out


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, value


def run_program(
    stack: str,
    overrides: Mapping[str, Any] | None = None,
    remove: tuple[str, ...] = (),
    program: Path | None = None,
    allow_empty: bool = False,
    stack_file: Path | None = None,
    project: str = PROJECT,
) -> Run:
    """Run `program` (default: the real __main__.py) for `stack` under recording mocks.
    `stack_file` replaces stacks/Pulumi.<stack>.yaml (e.g. a deliberately broken copy);
    `project` names the Pulumi project (the account bootstrap is another one: bootstrap/)."""
    program = program or ROOT / "__main__.py"
    config = stack_config(stack, stack_file)
    config.update(overrides or {})
    for key in remove:
        config.pop(key, None)
    region = str(config.get("aws:region", "us-east-1"))

    import tests.mock_outputs  # noqa: F401  (registers MOCK_OUTPUTS / MOCK_INVOKES)

    mocks = RecordingMocks(region)
    monitor = RecordingMonitor(mocks)
    settings.ROOT.set(None)
    pulumi.runtime.set_all_config(to_pulumi_strings(config), secret_keys(config))
    pulumi_mocks.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)

    def capture_class(args: pulumi.ResourceTransformationArgs) -> None:
        mocks.classes[(args.type_, args.name)] = type(args.resource)
        return None

    pulumi.runtime.register_stack_transformation(capture_class)

    root = str(ROOT)
    if root not in sys.path:
        sys.path.insert(0, root)
    runpy.run_path(str(program), run_name="__main__")
    _sync_await(wait_for_rpcs())

    exports = _resolve_exports()
    components = {
        urn: out for urn, out in monitor.outputs.items() if not urn.split("::")[2].endswith("pulumi:pulumi:Stack")
    }
    run = Run(
        stack=stack, resources=monitor.records, invokes=mocks.invokes, exports=exports, component_outputs=components
    )
    _check(run, mocks, allow_empty)
    return run


def _resolve_exports() -> dict[str, Any]:
    """The stack exports (`pulumi.export`), resolved. Under mocks the root stack never
    registers them, so they are read from the root resource directly."""
    root = settings.get_root_resource()
    raw = dict(getattr(root, "outputs", {}) or {})
    out: dict[str, Any] = {}
    for key, value in raw.items():
        output = pulumi.Output.from_input(value)
        out[key] = _plain(_sync_await(output.future()))
    return out


def _check(run: Run, mocks: RecordingMocks, allow_empty: bool) -> None:
    if not run.resources and not allow_empty:
        raise KitError("the program recorded no resources: resources created before set_mocks, or an empty program")
    if mocks.unmocked_invokes:
        raise KitError(f"invokes without a mock in tests/mock_outputs.py: {sorted(set(mocks.unmocked_invokes))}")
    seen: dict[tuple[str, str], int] = {}
    for r in run.resources:
        seen[(r.type, r.name)] = seen.get((r.type, r.name), 0) + 1
    dupes = sorted(f"{t} {n}" for (t, n), c in seen.items() if c > 1)
    if dupes:
        raise KitError(f"resource names registered twice: {dupes}")
    leaks = []
    for r in run.resources:
        for path, v in _walk(r.inputs):
            if isinstance(v, str) and UNMOCKED in v:
                leaks.append(f"{r.type} {r.name} input {path} <- {v[v.index(UNMOCKED) + len(UNMOCKED) :]}")
    for inv in run.invokes:
        for path, v in _walk(inv.args):
            if isinstance(v, str) and UNMOCKED in v:
                leaks.append(f"invoke {inv.token} arg {path} <- {v}")
    for path, v in _walk(run.exports):
        if isinstance(v, str) and UNMOCKED in v:
            leaks.append(f"export {path} <- {v}")
    if leaks:
        raise KitError(
            "the program read outputs the mocks did not return (add them to tests/mock_outputs.py): "
            + "; ".join(leaks[:10])
        )
