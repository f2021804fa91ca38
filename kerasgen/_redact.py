"""Secrets kept out of everything kerasgen shows or stores: one function, `redact`.

A URL may carry credentials: a user and password (`https://user:pw@host/x`), a token or a
signature in its query (`?token=...`, a signed URL's `X-Amz-Signature=...`, an Azure SAS
`sig=...`). `storage_options` carry keys and secrets. Whatever kerasgen shows (an error,
its notes and its causes, a warning, `gen.skipped`, the command line's output, the log
records of the storage libraries) or stores (the remote cache's files and keys) passes
through `redact` first:

- in every URL of a text, the user information becomes `***` and every query value
  `***` (the names stay, so one can still tell which URL it is);
- every secret kerasgen was given (the values of `storage_options` whose key reads like a
  credential, a URL's password and query values) is replaced by `***` wherever it
  appears, also outside a URL (a storage library's own message quoting a key).

`errors` is the decorator of the public entry points (constructors, `gen[i]`, the
command line): an exception leaving them has its message, notes and chained causes
redacted. `warn` is `warnings.warn` through `redact`; kerasgen warns through it only.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import sys
import threading
import urllib.parse
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

MASK = "***"
# scheme://[userinfo@]host... up to a space, a quote or a bracket of the text around it
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>()\[\]{}]+")
# storage option names that hold a credential (s3fs's key/secret/token, gcsfs's token,
# a password, an Azure account key or SAS token, client secrets, API keys, sessions)
_SECRET_OPTION = re.compile(
    r"(?i)(secret|passw|pwd|token|credential|signature|session|api.?key|access.?key|"
    r"account.?key|private.?key|auth|^key$|^sas|sas.?token|cookie)")
_MIN_SECRET = 6  # shorter values are not searched for in texts (they would mask words)
# option values that name a way to authenticate, not a secret (gcsfs's token="anon"...)
_NOT_SECRETS = {"anon", "cloud", "google_default", "browser", "cache", "true", "false"}
# query fields that carry a credential or a signature: S3's and GCS's signed URLs (every
# X-Amz-/X-Goog- field, S3's older AWSAccessKeyId/Signature/Expires), CloudFront's
# Policy and Key-Pair-Id, tokens, keys and passwords of any name
_CREDENTIAL = re.compile(
    r"(?i)^(x-amz-|x-goog-)|secret|passw|pwd|token|credential|signature|session|"
    r"api.?key|access.?key|account.?key|private.?key|auth|^key$|^sig$|^sas|^expires$|"
    r"^awsaccesskeyid$|^googleaccessid$|^policy$|^key-pair-id$")
# an Azure SAS token's fields (with its `sig`): all of them change when it is signed again
_AZURE_SAS = {"sv", "ss", "srt", "sp", "se", "st", "spr", "sr", "si", "sdd", "skoid",
              "sktid", "skt", "ske", "sks", "skv", "ses", "rscc", "rscd", "rsce", "rscl",
              "rsct", "sig"}
# a value that looks like a token whatever its field's name: 16 or more characters of a
# token's alphabet, letters and digits mixed
_TOKEN_LIKE = re.compile(r"^(?=.*[A-Za-z])(?=.*[0-9])[A-Za-z0-9+/=_%.~-]{16,}$")

_known: set[str] = set()  # secrets seen in this process, searched for in every text
_known_pattern: re.Pattern[str] | None = None  # `_known` as one pattern of whole tokens
_lock = threading.Lock()


def credential_field(name: str, sas: bool = False, value: str | None = None) -> bool:
    """Whether the query field `name` carries a credential or a signature (`sas`: the
    query is an Azure SAS, whose every field changes when signed again). With `value`,
    also a value that looks like a token, whatever the field's name (for what is shown;
    a cache key drops known fields only, so two objects never share an entry)."""
    return bool(_CREDENTIAL.search(name)) or (sas and name.lower() in _AZURE_SAS) or (
        value is not None and bool(_TOKEN_LIKE.match(value)))


def redact_url(url: str) -> str:
    """`url` without its secrets: user information masked, and the values of the query
    fields that carry a credential, a signature or a token (`credential_field`); other
    fields (`?w=1`, `?id=42`) stay, so two objects stay two in a message."""
    head, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = MASK + "@" + authority.rsplit("@", 1)[1]
    path, hash_, fragment = path.partition("#")
    path, question, query = path.partition("?")
    if not slash and "?" in authority:  # https://host?token=... (no path)
        authority, question, query = authority.partition("?")
    if question:
        pairs = query.split("&")
        sas = any(p.partition("=")[0].lower() == "sig" for p in pairs)
        query = "&".join(_masked(part, sas) for part in pairs)
    return f"{head}://{authority}{slash}{path}{question}{query}{hash_}{fragment}"


def _masked(pair: str, sas: bool) -> str:
    name, eq, value = pair.partition("=")
    secret = eq and value and credential_field(name, sas, urllib.parse.unquote(value))
    return f"{name}={MASK}" if secret else pair


def url_secrets(url: str) -> list[str]:
    """The secrets a URL carries: its password (or user information) and query values,
    as written and unquoted. (Only a password is remembered by `remember_url`: query
    values, a signature per URL, are many, and `redact` masks them in any URL.)"""
    found: list[str] = []
    _, sep, rest = url.partition("://")
    if not sep:
        return found
    authority, _, path = rest.partition("/")
    if "@" in authority:
        info = authority.rsplit("@", 1)[0]
        user, colon, password = info.partition(":")
        found += [password] if colon else [user]
    query = path.partition("#")[0].partition("?")[2] or (
        authority.partition("?")[2] if "@" not in authority else "")
    for part in query.split("&") if query else []:
        value = part.partition("=")[2]
        if value:
            found.append(value)
    return [s for s in {*found, *(urllib.parse.unquote(s) for s in found)}
            if len(s) >= _MIN_SECRET]


def option_secrets(options: Any) -> list[str]:
    """The credential values of `storage_options` (nested dicts and lists searched)."""
    found: list[str] = []

    def walk(value: Any, secret: bool) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, secret or bool(_SECRET_OPTION.search(str(key))))
        elif isinstance(value, (list, tuple, set)):
            for item in value:
                walk(item, secret)
        elif secret and isinstance(value, (str, bytes)):
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            if len(text) >= _MIN_SECRET and text.lower() not in _NOT_SECRETS:
                found.append(text)

    walk(options, False)
    return found


def remember(secrets: Iterable[str]) -> None:
    """Adds `secrets` to those every `redact` of this process masks (as whole tokens:
    not inside a longer word)."""
    global _known_pattern
    new = {s for s in secrets if isinstance(s, str) and len(s) >= _MIN_SECRET
           and s.lower() not in _NOT_SECRETS}
    if new - _known:
        with _lock:
            _known.update(new)
            alternatives = "|".join(re.escape(s) for s in sorted(_known, key=len,
                                                                   reverse=True))
            _known_pattern = re.compile(
                rf"(?<![A-Za-z0-9])(?:{alternatives})(?![A-Za-z0-9])")


def remember_url(url: Any) -> None:
    """Remembers the password (or user information) of `url`, so that it is masked
    wherever it appears, also outside a URL."""
    if isinstance(url, str) and "://" in url:
        authority = url.partition("://")[2].partition("/")[0]
        if "@" in authority:
            remember(url_secrets(url.partition("?")[0]))


def redact(text: Any) -> Any:
    """`text` with every URL's secrets and every known secret masked; not a str:
    returned as it is."""
    if not isinstance(text, str) or not text:
        return text
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    pattern = _known_pattern
    return text if pattern is None else pattern.sub(MASK, text)


def redact_all(items: Iterable[Any]) -> list[Any]:
    return [redact(item) for item in items]


def describe_options(options: Any) -> str:
    """`storage_options` as an error may show it: its type and keys, never a value."""
    if isinstance(options, Mapping):
        return f"a {type(options).__name__} with keys {sorted(map(str, options))}"
    return f"a {type(options).__name__}"


# ----------------------------------------------------------------------------- errors
def redact_error(error: BaseException, _seen: set[int] | None = None) -> BaseException:
    """`error` (in place) with its message, notes, file names and chained causes
    redacted; returns it."""
    seen = _seen if _seen is not None else set()
    if id(error) in seen:
        return error
    seen.add(id(error))
    try:
        if error.args and any(isinstance(a, str) for a in error.args):
            error.args = tuple(redact(a) for a in error.args)
        for name in ("filename", "filename2", "strerror", "msg"):
            value = getattr(error, name, None)
            if isinstance(value, str):
                try:
                    setattr(error, name, redact(value))
                except (AttributeError, TypeError):
                    pass
        notes = getattr(error, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [redact(n) for n in notes]
    except Exception:  # noqa: BLE001 - an exception type that refuses changes stays
        pass
    for linked in (error.__cause__, error.__context__):
        if linked is not None:
            redact_error(linked, seen)
    return error


F = TypeVar("F", bound=Callable[..., Any])


def errors(function: F) -> F:
    """Decorates a public entry point: what it raises leaves it redacted."""
    if getattr(function, "_kerasgen_redacts", False):
        return function

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except BaseException as error:
            redact_error(error)
            raise

    wrapper._kerasgen_redacts = True  # type: ignore[attr-defined]  # noqa: SLF001
    return wrapper  # type: ignore[return-value]


_WRAPPER_CODE = errors(lambda: None).__code__  # the code of every `errors` wrapper
_PASSED_OVER = {_WRAPPER_CODE}  # frames `warn` does not count (see `passed_over`)


def passed_over(function: F) -> F:
    """Marks `function` as one of kerasgen's that only calls a constructor for its caller
    (`split()`, `image_dataset_from_directory`): a warning raised beneath it names its
    caller's line, as if the constructor had been called there."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    if code is not None:
        _PASSED_OVER.add(code)
    return function


