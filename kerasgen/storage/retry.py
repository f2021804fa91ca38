"""Retries of remote reads: each object gets a budget (`RETRIES` further attempts,
a jittered backoff, a `DEADLINE` after its first attempt), and each store (a bucket, a
host) a breaker that holds it down after `BREAKER` failed requests in a row. `Retry`
is what a `Store` asks; the clients' own retries are turned off (see storage.remote)."""

from __future__ import annotations

import os
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from kerasgen import _redact

RETRIES = 3  # further attempts of one object after a failed transfer
BACKOFF = 0.1  # seconds before the first retry, doubled for each next one (jittered)
DEADLINE = 5.0  # seconds after an object's first attempt: no attempt starts later
BREAKER = 8  # failed requests in a row (any objects) that hold a store down
PROBE_WAITS = (0.5, 1.0, 2.0)  # seconds between probes of a store held down
OWN_RETRIES = ("gs", "gcs")  # clients retrying themselves, unchangeably: one attempt here


class Retry:
    """The retry budget of one store's reads, and its breakers (one per bucket or host).

    Args:
        storage_options: the store's fsspec options (an S3 endpoint names the store).
        retries: further attempts after a failed transfer.
        deadline: seconds after an object's first attempt after which no other starts.
    """

    def __init__(self, storage_options: Mapping[str, Any], retries: int = RETRIES,
                 deadline: float = DEADLINE) -> None:
        self.storage_options, self.retries, self.deadline = storage_options, retries, deadline
        self._setup()

    def _setup(self) -> None:
        self.breakers: dict[str, Breaker] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"storage_options": self.storage_options, "retries": self.retries,
                "deadline": self.deadline}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup()

    def store_name(self, url: str) -> str:
        """The store `url` is an object of, in words: its bucket or host (and endpoint)."""
        scheme, _, rest = url.partition("://")
        host = rest.split("/", 1)[0].rsplit("@", 1)[-1].split("?", 1)[0]
        name = f"{scheme}://{host}"
        if scheme in ("s3", "s3a"):
            client = self.storage_options.get("client_kwargs") or {}
            endpoint = (client.get("endpoint_url") if isinstance(client, Mapping) else None
                        ) or self.storage_options.get("endpoint_url")
            if endpoint:
                name += f" at {endpoint}"
        return _redact.redact(name)

    def breaker(self, url: str) -> Breaker:
        name = self.store_name(url)
        breaker = self.breakers.get(name)
        if breaker is None:
            with self._lock:
                breaker = self.breakers.setdefault(name, Breaker(name))
        return breaker

    def limit(self, url: str) -> int:
        """Attempts an object of `url` gets here: one where the client retries itself
        and cannot be told not to (gcsfs)."""
        scheme = url.split("://", 1)[0].split("::")[-1]
        return 1 if scheme in OWN_RETRIES else self.retries + 1

    def call(self, what: str, url: str, call: Callable[[], Any],
             attempts: Attempts | None = None) -> Any:
        """call(), tried again on a transfer error within the object's budget (`attempts`:
        what earlier tries of it spent); FileNotFoundError and PermissionError at once,
        naming `url`."""
        attempts = Attempts() if attempts is None else attempts
        if attempts.started is None:
            attempts.started = time.monotonic()
        deadline = attempts.started + self.deadline
        breaker = self.breaker(url)
        limit = self.limit(url)
        while True:
            if attempts.used >= limit:
                self.give_up(what, url, attempts, breaker)
            if attempts.used:
                wait = backoff(url, attempts.used)
                if time.monotonic() + wait > deadline:
                    self.give_up(what, url, attempts, breaker)
                time.sleep(wait)
            admitted = breaker.admit(deadline)
            if admitted is None:  # held down until the deadline
                self.give_up(what, url, attempts, breaker)
            attempts.used += 1
            failure: str | None = None
            try:
                return call()
            except FileNotFoundError as error:
                if not transfer_error(error):
                    raise FileNotFoundError(f"{what[0].upper() + what[1:]} not found: "
                                            f"{_redact.redact(url)}") from None
                cause = error.__cause__
                failure = f"{type(cause).__name__}: {cause}"
            except PermissionError as error:
                raise PermissionError(_redact.redact(
                    f"Cannot read {what} {url}: {error}. Pass the credentials as "
                    "storage_options=.")) from _redact.redact_error(error)
            except Short as error:
                failure = str(error)
            except Exception as error:  # noqa: BLE001 - every transport's own errors
                failure = f"{type(error).__name__}: {error}"
            finally:
                breaker.done(probe=admitted is False, failure=failure)
            attempts.last = _redact.redact(failure)

    def give_up(self, what: str, url: str, attempts: Attempts,
                 breaker: Breaker) -> NoReturn:
        took = time.monotonic() - (attempts.started or time.monotonic())
        down = (f"{breaker.name} failed its last {breaker.failures} requests, for any "
                "object, and was held down (one probe at a time)")
        if attempts.used:
            plural = "s" if attempts.used != 1 else ""
            why = (f"{attempts.last} (after {attempts.used} attempt{plural} in {took:.1f} "
                   f"s{'; ' + down if breaker.down() else ''})")
        else:
            why = f"{down}, the latest: {breaker.last} (not sent in {took:.1f} s)"
        raise ConnectionError(_redact.redact(
            f"Cannot read {what} {url}: {why}. Check the connection and the server, then "
            "run again."))


