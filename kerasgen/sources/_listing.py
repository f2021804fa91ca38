"""Sources: what the samples are. Folder walks, validation splits and CSV tables."""

import codecs
import errno
import csv
import glob
import io
import os
from typing import Any, NamedTuple

import numpy as np

from kerasgen import _checks
from kerasgen.sources import _paths, _remote
from kerasgen import _seeding as seeding
from kerasgen._images import IMAGE_EXTENSIONS, file_kind, is_image_file
from kerasgen import _redact



class _Walk:
    """Lists the image files of one image folder (one or several walks: the root, or each
    class folder), in os.walk's sorted order: a folder's files, then its subfolders,
    each sorted by name. Hidden files and folders (names starting with '.') are ignored.

    Only regular files are listed: an entry named like an image that is a FIFO, a socket,
    a device, a broken link or a link that leads back to itself cannot be read (reading a
    FIFO would block forever). `finish` raises naming them, or with on_error="skip" leaves
    them out with a warning and returns them, for the skip report (`gen.skipped`).

    Symbolic links, as Keras's os.walk(followlinks=follow_links) meets them: a link to a
    file, and a class folder that is a link, are read with either setting; a link to a
    folder inside a class folder (or inside a flat folder) is entered only with
    `follow_links`. Without `follow_links`, nothing outside `root` is read: a link that
    leads out of it is an error naming it (Keras would read it), in `_paths`' one form
    (lifted by follow_links=True). With `follow_links`,
    each real folder is entered once, whatever the links leading to it: a link back to a
    folder already listed (a loop, or a second way to the same files) is skipped with a
    warning naming it.
    """

    def __init__(self, root, follow_links):
        self.follow_links = follow_links
        self.top = _paths.Root.of(root, "`directory`", "follow_links=True")
        self.visited = set()
        self.odd, self.escapes, self.notes = [], [], []  # odd: (path, why unreadable)

    def files(self, folder):
        """The image files under `folder`, recursively."""
        found: list[str] = []
        if self.follow_links:
            self.visited.add(os.path.realpath(folder))
        elif os.path.islink(folder) and not self._inside(folder):
            return found  # a class folder that leads out: named by `finish`
        self._walk(folder, found)
        return found

    def _inside(self, link):
        real = os.path.realpath(link)
        if self.top.holds(real):
            return True
        self.escapes.append(_paths.Escape(os.path.relpath(link, self.top.folder),
                                          f"the folder {self.top.folder}",
                                          f"it is a symbolic link to {real}"))
        return False

    def _walk(self, folder, found):
        try:
            with os.scandir(folder) as listing:
                entries = sorted((e for e in listing if not e.name.startswith(".")),
                                 key=lambda e: e.name)  # .ipynb_checkpoints, .DS_Store...
        except OSError as error:
            self.notes.append(f"Cannot list the folder {folder!r} ({error}); its images "
                              "are left out.")
            return
        folders = []
        for entry in entries:
            if entry.is_symlink() and _loops(entry.path):
                if is_image_file(entry.name):
                    self.odd.append((entry.path, "a symbolic link that leads back to "
                                                 "itself, a loop of links"))
                else:
                    self.notes.append(
                        f"{entry.path!r} is a symbolic link that leads back to itself (a "
                        "loop of links): it cannot be read, and is left out.")
                continue
            if _is_folder(entry):  # a link to a folder counts, as in os.walk
                folders.append(entry)
            elif is_image_file(entry.name):
                if entry.is_symlink() and not self.follow_links and not self._inside(
                        entry.path):
                    continue
                if _is_regular(entry):
                    found.append(entry.path)
                else:
                    self.odd.append((entry.path, _odd_kind(entry.path)))
        for entry in folders:
            if entry.is_symlink() and not self.follow_links:
                continue  # os.walk(followlinks=False): a folder, but not entered
            if self.follow_links and not self._first_visit(entry.path):
                continue
            self._walk(entry.path, found)

    def _first_visit(self, path):
        """True the first time the walk meets the real folder `path` leads to."""
        real = os.path.realpath(path)
        if real in self.visited:
            self.notes.append(
                f"{path!r} leads to {real!r}, a folder already listed (a loop of symbolic "
                "links, or a second link to the same folder): its files are listed once, "
                "not again under this path.")
            return False
        self.visited.add(real)
        return True

    def finish(self, on_error="raise", stacklevel=4):
        """Raises the links that lead out of the root; raises the entries named like an
        image that cannot be read (on_error="raise"), or warns of them and of what else
        was left out; returns the entries left out (the skip report's)."""
        _paths.refuse(self.escapes, self.top, "replace the links by the files" if len(
            self.escapes) > 1 else "replace the link by the file")
        for note in self.notes:
            _redact.warn(note, stacklevel=stacklevel)
        if not self.odd:
            return []
        n = len(self.odd)
        shown = ", ".join(f"{path} ({why})" for path, why in self.odd[:5])
        entries = (f"{n} entr{'ies' if n > 1 else 'y'} named like an image but not a "
                   f"regular file: {shown}{' ...' if n > 5 else ''}. Only regular files "
                   "(and links to them) are read as images")
        if on_error == "raise":
            raise ValueError(
                f"Cannot read {entries}. Remove or replace {'them' if n > 1 else 'it'}, "
                "or pass on_error='skip' to leave such entries out (`gen.skipped` lists "
                "them).")
        _redact.warn(f"Leaving out {entries}; `gen.skipped` lists "
                     f"{'them' if n > 1 else 'it'}.", stacklevel=stacklevel)
        return [path for path, _ in self.odd]


