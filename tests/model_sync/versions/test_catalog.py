"""model_sync/versions/catalog.py against real S3 server processes: pins read and flipped (the
conditional commit point), pin history and the rollback target, manifests, listings, version
allocation. What the server holds is read back with a separate client (S3Server.get / keys)."""

from __future__ import annotations

import functools
import json
import uuid
from typing import Any

import pytest

from model_sync import errors
from model_sync.admission import alignment
from model_sync.contract import layout
from model_sync.environments import Environment
from model_sync.records import codec
from model_sync.s3 import clients
from model_sync.s3.bucket import Bucket
from model_sync.triton_model import model_config
from model_sync.versions import catalog
from tests.support.s3_servers import REGION, S3Server

MODEL = "m"
BASE = model_config.parse('backend: "python"\nmax_batch_size: 4\n')


@pytest.fixture(autouse=True)
def _credentials(aws_env: dict[str, str]) -> None:
    """The test key through botocore's default chain."""


@functools.cache
def _session() -> Any:
    return clients.new_session(REGION)


@functools.cache
def observer(server: S3Server) -> Any:
    """A separate boto3 client that reads back what the server holds (one per server: ~0.3 s each)."""
    return server.client()


def server_keys(server: S3Server, bucket: str, prefix: str = "") -> list[str]:
    return sorted(o["Key"] for o in observer(server).list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []))


def server_get(server: S3Server, bucket: str, key: str) -> bytes:
    return bytes(observer(server).get_object(Bucket=bucket, Key=key)["Body"].read())


def repo_on(server: S3Server, bucket: str) -> Bucket:
    return Bucket(
        Environment("dev", layout.Root(bucket), endpoint_url=server.endpoint, region=REGION), session=_session()
    )


def new_bucket(server: S3Server) -> str:
    bucket = f"b-{uuid.uuid4().hex[:12]}"
    observer(server).create_bucket(Bucket=bucket)
    return bucket


@pytest.fixture
def repo(moto_s3: S3Server, s3_bucket: str) -> Bucket:
    return repo_on(moto_s3, s3_bucket)


def pin_text(version: int) -> str:
    return model_config.pinned_text(BASE, version, MODEL)


def manifest_doc(version: int, files: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "schema": codec.MANIFEST_V2, "model": MODEL, "version": version,
        "files": {path: {"sha256": "a" * 64, "size": size} for path, size in (files or {"model.py": 3}).items()},
        "config_pbtxt": pin_text(version), "backend": "python", "platform": "",
        "source": {"path": "/src/m", "host": "h", "git_commit": None, "promoted_from": None},
        "exporter": {"tool": "model-sync tests", "method": None, "torch_version": None,
                     "torchscript_format_version": None, "target": None, "operators": None},
        "compatibility": alignment.assess_libtorch(platform="", backend="python", exporter_torch=None, image=None),
        "created_by": "tests", "created_at": codec.now(),
    }  # fmt: skip


def publish_manifest(repo: Bucket, version: int, files: dict[str, int] | None = None) -> None:
    assert repo.put_new(layout.manifest_key(MODEL, version), codec.dumps(manifest_doc(version, files)))


def flip(repo: Bucket, version: int, action: str = "push", pop: int = 0) -> catalog.Flip:
    return catalog.flip_pin(
        repo, MODEL, version, pin_text(version), action, "tests", catalog.read_pin(repo, MODEL), pop=pop
    )


def history_on_server(server: S3Server, bucket: str) -> list[dict[str, Any]]:
    return [json.loads(server_get(server, bucket, k)) for k in server_keys(server, bucket, layout.pins_prefix(MODEL))]


# ---- pins ----------------------------------------------------------------------------------


def test_no_pin_then_a_pin_with_its_etag_and_last_modified(repo: Bucket, moto_s3: S3Server, s3_bucket: str) -> None:
    assert catalog.read_pin(repo, MODEL) == catalog.Pin(MODEL, None, None)
    repo.put(layout.config_key(MODEL), pin_text(4).encode(), "text/plain")
    pin = catalog.read_pin(repo, MODEL)
    head = observer(moto_s3).head_object(Bucket=s3_bucket, Key=layout.config_key(MODEL))
    assert (pin.version, pin.text, pin.etag) == (4, pin_text(4), head["ETag"].strip('"'))
    assert pin.modified == int(head["LastModified"].timestamp())


def test_a_config_that_pins_no_single_version_reads_as_none(repo: Bucket) -> None:
    repo.put(
        layout.config_key(MODEL), b'backend: "python"\nversion_policy { latest { num_versions: 2 } }\n', "text/plain"
    )
    assert catalog.read_pin(repo, MODEL).version is None


