"""model_sync/contract/layout.py: the repository's key builders and parsers, the name/version/path rules
and the repository root (`Root`), shared by the stacks (components/) and model_sync."""

from __future__ import annotations

import pytest

from model_sync.contract import layout


def test_key_builders_follow_the_documented_layout() -> None:
    assert layout.config_key("resnet") == "repository/resnet/config.pbtxt"
    assert layout.version_file_key("resnet", 3, "model.pt") == "repository/resnet/3/model.pt"
    assert layout.manifest_key("resnet", 3) == "manifests/resnet/3.json"
    assert layout.allocation_key("resnet", 3) == "audit/allocations/resnet/3.json"
    assert layout.verification_key("resnet", 3) == "audit/verifications/resnet/3.json"
    assert layout.promotion_key("resnet", 3) == "audit/promotions/resnet/3.json"
    assert (
        layout.pin_record_key("resnet", "20260101T000000000001Z", 3)
        == "audit/pins/resnet/20260101T000000000001Z-3.json"
    )
    assert layout.status_key("triton-a", "pod-1") == "status/triton-a/pod-1.json"
    root = layout.Root.parse("s3://bkt/some/prefix/")
    assert (root.bucket, root.prefix, root.key("x")) == ("bkt", "some/prefix", "some/prefix/x")
    assert root.relative("some/prefix/x") == "x"
    assert layout.version_from_dir("12/") == 12
    assert layout.version_from_dir("012") is None
    assert layout.version_from_json_key("manifests/m/7.json") == 7


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: layout.check_model_name("bad/name"), r"model name: 'bad/name'; allowed"),
        (lambda: layout.check_model_name("..x"), r"model name: '\.\.x'"),
        # one rule with the stacks' tritonDeployments.<d>.models and the ingress (lower case, 63)
        (lambda: layout.check_model_name("ResNet"), r"model name: 'ResNet'; allowed: 1-63 characters of a-z 0-9 _ -"),
        (lambda: layout.check_model_name("m" * 64), r"model name: 'm{64}'"),
        (lambda: layout.check_version(0), r"version: 0; allowed: an integer 1\.\."),
        (lambda: layout.check_version(True), r"version: True"),
        (lambda: layout.check_file_path("../etc/passwd"), r"file path: '\.\./etc/passwd'"),
        (lambda: layout.check_file_path("a//b"), r"file path: 'a//b'"),
        (lambda: layout.Root.parse("bkt/x"), r"bucket URI: 'bkt/x'; allowed: s3://bucket\[/prefix\]"),
        (lambda: layout.Root.parse("s3://B_K"), r"bucket: 'B_K'"),
        (lambda: layout.pin_record_key("m", "yesterday", 1), r"pin stamp: 'yesterday'"),
        (lambda: layout.status_key("Bad_Dep", "r"), r"deployment: 'Bad_Dep'"),
    ],
)
def test_layout_rejects_bad_values(call, match) -> None:
    with pytest.raises(layout.LayoutError, match=match):
        call()


def test_the_remaining_key_builders_follow_the_documented_layout() -> None:
    assert layout.model_prefix("resnet") == "repository/resnet/"
    assert layout.version_prefix("resnet", 3) == "repository/resnet/3/"
    assert layout.version_file_key("resnet", 3, "sub/dir/weights.bin") == "repository/resnet/3/sub/dir/weights.bin"
    assert layout.manifests_prefix("resnet") == "manifests/resnet/"
    assert layout.pin_index_key("resnet") == "manifests/_pins/resnet.json"
    assert layout.allocations_prefix("resnet") == "audit/allocations/resnet/"
    assert layout.pins_prefix("resnet") == "audit/pins/resnet/"
    assert layout.verification_attempts_prefix("resnet", 3) == "audit/verifications/resnet/3/"
    assert (
        layout.verification_attempt_key("resnet", 3, "20260101T000000000001Z", "0a1b2c3d")
        == "audit/verifications/resnet/3/20260101T000000000001Z-0a1b2c3d.json"
    )
    assert layout.PROBE_KEY == "audit/.conditional-write-probe"


def test_identities_write_only_their_documented_prefixes() -> None:
    assert layout.SERVING_READ_PREFIXES == ("repository/", "manifests/")
    assert layout.SERVING_WRITE_PREFIXES == ("status/",)
    assert layout.PUBLISHER_WRITE_PREFIXES == ("repository/", "manifests/", "audit/")
    assert layout.pin_index_key("m").startswith(layout.SERVING_READ_PREFIXES)  # agents may read the pin index


@pytest.mark.parametrize(
    ("key", "model"),
    [("manifests/_pins/resnet.json", "resnet"), ("manifests/_pins/Res.json", None),
     ("manifests/_pins/resnet.txt", None),
     ("manifests/resnet/3.json", None), ("manifests/_pins/.json", None), ("other/_pins/resnet.json", None)],
)  # fmt: skip
def test_pin_index_keys_parse_back_to_their_model(key: str, model: str | None) -> None:
    assert layout.model_from_pin_index_key(key) == model
    if model is not None:
        assert layout.pin_index_key(model) == key


@pytest.mark.parametrize(
    ("segment", "version"),
    [("1", 1), ("12/", 12), (str(layout.MAX_VERSION), layout.MAX_VERSION), (str(layout.MAX_VERSION + 1), None),
     ("0", None), ("-1", None),
     ("latest/", None), ("config.pbtxt", None), ("1e3", None), ("", None)],
)  # fmt: skip
def test_version_directories_are_canonical_positive_int64(segment: str, version: int | None) -> None:
    assert layout.version_from_dir(segment) == version


def test_json_keys_parse_only_numbered_leaves() -> None:
    assert layout.version_from_json_key(layout.allocation_key("m", 41)) == 41
    assert layout.version_from_json_key(layout.manifest_key("m", 9)) == 9
    assert layout.version_from_json_key("manifests/m/9.txt") is None
    assert layout.version_from_json_key("manifests/m/09.json") is None


def test_names_versions_and_paths_at_their_limits_are_accepted() -> None:
    assert layout.check_model_name("m" * 63) == "m" * 63
    assert layout.check_model_name("0_a-b") == "0_a-b"
    assert layout.check_version(layout.MAX_VERSION) == layout.MAX_VERSION
    assert layout.check_file_path("a/b.c/d+e-f_g") == "a/b.c/d+e-f_g"
    for bad in (".hidden", "a/.git/x", "-flag", "/abs", "a/", ""):
        with pytest.raises(layout.LayoutError, match=r"^file path: "):
            layout.check_file_path(bad)
    with pytest.raises(layout.LayoutError, match=r"^version: "):
        layout.check_version(layout.MAX_VERSION + 1)
    with pytest.raises(layout.LayoutError, match=r"^verification stamp: "):
        layout.verification_attempt_key("m", 1, "20260101T000000000001Z", "XYZ")


def test_a_root_without_prefix_and_the_relative_key_rule() -> None:
    root = layout.Root.parse("s3://models")
    assert (root.bucket, root.prefix, root.key("a/b"), root.relative("a/b"), root.uri("x")) == (
        "models",
        "",
        "a/b",
        "a/b",
        "s3://models/x",
    )
    prefixed = layout.Root("models", "team/a")
    assert prefixed.uri() == "s3://models/team/a/"
    with pytest.raises(layout.LayoutError, match=r"key: 'other/x'; allowed: keys under 'team/a/'"):
        prefixed.relative("other/x")
    for prefix in ("/lead", "trail/", "a//b"):
        with pytest.raises(layout.LayoutError, match=r"^bucket prefix: "):
            layout.Root("models", prefix)