def _is_folder(entry):
    try:
        return entry.is_dir()
    except OSError:
        return False


def _loops(path):
    """Whether the link `path` resolves to itself, through a loop of links."""
    try:
        os.stat(path)
    except OSError as error:
        return error.errno == errno.ELOOP
    return False


def _is_regular(entry):
    try:
        return entry.is_file()  # follows links; no system call for a plain file
    except OSError:
        return False


def _odd_kind(path):
    try:
        return file_kind(os.stat(path).st_mode)
    except FileNotFoundError:
        return "a broken symbolic link"
    except OSError as error:
        return str(error)


def keras_order(paths):
    """`paths` in the order Keras's image_dataset_from_directory lists a folder without
    class subfolders (labels=None or a list): os.walk's folders sorted by their path
    (a string sort: 'a-b' before 'a/x'), then the files of each sorted by name."""
    return sorted(paths, key=lambda p: (os.path.dirname(p), os.path.basename(p)))


class Listing(NamedTuple):
    """What `list_image_folder` found."""

    paths: list
    class_ids: Any  # an int64 array, or None without classes
    class_names: Any  # a list, or None without classes
    skipped: list  # entries named like an image that cannot be read (on_error="skip")


def list_image_folder(directory, class_names=None, classes_required=True,
                      follow_links=False, flat=False, on_error="raise", store=None):
    """Lists an image folder with one subfolder per class.

    Returns a `Listing`. Without class subfolders and with `classes_required=False`,
    every image under `directory` is listed flat, with no labels. An entry named like an
    image that cannot be read is an error naming it, or with on_error="skip" left out
    with a warning and listed in `Listing.skipped`. A URL (s3://, gs://, https://...) is
    listed once through `store` (a `sources._remote.Store`), in the same order.
    """
    if not isinstance(directory, (str, os.PathLike)):
        _checks.fail("directory", "a path to a folder", directory, TypeError)
    directory = _remote.local(os.fspath(directory))
    if _remote.is_url(directory):
        return _remote_folder(store or _remote.Store(), directory, class_names,
                              classes_required, flat)
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"`directory` must be an existing folder. Received: directory={directory!r} "
            "(not found)." if not os.path.exists(directory) else
            f"`directory` must be a folder. Received: directory={directory!r} (a file)."
        )
    walk = _Walk(directory, follow_links)
    if flat:
        paths = walk.files(directory)
        skipped = walk.finish(on_error)
        if not paths:
            raise ValueError(_no_images_message(directory))
        return Listing(paths, None, None, skipped)
    subfolders = sorted(d for d in os.listdir(directory)
                        if os.path.isdir(os.path.join(directory, d)) and not d.startswith("."))
    class_names = _class_folders(directory, class_names, subfolders, classes_required)
    if not class_names:
        paths = walk.files(directory)
        skipped = walk.finish(on_error)
        if not paths:
            raise ValueError(_no_images_message(directory))
        return Listing(paths, None, None, skipped)
    paths, class_ids = [], []
    # a link inside one class folder to the root or to a class folder lists nothing again
    walk.visited.update(os.path.realpath(p) for p in [directory] + [
        os.path.join(directory, name) for name in class_names])
    for class_id, name in enumerate(class_names):
        files = walk.files(os.path.join(directory, name))
        if not files and not walk.escapes:
            _redact.warn(f"Class folder {os.path.join(directory, name)!r} holds no "
                         f"images; class {name!r} will have no samples.", stacklevel=3)
        paths.extend(files)
        class_ids.extend([class_id] * len(files))
    skipped = walk.finish(on_error)
    if not paths:
        raise ValueError(_no_images_message(directory))
    return Listing(paths, np.asarray(class_ids, dtype="int64"), class_names, skipped)


