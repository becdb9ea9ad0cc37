"""Progress reporting without printing: library code takes a factory, the CLI passes tqdm."""

from __future__ import annotations

from typing import Any, Protocol


class Bar(Protocol):
    def update(self, n: int = 1) -> Any: ...
    def set_postfix(self, **values: Any) -> Any: ...
    def close(self) -> Any: ...


class ProgressFactory(Protocol):
    def __call__(self, *, total: int, desc: str) -> Bar: ...


class _NullBar:
    def update(self, n: int = 1) -> None:
        return None

    def set_postfix(self, **values: Any) -> None:
        return None

    def close(self) -> None:
        return None


def null_progress(*, total: int, desc: str) -> Bar:
    """A factory whose bars do nothing (the default in library code)."""
    return _NullBar()
