"""glibc malloc thresholds, and undoing the one TensorFlow pins inside `model.fit`.

TensorFlow's `tf.data.Dataset.from_generator`, which Keras uses to feed any PyDataset to
`model.fit`, `evaluate` and `predict` on the TensorFlow backend, calls
`mallopt(M_MMAP_THRESHOLD, 128 KiB)` each time it builds its generator op, once per epoch
(its "Python 3.11 memory patch"). That fixes the threshold at 128 KiB for the whole
process and turns off glibc's own raising of it: every buffer above 128 KiB (each
full-size JPEG decode, each per-thread uint8 scratch) becomes a fresh `mmap` whose pages
fault in one by one, during `fit` and for the rest of the process.

While Keras runs an epoch of a kerasgen generator (between its `on_epoch_begin` and
`on_epoch_end`) and TensorFlow is loaded, each batch sets mmap 32 MiB and trim 64 MiB:
what glibc's own adaptive threshold would have grown to (its ceiling is 32 MiB). Decode
buffers, and the model's own activations up to 32 MiB (the tutorial CNN's are 8-133 MB a
batch), are then reused from the heap instead of faulting in fresh pages at every step.
That used to grow the process (about 35 MiB per epoch with 19 MB float32 batches) while
every batch was a fresh array; kerasgen's batch arrays are now reused and 64-byte aligned
(see batching.BufferPool), and the process stayed flat (845 MiB over 12 epochs of the
image benchmark's tiny model, measured; 16-byte aligned reused arrays grew it from 1064
to 2055 MiB). Outside Keras's epochs kerasgen leaves
malloc alone. `tune_malloc()` picks other values; `leave_malloc()` or
KERASGEN_MALLOC=leave stop kerasgen from touching malloc at all.

Only the TensorFlow backend's `fit` builds that generator dataset, so on the JAX and
PyTorch backends nothing pins the threshold and kerasgen leaves malloc alone in their
epochs too, even when TensorFlow is imported (tests/test_backends.py checks it).
`tune_malloc()` still sets the thresholds when called, on any backend: glibc's own.
"""

import ctypes
import os
import sys
from typing import Any

from kerasgen import _checks

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
DEFAULT = (32 << 20, 64 << 20)

_state: dict[str, Any] = {"libc": None, "thresholds": DEFAULT, "applied": 0,
                          "enabled": os.environ.get("KERASGEN_MALLOC", "").lower() != "leave"}


def _libc():
    """glibc's malloc functions, or False where there is no glibc (macOS, Windows, musl)."""
    if _state["libc"] is None:
        _state["libc"] = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL("libc.so.6")
                libc.gnu_get_libc_version  # only glibc has it  # noqa: B018
                _state["libc"] = libc
            except (OSError, AttributeError):
                pass
    return _state["libc"]


def apply(mmap_threshold, trim_threshold):
    """Sets both thresholds; returns whether glibc took them."""
    libc = _libc()
    if not libc:
        return False
    done = bool(libc.mallopt(M_MMAP_THRESHOLD, int(mmap_threshold))
                and libc.mallopt(M_TRIM_THRESHOLD, int(trim_threshold)))
    _state["applied"] += done
    return done


def tune_malloc(mmap_threshold: int = DEFAULT[0], trim_threshold: int = DEFAULT[1]) -> bool:
    """Sets glibc's mmap and trim thresholds for the whole process (Linux, glibc) now and
    re-applies them before each batch of every Keras epoch; returns whether glibc took
    them (False elsewhere).

    You rarely need it: in `fit`, `evaluate` and `predict` kerasgen already applies these
    defaults, because TensorFlow pins the mmap threshold at 128 KiB whenever Keras feeds a
    PyDataset (see docs/performance.md). Call it for other values. Outside `fit`, a fixed
    threshold replaces glibc's own adaptive one for the whole process.
    `leave_malloc()` turns all of this off.
    """
    mmap_threshold = _checks.positive_int("mmap_threshold", mmap_threshold)
    trim_threshold = _checks.positive_int("trim_threshold", trim_threshold)
    _state["thresholds"] = (mmap_threshold, trim_threshold)
    _state["enabled"] = True
    return apply(mmap_threshold, trim_threshold)


def leave_malloc() -> None:
    """kerasgen stops setting glibc's malloc thresholds in this process (the environment
    variable KERASGEN_MALLOC=leave does the same from the start)."""
    _state["enabled"] = False


def times_applied():
    """How often kerasgen has set the thresholds in this process."""
    return _state["applied"]


def _tensorflow_backend():
    """Whether Keras runs on TensorFlow (the only backend whose `fit` pins the threshold).
    Keras is loaded whenever a Keras epoch runs."""
    keras = sys.modules.get("keras")
    return keras is not None and keras.backend.backend() == "tensorflow"


def keep():
    """Called before each batch of a Keras epoch: undoes TensorFlow's pin (about a
    microsecond) on the TensorFlow backend; does nothing on the others."""
    if _state["enabled"] and "tensorflow" in sys.modules and _tensorflow_backend():
        apply(*_state["thresholds"])
