"""Audio folders: `audio_dataset_from_directory` (Keras's function: Keras's own tests run
against it, and its batches equal Keras's) and `AudioFolderGenerator` (padded float32
batches for every backend: padding, truncation, resampling, augmentation, the split,
errors, a classifier trained through fit, and a run without TensorFlow on JAX)."""

import importlib.util
import json
import os
from unittest import mock

import keras
import numpy as np
import pytest

pytest.importorskip("soundfile")
import soundfile as sf  # noqa: E402
from keras.src.utils import audio_dataset_utils  # noqa: E402
from keras.src.utils import audio_dataset_utils_test as keras_tests  # noqa: E402

from kerasgen.audio import AudioFolderGenerator, audio_dataset_from_directory  # noqa: E402
from kerasgen.sources import _audio  # noqa: E402

from .test_backends import NO_TENSORFLOW, jax_installed, run_python  # noqa: E402

RATE = 8000
NO_AUDIO = "ignore:Class folder .* holds no audio files:kerasgen._redact.KerasgenWarning"


def sine(frequency, frames, rate=RATE, amplitude=0.5, phase=0.0, channels=1):
    t = np.arange(frames) / rate
    wave = amplitude * np.sin(2 * np.pi * frequency * t + phase)
    return np.repeat(wave[:, None], channels, axis=1).astype("float32")


