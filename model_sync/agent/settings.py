"""What one agent process does: `AgentSettings`, the one place the agent's defaults are declared,
and `OPTIONS`, the one declaration of its command line: every flag of `model-sync agent`, the
environment variable that sets it (named in --help) and the AgentSettings field whose default it
takes (commands/agent.py builds its parser and reads the environment from it); and the default
staging directory and replica id."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_sync.agent.exceptions import AgentError
from model_sync.contract import layout

_SECONDS = ("interval", "ready_timeout", "heartbeat", "backoff_max", "resync")
ENV_PREFIX = "MODEL_SYNC_AGENT_"  # a flag's environment variable: the prefix + the flag in upper case


@dataclass(frozen=True)
class AgentSettings:
    """What one agent process does. Paths are local; `root` is the environment's bucket root.
    Every knob says its unit and default beside it; `__post_init__` rejects bad values (AgentError,
    LayoutError for names) with the field, the value and what is allowed."""

    root: layout.Root  # the environment's bucket root
    repository: Path  # the local Triton model repository root (Triton's --model-repository)
    # Scratch area on the SAME filesystem as `repository` and not inside it (renames must be
    # atomic; Triton takes any directory inside the root for a model); wiped at start.
    # Default (CLI): default_staging(repository), the sibling `.<repository name>.staging`.
    staging: Path
    deployment: str  # where this replica reports: status/<deployment>/<replica>.json (DNS names)
    replica: str
    env: str = "local"  # the environment's name, written into the status
    interval: float = 5.0  # seconds between passes (> 0)
    # Triton HTTP endpoint (http(s)://host:port) to confirm loads; None: place files only (the
    # init container, before Triton starts).
    triton_url: str | None = None
    # Seconds a new version may take to become READY before it is pinned back; the status keeps
    # being written every `heartbeat` while waiting, so it may exceed verify's staleness window.
    ready_timeout: float = 300.0
    models: tuple[str, ...] = ()  # serve only these models (empty: every model pinned in the bucket)
    heartbeat: float = (
        30.0  # seconds between status writes when nothing changed (verify's freshness window must be larger)
    )
    backoff_max: float = 60.0  # cap in seconds of the exponential backoff while S3 fails
    keep_versions: int = 2  # unpinned version directories kept per model for a quick local rollback (>= 0)
    # Seconds between full listings of repository/; between them a pass lists only the pin index
    # (manifests/_pins/, one object per model) and re-reads the pins whose entry changed.
    resync: float = 300.0
    triton_headers: tuple[tuple[str, str], ...] = ()  # headers sent to Triton (restricted model-repository API key)
    # A file that exists exactly while this replica serves every model it has in place (sidecar;
    # None: no file): Triton is live and each model with a local version is READY there. The
    # pod's readiness probe checks it (components/triton_deployment.py), because Triton 2.51's
    # own /v2/health/ready (strict readiness) stays not-ready after any failed load in poll mode,
    # even once the agent has removed or rolled it back.
    ready_file: Path | None = None
    # `--once`: failed passes in a row after which it gives up (exit 5 when the last failure was S3's,
    # else 1; >= 1). The sidecar never exits on failures: it backs off and keeps serving.
    max_failures: int = 5
    # The port of the agent's own /metrics (Prometheus text format: model_sync/agent/metrics.py);
    # None: not served (the init container, the local demo). The pod serves it on
    # components/triton_deployment.py's AGENT_METRICS_PORT.
    metrics_port: int | None = None
    # The address /metrics listens on: every interface of the pod by default (Prometheus scrapes
    # the pod IP; the namespace's NetworkPolicy admits only Prometheus to the port).
    metrics_address: str = "0.0.0.0"  # noqa: S104

    def __post_init__(self) -> None:
        layout.status_key(self.deployment, self.replica)  # validates both names (LayoutError)
        for name in self.models:
            layout.check_model_name(name)
        for fname in _SECONDS:
            value = getattr(self, fname)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise AgentError(f"{fname}: {value!r}; allowed: a number of seconds > 0")
        if isinstance(self.keep_versions, bool) or not isinstance(self.keep_versions, int) or self.keep_versions < 0:
            raise AgentError(f"keep_versions: {self.keep_versions!r}; allowed: an integer >= 0")
        if isinstance(self.max_failures, bool) or not isinstance(self.max_failures, int) or self.max_failures < 1:
            raise AgentError(f"max_failures: {self.max_failures!r}; allowed: an integer >= 1")
        port = self.metrics_port
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
            raise AgentError(f"metrics_port: {port!r}; allowed: a TCP port 1-65535, or none")
        try:
            ipaddress.ip_address(self.metrics_address)
        except ValueError:
            raise AgentError(
                f"metrics_address: {self.metrics_address!r}; allowed: an IP address (0.0.0.0: every interface)"
            ) from None
        if self.triton_url is not None and not re.match(r"^https?://[^/\s]+$", self.triton_url):
            raise AgentError(f"triton_url: {self.triton_url!r}; allowed: http(s)://host:port without a path")
        repo, staging = self.repository.absolute(), self.staging.absolute()
        if staging == repo or repo in staging.parents:
            raise AgentError(
                f"staging: {str(self.staging)!r}; allowed: a directory outside the repository root {str(repo)!r} "
                "(Triton takes any directory inside it for a model)"
            )
        if staging in repo.parents:
            raise AgentError(
                f"staging: {str(self.staging)!r}; allowed: a directory that does not contain the repository root "
                f"{str(repo)!r} (it is wiped at start)"
            )


def defaults() -> dict[str, Any]:
    """Field name -> default of every AgentSettings field that has one (the CLI's option defaults)."""
    return {f.name: f.default for f in dataclasses.fields(AgentSettings) if f.default is not dataclasses.MISSING}


def _number(kind: type) -> Callable[[str], Any]:
    return lambda raw: kind(raw)


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("1", "true", "yes", "0", "false", "no", ""):
        raise ValueError(raw)
    return value in ("1", "true", "yes")


def _listed(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


# How an option's value is read from its environment variable, and what is allowed there.
_PARSERS: dict[str, tuple[Callable[[str], Any], str]] = {
    "str": (str, "a string"),
    "path": (Path, "a path"),
    "float": (_number(float), "a number"),
    "int": (_number(int), "an integer"),
    "bool": (_bool, "true or false (1/0, yes/no)"),
    "list": (_listed, "comma-separated values"),
}


@dataclass(frozen=True)
class Option:
    """One flag of `model-sync agent`. `setting`: the AgentSettings field it sets, whose default it
    takes (None: the command reads it: the environment's options, --once, --log-level; `default`
    then). Its value comes from the flag, else from its environment variable (`env`, default
    MODEL_SYNC_AGENT_<FLAG>), else the default."""

    flag: str
    help: str
    kind: str = "str"  # one of _PARSERS: str, path, float, int, bool (a switch), list (repeatable)
    setting: str | None = None
    default: Any = None  # the value when `setting` is None or has no default
    computed: str = ""  # a default the command computes (None until then), as --help describes it
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    required: bool = False  # a value must come from the flag or the environment
    env: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _PARSERS:
            raise ValueError(f"Option.kind: {self.kind!r}; allowed: {', '.join(_PARSERS)}")

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def variable(self) -> str:
        return self.env or ENV_PREFIX + self.dest.upper()

    @property
    def default_value(self) -> Any:
        if self.setting is not None and self.setting in defaults():
            return defaults()[self.setting]
        return self.default

    def read(self, environ: Mapping[str, str]) -> Any:
        """The value of the environment variable (None when unset), parsed; AgentError naming the
        variable when it does not parse, or is not one of `choices`."""
        raw = environ.get(self.variable)
        if raw is None:
            return None
        parse, allowed = _PARSERS[self.kind]
        try:
            value = parse(raw)
        except ValueError:
            raise AgentError(f"${self.variable}: {raw!r}; allowed: {allowed} ({self.flag})") from None
        if self.choices and value not in self.choices:
            raise AgentError(f"${self.variable}: {raw!r}; allowed: {', '.join(self.choices)} ({self.flag})")
        return value

    def help_text(self) -> str:
        """The help line, with the default and the environment variable."""
        shown = self.default_value
        if self.required:
            default = "required"
        elif self.computed:
            default = f"default {self.computed}"
        elif shown is None or shown == () or shown is False:
            default = "default none" if self.kind != "bool" else "default off"
        elif isinstance(shown, float):
            default = f"default {shown:g}"
        else:  # a name is quoted ('INFO'), a description is not ($POD_NAME, else the hostname)
            default = f"default {shown!r}" if isinstance(shown, str) and shown.isidentifier() else f"default {shown}"
        return f"{self.help} ({default}; ${self.variable})"


S = "S"  # the metavar of a number of seconds
# Every flag of `model-sync agent`, in --help's order.
OPTIONS: tuple[Option, ...] = (
    Option("--env", "environment from model-sync.yaml (e.g. staging, prod)", metavar="ENV", required=True),
    Option("--config", "model-sync.yaml path (else ./model-sync.yaml)", "path", metavar="PATH",
           env="MODEL_SYNC_CONFIG"),
    Option("--bucket", "override the environment's repository root, s3://bucket[/prefix]", metavar="URI"),
    Option("--endpoint-url", "override the S3 endpoint (an S3-compatible server)", metavar="URL"),
    Option("--region", "override the AWS region", metavar="REGION"),
    Option("--repository", "local Triton model repository root (tritonserver --model-repository)", "path",
           "repository", metavar="PATH", required=True),
    Option("--staging-dir", "staging area on the same filesystem, outside the repository", "path", "staging",
           computed="<parent>/.<name>.staging", metavar="PATH"),
    Option("--once", "one sync pass then exit (init container); Triton is not waited for unless --triton-url is "
           "given", "bool", default=False),
    Option("--interval", "seconds between passes; also the longest a pass waits for loads", "float", "interval",
           metavar=S),
    Option("--triton-url", "Triton HTTP endpoint to confirm loads, e.g. http://127.0.0.1:8000 (sidecar)",
           setting="triton_url", computed="the environment's tritonUrl; none with --once", metavar="URL"),
    Option("--triton-header", "header sent to Triton (restricted model-repository API key), repeatable; the "
           "variable: comma-separated", "list", "triton_headers", metavar="NAME:VALUE"),
    Option("--ready-timeout", "seconds a new version may take to become READY before it is pinned back (the "
           "status is still written every --heartbeat meanwhile)", "float", "ready_timeout", metavar=S),
    Option("--deployment", "deployment name in status/<deployment>/", setting="deployment", default="default",
           metavar="NAME"),
    Option("--replica-id", "replica id in status/<deployment>/<replica>.json", setting="replica",
           computed="$POD_NAME, else the hostname", metavar="ID"),
    Option("--model", "serve only this model (repeatable; the variable: comma-separated; none: every pinned "
           "model)", "list", "models", metavar="NAME"),
    Option("--ready-file", "sidecar: a file that exists exactly while every placed model is READY in Triton (the "
           "pod's readiness probe checks it)", "path", "ready_file", metavar="PATH"),
    Option("--heartbeat", "seconds between status reports when nothing changes", "float", "heartbeat", metavar=S),
    Option("--backoff-max", "cap in seconds of the retry backoff while S3 fails", "float", "backoff_max",
           metavar=S),
    Option("--full-resync", "seconds between full listings of repository/; between them a pass lists only the "
           "pin index", "float", "resync", metavar=S),
    Option("--keep-versions", "unpinned versions kept locally per model for quick rollback", "int",
           "keep_versions", metavar="N"),
    Option("--max-failures", "--once: failed passes in a row before it exits 5 (S3) or 1 (the sidecar never "
           "exits on failures)", "int", "max_failures", metavar="N"),
    Option("--metrics-port", "serve the agent's Prometheus /metrics on this port", "int", "metrics_port",
           metavar="PORT"),
    Option("--metrics-address", "the address /metrics listens on", setting="metrics_address", metavar="ADDR"),
    Option("--log-level", "log level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")),
)  # fmt: skip


def default_staging(repository: Path) -> Path:
    """`<parent>/.<name>.staging`: beside the repository root, hence (normally) the same filesystem."""
    repository = repository.absolute()
    return repository.parent / f".{repository.name}.staging"


def default_replica_id() -> str:
    """$POD_NAME, else the hostname, lower-cased into a DNS-subdomain-safe id."""
    raw = os.environ.get("POD_NAME") or socket.gethostname()
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", raw.lower()).strip(".-")
    return cleaned[:253] or "replica"


def option_values(given: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Every option's value (dest -> value): `given` (the flags parsed, None for one left out),
    else its environment variable, else its default; AgentError naming the variable that does
    not parse, or the required option missing."""
    values: dict[str, Any] = {}
    for o in OPTIONS:
        value = given.get(o.dest)
        if value is None:
            value = o.read(environ)
        if value is None:
            value = o.default_value
        if value is None and o.required:
            raise AgentError(f"{o.flag}: missing; allowed: {o.metavar or 'a value'}, or ${o.variable}")
        values[o.dest] = value
    return values
