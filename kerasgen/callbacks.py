"""Keras callbacks: save a generator's position beside the model checkpoint, and resume."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

import keras

from kerasgen import _atomic, _checks
from kerasgen import _stats as stats_mod
from kerasgen._keras_compat import last_begun
from kerasgen._typing import StrPath

if TYPE_CHECKING:
    from kerasgen.base import Generator


__all__ = ["GeneratorCheckpoint", "PipelineStats", "restore"]


def _write_json(path, state):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with _atomic.replacing(path, "w") as f:  # a crash never leaves half a file
        json.dump(state, f)


def _check_path(path):
    """`path` for a checkpoint, checked before training: a file path (its folder may be
    missing: it is created) that is no folder or special file, and no existing file
    other than a checkpoint (writing the state would overwrite it)."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        _checks.fail("path", "a file path", path,
                     TypeError if not isinstance(path, (str, os.PathLike)) else ValueError)
    path = os.fspath(path)
    if os.path.isdir(path):
        _checks.fail("path", "a file name, not a folder", path,
                     hint=f"Name the file, e.g. {os.path.join(path, 'generator.json')!r}")
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO, /dev/null: replaced
        _checks.fail("path", "a regular file or a new name", path,
                     hint=f"It is {_checks.file_kind(os.stat(path).st_mode)}")
    if os.path.exists(path) and os.path.getsize(path):
        try:
            state = _read_state(path)
            if not {"epoch", "batch", "seed"} <= set(state):
                raise ValueError(f"a JSON object without a state's keys: {sorted(state)[:5]}")
        except ValueError as error:
            raise ValueError(
                f"`path` must be a new path or a checkpoint GeneratorCheckpoint wrote. "
                f"Received: path={path!r}, an existing file that is not a generator state "
                "(a model, a dataset?), which writing the state would overwrite. Give the "
                "checkpoint a path of its own, or delete the file.") from error
    return path


class GeneratorCheckpoint(keras.callbacks.Callback):
    """Saves the training generator's state to `path` (a small JSON file, no pickle) at
    every epoch's end, and every `every_n_batches` batches when given.

    `restore(generator)` (or `kg.callbacks.restore(generator, path)`) puts a fresh
    generator where the saved one was: the remaining batches of the interrupted epoch,
    then the following epochs, are those an uninterrupted run would have produced.

    Mid-epoch positions count batches in the generator's order, which `fit` follows for a
    shuffling generator (it turns Keras's extra batch shuffle off); a generator built with
    shuffle=False keeps Keras's unseeded batch shuffle, so train it with
    `fit(..., shuffle=False)`. After a mid-epoch
    restore, `len(gen)` is the number of batches left in that epoch: run
    `model.fit(gen, epochs=1)` for it, then fit the remaining epochs.

    Args:
        path: the JSON file to write (its folder is created).
        every_n_batches: also save after every n training batches (None: epoch ends only).
        generator: the training generator; by default the kerasgen generator whose epoch
            Keras began last (the training data, during training batches).
    """

    def __init__(self, path: StrPath, every_n_batches: int | None = None,
                 generator: Generator | None = None) -> None:
        super().__init__()
        self.path = _check_path(path)
        if generator is not None and not hasattr(generator, "get_state"):
            _checks.fail("generator", "a kerasgen generator (or None: the one training "
                         "uses)", generator, TypeError)
        self.every_n_batches = (None if every_n_batches is None
                                else _checks.positive_int("every_n_batches", every_n_batches))
        self.generator = generator

    def _generator(self) -> Generator:
        if self.generator is None:
            self.generator = last_begun()
        if self.generator is None:
            raise ValueError("GeneratorCheckpoint found no kerasgen generator in training; "
                             "pass generator=the training generator.")
        return self.generator

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._generator()  # during training batches, the last begun is the training data

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.every_n_batches and (batch + 1) % self.every_n_batches == 0:
            _write_json(self.path, self._generator().get_state(batches_done=batch + 1))

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        # Keras ended the generator's epoch before this call: the state is the next one's.
        _write_json(self.path, self._generator().get_state())

    def restore(self, generator: Generator | None = None) -> dict[str, Any] | None:
        """Restores `generator` (default: the one given at construction) from `path`."""
        return restore(generator or self._generator(), self.path)