# ----------------------------------------------------------------------------- warnings
class KerasgenWarning(UserWarning):
    """The category of kerasgen's own UserWarnings (a UserWarning: filters and
    `pytest.warns(UserWarning)` take them alike), so a warning can be told kerasgen's."""


def warn(message: str, category: type[Warning] = UserWarning, stacklevel: int = 1) -> None:
    """`warnings.warn(redact(message), category, stacklevel)`, the caller's frame counted
    as warnings.warn would count it, and the frames of `errors`' wrappers (and of the
    functions marked `passed_over`) not counted: a warning raised in a generator's
    constructor names the user's line."""
    frame: Any = sys._getframe(1)  # noqa: SLF001 - the caller's frame
    steps, remaining = 0, stacklevel - 1
    while frame is not None:
        if frame.f_code not in _PASSED_OVER:
            if not remaining:
                break
            remaining -= 1
        frame, steps = frame.f_back, steps + 1
    if category is UserWarning:
        category = KerasgenWarning
    warnings.warn(redact(message), category, stacklevel=steps + 2)


# ----------------------------------------------------------------------------- logging
_LOGGERS = ("fsspec", "s3fs", "gcsfs", "aiohttp", "botocore", "aiobotocore", "urllib3",
            "google", "requests")


class _Filter(logging.Filter):
    """Redacts a log record's message (its arguments merged in) before any handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record whose arguments do not format
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


_FILTER = _Filter()


def guard_logging() -> None:
    """Puts the redacting filter on the storage libraries' loggers (those that exist
    now: a logger's filter applies to the records logged on it), once each."""
    manager = logging.Logger.manager
    for name in list(manager.loggerDict):
        if name.split(".", 1)[0] in _LOGGERS:
            logger = manager.loggerDict[name]
            if isinstance(logger, logging.Logger) and _FILTER not in logger.filters:
                logger.addFilter(_FILTER)


# ----------------------------------------------------------------------------- output
class _Redacting:
    """A text stream whose writes are redacted (the command line's stdout and stderr)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding...
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacted_output(argv: Iterable[Any] = ()) -> Iterator[None]:
    """Within it, what is printed to sys.stdout and sys.stderr is redacted; the secrets
    of the URLs in `argv` (a command line) are known first."""
    for arg in argv:
        remember_url(arg)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(out), _Redacting(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
