"""Argument checks that raise kerasgen's one error-message form.

`` `name` must be <what>. Received: name=<value> ``

(docs/getting-started.md, "Arguments every generator takes", shows it to users;
docs/architecture.md places this module among the foundations.)
"""

import math
import numbers
import os
import stat
from typing import NoReturn

import numpy as np


def fail(name: str, requirement: str, value: object, exc: type[Exception] = ValueError,
         hint: str = "") -> NoReturn:
    """Raises `exc` with the one message form, `hint` (how to fix it) appended; it never
    returns, so a type checker knows that code after a failed check is unreachable."""
    message = f"`{name}` must be {requirement}. Received: {name}={value!r}"
    if hint:
        message += f". {hint}"
    raise exc(message)


def file_kind(mode):
    """What a file that is not a regular one is, in words."""
    for test, kind in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return "not a regular file"


def open_regular(path, what):
    """`path` opened for reading in binary, when it is a regular file (a link to one
    counts): opened without blocking and checked on the open file, so a FIFO (which
    would block the open or the read forever), a device (/dev/zero reads without end)
    or a socket is a ValueError naming `what` and the path, never a hang."""
    path = os.fspath(path)
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0))
    fd = os.open(path, flags)  # FileNotFoundError as it is
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"Cannot read {what} {path}: it is {file_kind(mode)}, not a "
                             "regular file.")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def output_file(name, path, formats=None):
    """(path, format) for a file to be written at exactly `path`: a path that names a
    folder, a special file (a FIFO would block, a device would take the bytes) or a
    missing folder is refused, and so is a name whose extension is not one of `formats`
    when given (no extension is appended: the file is written where named or not at
    all)."""
    if not isinstance(path, (str, os.PathLike)):
        fail(name, "a file path", path, TypeError)
    path = os.fspath(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        fail(name, "a path that can be written", path, hint=str(error))
    if mode is not None and stat.S_ISDIR(mode):
        fail(name, "a file name, not a folder", path,
             hint=f"Name the file, e.g. {os.path.join(path, 'preview.png')!r}")
    if mode is not None and not stat.S_ISREG(mode):
        fail(name, "a regular file or a new name", path,
             hint=f"It exists and is {file_kind(mode)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        fail(name, "a path in an existing folder", path, FileNotFoundError,
             hint=f"No such folder: {folder!r}")
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    if formats is not None and extension not in formats:
        fail(name, "a file name ending in one of " + ", ".join(f".{f}" for f in formats),
             path, hint=f"Add the extension, e.g. {path + '.png'!r}" if not extension
             else "")
    return path, extension


def positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        fail(name, "a positive integer", value)
    return int(value)


def non_negative_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        fail(name, "a non-negative integer", value)
    return int(value)


def batch_index(index, num_batches):
    """`gen[index]`'s index checked, a negative one counted from the end."""
    if not isinstance(index, (int, np.integer)):
        raise TypeError(f"Batch index must be an integer. Received: {index!r}")
    if index < 0:
        index += num_batches
    if not 0 <= index < num_batches:
        raise IndexError(f"Batch index out of range: {index} for a generator of "
                         f"{num_batches} batches.")
    return index


def one_of(name, value, choices):
    if value not in choices:
        fail(name, "one of " + ", ".join(repr(c) for c in choices), value)
    return value


def image_size(value, name="image_size"):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    try:
        height, width = value
        # typeshed's numbers.Integral has no __gt__ (the numbers ABCs declare < and <=)
        ok = all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                 and v > 0  # type: ignore[operator]
                 for v in (height, width))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        fail(name, "a tuple of two positive integers (height, width)", value)
    return int(height), int(width)


def fraction(name, value):
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not 0 < float(value) < 1):
        fail(name, "a float strictly between 0 and 1", value)
    return float(value)


def _real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def finite(name, value, requirement, low=-math.inf):
    """`value` as a float: a real number (not a bool), finite (not NaN or inf), and at
    least `low`; else `requirement` in the one message form."""
    if not _real(value) or not math.isfinite(value) or value < low:
        fail(name, requirement, value)
    return float(value)


def bounds(name, value, requirement, low=-math.inf, high=math.inf, above_low=False):
    """(lower, upper) of `value`: a list, tuple or 1-D array of two finite real numbers
    in order, low <= lower (low < lower with `above_low`) and upper <= high; else
    `requirement` in the one message form (a range given inverted, with NaN, of another
    length or type)."""
    shaped = isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray)
                                                  and value.ndim == 1)
    if not shaped or len(value) != 2 or not all(_real(v) for v in value):
        fail(name, requirement, value)
    lower, upper = float(value[0]), float(value[1])
    if not (math.isfinite(lower) and math.isfinite(upper) and lower <= upper
            and (lower > low if above_low else lower >= low) and upper <= high):
        fail(name, requirement, value)
    return lower, upper