def write(path, wave, rate=RATE, subtype="PCM_16", format=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    sf.write(path, wave, rate, subtype=subtype, format=format)
    return path


@pytest.fixture
def folder(tmp_path):
    """Two classes ("high": 880 Hz, "low": 220 Hz), 5 WAV files each, 300..1100 frames."""
    for name, frequency in (("high", 880), ("low", 220)):
        for i in range(5):
            write(str(tmp_path / name / f"{i}.wav"), sine(frequency, 300 + 200 * i))
    return tmp_path


def tf_batches(dataset):
    return [tuple(np.asarray(v) for v in b) if isinstance(b, tuple) else np.asarray(b)
            for b in dataset]


# ------------------------------------------------------------------ Keras's own tests
@pytest.mark.filterwarnings(NO_AUDIO)
class TestKerasOwnAudioTests(keras_tests.AudioDatasetFromDirectoryTest):
    """Every test of Keras's class (15 in Keras 3.15.1), on kerasgen's function. Errors
    are compared by type (kerasgen's messages keep its form; the test below checks they
    name what Keras names)."""

    # Keras's test expects, without tensorflow-io, an ImportError for sampling_rate=44100
    # (Keras resamples with tensorflow-io alone); kerasgen resamples with scipy, so the
    # call succeeds and assertRaises(ImportError) fails: every other case of this test
    # runs in test_messages_name_what_keras_names.
    test_audio_dataset_from_directory_errors = pytest.mark.xfail(
        importlib.util.find_spec("tensorflow_io") is None, strict=True,
        raises=AssertionError, reason=(
            "sampling_rate=44100 without tensorflow_io: Keras raises ImportError, kerasgen "
            "resamples with scipy.signal.resample_poly instead"))(
        keras_tests.AudioDatasetFromDirectoryTest.test_audio_dataset_from_directory_errors)

    def setUp(self):
        super().setUp()
        swap = mock.patch.object(audio_dataset_utils, "audio_dataset_from_directory",
                                 audio_dataset_from_directory)
        swap.start()
        self.addCleanup(swap.stop)

    def assertRaisesRegex(self, expected_exception, expected_regex, *args, **kwargs):
        """The exception type only (see the class docstring)."""
        return self.assertRaises(expected_exception, *args, **kwargs)


def test_keras_class_still_has_its_tests():
    names = [n for n in dir(keras_tests.AudioDatasetFromDirectoryTest)
             if n.startswith("test_")]
    assert len(names) >= 15, names


@pytest.mark.filterwarnings(NO_AUDIO)
@pytest.mark.parametrize("kwargs,named", [
    (dict(sampling_rate=-1), r"`sampling_rate` must be higher than 0"),
    (dict(sampling_rate=1.2), r"`sampling_rate` must be an integer"),
    (dict(ragged=True, output_sequence_length=30), r"`ragged` and `output_sequence_length`"),
    (dict(labels="other"), r"`labels` must be 'inferred'"),
    (dict(label_mode="other"), r"`label_mode` must be one of"),
    (dict(labels=[0, 0, 1, 1, 1], class_names=["class_0", "class_1", "class_2"]),
     r"`class_names` goes with labels='inferred'"),
    (dict(labels=[0, 0, 1, 1]), r"one label per audio file. Received: 4 labels for the 5"),
    (dict(class_names=["class_0", "wrong_class"]), r"`class_names` must name subfolders"),
    (dict(label_mode="binary"), r"label_mode='binary' needs at most two classes"),
    (dict(label_mode="binary", class_names=["class_0"]),
     r"label_mode='binary' needs exactly two classes"),
    (dict(validation_split=2), r"`validation_split` must be a fraction between 0 and 1"),
    (dict(validation_split=0.2, subset="other"), r"`subset` must be"),
    (dict(validation_split=0.0, subset="training"), r"`validation_split` must be set"),
    (dict(validation_split=0.2, subset="training"), r"`seed` must be given"),
    (dict(format="grain"), r"`format` must be 'tf' .* or 'kerasgen'"),
    (dict(format="kerasgen", batch_size=None), r"`batch_size` must be a positive integer"),
    (dict(format="kerasgen", ragged=True), r"`ragged` must be False with format='kerasgen'"),
    (dict(output_sequence_length=0), r"`output_sequence_length` must be a positive integer"),
    (dict(augmnt=None), r"augmnt"),
])
def test_messages_name_what_keras_names(tmp_path, kwargs, named):
    """Each of Keras's error cases (and kerasgen's own), in kerasgen's words."""
    for i in range(5):
        write(str(tmp_path / f"class_{i % 3}" / f"{i}.wav"), sine(440, 100))
    with pytest.raises((ValueError, TypeError), match=named):
        audio_dataset_from_directory(tmp_path, verbose=False, **kwargs)


# ------------------------------------------------------------------ equal to Keras's
@pytest.mark.parametrize("kwargs", [
    dict(batch_size=4),
    dict(batch_size=3, label_mode="categorical", output_sequence_length=500),
    dict(batch_size=4, label_mode="binary", output_sequence_length=2000),
    dict(batch_size=4, labels=None),
    dict(batch_size=None),
    dict(batch_size=None, output_sequence_length=400),
    dict(batch_size=4, labels=[1, 0, 1, 0, 1, 0, 1, 0, 1, 0]),
])
def test_batches_equal_keras(folder, kwargs, capsys):
    """shuffle=False: the same waveforms (float32, bit for bit), labels, dtypes and
    static shapes as Keras's tf.data dataset, and the same printed line."""
    ours = audio_dataset_from_directory(folder, shuffle=False, **kwargs)
    printed = capsys.readouterr().out
    theirs = keras.utils.audio_dataset_from_directory(folder, shuffle=False, **kwargs)
    assert printed == capsys.readouterr().out
    assert ours.element_spec == theirs.element_spec
    assert ours.class_names == theirs.class_names
    a, b = tf_batches(ours), tf_batches(theirs)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for u, v in zip(x if isinstance(x, tuple) else (x,), y if isinstance(y, tuple) else (y,)):
            assert u.dtype == v.dtype and np.array_equal(u, v)


def test_ragged_equals_keras(folder):
    import tensorflow as tf

    ours = audio_dataset_from_directory(folder, batch_size=4, ragged=True, shuffle=False,
                                        verbose=False)
    theirs = keras.utils.audio_dataset_from_directory(folder, batch_size=4, ragged=True,
                                                      shuffle=False, verbose=False)
    assert ours.element_spec == theirs.element_spec
    for (x, y), (u, v) in zip(ours, theirs):
        assert isinstance(x, tf.RaggedTensor) and x.shape.as_list() == u.shape.as_list()
        assert x.to_list() == u.to_list() and np.array_equal(y, v)
    assert [int(x.nrows()) for x, _ in ours] == [4, 4, 2]


# ------------------------------------------------------------------ the generator
def test_generator_pads_each_batch_to_its_longest(folder):
    gen = AudioFolderGenerator(folder, batch_size=3, shuffle=False)
    assert gen.class_names == ["high", "low"] and len(gen) == 4
    x, y = gen[0]
    assert x.shape == (3, 700, 1) and x.dtype == np.float32 and y.tolist() == [0, 0, 0]
    first = sf.read(gen.file_paths[0], dtype="float32", always_2d=True)[0]
    assert np.array_equal(x[0, :300], first) and not x[0, 300:].any()
    assert gen[3][0].shape == (1, 1100, 1)  # alone: its own length


@pytest.mark.parametrize("length", [250, 2000])
def test_output_sequence_length_cuts_or_pads(folder, length):
    gen = AudioFolderGenerator(folder, batch_size=10, shuffle=False,
                               output_sequence_length=length)
    x, _ = gen[0]
    assert x.shape == (10, length, 1)
    for k, path in enumerate(gen.file_paths):
        wave = sf.read(path, dtype="float32", always_2d=True)[0]
        n = min(len(wave), length)
        assert np.array_equal(x[k, :n], wave[:n]) and not x[k, n:].any()


def test_sampling_rate_resamples_with_resample_poly(tmp_path):
    from scipy.signal import resample_poly

    write(str(tmp_path / "a" / "0.wav"), sine(440, 300, rate=8000), rate=8000)
    write(str(tmp_path / "a" / "1.wav"), sine(440, 450, rate=12000), rate=12000)
    gen = AudioFolderGenerator(tmp_path, sampling_rate=16000, batch_size=2, shuffle=False)
    assert gen.sampling_rate == 16000
    x, _ = gen[0]
    assert x.shape == (2, 600, 1)
    for k, (path, up, down) in enumerate(zip(gen.file_paths, (2, 4), (1, 3))):
        wave = sf.read(path, dtype="float32", always_2d=True)[0]
        np.testing.assert_allclose(x[k], resample_poly(wave, up, down, axis=0), atol=1e-6)


def test_mixed_rates_without_sampling_rate_are_warned_of(tmp_path):
    write(str(tmp_path / "a" / "0.wav"), sine(440, 300, rate=8000), rate=8000)
    write(str(tmp_path / "a" / "1.wav"), sine(440, 300, rate=16000), rate=16000)
    gen = AudioFolderGenerator(tmp_path, batch_size=2, shuffle=False)
    with pytest.warns(UserWarning, match=r"8000 Hz .*0.wav.* and 16000 Hz .*1.wav.*"
                                         r"sampling_rate=8000"):
        gen[0]


def test_flac_ogg_and_stereo_files_are_read(tmp_path):
    wave = sine(440, 800, channels=2)
    write(str(tmp_path / "a" / "0.flac"), wave, format="FLAC")
    write(str(tmp_path / "a" / "1.ogg"), wave, subtype="VORBIS", format="OGG")
    write(str(tmp_path / "a" / "2.wav"), wave)
    (tmp_path / "a" / "notes.txt").write_text("not audio")
    gen = AudioFolderGenerator(tmp_path, batch_size=3, shuffle=False, label_mode=None)
    assert [os.path.basename(p) for p in gen.file_paths] == ["0.flac", "1.ogg", "2.wav"]
    x = gen[0]
    assert x.shape[0] == 3 and x.shape[2] == 2 and x.shape[1] >= 800
    pcm16 = np.round(wave * 32767) / 32768
    np.testing.assert_allclose(x[0, :800], pcm16, atol=1e-4)  # FLAC: lossless
    np.testing.assert_allclose(x[2, :800], pcm16, atol=1e-4)
    assert np.abs(x[1, :800] - wave).max() < 0.1  # Vorbis: lossy


def test_augment_gets_each_waveform_seeded(folder):
    seen = []

    def gain(waveform, rng):
        seen.append(waveform.shape)
        return waveform * rng.uniform(0.5, 1.5)

    gen = AudioFolderGenerator(folder, batch_size=4, seed=3, augment=gain)
    first = gen[0][0]
    assert all(len(s) == 2 and s[1] == 1 for s in seen) and len(set(seen)) > 1
    np.testing.assert_array_equal(gen[0][0], first)  # draws from (seed, epoch, position)
    gen.on_epoch_end()
    assert not np.array_equal(gen[0][0], first)


def test_worker_threads_and_pickled_source_make_the_same_batches(folder):
    import pickle

    one = AudioFolderGenerator(folder, batch_size=3, seed=5, prefetch=0)
    two = AudioFolderGenerator(folder, batch_size=3, seed=5, workers=2)
    for b in range(len(one)):
        np.testing.assert_array_equal(one[b][0], two[b][0])
    copy = pickle.loads(pickle.dumps(one.source))
    np.testing.assert_array_equal(copy.load(4), one.source.load(4))


def test_a_remote_folder_is_listed_and_read(tmp_path):
    """A URL folder (fsspec's memory://) is listed once and read through the store."""
    import io

    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    for name, frequency in (("high", 880), ("low", 220)):
        for i in range(2):
            data = io.BytesIO()
            sf.write(data, sine(frequency, 200 + 50 * i), RATE, format="WAV")
            fs.pipe(f"/audio-{tmp_path.name}/{name}/{i}.wav", data.getvalue())
    gen = AudioFolderGenerator(f"memory://audio-{tmp_path.name}", batch_size=4,
                               shuffle=False)
    x, y = gen[0]
    assert x.shape == (4, 250, 1) and y.tolist() == [0, 0, 1, 1]
    np.testing.assert_allclose(x[2, :200], sine(220, 200), atol=1e-4)
    fs.rm(f"/audio-{tmp_path.name}", recursive=True)


def test_validation_split_is_seeded_stratified_and_disjoint(folder):
    train, val = AudioFolderGenerator.split(folder, validation_split=0.4, seed=7)
    assert len(train.file_paths) == 6 and len(val.file_paths) == 4
    assert not set(train.file_paths) & set(val.file_paths)
    assert sorted(np.bincount(val.labels).tolist()) == [2, 2]
    again = AudioFolderGenerator(folder, validation_split=0.4, subset="validation", seed=7)
    assert again.file_paths == val.file_paths
    t, v = audio_dataset_from_directory(folder, validation_split=0.4, subset="both", seed=7,
                                        verbose=False)
    assert t.file_paths == train.file_paths and v.file_paths == val.file_paths
    assert sum(len(x) for x, _ in v) == 4


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(sampling_rate=0), ValueError, r"`sampling_rate` must be higher than 0"),
    (dict(sampling_rate="8k"), ValueError, r"`sampling_rate` must be an integer"),
    (dict(output_sequence_length=-3), ValueError, r"`output_sequence_length` must be"),
    (dict(label_mode="multi_label"), ValueError, r"`label_mode` must be one of"),
    (dict(labels="folders"), ValueError, r"`labels` must be 'inferred'"),
    (dict(labels=[0] * 3), ValueError, r"one label per audio file. Received: 3 labels"),
    (dict(subset="both", validation_split=0.2, seed=1), ValueError,
     r"AudioFolderGenerator.split"),
    (dict(validation_split=0.2, subset="training"), ValueError, r"`seed` must be given"),
    (dict(class_names=["high", "mid"]), ValueError, r"not found: \['mid'\]"),
    (dict(bach_size=2), TypeError, r"bach_size"),
])
def test_generator_errors(folder, kwargs, error, match):
    with pytest.raises(error, match=match):
        AudioFolderGenerator(folder, **kwargs)