def _class_folders(directory, class_names, subfolders, classes_required):
    """The class names of a folder with `subfolders`: `class_names` checked against
    them, or the subfolders; None (no classes) only when `classes_required` is False."""
    if class_names is not None:
        class_names = [str(c) for c in class_names]
        if len(set(class_names)) != len(class_names):
            _checks.fail("class_names", "a list of distinct names", class_names)
        missing = [c for c in class_names if c not in subfolders]
        if missing:
            raise ValueError(
                f"`class_names` must name subfolders of {directory}. Received: "
                f"class_names={class_names}; not found: {missing}. Subfolders: {subfolders}."
            )
    else:
        class_names = subfolders
    if not class_names and classes_required:
        raise ValueError(
            f"No class subfolders in {directory}. Put each class's images in a "
            "subfolder named after the class, or pass label_mode=None to load the "
            "folder's images without labels."
        )
    return class_names or None


def _remote_folder(store, directory, class_names, classes_required, flat):
    """`list_image_folder` of the URL `directory`: one listing of every object under
    it. Folders are prefixes there: a class folder is one holding an object."""
    directory = directory.rstrip("/")
    found = store.find(directory, "folder")
    if not found:
        raise FileNotFoundError(
            f"`directory` must be an existing folder. Received: directory={directory!r} "
            "(nothing found under it).")
    images = [(rel, url) for rel, url in found if is_image_file(rel)]
    if flat:
        if not images:
            raise ValueError(_no_images_message(directory))
        return Listing([url for _, url in images], None, None, [])
    subfolders = sorted({rel.split("/", 1)[0] for rel, _ in found if "/" in rel})
    class_names = _class_folders(directory, class_names, subfolders, classes_required)
    if not class_names:
        if not images:
            raise ValueError(_no_images_message(directory))
        return Listing([url for _, url in images], None, None, [])
    paths, class_ids = [], []
    for class_id, name in enumerate(class_names):
        files = [url for rel, url in images if rel.startswith(name + "/")]
        if not files:
            _redact.warn(f"Class folder {directory + '/' + name!r} holds no images; "
                         f"class {name!r} will have no samples.", stacklevel=3)
        paths.extend(files)
        class_ids.extend([class_id] * len(files))
    if not paths:
        raise ValueError(_no_images_message(directory))
    return Listing(paths, np.asarray(class_ids, dtype="int64"), class_names, [])


