"""Whole-object GETs of s3:// URLs through obstore (the Rust object_store's Python
bindings), where it is installed and the store's options say exactly what it needs: about
a tenth of the client CPU per request of s3fs and aiobotocore (docs/remote.md). Everything
else (other protocols, options obstore cannot express, `KERASGEN_OBSTORE=0`) is read
through fsspec as before: `ObjectGets.client` answers None.

What obstore is given is what botocore would use, or obstore is not used:

- credentials: `key`/`secret`/`token`, or `anon=True` (unsigned requests); with neither,
  only when AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set (both clients read them
  first; botocore's profiles and ~/.aws files obstore does not read);
- the region: `client_kwargs={"region_name": ...}`, required (s3fs finds a bucket's
  region itself, obstore does not);
- the endpoint: `client_kwargs={"endpoint_url": ...}` or `endpoint_url=`, http:// or
  https:// and nothing after the host; path-style requests to it unless
  `config_kwargs={"s3": {"addressing_style": "virtual"}}` (then fsspec);
- no other option that changes a request (`profile`, `requester_pays`, `version_aware`,
  `s3_additional_kwargs`, `use_ssl=False`, time-outs of one's own, ...), no AWS
  environment variable beyond the credentials' and the region's, no proxy variable, and
  without an endpoint of its own no AWS configuration file (it may name one).

obstore's own retries are off (kerasgen's `Retry` is the one budget) and its time-outs
are s3fs's (CONNECT_TIMEOUT, READ_TIMEOUT; no limit on a whole transfer). Its errors
become what `Retry` sorts: a missing object FileNotFoundError, a refusal (401, 403)
PermissionError naming the store, anything else `ObjectStoreError` in botocore's words
(a status and S3's code, "Could not connect to the endpoint URL", a time-out), tried
again. One S3Store per bucket, made at its first read in each process (a copy of a
`Store` in a worker process, or after a fork, makes its own)."""

from __future__ import annotations

import os
import re
import threading
import urllib.parse
from collections.abc import Mapping
from datetime import timedelta
from http import HTTPStatus
from typing import Any

from kerasgen.storage.urls import CONNECT_TIMEOUT, READ_TIMEOUT

SWITCH = "KERASGEN_OBSTORE"  # "0": never obstore
# s3fs options that change no GET of a whole object (listings, caches, block sizes)
_INERT = {"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths",
          "default_block_size", "default_fill_cache", "default_cache_type", "cache_regions"}
# config_kwargs kerasgen itself sets for botocore (storage.urls.Filesystems.options)
_CONFIG_INERT = {"max_pool_connections"}
# AWS environment variables that leave the requests of both clients alike: the
# credentials' (read by both, before anything else) and the region's (given explicitly)
_AWS_ENV_CREDENTIALS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}
_AWS_ENV_REGION = {"AWS_REGION", "AWS_DEFAULT_REGION"}
_PROXY_ENV = {"http_proxy", "https_proxy", "all_proxy"}
_STATUS = re.compile(r"status code: (\d{3})")
_CODE = re.compile(r"<Code>([^<]{1,100})</Code>")
_ENCODED = set('\\{^}%`]">[~<#|')  # characters object_store's paths percent-encode
_URI = re.compile(r"Error performing \w+ (\S+) in ")


class ObjectStoreError(Exception):
    """A failed GET through obstore, in words (retried by `Retry`)."""


class Redirected(Exception):
    """S3 answered that the bucket lies in another region than `region_name` says:
    botocore follows such answers to the bucket's region, obstore does not, so the
    bucket is read through fsspec from then on (`ObjectGets.get`)."""


# S3's codes of a bucket asked in the wrong region (botocore's redirector follows them)
_REGION_CODES = {"PermanentRedirect", "AuthorizationHeaderMalformed", "Redirect",
                 "TemporaryRedirect", "IllegalLocationConstraintException"}
# S3's codes of a refusal that asking again cannot change (an expired token is a 400):
# those s3fs turns into PermissionError (its own table, read once: s3fs is there, as it
# listed the objects), so that both paths sort an error alike
_refusal_codes: frozenset[str] | None = None


def refusals() -> frozenset[str]:
    """S3's error codes s3fs raises as PermissionError."""
    global _refusal_codes
    if _refusal_codes is None:
        from s3fs.errors import ERROR_CODE_TO_EXCEPTION
        _refusal_codes = frozenset(code for code, kind in ERROR_CODE_TO_EXCEPTION.items()
                                   if kind is PermissionError and not code.isdigit())
    return _refusal_codes


