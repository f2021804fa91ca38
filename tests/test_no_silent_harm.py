"""No silent harm (issue 30): what a hostile tester found kerasgen doing without a word.
A cache or checkpoint pointed at a file of the user's own is refused, never overwritten;
the words of the options are options, not file names; a label that is most likely missing
is refused or warned of; a split that leaves a class out of a subset says so."""

import json
import os
import warnings

import numpy as np
import pytest

import kerasgen as kg

from .conftest import write_image


@pytest.mark.parametrize("victim", ["list.csv", "model.keras", "image"])
def test_a_cache_pointed_at_a_users_file_refuses_to_overwrite_it(image_folder, tmp_path,
                                                                  victim):
    if victim == "image":  # one of the dataset's own images
        path = sorted(image_folder.rglob("*.png"))[0]
    else:
        path = tmp_path / victim
        path.write_bytes(b"filename,label\na.png,cat\n" if victim.endswith(".csv")
                         else b"PK\x03\x04 a zipped model")
    before = path.read_bytes()
    with pytest.raises(ValueError, match=rf"`cache` must be a new path or a kerasgen cache "
                                         rf"file. Received: cache='{path}'. It is an existing "
                                         r"file that is not a kerasgen cache"):
        kg.ImageFolderGenerator(image_folder, image_size=8, cache=str(path))
    assert path.read_bytes() == before


def test_a_kerasgen_cache_of_other_data_is_still_rebuilt(image_folder, tmp_path):
    path = str(tmp_path / "cache.bin")
    kg.ImageFolderGenerator(image_folder, image_size=8, cache=path)[0]
    with pytest.warns(UserWarning, match="was made for other files or settings; rebuilding"):
        kg.ImageFolderGenerator(image_folder, image_size=6, cache=path)[0]
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")  # nothing to lose: used, without a word
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kg.ImageFolderGenerator(image_folder, image_size=8, cache=str(empty))[0]
    assert empty.stat().st_size > 0


@pytest.mark.parametrize("word,kind", [("none", None), ("None", None), (" NONE ", None),
                                       ("Memory", "MemoryCache"), ("memory ", "MemoryCache"),
                                       ("AUTO", "MemoryCache")])
def test_the_options_words_in_any_case_are_options_not_file_names(image_folder, tmp_path,
                                                                  monkeypatch, word, kind):
    monkeypatch.chdir(tmp_path)
    gen = kg.ImageFolderGenerator(image_folder, image_size=8, cache=word)
    assert type(gen.loader.cache).__name__ == kind if kind else gen.loader.cache is None
    gen[0]
    assert os.listdir(tmp_path) == ["images"]  # no file named after the word


def test_an_empty_cache_path_is_refused(image_folder):
    with pytest.raises(ValueError, match=r"`cache` must be 'auto', None, 'memory' or a file "
                                         r"path. Received: cache=''"):
        kg.ImageFolderGenerator(image_folder, image_size=8, cache="")


def small_gen():
    return kg.ArrayGenerator(np.zeros((8, 2), "float32"), np.arange(8) % 2, batch_size=4,
                             seed=0)


def test_a_checkpoint_pointed_at_a_users_file_is_refused_before_training(tmp_path):
    model_file = tmp_path / "model.keras"
    model_file.write_bytes(b"PK\x03\x04 a zipped model")
    with pytest.raises(ValueError, match=rf"`path` must be a new path or a checkpoint "
                                         rf"GeneratorCheckpoint wrote. Received: "
                                         rf"path='{model_file}', an existing file that is not a "
                                         r"generator state .*which writing the state would "
                                         r"overwrite"):
        kg.callbacks.GeneratorCheckpoint(model_file)
    assert model_file.read_bytes() == b"PK\x03\x04 a zipped model"
    config = tmp_path / "config.json"  # JSON, but not a state
    config.write_text('{"learning_rate": 0.1}')
    with pytest.raises(ValueError, match=r"an existing file that is not a generator state"):
        kg.callbacks.GeneratorCheckpoint(config)
    assert config.read_text() == '{"learning_rate": 0.1}'
    state = tmp_path / "state.json"  # a checkpoint of an earlier run: taken
    state.write_text(json.dumps(small_gen().get_state()))
    assert kg.callbacks.GeneratorCheckpoint(state).restore(small_gen())["epoch"] == 0


