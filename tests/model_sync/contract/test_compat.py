"""Version alignment: never publish a TorchScript model the target Triton cannot load.

Unit rules of model_sync/contract/compat.py, the stacks' pinned image against its table, and push /
promote / status against a real moto_server with models REALLY exported by the installed torch
(2.13). No real table row is newer than 2.13, so the accepted case uses a row added by the test
for a HYPOTHETICAL release (`HYPOTHETICAL_RELEASE`, monkeypatched, never shipped).
"""

from __future__ import annotations

import json
import re
import textwrap
import zipfile
from pathlib import Path

import pytest
import yaml

from components.upstream import versions
from model_sync import errors
from model_sync.admission import alignment
from model_sync.contract import compat
from tests.model_sync.helpers import manifest_doc, pinned_version, promote_args, python_model, run_cli
from tests.pulumi_kit import Run
from tests.support.s3_servers import S3Server

OLD_IMAGE = "nvcr.io/nvidia/tritonserver:25.10-py3"  # real row: LibTorch 2.9.0a0 < torch 2.13
# HYPOTHETICAL: a Triton release whose LibTorch is 2.13; added to the table by the tests only.
HYPOTHETICAL_RELEASE = ("27.01", compat.Release("2.70.0", "2.13.0a0", "1.24.4", None, ""))
NEW_IMAGE = f"nvcr.io/nvidia/tritonserver:{HYPOTHETICAL_RELEASE[0]}-py3"


# ---- the table and the stacks' image ---------------------------------------------------


def test_stack_triton_image_is_in_the_table_and_exported(any_stack: Run) -> None:
    release = compat.triton_release(versions.TRITON_IMAGE)
    assert release in compat.TRITON_RELEASES
    # staging/prod export a digest-pinned registry mirror of the same NGC release
    assert compat.triton_release(any_stack.exports["tritonImage"]) == release
    # Every tritonserver container the stack deploys runs an image the table knows.
    images = [
        c["image"]
        for r in any_stack.kubernetes_objects()
        if r.inputs.get("kind") == "Deployment"
        for c in r.inputs["spec"]["template"]["spec"]["containers"]
        if c["name"] == "tritonserver"
    ]
    assert images, "no tritonserver container recorded"
    assert {compat.libtorch_version(i) for i in images} == {compat.libtorch_version(versions.TRITON_IMAGE)}


def test_table_is_ordered_and_versions_never_go_backwards() -> None:
    releases = list(compat.TRITON_RELEASES)
    assert releases == sorted(releases)
    triton = [tuple(int(x) for x in v[0].split(".")) for v in compat.TRITON_RELEASES.values()]
    assert triton == sorted(triton)
    assert len(set(triton)) == len(triton)
    libtorch = [compat._minor(v[1]) for v in compat.TRITON_RELEASES.values()]
    assert libtorch == sorted(libtorch)


