"""Whether an array's rows can become batches of a dtype, checked once before training:
`check_convertible` (object and text arrays: ragged rows, arrays as elements, text) and
`check_fits` (numbers out of the dtype's range, NaN or inf into integers), each naming the
first row at fault; `check_sparse`: whether sparse batches (sparse=True) can be made and fed."""

from __future__ import annotations

import reprlib

import numpy as np

from kerasgen import _checks
from kerasgen.arrays import batching
from kerasgen.arrays.batching import is_sparse

__all__ = ["check_convertible", "check_fits", "check_sparse"]

SPARSE_BACKENDS = ("tensorflow", "jax")  # the Keras backends that take sparse inputs


def check_sparse(x, sparse, label_mode, common):
    """Refuses sparse=`sparse` (anything but False) where sparse batches cannot be made
    or fed: not a bool, no scipy.sparse array in `x`, a Keras backend without sparse
    inputs, a per-sample `augment`, or label_mode="input"."""
    if sparse is not True:
        _checks.fail("sparse", "True or False", sparse, TypeError)
    values = x.values() if isinstance(x, dict) else [x]
    if not any(is_sparse(v) for v in values):
        kinds = ({k: type(v).__name__ for k, v in x.items()} if isinstance(x, dict)
                 else type(x).__name__)
        raise ValueError(
            "`sparse=True` batches the rows of a scipy.sparse `x` as sparse matrices, but "
            f"x holds no scipy.sparse array. Received: sparse=True with x of type {kinds}. "
            "Pass x as a scipy.sparse matrix (scipy.sparse.csr_matrix(x)), or leave "
            "sparse=False.")
    import keras

    backend = keras.backend.backend()
    if backend not in SPARSE_BACKENDS:
        raise ValueError(
            f"`sparse=True` needs a Keras backend that takes sparse inputs (TensorFlow or "
            f"JAX); the {backend!r} backend does not. Received: sparse=True with "
            f"KERAS_BACKEND={backend!r}. Use sparse=False: the rows are then made dense "
            "in each batch.")
    dtype = common.get("dtype", "float32")
    if dtype is not None:
        import scipy.sparse as sp  # type: ignore[import-untyped]

        try:
            sp.csr_matrix((1, 1), dtype=dtype)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"`dtype` must be one that scipy.sparse matrices hold for sparse=True "
                f"batches ({error}). Received: dtype={dtype!r} with sparse=True. Pass "
                "dtype='float32' (or None to keep x's own), or use sparse=False.") from error
    if common.get("augment") is not None:
        raise ValueError(
            "`augment` transforms one dense sample at a time, and sparse=True batches "
            "stay sparse. Received: sparse=True with augment="
            f"{common['augment']!r}. Pass a callable batch_augment=fn(x, y, rng) -> "
            "(x, y), which receives each batch's x as a scipy.sparse CSR matrix, or use "
            "sparse=False.")
    if label_mode == "input":
        raise ValueError(
            "label_mode='input' makes x its own target, and Keras's losses take no sparse "
            "targets. Received: sparse=True with label_mode='input'. Use sparse=False.")


def check_convertible(array, name, dtype, chunk=4096):
    """Refuses, naming the first row at fault, an object or string array whose batches
    could not be converted to `dtype` (ragged rows, arrays as elements, text). The rows
    are converted as batches are, a chunk at a time; numeric arrays always convert."""
    if array.dtype.kind not in "OUS":
        return
    out = np.empty((min(chunk, len(array)),) + array.shape[1:], dtype)
    for start in range(0, len(array), chunk):
        rows = array[start:start + chunk]
        try:
            out[:len(rows)] = rows
        except (ValueError, TypeError, OverflowError) as error:
            for i in range(start, start + len(rows)):
                try:
                    out[0] = array[i]
                except (ValueError, TypeError, OverflowError) as row_error:
                    raise ValueError(_unconvertible(array, name, dtype, i, row_error)) \
                        from row_error
            raise ValueError(f"`{name}` cannot be converted to dtype={dtype!r}: {error}. "
                             f"Received: {name} of dtype {array.dtype}.") from error


def check_fits(array, name, dtype, rescale=None, chunk=1 << 20):
    """Refuses, naming the first row at fault, a numeric array with values that batches
    of `dtype` cannot hold: out of range (wrapped around, or inf in float16), NaN, inf
    or not whole into an integer dtype. One vectorised pass, `chunk` values at a time;
    none at all when x's dtype always fits (uint8 into float32, say)."""
    if batching.fits_always(array.dtype, dtype, rescale):
        return
    if is_sparse(array):  # its stored values (a zero fits every dtype)
        values = array.data
        for start in range(0, len(values), chunk):
            flat = batching.misfit(values[start:start + chunk], dtype, rescale)
            if flat is not None:
                row = int(np.searchsorted(array.indptr, start + flat, side="right")) - 1
                _misfit(name, dtype, rescale, array.dtype, row, values[start + flat])
        return
    rows = max(1, chunk // max(1, int(np.prod(array.shape[1:], dtype=np.int64))))
    for start in range(0, len(array), rows):
        part = array[start:start + rows]
        flat = batching.misfit(part, dtype, rescale)
        if flat is None:
            continue
        _misfit(name, dtype, rescale, array.dtype, start + flat // max(1, part[0].size),
                part.flat[flat])


def _misfit(name, dtype, rescale, array_dtype, row, value):
    raise ValueError(
        f"`{name}` must hold values that dtype={dtype!r} can hold "
        f"({batching.holds(dtype)}). Received: {name}[{row}] holds {value.item()!r} "
        f"({name} of dtype {array_dtype}), which batches would turn into "
        f"{batching.became(value, dtype, rescale)!r}. Scale, round or clip {name} "
        "first, or pass a dtype that holds it (dtype='float32', or dtype=None to "
        f"keep {name}'s own).")


def _unconvertible(array, name, dtype, row, error):
    """The message for `array`, whose `row` cannot be converted to `dtype`."""
    value = array[row]
    if isinstance(value, np.generic):
        value = value.item()  # 'a', not np.str_('a')
    if array.dtype == object and array.ndim == 1 and np.ndim(value) > 0:
        first = np.shape(array[0])
        for i, other in enumerate(array):
            if np.shape(other) != first:
                return (f"`{name}` must have one shape per row to be batched. Received: a "
                        f"ragged object array, row 0 of shape {first}, row {i} of shape "
                        f"{np.shape(other)}. Pad the rows to one length first "
                        "(keras.utils.pad_sequences, say), or pass an `augment` that "
                        "returns one shape.")
        return (f"`{name}` must be a numeric array, not an object array of arrays. "
                f"Received: {len(array)} rows of shape {first} in an object array. Stack "
                f"them into one array first: np.stack(list({name})).")
    if array.dtype.kind in "US" or isinstance(value, (str, bytes)) or (
            np.ndim(value) and any(isinstance(v, (str, bytes))
                                   for v in np.asarray(value, dtype=object).ravel())):
        return (f"`{name}` holds text that cannot be converted to dtype={dtype!r}. Received: "
                f"row {row} = {reprlib.repr(value)} ({name} of dtype {array.dtype}). "
                "Encode it as numbers first, or pass dtype=None to keep it as it is (for a "
                "model that takes strings, with a TextVectorization layer, say).")
    return (f"`{name}` cannot be converted to dtype={dtype!r}: row {row} = "
            f"{reprlib.repr(value)} ({error}). Received: {name} of dtype {array.dtype}.")
