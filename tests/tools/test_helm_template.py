"""tools/helm_template.py: the real helm renders the pinned charts; what it refuses is one error
naming the release and helm's reason; renders are cached by what goes into them."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.ingress import IngressArgs, TritonBackend, traefik_values
from components.upstream import versions
from tools.helm_template import Release, Renderer, RenderError, builtin_api_versions, crd_api_versions, normalise, parse


def _traefik(values: dict[str, object]) -> Release:
    return Release("ingress-traefik", "traefik", "ingress", versions.TRAEFIK_CHART, values)


def _ingress_values() -> dict[str, object]:
    args = IngressArgs(
        domain="example.com",
        acme_email="ops@example.com",
        backends=(TritonBackend("default", "triton-default", ("m",)),),
        allowed_cidrs=("10.0.0.0/8",),
    )
    return traefik_values(args)


@pytest.fixture
def renderer(tmp_path: Path) -> Renderer:
    return Renderer(cache_dir=tmp_path / "renders")


def test_the_program_values_render(renderer: Renderer) -> None:
    docs = parse(renderer.template(_traefik(normalise(_ingress_values())), "1.33", builtin_api_versions("1.33")))
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--log.format=json" in args
    assert "--accesslog=true" in args
    assert "--accesslog.format=json" in args
    assert "--entryPoints.websecure.http.tls=true" in args


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        # What main held before traefik chart 41 / 39 renamed them (the chart's values.schema.json refuses both).
        ({"logs": {"general": {"format": "json"}}}, "additional properties 'logs' not allowed"),
        (
            {"ports": {"websecure": {"tls": {"enabled": True}}}},
            "at '/ports/websecure': additional properties 'tls' not allowed",
        ),
    ],
)
def test_a_schema_violation_is_one_error_naming_the_release(
    renderer: Renderer, values: dict[str, object], reason: str
) -> None:
    with pytest.raises(RenderError) as err:
        renderer.template(_traefik(values), "1.33", builtin_api_versions("1.33"))
    assert str(err.value).startswith("ingress-traefik (traefik 41.3.0): Error: values don't meet the specifications")
    assert reason in str(err.value)
    assert "\n" not in str(err.value)


def test_render_all_reports_each_refused_release_and_renders_the_rest(renderer: Renderer) -> None:
    good = _traefik(normalise(_ingress_values()))
    bad = Release("broken", "traefik", "ingress", versions.TRAEFIK_CHART, {"logs": {}})
    got = renderer.render_all([good, bad], "1.33")
    assert sorted(got.objects) == ["ingress-traefik"]
    assert list(got.errors) == ["broken"]
    # The second pass sees the CRDs the first one rendered.
    assert "traefik.io/v1alpha1/IngressRoute" in got.api_versions


def test_renders_are_cached_by_their_inputs(renderer: Renderer) -> None:
    release = _traefik(normalise(_ingress_values()))
    first = renderer.template(release, "1.33", builtin_api_versions("1.33"))
    assert len(list(renderer.cache_dir.glob("*.yaml"))) == 1
    assert renderer.template(release, "1.33", builtin_api_versions("1.33")) == first
    assert len(list(renderer.cache_dir.glob("*.yaml"))) == 1
    renderer.template(release, "1.34", builtin_api_versions("1.34"))
    assert len(list(renderer.cache_dir.glob("*.yaml"))) == 2
    assert not list(renderer.cache_dir.glob(".*"))


def test_a_missing_archive_names_make_charts(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="run `make charts`"):
        Renderer(chart_cache=tmp_path, cache_dir=tmp_path / "r").template(_traefik({}), "1.33", [])


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
    release = _traefik(normalise(_ingress_values()))
    docs = renderer.objects(release, "1.33", builtin_api_versions("1.33"))
    assert docs == parse(renderer.template(release, "1.33", builtin_api_versions("1.33")))
    (kept,) = renderer.cache_dir.glob("*.objects.json")
    kept.write_text('[{"kind": "Marker"}]')  # the next call reads the kept objects, not the YAML
    assert renderer.objects(release, "1.33", builtin_api_versions("1.33")) == [{"kind": "Marker"}]