def test_a_corrupt_pin_is_refused_naming_the_fix(repo: Bucket, s3_bucket: str) -> None:
    repo.put(layout.config_key(MODEL), b'nmae: "m"\n', "text/plain")
    with pytest.raises(errors.SyncError) as e:
        catalog.read_pin(repo, MODEL)
    assert e.value.code == errors.REFUSED
    assert str(e.value).startswith(f"s3://{s3_bucket}/repository/m/config.pbtxt: does not parse (")
    assert str(e.value).endswith("(the pin is corrupt; fix it with `model-sync rollback m --model-version N`)")


def test_flips_write_the_pin_then_history_and_index(repo: Bucket, moto_s3: S3Server, s3_bucket: str) -> None:
    first = flip(repo, 1)
    assert server_get(moto_s3, s3_bucket, layout.config_key(MODEL)).decode() == pin_text(1)
    assert first.etag == catalog.read_pin(repo, MODEL).etag
    assert codec.read_pin_index(server_get(moto_s3, s3_bucket, layout.pin_index_key(MODEL)), MODEL)["version"] == 1
    flip(repo, 2)
    flip(repo, 3, "promote")
    records = history_on_server(moto_s3, s3_bucket)
    assert [(r["version"], r["previous"], r["action"], r["stack"], r["by"]) for r in records] == [
        (1, None, "push", [], "tests"), (2, 1, "push", [1], "tests"), (3, 2, "promote", [1, 2], "tests")]  # fmt: skip
    for record in records:
        codec.validate(record, "model-sync.pin/v1")
    assert codec.read_pin_index(server_get(moto_s3, s3_bucket, layout.pin_index_key(MODEL)), MODEL)["version"] == 3
    history = catalog.read_history(repo, MODEL)
    assert (history.latest, history.stack) == (records[-1], [1, 2])


def test_re_pinning_the_same_version_stacks_nothing(repo: Bucket, moto_s3: S3Server, s3_bucket: str) -> None:
    flip(repo, 1)
    flip(repo, 1, "rollback")
    assert [r["stack"] for r in history_on_server(moto_s3, s3_bucket)] == [[], []]


def test_a_stale_pin_is_refused_and_nothing_is_written(repo: Bucket, moto_s3: S3Server, s3_bucket: str) -> None:
    flip(repo, 1)
    stale = catalog.read_pin(repo, MODEL)
    flip(repo, 2)  # another writer flips meanwhile
    before = server_keys(moto_s3, s3_bucket)
    with pytest.raises(errors.SyncError) as e:
        catalog.flip_pin(repo, MODEL, 3, pin_text(3), "push", "tests", stale)
    assert e.value.code == errors.REFUSED
    assert str(e.value) == (
        "pin: m in dev moved from 1 to 2 while this push ran; allowed: re-run push (version 3 is published but NOT "
        "pinned; "
        "`model-sync rollback m --env dev --model-version 3` pins it)")  # fmt: skip
    assert server_keys(moto_s3, s3_bucket) == before
    assert server_get(moto_s3, s3_bucket, layout.config_key(MODEL)).decode() == pin_text(2)
    with pytest.raises(
        errors.SyncError,
        match=(
            r"^pin: m in dev moved from 1 to 2 while this rollback ran; allowed: re-run rollback \(nothing was "
            r"changed\)$"
        ),
    ):
        catalog.flip_pin(repo, MODEL, 1, pin_text(1), "rollback", "tests", stale)


def test_a_first_pin_written_meanwhile_is_refused(repo: Bucket, moto_s3: S3Server, s3_bucket: str) -> None:
    none_yet = catalog.read_pin(repo, MODEL)
    flip(repo, 1)
    with pytest.raises(errors.SyncError, match=r"moved from None to 1 while this push ran"):
        catalog.flip_pin(repo, MODEL, 2, pin_text(2), "push", "tests", none_yet)
    assert len(history_on_server(moto_s3, s3_bucket)) == 1


def test_a_moved_pin_is_caught_on_a_server_that_ignores_if_match(rclone_s3: S3Server) -> None:
    """rclone serve s3 ignores If-Match: the pin is re-read just before the write instead."""
    bucket = new_bucket(rclone_s3)
    repo = repo_on(rclone_s3, bucket)
    flip(repo, 1)
    stale = catalog.read_pin(repo, MODEL)
    flip(repo, 2)
    assert repo.if_match_enforced() is False
    with pytest.raises(errors.SyncError, match=r"^pin: m in dev moved from 1 to 2 while this push ran"):
        catalog.flip_pin(repo, MODEL, 3, pin_text(3), "push", "tests", stale)
    assert server_get(rclone_s3, bucket, layout.config_key(MODEL)).decode() == pin_text(2)