def _doc_table(header: str) -> list[list[str]]:
    """The rows of the markdown table of docs/triton-releases.md whose header row starts with `header`."""
    lines = (Path(__file__).resolve().parents[3] / "docs" / "triton-releases.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_table_holds_the_release_notes_figures_written_in_the_docs() -> None:
    """Every release's Triton, PyTorch, ONNX Runtime and TensorRT versions and torch_aoti support
    are docs/triton-releases.md's, and no release is in one and not the other."""
    figures = {r[0]: compat.Release(r[1], r[2], r[3], r[4] or None, r[5]) for r in _doc_table("release")}
    assert figures == compat.TRITON_RELEASES
    assert all(v.torch_aoti in compat.AOTI_STATES for v in compat.TRITON_RELEASES.values())


def test_the_onnx_runtime_opsets_are_those_of_the_onnx_release_it_implements() -> None:
    """Each ONNX Runtime minor's opset and IR version are what ONNX itself says of the ONNX release
    the docs name for it (onnx.helper.VERSION_TABLE), and every release's ONNX Runtime has a row."""
    import onnx.helper

    onnx_releases = {release: (ir, opset) for release, ir, opset, *_ in onnx.helper.VERSION_TABLE}
    figures = {r[0]: (r[1], int(r[2]), int(r[3])) for r in _doc_table("ONNX Runtime")}
    assert figures == compat.ONNX_RUNTIME_SUPPORT
    for ort, (release, opset, ir) in compat.ONNX_RUNTIME_SUPPORT.items():
        assert onnx_releases[release] == (ir, opset), ort
    minors = {".".join(v.onnxruntime.split(".")[:2]) for v in compat.TRITON_RELEASES.values()}
    assert minors <= set(compat.ONNX_RUNTIME_SUPPORT)


def test_torchscript_stays_the_default_until_the_pinned_images_torch_aoti_batches() -> None:
    """No release in the table states dynamic batching for torch_aoti, so export's default is
    TorchScript for the pinned image; a release that did would make it pt2."""
    from model_sync.cli import build_parser

    export = build_parser()._subparsers._group_actions[0].choices["export"]  # type: ignore[union-attr]
    assert export.get_default("format") == compat.default_format(versions.TRITON_IMAGE) == "torchscript"
    assert compat.AOTI_BATCHING_RELEASE is None
    assert compat.default_format("nvcr.io/nvidia/tritonserver:26.04-py3") == "torchscript"  # beta: no batching
    batching = compat.Release("2.99.0", "2.13.0a0", "1.24.4", None, "batching")
    original = dict(compat.TRITON_RELEASES)
    try:
        compat.TRITON_RELEASES["27.12"] = batching  # HYPOTHETICAL release, removed below
        assert compat.default_format("nvcr.io/nvidia/tritonserver:27.12-py3") == "pt2"
    finally:
        compat.TRITON_RELEASES.clear()
        compat.TRITON_RELEASES.update(original)


# ---- rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "release"),
    [
        ("nvcr.io/nvidia/tritonserver:25.10-py3", "25.10"),
        ("nvcr.io/nvidia/tritonserver:24.01-py3-sdk", "24.01"),
        ("registry.local:5000/mirror/tritonserver:25.02-py3@sha256:" + "a" * 64, "25.02"),
    ],
)
def test_triton_release_parses_tags(image: str, release: str) -> None:
    assert compat.triton_release(image) == release


@pytest.mark.parametrize(
    ("image", "match"),
    [
        (
            "nginx:1.27",
            r"triton image: 'nginx:1\.27' is not an NGC tritonserver image; allowed: "
            r"<registry>/tritonserver:<YY\.MM>-py3",
        ),
        ("nvcr.io/nvidia/tritonserver@sha256:" + "a" * 64, r"is not an NGC tritonserver image"),
        ("nvcr.io/nvidia/tritonserver:25.10", r"is not an NGC tritonserver image"),
        (
            "nvcr.io/nvidia/tritonserver:26.07-py3",
            r"triton image: release 26\.07 has no LibTorch entry; allowed: 24\.01, .*25\.11, 26\.01, .*26\.05 \(add it to "
            r"model_sync/contract/compat\.py\)",
        ),
        ("nvcr.io/nvidia/tritonserver:25.07-py3", r"release 25\.07 has no LibTorch entry"),  # NGC skipped 25.07
    ],
)
def test_unknown_images_are_rejected(image: str, match: str) -> None:
    with pytest.raises(compat.UnknownImageError, match=match):
        compat.triton_release(image)


@pytest.mark.parametrize(
    ("torch", "image", "loads"),
    [
        ("2.9.1", OLD_IMAGE, True),
        ("2.9.0a0+145a3a7", OLD_IMAGE, True),  # NGC pre-release counts as its minor
        ("2.8.0+cu128", OLD_IMAGE, True),
        ("1.13.1", OLD_IMAGE, True),
        ("2.10.0", OLD_IMAGE, False),
        ("2.13.0+cpu", OLD_IMAGE, False),
        ("3.0.0", OLD_IMAGE, False),
        ("2.10.0", "nvcr.io/nvidia/tritonserver:25.11-py3", True),
        ("2.5.1", "nvcr.io/nvidia/tritonserver:24.07-py3", False),
    ],
)
def test_can_load_compares_minor_versions(torch: str, image: str, loads: bool) -> None:
    assert compat.can_load(torch, image) is loads
    assert alignment.loadable_libtorch("pytorch_libtorch", "", torch, image) == ("yes" if loads else "no")


