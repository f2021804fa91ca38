"""glibc malloc under TensorFlow: Keras's generator dataset pins the mmap threshold at
128 KiB each epoch; each batch of a Keras epoch sets kerasgen's thresholds back (unless
told to leave malloc alone). What that is worth is measured in benchmarks/images.py."""

import json
import os
import subprocess
import sys

import pytest


MALLOC_PROBE = r"""
import json
import keras
import numpy as np
import kerasgen as kg
from kerasgen.arrays import malloc as _malloc

gen = kg.ArrayGenerator(np.zeros((8, 2), "float32"), np.arange(8) % 2, batch_size=4)
gen[0], gen[1]
standalone = _malloc.times_applied()  # outside a Keras epoch: malloc left alone
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
model.compile("sgd", "sparse_categorical_crossentropy")
model.fit(gen, epochs=2, verbose=0)  # TensorFlow pins the threshold each epoch
print(json.dumps({"standalone": standalone, "fit": _malloc.times_applied() - standalone}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.parametrize("setting", ["", "leave"])
def test_keras_epochs_set_the_thresholds_back(setting):
    env = dict(os.environ, KERASGEN_MALLOC=setting)
    out = subprocess.run([sys.executable, "-c", MALLOC_PROBE], env=env, check=True,
                         capture_output=True, text=True, timeout=240)
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["standalone"] == 0, counts
    # every batch of both epochs, after TensorFlow's pin (unless told to leave malloc)
    assert counts["fit"] == (0 if setting == "leave" else 4), counts


TUNE_PROBE = r"""
import json
import keras
import numpy as np
import kerasgen as kg
from kerasgen.arrays import malloc as _malloc

calls = []
real_apply = _malloc.apply
_malloc.apply = lambda mmap, trim: calls.append([mmap, trim]) or real_apply(mmap, trim)
took = kg.tune_malloc(mmap_threshold=8 << 20, trim_threshold=16 << 20)
gen = kg.ArrayGenerator(np.zeros((8, 2), "float32"), np.arange(8) % 2, batch_size=4)
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
model.compile("sgd", "sparse_categorical_crossentropy")
model.fit(gen, epochs=1, verbose=0)
tuned = list(calls)
kg.leave_malloc()
model.fit(gen, epochs=1, verbose=0)
print(json.dumps({"took": took, "tuned": tuned, "after_leave": calls[len(tuned):]}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_tune_malloc_values_are_kept_in_keras_epochs_until_leave_malloc():
    out = subprocess.run([sys.executable, "-c", TUNE_PROBE], env=dict(os.environ),
                         check=True, capture_output=True, text=True, timeout=240)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["took"] is True
    # once when called, then before each of the epoch's 2 batches, always its values
    assert result["tuned"] == [[8 << 20, 16 << 20]] * 3, result
    assert result["after_leave"] == [], result


def test_tune_malloc_checks_its_arguments():
    import kerasgen as kg

    with pytest.raises(ValueError, match="mmap_threshold"):
        kg.tune_malloc(mmap_threshold=0)
    with pytest.raises(ValueError, match="mmap_threshold"):
        kg.tune_malloc(mmap_threshold=True)
    with pytest.raises(ValueError, match="trim_threshold"):
        kg.tune_malloc(trim_threshold=-1)