def s3_config(options: Mapping[str, Any], bucket: str,
              environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """obstore's S3Store keyword arguments for `bucket` with the s3fs `options`, or None
    where they cannot say exactly what botocore would do (see the module's docstring)."""
    environ = os.environ if environ is None else environ
    options = dict(options)
    client = options.pop("client_kwargs", None) or {}
    config = options.pop("config_kwargs", None) or {}
    key, secret, token = (options.pop(name, None) for name in ("key", "secret", "token"))
    anon = options.pop("anon", False)
    endpoint = options.pop("endpoint_url", None)
    if options.pop("use_ssl", True) is not True:
        return None
    if any(name not in _INERT for name in options):
        return None
    if not isinstance(client, Mapping) or set(client) - {"endpoint_url", "region_name"}:
        return None
    if not isinstance(config, Mapping) or set(config) - {"s3"} - _CONFIG_INERT:
        return None
    s3 = config.get("s3") or {}
    if not isinstance(s3, Mapping) or set(s3) - {"addressing_style"}:
        return None
    style = s3.get("addressing_style", "auto")
    inner = client.get("endpoint_url")
    if endpoint and inner and endpoint != inner:
        return None
    endpoint = inner or endpoint
    region = client.get("region_name")
    if not isinstance(region, str) or not region or not isinstance(anon, bool):
        return None
    allowed = set(_AWS_ENV_REGION)
    kwargs: dict[str, Any] = {"region": region}
    if anon:
        if key or secret or token:
            return None
        kwargs["skip_signature"] = True
    elif key or secret or token:
        if not (isinstance(key, str) and isinstance(secret, str) and key and secret):
            return None
        if token is not None and not isinstance(token, str):
            return None
        kwargs.update(access_key_id=key, secret_access_key=secret)
        if token:
            kwargs["session_token"] = token
        allowed |= {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}  # overridden here
        if token:
            allowed.add("AWS_SESSION_TOKEN")
    else:  # the environment's credentials, read by both clients before anything else
        if not (environ.get("AWS_ACCESS_KEY_ID") and environ.get("AWS_SECRET_ACCESS_KEY")):
            return None
        allowed |= _AWS_ENV_CREDENTIALS
    if endpoint is not None and str(endpoint).startswith("http://"):
        allowed.add("AWS_CA_BUNDLE")  # no TLS: botocore's certificates are unused
    if any(name.startswith("AWS_") and name not in allowed for name in environ):
        return None  # a profile, another endpoint, a token only obstore would read, ...
    if any(name.lower() in _PROXY_ENV and value for name, value in environ.items()):
        return None
    client_options: dict[str, Any] = {
        "connect_timeout": timedelta(seconds=CONNECT_TIMEOUT),
        "read_timeout": timedelta(seconds=READ_TIMEOUT),
        "timeout": timedelta(days=1)}  # s3fs sets no limit on a whole transfer
    if endpoint is not None:
        if not isinstance(endpoint, str) or style not in ("auto", "path"):
            return None
        parts = urllib.parse.urlsplit(endpoint)
        if (parts.scheme not in ("http", "https") or not parts.hostname or parts.username
                or parts.password or parts.path.strip("/") or parts.query or parts.fragment):
            return None
        kwargs["endpoint"] = f"{parts.scheme}://{parts.netloc}"
        kwargs["virtual_hosted_style_request"] = False
        if parts.scheme == "http":
            client_options["allow_http"] = True
    else:
        config_file = environ.get("AWS_CONFIG_FILE") or os.path.expanduser("~/.aws/config")
        if os.path.exists(config_file) or style not in ("auto", "path", "virtual"):
            return None  # botocore's configuration may name another endpoint
        # botocore's choice: virtual-hosted unless told path or the name has a dot
        kwargs["virtual_hosted_style_request"] = style != "path" and "." not in bucket
    kwargs["client_options"] = client_options
    kwargs["retry_config"] = {"max_retries": 0}
    return kwargs


class ObjectGets:
    """The obstore clients of one store's S3 buckets, made at their first use in each
    process (`client`), and `get`: one GET of a whole object.

    Args:
        storage_options: the store's fsspec options.
    """

    def __init__(self, storage_options: Mapping[str, Any]) -> None:
        self.storage_options = storage_options
        self.used = 0  # GETs made through obstore in this process (tests read it)
        self._setup()

    def _setup(self) -> None:
        self._clients: dict[str, Any] = {}  # bucket -> S3Store, or None: fsspec
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"storage_options": self.storage_options, "used": 0}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    def client(self, url: str) -> Any:
        """The S3Store of `url`'s bucket, or None where `url` is read through fsspec."""
        scheme, _, rest = url.partition("://")
        if scheme not in ("s3", "s3a") or "::" in url:
            return None
        bucket, _, key = rest.partition("/")
        if not plain_key(key):
            return None  # a name object_store's paths would write otherwise
        if os.getpid() != self._pid:  # forked: the runtime of the parent's is not here
            self._setup()
        try:
            return self._clients[bucket]
        except KeyError:
            pass
        with self._lock:
            if bucket not in self._clients:
                self._clients[bucket] = self._make(bucket)
            return self._clients[bucket]

    def _make(self, bucket: str) -> Any:
        if os.environ.get(SWITCH, "").strip() == "0" or not bucket or "?" in bucket:
            return None
        kwargs = s3_config(self.storage_options, bucket)
        if kwargs is None:
            return None
        try:
            from obstore.store import S3Store
        except ImportError:
            return None
        return S3Store(bucket, **kwargs)

    def get(self, client: Any, url: str, store: str) -> tuple[bytes, int | None]:
        """The bytes of the object `url` in one GET through `client`, and its size as
        the response gave it; `store` names the store in errors."""
        import obstore
        path = url.split("://", 1)[1].partition("/")[2]
        self.used += 1
        try:
            result = obstore.get(client, path)
            data = bytes(result.bytes())
        except FileNotFoundError:
            raise FileNotFoundError(url) from None
        except Exception as error:  # noqa: BLE001 - obstore's errors, sorted below
            sorted_ = translate(error, store)
            if isinstance(sorted_, Redirected):
                bucket = url.split("://", 1)[1].partition("/")[0]
                with self._lock:
                    self._clients[bucket] = None  # fsspec, which follows it, from now on
            raise sorted_ from None
        size = result.meta.get("size")
        return data, size if isinstance(size, int) else None