def paired_masks(paths, directory, mask_dir, store=None, what="mask", argument="mask_dir",
                 follow_links=False):
    """The mask (`what`) of each image: the same relative path under `mask_dir`, any
    image extension (the image's own first). Refuses images without one, naming them. A
    URL `mask_dir` is listed once through `store`. `argument` names mask_dir in errors
    (target_dir: paired target images). Without `follow_links`, a mask that is (or lies
    behind) a symbolic link leading out of `mask_dir` is refused, as an image leading out
    of `directory` is (`_paths`' one message, naming the mask and its image)."""
    mask_dir = _remote.local(os.fspath(mask_dir))
    root = _paths.Root.of(mask_dir, f"`{argument}`", "follow_links=True")
    store = store or _remote.Store()
    if _remote.is_url(mask_dir):
        listed = {rel: url for rel, url in store.find(
            mask_dir.rstrip("/"), f"{what} folder")}

        def exists(rel):
            return listed.get(rel)
    else:
        if not os.path.isdir(mask_dir):
            raise FileNotFoundError(f"`{argument}` must be an existing folder. Received: "
                                    f"{argument}={mask_dir!r} (not found).")

        def exists(rel):
            mask = os.path.join(mask_dir, rel)
            return mask if os.path.isfile(mask) else None
    relative = store.relative if _remote.is_url(os.fspath(directory)) else os.path.relpath
    masks, missing, escapes = [], [], []
    for path in paths:
        stem, ext = os.path.splitext(relative(path, directory))
        for candidate in (ext,) + IMAGE_EXTENSIONS + tuple(e.upper() for e in IMAGE_EXTENSIONS):
            mask = exists(stem + candidate)
            if mask is not None:
                why = None if follow_links else root.why_outside(stem + candidate, mask)
                if why is not None:
                    escapes.append(_paths.Escape(stem + candidate, f"the {what} folder "
                                                 f"{mask_dir} (the {what} of {path})", why))
                masks.append(mask)
                break
        else:
            missing.append(path)
    _paths.refuse(escapes, root, "replace the links by the files" if len(escapes) > 1
                  else "replace the link by the file")
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} image{' has' if len(missing) == 1 else 's have'} no {what} in "
            f"{mask_dir} (same relative path, any "
            f"image extension): {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}."
        )
    return masks


def _no_images_message(directory):
    return (f"No images found in {directory}. Images must end in one of "
            f"{', '.join(IMAGE_EXTENSIONS)}.")


def validation_subset(class_ids, num_samples, validation_split, subset, seed, files=None,
                      describe=None, class_names=None, stacklevel=5):
    """Indices of `subset` ("training" | "validation") of a seeded split.

    The split is stratified by class: each class gives round(split * count) samples
    to validation. The two subsets never overlap and together hold every sample;
    generators built with the same seed agree on it. A class left without a sample in
    `subset` is warned of, named by `class_names`. With `files` (one path per sample),
    the rows of a file listed more than once all go where its first row goes, with a
    warning naming it (`describe(i)` names row i): no file is in both subsets.
    """
    if validation_split is None and subset is None:
        return None
    if validation_split is None:
        raise ValueError(f"`subset` needs `validation_split`. Received: subset={subset!r} "
                         "and validation_split=None.")
    validation_split = _checks.fraction("validation_split", validation_split)
    if subset is None:
        raise ValueError(
            f"`validation_split` needs `subset`. Received: validation_split="
            f"{validation_split} and subset=None. Pass subset='training' or 'validation'."
        )
    _checks.one_of("subset", subset, ("training", "validation"))
    if seed is None:
        raise ValueError(
            "`seed` must be given with `validation_split`, so that the training and "
            "validation generators split the files the same way. Received: seed=None."
        )
    rng = seeding.rng(seed, seeding.SPLIT)
    groups = class_ids if class_ids is not None else np.zeros(num_samples, "int64")
    validation = np.zeros(num_samples, dtype=bool)
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        take = int(round(validation_split * len(members)))
        validation[rng.permutation(members)[:take]] = True
    if files is not None:
        validation = _by_file(validation, files, describe, stacklevel)
    chosen = validation if subset == "validation" else ~validation
    indices = np.flatnonzero(chosen)
    if class_ids is not None and len(indices):
        _warn_empty_classes(groups, indices, subset, validation_split, class_names,
                            stacklevel)
    if not len(indices):
        raise ValueError(
            f"The {subset} subset is empty with validation_split={validation_split} over "
            f"{num_samples} samples. Use a validation_split that leaves samples on both sides."
        )
    return indices