def restore(generator: Generator, path: StrPath) -> dict[str, Any] | None:
    """Loads the state saved at `path` into `generator`; returns the state, or None when
    there is no file yet (a first run).

    A file that is not a generator state (empty, truncated or otherwise not JSON, not
    UTF-8, JSON other than an object, missing a key), or the state of other data (see
    `Generator.set_state`), is a ValueError naming the file, and the generator is left
    as it was."""
    path = os.fspath(path)
    if not os.path.exists(path):
        return None
    state = _read_state(path)
    try:
        generator.set_state(state)
    except ValueError as error:
        raise ValueError(f"The checkpoint {path} cannot be restored into this generator: "
                         f"{error}") from error
    return state


def _read_state(path):
    with _checks.open_regular(path, "the checkpoint") as f:  # a FIFO, /dev/zero: refused
        raw = f.read()
    problem: str | None
    cause: ValueError | None  # the decoding or parsing error (both are ValueErrors)
    problem, cause = None, None
    if not raw.strip():
        problem = f"the file is empty ({len(raw)} bytes)"
    else:
        try:
            state = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            problem, cause = f"it is not UTF-8 text (byte {error.start})", error
        except json.JSONDecodeError as error:  # a ValueError subclass; named here
            problem, cause = (f"it is not valid JSON ({error.msg}: line {error.lineno} "
                              f"column {error.colno}; truncated or corrupt)"), error
        except RecursionError:
            problem = "it is JSON nested too deeply to be a generator state"
        else:
            if not isinstance(state, dict):
                problem = (f"it holds a JSON {_JSON_KINDS.get(type(state), 'value')}, not "
                           "the object GeneratorCheckpoint writes")
            else:
                return state
    raise ValueError(f"The checkpoint {path} is not a kerasgen generator state: {problem}. "
                     "Restore a file GeneratorCheckpoint wrote, or delete it to start "
                     "training afresh.") from cause


_JSON_KINDS = {list: "array (list)", str: "string", int: "number", float: "number",
               bool: "boolean", type(None): "null"}


class PipelineStats(keras.callbacks.Callback):
    """Logs the training generator's pipeline each epoch (needs a generator built with
    stats=True). The epoch's logs (so History, and TensorBoard when this callback comes
    before it in the list) gain the few numbers that say whether data kept the model
    waiting: `data/wait_s` (time model.fit waited on data), `data/batches_per_s` (the
    rate batches reached it) and `data/<stage>_s` for each stage the pipeline uses
    (those that took time in the first epoch: decode, augment...; not "list", done
    once). `callback.history` holds each epoch's whole record (batches, made, busy_s and
    every stage).

    It counts each epoch apart without resetting the generator's record: `gen.stats()`
    after `fit` counts every batch `fit` trained on. The wait is measured from when each
    batch was made and when the previous training step ended; it covers batches made in
    this process (workers=1 or worker threads).
    """

    def __init__(self, generator: Generator | None = None, prefix: str = "data/") -> None:
        super().__init__()
        self.generator = generator
        self.prefix = prefix
        self.history: list[dict[str, Any]] = []
        self._stages: list[str] | None = None

    def _generator(self) -> Generator | None:
        if self.generator is None:
            self.generator = last_begun()
        return self.generator

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._start = time.perf_counter()
        self._step_ends: list[float] = []

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._step_ends.append(time.perf_counter())
        if len(self._step_ends) == 1:
            self._generator()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        gen = self.generator  # found during the training batches (not the validation data)
        if gen is None or gen.timings is None:
            raise ValueError("PipelineStats needs the training generator built with "
                             "stats=True (pass generator= if it is not found).")
        gen.fit_wait_s = stats_mod.fit_wait(gen.timings.produced, self._start,
                                             self._step_ends)
        entry = gen.timings.summary(current=True)  # this epoch's pass
        seconds = time.perf_counter() - self._start
        entry["batches_per_s"] = round(entry["batches"] / seconds, 3)
        entry["samples_per_s"] = round(entry["samples"] / seconds, 3)
        entry["wait_s"] = gen.fit_wait_s
        self.history.append(entry)
        if self._stages is None:  # the stages this pipeline uses, the same every epoch
            self._stages = [k for k, v in entry["stages_s"].items() if v > 0 and k != "list"]
        logged = {"wait_s": entry["wait_s"], "batches_per_s": entry["batches_per_s"],
                  **{f"{k}_s": entry["stages_s"][k] for k in self._stages}}
        if logs is not None:
            logs.update({self.prefix + k: v for k, v in logged.items() if v is not None})

