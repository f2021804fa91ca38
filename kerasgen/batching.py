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
    """Writes `sample` at row k of `batch`, refusing a shape that differs from row 0.
    `where` (a callable) names the sample in that error."""
    if isinstance(batch, dict):
        for key, buf in batch.items():
            write(buf, k, sample[key], where)
        return
    sample = np.asarray(sample)
    if sample.shape != batch.shape[1:]:
        raise ValueError(
            f"Every sample of a batch must have the same shape. Received: shape "
            f"{sample.shape} for {where()}, but {batch.shape[1:]} for the batch's first "
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
