"""Samples that are audio files: `AudioSource` (a file decoded through soundfile,
resampled, cut or padded to a length; a batch padded into one array as Keras's
`padded_batch` pads it), the audio files a folder listing reads (`AUDIO`), and the
steps one waveform goes through (`decode`, `resample`, `fit_length`)."""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kerasgen import _redact
from kerasgen import _seeding as seeding
from kerasgen.arrays import batching
from kerasgen.loading import images
from kerasgen.sources._batch_request import BatchRequest
from kerasgen.sources._listing import FileKind
from kerasgen.storage import remote as _remote

__all__ = ["AUDIO", "AudioSource"]

# Keras reads ".wav" alone; libsndfile (soundfile) reads these too: FLAC, Ogg Vorbis and
# Opus, MP3 (libsndfile 1.1+), AIFF, AU, CAF and Wave64
AUDIO_EXTENSIONS = (".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aiff", ".aif",
                    ".au", ".caf", ".w64")
AUDIO = FileKind("audio files", "an audio file", AUDIO_EXTENSIONS)
SOUNDFILE_PIP = 'pip install "kerasgen3[audio]" (or pip install soundfile)'


def import_soundfile() -> Any:
    """The soundfile module, or an ImportError saying how to install it."""
    try:
        import soundfile  # type: ignore[import-untyped]
    except (ImportError, OSError) as error:  # OSError: the libsndfile library is missing
        raise ImportError(f"Reading audio files needs soundfile: {SOUNDFILE_PIP}. "
                          f"({error})") from error
    return soundfile


def resample_poly() -> Callable[..., np.ndarray]:
    """scipy.signal.resample_poly, or an ImportError saying how to install it."""
    try:
        from scipy.signal import resample_poly as resample  # type: ignore[import-untyped]
    except ImportError as error:
        raise ImportError("`sampling_rate` resamples with scipy.signal.resample_poly: "
                          f"pip install scipy. ({error})") from error
    return resample


def decode(data: Any, name: str) -> tuple[np.ndarray, int]:
    """(waveform float32 (frames, channels) in [-1, 1], its sampling rate) of the encoded
    bytes `data`; what soundfile cannot read is a ValueError naming `name`."""
    soundfile = import_soundfile()
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as f:
            rate = int(f.samplerate)
            waveform = f.read(dtype="float32", always_2d=True)
    except (RuntimeError, ValueError, TypeError, EOFError) as error:  # LibsndfileError
        why = str(getattr(error, "error_string", None) or error).rstrip(".")
        raise ValueError(f"Cannot decode {name}: {why}. Audio files are read by "
                         "soundfile (libsndfile): WAV, FLAC, Ogg, MP3, AIFF... Replace or "
                         "remove the file.") from None
    return waveform, rate


