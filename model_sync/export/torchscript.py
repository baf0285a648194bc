"""`export --format torchscript` (the default): torch.jit.trace (default) or torch.jit.script -> 1/model.pt,
saved and re-loaded with torch.jit.load for export's check (model_sync/export/exporter.py).

export.json gets what Triton's LibTorch must match (model_sync/contract/compat.py): the TorchScript
file format version and the operators the graph calls (torch.jit.export_opnames). Tracer warnings
(a shape baked in, a Python branch frozen) become one note, printed once the outputs matched eager;
torch's own deprecation notice for TorchScript is not repeated (Triton's pytorch_libtorch platform
loads TorchScript only: nothing a user can act on but choosing another --format).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from model_sync import errors
from model_sync.contract import compat
from model_sync.export.options import Artefact, ExportOptions


def export(opts: ExportOptions, model: Any, inputs: list[Any], version_dir: str) -> Artefact:
    import torch

    try:
        # torch prints TracerWarnings as multi-line noise; collect them for one line.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scripted = torch.jit.trace(model, tuple(inputs)) if opts.method == "trace" else torch.jit.script(model)
        notes = [str(w.message).splitlines()[0] for w in caught if not _torchscript_deprecation(w)]
    except Exception as e:
        raise errors.SyncError(
            errors.CHECK_FAILED,
            f"torch.jit.{opts.method}: failed ({' '.join(str(e).split())[:240]}); "
            f"allowed: a module {opts.method}-able by TorchScript "
            f"(try --method {'script' if opts.method == 'trace' else 'trace'})",
        ) from None
    path = os.path.join(version_dir, "model.pt")
    torch.jit.save(scripted, path)
    loaded = torch.jit.load(path).eval()
    lines = []
    if notes:
        lines.append(
            f"warning: torch.jit.{opts.method}: {len(notes)} warning(s) while tracing, "
            f"first: {' '.join(notes[0].split())[:200]}; the outputs matched eager on every example, so the "
            "export stands"
        )
    return Artefact(
        path=path,
        run=loaded,
        meta={
            "torchscript_format_version": compat.read_file_format_version(Path(path)),
            # Operators the graph calls: what the serving LibTorch must provide (version alignment).
            # ref: https://pytorch.org/docs/stable/jit.html (torch.jit.export_opnames)
            "operators": sorted(torch.jit.export_opnames(scripted)),
        },
        load=lambda device: torch.jit.load(path, map_location=device).eval(),
        notes=lines,
    )


def _torchscript_deprecation(w: warnings.WarningMessage) -> bool:
    """torch's "`torch.jit.trace` is deprecated. Please switch to torch.compile or torch.export"."""
    return issubclass(w.category, DeprecationWarning | FutureWarning) and str(w.message).startswith("`torch.jit.")


def facts(meta: dict[str, Any]) -> str:
    """What `export` prints of export.json for a TorchScript file."""
    return f"TorchScript format {meta.get('torchscript_format_version')}"
