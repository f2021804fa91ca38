"""What the builders of the public generators share: unknown keyword arguments refused
before any work (`check_common`), the worker processes they ask for
(`worker_processes`), and the seeded validation split's two answers (`Splits.split`,
`one_subset`)."""

from __future__ import annotations

import inspect
from typing import Any, Self

from kerasgen import _checks
from kerasgen import _redact
from kerasgen.base import Generator
from kerasgen.pipeline import feeding as _feeding
from kerasgen.sources import _core as sources

TRAINING_ONLY = ("augment", "batch_augment", "sampler", "drop_remainder")


def check_common(gen: Any, common: dict[str, Any]) -> None:
    """The TypeError of `Generator.__init__` for unknown keyword arguments, raised before
    the subclass does any work."""
    known = inspect.signature(Generator.__init__).parameters
    unknown = {k: v for k, v in common.items() if k not in known}
    if unknown:
        _checks.unknown_arguments(gen, unknown)


def worker_processes(common: dict[str, Any]) -> int | None:
    """The worker processes `common` asks for (None: none), as _feeding decides."""
    return _feeding.worker_processes(common.get("workers", 1),
                                     common.get("use_multiprocessing", False))


class Splits:
    """`split()` and one answer to `subset="both"`, for every generator that takes a
    seeded `validation_split` (the folder, CSV, detection and SQL generators)."""

    @classmethod
    @_redact.passed_over
    def split(cls, *args: Any, validation_split: float, seed: int,
              **kwargs: Any) -> tuple[Self, Self]:
        """The (training, validation) pair of one seeded, stratified split, as Keras's
        `subset="both"` returns it: `cls(*args, validation_split=..., subset=...,
        seed=..., **kwargs)` twice. The validation generator keeps the source order
        (shuffle=False) and gets none of the training-only `augment`, `batch_augment`,
        `sampler` and `drop_remainder`, so its metrics count the data as it is; where the
        training augmentation changes the images' size (a random crop, as
        `kg.augment.typical` makes), it takes the centre of each image at that size
        (`kg.augment.center_crop`), so the model sees one shape at a like scale.
        """
        if "subset" in kwargs:
            raise TypeError(f"{cls.__name__}.split() makes both subsets; it takes no "
                            f"`subset`. Received: subset={kwargs['subset']!r}.")
        make: Any = cls  # a generator class (this is its mixin)
        train = make(*args, validation_split=validation_split, subset="training",
                     seed=seed, **kwargs)
        from kerasgen import augment as augment_mod

        kwargs = validation_options(kwargs)
        kwargs["shuffle"] = False
        trained, plain = train.sample_shape, sources.sample_shape_of(train.source)
        if trained is not None and plain is not None and trained != plain and len(
                trained) == len(plain) and trained[2:] == plain[2:] and (
                kwargs.get("augment") is None):
            kwargs["augment"] = augment_mod.center_crop(trained[:2])
        validation = make(*args, validation_split=validation_split, subset="validation",
                          seed=seed, **kwargs)
        return train, validation


def validation_options(options: dict[str, Any]) -> dict[str, Any]:
    """A training generator's `options` for its validation generator: the training-only
    ones left out (what draws goes), the deterministic steps of `augment` and
    `batch_augment` (a preprocessing: a `map_batch`, a centre crop) kept."""
    from kerasgen import augment as augment_mod

    kept = {k: v for k, v in options.items() if k not in TRAINING_ONLY}
    for name in ("augment", "batch_augment"):
        step = augment_mod.deterministic_part(options.get(name))
        if step is not None:
            kept[name] = step
    return kept


def one_subset(gen: Any, subset: Any) -> None:
    """`subset="both"` asks one generator for two: refused, naming `split()`."""
    if isinstance(subset, str) and subset == "both":
        name = type(gen).__name__
        raise ValueError(
            "`subset` must be 'training' or 'validation' for one generator. Received: "
            f"subset='both'. For the (training, validation) pair use kg.{name}.split(..., "
            "validation_split=..., seed=...)"
            + (" or kg.image_dataset_from_directory(..., subset='both')."
               if name == "ImageFolderGenerator" else "."))
