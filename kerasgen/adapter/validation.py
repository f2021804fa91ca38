"""What keeps validation measured as it is (issue 48), for `base.Generator`: which
options make an epoch's samples other than the data's (a sampler, a drawing
augmentation; a deterministic step is a preprocessing), the refusal of them in a
validation subset, a generator's sample shape after its augmentation, and the check
`fit` makes of its `validation_data` before the first step."""

from __future__ import annotations

from typing import Any

import numpy as np

from kerasgen import _seeding as seeding
from kerasgen import augment as augment_mod
from kerasgen.sources import _core as sources_mod


def changes(sampler: Any, augment: Any, batch_augment: Any) -> list[str]:
    """The options that make an epoch's samples other than the data's, as `name=value`:
    a sampler, an augmentation (a deterministic one such as `kg.augment.center_crop` is
    a preprocessing, and is not counted), a batch augmentation."""
    return [f"{name}={_short(value)}" for name, value in (
        ("sampler", sampler), ("augment", augment), ("batch_augment", batch_augment))
        if value is not None and (name == "sampler" or _changing(value))]


def _changing(value: Any) -> bool:
    """Whether an augmentation (a step, or a list of steps) draws: a deterministic step
    (`kg.augment.deterministic`) is a preprocessing."""
    steps = value if isinstance(value, (list, tuple)) else [value]
    return not all(augment_mod.deterministic(step) for step in steps)


def _short(value: Any, limit: int = 80) -> str:
    """`repr(value)` on one line, cut at `limit` characters (an albumentations Compose's
    repr lists every transform on lines of its own)."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def refuse_in_validation(gen: Any, sampler: Any, augment: Any, batch_augment: Any,
                         drop_remainder: bool) -> None:
    """A validation subset (`subset="validation"`, set by the builder before this
    generator's own __init__) is measured as it is: a sampler, an augmentation or
    drop_remainder would change what its metrics count."""
    if getattr(gen, "subset", None) != "validation":
        return
    found = changes(sampler, augment, batch_augment) + (
        ["drop_remainder=True"] if drop_remainder else [])
    if found:
        name = type(gen).__name__
        raise ValueError(
            f"The validation subset must be measured as it is. Received: subset="
            f"'validation' with {', '.join(found)}, which would make its metrics count "
            "resampled, augmented or dropped samples. Leave "
            f"{'them' if len(found) > 1 else 'it'} out of the validation generator, or "
            f"build both with {name}.split(..., validation_split=..., seed=...), which "
            "gives them to the training generator only.")


def sample_shape(gen: Any) -> tuple[int, ...] | None:
    """See `Generator.sample_shape`."""
    shape = sources_mod.sample_shape_of(gen.source)
    if shape is None or gen.augment is None:
        return shape
    if gen.label_mode in ("mask", "boxes", "image"):
        return None  # augmented with their targets: not probed on a blank image
    try:
        out = augment_mod.SampleAugment(gen.augment)(
            np.zeros(shape, np.uint8), seeding.rng(gen.seed, seeding.AUGMENT, 0, 0))
    except Exception:  # noqa: BLE001 - a blank sample refused: the shape stays unknown
        return None
    return tuple(np.shape(out))


def check_partner(gen: Any, fit_data: tuple[Any, Any] | None, kind: type) -> None:
    """In `fit` (`fit_data` its (x, validation_data)), before the first step: a kerasgen
    validation generator must measure its data as it is (no sampler, augment or
    batch_augment) and give samples of the training batches' shape."""
    if fit_data is None:
        return
    x, validation = fit_data
    if gen is not x or not isinstance(validation, kind):
        return
    validation_: Any = validation  # a generator of `kind`
    found = changes(validation_.sampler, validation_.augment, validation_.batch_augment)
    if found:
        raise ValueError(
            f"`validation_data` must be measured as it is. Received: a "
            f"{type(validation).__name__} with {', '.join(found)}: its metrics would "
            "count resampled or augmented samples (rare classes repeated, transformed "
            "images). Build the validation generator without them, or both with "
            "split() (ImageFolderGenerator.split, CSVGenerator.split), which does.")
    trained, validated = gen.sample_shape, validation_.sample_shape
    if trained is not None and validated is not None and trained != validated:
        raise ValueError(
            f"`validation_data` must give samples of the training batches' shape. "
            f"Received: {type(validation).__name__} samples of shape {validated}, "
            f"while the training generator's augment={_short(gen.augment)} makes them "
            f"{trained}: the model would be validated at another scale, or fail after "
            "the first epoch. Build both with split(), which centre-crops validation "
            "images to the training size, or pass the validation generator "
            f"augment=kg.augment.center_crop({trained[:2]}).")
