"""tf.train.Example records (TFRecord and ArrayRecord files hold them): the Example class
imported, a feature's values read by their kind, a feature spec checked. Nothing is
cast: a feature whose list is not the one its kind reads is an error naming it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from kerasgen import _checks
from kerasgen.arrays.batching import EXACT_INTEGERS

KINDS = ("image", "label", "float", "int")
FeatureKind = Literal["image", "label", "float", "int"]  # KINDS
# The tf.train.Feature lists each kind reads ("value": one bytes or int64 value, as a
# streamed record's x); anything else is an error, never a cast.
LISTS = {"image": ("bytes_list",), "label": ("int64_list", "bytes_list"),
         "float": ("float_list",), "int": ("int64_list",),
         "value": ("bytes_list", "int64_list")}
A_LIST = {"bytes_list": "a bytes_list", "int64_list": "an int64_list",
          "float_list": "a float_list"}
SUGGEST = {"bytes_list": "'image' (encoded image bytes) or 'label' (class names)",
           "int64_list": "'int' (or 'label' for one class id)", "float_list": "'float'"}
FLOAT32_EXACT = EXACT_INTEGERS["float32"]  # larger integers would be rounded in batches


def values_of(feature: Any) -> tuple[str | None, Sequence[Any]]:
    """(the list a tf.train.Feature holds, its values)."""
    which = feature.WhichOneof("kind")
    return which, (getattr(feature, which).value if which else ())


def label_text(value: Any, key: str, where: Callable[[], str]) -> Any:
    """A label value: an int64 class id as it is, a bytes class name as UTF-8 text."""
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"Feature {key!r} of {where()} must hold a class name as UTF-8 "
                         f"text. Received: {value[:40]!r}.") from None


def one_value(feature: Any, key: str, where: str, text: bool = False) -> Any:
    """The one bytes or int64 value of a feature of a streamed record (a label, with
    `text`: read by `label_text`)."""
    which, values = values_of(feature)
    if len(values) != 1 or which not in LISTS["value"]:
        raise ValueError(f"Feature {key!r} of {where} must hold one bytes or int64 value. "
                         f"Received: {len(values)} values in {which or 'no list'}.")
    return label_text(values[0], key, lambda: where) if text else values[0]


def value(feature: Any, kind: str, key: str, describe: Callable[[], str]) -> Any:
    """The value(s) of `feature` read as `kind` (of a feature spec), or a ValueError
    naming the feature, the kind asked for and the list the record holds (`describe()`
    says which record)."""
    which, values = values_of(feature)
    if which is not None and which not in LISTS[kind]:
        hint = (f"Declare it {SUGGEST[which]}." if kind != "label" else
                "A label is one class id (int64_list) or one class name (bytes_list).")
        raise ValueError(
            f"`feature_spec[{key!r}]` is {kind!r}, which reads {' or '.join(LISTS[kind])}, "
            f"but feature {key!r} of {describe()} is {A_LIST[which]}. {hint}")
    if kind in ("image", "label"):
        if len(values) != 1:
            raise ValueError(
                f"`feature_spec[{key!r}]` is {kind!r}, which takes one value per record, but "
                f"feature {key!r} of {describe()} holds {len(values)}.")
        return label_text(values[0], key, describe) if kind == "label" else values[0]
    if kind == "float":
        return np.asarray(values, dtype="float32")
    ints = np.asarray(values, dtype="int64")
    inexact = (ints > FLOAT32_EXACT) | (ints < -FLOAT32_EXACT)
    if inexact.any():
        raise ValueError(
            f"Feature {key!r} of {describe()} holds {int(ints[inexact.argmax()])}: numeric "
            f"features are float32 in batches, which hold integers exactly only up to "
            f"2**24. Leave the feature out of `feature_spec`, or scale it.")
    return ints


def check_spec(feature_spec: Any) -> dict[str, FeatureKind]:
    """`feature_spec` checked: {key: kind}, one "image" key or numeric keys for x, at
    most one "label" key."""
    if not isinstance(feature_spec, Mapping) or not feature_spec:
        _checks.fail("feature_spec", "a dict {feature key: kind}", feature_spec, TypeError)
    for key, kind in feature_spec.items():
        _checks.one_of(f"feature_spec[{key!r}]", kind, KINDS)
    spec = dict(feature_spec)
    kinds = list(spec.values())
    if kinds.count("image") > 1 or kinds.count("label") > 1:
        raise ValueError(f"`feature_spec` may name one 'image' and one 'label' key. "
                         f"Received: feature_spec={spec}.")
    if ("image" not in kinds) == (not any(k in ("float", "int") for k in kinds)):
        raise ValueError("`feature_spec` must name either one 'image' key or numeric "
                         "('float' / 'int') keys for x. Received: "
                         f"feature_spec={spec}.")
    return spec