def test_check_names_both_versions_or_returns_the_skew_when_allowed() -> None:
    assert compat.check("2.9.0", OLD_IMAGE) is None
    expected = (r"^version skew: model exported with torch 2\.13\.0\+cpu is newer than LibTorch 2\.9\.0a0 in "
                r"nvcr\.io/nvidia/tritonserver:25\.10-py3; "
                r"allowed: export with torch <= 2\.9\.x, or --allow-version-skew$")  # fmt: skip
    with pytest.raises(compat.VersionSkewError, match=expected):
        compat.check("2.13.0+cpu", OLD_IMAGE)
    assert re.match(expected, compat.check("2.13.0+cpu", OLD_IMAGE, allow_skew=True) or "")
    with pytest.raises(
        compat.UnverifiableError,
        match=r"torch version: 'nightly' is not a version; allowed: MAJOR\.MINOR\[\.PATCH\]\[suffix\]",
    ):
        compat.check("nightly", OLD_IMAGE)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"exporter_torch": "2.13.0", "image": OLD_IMAGE},
            compat.VersionSkewError,
            r"torch 2\.13\.0 is newer than LibTorch 2\.9\.0a0",
        ),
        (
            {"exporter_torch": "2.9.0", "image": None},
            compat.UnverifiableError,
            r"triton image: unknown for the target environment; allowed: set tritonImage",
        ),
        (
            {"exporter_torch": None, "image": OLD_IMAGE},
            compat.UnverifiableError,
            r"torch version: unknown \(no export\.json torch_version for a pytorch_libtorch model\)",
        ),
        (
            {"exporter_torch": "2.9.0", "image": "nvcr.io/nvidia/tritonserver:26.07-py3"},
            compat.UnknownImageError,
            r"release 26\.07 has no LibTorch entry",
        ),
    ],
)
def test_assess_refuses_what_it_cannot_prove_unless_allowed(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        alignment.assess_libtorch(platform="pytorch_libtorch", backend="", **kwargs)
    record = alignment.assess_libtorch(platform="pytorch_libtorch", backend="", allow_skew=True, **kwargs)
    assert record["result"] == "skew-allowed"
    assert re.search(match, record["detail"] or "")
    assert alignment.loadable_libtorch("pytorch_libtorch", "", kwargs["exporter_torch"], kwargs["image"]) in (
        "no",
        "unknown",
    )


def test_assess_accepts_loadable_and_exempts_python_backend() -> None:
    assert alignment.assess_libtorch(platform="pytorch_libtorch", backend="", exporter_torch="2.9.1", image=OLD_IMAGE) == {
        "triton_image": OLD_IMAGE, "libtorch_version": "2.9.0a0", "result": "compatible", "detail": None,
    }  # fmt: skip
    # `backend: "pytorch"` is the same LibTorch backend as `platform: "pytorch_libtorch"`.
    with pytest.raises(compat.VersionSkewError):
        alignment.assess_libtorch(platform="", backend="pytorch", exporter_torch="2.13.0", image=OLD_IMAGE)
    exempt = alignment.assess_libtorch(platform="", backend="python", exporter_torch="2.13.0", image=None)
    assert (exempt["result"], exempt["libtorch_version"]) == ("exempt", None)
    assert alignment.loadable_libtorch("", "python", "2.13.0", OLD_IMAGE) == "exempt"


def test_read_file_format_version_needs_a_version_record(tmp_path: Path) -> None:
    bogus = tmp_path / "model.pt"
    with zipfile.ZipFile(bogus, "w") as z:
        z.writestr("archive/data.pkl", b"x")
    with pytest.raises(
        ValueError, match=r"torchscript: .*model\.pt has no version record; allowed: a file written by torch\.jit\.save"
    ):
        compat.read_file_format_version(bogus)


# ---- real exports -------------------------------------------------------------------------

FACTORY = textwrap.dedent(
    """
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.fc = torch.nn.Linear(4, 2)
        def forward(self, x):
            return torch.relu(self.fc(x))

    def build():
        return Net()
    """
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`model-sync export` run once per module: a cloud (pytorch_libtorch) and a local (python
    backend) directory of the same module, exported by the installed torch."""
    import sys

    from model_sync.export import exporter

    src = tmp_path_factory.mktemp("factory")
    (src / "compatfactory.py").write_text(FACTORY)
    sys.path.insert(0, str(src))
    out = tmp_path_factory.mktemp("exported")
    try:
        for target in ("cloud", "local"):
            exporter.command(
                exporter.ExportOptions(
                    factory="compatfactory:build",
                    output=str(out),
                    name=target,
                    shapes=((2, 4),),
                    dtypes=("float32",),
                    target=target,
                )
            )
    finally:
        sys.path.remove(str(src))
    return {"cloud": out / "cloud", "local": out / "local"}


def _copy(src: Path, dest: Path, name: str) -> Path:
    import shutil

    shutil.copytree(src, dest / name)
    cfg = dest / name / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace(f'name: "{src.name}"', f'name: "{name}"'))
    return dest / name


def test_export_records_torch_format_version_and_operators(exported) -> None:
    import torch

    meta = json.loads((exported["cloud"] / "export.json").read_text())
    pt = exported["cloud"] / "1" / "model.pt"
    assert meta["torch_version"] == torch.__version__
    assert meta["torchscript_format_version"] == compat.read_file_format_version(pt)
    assert meta["operators"] == sorted(torch.jit.export_opnames(torch.jit.load(str(pt))))
    assert {"aten::linear", "aten::relu"} <= set(meta["operators"])
    assert compat.can_load(meta["torch_version"], OLD_IMAGE) is False  # the premise of the refusal tests


def _config(path: Path, server: S3Server, envs: dict[str, tuple[str, str | None]]) -> str:
    doc: dict[str, dict[str, dict[str, str]]] = {"environments": {}}
    for name, (bucket, image) in envs.items():
        body = {"bucket": f"s3://{bucket}", "endpointUrl": server.endpoint, "region": "us-east-1"}
        if image:
            body["tritonImage"] = image
        doc["environments"][name] = body
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _newer_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """HYPOTHETICAL table row (no real Triton release ships LibTorch >= 2.13 yet)."""
    monkeypatch.setitem(compat.TRITON_RELEASES, HYPOTHETICAL_RELEASE[0], HYPOTHETICAL_RELEASE[1])


def test_push_refuses_skew_and_writes_nothing(tmp_path, capsys, moto_s3, aws_env, exported) -> None:
    bucket = moto_s3.make_bucket()
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, {"prod": (bucket, OLD_IMAGE)})
    # A bucket with content: an exempt (python backend) model of the same export pushes (its own override).
    assert (
        run_cli(capsys, "push", str(exported["local"]), "--env", "prod", "--config", cfg, "--allow-local-target").code
        == 0
    )
    keys, before = moto_s3.keys(bucket), len(moto_s3.requests())
    for extra in ([], ["--dry-run"]):
        r = run_cli(capsys, "push", str(exported["cloud"]), "--env", "prod", "--config", cfg, *extra)
        assert r.code == errors.INCOMPATIBLE == 7, r.err
        assert r.err.splitlines() == [
            "model-sync: cloud -> prod: version skew: model exported with torch "
            f"{json.loads((exported['cloud'] / 'export.json').read_text())['torch_version']} "
            f"is newer than LibTorch 2.9.0a0 in {OLD_IMAGE}; allowed: export with torch <= 2.9.x, or "
            "--allow-version-skew"
        ]
    assert moto_s3.requests()[before:] == []  # refused before the first S3 request
    assert moto_s3.keys(bucket) == keys
    local_doc = manifest_doc(moto_s3, bucket, "local", 1)
    assert local_doc["schema"] == "model-sync.manifest/v4"
    assert local_doc["compatibility"]["result"] == "exempt"
    assert (
        local_doc["exporter"]["operators"] == json.loads((exported["local"] / "export.json").read_text())["operators"]
    )


def test_push_to_a_newer_hypothetical_release_records_compatible(
    tmp_path, capsys, moto_s3, aws_env, exported, monkeypatch
) -> None:
    _newer_release(monkeypatch)
    bucket = moto_s3.make_bucket()
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, {"staging": (bucket, NEW_IMAGE)})
    r = run_cli(capsys, "push", str(exported["cloud"]), "--env", "staging", "--config", cfg)
    assert r.code == 0, r.err
    assert "warning" not in r.err
    doc = manifest_doc(moto_s3, bucket, "cloud", 1)
    meta = json.loads((exported["cloud"] / "export.json").read_text())
    assert doc["compatibility"] == {
        "triton_image": NEW_IMAGE,
        "libtorch_version": "2.13.0a0",
        "result": "compatible",
        "detail": None,
    }
    assert (doc["exporter"]["torch_version"], doc["exporter"]["torchscript_format_version"],
            doc["exporter"]["operators"]) == (
        meta["torch_version"], meta["torchscript_format_version"], meta["operators"])  # fmt: skip


@pytest.mark.parametrize(
    ("image", "detail"),
    [
        (OLD_IMAGE, r"^version skew: .* LibTorch 2\.9\.0a0"),
        (None, r"^triton image: unknown for the target environment"),
    ],
)
def test_allow_version_skew_publishes_and_records_it(
    tmp_path, capsys, moto_s3, aws_env, exported, image, detail
) -> None:
    bucket = moto_s3.make_bucket()
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, {"prod": (bucket, image)})
    r = run_cli(capsys, "push", str(exported["cloud"]), "--env", "prod", "--config", cfg)
    assert r.code == 7
    assert moto_s3.keys(bucket) == []
    r = run_cli(capsys, "push", str(exported["cloud"]), "--env", "prod", "--config", cfg, "--allow-version-skew")
    assert r.code == 0, r.err
    assert "(published anyway: --allow-version-skew, recorded in the manifest)" in r.err
    assert pinned_version(moto_s3, bucket, "cloud") == 1
    record = manifest_doc(moto_s3, bucket, "cloud", 1)["compatibility"]
    assert (record["triton_image"], record["result"]) == (image, "skew-allowed")
    assert re.search(detail, record["detail"])


def test_bad_export_metadata_is_refused(tmp_path, capsys, moto_s3, s3_bucket, aws_env) -> None:
    model = python_model(tmp_path, "m")
    (model / "export.json").write_text(json.dumps({"torch_version": "2.9.0", "operators": "aten::linear"}))
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, {"staging": (s3_bucket, OLD_IMAGE)})
    r = run_cli(capsys, "push", str(model), "--env", "staging", "--config", cfg)
    assert r.code == 2
    assert re.search(
        r"export\.json operators: 'aten::linear'; allowed: a list of operator names \(or absent\)$", r.err.strip()
    ), r.err
    assert moto_s3.keys(s3_bucket) == []


@pytest.mark.parametrize(
    ("image", "refused"),
    [
        (OLD_IMAGE, True),
        (
            "111122223333.dkr.ecr.us-east-1.amazonaws.com/nvidia/tritonserver:25.10-py3@sha256:" + "9" * 64,
            True,
        ),  # a mirror of it
        ("nvcr.io/nvidia/tritonserver:25.10-pyt-python-py3", False),  # NGC's variant with torch in the python backend
        ("registry.local/acme/serving:1.4", False),  # not an NGC tritonserver image
        (None, False),  # the local demo environment: no tritonImage
    ],
)
def test_python_backend_torch_rule(image, refused) -> None:
    kwargs = {"platform": "", "backend": "python", "exporter_torch": "2.13.0", "image": image}
    if refused:
        with pytest.raises(
            compat.LocalTargetError,
            match=(
                r"^local target: a `--target local` model .* cannot load in .*tritonserver:25\.10-py3.*; allowed: "
                r"export with --target cloud, a <YY\.MM>-pyt-python-py3 image, or --allow-local-target$"
            ),
        ):
            alignment.assess_libtorch(**kwargs, target="local")
        assert str(alignment.assess_libtorch(**kwargs, target="local", allow_local_target=True)["detail"]).startswith(
            "published with --allow-local-target: local target:"
        )
        assert alignment.loadable_libtorch("", "python", "2.13.0", image, "local") == "no"
    else:
        assert alignment.assess_libtorch(**kwargs, target="local")["result"] == "exempt"
    assert (
        alignment.assess_libtorch(**kwargs, target=None)["result"] == "exempt"
    )  # a hand-written python model is not a `--target local` export


def test_push_and_promote_refuse_a_local_target_model_for_an_ngc_image(
    tmp_path, capsys, moto_s3, aws_env, exported
) -> None:
    demo, staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = _config(
        tmp_path / "model-sync.yaml",
        moto_s3,
        {"demo": (demo, None), "staging": (staging, OLD_IMAGE), "prod": (prod, OLD_IMAGE)},
    )
    assert (
        run_cli(capsys, "push", str(exported["local"]), "--env", "demo", "--config", cfg).code == 0
    )  # no tritonImage: the local demo
    r = run_cli(capsys, "push", str(exported["local"]), "--env", "staging", "--config", cfg)
    assert r.code == errors.INCOMPATIBLE, r.err
    assert r.err.startswith(
        "model-sync: local -> staging: local target: a `--target local` model (python backend running "
        f"torch.jit.load) cannot load in {OLD_IMAGE}"
    )
    assert r.err.count("\n") == 1
    assert moto_s3.keys(staging) == []
    r = run_cli(capsys, "push", str(exported["local"]), "--env", "staging", "--config", cfg, "--allow-local-target")
    assert r.code == 0, r.err
    assert "published with --allow-local-target" in r.err  # warned
    record = manifest_doc(moto_s3, staging, "local", 1)["compatibility"]
    assert (record["triton_image"], record["result"]) == (OLD_IMAGE, "exempt")
    assert record["detail"].startswith("published with --allow-local-target: ")
    promote = promote_args("local", 1, cfg, "--skip-verification")
    r = run_cli(capsys, *promote)
    assert r.code == errors.INCOMPATIBLE, r.err
    assert r.err.startswith("model-sync: local version 1 -> prod: local target: ")
    assert moto_s3.keys(prod) == []
    assert run_cli(capsys, *promote, "--allow-local-target").code == 0
    assert json.loads(moto_s3.get(prod, "audit/promotions/local/1.json"))["compatibility"]["detail"].startswith(
        "published with --allow-local-target"
    )


def _skip_verification_promote(capsys, cfg: str, *extra: str):
    return run_cli(capsys, *promote_args("cloud", 1, cfg, "--skip-verification", *extra))


def test_promote_checks_the_target_image_and_status_shows_it(
    tmp_path, capsys, moto_s3, aws_env, exported, monkeypatch
) -> None:
    _newer_release(monkeypatch)
    staging, prod = moto_s3.make_bucket(), moto_s3.make_bucket()
    cfg = _config(tmp_path / "model-sync.yaml", moto_s3, {"staging": (staging, NEW_IMAGE), "prod": (prod, OLD_IMAGE)})
    assert run_cli(capsys, "push", str(exported["cloud"]), "--env", "staging", "--config", cfg).code == 0
    assert (
        run_cli(
            capsys,
            "push",
            str(_copy(exported["local"], tmp_path, "pyb")),
            "--env",
            "staging",
            "--config",
            cfg,
            "--allow-local-target",
        ).code
        == 0
    )
    for extra in ([], ["--dry-run"]):
        r = _skip_verification_promote(capsys, cfg, *extra)
        assert r.code == 7, r.err
        assert re.fullmatch(
            r"model-sync: cloud version 1 -> prod: version skew: model exported with torch \S+ is newer than "
            r"LibTorch 2\.9\.0a0 in \S+25\.10-py3; .*\n",
            r.err,
        )
    assert moto_s3.keys(prod) == []

    r = run_cli(capsys, "status", "--config", cfg, "--output", "json")
    assert r.code == 0, r.err
    rows = {(env, s["model"]): s["version_details"] for env, body in json.loads(r.out).items() for s in body["models"]}
    torch_version = json.loads((exported["cloud"] / "export.json").read_text())["torch_version"]
    assert rows[("staging", "cloud")] == [
        {"version": 1, "torch_version": torch_version, "platform": "pytorch_libtorch",
         "loadable": {"prod": "no", "staging": "yes"},
         "compatibility": manifest_doc(moto_s3, staging, "cloud", 1)["compatibility"]}]  # fmt: skip
    assert rows[("staging", "pyb")][0]["loadable"] == {"prod": "no", "staging": "no"}  # --target local on NGC images
    table = run_cli(capsys, "status", "--config", cfg).out.splitlines()
    assert re.search(
        rf"^staging\s+cloud\s+1\*\s+{re.escape(torch_version)}\s+prod=NO staging=yes$", "\n".join(table), re.M
    ), table

    r = _skip_verification_promote(capsys, cfg, "--allow-version-skew")
    assert r.code == 0, r.err
    assert pinned_version(moto_s3, prod, "cloud") == 1
    promotion = json.loads(moto_s3.get(prod, "audit/promotions/cloud/1.json"))
    assert promotion["schema"] == "model-sync.promotion/v3"
    assert (promotion["compatibility"]["triton_image"], promotion["compatibility"]["result"]) == (
        OLD_IMAGE,
        "skew-allowed",
    )
    target = manifest_doc(moto_s3, prod, "cloud", 1)
    assert target["compatibility"] == promotion["compatibility"]
    assert target["exporter"] == manifest_doc(moto_s3, staging, "cloud", 1)["exporter"]


def test_exit_codes_table_in_the_docs_matches_errors() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "model-sync.md").read_text()
    documented = {int(m) for m in re.findall(r"^\| (\d) \|", doc, re.M)}
    assert documented == set(errors.EXIT_CODES)
    assert "| 7 | incompatible:" in doc
