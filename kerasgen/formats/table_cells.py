"""What a table's columns and cells mean, shared by the indexed reader
(`sources._table`, TableGenerator) and the streamed one (`formats.table_shards`,
StreamGenerator's records="parquet"): column types (lists, numbers, image cells), an
image cell's bytes (encoded bytes, a path, or Hugging Face's {"bytes", "path"} `Image`
struct), and the error a null raises."""

from __future__ import annotations

from typing import Any

from kerasgen import _checks
from kerasgen.formats.table_rows import pyarrow_module


def null_error(column: str, where: str) -> ValueError:
    """The error of a null (a missing value) in `column` at `where` ("row 7 of ...")."""
    return ValueError(f"Column {column!r} holds a null (a missing value) at {where}. Fill or "
                      "drop the rows with nulls first (pyarrow.compute.drop_null, "
                      "DataFrame.dropna), or leave the column out.")


def is_list(kind: Any) -> bool:
    """Whether an Arrow type is a list (of any size)."""
    types = pyarrow_module().types
    return bool(types.is_list(kind) or types.is_large_list(kind)
                or types.is_fixed_size_list(kind))


def is_number(kind: Any) -> bool:
    """Whether an Arrow type is a number (booleans counted: 0 and 1)."""
    types = pyarrow_module().types
    return bool(types.is_integer(kind) or types.is_floating(kind) or types.is_boolean(kind))


def holds_numbers(kind: Any) -> bool:
    """Whether an Arrow type is a number or a (nested) list of numbers."""
    return holds_numbers(kind.value_type) if is_list(kind) else is_number(kind)


def is_image_cell(kind: Any, arrays: bool = False) -> bool:
    """Whether a column of Arrow type `kind` holds images: encoded bytes, paths (str) or
    {"bytes", "path"} structs; with `arrays`, (nested) lists of numbers too."""
    types = pyarrow_module().types
    if types.is_struct(kind):
        return bool({"bytes", "path"} & {kind.field(i).name for i in range(kind.num_fields)})
    return bool(types.is_binary(kind) or types.is_large_binary(kind)
                or types.is_fixed_size_binary(kind) or types.is_string(kind)
                or types.is_large_string(kind) or (arrays and is_list(kind)
                                                   and holds_numbers(kind)))


IMAGE_CELLS = ("encoded images (bytes), image paths (str) or {'bytes', 'path'} structs "
               "(Hugging Face's Image feature)")


def image_bytes(value: Any, column: str, where: str) -> Any:
    """The encoded bytes of an image cell: bytes as they are; a {"bytes", "path"} struct's
    bytes, else the file at its path; a path's file read (an OSError of its type naming
    the file, the column and `where`); a list (an array) as it is; a null is an error."""
    if isinstance(value, dict):
        data, path = value.get("bytes"), value.get("path")
        value = data if data is not None else path
    if value is None:
        raise null_error(column, where)
    if isinstance(value, str):
        try:
            with _checks.open_regular(value, "image file") as handle:
                return handle.read()
        except OSError as error:
            raise type(error)(f"Cannot read the image file {value!r} of column "
                              f"{column!r} at {where}: {error.strerror or error}."
                              ) from None
    return value if isinstance(value, list) else bytes(value)