@pytest.mark.parametrize("path,error,match", [
    ("", ValueError, r"`path` must be a file path. Received: path=''"),
    (None, TypeError, r"`path` must be a file path. Received: path=None"),
    ("folder", ValueError, r"`path` must be a file name, not a folder"),
])
def test_a_checkpoint_path_that_cannot_be_written_is_refused_when_made(tmp_path, path, error,
                                                                     match):
    (tmp_path / "folder").mkdir()
    if path == "folder":
        path = str(tmp_path / "folder")
    with pytest.raises(error, match=match):
        kg.callbacks.GeneratorCheckpoint(path)


def test_a_checkpoint_of_anything_but_a_generator_is_refused_when_made(tmp_path):
    with pytest.raises(TypeError, match=r"`generator` must be a kerasgen generator"):
        kg.callbacks.GeneratorCheckpoint(tmp_path / "s.json", generator=object())


def test_a_checkpoint_nested_too_deeply_names_the_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ValueError, match=rf"The checkpoint {path} is not a kerasgen "
                                         r"generator state: it is JSON nested too deeply"):
        kg.callbacks.restore(small_gen(), path)


def test_pandas_missing_labels_are_missing_not_a_class(tmp_path):
    pd = pytest.importorskip("pandas")
    for i in range(3):
        write_image(str(tmp_path / f"{i}.png"))
    frame = pd.DataFrame({"filename": ["0.png", "1.png", "2.png"],
                          "label": pd.array([0, pd.NA, 1], dtype="Int64")})
    with pytest.raises(ValueError, match=r"Labels must not be missing or NaN. Received: "
                                         r"None at .*1\.png \(row 1 of the DataFrame\)"):
        kg.CSVGenerator(frame, directory=tmp_path, image_size=8)


def test_a_label_that_reads_as_missing_elsewhere_is_warned_of(tmp_path):
    for i in range(3):
        write_image(str(tmp_path / f"{i}.png"))
    table = tmp_path / "t.csv"
    table.write_text("filename,label\n0.png,cat\n1.png,NaN\n2.png,dog\n")
    with pytest.warns(UserWarning, match=r"1 label read as a missing value elsewhere "
                                         r"\(pandas reads 'NaN' as NaN\): 'NaN' at .*1\.png "
                                         r"\(line 3 of .*t\.csv\)\. kerasgen keeps it as a "
                                         r"class"):
        gen = kg.CSVGenerator(table, directory=tmp_path, image_size=8)
    assert gen.class_names == ["NaN", "cat", "dog"]  # kept, as said
    table.write_text("filename,label\n0.png,cat\n1.png,none\n2.png,na\n")  # pandas: text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kg.CSVGenerator(table, directory=tmp_path, image_size=8)


def test_a_split_that_leaves_a_class_out_of_a_subset_says_so(tmp_path):
    for i in range(5):
        write_image(str(tmp_path / "d" / "common" / f"{i}.png"))
    write_image(str(tmp_path / "d" / "rare" / "0.png"))
    common = dict(image_size=8, validation_split=0.6, seed=1)
    with pytest.warns(UserWarning, match=r"The training subset of validation_split=0.6 has "
                                         r"no sample of 1 class: 'rare' \(1 sample\)\. The "
                                         r"model will never train on it"):
        train = kg.ImageFolderGenerator(tmp_path / "d", subset="training", **common)
    assert 1 not in set(train.labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the validation subset has both classes
        val = kg.ImageFolderGenerator(tmp_path / "d", subset="validation", **common)
    assert set(val.labels) == {0, 1}