def resample(waveform: np.ndarray, rate: int, target: int | None) -> np.ndarray:
    """`waveform` at `rate` samples per second resampled to `target`
    (scipy.signal.resample_poly: ceil(frames * target / rate) frames); unchanged when
    `target` is None or `rate`."""
    if target is None or rate == target or not len(waveform):
        return waveform
    common = math.gcd(rate, target)
    out = resample_poly()(waveform, target // common, rate // common, axis=0)
    return np.asarray(out, dtype=np.float32)


def fit_length(waveform: np.ndarray, length: int | None) -> np.ndarray:
    """`waveform` cut to `length` frames, or padded with zeros at its end to them, as
    Keras's decode_wav(desired_samples=length); unchanged when `length` is None."""
    if length is None or len(waveform) == length:
        return waveform
    if len(waveform) > length:
        return waveform[:length]
    out = np.zeros((length,) + waveform.shape[1:], dtype=waveform.dtype)
    out[:len(waveform)] = waveform
    return out


class AudioSource:
    """Samples that are audio files, each a float32 waveform (frames, channels).

    Args:
        file_paths: one audio file (a path or a URL) per sample.
        labels: one label per sample (class ids, or float targets), or None.
        class_names: the classes in class-id order, or None.
        sampling_rate: resample every file to this rate (None: keep each file's rate).
        output_sequence_length: cut or pad every waveform to this many frames (after
            resampling and `augment`); None: a batch is padded to its longest waveform.
        root: the folders (`storage.paths.Root`s) files must stay in as they are
            opened, or None (`loading.images.read_file`).
        store: reads the URLs among `file_paths` (`storage.remote.Store`).
        files_found: the files the listing found before any validation split.
    """

    def __init__(self, file_paths: Sequence[str], labels: Any = None, *,
                 class_names: Sequence[str] | None = None, sampling_rate: int | None = None,
                 output_sequence_length: int | None = None, root: Any = None,
                 store: Any = None, files_found: int | None = None) -> None:
        self.file_paths = list(file_paths)
        self.labels = labels
        self.class_names = None if class_names is None else list(class_names)
        self.sampling_rate, self.output_sequence_length = (sampling_rate,
                                                           output_sequence_length)
        self.root, self.store = root, store
        self.files_found = len(self.file_paths) if files_found is None else files_found
        self._first_rate: tuple[int, str] | None = None  # sampling_rate=None: warned once
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.file_paths)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def describe(self, index: int) -> str:
        return _redact.redact(self.file_paths[index])

    def read(self, index: int) -> tuple[np.ndarray, int]:
        """(waveform, rate) of sample `index`, decoded and resampled (not cut)."""
        path = self.file_paths[index]
        name = f"audio file {self.describe(index)}"
        if self.store is not None and _remote.is_url(path):
            data = self.store.read(path, "audio file")
        else:
            data = images.read_file(path, self.root, "audio file")
        waveform, rate = decode(data, name)
        if self.sampling_rate is None:
            self._check_rate(rate, index)
            return waveform, rate
        return resample(waveform, rate, self.sampling_rate), self.sampling_rate

    def load(self, index: int) -> np.ndarray:
        """Sample `index`: its waveform, float32 (frames, channels), resampled and cut
        or padded to `output_sequence_length`."""
        return fit_length(self.read(index)[0], self.output_sequence_length)

    def load_batch(self, request: BatchRequest) -> tuple[Any, Any]:
        """The waveforms of `request.indices`, each augmented (`augment(waveform, rng)`,
        draws from (seed, epoch, position)) and cut or padded to
        `output_sequence_length`, then padded with zeros to the batch's longest into
        one (n, frames, channels) array, converted to `request.dtype`."""
        if request.partners is not None and bool(np.any(request.partners >= 0)):
            raise ValueError("SMOTE-style synthesis blends samples of one shape; audio "
                             "files have their own lengths. Use RandomOverSampler or "
                             "BalancedBatchSampler for audio.")
        waveforms = []
        for index, position in zip(request.indices, request.positions):
            with request.stage("read"):
                waveform = self.read(int(index))[0]
            if request.augment is not None:
                with request.stage("augment"):
                    waveform = self._augmented(waveform, request, int(index), int(position))
            waveforms.append(fit_length(waveform, self.output_sequence_length))
        with request.stage("assemble"):
            batch = self._padded(waveforms, request)
            return batching.convert(batch, request.dtype, request.rescale, request.buffers,
                                    lambda k: self.describe(int(request.indices[k]))), None

    def _augmented(self, waveform: np.ndarray, request: BatchRequest, index: int,
                   position: int) -> np.ndarray:
        """`waveform` through the user's `augment`, with the draws of (seed, epoch,
        position) that every per-sample augmentation gets; its output checked here, as
        waveforms of one batch may differ in length."""
        rng = seeding.rng(request.seed, seeding.AUGMENT, request.epoch, position)
        out = request.augment.augment(waveform, rng)
        shape = getattr(out, "shape", None)
        if shape is None or len(shape) != 2:
            raise TypeError(
                "`augment` must return the waveform as an array (frames, channels), as it "
                f"gets it. Received: {type(out).__name__}"
                f"{'' if shape is None else f' of shape {tuple(shape)}'} for audio file "
                f"{self.describe(index)}.")
        return np.asarray(out, dtype=np.float32)

    def _padded(self, waveforms: list[np.ndarray], request: BatchRequest) -> np.ndarray:
        """One float32 (n, longest, channels) array of `waveforms`, zeros after each."""
        channels = waveforms[0].shape[1]
        for k, waveform in enumerate(waveforms):
            if waveform.shape[1] != channels:
                raise ValueError(
                    f"The audio files of a batch must have one number of channels. "
                    f"Received: {channels} for audio file "
                    f"{self.describe(int(request.indices[0]))} and {waveform.shape[1]} for "
                    f"audio file {self.describe(int(request.indices[k]))}. Convert them to "
                    "one channel count (mono, say).")
        length = max(len(w) for w in waveforms)
        batch = request.buffers.empty((len(waveforms), length, channels), np.float32)
        for k, waveform in enumerate(waveforms):
            batch[k, :len(waveform)] = waveform
            batch[k, len(waveform):] = 0
        return batch

    def _check_rate(self, rate: int, index: int) -> None:
        """Without `sampling_rate`, files of another rate than the first file read are
        mixed as they are (as Keras mixes them): warned of once."""
        with self._lock:
            if self._first_rate is None:
                self._first_rate = (rate, self.describe(index))
                return
            first, name = self._first_rate
            if rate == first or first < 0:
                return
            self._first_rate = (-1, name)
        _redact.warn(
            f"Audio files of different sampling rates are mixed: {first} Hz ({name}) and "
            f"{rate} Hz ({self.describe(index)}). A model hears each at its own speed; "
            f"pass sampling_rate={first} to resample every file to one rate.",
            stacklevel=2)
