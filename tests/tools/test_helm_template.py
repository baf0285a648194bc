"""tools/helm_template.py: the real helm renders the pinned charts; what it refuses is one error
naming the release and helm's reason; renders are cached by what goes into them."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.gateway.certificates import cert_manager_values
from components.upstream import versions
from tools.helm_template import Release, Renderer, RenderError, builtin_api_versions, crd_api_versions, normalise, parse


def _cert_manager(values: dict[str, object]) -> Release:
    return Release("ingress-cert-manager", "cert-manager", "cert-manager", versions.CERT_MANAGER_CHART, values)


def _ingress_values() -> dict[str, object]:
    return cert_manager_values(2)


@pytest.fixture
def renderer(tmp_path: Path) -> Renderer:
    return Renderer(cache_dir=tmp_path / "renders")


def test_the_program_values_render(renderer: Renderer) -> None:
    docs = parse(renderer.template(_cert_manager(normalise(_ingress_values())), "1.33", builtin_api_versions("1.33")))
    # The controller's configuration file carries the program's `config` (Gateway API support on).
    (config,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "cert-manager"]
    assert "enableGatewayAPI: true" in config["data"]["config.yaml"]
    (controller,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "cert-manager"]
    assert controller["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        # The chart's values.schema.json refuses keys it does not know, at the top and below.
        ({"installCRDs": True, "crdz": {}}, "additional properties 'crdz' not allowed"),
        ({"webhook": {"replicas": 2}}, "at '/webhook': additional properties 'replicas' not allowed"),
    ],
)
def test_a_schema_violation_is_one_error_naming_the_release(
    renderer: Renderer, values: dict[str, object], reason: str
) -> None:
    with pytest.raises(RenderError) as err:
        renderer.template(_cert_manager(values), "1.33", builtin_api_versions("1.33"))
    assert str(err.value).startswith(
        "ingress-cert-manager (cert-manager v1.20.2): Error: values don't meet the specifications"
    )
    assert reason in str(err.value)
    assert "\n" not in str(err.value)


def test_render_all_reports_each_refused_release_and_renders_the_rest(renderer: Renderer) -> None:
    good = _cert_manager(normalise(_ingress_values()))
    bad = Release("broken", "cert-manager", "cert-manager", versions.CERT_MANAGER_CHART, {"crdz": {}})
    got = renderer.render_all([good, bad], "1.33")
    assert sorted(got.objects) == ["ingress-cert-manager"]
    assert list(got.errors) == ["broken"]
    # The second pass sees the CRDs the first one rendered.
    assert "cert-manager.io/v1/Certificate" in got.api_versions


def test_renders_are_cached_by_their_inputs(renderer: Renderer) -> None:
    release = _cert_manager(normalise(_ingress_values()))
    first = renderer.template(release, "1.33", builtin_api_versions("1.33"))
    assert len(list(renderer.cache_dir.glob("*.yaml"))) == 1
    assert renderer.template(release, "1.33", builtin_api_versions("1.33")) == first
    assert len(list(renderer.cache_dir.glob("*.yaml"))) == 1
    renderer.template(release, "1.34", builtin_api_versions("1.34"))
    assert len(list(renderer.cache_dir.glob("*.yaml"))) == 2
    assert not list(renderer.cache_dir.glob(".*"))


def test_a_missing_archive_names_make_charts(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="run `make charts`"):
        Renderer(chart_cache=tmp_path, cache_dir=tmp_path / "r").template(_cert_manager({}), "1.33", [])


def test_builtin_api_versions_are_the_ga_groups_of_that_release() -> None:
    apis = builtin_api_versions("1.33")
    assert {"v1", "v1/Service", "apps/v1/Deployment", "apiregistration.k8s.io/v1/APIService", "autoscaling/v2"} <= set(
        apis
    )
    assert not [a for a in apis if "alpha" in a or "beta" in a]
    assert "policy/v1beta1" not in apis


def test_crd_api_versions_are_every_served_version() -> None:
    crd = {
        "kind": "CustomResourceDefinition",
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget"},
            "versions": [{"name": "v1"}, {"name": "v2", "served": False}],
        },
    }
    assert crd_api_versions([crd, {"kind": "ConfigMap"}]) == {"example.com/v1", "example.com/v1/Widget"}


def test_numbers_arrive_as_the_provider_sends_them() -> None:
    assert normalise({"a": [1.0, 2.5, {"b": 3.0}], "c": True, "d": "1.0"}) == {
        "a": [1, 2.5, {"b": 3}],
        "c": True,
        "d": "1.0",
    }


def test_a_bare_equals_sign_is_a_string() -> None:
    assert parse("a: =\n---\n---\nb: [=, x]\n") == [{"a": "="}, {"b": ["=", "x"]}]


def test_objects_are_parsed_once_and_kept_as_json(renderer: Renderer) -> None:
    release = _cert_manager(normalise(_ingress_values()))
    docs = renderer.objects(release, "1.33", builtin_api_versions("1.33"))
    assert docs == parse(renderer.template(release, "1.33", builtin_api_versions("1.33")))
    (kept,) = renderer.cache_dir.glob("*.objects.json")
    kept.write_text('[{"kind": "Marker"}]')  # the next call reads the kept objects, not the YAML
    assert renderer.objects(release, "1.33", builtin_api_versions("1.33")) == [{"kind": "Marker"}]
