"""GPU memory: release it in-process through numba, or train in a child process.

After `model.fit` a process keeps its GPU memory: `del model`, `gc.collect()` and
`keras.backend.clear_session()` do not return it to the driver. Three tools:

- `run_isolated(fn, ...)`: run the training in a child process; when it ends, all of its
  GPU memory is back. The reliable path for notebooks and hyperparameter loops.
- `release_gpu_memory()`: close the CUDA context in this process (numba's
  `cuda.select_device(n); cuda.close()`). The memory is freed, but TensorFlow in this
  process cannot use that GPU again (CUDA_ERROR_CONTEXT_IS_DESTROYED): call it when the
  process is done with the GPU.
- `enable_memory_growth()`: with the TensorFlow backend, allocate GPU memory as needed
  instead of all at once; must run before the first GPU operation.

numba is optional (pip install "kerasgen3[gpu]"); with the numba-cuda package installed,
`numba.cuda` is that package.
"""

from __future__ import annotations

import gc
import multiprocessing
import pickle
import signal
import traceback
from collections.abc import Callable
from typing import Any, TypeVar, overload
from kerasgen import _redact

__all__ = ["ReleaseGPUMemory", "enable_memory_growth", "memory_info", "release_gpu_memory",
           "run_isolated"]

_T = TypeVar("_T")

PIP_NUMBA = 'pip install "kerasgen3[gpu]" (or pip install numba-cuda)'


def _cuda():
    """numba's CUDA module, or None (with a warning) when numba is missing."""
    try:
        from numba import cuda
    except ImportError:
        _redact.warn(f"numba is not installed, so GPU memory cannot be released in this "
                     f"process: {PIP_NUMBA}. run_isolated() needs no numba.", stacklevel=3)
        return None
    return cuda


def _device_count(cuda):
    """CUDA devices seen by the driver (not cuda.is_available(), which also demands the
    NVVM compiler and says False on a GPU machine without a CUDA toolkit)."""
    try:
        return len(cuda.gpus)
    except Exception:  # noqa: BLE001 - CudaSupportError: no driver library, no device
        return 0


def _devices(cuda, device):
    count = _device_count(cuda)
    if count == 0:
        return []
    if device is None:
        return list(range(count))
    if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < count:
        raise ValueError(f"`device` must be None or a CUDA device id in [0, {count}). "
                         f"Received: device={device!r}")
    return [device]


def _clear_keras():
    try:
        import keras
        keras.backend.clear_session()
    except ImportError:
        pass
    gc.collect()


def release_gpu_memory(device: int | None = None) -> bool:
    """Frees this process's GPU memory by closing its CUDA context(s). Returns True when
    a context was closed; False, with one warning, when numba or a CUDA device is missing.

    It clears the Keras session and collects garbage first, then calls numba's
    `cuda.select_device(d); cuda.close()` for `device` (all devices for None).

    What stops working afterwards: TensorFlow (and any other CUDA user) in this process
    can no longer use that GPU (CUDA_ERROR_CONTEXT_IS_DESTROYED); restart the process to
    train again. To train repeatedly and still get the memory back each time, use
    `run_isolated(fn, ...)` instead.
    """
    _clear_keras()
    cuda = _cuda()
    if cuda is None:
        return False
    devices = _devices(cuda, device)
    if not devices:
        _redact.warn("No CUDA device found by the driver; there is no GPU memory to "
                     "release.", stacklevel=2)
        return False
    for d in devices:
        cuda.select_device(d)
        cuda.close()
    return True


@overload
def memory_info(device: None = None) -> dict[int, dict[str, int]] | None: ...


@overload
def memory_info(device: int) -> dict[str, int] | None: ...


def memory_info(device: int | None = None,
                ) -> dict[int, dict[str, int]] | dict[str, int] | None:
    """{device id: {"free": bytes, "total": bytes}} (one device's dict when `device` is
    given), or None without numba or a CUDA device. Queries through numba, which uses
    the device's primary context (the one TensorFlow uses too)."""
    try:
        from numba import cuda
    except ImportError:
        return None
    devices = _devices(cuda, device)
    if not devices:
        return None
    info = {}
    for d in devices:
        cuda.select_device(d)
        free, total = cuda.current_context().get_memory_info()
        info[d] = {"free": free, "total": total}
    return info[device] if device is not None else info