def plain_key(key: str) -> bool:
    """Whether object_store's path of the object key `key` is `key` itself: no empty,
    "." or ".." part, and no character it would percent-encode."""
    if not key or any(part in ("", ".", "..") for part in key.split("/")):
        return False
    return not any(ch in _ENCODED or ord(ch) < 32 or ord(ch) == 127 for ch in key)


def translate(error: BaseException, store: str) -> Exception:
    """obstore's `error` as `Retry` sorts errors, in words and without the request's
    headers: PermissionError for a refusal (401, 403, or S3's code of one: an expired
    token is a 400), Redirected for a bucket in another region, else ObjectStoreError."""
    text = str(error)
    head = text.split("\n\nDebug source", 1)[0]
    found = _STATUS.search(head)
    code = _CODE.search(text)
    uri = _URI.search(head)
    where = f'"{uri.group(1)}"' if uri else store
    name = type(error).__name__
    if found is not None:
        status = int(found.group(1))
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "HTTP error"
        words = f"{code.group(1)}: {status} {phrase}" if code else f"{status} {phrase}"
    elif name in ("PermissionDeniedError", "UnauthenticatedError"):
        words = "access refused"
    elif "ConnectionRefused" in text or "kind: Connect" in text:
        timed = "TimedOut" in text or "timed out" in text.lower()
        words = (f"Connect timeout on endpoint URL: {where}" if timed
                 else f"Could not connect to the endpoint URL: {where}")
    elif "TimedOut" in text or "timed out" in text.lower() or "Timeout" in text:
        words = f"Read timeout on endpoint URL: {where}"
    elif "IncompleteBody" in text or "UnexpectedEof" in text:
        words = "Connection broken: the response ended before its length"
    elif "ConnectionReset" in text or "reset by peer" in text:
        words = "Connection reset by peer"
    else:
        words = " ".join(_CODE.sub(r"\1", head).split())[:300] or name
    s3_code = code.group(1) if code else None
    if (s3_code in _REGION_CODES or "BareRedirect" in text  # a 301 without Location
            or (found is not None and found.group(1) in ("301", "307"))):
        return Redirected(words)
    if name in ("PermissionDeniedError", "UnauthenticatedError") or s3_code in refusals():
        return PermissionError(f"{words}, from {store}")
    return ObjectStoreError(words)
