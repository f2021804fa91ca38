"""Sources: what the samples are. Folder walks and validation splits; the CSV tables are
`sources._csv_table`'s (their names re-exported here)."""

import errno
import os
from typing import Any, NamedTuple

import numpy as np

from kerasgen import _checks
from kerasgen.storage import paths as _paths
from kerasgen.storage import remote as _remote
from kerasgen import _seeding as seeding
from kerasgen.loading.images import IMAGE_EXTENSIONS, file_kind
from kerasgen import _redact
from kerasgen.sources._csv_table import Table as Table
from kerasgen.sources._csv_table import check_unique as check_unique
from kerasgen.sources._csv_table import exists as exists
from kerasgen.sources._csv_table import parse_number as parse_number
from kerasgen.sources._csv_table import resolve_paths as resolve_paths


class FileKind(NamedTuple):
    """The files a folder listing reads: their kind, in the plural ("images"), the one
    word for one, with its article ("an image"), and their name endings, lowercase."""

    plural: str
    single: str
    extensions: tuple

    def matches(self, name):
        return name.lower().endswith(self.extensions)


IMAGES = FileKind("images", "an image", IMAGE_EXTENSIONS)


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
    leads out of it is an error naming it (Keras would read it), in `storage.paths`' one form
    (lifted by follow_links=True). With `follow_links`,
    each real folder is entered once, whatever the links leading to it: a link back to a
    folder already listed (a loop, or a second way to the same files) is skipped with a
    warning naming it.
    """

    def __init__(self, root, follow_links, kind=IMAGES):
        self.follow_links, self.kind = follow_links, kind
        self.top = _paths.Root.of(root, "`directory`", "follow_links=True")
        self.visited = set()
        self.odd, self.escapes, self.notes = [], [], []  # odd: (path, why unreadable)

    def files(self, folder):
        """The files of `self.kind` under `folder`, recursively."""
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
            self.notes.append(f"Cannot list the folder {folder!r} ({error}); its "
                              f"{self.kind.plural} are left out.")
            return
        folders = []
        for entry in entries:
            if entry.is_symlink() and _loops(entry.path):
                if self.kind.matches(entry.name):
                    self.odd.append((entry.path, "a symbolic link that leads back to "
                                                 "itself, a loop of links"))
                else:
                    self.notes.append(
                        f"{entry.path!r} is a symbolic link that leads back to itself (a "
                        "loop of links): it cannot be read, and is left out.")
                continue
            if _is_folder(entry):  # a link to a folder counts, as in os.walk
                folders.append(entry)
            elif self.kind.matches(entry.name):
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
        entries = (f"{n} entr{'ies' if n > 1 else 'y'} named like {self.kind.single} "
                   f"but not a regular file: {shown}{' ...' if n > 5 else ''}. Only "
                   f"regular files (and links to them) are read as {self.kind.plural}")
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
                      follow_links=False, flat=False, on_error="raise", store=None,
                      kind=IMAGES):
    """Lists an image folder with one subfolder per class (a folder of another `kind` of
    file, text or audio, alike).

    Returns a `Listing`. Without class subfolders and with `classes_required=False`,
    every image under `directory` is listed flat, with no labels. An entry named like an
    image that cannot be read is an error naming it, or with on_error="skip" left out
    with a warning and listed in `Listing.skipped`. A URL (s3://, gs://, https://...) is
    listed once through `store` (a `storage.remote.Store`), in the same order.
    """
    if not isinstance(directory, (str, os.PathLike)):
        _checks.fail("directory", "a path to a folder", directory, TypeError)
    directory = _remote.local(os.fspath(directory))
    if _remote.is_url(directory):
        return _remote_folder(store or _remote.Store(), directory, class_names,
                              classes_required, flat, kind)
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"`directory` must be an existing folder. Received: directory={directory!r} "
            "(not found)." if not os.path.exists(directory) else
            f"`directory` must be a folder. Received: directory={directory!r} (a file)."
        )
    walk = _Walk(directory, follow_links, kind)
    if flat:
        paths = walk.files(directory)
        skipped = walk.finish(on_error)
        if not paths:
            raise ValueError(_no_images_message(directory, kind))
        return Listing(paths, None, None, skipped)
    subfolders = sorted(d for d in os.listdir(directory)
                        if os.path.isdir(os.path.join(directory, d)) and not d.startswith("."))
    class_names = _class_folders(directory, class_names, subfolders, classes_required,
                                  kind)
    if not class_names:
        paths = walk.files(directory)
        skipped = walk.finish(on_error)
        if not paths:
            raise ValueError(_no_images_message(directory, kind))
        return Listing(paths, None, None, skipped)
    paths, class_ids = [], []
    # a link inside one class folder to the root or to a class folder lists nothing again
    walk.visited.update(os.path.realpath(p) for p in [directory] + [
        os.path.join(directory, name) for name in class_names])
    for class_id, name in enumerate(class_names):
        files = walk.files(os.path.join(directory, name))
        if not files and not walk.escapes:
            _redact.warn(f"Class folder {os.path.join(directory, name)!r} holds no "
                         f"{kind.plural}; class {name!r} will have no samples.", stacklevel=3)
        paths.extend(files)
        class_ids.extend([class_id] * len(files))
    skipped = walk.finish(on_error)
    if not paths:
        raise ValueError(_no_images_message(directory, kind))
    return Listing(paths, np.asarray(class_ids, dtype="int64"), class_names, skipped)


def _class_folders(directory, class_names, subfolders, classes_required, kind=IMAGES):
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
            f"No class subfolders in {directory}. Put each class's {kind.plural} in a "
            "subfolder named after the class, or pass label_mode=None to load the "
            f"folder's {kind.plural} without labels."
        )
    return class_names or None


def _remote_folder(store, directory, class_names, classes_required, flat, kind=IMAGES):
    """`list_image_folder` of the URL `directory`: one listing of every object under
    it. Folders are prefixes there: a class folder is one holding an object."""
    directory = directory.rstrip("/")
    found = store.find(directory, "folder")
    if not found:
        raise FileNotFoundError(
            f"`directory` must be an existing folder. Received: directory={directory!r} "
            "(nothing found under it).")
    images = [(rel, url) for rel, url in found if kind.matches(rel)]
    if flat:
        if not images:
            raise ValueError(_no_images_message(directory, kind))
        return Listing([url for _, url in images], None, None, [])
    subfolders = sorted({rel.split("/", 1)[0] for rel, _ in found if "/" in rel})
    class_names = _class_folders(directory, class_names, subfolders, classes_required,
                                  kind)
    if not class_names:
        if not images:
            raise ValueError(_no_images_message(directory, kind))
        return Listing([url for _, url in images], None, None, [])
    paths, class_ids = [], []
    for class_id, name in enumerate(class_names):
        files = [url for rel, url in images if rel.startswith(name + "/")]
        if not files:
            _redact.warn(f"Class folder {directory + '/' + name!r} holds no "
                         f"{kind.plural}; class {name!r} will have no samples.", stacklevel=3)
        paths.extend(files)
        class_ids.extend([class_id] * len(files))
    if not paths:
        raise ValueError(_no_images_message(directory, kind))
    return Listing(paths, np.asarray(class_ids, dtype="int64"), class_names, [])


def paired_masks(paths, directory, mask_dir, store=None, what="mask", argument="mask_dir",
                 follow_links=False):
    """The mask (`what`) of each image: the same relative path under `mask_dir`, any
    image extension (the image's own first). Refuses images without one, naming them. A
    URL `mask_dir` is listed once through `store`. `argument` names mask_dir in errors
    (target_dir: paired target images). Without `follow_links`, a mask that is (or lies
    behind) a symbolic link leading out of `mask_dir` is refused, as an image leading out
    of `directory` is (`storage.paths`' one message, naming the mask and its image)."""
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


def _no_images_message(directory, kind=IMAGES):
    return (f"No {kind.plural} found in {directory}. {kind.plural.capitalize()} must end "
            f"in one of {', '.join(kind.extensions)}.")


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
