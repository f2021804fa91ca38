"""Pictures of what a generator yields: a grid of augmented samples with their labels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from kerasgen import _atomic, _checks
from kerasgen._typing import BatchArrays, StrPath

if TYPE_CHECKING:
    from kerasgen.base import Generator


__all__ = ["plot_class_distribution", "show_batch"]


class _Labelled(Protocol):
    """What `draw_batch` reads of its `gen`: a generator, or anything that names its
    classes and label mode as one does (the command line's preview batch)."""

    @property
    def class_names(self) -> list[str] | None: ...

    @property
    def label_mode(self) -> str | None: ...


def output_file(path: StrPath, name: str = "path") -> tuple[str, str]:
    """(path, format) of a picture to write at exactly `path`, its format from its
    extension (matplotlib's: png, pdf, svg, jpg...); a folder, a special file, a missing
    folder or an unknown extension is refused with an error naming `name`."""
    _matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    return _checks.output_file(name, path, sorted(FigureCanvasBase.get_supported_filetypes()))


def _save(figure, path):
    """Writes `figure` at exactly `path`, put in place atomically (nothing is written
    through a link or FIFO planted there)."""
    path, fmt = output_file(path)
    with _atomic.replacing(path) as f:
        figure.savefig(f, format=fmt, dpi=100)
    return path


def _matplotlib():
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError('kerasgen.viz needs matplotlib: pip install "kerasgen3[viz]" '
                          "(or pip install matplotlib)") from error
    return matplotlib


def _figure(**kwargs):
    """A matplotlib Figure of its own, outside pyplot: drawing it neither chooses nor
    changes the backend (a notebook's inline plots keep working) and nothing needs to be
    closed."""
    _matplotlib()
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _caption(gen, y):
    """A readable label for one sample's y, in the generator's label mode."""
    names = gen.class_names
    mode = gen.label_mode
    if y is None or mode == "mask":
        return ""
    y = np.asarray(y)
    if mode == "multi_label" or (y.ndim == 1 and y.size > 1 and mode != "raw"):
        hot = np.flatnonzero(y > 0.5) if mode == "multi_label" else [int(y.argmax())]
        return ", ".join(names[k] if names else str(k) for k in hot) or "(none)"
    if mode in ("int", "binary") or (mode == "raw" and y.size == 1):
        k = int(round(float(y.reshape(-1)[0])))
        return names[k] if names and 0 <= k < len(names) else str(y.reshape(-1)[0])
    return np.array2string(y, precision=2, threshold=6)


def _displayable(image):
    image = np.asarray(image, dtype="float32")
    if image.max() > 1.0:
        image = image / 255.0
    image = np.clip(image, 0, 1)
    return image[..., 0] if image.shape[-1] == 1 else image


def show_batch(gen: Generator, n: int = 16, path: StrPath = "preview.png",
               batch_index: int = 0, columns: int | None = None) -> StrPath:
    """Writes a grid of the first `n` samples of batch `batch_index` (augmented as
    training sees them) with their class names; masks are overlaid in mask mode.
    Returns `path`."""
    from keras.utils import unpack_x_y_sample_weight

    x, y, _ = unpack_x_y_sample_weight(gen[batch_index])  # x alone when unlabeled
    return draw_batch(x, y, gen, path, n, columns,
                      f"{type(gen).__name__}: epoch {gen.epoch}, batch {batch_index}")


def draw_batch(x: BatchArrays, y: np.ndarray | None, gen: _Labelled, path: StrPath,
               n: int = 16, columns: int | None = None, title: str = "") -> StrPath:
    """Writes a grid of the first `n` images of a batch `x` with the captions of `y`;
    `gen` gives `class_names` and `label_mode`. Returns `path`."""
    if isinstance(x, dict):
        raise ValueError("show_batch draws image batches; this generator yields a dict of "
                         f"inputs ({sorted(x)}).")
    if np.asarray(x).ndim != 4:
        raise ValueError(f"show_batch draws image batches (n, h, w, c); this generator "
                         f"yields x of shape {np.shape(x)}.")
    n = min(_checks.positive_int("n", n), len(x))
    columns = columns or int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / columns))
    figure = _figure(figsize=(2.2 * columns, 2.4 * rows))
    axes = figure.subplots(rows, columns, squeeze=False)
    for k, axis in enumerate(axes.flat):
        axis.axis("off")
        if k >= n:
            continue
        axis.imshow(_displayable(x[k]), cmap="gray" if x.shape[-1] == 1 else None)
        if gen.label_mode == "mask" and y is not None:
            mask = y[k].argmax(-1) if y[k].ndim == 3 else y[k]
            axis.imshow(np.ma.masked_equal(mask, 0), alpha=0.45, cmap="tab20",
                        interpolation="nearest")
        elif y is not None:
            axis.set_title(_caption(gen, y[k]), fontsize=8)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    return _save(figure, path)


def plot_class_distribution(gen: Generator,
                            path: StrPath = "class_distribution.png") -> StrPath:
    """Writes a bar chart of the class counts before and after the generator's sampler
    (this epoch's plan). Returns `path`."""
    counts = gen.class_counts()
    names = [str(name) for name in counts["before"]]
    positions = np.arange(len(names))
    figure = _figure(figsize=(max(4, 0.6 * len(names) + 2), 3.2))
    axis = figure.subplots()
    axis.bar(positions - 0.2, list(counts["before"].values()), width=0.4, label="before")
    axis.bar(positions + 0.2, list(counts["after"].values()), width=0.4,
             label=f"after ({type(gen.sampler).__name__ if gen.sampler else 'no sampler'})")
    axis.set_xticks(positions, names, rotation=45 if len(names) > 8 else 0)
    axis.set_ylabel("samples per epoch")
    axis.legend()
    figure.tight_layout()
    return _save(figure, path)
