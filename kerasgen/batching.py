"""Batch assembly: one preallocated array (or dict of arrays) per batch."""

import numpy as np

DTYPES = ("float32", "float16", "uint8", None)


def allocate(sample, batch_len):
    """An empty batch shaped like `sample` (an array or a dict of arrays)."""
    if isinstance(sample, dict):
        return {k: allocate(v, batch_len) for k, v in sample.items()}
    sample = np.asarray(sample)
    return np.empty((batch_len,) + sample.shape, dtype=sample.dtype)


def write(batch, k, sample, where):
    """Writes `sample` at row k of `batch`, refusing a shape that differs from row 0."""
    if isinstance(batch, dict):
        for key, buf in batch.items():
            write(buf, k, sample[key], where)
        return
    sample = np.asarray(sample)
    if sample.shape != batch.shape[1:]:
        raise ValueError(
            f"Every sample of a batch must have the same shape. Received: shape "
            f"{sample.shape} for {where}, but {batch.shape[1:]} for the batch's first "
            "sample. Resize in load_sample or in the augmentation."
        )
    batch[k] = sample


def convert(batch, dtype, rescale=None):
    """Casts (and rescales) a batch in one vectorised step per array."""
    if isinstance(batch, dict):
        return {k: convert(v, dtype, rescale) for k, v in batch.items()}
    if dtype is None or (batch.dtype == dtype and rescale is None):
        return batch
    return convert_into(np.empty(batch.shape, dtype=dtype), batch, rescale)


def convert_into(out, batch, rescale=None):
    """Writes `batch` cast to out's dtype (times `rescale` for floats) into `out`."""
    if rescale is not None and np.issubdtype(out.dtype, np.floating):
        np.multiply(batch, np.asarray(rescale, dtype=out.dtype), out=out, casting="unsafe")
    else:
        out[...] = batch
    return out


def blend(x, other, lam):
    """x + lam * (other - x) in float32, cast back to x's dtype (rounded for integers)."""
    if isinstance(x, dict):
        return {k: blend(v, other[k], lam) for k, v in x.items()}
    x = np.asarray(x)
    mixed = x.astype(np.float32) + np.float32(lam) * (np.asarray(other, np.float32)
                                                      - x.astype(np.float32))
    if np.issubdtype(x.dtype, np.integer):
        mixed = np.rint(mixed)
    return mixed.astype(x.dtype)
