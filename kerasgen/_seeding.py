"""Seeds and derived random generators.

Every random decision in kerasgen comes from ``default_rng([seed, stream, *keys])``:
a generator derived from the user's one seed, a named stream and the position
(epoch, sample index, ...). Nothing is shared between threads or processes and no
global random state is touched, so results never depend on workers or call order.
"""

import numbers
from typing import cast

import numpy as np

# Streams: one per kind of random decision, so adding one never shifts another.
ORDER = 0
SPLIT = 1
SAMPLER = 2
AUGMENT = 3
SKIP = 4
BATCH_AUGMENT = 5
BATCH_ORDER = 6  # the batch shuffle of fit(shuffle=True), done for Keras (_keras_compat)


def resolve_seed(seed, name="seed"):
    """Returns `seed` as an int, drawing one from OS entropy when it is None."""
    if seed is None:
        # a SeedSequence made without entropy draws an int (its stub's type is wider)
        return int(cast(int, np.random.SeedSequence().entropy) % (2**32))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(
            f"`{name}` must be a non-negative integer or None. Received: {name}={seed!r}"
        )
    return int(seed)


def rng(seed, stream, *keys):
    """A fresh generator for (seed, stream, *keys); the same keys give the same draws."""
    return np.random.default_rng([seed, stream, *[int(k) for k in keys]])