class Attempts:
    """What the transfers of one object spent of its budget: attempts, since when, and
    the last failure (in words)."""

    __slots__ = ("used", "started", "last")

    def __init__(self) -> None:
        self.used = 0
        self.started: float | None = None
        self.last: str | None = None


class Breaker:
    """What this process's requests found of one store (a bucket, a host). After
    BREAKER failed requests in a row, for any objects, it is held down: one probe at a
    time is sent (the first PROBE_WAITS[0] s later, then further apart), the other
    requests wait for a probe to succeed, each until its own deadline. A request that
    gets an answer (data, a 404) closes it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.failures = 0  # failed requests in a row
        self.last = ""  # the latest failure, in words
        self._until = 0.0  # no probe before then (time.monotonic)
        self._probes = 0  # failed probes since it was held down
        self._probing = False
        self._cond = threading.Condition()

    def down(self) -> bool:
        return self.failures >= BREAKER

    def admit(self, deadline: float) -> bool | None:
        """Waits until a request may be sent: True (the store is up), False (send it,
        as the probe), None (held down until `deadline`)."""
        with self._cond:
            while True:
                if self.failures < BREAKER:
                    return True
                now = time.monotonic()
                if not self._probing and now >= self._until:
                    self._probing = True
                    return False
                if now >= deadline:
                    return None
                wake = deadline if self._probing else min(deadline, self._until)
                self._cond.wait(max(wake - now, 0.001))

    def done(self, probe: bool, failure: str | None) -> None:
        """A request ended: `failure` in words, or None (it got an answer)."""
        with self._cond:
            if probe:
                self._probing = False
            if failure is None:
                self.failures = self._probes = 0
            else:
                self.failures += 1
                self.last = _redact.redact(failure)
                if probe or self.failures == BREAKER:
                    self._probes += int(probe)
                    wait = PROBE_WAITS[min(self._probes, len(PROBE_WAITS) - 1)]
                    self._until = time.monotonic() + wait
            self._cond.notify_all()


def backoff(url: str, attempt: int) -> float:
    """The wait before retry `attempt` (1, 2, ...) of `url`: BACKOFF doubled each time,
    drawn between half and all of it (jitter: retries of many objects spread out),
    the draw a pure function of the object, the attempt and the process."""
    draw = zlib.crc32(f"{os.getpid()} {attempt} {url}".encode()) / 0xFFFFFFFF
    return BACKOFF * 2 ** (attempt - 1) * (0.5 + 0.5 * draw)


def transfer_error(error: FileNotFoundError) -> bool:
    """Whether fsspec reported a failed transfer as FileNotFoundError (its HTTP
    filesystem does, for any failure of `info`): a cause other than a 404 or 410."""
    cause = error.__cause__
    if cause is None:
        return False
    status = getattr(cause, "status", None)
    if status is not None:
        return status not in (404, 410)
    return isinstance(cause, OSError) or type(cause).__module__.startswith("aiohttp")


class Short(Exception):
    """A transfer that ended before the object's size."""