def test_missing_folder_and_empty_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"`directory` must be an existing folder"):
        AudioFolderGenerator(tmp_path / "nowhere")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("")
    with pytest.raises(ValueError, match=r"No audio files found in .*\.wav, \.flac"), \
            pytest.warns(UserWarning, match="holds no audio files"):
        AudioFolderGenerator(tmp_path)


def test_a_corrupt_file_is_an_error_naming_it(folder):
    bad = folder / "low" / "9.wav"
    bad.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk" + bytes(40))
    gen = AudioFolderGenerator(folder, batch_size=11, shuffle=False)
    with pytest.raises(ValueError, match=r"Cannot decode audio file .*9\.wav"):
        gen[0]
    with pytest.raises(ValueError, match=r"Cannot decode audio file .*9\.wav"):
        gen.source.load(10)
    with pytest.raises(ValueError, match=r"Cannot decode audio file .*9\.wav: .*No 'data'"):
        audio_dataset_from_directory(folder, batch_size=11, shuffle=False, verbose=False)
    dataset = audio_dataset_from_directory(folder, batch_size=5, shuffle=False,
                                           verbose=False)  # the bad file in batch 2
    with pytest.raises(Exception, match=r"Cannot decode audio file .*9\.wav"):
        list(dataset)


def test_channels_differing_in_one_batch_are_an_error_naming_both(tmp_path):
    write(str(tmp_path / "a" / "0.wav"), sine(440, 100))
    write(str(tmp_path / "a" / "1.wav"), sine(440, 100, channels=2))
    gen = AudioFolderGenerator(tmp_path, batch_size=2, shuffle=False)
    with pytest.raises(ValueError, match=r"one number of channels. Received: 1 for audio "
                                         r"file .*0\.wav and 2 for audio file .*1\.wav"):
        gen[0]


