"""kerasgen.gpu: the CUDA paths under numba's simulator, the no-CUDA paths, run_isolated."""

import os
import subprocess
import sys
import textwrap

import pytest

import kerasgen as kg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, **env):
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
        timeout=240, cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_cuda_paths_under_the_simulator():
    out = run_python("""
        import warnings, numpy as np, keras, kerasgen as kg
        warnings.simplefilter("error")            # no warning on the CUDA path
        print("release", kg.gpu.release_gpu_memory())
        print("release0", kg.gpu.release_gpu_memory(0))
        try:
            kg.gpu.release_gpu_memory(3)
        except ValueError as error:
            print("bad device:", error)
        info = kg.gpu.memory_info()
        print("devices", sorted(info), sorted(info[0]))
        callback = kg.gpu.ReleaseGPUMemory()
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        model.fit(kg.ArrayGenerator(np.zeros((8, 2)), np.zeros(8), batch_size=4),
                  epochs=1, verbose=0, callbacks=[callback])
        print("callback", callback.released)
    """, NUMBA_ENABLE_CUDASIM="1")
    assert "release True" in out and "release0 True" in out
    assert "bad device: `device` must be None or a CUDA device id in [0, 1)" in out
    assert "devices [0] ['free', 'total']" in out
    assert "callback True" in out


def test_without_a_cuda_device_nothing_crashes(monkeypatch):
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    with pytest.warns(UserWarning, match="No CUDA device found by the driver"):
        assert kg.gpu.release_gpu_memory() is False
    assert kg.gpu.memory_info() is None
    assert kg.gpu.enable_memory_growth() == 0  # no GPU: nothing to set


def test_without_numba_the_pip_command_is_given(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)
    with pytest.warns(UserWarning, match=r'pip install "kerasgen3\[gpu\]"'):
        assert kg.gpu.release_gpu_memory() is False
    assert kg.gpu.memory_info() is None


def test_memory_growth_too_late_is_explained(monkeypatch):
    import tensorflow as tf

    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind: ["GPU:0"])

    def refuse(device, enable):
        raise RuntimeError("Physical devices cannot be modified after being initialized")

    monkeypatch.setattr(tf.config.experimental, "set_memory_growth", refuse)
    with pytest.raises(RuntimeError, match="came too late.*before building a model"):
        kg.gpu.enable_memory_growth()


def train_small_model(epochs):
    """Runs in the child process: a real model.fit from a kerasgen generator."""
    import keras
    import numpy as np

    import kerasgen

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    history = model.fit(kerasgen.ArrayGenerator(x, y, batch_size=16, seed=0), epochs=epochs,
                        verbose=0)
    return {"loss": history.history["loss"], "pid": __import__("os").getpid()}


def fail_in_child(message):
    raise KeyError(message)


def die_in_child():
    os._exit(3)


@pytest.mark.slow
def test_run_isolated_fits_in_a_child_and_propagates_errors():
    result = kg.gpu.run_isolated(train_small_model, epochs=2)
    assert len(result["loss"]) == 2 and result["pid"] != os.getpid()
    with pytest.raises(KeyError, match="missing column") as caught:
        kg.gpu.run_isolated(fail_in_child, "missing column")
    assert "fail_in_child" in str(caught.value.__cause__)  # the child's traceback
    with pytest.raises(ChildProcessError, match="exit code 3"):
        kg.gpu.run_isolated(die_in_child)
    assert kg.gpu.run_isolated(lambda a, b=1: a + b, 2, b=5) == 7  # cloudpickle


def test_run_isolated_refuses_what_cannot_reach_the_child(monkeypatch):
    import threading

    with pytest.raises(TypeError, match="must be picklable"):
        kg.gpu.run_isolated(print, threading.Lock())
