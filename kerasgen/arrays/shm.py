"""Shared memory and the file descriptors that carry it to kerasgen's worker processes.

Two users, one layer below both: the worker processes' batch slots (pipeline/workers.py) and the
decoded-image cache they share (_cache.SharedMemoryCache). Memory is anonymous (memfd, or
an unlinked temporary file); its descriptor travels beside a pickle, never in it.
"""

import contextlib
import os
import tempfile
import threading

_passing = threading.local()  # file descriptors travelling with a pickle to the workers


@contextlib.contextmanager
def passing_fds(fds):
    """While active, `pass_fd` (sending) and `received_fd` (receiving) use `fds`."""
    _passing.fds = fds
    try:
        yield fds
    finally:
        _passing.fds = None


def passing():
    """Whether a pickle for kerasgen's worker processes is being made (or read)."""
    return getattr(_passing, "fds", None) is not None


def pass_fd(fd):
    """For an object's `__getstate__`: a token standing for `fd` when the object is being
    pickled for kerasgen's worker processes (the fd is sent beside the pickle), else
    None."""
    fds = getattr(_passing, "fds", None)
    if fds is None:
        return None
    fds.append(fd)
    return len(fds) - 1


def received_fd(token):
    """For an object's `__setstate__` in a worker: the fd a token stands for (or None)."""
    fds = getattr(_passing, "fds", None)
    return None if fds is None or token is None else fds[token]


def shared_memory(size, what="a batch", advice=("use a smaller batch_size or "
                  "max_queue_size, or worker threads (use_multiprocessing=False)")):
    """A file descriptor of `size` bytes of shared memory with no name left on disk,
    reserved up front (running out later would kill the process with SIGBUS). `what`
    and `advice` word the error when the memory is not there."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("kerasgen-batch", os.MFD_CLOEXEC)
    else:
        fd, path = tempfile.mkstemp(prefix="kerasgen-batch-")
        os.unlink(path)
    try:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, size)
        else:
            os.ftruncate(fd, size)
    except OSError as error:
        os.close(fd)
        raise OSError(error.errno, f"kerasgen could not reserve {size} bytes of shared "
                      f"memory for {what} ({error.strerror}). Free memory, or {advice}."
                      ) from None
    return fd
