"""TensorFlow's and absl's start-up log lines kept out of what a person reads.

TensorFlow prints "oneDNN custom operations are on...", "All log messages before
absl::InitializeLog()..." and "cpu_feature_guard..." while it is imported, before it
reads TF_CPP_MIN_LOG_LEVEL; `tensorflow_quiet` catches them on the stderr file
descriptor and drops those below the level in force. The command line imports Keras
inside it, and so does each worker process when it rebuilds its generator. It imports
only the standard library.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

_LOG_LINE = re.compile(r"[IWEF]\d{4} [\d:.]+\s+\d+ [^\s:]+:\d+\] ")
_BEFORE_INIT = "WARNING: All log messages before absl::InitializeLog() is called"
_CONTINUED = ("To enable the following instructions:",)


def drop_tensorflow_lines(text: str, level: int) -> str:
    """`text` without TensorFlow's (and absl's) C++ log lines of a severity under
    `level`, as TF_CPP_MIN_LOG_LEVEL counts it: 1 drops INFO, 2 WARNING too, 3 ERROR too
    (0 drops nothing); every other line is kept."""
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        if _LOG_LINE.match(line):
            dropping = "IWEF".index(line[0]) < level
        elif line.startswith(_BEFORE_INIT):
            dropping = level >= 1
        elif not (dropping and line.startswith(_CONTINUED)):
            dropping = False
        if not dropping:
            kept.append(line)
    return "".join(kept)


def _log_level() -> int:
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


@contextlib.contextmanager
def tensorflow_quiet(default_level: str | None = "3") -> Iterator[None]:
    """Import Keras (and TensorFlow) in this block, and what TensorFlow and absl print
    while they start ("oneDNN custom operations are on...", "All log messages before
    absl::InitializeLog()...", "cpu_feature_guard...") stays out of the output.

    Sets TF_CPP_MIN_LOG_LEVEL to `default_level` (3) unless it is set (a user's level is
    kept; None sets nothing, as in a worker process, which inherits its parent's), which
    silences TensorFlow's later C++ logs ("Memory patch applied..."); the lines printed
    before TensorFlow reads that variable are caught on the stderr file descriptor and
    dropped by the same level, every other line written meanwhile is passed on."""
    if "tensorflow" not in sys.modules and default_level is not None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", default_level)
    level = _log_level()
    if level <= 0 or "keras" in sys.modules:
        yield
        return
    caught: list[str] = []
    try:
        with captured_stderr(caught):
            yield
    finally:
        sys.stderr.write(drop_tensorflow_lines("".join(caught), level))
        sys.stderr.flush()


@contextlib.contextmanager
def captured_stderr(into: list[str]) -> Iterator[None]:
    """What the block writes to the stderr file descriptor (C and C++ libraries'
    output included), appended to `into` as text instead of printed."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            into.append(caught.read().decode(errors="replace"))
