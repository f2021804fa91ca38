"""The subclass path as a source: a generator whose class fills hooks loads through them.

A `kg.Generator` subclass may say itself what its samples are (`num_samples`, `labels`
and `load_sample`: `CountedSamples`), or override the hooks of a source's batches
(`load_sample`, `describe_sample`, `load_batch`, `assemble`, `augment_sample`,
`finish_x`). Then `HookSource` is the source its batch maker loads from: a source like
any other, whose members call the generator's hooks. A generator that overrides no hook
loads from its source directly, and never passes through here.

The default hooks (in base.py) serve the batch being made: `HookSource.load_batch`
holds its data-only `BatchRequest` for the thread making it, so that a subclass's
`super().load_batch(indices, positions, ...)` loads with that batch's epoch and seed.
"""

from __future__ import annotations

import threading
from typing import Any

from kerasgen import _checks
from kerasgen.sources._core import BatchRequest

HOOKS = ("load_sample", "describe_sample", "load_batch", "assemble", "augment_sample",
         "finish_x")  # the methods of Generator a subclass may fill


class CountedSamples:
    """The source of a subclass that says itself what its samples are (`num_samples`,
    `labels`); its own `load_sample` and `describe_sample` load and name them."""

    def __init__(self, owner: str, num_samples: int, labels: Any) -> None:
        self.owner = owner
        self.num_samples = _checks.non_negative_int("num_samples", num_samples)
        self.labels = labels
        self.class_names = None

    def __len__(self) -> int:
        return self.num_samples

    def describe(self, index: int) -> str:
        return f"sample {index}"

    def load(self, index: int) -> Any:
        raise NotImplementedError(
            f"{self.owner} must implement load_sample(index) -> x or (x, y).")


class HookSource:
    """The source of generator `owner`, whose class fills hooks, over its source
    `inner`: samples are named, loaded and batched by the generator's methods; every
    other member (labels, features, file paths, remote prefetching...) is the inner
    source's."""

    def __init__(self, owner: Any, inner: Any) -> None:
        self.owner, self.inner = owner, inner
        self._local = threading.local()

    def __len__(self) -> int:
        return len(self.inner)

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("inner")
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(inner, name)

    def describe(self, index: int) -> str:
        return str(self.owner.describe_sample(index))

    def load(self, index: int) -> Any:
        return self.owner.load_sample(index)

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """The generator's `load_batch(indices, positions[, partners, lams])`, with
        `request` held for its default hooks on this thread."""
        self._local.request = request
        try:
            if request.partners is None:
                return self.owner.load_batch(request.indices, request.positions)
            return self.owner.load_batch(request.indices, request.positions,
                                         request.partners, request.lams)
        finally:
            self._local.request = None

    def current(self) -> BatchRequest | None:
        """The request of the batch this thread is making (None outside one: a hook
        called by hand)."""
        return getattr(self._local, "request", None)

    def __getstate__(self) -> dict[str, Any]:
        return {"owner": self.owner, "inner": self.inner}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()


class OwnAugment:
    """A subclass's own `augment_sample(x, position, mask)` in the place of the
    augmentation stage (what a source calls through `BatchRequest.augmented`)."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner

    def apply(self, x: Any, seed: int, epoch: int, position: int, mask: Any = None,
              dtype: str | None = None, rescale: float | None = None) -> tuple[Any, Any]:
        return self.owner.augment_sample(x, position, mask)
