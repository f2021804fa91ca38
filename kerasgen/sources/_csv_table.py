"""CSV tables of files: a CSV file, several read as one, or a DataFrame, as columns of
Python values with row names for errors (`Table`); paths read from them resolved and
confined (`resolve_paths`) and found (`exists`)."""

import codecs
import csv
import glob
import io
import os
from typing import Any


from kerasgen import _checks
from kerasgen.storage import paths as _paths
from kerasgen.storage import remote as _remote


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
    _refuse_binary_table(path, data)
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


# the leading bytes of binary table files that a CSV list is sometimes given
_BINARY_TABLES = ((b"PAR1", "a Parquet file", "pandas.read_parquet(path)"),
                  (b"ARROW1", "an Arrow IPC (Feather v2) file",
                   "pyarrow.ipc.open_file(path).read_pandas()"),
                  (b"FEA1", "a Feather v1 file", "pandas.read_feather(path)"))


def _refuse_binary_table(path, data):
    """A Parquet or Arrow file read as CSV text: a ValueError saying what it is and how
    to pass it (a DataFrame), not advice about text encodings."""
    for magic, what, read in _BINARY_TABLES:
        if bytes(data[:len(magic)]) == magic:
            raise ValueError(
                f"The CSV file {path} is {what}, not CSV text. Read it into a DataFrame "
                f"and pass that: kg.CSVGenerator({read.replace('path', repr(str(path)))}, "
                "x_col=..., y_col=...).")


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
