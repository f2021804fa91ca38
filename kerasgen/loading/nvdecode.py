"""nvImageCodec decoding (`decoder="nvimgcodec"`): a batch's JPEGs decoded in one call,
on the GPU where CUDA is present, else on nvImageCodec's CPU backend (the same calls;
CI runs them there, bit-identical to OpenCV's full-size decode).

`NvDecoder.decode(datas)` takes encoded JPEGs and returns RGB uint8 host arrays (None
where nvImageCodec could not decode one: the caller then decodes it as it would
without this decoder, which names the file or applies the bad-file policy). Resizing,
caches, masks and augmentation are the loader's, on the CPU. The library is imported
on first use; the messages it prints while it looks for GPU libraries it may not find
("Failed to load nvjpeg library...") are kept in `messages`, not printed.
"""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

import numpy as np

from kerasgen import _quiet

PIP = 'pip install "kerasgen3[nvimgcodec]" (or pip install nvidia-nvimgcodec-cu12)'


def _import() -> Any:
    try:
        from nvidia import nvimgcodec
    except ImportError as error:
        raise ImportError(f"decoder='nvimgcodec' needs NVIDIA's nvImageCodec: {PIP}.") \
            from error
    return nvimgcodec


class NvDecoder:
    """nvImageCodec decoders, one per thread, on `device` "gpu" (CUDA found) or "cpu"."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.device: str | None = None  # known once the first decoder is made
        self.messages = ""

    def _decoder(self) -> Any:
        decoder = getattr(self._local, "decoder", None)
        if decoder is None:
            caught: list[str] = []
            with self._lock, _quiet.captured_stderr(caught):
                decoder = self._make(_import())
            self.messages += "".join(caught)
            self._local.decoder = decoder
        return decoder

    def _make(self, nvimgcodec: Any) -> Any:
        if self.device != "cpu":
            try:
                decoder = nvimgcodec.Decoder()  # the GPU's (fails without CUDA)
                self.device = "gpu"
                return decoder
            except RuntimeError:
                self.device = "cpu"
        return nvimgcodec.Decoder(device_id=nvimgcodec.NVIMGCODEC_DEVICE_CPU_ONLY,
                                  backends=[nvimgcodec.Backend(
                                      nvimgcodec.BackendKind.CPU_ONLY)])

    def decode(self, datas: list[np.ndarray]) -> list[np.ndarray | None]:
        """RGB uint8 (h, w, 3) host arrays of the JPEGs `datas`, EXIF orientation
        applied; None for those nvImageCodec cannot decode."""
        images = self._decoder().decode([np.ascontiguousarray(d) for d in datas])
        out: list[np.ndarray | None] = []
        for image in images:
            if image is None:
                out.append(None)
                continue
            array = np.asarray(image.cpu() if self.device == "gpu" else image)
            rgb8 = array.ndim == 3 and array.shape[2] == 3 and array.dtype == np.uint8
            out.append(array if rgb8 else None)  # anything else: OpenCV's to decode
        return out

    def __getstate__(self) -> dict[str, Any]:  # decoders are made anew in each process
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]


def available() -> bool:
    """Whether nvImageCodec is installed (found, not imported: importing it prints what
    it looks for, which `NvDecoder` catches)."""
    try:
        return importlib.util.find_spec("nvidia.nvimgcodec") is not None
    except ImportError:  # no `nvidia` package at all
        return False
