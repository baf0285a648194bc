"""Error responses in a python-backend model.py, which no Triton counter sees: `push` names them.

A python model that answers a request with `pb_utils.InferenceResponse(error=...)` fails it for the
client (HTTP 500), but Triton 2.51 counts it in nv_inference_request_success, never in
nv_inference_request_failure (measured), so the gray release and every alert on the failure
counter miss it. An exception raised by execute() is counted there (reason "BACKEND").

Found in model.py's syntax tree (`ast`): every call of `InferenceResponse` (a bare name or an
attribute such as `pb_utils.InferenceResponse`) with an `error=` keyword, or a second positional
argument, that is not the literal None. Other files of the version are not scanned. A model.py
that does not parse is no concern of this check: Triton fails to load it, and the agent keeps the
previous version serving (docs/agent.md). A warning, never a refusal.
"""

from __future__ import annotations

import ast

from model_sync.triton_model.model_directory import LocalModel

MODEL_PY = "model.py"  # the python backend's entry point (model_config.required_files)


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def error_response_lines(source: bytes | str) -> list[int]:
    """Line numbers of the error responses in `source` (see the module docstring), ascending.
    Raises SyntaxError or ValueError when it does not parse."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name != "InferenceResponse":
            continue
        positional = node.args[1] if len(node.args) > 1 and not isinstance(node.args[0], ast.Starred) else None
        error = next((k.value for k in node.keywords if k.arg == "error"), None)
        if any(
            arg is not None and not isinstance(arg, ast.Starred) and not _is_none(arg) for arg in (positional, error)
        ):
            lines.add(node.lineno)
    return sorted(lines)


def warning(m: LocalModel) -> str | None:
    """push's warning line for model `m`: None for a model that is not python-backend, has no
    error response, or whose model.py cannot be read or parsed."""
    if m.backend != "python" or MODEL_PY not in m.files:
        return None
    path = m.files[MODEL_PY].path
    try:
        with open(path, "rb") as f:
            lines = error_response_lines(f.read())
    except (OSError, SyntaxError, ValueError, RecursionError):  # unreadable: push's hashing refuses it
        return None
    if not lines:
        return None
    more = f" (and line{'s' if len(lines) > 2 else ''} {', '.join(map(str, lines[1:]))})" if len(lines) > 1 else ""
    return (
        f"{m.name}: {path}:{lines[0]}{more} answers requests with InferenceResponse(error=...): Triton counts those "
        "as successes, so the gray release and every alert on nv_inference_request_failure miss them; raise "
        "pb_utils.TritonModelException instead"
    )