def test_augment_must_return_frames_by_channels(folder):
    gen = AudioFolderGenerator(folder, batch_size=2, augment=lambda w, rng: w[:, 0], seed=0)
    with pytest.raises(TypeError, match=r"`augment` must return the waveform as an array "
                                        r"\(frames, channels\).*shape \(\d+,\)"):
        gen[0]


def test_missing_soundfile_is_an_import_error_with_the_pip_command(folder):
    with mock.patch.dict("sys.modules", {"soundfile": None}):
        with pytest.raises(ImportError, match=r'pip install "kerasgen3\[audio\]"'):
            AudioFolderGenerator(folder)


# ------------------------------------------------------------------ training
def _two_tones(tmp_path, per_class=12):
    rng = np.random.default_rng(0)
    for name, frequency in (("high", 1600), ("low", 200)):
        for i in range(per_class):
            wave = sine(frequency, int(rng.integers(300, 500)),
                        amplitude=float(rng.uniform(0.3, 0.9)),
                        phase=float(rng.uniform(0, 6.28)))
            write(str(tmp_path / name / f"{i}.wav"), wave)
    return tmp_path


def _classifier():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((None, 1)),
        keras.layers.Conv1D(8, 9, activation="relu"),
        keras.layers.MaxPooling1D(4),
        keras.layers.Conv1D(8, 5, activation="relu"),
        keras.layers.GlobalMaxPooling1D(),
        keras.layers.Dense(2, activation="softmax"),
    ])
    model.compile(keras.optimizers.Adam(0.02), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model


@pytest.mark.filterwarnings("ignore:`shuffle=True` was passed:UserWarning")  # Keras's, tf.data
@pytest.mark.parametrize("format", ["kerasgen", "tf"])
def test_a_classifier_learns_two_tones_through_fit(tmp_path, format):
    directory = _two_tones(tmp_path)
    if format == "tf":
        pytest.importorskip("tensorflow")
    # JAX compiles a train step per batch shape: one length there (files of 300..500
    # frames padded per batch make a dozen shapes); TensorFlow trains on them as they are
    length = None if keras.backend.backend() == "tensorflow" and format == "tf" else 480
    data = audio_dataset_from_directory(directory, batch_size=8, seed=1, format=format,
                                        output_sequence_length=length, verbose=False)
    model = _classifier()
    model.fit(data, epochs=12, verbose=0)
    accuracy = model.evaluate(data, verbose=0)[1]
    assert accuracy >= 0.9, accuracy
    gen = data if format == "kerasgen" else data.generator
    assert gen.epoch >= 12


WITHOUT_TENSORFLOW = NO_TENSORFLOW + """
    import keras
    import numpy as np
    import soundfile as sf
    from kerasgen.audio import AudioFolderGenerator, audio_dataset_from_directory

    root = sys.argv[1] if len(sys.argv) > 1 else FOLDER
    for name, f in (("high", 1600), ("low", 200)):
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for i in range(6):
            t = np.arange(300 + 20 * i) / 8000
            sf.write(os.path.join(root, name, f"{i}.wav"),
                     (0.5 * np.sin(2 * np.pi * f * t)).astype("float32"), 8000)
    gen = audio_dataset_from_directory(root, batch_size=4, seed=0, format="kerasgen",
                                       sampling_rate=16000, verbose=False)
    model = keras.Sequential([keras.Input((None, 1)), keras.layers.Conv1D(4, 9),
                              keras.layers.GlobalMaxPooling1D(), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(gen, epochs=2, verbose=0)
    errors = {}
    try:
        audio_dataset_from_directory(root, verbose=False)
    except ImportError as error:
        errors["tf"] = str(error)
    print(json.dumps({"backend": keras.backend.backend(), "shape": list(gen[0][0].shape),
                      "epochs": len(history.history["loss"]), "errors": errors,
                      "tensorflow": "tensorflow" in sys.modules}))
"""


@pytest.mark.skipif(not jax_installed(), reason="needs JAX: pip install 'jax[cpu]'")
def test_jax_without_tensorflow(tmp_path):
    """The generator (format="kerasgen") trains on JAX with `import tensorflow` failing;
    the tf.data form then says what to install."""
    script = WITHOUT_TENSORFLOW.replace("FOLDER", repr(str(tmp_path)))
    stdout, _ = run_python(script, "jax")
    result = json.loads(stdout.splitlines()[-1])
    assert result["backend"] == "jax" and result["epochs"] == 2
    assert result["shape"][0] == 4 and result["shape"][2] == 1
    assert result["tensorflow"] is False
    assert "pip install" in result["errors"]["tf"]


def test_extensions_are_keras_and_soundfiles():
    assert _audio.AUDIO.extensions[0] == ".wav"
    assert {".flac", ".ogg", ".mp3"} <= set(_audio.AUDIO.extensions)


def test_signature_and_defaults_are_keras():
    import inspect

    keras_params = inspect.signature(keras.utils.audio_dataset_from_directory).parameters
    ours = list(inspect.signature(audio_dataset_from_directory).parameters.items())
    assert [(n, p.default) for n, p in keras_params.items()] == [
        (n, p.default) for n, p in ours[:len(keras_params)]]
    assert [n for n, _ in ours[len(keras_params):]] == ["format", "options"]
