"""Look at a data set before training: class counts, imbalance, image sizes, bad files."""

from __future__ import annotations

import collections
import glob
import os
import reprlib
import urllib.parse
import warnings
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from kerasgen import _checks
from kerasgen.loading import images
from kerasgen.labels import cells as label_cells
from kerasgen.labels import encoding as label_encoding
from kerasgen.sources import _listing as listing
from kerasgen.storage import paths as _paths
from kerasgen.storage import remote as _remote
from kerasgen._progress import progress
from kerasgen._typing import LabelMode, StrPath
from kerasgen import _redact


def _probe(path, max_pixels, root=None, store=None):
    """(height, width, channels, format, error, missing) of one image file (a URL read
    through `store`); decodes it fully, so truncated files are found too, unless its
    header declares more than `max_pixels` pixels (the generators would refuse it), or
    it now leads out of `root` (see `images.read_file`). Every error of reading or
    decoding is the file's error, never an exception; `missing`: it does not exist."""
    name = urllib.parse.urlsplit(path).path if "://" in path else path  # no ?query
    fmt = os.path.splitext(name)[1].lower().lstrip(".")
    fmt = "jpeg" if fmt == "jpg" else ("tiff" if fmt == "tif" else fmt)
    try:
        data = (store.read(path) if store is not None and _remote.is_url(path)
                else images.read_file(path, root))
        if data.size == 0:
            raise ValueError("the file is empty (0 bytes)")
        size = None if max_pixels is None else images.header_size(data)
        if size is not None:
            images.check_pixels(size, max_pixels, "the file")
        import cv2

        image = images.imdecode(data, cv2.IMREAD_UNCHANGED, "the file")
        if image is None:
            raise ValueError("not decodable")
        images.check_intact(data, "the file")  # a JPEG OpenCV decoded despite damage
        if size is None:
            images.check_pixels(image.shape[:2], max_pixels, "the file")
        channels = 1 if image.ndim == 2 else image.shape[2]
        return image.shape[0], image.shape[1], channels, fmt, None, False
    except FileNotFoundError as error:
        return None, None, None, fmt, str(error), True
    except (OSError, ValueError) as error:
        return None, None, None, fmt, str(error), False


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 file', '2 files' ('1 class', '3 classes' with many="classes")."""
    return f"{n} {word if n == 1 else many or word + 's'}"


SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database
TFRECORD_EXTENSIONS = (".tfrecord", ".tfrecords", ".tfrec")


def _tfrecord_header(head: bytes) -> bool:
    """Whether `head` starts with a TFRecord record header: an 8-byte length and its
    masked CRC32C."""
    if len(head) < 12:
        return False
    try:
        import google_crc32c  # TFRecordGenerator's CRC (the [tfrecord] extra)
    except ImportError:
        return False  # the extension alone tells then
    crc = google_crc32c.value(head[:8])
    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    return int.from_bytes(head[8:12], "little") == masked


def _other_format(path: str) -> tuple[str, str] | None:
    """(what, generator) when the file `path` is a TFRecord file or an SQLite database
    (by its first bytes, or a TFRecord file by its extension), else None."""
    try:
        with _checks.open_regular(path, "the file") as f:  # a FIFO would block
            head = f.read(16)
    except (OSError, ValueError):  # left to the CSV reader, which names the problem
        head = b""
    if head.startswith(SQLITE_MAGIC):
        return "an SQLite file", "kg.SQLGenerator"
    if path.lower().endswith(TFRECORD_EXTENSIONS) or _tfrecord_header(head):
        return "a TFRecord file", "kg.TFRecordGenerator"
    return None


