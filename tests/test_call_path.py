"""The call path of one batch: `gen[i]` goes one way down (docs/architecture.md).

The adapter (base.py) hands the batch to the feeding, the feeding to the maker, the
maker to the source and the source to the loader; nothing below calls back into the
generator. Recorded with `sys.setprofile` on the calling thread, with nothing made ahead
and one decode thread, so that the whole batch is made on it.
"""

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

import kerasgen as kg
from kerasgen.adapter import assembly as _assembly

PACKAGE = Path(kg.__file__).resolve().parent  # wherever the checkout is, whatever its name


def _flip(image, rng):
    return image[:, ::-1] if rng.random() < 0.5 else image


def call_path(gen, index):
    """(module, function) of each call into kerasgen's code while `gen[index]` is made,
    in order, modules relative to the package ("base.py", "sources/images.py"...)."""
    calls = []

    def profile(frame, event, arg):
        if event != "call":
            return
        path = Path(frame.f_code.co_filename)
        if PACKAGE in path.parents:
            calls.append((path.relative_to(PACKAGE).as_posix(), frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        batch = gen[index]
    finally:
        sys.setprofile(None)
    return calls, batch


@pytest.mark.parametrize("augment", [None, _flip], ids=["plain", "augment"])
def test_a_batch_goes_one_way_down_and_never_back_into_the_generator(image_folder,
                                                                     augment):
    gen = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4, seed=1,
                                  cache=None, prefetch=0, decode_threads=1,
                                  augment=augment)
    calls, (x, y) = call_path(gen, 1)
    modules = [module for module, _ in calls]
    assert modules[0] == "base.py" and calls[0][1] == "__getitem__"
    below = next(k for k, module in enumerate(modules) if module != "base.py")
    assert "base.py" not in modules[below:], [c for c in calls[below:] if c[0] == "base.py"]
    # down the stages in order: feeding, then making, the order's slice, the source
    first = {module: modules.index(module) for module in dict.fromkeys(modules)}
    feeding = next(m for m in first if m.endswith("feeding.py"))
    making = next(m for m in first if m.endswith("making.py"))
    source = next(m for m in first if "image_source" in m or m.startswith("sources/"))
    assert first[feeding] < first[making] < first[source]
    # the same batch as made without the trace
    again = kg.ImageFolderGenerator(image_folder, image_size=(8, 8), batch_size=4, seed=1,
                                    cache=None, prefetch=0, decode_threads=1,
                                    augment=augment)
    np.testing.assert_array_equal(x, again[1][0])
    np.testing.assert_array_equal(y, again[1][1])


def test_a_subclass_that_fills_a_hook_is_the_one_way_back(image_folder):
    """The subclass path: a generator that overrides `load_batch` is called by its
    HookSource (its own code), and its `super().load_batch` loads with the batch's
    epoch: the same batches as the plain generator's, epoch after epoch."""
    seen = []

    class Watched(kg.ImageFolderGenerator):
        def load_batch(self, indices, positions, partners=None, lams=None):
            seen.append(int(positions[0]))
            return super().load_batch(indices, positions, partners, lams)

    common = dict(image_size=(8, 8), batch_size=4, seed=3, augment=_flip, cache=None)
    watched, plain = Watched(image_folder, **common), kg.ImageFolderGenerator(
        image_folder, **common)
    for epoch in range(2):
        for b in range(len(plain)):
            np.testing.assert_array_equal(watched[b][0], plain[b][0])
        watched.on_epoch_end()
        plain.on_epoch_end()
    assert seen and set(seen) <= {0, 4, 8}


def test_a_hook_source_is_each_source_protocol_to_a_static_lookup(image_folder):
    """From Python 3.12 isinstance() against a runtime protocol looks members up with
    inspect.getattr_static (no __getattr__): every member of Source, BatchSource and
    PrefetchingSource must be found on a HookSource that way, or its owner's load_batch
    is silently never called there (seen on 3.13)."""
    from kerasgen.adapter import hooks as _hooks
    from kerasgen.sources import _core

    class Watched(kg.ImageFolderGenerator):
        def load_batch(self, indices, positions, partners=None, lams=None):
            return super().load_batch(indices, positions, partners, lams)

    source = _assembly.batch_source(Watched(image_folder, image_size=(8, 8)))
    assert isinstance(source, _hooks.HookSource)
    members = ["labels", "class_names", "__len__", "describe", "load", "load_batch",
               "remote", "prefetch", "forget"]
    for name in members:
        inspect.getattr_static(source, name)  # raises AttributeError when missing
    assert isinstance(source, _core.BatchSource) and isinstance(source, _core.Source)
    assert isinstance(source, _core.PrefetchingSource) and source.remote is False
    assert source.labels is source.inner.labels