def test_pin_text_for_another_version_is_a_bug_and_writes_nothing(
    repo: Bucket, moto_s3: S3Server, s3_bucket: str
) -> None:
    with pytest.raises(errors.SyncError) as e:
        catalog.flip_pin(repo, MODEL, 2, pin_text(3), "push", "tests", catalog.read_pin(repo, MODEL))
    assert (e.value.code, str(e.value)) == (errors.UNEXPECTED, "pin text for m: pins 3; allowed: 2")
    assert server_keys(moto_s3, s3_bucket) == []


def test_a_history_that_is_not_the_current_pin_is_not_trusted(repo: Bucket, moto_s3: S3Server, s3_bucket: str) -> None:
    flip(repo, 1)
    flip(repo, 2)
    repo.put(layout.config_key(MODEL), pin_text(5).encode(), "text/plain")  # edited by hand: no history record
    pin = catalog.read_pin(repo, MODEL)
    assert catalog.rollback_target(repo, MODEL, pin, catalog.read_history(repo, MODEL)) == (None, 0)
    flip(repo, 6)
    assert history_on_server(moto_s3, s3_bucket)[-1]["stack"] == [5]  # not [1, 2, 5]


# ---- rollback target -----------------------------------------------------------------------


def test_the_rollback_target_skips_pruned_versions(repo: Bucket) -> None:
    for version in (1, 2, 3):
        publish_manifest(repo, version)
        flip(repo, version)
    pin = catalog.read_pin(repo, MODEL)
    history = catalog.read_history(repo, MODEL)
    assert catalog.rollback_target(repo, MODEL, pin, history) == (2, 1)
    repo.delete([layout.manifest_key(MODEL, 2)])  # pruned
    assert catalog.rollback_target(repo, MODEL, pin, history) == (1, 2)
    assert catalog.rollback_target(repo, MODEL, pin, history, manifests=set()) == (None, 0)
    flip(repo, 1, "rollback", pop=2)
    assert catalog.read_history(repo, MODEL).stack == []


def test_no_history_means_no_rollback_target(repo: Bucket) -> None:
    assert catalog.read_history(repo, MODEL) == catalog.PinHistory(None, [])
    assert catalog.rollback_target(repo, MODEL, catalog.read_pin(repo, MODEL), catalog.read_history(repo, MODEL)) == (
        None,
        0,
    )


def test_a_corrupt_history_record_is_refused(repo: Bucket, s3_bucket: str) -> None:
    flip(repo, 1)
    key = layout.pin_record_key(MODEL, "29991231T235959999999Z", 9)  # sorts last: the latest
    repo.put(key, b'{"schema": "model-sync.pin/v1"}')
    with pytest.raises(errors.SyncError) as e:
        catalog.read_history(repo, MODEL)
    assert e.value.code == errors.REFUSED
    assert str(e.value).startswith(f"s3://{s3_bucket}/{key}: model-sync.pin/v1 ")


# ---- manifests and listings ------------------------------------------------------------------


def test_manifests_are_read_strictly(repo: Bucket, s3_bucket: str) -> None:
    with pytest.raises(errors.SyncError) as e:
        catalog.read_manifest(repo, MODEL, 1)
    assert (e.value.code, str(e.value)) == (
        errors.NOT_FOUND,
        f"manifest: s3://{s3_bucket}/manifests/m/1.json does not exist; allowed: a version published by model-sync",
    )
    assert catalog.read_manifest(repo, MODEL, 1, required=False) is None
    publish_manifest(repo, 1)
    doc = catalog.read_manifest(repo, MODEL, 1)
    assert doc is not None
    assert (doc["version"], doc["config_pbtxt"]) == (1, pin_text(1))
    repo.put(layout.manifest_key(MODEL, 2), codec.dumps(manifest_doc(3)))  # the record of another version under 2's key
    with pytest.raises(errors.SyncError) as wrong:
        catalog.read_manifest(repo, MODEL, 2)
    assert (wrong.value.code, str(wrong.value)) == (
        errors.REFUSED,
        f"s3://{s3_bucket}/manifests/m/2.json: model-sync.manifest/v2 version: 3; allowed: 2 (the key it was "
        "read from)",
    )


def test_listings_keep_only_layout_names(repo: Bucket) -> None:
    for key in (layout.version_file_key("b", 1, "model.py"), layout.config_key("a"),
                "repository/Not_A_Name/config.pbtxt", "repository/_x/1/f",
                layout.version_file_key(MODEL, 2, "model.py"), layout.version_file_key(MODEL, 10, "sub/w.bin"),
                "repository/m/latest/model.py",
                "repository/m/01/model.py", layout.manifest_key(MODEL, 2), layout.manifest_key(MODEL, 10),
                "manifests/m/notes.txt"):  # fmt: skip
        repo.put(key, b"abc")
    assert catalog.list_models(repo) == ["a", "b", MODEL]
    assert catalog.list_versions(repo, MODEL) == [2, 10]
    assert catalog.list_manifests(repo, MODEL) == [2, 10]
    assert catalog.version_objects(repo, MODEL, 10) == {"sub/w.bin": 3}
    assert catalog.version_objects(repo, MODEL, 3) == {}


