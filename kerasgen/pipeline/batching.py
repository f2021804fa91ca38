"""Batch assembly: one preallocated array (or dict of arrays) per batch."""

import sys
import threading

import numpy as np

DTYPES = ("float32", "float16", "uint8", "uint16", None)
# The largest integer each float batch dtype holds exactly; a larger integer feature (an
# SQL column, a TFRecord "int" feature) is refused, never rounded.
EXACT_INTEGERS = {"float32": 2 ** 24, "float16": 2 ** 11, "float64": 2 ** 53}


class BufferPool:
    """Batch-sized arrays reused once nothing else holds them.

    A fresh array of a batch's size is fresh memory: every page of it faults in on first
    touch (glibc hands blocks above its mmap threshold straight back to the system, and
    TensorFlow pins that threshold low inside `fit`), and that costs more than the copy
    into it, the more so on virtual machines. `empty` hands out an array of the pool
    whose reference count shows the pool's reference only: a batch still held by Keras,
    TensorFlow, JAX or torch (a tensor sharing its memory keeps a reference), or by a
    view of it, is never handed out again until they let go. At most `keep` arrays of
    each shape and dtype are kept.
    """

    # 64-byte aligned, as TensorFlow's own buffers are. Measured inside `fit` (the tiny
    # model of benchmarks/images.py, 12 epochs, mmap threshold 32 MiB): the process
    # stayed at 845 MiB; with 16-byte aligned arrays it grew from 1064 to 2055 MiB.
    ALIGN = 64
    # references of a free array in `empty`: the list, the loop variable, getrefcount's
    # argument; its memory's owner: the array's `base` and getrefcount's argument
    _FREE, _FREE_OWNER = 3, 2

    def __init__(self, keep=6):
        self.keep = keep
        self._arrays = {}
        self._lock = threading.Lock()

    def empty(self, shape, dtype):
        key = (tuple(shape), np.dtype(dtype).str)
        with self._lock:
            arrays = self._arrays.setdefault(key, [])
            for array in arrays:
                if (sys.getrefcount(array) == self._FREE
                        and sys.getrefcount(array.base) == self._FREE_OWNER):
                    return array
            array = aligned_empty(shape, dtype, self.ALIGN)
            if len(arrays) < self.keep:
                arrays.append(array)
            return array

    def __getstate__(self):  # a copy (a worker process) starts with no arrays
        return {"keep": self.keep}

    def __setstate__(self, state):
        type(self).__init__(self, state["keep"])


def batch_len(batch):
    """Samples in a batch: x alone, (x,), (x, y) or (x, y, w), x an array or a dict or
    tuple of arrays."""
    if isinstance(batch, dict):
        return batch_len(next(iter(batch.values())))
    if isinstance(batch, (tuple, list)):
        return batch_len(batch[0])
    return len(batch)


def aligned_empty(shape, dtype, align):
    """An uninitialised array whose data starts at a multiple of `align` bytes; its
    `base` owns the memory (views of it, at any depth, refer to that owner)."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(size + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + size].view(dtype).reshape(shape)


def allocate(sample, batch_len, buffers=None):
    """An empty batch shaped like `sample` (an array, or a dict or tuple of arrays), from
    `buffers` (a BufferPool) when given."""
    if isinstance(sample, dict):
        return {k: allocate(v, batch_len, buffers) for k, v in sample.items()}
    if isinstance(sample, tuple):
        return tuple(allocate(v, batch_len, buffers) for v in sample)
    sample = np.asarray(sample)
    shape = (batch_len,) + sample.shape
    if buffers is None or sample.dtype == object:
        return np.empty(shape, dtype=sample.dtype)
    return buffers.empty(shape, sample.dtype)


def write(batch, k, sample, where):
    """Writes `sample` at row k of `batch`, refusing a shape that differs from row 0.
    `where` (a callable) names the sample in that error."""
    if isinstance(batch, dict):
        for key, buf in batch.items():
            write(buf, k, sample[key], where)
        return
    if isinstance(batch, tuple):
        for buf, part in zip(batch, sample):
            write(buf, k, part, where)
        return
    sample = np.asarray(sample)
    if sample.shape != batch.shape[1:]:
        raise ValueError(
            f"Every sample of a batch must have the same shape. Received: shape "
            f"{sample.shape} for {where()}, but {batch.shape[1:]} for the batch's first "
            "sample. Resize in load_sample or in the augmentation."
        )
    batch[k] = sample


def convert(batch, dtype, rescale=None, buffers=None):
    """Casts (and rescales) a batch in one vectorised step per array (into an array of
    `buffers`, a BufferPool, when given)."""
    if isinstance(batch, dict):
        return {k: convert(v, dtype, rescale, buffers) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(convert(v, dtype, rescale, buffers) for v in batch)
    if dtype is None or (batch.dtype == dtype and rescale is None):
        return batch
    out = (np.empty(batch.shape, dtype=dtype) if buffers is None
           else buffers.empty(batch.shape, dtype))
    return convert_into(out, batch, rescale)


def convert_into(out, batch, rescale=None):
    """Writes `batch` cast to out's dtype (times `rescale` for floats) into `out`."""
    if rescale is not None and np.issubdtype(out.dtype, np.floating):
        np.multiply(batch, np.asarray(rescale, dtype=out.dtype), out=out, casting="unsafe")
    else:
        out[...] = batch
    return out