_AUGMENT = ("kerasgen has no such argument; pass augment= (an albumentations pipeline or "
            "fn(image, rng) -> image), or Keras preprocessing layers as batch_augment=")
_SAVE = ("kerasgen saves no images; kg.viz.show_batch(gen) or `kerasgen preview` draws what "
         "a generator yields")
# Names from Keras's ImageDataGenerator, flow_from_directory / flow_from_dataframe,
# image_dataset_from_directory and imbalanced-learn -> what kerasgen offers for them.
KNOWN_NAMES = {
    "target_size": "kerasgen's is image_size=(height, width)",
    "class_mode": ("kerasgen's is label_mode= (class_mode='sparse' is label_mode='int'; "
                   "'categorical', 'binary', 'raw' and None keep their names)"),
    "classes": "kerasgen's is class_names=",
    "dataframe": "kerasgen's is csv= (kg.CSVGenerator takes a DataFrame or a CSV file path)",
    "validate_filenames": ("kerasgen always checks that listed files exist "
                           "(on_missing='raise' or 'skip'); gen.validate() also decodes "
                           "every file up front"),
    "weight_col": ("kerasgen reads no weight column; pass "
                   "sample_weight=df[weight_col].to_numpy()"),
    "keep_aspect_ratio": "kerasgen's is crop_to_aspect_ratio=True (ImageFolderGenerator)",
    "save_to_dir": _SAVE, "save_prefix": _SAVE, "save_format": _SAVE,
    "random_state": "kerasgen's is seed=",
    "num_parallel_calls": "kerasgen's is decode_threads= (image generators)",
    "preprocessing_function": "kerasgen's is augment= (a callable fn(image, rng) -> image)",
    "data_format": ("the generators yield channels-last batches; "
                    "kg.image_dataset_from_directory(data_format=...) transposes them"),
    "format": ("kerasgen generators are keras.utils.PyDataset objects, which every Keras "
               "backend reads"),
    "keep_sparse": "kerasgen's is sparse=True (kg.ArrayGenerator: a scipy.sparse x's rows "
                   "batched as CSR matrices)",
    "X": "kerasgen's is x= (lower case)",
    **{name: ("this generator holds the samples it is given: split them first "
              "(sklearn.model_selection.train_test_split(..., stratify=labels, "
              "random_state=seed)) and build one generator per part, the validation "
              "one without sampler or augment (docs/custom-datasets.md, \"Validation\"); "
              "the folder, CSV, detection and SQL generators take validation_split and "
              "offer split()") for name in ("validation_split", "subset")},
    **{name: _AUGMENT for name in (
        "rotation_range", "width_shift_range", "height_shift_range", "brightness_range",
        "shear_range", "zoom_range", "channel_shift_range", "fill_mode", "cval",
        "horizontal_flip", "vertical_flip", "featurewise_center", "samplewise_center",
        "featurewise_std_normalization", "samplewise_std_normalization", "zca_whitening",
        "zca_epsilon", "interpolation_order")},
}


def public_name(obj):
    """The name a user called: the first public class of `obj`'s type (not a private
    subclass's)."""
    return next((c.__name__ for c in type(obj).__mro__ if not c.__name__.startswith("_")),
                type(obj).__name__)


def unknown_arguments(obj, unknown):
    """Raises the TypeError of unknown keyword arguments to `obj`'s constructor, naming
    its class and, for well-known names of Keras and imbalanced-learn, kerasgen's."""
    import difflib
    import inspect

    mro: tuple[type[object], ...] = type(obj).__mro__  # classes: their own __init__ is read
    accepted = sorted({name for cls in mro if "__init__" in vars(cls)
                       for name, p in inspect.signature(cls.__init__).parameters.items()
                       if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"})
    hints = []
    for name in unknown:
        if name in KNOWN_NAMES:
            hints.append(f"`{name}`: {KNOWN_NAMES[name]}.")
        else:
            close = difflib.get_close_matches(name, accepted, n=1)
            if close:
                hints.append(f"`{name}`: did you mean `{close[0]}`?")
    names = ", ".join(repr(n) for n in unknown)
    plural = "s" if len(unknown) > 1 else ""
    raise TypeError(" ".join([f"{public_name(obj)}() got unexpected keyword argument"
                              f"{plural} {names}."] + hints))


def labels_come_from(obj, kwargs, where):
    """Refuses `labels=` on a generator whose labels come from `where` (its `y`, a column,
    a feature): Python would only say "got multiple values for keyword argument
    'labels'", from inside kerasgen."""
    if "labels" in kwargs:
        shown = repr(kwargs["labels"])
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TypeError(f"{public_name(obj)}() takes its labels from {where}, not from a "
                        f"`labels` argument. Received: labels={shown}.")