def _warn_empty_classes(groups, indices, subset, validation_split, class_names, stacklevel):
    """Warns of the classes that have samples but none in `subset` (too few samples for
    the split), naming them and their counts."""
    counts = np.bincount(groups)
    kept = np.bincount(groups[indices], minlength=len(counts))
    empty = [k for k in range(len(counts)) if counts[k] and not kept[k]]
    if empty:
        shown = ", ".join(f"{class_names[k] if class_names is not None else k!r} "
                          f"({counts[k]} sample{'s' if counts[k] > 1 else ''})"
                          for k in empty[:5])
        _redact.warn(
            f"The {subset} subset of validation_split={validation_split} has no sample of "
            f"{len(empty)} class{'es' if len(empty) > 1 else ''}: {shown}"
            f"{' ...' if len(empty) > 5 else ''}. The model will "
            f"{'never train on' if subset == 'training' else 'not be validated on'} "
            f"{'them' if len(empty) > 1 else 'it'}: add samples, or use a smaller "
            "validation_split.", stacklevel=stacklevel)


def _by_file(validation, files, describe, stacklevel):
    """`validation` with every row of a file following the file's first row; a warning
    names the files listed more than once."""
    first: dict[str, int] = {}  # a file's path -> its first row
    owner = np.asarray([first.setdefault(os.path.normpath(f), i) for i, f in enumerate(files)])
    repeated = np.flatnonzero(owner != np.arange(len(files)))
    if not len(repeated):
        return validation
    shown = "; ".join(f"{describe(int(i)) if describe else files[i]} repeats "
                      f"{describe(int(owner[i])) if describe else 'an earlier row'}"
                      for i in repeated[:3])
    _redact.warn(
        f"{len(repeated)} row{'s' if len(repeated) > 1 else ''} name a file listed before "
        f"({shown}{' ...' if len(repeated) > 3 else ''}): each file's rows are put in one "
        "subset of the validation split, that of its first row, so that no file is in "
        "both.", stacklevel=stacklevel)
    return validation[owner]


