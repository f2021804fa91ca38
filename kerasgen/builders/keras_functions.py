"""What kerasgen's versions of Keras's dataset functions share
(`kg.image_dataset_from_directory`, `timeseries_dataset_from_array`,
`text_dataset_from_directory`, `audio_dataset_from_directory`): Keras's checks of a
validation split (`check_split`), the options beyond Keras's signature
(`generator_options`, `check_options`), Keras's "Found ..." line (`found`), and the
dataset Keras returns for a `format`, made from the kerasgen generator (`dataset_of`)."""

from __future__ import annotations

import difflib
import inspect
import numbers
from collections.abc import Callable, Iterable
from typing import Any

from kerasgen import _checks

OR_GRAIN = " or 'grain'"

__all__ = ["check_options", "check_split", "check_unbatched", "classes_of", "dataset_of",
           "found", "generator_options"]


def check_split(validation_split: Any, subset: Any, shuffle: Any, seed: Any) -> None:
    """Keras's `dataset_utils.check_validation_split_arg`, in its order, with kerasgen's
    messages; and the seed a shuffled split needs (kerasgen's split is seeded)."""
    # typeshed's numbers.Real has no __gt__, which `0 < validation_split` falls back on
    if validation_split and not (isinstance(validation_split, numbers.Real)
                                 and 0 < validation_split < 1):  # type: ignore[operator]
        _checks.fail("validation_split", "a fraction between 0 and 1 (exclusive), or "
                     "None", validation_split)
    if (validation_split or subset) and not (validation_split and subset):
        raise ValueError("If `subset` is set, `validation_split` must be set, and "
                         f"inversely. Received: validation_split={validation_split!r}, "
                         f"subset={subset!r}.")
    if subset not in ("training", "validation", "both", None):
        _checks.fail("subset", "'training', 'validation', 'both' or None", subset)
    if validation_split and shuffle and seed is None:
        raise ValueError(
            "`seed` must be given with `validation_split` and shuffle=True, so that "
            "the training and validation subsets do not overlap. Received: seed=None.")


def check_unbatched(batch_size: Any, format: str, options: dict[str, Any],
                    samples: str = "samples", grain: bool = True) -> None:
    """batch_size=None (single samples, cut from batches of the generator behind the
    dataset): not with format="kerasgen" (a generator yields batches), nor with
    `drop_remainder`, which would drop samples that no batch is made of."""
    if format == "kerasgen" and batch_size is None:
        _checks.fail("batch_size", "a positive integer with format='kerasgen' (a "
                     "generator yields batches)", batch_size,
                     hint=f"Use format='tf'{OR_GRAIN if grain else ''} for single {samples}")
    if batch_size is None and options.get("drop_remainder"):
        raise ValueError(
            "`drop_remainder` drops the last partial batch, and with batch_size=None the "
            "dataset yields single samples: the samples of that batch would be lost. "
            "Received: batch_size=None, drop_remainder=True. Leave drop_remainder out, "
            "or pass a batch_size.")


def generator_options(function: Callable[..., Any], constructors: Iterable[Callable[..., Any]],
                      leave_out: Iterable[str] = ()) -> frozenset[str]:
    """The keyword arguments of `constructors` (a generator's `__init__`s) that `function`
    takes beyond Keras's signature (its own parameters), less `leave_out`."""
    names: set[str] = set()
    for init in constructors:
        names |= {name for name, p in inspect.signature(init).parameters.items()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    keras_names = set(inspect.signature(function).parameters)
    return frozenset(names - keras_names - {"self", "num_samples"} - set(leave_out))


def check_options(function: str, options: dict[str, Any], known: frozenset[str],
                  whose: str) -> None:
    """Refuses options beyond Keras's signature that are not `known` (the generator's
    own arguments, `whose`: "kg.Generator's"), with the closest name as a hint."""
    unknown = {name: value for name, value in options.items() if name not in known}
    if not unknown:
        return
    hints = [f"`{name}`: did you mean `{close[0]}`?" for name in unknown
             for close in [difflib.get_close_matches(name, sorted(known), n=1)] if close]
    raise TypeError(" ".join(
        [f"{function}() got unexpected keyword argument{'s' if len(unknown) > 1 else ''} "
         f"{', '.join(map(repr, unknown))}. Beyond Keras's arguments it takes {whose}: "
         f"{', '.join(sorted(known))}."] + hints))


def dataset_of(gen: Any, format: str, unbatch: bool = False) -> Any:
    """What Keras returns for `format`, made from `gen`: a tf.data.Dataset ("tf") or a
    grain.IterDataset ("grain") of its batches (single samples with `unbatch`), with
    `generator` set; `gen` itself for "kerasgen"."""
    if format == "kerasgen":
        return gen
    if format == "tf":
        from kerasgen.adapter import tfdata

        dataset = tfdata.pass_dataset(gen, unbatch=unbatch)
    else:
        from kerasgen.adapter import grain

        dataset = grain.epoch_dataset(gen, unbatch=unbatch)
    dataset.generator = gen
    return dataset


def classes_of(gen: Any) -> Any:
    """The class names `found` counts for `gen`: None without labels."""
    return None if gen.label_mode is None else gen.class_names


def found(total: int, class_names: Any) -> None:
    """Keras's line on what the listing found (`verbose=True`): `total` files, of
    `class_names` (None: without classes)."""
    if class_names is None:
        print(f"Found {total} files.")
    else:
        print(f"Found {total} files belonging to {len(class_names)} classes.")
