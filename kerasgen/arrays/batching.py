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


def is_sparse(value):
    """Whether `value` is a scipy.sparse matrix or array (scipy is never imported here)."""
    return type(value).__module__.startswith("scipy.sparse") and hasattr(value, "tocsr")


def batch_len(batch):
    """Samples in a batch: x alone, (x,), (x, y) or (x, y, w), x an array or a dict or
    tuple of arrays."""
    if isinstance(batch, dict):
        return batch_len(next(iter(batch.values())))
    if isinstance(batch, (tuple, list)):
        return batch_len(batch[0])
    if is_sparse(batch):
        return batch.shape[0]  # a sparse matrix's rows (it has no len)
    return len(batch)


def aligned_empty(shape, dtype, align):
    """An uninitialised array whose data starts at a multiple of `align` bytes; its
    `base` owns the memory (views of it, at any depth, refer to that owner)."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(size + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + size].view(dtype).reshape(shape)


def stack(samples, buffers=None, where=None, part=""):
    """One batch of `samples` (arrays, numbers or strings, or dicts or tuples of them, all
    of one structure), from `buffers` (a BufferPool) when given.

    Its shape is the first sample's (a sample of another shape is an error); its dtype
    holds every sample: the first sample's when all share it (a dtype comparison each,
    the common case), else numpy's promotion of them all (an int after a float makes
    float64, a longer string the longest; a float after an int is never truncated, nor
    a string cut to the first one's length). Samples that no one type holds (a string
    and a number), or integers that the promoted float type would round (int64 above
    2**53), are a TypeError or ValueError naming the sample (`where(k)` names sample k)
    and both types: no sample is cast in silence. `part` names a dict key or tuple
    place of the samples in errors.
    """
    first = samples[0]
    if isinstance(first, dict):
        return {key: stack([_member(s, key, k, where, part) for k, s in enumerate(samples)],
                           buffers, where, f"{part}[{key!r}]") for key in first}
    if isinstance(first, tuple):
        return tuple(stack([_member(s, i, k, where, part) for k, s in enumerate(samples)],
                           buffers, where, f"{part}[{i}]") for i in range(len(first)))
    arrays = [np.asarray(s) for s in samples]
    dtype = arrays[0].dtype
    for array in arrays:
        if array.dtype != dtype:
            dtype = common_dtype(arrays, where, part)
            break
    shape = arrays[0].shape
    batch = (np.empty((len(arrays),) + shape, dtype) if buffers is None or dtype.kind == "O"
             else buffers.empty((len(arrays),) + shape, dtype))
    for k, array in enumerate(arrays):
        if array.shape != shape:
            _wrong_shape(array.shape, shape, _named(where, k), part)
        batch[k] = array
    return batch


def _named(where, k):
    return f"sample {k} of the batch" if where is None else where(k)


def _of(part):
    return f" (its part {part})" if part else ""


def _member(sample, key, k, where, part):
    """sample[key], the part of sample k at `key` (a dict key or a tuple place)."""
    try:
        return sample[key]
    except (KeyError, IndexError, TypeError):
        raise ValueError(
            f"Every sample of a batch must have the structure of the first one. Received: "
            f"{type(sample).__name__} without {part}[{key!r}] for {_named(where, k)}, "
            "which the batch's first sample has. Return one structure (the same dict keys, "
            "the same tuple length) for every sample.") from None


def _wrong_shape(shape, first, name, part=""):
    raise ValueError(
        f"Every sample of a batch must have the same shape. Received: shape "
        f"{shape} for {name}{_of(part)}, but {first} for the batch's first "
        "sample. Resize in load_sample or in the augmentation."
    )


_TEXT = "US"  # numpy's kinds of text: str and bytes (bytes are not decoded as str)


def common_dtype(arrays, where=None, part=""):
    """The dtype that holds every array of `arrays` unchanged (numpy's promotion), or
    an error naming (`where(k)`) the first one that has none in common with the first
    one, or whose integers the promoted float type would round."""
    dtypes = list(dict.fromkeys(a.dtype for a in arrays))  # unique, in order
    try:
        dtype = np.result_type(*dtypes)
    except TypeError:  # numpy >= 2's DTypePromotionError: a str and a number
        dtype = None
    kinds = {d.kind for d in dtypes} - {"O"}
    if kinds & set(_TEXT) and len(kinds) > 1:
        dtype = None  # numpy 1.x made strings of numbers (3 would become '3'), and
                      # numpy decodes bytes as ASCII str
    first = arrays[0].dtype
    if dtype is None:
        for k, array in enumerate(arrays):
            if not _promotes(first, array.dtype):
                break
        raise TypeError(
            f"Every sample of a batch must have a type that one array holds with the "
            f"others'. Received: dtype {array.dtype} for {_named(where, k)}{_of(part)}, "
            f"but {first} for the batch's first sample ({_named(where, 0)}), and no type "
            "holds both. Return one kind of value (numbers, str or bytes) for every sample.")
    if dtype.kind in "fc":  # integers the float type would round are refused
        exact = 2 ** (np.finfo(dtype).nmant + 1)  # up to it every integer is exact
        for k, array in enumerate(arrays):
            if array.dtype.kind not in "iu" or array.size == 0 or (
                    np.iinfo(array.dtype).max <= exact and np.iinfo(array.dtype).min >= -exact):
                continue
            big = array[(array > exact) | (array < -exact)]
            rounded = [(int(v), int(dtype.type(int(v)))) for v in big.ravel()]
            for value, became in rounded:
                if value != became:
                    raise ValueError(
                        "Every sample of a batch must have a type that holds the others' "
                        f"values exactly. Received: {value} ({array.dtype}) for "
                        f"{_named(where, k)}{_of(part)}, which {dtype}, the type of the "
                        f"batch's dtypes together ({', '.join(map(str, dtypes))}), would "
                        f"round to {became}. Return integers for every sample, or floats "
                        "for every sample.")
    return dtype


def _promotes(a, b):
    """Whether dtypes a and b have a common type (str with str, bytes with bytes)."""
    if (a.kind in _TEXT or b.kind in _TEXT) and a.kind != b.kind and "O" not in (
            a.kind, b.kind):
        return False
    try:
        np.result_type(a, b)
    except TypeError:
        return False
    return True


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
        _wrong_shape(sample.shape, batch.shape[1:], where())
    batch[k] = sample


class OneDtype:
    """Refuses a batch whose arrays' dtypes differ from the first batch's it saw
    (strings of any length are one type). Keras (TensorFlow backend) fixes each array's
    dtype from the first batches it reads and casts the later ones to it without a word:
    y of [0.7, 1.9] after a batch of [3, 2] would train as [0, 1]. One comparison per
    array; a batch's own samples are stacked in the type that holds them all (`stack`),
    so only batches can differ. Batch makers and streams each hold one."""

    def __init__(self):
        self.first = None  # (dtypes, the batch's name) of the first batch of arrays

    def check(self, batch, name, first_sample, fix):
        """`name`: the batch ("batch 3 of epoch 0"); `first_sample()`: its first
        sample's name; `fix`: what to do, for the error."""
        first = self.first
        if first is not None and same_dtypes(batch, first[0]):
            return
        types = dtypes_of(batch)
        if any(t is None for t in types):  # a value no array holds: Keras refuses it
            return
        if first is None:  # the first batch of arrays made here: the reference
            self.first = (types, name)
            return
        if len(types) != len(first[0]):  # another structure: Keras refuses it itself
            return
        names = names_of(batch)
        k = next((k for k, (a, b) in enumerate(zip(types, first[0])) if a != b),
                 min(len(types), len(first[0])) - 1)
        raise TypeError(
            f"Every batch must hold {names[k]} in one dtype, the first batch's: Keras "
            "fixes each array's dtype from the first batches it reads and casts the later "
            "ones to it without a word (0.7 would train as 0 in an int64 array). "
            f"Received: {names[k]} of dtype {_dtype_text(types[k])} in {name} (its first "
            f"sample: {first_sample()}), but {_dtype_text(first[0][k])} in {first[1]}. "
            f"{fix}")


def _dtype_text(dtype):
    return {"U": "str", "S": "bytes"}.get(dtype, str(dtype)) if isinstance(
        dtype, str) else str(dtype)


def same_dtypes(batch, dtypes):
    """Whether `batch`'s arrays have `dtypes` (what `dtypes_of` gave for another batch):
    for x alone or (x, y[, w]) of arrays, a dtype comparison each."""
    if type(batch) is np.ndarray:
        return len(dtypes) == 1 and batch.dtype == dtypes[0] or dtypes_of(batch) == dtypes
    if type(batch) is tuple and len(batch) == len(dtypes):
        for value, dtype in zip(batch, dtypes):
            if type(value) is not np.ndarray or value.dtype != dtype:
                break
        else:
            return True
    return dtypes_of(batch) == dtypes


def dtypes_of(batch):
    """The dtypes of a batch's arrays (x, y, weights; dicts and tuples flattened), one
    per array; strings of any length count as one (Keras and tf.data carry them alike)."""
    if type(batch) is np.ndarray:
        dtype = batch.dtype
        return (dtype.kind,) if dtype.kind in _TEXT else (dtype,)
    if isinstance(batch, dict):
        return tuple(d for value in batch.values() for d in dtypes_of(value))
    if isinstance(batch, (tuple, list)):
        return tuple(d for value in batch for d in dtypes_of(value))
    dtype = getattr(batch, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in _TEXT:
        return (dtype.kind,)
    return (dtype,)


def names_of(batch, name=None):
    """What `dtypes_of(batch)` lists, named as errors name them: x, y, sample_weight,
    y['key'], x[0]."""
    if name is None:  # (x, y[, w]) or x alone
        if isinstance(batch, tuple):
            return tuple(n for part, top in zip(batch, ("x", "y", "sample_weight"))
                         for n in names_of(part, top))
        return names_of(batch, "x")
    if isinstance(batch, dict):
        return tuple(n for key, value in batch.items()
                     for n in names_of(value, f"{name}[{key!r}]"))
    if isinstance(batch, (tuple, list)):
        return tuple(n for k, value in enumerate(batch) for n in names_of(value, f"{name}[{k}]"))
    return (name,)


def leaves_of(batch, top=True):
    """The arrays of a batch, in the order `names_of` names them."""
    if top and isinstance(batch, tuple):
        return tuple(leaf for part in batch[:3] for leaf in leaves_of(part, False))
    if isinstance(batch, dict):
        return tuple(leaf for value in batch.values() for leaf in leaves_of(value, False))
    if isinstance(batch, (tuple, list)):
        return tuple(leaf for value in batch for leaf in leaves_of(value, False))
    return (batch,)


def convert(batch, dtype, rescale=None, buffers=None, where=None):
    """Casts (and rescales) a batch in one vectorised step per array (into an array of
    `buffers`, a BufferPool, when given). With `where` (a callable naming sample k), a
    value the cast would change (300.5 into uint8, 2**24 + 1 into float32) is a
    ValueError naming its sample, the value and what it would become, never cast in
    silence; free where the batch's dtype always fits (`fits_always`)."""
    if isinstance(batch, dict):
        return {k: convert(v, dtype, rescale, buffers, where) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(convert(v, dtype, rescale, buffers, where) for v in batch)
    if dtype is None or (batch.dtype == dtype and rescale is None):
        return batch
    if where is not None:
        refuse_misfit(batch, dtype, rescale, where)
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
        if source.kind in "iu" and rescale is None and _magnitude(source) > _exact(target):
            return False  # integers above 2**24 (float32) would be rounded: looked at
        return _magnitude(source) * scale <= float(np.finfo(target).max)
    return bool(np.can_cast(source, target, "safe"))


def _exact(dtype):
    """The largest integer magnitude below which float `dtype` holds every integer."""
    return 2 ** (np.finfo(dtype).nmant + 1)


def misfit(values, dtype, rescale=None):
    """The flat index of the first value of `values` that converting to `dtype` (times
    `rescale` for a float dtype, as `convert_into` does) would change: out of the
    dtype's range (a float dtype: finite values that would become inf; NaN and inf stay
    what they are), or NaN, inf or not whole for an integer dtype; None when every
    value fits; an integer a float dtype would round (2**24 + 1 in float32, without
    `rescale`) does not fit either. Free (no pass over the values) when values' dtype
    always fits."""
    target = np.dtype(dtype)
    values = np.asarray(values)
    if values.size == 0 or fits_always(values.dtype, target, rescale):
        return None
    if target.kind == "f":
        scale = 1.0 if rescale is None else abs(float(rescale))
        limit = float(np.finfo(target).max) / scale
        exact = _exact(target) if values.dtype.kind in "iu" and rescale is None else None
        with np.errstate(invalid="ignore"):
            low, high = values.min(), values.max()
            if low >= -limit and high <= limit and (exact is None or (
                    -exact <= low and high <= exact)):  # NaN: the slow path
                return None
            bad = (values < -limit) | (values > limit)
        if values.dtype.kind == "f":
            bad &= np.isfinite(values)
        if exact is not None:  # integers beyond the float's exact range: rounded?
            beyond = (values > exact) | (values < -exact)
            if beyond.any():
                with np.errstate(all="ignore"):  # compared as integers (an overflow
                    back = values.astype(target).astype(values.dtype)  # back is a change)
                bad |= beyond & (back != values)
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


def refuse_misfit(batch, dtype, rescale, where):
    """Raises ValueError when a value of the batch `batch` (one row per sample) would be
    changed by its conversion to `dtype` (see `misfit`), naming its sample (`where(k)`),
    the value and what it would become."""
    flat = misfit(batch, dtype, rescale)
    if flat is None:
        return
    values = np.asarray(batch)
    row = flat // max(1, int(np.prod(values.shape[1:], dtype=np.int64)))
    value, scaled, now = misfit_facts(values, flat, dtype, rescale)
    raise ValueError(
        f"Batches of dtype={np.dtype(dtype).name!r} must hold every value as it is"
        f"{scaled} ({holds(dtype)}). Received: {value} in {where(int(row))}, which the "
        f"batch would hold as {now}. Pass a dtype that holds it (dtype='float32', or "
        "dtype=None for the samples' own), or return values within its range.")


def misfit_facts(values, flat, dtype, rescale=None):
    """What an error says of value `flat` of `values` that `misfit` found: the value
    with its type ("300.5 (float64)"), the rescale it is converted with (" times
    rescale=..." for a float dtype, else ""), and what the batch would hold."""
    values = np.asarray(values)
    value = values.flat[flat]
    scaled = "" if rescale is None or np.dtype(dtype).kind != "f" else (
        f" times rescale={rescale}")
    return (f"{value.item()!r} ({values.dtype})", scaled,
            repr(became(value, dtype, rescale)))


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