class Table:
    """A CSV file, several CSV files read as one, or a DataFrame, as columns of Python
    values, with row names for errors.

    `csv`: a path, a list of paths, a glob pattern ("parts/*.csv", sorted matches), or a
    pandas DataFrame. Several files must have the same columns (in any order); their
    rows follow one another in the order given, each named by its own file and line,
    and file names in them are relative to their own file's folder.
    """

    def __init__(self, csv_source, encoding="utf-8", store=None):
        self.path = None
        self.label = None
        if isinstance(csv_source, Table):
            self.__dict__.update(csv_source.__dict__)
            return
        if hasattr(csv_source, "columns") and hasattr(csv_source, "to_dict"):
            frame = csv_source
            if len(frame) == 0:
                raise ValueError("The DataFrame passed as `csv` has no rows.")
            check_unique([str(c) for c in frame.columns], "The DataFrame passed as `csv`")
            self.columns = {str(c): frame[c].tolist() for c in frame.columns}
            self.rows = list(frame.index)
            base_dir = os.getcwd()
        elif isinstance(csv_source, (str, os.PathLike)):
            self.path = _remote.local(os.fspath(csv_source))
            data = None
            if _remote.is_url(self.path):
                try:
                    data = (store or _remote.Store()).read(self.path, "CSV file").tobytes()
                except FileNotFoundError:
                    data = None
            if data is None and not os.path.exists(self.path):
                raise FileNotFoundError(f"`csv` must be an existing CSV file. Received: "
                                        f"csv={self.path!r} (not found).")
            header, rows, lines = _read_csv(self.path, encoding, data)
            self.columns = {h: [r[k].strip() if k < len(r) else "" for r in rows]
                            for k, h in enumerate(header)}
            self.rows = lines  # the line each row starts on, for messages
            base_dir = (self.path.rsplit("/", 1)[0] if data is not None
                        else os.path.dirname(os.path.abspath(self.path)))
        else:
            _checks.fail("csv", "a path to a CSV file (or a list or glob pattern of them) "
                         "or a pandas DataFrame", csv_source, TypeError)
        self.num_rows = len(next(iter(self.columns.values())))
        self.files = [self.path] * self.num_rows  # the file of each row (None: a frame)
        self.dirs = [base_dir] * self.num_rows  # the folder its file names start from

    @classmethod
    def read(cls, csv_source, encoding="utf-8", store=None):
        """The table of `csv_source`: one file, several (a list, or a glob pattern that
        names no existing file), or a DataFrame; URLs are read through `store`."""
        if isinstance(csv_source, (str, os.PathLike)) and glob.has_magic(
                os.fspath(csv_source)) and not os.path.exists(csv_source):
            pattern = _remote.local(os.fspath(csv_source))
            paths = ((store or _remote.Store()).expand(pattern) if _remote.is_url(pattern)
                     else sorted(glob.glob(pattern)))
            if not paths:
                raise FileNotFoundError(
                    f"`csv` must be an existing CSV file, or a pattern naming some. "
                    f"Received: csv={pattern!r} (a pattern no file matches).")
            return cls.concat([cls(p, encoding, store) for p in paths], pattern)
        if isinstance(csv_source, (list, tuple)):
            if not csv_source:
                _checks.fail("csv", "a CSV file or a non-empty list of them", csv_source)
            return cls.concat([cls(p, encoding, store) for p in csv_source])
        return cls(csv_source, encoding, store)

    @classmethod
    def concat(cls, tables, name=None):
        """The rows of `tables`, one after the other, as one table."""
        first = tables[0]
        for other in tables[1:]:
            if set(other.columns) != set(first.columns):
                raise ValueError(
                    f"Every CSV file read as one table must have the same columns. "
                    f"Received: {other.name()} has columns {list(other.columns)}, "
                    f"{first.name()} has {list(first.columns)}.")
        table = cls.__new__(cls)
        table.path = first.path if len(tables) == 1 else None
        table.label = None if len(tables) == 1 else (
            name or ", ".join(t.name() for t in tables))
        table.columns = {c: [v for t in tables for v in t.columns[c]] for c in first.columns}
        table.rows = [r for t in tables for r in t.rows]
        table.files = [f for t in tables for f in t.files]
        table.dirs = [d for t in tables for d in t.dirs]
        table.num_rows = len(table.rows)
        return table

    @classmethod
    def from_columns(cls, columns, label, base_dir):
        """A table of query results or other columns; rows are named '<label> row N'."""
        table = cls.__new__(cls)
        table.path, table.label = None, label
        table.columns = columns
        table.num_rows = len(next(iter(columns.values())))
        table.rows = list(range(table.num_rows))
        table.files = [None] * table.num_rows
        table.dirs = [base_dir] * table.num_rows
        return table

    def name(self):
        if self.label is not None:
            return self.label
        return self.path if self.path is not None else "the DataFrame"

    def describe(self, i):
        if self.files[i] is not None:
            return f"line {self.rows[i]} of {self.files[i]}"
        if self.label is not None:
            return f"row {self.rows[i] + 1} of {self.label}"
        return f"row {self.rows[i]!r} of the DataFrame"

    def column(self, name, argument):
        if name not in self.columns:
            raise ValueError(
                f"`{argument}` must name a column of {self.name()}. Received: "
                f"{argument}={name!r}. Columns: {list(self.columns)}."
            )
        return self.columns[name]

    def subset(self, keep):
        """Keeps only the rows in `keep` (sorted row numbers)."""
        self.columns = {k: [v[i] for i in keep] for k, v in self.columns.items()}
        self.rows = [self.rows[i] for i in keep]
        self.files = [self.files[i] for i in keep]
        self.dirs = [self.dirs[i] for i in keep]
        self.num_rows = len(keep)


def _read_csv(path, encoding, data=None):
    """(header, rows, line numbers) of a CSV file. Blank lines are skipped; a row longer
    than the header (extra cells that would be lost), a column name used twice and
    bytes that are not text in `encoding` are errors naming the line or column."""
    try:
        codec = codecs.lookup(encoding).name
    except (LookupError, TypeError):
        _checks.fail("encoding", "a text encoding Python knows ('utf-8', 'latin-1', "
                     "'cp1252'...)", encoding)
    if data is None:
        with _checks.open_regular(path, "the CSV file") as f:  # a FIFO would block
            data = f.read()
    try:  # a UTF-8 byte-order mark is not part of the first column's name
        text = data.decode("utf-8-sig" if codec == "utf-8" else encoding)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"The CSV file {path} is not {encoding!r} text: byte "
            f"{data[error.start]:#04x} on line {line} cannot be decoded. Pass the file's "
            f"`encoding` (encoding='latin-1' or 'cp1252' for most Western European "
            f"files). Received: encoding={encoding!r}."
        ) from error
    reader = _Reader(path, csv.reader(io.StringIO(text, newline="")))
    header = next(reader, None)
    rows, lines, line = [], [], reader.line_num + 1
    for row in reader:
        if any(cell.strip() for cell in row):
            if header and len(row) > len(header) and any(c.strip() for c in row[len(header):]):
                raise ValueError(
                    f"Line {line} of {path} has {len(row)} cells, but the header names "
                    f"{len(header)} columns {[h.strip() for h in header]}: the extra cells "
                    f"{row[len(header):]} would be lost. Fix that line (a value holding a "
                    "comma needs quotes: \"a,b\"), or name the extra columns in the header."
                )
            rows.append(row)
            lines.append(line)
        line = reader.line_num + 1
    if not header or not rows:
        raise ValueError(f"The CSV file {path} is empty: it needs a header line and at "
                         "least one row.")
    header = [h.strip() for h in header]
    check_unique(header, f"The header of {path}")
    return header, rows, lines


