"""What a person sees when the tf.data forms fail (issue 30): kerasgen's own exception,
its first line naming the file or the state at fault, not TensorFlow's "Graph execution
error ... PyFunc" with kerasgen's words inside.

The tf.data forms are `gen.to_tf_dataset()` and the dataset `kg.image_dataset_from_directory`
returns; they fail in a `for` loop over them and in `model.fit` / `evaluate`, also over
the dataset mapped and prefetched first, as keras.io's examples do.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasgen as kg

from .conftest import write_image

BATCH = 2  # 12 images: 6 batches an epoch


@pytest.fixture
def folder(tmp_path):
    """Two classes of 6 PNGs each."""
    root = tmp_path / "images"
    for c, name in enumerate(["cat", "dog"]):
        for i in range(6):
            write_image(str(root / name / f"{name}_{i}.png"), seed=10 * c + i)
    return root


def make_dataset(folder, **options):
    """The dataset Keras's function returns, made by kerasgen; no decoded-image cache, so
    every pass reads the files."""
    return kg.image_dataset_from_directory(folder, image_size=(8, 8), batch_size=BATCH,
                                           seed=3, verbose=False, cache=None, **options)


def make_model():
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def mapped(ds):
    """The dataset as keras.io's examples use it: mapped, then prefetched."""
    return ds.map(lambda x, y: (x / 255.0, y),
                  num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def first_line(error):
    return str(error).partition("\n")[0]


def assert_kerasgens_own(error, kind):
    """`error` is the exception kerasgen raised, of type `kind`, TensorFlow's error
    behind it only as its cause or context."""
    assert type(error) is kind, f"{type(error).__name__}: {first_line(error)[:300]}"
    assert not isinstance(error, tf.errors.OpError)
    assert "Graph execution error" not in str(error)
    assert "PyFunc" not in first_line(error)
    assert isinstance(error.__cause__ or error.__context__, tf.errors.OpError)


class DeleteAfterFirstEpoch(keras.callbacks.Callback):
    """Deletes `path` when the first epoch ends; records the epochs that ended."""

    def __init__(self, path):
        super().__init__()
        self.path, self.ended = path, []

    def on_epoch_end(self, epoch, logs=None):
        self.ended.append(epoch)
        if epoch == 0:
            self.path.unlink()


class Crash(Exception):
    pass


class CrashAfterBatch(keras.callbacks.Callback):
    def __init__(self, batch):
        super().__init__()
        self.batch = batch

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.batch:
            raise Crash(f"crashed after batch {batch}")


def checkpoint_taken_mid_epoch(folder, tmp_path):
    """The state GeneratorCheckpoint wrote 3 batches into the first epoch of a `fit` that
    then crashed."""
    path = tmp_path / "generator.json"
    gen = make_dataset(folder, format="kerasgen")
    checkpoint = kg.callbacks.GeneratorCheckpoint(path, every_n_batches=3, generator=gen)
    with pytest.raises(Crash):
        make_model().fit(gen, epochs=2, verbose=0, callbacks=[checkpoint, CrashAfterBatch(2)])
    return path


# ----------------------------------------------------------------- a state taken mid-epoch
def test_a_loop_over_a_dataset_restored_mid_epoch_is_kerasgens_value_error(folder):
    before = make_dataset(folder)
    state = before.generator.get_state(batches_done=2)
    ds = make_dataset(folder)
    ds.generator.set_state(state)
    for attempt in range(2):  # a refused pass changes nothing: the next is refused too
        with pytest.raises(ValueError) as caught:
            for _ in ds:
                pass
        assert_kerasgens_own(caught.value, ValueError)
        line = first_line(caught.value)
        assert "restored mid-epoch (at batch 2 of epoch 0" in line
        assert "model.fit(ds.generator, epochs=1)" in line
        assert "Received: ds.generator.get_state()['batch']=2" in line
        assert ds.generator.get_state() == state, attempt


@pytest.mark.parametrize("form", ["as returned", "mapped"])
def test_fit_on_a_dataset_restored_mid_epoch_raises_what_to_do_and_doing_it_works(
        folder, tmp_path, form):
    path = checkpoint_taken_mid_epoch(folder, tmp_path)
    ds = make_dataset(folder)
    state = kg.callbacks.restore(ds.generator, path)
    assert (state["epoch"], state["batch"]) == (0, 3)
    model = make_model()
    with pytest.raises(ValueError) as caught:
        model.fit(ds if form == "as returned" else mapped(ds), epochs=2, verbose=0)
    assert_kerasgens_own(caught.value, ValueError)
    assert "restored mid-epoch (at batch 3 of epoch 0, 3 batches left in it)" \
        in first_line(caught.value)
    # what the message says to do: finish the epoch on the generator, then fit the dataset
    history = model.fit(ds.generator, epochs=1, verbose=0)
    assert len(history.history["loss"]) == 1 and ds.generator.epoch == 1
    history = model.fit(ds if form == "as returned" else mapped(ds), epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and ds.generator.epoch == 3


def test_to_tf_dataset_resumes_a_state_taken_mid_epoch(folder):
    """The stream of epochs honours a mid-epoch state: the rest of that epoch, then whole
    epochs (no error to raise)."""
    straight = make_dataset(folder, format="kerasgen")
    resumed = make_dataset(folder, format="kerasgen")
    resumed.set_state(straight.get_state(batches_done=2))
    got = [y.numpy() for _, y in resumed.to_tf_dataset(epochs=2)]
    expected = [straight.at_epoch(0)[b][1] for b in range(2, 6)]
    expected += [straight.at_epoch(1)[b][1] for b in range(6)]
    assert len(got) == len(expected) == 10
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------- a file deleted between passes
def test_a_file_deleted_after_the_first_pass_of_a_loop_is_named(folder):
    ds = make_dataset(folder)
    assert isinstance(ds, tf.data.Dataset)
    assert sum(1 for _ in ds) == 6
    victim = folder / "dog" / "dog_4.png"
    victim.unlink()
    with pytest.raises(FileNotFoundError) as caught:
        for _ in ds:
            pass
    assert_kerasgens_own(caught.value, FileNotFoundError)
    assert first_line(caught.value) == f"Image file not found: {victim}"
    notes = "\n".join(caught.value.__notes__)
    assert "kerasgen: while loading batch " in notes and " of epoch 1 of " in notes


@pytest.mark.parametrize("form", ["as returned", "mapped"])
def test_a_file_deleted_between_epochs_of_fit_is_named(folder, form):
    ds = make_dataset(folder)
    victim = folder / "cat" / "cat_1.png"
    deleting = DeleteAfterFirstEpoch(victim)
    with pytest.raises(FileNotFoundError) as caught:
        make_model().fit(ds if form == "as returned" else mapped(ds), epochs=3, verbose=0,
                         callbacks=[deleting])
    assert_kerasgens_own(caught.value, FileNotFoundError)
    assert first_line(caught.value) == f"Image file not found: {victim}"
    assert deleting.ended == [0]  # the failed epoch did not end, as with fit(gen)


def test_evaluate_over_a_dataset_whose_file_was_deleted_names_it(folder):
    ds = make_dataset(folder, shuffle=False)
    model = make_model()
    model.evaluate(ds, verbose=0)
    victim = folder / "dog" / "dog_0.png"
    victim.unlink()
    with pytest.raises(FileNotFoundError) as caught:
        model.evaluate(ds, verbose=0)
    assert_kerasgens_own(caught.value, FileNotFoundError)
    assert first_line(caught.value) == f"Image file not found: {victim}"


@pytest.mark.parametrize("use", ["loop", "fit"])
def test_to_tf_dataset_names_a_file_deleted_between_epochs(folder, use):
    gen = make_dataset(folder, format="kerasgen")
    victim = folder / "cat" / "cat_2.png"
    with pytest.raises(FileNotFoundError) as caught:
        if use == "loop":
            for _ in gen.to_tf_dataset(epochs=1):
                pass
            victim.unlink()
            for _ in gen.to_tf_dataset(epochs=1):  # from the generator's current epoch
                pass
        else:
            # a stream: batches are made ahead across epochs (here 2 at most), so the
            # file is certainly read again in the third epoch
            stream = gen.to_tf_dataset(num_parallel_calls=1, prefetch=1)
            make_model().fit(stream, steps_per_epoch=len(gen), epochs=3, verbose=0,
                             callbacks=[DeleteAfterFirstEpoch(victim)])
    assert_kerasgens_own(caught.value, FileNotFoundError)
    assert first_line(caught.value) == f"Image file not found: {victim}"


# ----------------------------------------------------------------- other errors: TensorFlow's
def test_an_error_of_the_users_own_map_stays_tensorflows(folder):
    """Only what kerasgen's ops raised is swapped: the user's own op failing in fit or in
    a loop is TensorFlow's error, as without kerasgen."""
    ds = make_dataset(folder)
    broken = ds.map(lambda x, y: (tf.debugging.check_numerics(x * np.inf, "users check"), y))
    with pytest.raises(tf.errors.InvalidArgumentError, match="users check"):
        make_model().fit(broken, epochs=1, verbose=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="users check"):
        for _ in broken:
            pass


@pytest.mark.parametrize("level, noted", [("0", True), ("2", False)])
def test_the_error_says_what_tensorflows_runtime_log_above_it_is(folder, monkeypatch,
                                                                   level, noted):
    """TensorFlow's C++ runtime logs an error leaving a tf.data op (at its default log
    level); the error kerasgen raises says so and how to quiet it, where it shows."""
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
    ds = make_dataset(folder, shuffle=False)
    victim = folder / "dog" / "dog_0.png"
    victim.write_bytes(b"\x89PNG broken")
    with pytest.raises(ValueError) as caught:
        make_model().fit(ds, epochs=1, verbose=0)
    assert_kerasgens_own(caught.value, ValueError)
    notes = getattr(caught.value, "__notes__", [])
    assert any("TF_CPP_MIN_LOG_LEVEL=2" in note for note in notes) == noted