def enable_memory_growth() -> int:
    """TensorFlow backend: allocate GPU memory as needed instead of (nearly) all of it at
    start. Returns the number of GPUs set. Must run before TensorFlow first uses a GPU;
    afterwards it raises RuntimeError saying so."""
    import keras

    if keras.backend.backend() != "tensorflow":
        raise RuntimeError("enable_memory_growth() is for the TensorFlow backend. "
                           f"Received: the {keras.backend.backend()!r} backend.")
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError as error:
            raise RuntimeError(
                "enable_memory_growth() came too late: TensorFlow has already used the GPU "
                "in this process. Call it first thing, before building a model or running "
                "any TensorFlow operation, or set TF_FORCE_GPU_ALLOW_GROWTH=true before "
                "the process starts."
            ) from error
    return len(gpus)


try:  # ReleaseGPUMemory is a Keras callback; the module also imports without Keras
    import keras as _keras

    class ReleaseGPUMemory(_keras.callbacks.Callback):
        """Keras callback: `release_gpu_memory(device)` when training ends (opt-in).

        After it, this process cannot train on that GPU again; see release_gpu_memory.
        `released` holds its return value.
        """

        def __init__(self, device: int | None = None) -> None:
            super().__init__()
            self.device = device
            self.released: bool | None = None

        def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
            self.released = release_gpu_memory(self.device)
except ImportError:  # pragma: no cover
    pass


class _RemoteTraceback(Exception):
    def __init__(self, text):
        super().__init__(text)
        self.text = text

    def __str__(self):
        return self.text


def _dumps(obj):
    try:
        import cloudpickle
        return cloudpickle.dumps(obj)
    except ImportError:
        return pickle.dumps(obj)


def _child(conn, payload):
    try:
        fn, args, kwargs = pickle.loads(payload)
        result = fn(*args, **kwargs)
        try:
            conn.send(("ok", pickle.dumps(result)))
        except Exception as error:  # unpicklable result
            raise TypeError(f"run_isolated: the function's result must be picklable "
                            f"(history.history, a path...). Received: {type(result)!r}: "
                            f"{error}") from error
    except BaseException as error:  # noqa: BLE001 - sent to the parent, which raises it
        text = traceback.format_exc()
        try:
            blob = pickle.dumps(error)
        except Exception:  # noqa: BLE001 - whatever stops pickling it
            blob = None
        conn.send(("error", (blob, type(error).__name__, str(error), text)))
    finally:
        conn.close()


def run_isolated(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Runs `fn(*args, **kwargs)` in a child process (spawn start method) and returns its
    result, which must be picklable (history.history, a saved model's path...).

    When the child ends, all of its GPU memory returns to the driver, so training in a
    loop (hyperparameter search, notebooks) never accumulates it. An exception in the
    child is raised here, with the child's traceback as its cause; a child that dies
    (killed, out of memory) raises ChildProcessError with its exit code. Works on CPU as
    well. `fn` may be a lambda or a notebook function when cloudpickle is installed.
    """
    try:
        payload = _dumps((fn, args, kwargs))
    except Exception as error:
        raise TypeError(f"run_isolated: `fn` and its arguments must be picklable to reach "
                        f"the child process (install cloudpickle for lambdas and notebook "
                        f"functions). Received: {error}") from error
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(sender, payload), name="kerasgen-isolated")
    child.start()
    sender.close()
    try:
        message = None
        while message is None:
            if receiver.poll(0.2):
                try:
                    message = receiver.recv()
                except EOFError:
                    break
            elif not child.is_alive():
                if receiver.poll(0):
                    continue
                break
        child.join()
    finally:
        if child.is_alive():  # interrupted (KeyboardInterrupt...): do not leave it behind
            child.kill()
            child.join()
        receiver.close()
    if message is None:
        code = child.exitcode
        how = (f"killed by signal {signal.Signals(-code).name}" if code is not None
               and code < 0 else f"exit code {code}")
        raise ChildProcessError(
            f"run_isolated: the child process died ({how}) before returning a result. "
            "Out of memory (host or GPU) is the usual cause of a SIGKILL.")
    status, body = message
    if status == "ok":
        return pickle.loads(body)
    blob, name, text, remote = body
    raised = None
    if blob is not None:
        try:
            raised = pickle.loads(blob)
        except Exception:  # noqa: BLE001 - whatever stops unpickling it
            raised = None
    if not isinstance(raised, BaseException):
        raised = RuntimeError(f"{name}: {text}")
    raise raised from _RemoteTraceback(f'\n"""\n{remote}"""')
