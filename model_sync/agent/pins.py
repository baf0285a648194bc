"""What a pin (a model's config.pbtxt, in the bucket or local) says: the versions it pins and the
files its backend needs. Read by the bucket side (a pin against its manifest) and the local side
(adopting what is in place)."""

from __future__ import annotations

from model_sync.agent.exceptions import Rejection, VersionRejected


def pinned_versions(config_text: str) -> tuple[int, ...]:
    """Versions pinned by a config.pbtxt (`version_policy { specific { versions: [...] } }`).

    Parsed through Triton's protobuf model config (a misspelled field is an error).
    """

    from model_sync.triton_model import model_config  # protobuf's text_format: loaded only when a config is parsed

    try:
        cfg = model_config.parse(config_text)
    except model_config.ConfigPbtxtError as e:
        raise VersionRejected(str(e), Rejection.PIN_INVALID) from None
    if cfg.version_policy.WhichOneof("policy_choice") != "specific" or not cfg.version_policy.specific.versions:
        raise VersionRejected(
            "config.pbtxt version_policy: not 'specific'; allowed: version_policy { specific { versions: [N] } }",
            Rejection.PIN_INVALID,
        )
    return tuple(sorted(int(v) for v in cfg.version_policy.specific.versions))


def backend_files(config_text: str) -> tuple[str, ...]:
    """The files the pinned config's backend needs in the version directory: model.py for the
    python backend, model.pt (or default_model_filename) for libtorch, ... (model_config)."""

    from model_sync.triton_model import model_config  # protobuf's text_format: loaded only when a config is parsed

    try:
        return model_config.required_files(model_config.parse(config_text))
    except model_config.ConfigPbtxtError as e:
        raise VersionRejected(str(e), Rejection.PIN_INVALID) from None