def _check_path(source: Any) -> str:
    """`source` as a str; anything but a path is a TypeError naming `source`."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if isinstance(path, str):
            return path
    if type(source).__name__ == "DataFrame":
        shown = f"a {type(source).__module__.split('.')[0]} DataFrame"
        hint = (" kg.CSVGenerator takes DataFrames; kg.inspect takes a path: write the "
                "DataFrame with df.to_csv(path, index=False) and pass that path.")
    else:
        shown, hint = reprlib.repr(source), ""
    raise TypeError(f"`source` must be a path (str or os.PathLike) of an image folder or "
                    f"CSV file. Received: source={shown}.{hint}")


def check_source(source: StrPath, command: str = "inspect") -> str:
    """'folder' or 'csv': what the path `source` is; a path that does not exist is a
    FileNotFoundError saying what was expected there (a glob pattern is left to the
    CSV reader, which names the pattern), a TFRecord or SQLite file a ValueError naming
    the generator that reads it (`command`, the reader: "inspect" or "bench"), and
    anything but a path a TypeError."""
    path = _check_path(source)
    if os.path.isdir(path):
        return "folder"
    if not os.path.exists(path) and not glob.has_magic(path):
        expected = ("CSV file" if path.lower().endswith((".csv", ".tsv", ".txt"))
                    else "folder" if path.endswith(("/", os.sep)) else "folder or CSV file")
        raise FileNotFoundError(
            f"`source` must be an existing image folder or CSV file. Received: "
            f"source={path!r} (no such {expected}).")
    other = _other_format(path) if os.path.isfile(path) else None
    if other is not None:
        raise ValueError(
            f"`source` must be an image folder or a CSV file ({command} reads those "
            f"only). Received: source={path!r}, {other[0]}: read it with {other[1]}.")
    return "csv"


def _folder_files(source, label_mode):
    """(paths, label per path or None, class names or None, warnings) of an image
    folder, listed as ImageFolderGenerator(source, label_mode=label_mode) lists it: a
    class folder without images is a class (with the generator's warning), and a folder
    without class subfolders is the generator's error unless label_mode is None."""
    with warnings.catch_warnings(record=True) as caught:  # listed in the report
        warnings.simplefilter("always")
        paths, ids, names, _ = listing.list_image_folder(  # unreadable ones: warned of
            source, classes_required=label_mode is not None, on_error="skip")
    found = [str(w.message) for w in caught]
    if ids is None or label_mode is None:
        return paths, None, None, found
    return paths, [names[i] for i in ids], list(names), found


def _label_errors(cells, label_mode, label_delimiter, y_col, describe):
    """(warnings, errors) of a CSV label column: the checks CSVGenerator runs on it
    (label_cells.column_labels, then label_encoding.encode), their warnings recorded and
    their refusal (a missing label, a class id without a row, a third class for
    "binary"...) the error. Cells holding the delimiter under a single-label mode,
    which the generator refuses too, stay a warning: the counts show each combination."""
    problem = label_cells.delimiter_problem(cells, label_mode, label_delimiter, y_col,
                                            describe)
    found = [] if problem is None else [problem[1]]
    if label_mode not in label_encoding.CLASS_MODES + ("multi_label",):
        return found, []
    delimiter = label_delimiter if label_mode == "multi_label" else None  # warned above
    errors: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            values = label_cells.column_labels(cells, label_mode, delimiter, y_col, describe)
            label_encoding.encode(values, label_mode, describe=describe)
        except ValueError as error:
            # ids that leave a class without a row are the data's or the generator's
            # `num_classes` (which inspect cannot know): a warning here
            (found if "num_classes" in str(error) else errors).append(str(error))
    found += [str(w.message) for w in caught if str(w.message) not in found]
    return found, errors


def _files_and_labels(source, x_col, y_col, directory, label_mode, label_delimiter,
                      encoding, allow_outside=False):
    """(paths, labels per path or None, every class name of a folder or None, warnings,
    label errors) from a folder or a CSV file. With label_mode="multi_label" each CSV
    path has a list of labels; a missing label is left out of the labels. A CSV row
    whose path leaves `directory` is CSVGenerator's error (unless `allow_outside`)."""
    if check_source(source) == "folder":
        return _folder_files(os.fspath(source), label_mode) + ([],)
    table = listing.Table.read(source, encoding)
    table.column(x_col, "x_col")
    paths = listing.resolve_paths(table.columns[x_col], table, directory, allow_outside,
                                  table.describe)
    if label_mode is None or y_col is None:
        return paths, None, None, [], []
    if y_col == "label" and y_col not in table.columns:  # the default: a list of files
        return paths, None, None, [
            f"{table.name()} has no column 'label' (the default `y_col`): classes are not "
            "counted. Name the label column with y_col= (--y-col), or pass "
            "label_mode=None (--label-mode none) for files without labels."], []
    table.column(y_col, "y_col")
    cells = table.columns[y_col]
    found, errors = _label_errors(cells, label_mode, label_delimiter, y_col,
                                  lambda i: f"{paths[i]} ({table.describe(i)})")
    rows = [label_cells.split_cell(c, label_delimiter if label_mode == "multi_label"
                                   else None) for c in cells]
    if label_mode == "multi_label":
        return paths, [[str(v) for v in row or []] for row in rows], None, found, errors
    return paths, [str(c) for c, row in zip(cells, rows) if row], None, found, errors


def _class_counts(labels, class_names):
    """{class: files}, every class of a folder included (0 for an empty class folder)."""
    if labels is None:
        return None
    counts = collections.Counter(labels)
    if class_names is not None:
        return {name: counts.get(name, 0) for name in class_names}
    return dict(sorted(counts.items())) if counts else None


def _imbalance(counts):
    """Largest / smallest class; None without classes or when a class has no files."""
    if not counts or min(counts.values()) == 0:
        return None
    return round(max(counts.values()) / min(counts.values()), 3)


@_redact.errors
def inspect(source: StrPath, x_col: str = "filename", y_col: str | None = "label",
            directory: StrPath | None = None, verbose: int = 1, threads: int | None = None,
            label_mode: LabelMode | None = "int", label_delimiter: str | None = "|",
            encoding: str = "utf-8", max_pixels: int | None = images.MAX_PIXELS,
            allow_outside: bool = False) -> dict[str, Any]:
    """Summarises an image folder (one subfolder per class) or a CSV list.

    Returns a dict: number of files, class counts, imbalance ratio (largest / smallest
    class; None when a class has no files), image sizes (min, median, max of height and
    width; the most common sizes), formats and channel counts, the files that cannot be
    decoded (each decoded once, in parallel, with a progress bar for large folders;
    `corrupt` lists each with its error and its `problem`, "missing" for a path that
    does not exist (a CSV row's) and "corrupt" otherwise: also files whose header
    declares more than `max_pixels` pixels, which the generators refuse by default, and
    files that are not regular files), `warnings` about the labels and the listing
    (entries left out of a folder), and `label_errors`: why CSVGenerator would refuse
    the CSV's labels (a missing label, say), the generator's own message, or [].

    A folder is listed as `ImageFolderGenerator(source, label_mode=label_mode)` lists
    it: the same classes, a class folder without images among them (with the
    generator's warning), and without class subfolders the generator's ValueError
    ("No class subfolders in ...") unless `label_mode` is None (unlabeled: every image
    under `source`). A `source` that does not exist is a FileNotFoundError saying what
    was expected there; a TFRecord or SQLite file a ValueError naming the generator that
    reads it; anything but a path (a DataFrame, None) a TypeError.

    For a CSV: `label_mode` "multi_label" counts every label of a cell split at
    `label_delimiter` (a row holds several); any other class mode counts each cell as one
    class, and warns when cells hold the delimiter (a forgotten "multi_label"); None
    ignores the labels. A `y_col` (unless label_mode is None) or `x_col` the CSV lacks is
    CSVGenerator's ValueError. `encoding` is the CSV file's text encoding. With
    `directory`, a row whose path leaves it ('..', an absolute path, a symbolic link) is
    CSVGenerator's ValueError naming the row, and each file is read only inside it,
    unless `allow_outside=True`, as for CSVGenerator.
    """
    _checks.one_of("label_mode", label_mode, label_encoding.LABEL_MODES)
    max_pixels = images.check_max_pixels(max_pixels)
    label_cells.check_delimiter(label_delimiter)
    paths, labels, class_names, found, label_errors = _files_and_labels(
        source, x_col, y_col, directory, label_mode, label_delimiter, encoding,
        allow_outside)
    # each file is checked again as it is read: inside the folder (its walk follows no
    # link out, as ImageFolderGenerator's), or inside `directory` for a CSV's rows
    folder = check_source(source) == "folder"
    root = (_paths.Root.of(os.fspath(source)) if folder else None if directory is None
            or allow_outside else _paths.Root.of(directory))
    for message in found:
        _redact.warn(message, stacklevel=2)
    if labels is not None and label_mode == "multi_label":
        labels = [label for row in labels for label in row]
    store = _remote.Store() if _remote.any_url(paths) else None  # rows naming URLs
    with ThreadPoolExecutor(threads or os.cpu_count() or 1) as pool:
        probes = list(progress(pool.map(lambda p: _probe(p, max_pixels, root, store), paths),
                               "Inspecting images", len(paths), verbose))
    good = [p for p in probes if p[4] is None]
    heights = np.array([p[0] for p in good]) if good else np.zeros(0)
    widths = np.array([p[1] for p in good]) if good else np.zeros(0)
    counts = _class_counts(labels, class_names)
    report = {
        "source": os.fspath(source),
        "files": len(paths),
        "classes": counts,
        "num_classes": len(counts) if counts else None,
        "imbalance_ratio": _imbalance(counts),
        "formats": dict(collections.Counter(p[3] for p in probes
                                            if not p[5]).most_common()),  # files found
        "channels": {str(k): v for k, v in
                     collections.Counter(p[2] for p in good).most_common()},
        "size": None if not good else {
            "height": {"min": int(heights.min()), "median": float(np.median(heights)),
                       "max": int(heights.max())},
            "width": {"min": int(widths.min()), "median": float(np.median(widths)),
                      "max": int(widths.max())},
            "most_common": [[f"{h}x{w}", n] for (h, w), n in collections.Counter(
                zip(heights.tolist(), widths.tolist())).most_common(5)],
        },
        "corrupt": [{"path": path, "error": p[4],
                     "problem": "missing" if p[5] else "corrupt"}
                    for path, p in zip(paths, probes) if p[4] is not None],
        "warnings": found,
        "label_errors": label_errors,
    }
    return _redacted(report)


def _redacted(value: Any) -> Any:
    """`value` (the report: dicts, lists and texts) with every URL's secrets masked."""
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return _redact.redact(value)


def format_report(report: Mapping[str, Any]) -> str:
    """The report as a plain-text table."""
    lines = [f"{report['source']}: {plural(report['files'], 'file')}"]
    classes = report["classes"]
    if classes:
        width = max(len(str(c)) for c in classes)
        total = sum(classes.values()) or 1
        largest = max(classes.values()) or 1
        empty = [name for name, count in classes.items() if not count]
        ratio = (f"imbalance ratio {report['imbalance_ratio']} (largest / smallest)"
                 if report["imbalance_ratio"] is not None else
                 f"imbalance ratio undefined: {plural(len(empty), 'class', 'classes')} "
                 "without files")
        lines.append(f"{plural(report['num_classes'], 'class', 'classes')}, {ratio}")
        for name, count in classes.items():
            bar = "#" * max(1, round(30 * count / largest)) if count else "(no files)"
            lines.append(f"  {name:<{width}}  {count:>7}  {100 * count / total:5.1f}%  {bar}")
    if report["size"]:
        h, w = report["size"]["height"], report["size"]["width"]
        lines.append(f"height: min {h['min']}, median {h['median']:g}, max {h['max']}; "
                     f"width: min {w['min']}, median {w['median']:g}, max {w['max']}")
        common = ", ".join(f"{s} ({n})" for s, n in report["size"]["most_common"])
        lines.append(f"most common sizes: {common}")
    lines.append("formats: " + ", ".join(f"{k} {v}" for k, v in report["formats"].items()))
    lines.append("channels: " + ", ".join(f"{k}: {v}" for k, v in report["channels"].items()))
    lines += [f"warning: {w}" for w in report.get("warnings", ())]
    lines += [f"label error: {e}" for e in report.get("label_errors", ())]
    missing = [c for c in report["corrupt"] if c.get("problem") == "missing"]
    corrupt = [c for c in report["corrupt"] if c.get("problem") != "missing"]
    lines.append(f"corrupt files: {len(corrupt)}")
    lines += [f"  {c['path']}: {c['error']}" for c in corrupt[:20]]
    if len(corrupt) > 20:
        lines.append(f"  ... and {len(corrupt) - 20} more")
    if missing:
        lines.append(f"missing files: {len(missing)}")
        lines += [f"  {c['path']}" for c in missing[:20]]
        if len(missing) > 20:
            lines.append(f"  ... and {len(missing) - 20} more")
    return "\n".join(lines)
