"""What a label field of a WebDataset sample means, decided once for every reader (the
indexed `WebDatasetGenerator` and the streamed `StreamGenerator`), as webdataset's
default decoder reads the field, by its last extension ("seg.cls" reads as "cls")."""

from __future__ import annotations

import json
import re

INT_FIELDS = ("cls", "cls2", "index", "inx", "id")  # int(data): a class id
TEXT_FIELDS = ("txt", "text", "transcript")  # data.decode("utf-8"): a class name
JSON_FIELDS = ("json", "jsn")  # json.loads(data): a class id or a class name
LABEL_FIELDS = INT_FIELDS + TEXT_FIELDS + JSON_FIELDS
INTEGER = re.compile(r"\s*[+-]?\d+\s*")  # an integer class id as text


def kind_of(field: str) -> str:
    """The extension that says what `field` holds ("seg.cls" -> "cls")."""
    return field.rsplit(".", 1)[-1]


def check_field(field: str, source: str) -> None:
    """A ValueError when `field` (of `label_key`, found in `source`: "a.lbl of shard")
    holds no label webdataset decodes."""
    if kind_of(field) not in LABEL_FIELDS:
        raise ValueError(
            f"`label_key` must name a field holding a class id ({', '.join(INT_FIELDS)}: "
            f"an integer as text), a class name ({', '.join(TEXT_FIELDS)}) or either "
            f"({', '.join(JSON_FIELDS)}: a JSON number or string), as webdataset decodes "
            f"them. Received: label_key's field {field!r} ({source}). Rename the members, "
            "or pass label_key= naming such a field.")


def field_label(data: bytes, field: str, where: str, must: str = "must hold",
                source: str | None = None) -> int | str:
    """The label in `data`, a member of field `field`: a class id (int) or a class name
    (str, surrounding whitespace dropped: "cat\\n", written by `echo cat`, and " cat "
    are the class "cat"), as webdataset's default decoder reads the field. A field that
    holds no label, or data that is not what the field holds, is a ValueError saying
    "{where} {must} ..." (`source`: the member in the message of a field holding no
    label; default `where`)."""
    check_field(field, where if source is None else source)
    kind = kind_of(field)
    shown = data[:40] + (b"..." if len(data) > 40 else b"")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where} {must} UTF-8 text (a label). Received: "
                         f"{shown!r}.") from None
    if kind in INT_FIELDS:
        if not INTEGER.fullmatch(text):
            raise ValueError(
                f"{where} {must} an integer class id as text, as webdataset's {kind!r} "
                f"field does. Received: {shown!r}. Write the class id (b'3'), or pass "
                "label_key= naming a field that holds the class name (label_key='txt').")
        return int(text)
    if kind in JSON_FIELDS:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: "[[[[...]]]]" nested deep
            value = None
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"{where} {must} a JSON class id (3) or class name (\"cat\") "
                             f"as its label. Received: {shown!r}.")
        if isinstance(value, int):
            return value
        text = value
    name = text.strip()
    if not name:
        raise ValueError(f"{where} {must} a class name. Received: {shown!r} (empty).")
    return name
