"""Configuration objects of the DSL: how a store is materialized."""

from __future__ import annotations

from dataclasses import dataclass, replace

from streamtable.serde import Serde


@dataclass(frozen=True)
class Materialized:
    """Names a store (making it queryable) and sets its serdes, caching and logging.

    Wherever the DSL takes ``materialized=``, a plain store name works too.

    >>> Materialized.as_("us-share-holders").with_caching_disabled().caching
    False
    """

    name: str | None = None
    key_serde: Serde | str | None = None
    value_serde: Serde | str | None = None
    caching: bool | None = None
    logging: bool = True
    retention: int | None = None

    @classmethod
    def as_(cls, name: str) -> Materialized:
        return cls(name=name)

    def with_key_serde(self, serde: Serde | str) -> Materialized:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde | str) -> Materialized:
        return replace(self, value_serde=serde)

    def with_caching_disabled(self) -> Materialized:
        return replace(self, caching=False)

    def with_caching_enabled(self) -> Materialized:
        return replace(self, caching=True)

    def with_logging_disabled(self) -> Materialized:
        return replace(self, logging=False)

    def with_retention(self, retention_ms: int) -> Materialized:
        """How long a window or session store keeps a window (ms past its start; a session:
        past its end) before deleting it. Defaults to the window size (or inactivity gap) plus
        the grace period; sliding windows: twice the time difference plus the grace period.
        It may not be shorter than that.

        >>> Materialized.as_("counts").with_retention(3_600_000).retention
        3600000
        """
        if retention_ms < 0:
            raise ValueError("retention must not be negative")
        return replace(self, retention=retention_ms)


def as_materialized(spec: Materialized | str | None) -> Materialized | None:
    if spec is None or isinstance(spec, Materialized):
        return spec
    if isinstance(spec, str):
        return Materialized(name=spec)
    raise TypeError(f"materialized must be a store name or Materialized, got {type(spec).__name__}")
