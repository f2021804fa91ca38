"""grain interop: a generator's batches as the `grain.IterDataset` that Keras's
`image_dataset_from_directory(format="grain")` returns.

Read against Keras 3.15.1, which builds `grain.MapDataset.source(paths)`, shuffled once
with its seed, mapped to images, then `.to_iter_dataset().batch(...)`: every pass gives
the same order ("Grain shuffles deterministically", its test says). Here the source is
the generator's batches of one epoch (the current one when the dataset is made), so
every pass gives that epoch, batch b byte-identical to `gen[b]`.
"""

from __future__ import annotations

from typing import Any


def _import_grain():
    try:
        import grain
    except ImportError as error:
        raise ImportError("format='grain' needs grain: pip install grain (or use "
                          "format='tf', or format='kerasgen' for the generator itself)."
                          ) from error
    return grain


class EpochSource:
    """A grain data source (`len`, `[i]`): the batches of one epoch of a generator."""

    def __init__(self, gen: Any, epoch: int, squeeze: bool = False) -> None:
        self.view, self.squeeze = gen.at_epoch(epoch), squeeze

    def __len__(self) -> int:
        return len(self.view)

    def __getitem__(self, index: int) -> Any:
        batch = self.view[int(index)]
        if self.squeeze:  # batches of one sample: the sample itself
            import keras

            return keras.tree.map_structure(lambda array: array[0], batch)
        return batch

    def __repr__(self) -> str:
        return f"EpochSource({self.view!r})"


def epoch_dataset(gen: Any, unbatch: bool = False) -> Any:
    """`gen`'s current epoch as a grain.IterDataset (single samples with `unbatch`: the
    generator then has batch_size=1)."""
    grain = _import_grain()
    if unbatch and gen.batch_size != 1:
        raise ValueError("format='grain' with batch_size=None reads a generator of "
                         f"batch_size=1. Received: batch_size={gen.batch_size}.")
    return grain.MapDataset.source(EpochSource(gen, gen.epoch, squeeze=unbatch)
                                   ).to_iter_dataset()
