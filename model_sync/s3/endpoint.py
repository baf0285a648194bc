"""What the S3 layer knows of an environment (`Endpoint`): its name (for messages), its bucket root,
the S3 endpoint URL and the region. model_sync.environments.Environment is one; the S3 layer imports
nothing else of the environments."""

from __future__ import annotations

from typing import Protocol

from model_sync.contract import layout


class Endpoint(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def root(self) -> layout.Root: ...

    @property
    def bucket(self) -> str: ...

    @property
    def endpoint_url(self) -> str | None: ...

    @property
    def region(self) -> str | None: ...
