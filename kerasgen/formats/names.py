"""The names of shard files: paths, URLs, glob patterns (each pattern's matches sorted)
and WebDataset's brace notation ("shard-{000..099}.tar"), expanded once for every
reader; and the check that the named shards exist."""

from __future__ import annotations

import glob
import os
import re
import string
from collections.abc import Iterable, Mapping
from typing import Any

from kerasgen import _checks
from kerasgen.storage import remote as _remote

_INT_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.-?(\d+))?$")
_CHAR_RANGE = re.compile(r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.-?(\d+))?$")
_ALPHABET = string.ascii_uppercase + string.ascii_lowercase


def has_magic(path: str) -> bool:
    """Whether `path` is a glob pattern ('?' starts an http(s) URL's query, not a glob)."""
    magic = "*[" if path.startswith(("http://", "https://")) else "*?["
    return any(c in path for c in magic)


def expand(files: Any, what: str, store: _remote.Store) -> list[str]:
    """The files `files` names (a path, a URL, a glob pattern of either, or a list of
    them), in order: each pattern's matches sorted; a pattern matching nothing is a
    FileNotFoundError naming it. A path that exists is never read as a pattern."""
    requirement = f"a {what} path, a glob pattern or a non-empty list of them"
    items = ([files] if isinstance(files, (str, os.PathLike))
             else list(files) if isinstance(files, Iterable) and not isinstance(files, bytes)
             else None)
    if not items:
        _checks.fail("files", requirement, files, ValueError if items == [] else TypeError)
    names: list[str] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            _checks.fail("files", requirement, files, TypeError,
                         f"{item!r} is not a path")
        path = _remote.local(os.fspath(item))
        if not has_magic(path) or (not _remote.is_url(path) and os.path.exists(path)):
            names.append(path)
            continue
        if _remote.is_url(path):
            matches = store.expand(path)
        else:
            matches = sorted(p for p in glob.glob(path, recursive=True)
                             if not os.path.isdir(p))
        if not matches:
            raise FileNotFoundError(f"No {what} matches the pattern {path}.")
        names += matches
    return names


def expand_braces(pattern: str) -> list[str]:
    """The names of WebDataset's brace notation, as the braceexpand package (which
    webdataset uses) writes them, in its order: "{a,b}", integer ranges "{0..9}"
    (zero-padded to the wider bound when a bound starts with 0: "{000..009}"), letter
    ranges "{a..e}", steps "{0..8..2}", nested braces. No backslash escapes. Unbalanced
    braces are a ValueError."""
    start = pattern.find("{")
    close = pattern.find("}")
    if start < 0 or (0 <= close < start):
        if close >= 0:
            raise ValueError(f"Unbalanced braces in {pattern!r}.")
        return [pattern]
    depth = 0
    for end in range(start, len(pattern)):
        depth += {"{": 1, "}": -1}.get(pattern[end], 0)
        if depth == 0:
            break
    else:
        raise ValueError(f"Unbalanced braces in {pattern!r}.")
    head, expression, tail = pattern[:start], pattern[start + 1:end], pattern[end + 1:]
    middle = _alternatives(expression)
    if middle is None:  # not a range or a list: the braces are kept
        middle = ["{" + inner + "}" for inner in expand_braces(expression)]
    rest = expand_braces(tail)
    return [head + one + other for one in middle for other in rest]


def _alternatives(expression: str) -> list[str] | None:
    """The names of one brace expression (a range or a comma list), or None."""
    found = _INT_RANGE.match(expression)
    if found:
        first, last, step = found.groups()
        padded = any(s.startswith(("0", "-0")) for s in (first, last) if s not in ("0", "-0"))
        width = max(len(first), len(last)) if padded else 0
        by = (int(step) or 1) if step else 1
        a, b = int(first), int(last)
        numbers = range(a, b + 1, by) if a < b else range(a, b - 1, -by)
        return [f"%0{width}d" % n for n in numbers]
    found = _CHAR_RANGE.match(expression)
    if found:
        first, last, step = found.groups()
        by = (int(step) or 1) if step else 1
        a, b = _ALPHABET.index(first), _ALPHABET.index(last)
        if a < b:
            return list(_ALPHABET[a:b + 1:by])
        return list(_ALPHABET[a:(b or -len(_ALPHABET)) - 1:-by])
    parts, depth, begin = [], 0, 0
    for k, c in enumerate(expression):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(expression[begin:k])
            begin = k + 1
    if not parts:
        return None
    parts.append(expression[begin:])
    return [name for part in parts for name in expand_braces(part)]


def brace_names(shards: Any, what: str = "shard") -> list[str]:
    """The paths, URLs and glob patterns `shards` names (one, WebDataset's brace
    notation, or a list of them), in order, braces expanded (in braceexpand's order);
    `expand` then expands the glob patterns. A local path that exists is that file,
    braces or not."""
    requirement = (f"a {what} path or URL, a glob pattern, a brace pattern or a non-empty "
                   "list of them")
    items = ([shards] if isinstance(shards, (str, os.PathLike))
             else list(shards) if isinstance(shards, Iterable)
             and not isinstance(shards, (bytes, Mapping)) else None)
    if not items:
        _checks.fail("shards", requirement, shards, ValueError if items == [] else TypeError)
    names: list[str] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            _checks.fail("shards", requirement, shards, TypeError, f"{item!r} is not a path")
        path = _remote.local(os.fspath(item))
        if not isinstance(path, str):
            _checks.fail("shards", requirement, shards, TypeError, f"{item!r} is not a path")
        if ("{" in path or "}" in path) and (_remote.is_url(path) or not os.path.exists(path)):
            try:
                names += expand_braces(path)
            except ValueError:
                _checks.fail("shards", requirement, shards, ValueError,
                             f"{path!r} has unbalanced braces")
        else:
            names.append(path)
    return names


def shard_names(shards: Any, what: str, store: _remote.Store) -> list[str]:
    """The shards `shards` names: a path or URL, a glob pattern, WebDataset's brace
    notation ("shard-{000..099}.tar") or a list of them, in order."""
    return expand(brace_names(shards, what), what, store)


def check_exists(names: list[str], store: _remote.Store) -> None:
    """A FileNotFoundError naming the first of `names` (paths or URLs) not found."""
    urls = [n for n in names if _remote.is_url(n)]
    found = dict(zip(urls, store.exists(urls, "shard"))) if urls else {}
    for name in names:
        if not found.get(name, _remote.is_url(name) or os.path.exists(name)):
            raise FileNotFoundError(f"Shard not found: {name}")