def _magnitude(dtype):
    """The largest magnitude a value of numeric `dtype` can have."""
    if dtype.kind == "f":
        return float(np.finfo(dtype).max)
    if dtype.kind == "b":
        return 1
    info = np.iinfo(dtype)
    return max(-int(info.min), int(info.max))


def holds(dtype):
    """What `dtype` (an integer or float one) holds, in words."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return f"whole numbers from {info.min} to {info.max}"
    limit = np.finfo(dtype).max
    return f"values from {-limit:g} to {limit:g}"


def fits_always(source, dtype, rescale=None):
    """Whether every value of dtype `source` converts to `dtype` (times `rescale` for a
    float dtype) unchanged, or at least into what it was (NaN, inf): no need to look at
    the values. Only numeric dtypes are judged; any other pair counts as fitting."""
    source, target = np.dtype(source), np.dtype(dtype)
    if source.kind not in "biuf" or target.kind not in "iuf":
        return True
    if target.kind == "f":
        scale = 1.0 if rescale is None else abs(float(rescale))
        return _magnitude(source) * scale <= float(np.finfo(target).max)
    return bool(np.can_cast(source, target, "safe"))


def misfit(values, dtype, rescale=None):
    """The flat index of the first value of `values` that converting to `dtype` (times
    `rescale` for a float dtype, as `convert_into` does) would change: out of the
    dtype's range (a float dtype: finite values that would become inf; NaN and inf stay
    what they are), or NaN, inf or not whole for an integer dtype; None when every
    value fits. Free (no pass over the values) when values' dtype always fits."""
    target = np.dtype(dtype)
    values = np.asarray(values)
    if values.size == 0 or fits_always(values.dtype, target, rescale):
        return None
    if target.kind == "f":
        scale = 1.0 if rescale is None else abs(float(rescale))
        limit = float(np.finfo(target).max) / scale
        with np.errstate(invalid="ignore"):
            if values.min() >= -limit and values.max() <= limit:  # NaN: the slow path
                return None
            bad = (values < -limit) | (values > limit)
        if values.dtype.kind == "f":
            bad &= np.isfinite(values)
    else:
        info = np.iinfo(target)
        low, high = int(info.min), int(info.max)
        with np.errstate(invalid="ignore"):
            fits = bool(values.min() >= low and values.max() <= high)
            if values.dtype.kind == "f":
                fits = fits and bool(np.equal(np.trunc(values), values).all())
            if fits:
                return None
            bad = ~((values >= low) & (values <= high))
            if values.dtype.kind == "f":
                bad |= np.trunc(values) != values
    if not bad.any():
        return None
    return int(np.argmax(bad.ravel()))


def became(value, dtype, rescale=None):
    """What `value` turns into when converted to `dtype` (as `convert_into` does)."""
    out = np.empty((), np.dtype(dtype))
    with np.errstate(all="ignore"):
        convert_into(out, np.asarray(value), rescale)
    return out.item()


def _mix(base, other, lams, dtype):
    """base + lams * (other - base) in float32, cast to dtype (rounded for integers)."""
    base = np.asarray(base, np.float32)
    mixed = base + lams * (np.asarray(other, np.float32) - base)
    if np.issubdtype(dtype, np.integer):
        mixed = np.rint(mixed)
    return mixed.astype(dtype)


def blend(x, other, lam):
    """One synthetic sample: x + lam * (other - x), in x's dtype (x may be a dict)."""
    if isinstance(x, dict):
        return {k: blend(v, other[k], lam) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(blend(v, o, lam) for v, o in zip(x, other))
    x = np.asarray(x)
    return _mix(x, other, np.float32(lam), x.dtype)


def blend_rows(batch, partner_rows, lams, rows):
    """batch[rows] = batch[rows] + lams * (partner_rows - batch[rows]), in place when
    the batch is writeable (a copy otherwise)."""
    shape = (-1,) + (1,) * (batch.ndim - 1)
    out = batch if batch.flags.writeable else batch.copy()
    out[rows] = _mix(batch[rows], partner_rows, lams.reshape(shape).astype(np.float32),
                     batch.dtype)
    return out