def test_a_version_is_complete_when_every_manifest_file_is_there_with_its_size(repo: Bucket) -> None:
    doc = manifest_doc(1, {"model.py": 3, "sub/w.bin": 5})
    assert catalog.is_complete(repo, MODEL, 1, doc) == "model.py missing"
    repo.put(layout.version_file_key(MODEL, 1, "model.py"), b"abc")
    repo.put(layout.version_file_key(MODEL, 1, "sub/w.bin"), b"1234")
    assert catalog.is_complete(repo, MODEL, 1, doc) == "sub/w.bin has 4 bytes, manifest says 5"
    repo.put(layout.version_file_key(MODEL, 1, "sub/w.bin"), b"12345")
    assert catalog.is_complete(repo, MODEL, 1, doc) is None


def test_a_prefixed_repository_root(moto_s3: S3Server, s3_bucket: str) -> None:
    repo = Bucket(
        Environment("dev", layout.Root(s3_bucket, "team/a"), endpoint_url=moto_s3.endpoint, region=REGION),
        session=_session(),
    )
    flip(repo, 1)
    assert server_get(moto_s3, s3_bucket, f"team/a/{layout.config_key(MODEL)}").decode() == pin_text(1)
    assert catalog.read_pin(repo, MODEL).version == 1
    assert catalog.list_models(repo) == [MODEL]


# ---- allocation ----------------------------------------------------------------------------------


def allocations_on_server(server: S3Server, bucket: str) -> dict[int, dict[str, Any]]:
    out = {}
    for key in server_keys(server, bucket, layout.allocations_prefix(MODEL)):
        doc = codec.read(server_get(server, bucket, key), "model-sync.allocation/v1", model=MODEL)
        out[doc["version"]] = doc
    return out


def test_allocation_claims_the_next_number_with_a_marker(repo: Bucket, moto_s3: S3Server, s3_bucket: str) -> None:
    assert catalog.highest_allocated(repo, MODEL) == 0
    assert catalog.allocate(repo, MODEL, "push", "alice") == 1
    assert catalog.allocate(repo, MODEL, "push", "bob") == 2
    markers = allocations_on_server(moto_s3, s3_bucket)
    assert sorted(markers) == [1, 2]
    assert (markers[1]["purpose"], markers[1]["by"], markers[2]["by"]) == ("push", "alice", "bob")
    assert markers[1]["nonce"] != markers[2]["nonce"]
    repo.put(layout.version_file_key(MODEL, 7, "model.py"), b"x")  # a version written by another tool
    assert catalog.highest_allocated(repo, MODEL) == 7
    assert catalog.allocate(repo, MODEL, "push", "alice") == 8


def test_preferred_and_hinted_numbers(repo: Bucket, moto_s3: S3Server, s3_bucket: str) -> None:
    assert catalog.allocate(repo, MODEL, "promote", "ci", preferred=5) == 5
    assert catalog.allocate(repo, MODEL, "promote", "ci", preferred=5) == 6  # taken: the next after the highest
    assert catalog.allocate(repo, MODEL, "push", "ci", hint=9) == 10
    repo.put(layout.version_file_key(MODEL, 12, "model.py"), b"x")  # occupied, no marker (another tool)
    assert catalog.allocate(repo, MODEL, "push", "ci", hint=11) == 13
    assert sorted(allocations_on_server(moto_s3, s3_bucket)) == [5, 6, 10, 12, 13]  # 12's marker stays: never used
    assert server_keys(moto_s3, s3_bucket, layout.version_prefix(MODEL, 12)) == [
        layout.version_file_key(MODEL, 12, "model.py")
    ]  # not overwritten


def test_allocation_on_a_server_that_ignores_if_none_match(rclone_s3: S3Server) -> None:
    bucket = new_bucket(rclone_s3)
    repo = repo_on(rclone_s3, bucket)
    assert repo.conditional_writes_enforced() is False
    assert catalog.allocate(repo, MODEL, "push", "a") == 1
    assert catalog.allocate(repo, MODEL, "push", "b", preferred=1) == 2  # 1's marker is read back: taken
    assert catalog.allocate(repo, MODEL, "push", "c", hint=0) == 3
    assert sorted(allocations_on_server(rclone_s3, bucket)) == [1, 2, 3]
    assert allocations_on_server(rclone_s3, bucket)[1]["by"] == "a"  # never overwritten