class _Reader:
    """A csv.reader whose errors (a cell above Python's field size limit, a NUL byte)
    are ValueErrors naming the file and line."""

    def __init__(self, path, reader):
        self.path, self.reader = path, reader

    @property
    def line_num(self):
        return self.reader.line_num

    def __iter__(self):
        return self

    def __next__(self):
        start = self.reader.line_num + 1  # the line the row starts on
        try:
            return next(self.reader)
        except csv.Error as error:
            hint = ""
            if "field larger than field limit" in str(error):
                hint = (f" (a cell longer than {csv.field_size_limit():,} characters: "
                        "most often a quote (\") left open, which runs the lines after it "
                        "into one cell; close it, or raise csv.field_size_limit() for "
                        "cells that long)")
            raise ValueError(f"Cannot read the row starting on line {start} of the CSV "
                             f"file {self.path}: {error}{hint}.") from None


def check_unique(names, where):
    seen: dict[Any, int] = {}  # a column's name -> its column
    for k, name in enumerate(names):
        if name in seen:
            raise ValueError(
                f"{where} names column {name!r} twice (columns {seen[name] + 1} and "
                f"{k + 1}), so one of them would be ignored. Give every column its own name."
            )
        seen[name] = k


def parse_number(value):
    """'3' -> 3, '0.5' -> 0.5, other strings unchanged; CSV cells arrive as text."""
    if not isinstance(value, str):
        return value
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def resolve_paths(values, table, directory, allow_outside, describe):
    """Joins the CSV's file names to their folder (`directory`, or each row's file's),
    refusing paths that leave `directory` (`_paths.Root.check`: '..', an absolute path,
    a URL or a symbolic link; `allow_outside=True` lifts it). A name that is a URL is
    kept; a name in a remote folder (a URL `directory`, or a CSV file read from a URL)
    becomes a URL. Without `directory` names are taken as written, from the row's own
    file's folder (documented)."""
    root = None if directory is None else _paths.Root.of(directory)
    if root is not None and not root.remote and not os.path.isdir(root.folder):
        raise FileNotFoundError(f"`directory` must be an existing folder. Received: "
                                f"directory={root.folder!r} (not found).")
    paths = []
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"File name missing at {describe(i)}. Received: {value!r}.")
        if root is not None:
            path = root.join(value, describe(i))
            if not allow_outside:
                root.check(value, path, describe(i), "fix that row")
        elif _remote.is_url(value) or _remote.is_url(table.dirs[i]):
            try:
                path = value if _remote.is_url(value) else _paths.join_url(table.dirs[i], value)
            except ValueError as error:
                raise ValueError(f"{error} At {describe(i)}.") from None
        else:
            path = os.path.normpath(os.path.join(table.dirs[i], _remote.local(value)))
        paths.append(path)
    return paths


def exists(paths, store=None):
    """Whether each path (a local file, or a URL asked of `store`, a listing per folder)
    exists as a file."""
    found = [False] * len(paths)
    urls = [i for i, p in enumerate(paths) if _remote.is_url(p)]
    if urls:
        for i, ok in zip(urls, (store or _remote.Store()).exists([paths[i] for i in urls])):
            found[i] = ok
    for i, path in enumerate(paths):
        if not _remote.is_url(path):
            found[i] = os.path.isfile(path)
    return found
