"""A generator's targets: its `Targets` built and checked from its arguments
(`generator_targets`), and the classes of the generators given to one `fit` compared
(`check_fit_partners`). The encoders are `labels.encoding`, the label cells of tables
`labels.cells`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kerasgen import _checks
from kerasgen.labels.encoding import LABEL_MODES, MASK_FORMATS, Describe, Targets, encode, row_name


def _length(values: Any) -> int:
    if isinstance(values, dict):
        return len(next(iter(values.values()))) if values else 0
    return len(values)


def generator_targets(num_samples: int, labels: Any, label_mode: str | None,
                      class_names: Sequence[str] | None = None,
                      num_classes: int | None = None, mask_format: str = "ids",
                      sample_weight: npt.ArrayLike | None = None,
                      describe: Describe | None = None) -> Targets:
    """The Targets of a generator from its arguments (`label_mode` resolved: not
    "auto"), checked: the label mode and mask format, labels that the mode needs and
    one per sample, and `sample_weight` (float32, one finite weight per sample)."""
    _checks.one_of("mask_format", mask_format, MASK_FORMATS)
    _checks.one_of("label_mode", label_mode, LABEL_MODES)
    if label_mode == "mask" and mask_format == "one_hot" and num_classes is None and (
            class_names is None):
        raise ValueError("mask_format='one_hot' needs `num_classes` (or `class_names`): "
                         "the width of the one-hot masks. Received: num_classes=None.")
    if label_mode == "boxes" and labels is not None:
        raise ValueError(
            "label_mode='boxes' takes each image's boxes and their classes from its "
            "annotations (kg.DetectionGenerator), so it takes no labels. Received: labels "
            "for label_mode='boxes'.")
    if label_mode == "image" and labels is not None:
        raise ValueError(
            "label_mode='image' makes each sample's target its paired image (target_dir=), "
            "so it takes no labels. Received: labels for label_mode='image'.")
    if label_mode == "input" and labels is not None:
        raise ValueError(
            "label_mode='input' makes each sample's target its own (augmented) input, so "
            "it takes no labels. Received: labels for label_mode='input'. Leave the "
            "labels out, or use another label_mode.")
    if labels is None and label_mode not in (None, "raw", "mask", "input", "boxes", "image"):
        raise ValueError(
            f"label_mode={label_mode!r} needs labels, but none were given. Pass "
            "`labels` (one per sample) or use label_mode=None."
        )
    if labels is not None and _length(labels) != num_samples:
        raise ValueError(
            f"`labels` must hold one entry per sample ({num_samples}). "
            f"Received: {_length(labels)} labels."
        )
    targets = encode(labels, label_mode, class_names, num_classes, describe=describe)
    if label_mode in ("input", "boxes", "image"):
        targets.label_mode = label_mode  # y is x (BatchMaker), or what the source loaded
    if label_mode == "mask":
        targets.mask_format = mask_format
    if sample_weight is not None and label_mode is None:
        raise ValueError(
            "`sample_weight` needs labels: with label_mode=None a batch is x alone, and "
            "the weights would be dropped. Received: sample_weight with label_mode=None. "
            "Give the generator labels (and a label_mode), or leave sample_weight out.")
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype="float32")
        if sample_weight.shape != (num_samples,):
            raise ValueError(
                f"`sample_weight` must have shape ({num_samples},), one weight "
                f"per sample. Received: shape {sample_weight.shape}."
            )
        if not np.isfinite(sample_weight).all():
            i = int(np.flatnonzero(~np.isfinite(sample_weight))[0])
            raise ValueError(f"`sample_weight` must be finite. Received: "
                             f"{sample_weight[i]} at {row_name(describe, i)}.")
        targets.sample_weight = sample_weight
    return targets



def check_same_classes(gen: Any, other: Any,
                       roles: tuple[str, str] = ("training", "validation")) -> None:
    """Raises when two generators given to one `fit` map classes to different ids, or
    make one-hot / multi-hot targets of different widths (any data with `class_names` is
    compared: a Keras `image_dataset_from_directory` too)."""
    mine = (getattr(gen, "class_names", None), getattr(gen, "num_classes", None))
    theirs = (getattr(other, "class_names", None), getattr(other, "num_classes", None))
    if not isinstance(mine[0], list) or not isinstance(theirs[0], list):
        return
    if mine[0] == theirs[0] and None in (mine[1], theirs[1]) or mine == theirs:
        return
    common = min(len(mine[0]), len(theirs[0]))
    widths = {getattr(gen, "label_mode", None), getattr(other, "label_mode", None)} & {
        "categorical", "multi_label"}
    if mine[0][:common] == theirs[0][:common] and not widths:
        return  # every class both know has one id, and no target's width depends on it

    def shown(names: list[Any]) -> str:
        return repr(names) if len(names) <= 20 else f"{names[:20]!r}[:20] of {len(names)}"

    first, second = roles
    differ = next((k for k, (a, b) in enumerate(zip(mine[0], theirs[0])) if a != b), None)
    if differ is not None:
        detail = (f"class id {differ} is {mine[0][differ]!r} in the {first} data and "
                  f"{theirs[0][differ]!r} in the {second} data")
    else:
        detail = (f"num_classes is {mine[1]} in the {first} data and {theirs[1]} in the "
                  f"{second} data")
    raise ValueError(
        f"The {first} and {second} generators given to fit have different classes: "
        f"{first} class_names={shown(mine[0])}, {second} class_names={shown(theirs[0])}, "
        f"so {detail}, and the {second} labels would be read wrongly. Build the "
        f"{second} generator with class_names=train.class_names (for a validation part of "
        "one table or folder, use validation_split and subset with the same seed).")


def check_fit_partners(gen: Any, fit_data: tuple[Any, Any] | None) -> None:
    """In `fit` (`fit_data` = its (x, validation_data), or None outside it): raises when
    `gen` is one of the two and the other, a kerasgen generator too, has other classes."""
    if fit_data is None:
        return
    x, validation = fit_data
    if gen is x and validation is not None:
        check_same_classes(gen, validation)
    elif gen is validation and x is not None:
        check_same_classes(x, gen)
