"""The `kerasgen` command as people type it: the real console script's output for
`--version`, `--help` (every option with its default) and `--image-size` in the forms
people write; preview titles that say what the picture shows."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

import kerasgen as kg
from kerasgen import cli


def kerasgen_command():
    """The installed console script beside this Python (`pip install -e .` makes it)."""
    script = Path(sys.executable).with_name("kerasgen")
    found = script if script.exists() else shutil.which("kerasgen")
    assert found, "the kerasgen console script is not installed (pip install -e .)"
    return [str(found)]


def run(*args):
    return subprocess.run(kerasgen_command() + [str(a) for a in args], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})


def test_version_and_help_with_every_default():
    version = run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"kerasgen {kg.__version__}"
    bench = run("bench", "--help").stdout
    for shown in ("(default: 224x224)", "(default: 32)", "(default: auto)",
                  "(default: float32)", "(default: 2)", "(default: 89478485)"):
        assert shown in " ".join(bench.split()), (shown, bench)
    assert "(default: preview.png)" in " ".join(run("preview", "--help").stdout.split())


@pytest.mark.parametrize("text,size", [("224", (224, 224)), ("224x224", (224, 224)),
                                       ("64,96", (64, 96)), ("64X96", (64, 96)),
                                       (" 32 , 48 ", (32, 48))])
def test_image_size_in_the_forms_people_type(text, size):
    assert cli._image_size(text) == size


def test_a_bad_image_size_names_the_forms(image_folder):
    result = run("preview", image_folder, "--image-size", "64q")
    assert result.returncode == 2
    assert "must be a size such as 224, 224x224 or 224,224 (height, width), not '64q'" in (
        result.stderr)


def test_preview_titles_say_what_the_picture_shows(image_folder, tmp_path, monkeypatch):
    from kerasgen import viz

    titles = []
    monkeypatch.setattr(viz, "draw_batch", lambda *a, title="", **k: titles.append(title))
    for extra in ([], ["--augment"]):
        assert cli.main(["preview", str(image_folder), "--out", str(tmp_path / "p.png"),
                         "-n", "4", "--image-size", "16x24"] + extra) == 0
    assert "no augmentation" in titles[0] and "augmented" in titles[1]
    assert titles[0] != titles[1]


def test_preview_of_a_flat_folder_shows_its_images_unlabeled(tmp_path, capsys):
    folder = tmp_path / "flat"
    folder.mkdir()
    for i in range(3):
        assert cv2.imwrite(str(folder / f"{i}.png"), np.full((20, 20, 3), 40 * i, np.uint8))
    out = tmp_path / "p.png"
    assert cli.main(["preview", str(folder), "--out", str(out), "--image-size", "16"]) == 0
    printed = capsys.readouterr().out
    assert printed == (f"wrote {out}: 3 samples of 3 (no class subfolders: shown without "
                       "labels)\n")
    assert cv2.imread(str(out)) is not None


@pytest.mark.parametrize("name,refusal", [
    ("folder", r"`--out` must be a file name, not a folder"),
    ("noext", r"`--out` must be a file name ending in one of .*\.png.* Add the extension, "
              r"e\.g\. '.*noext\.png'"),
    ("out.xyz", r"`--out` must be a file name ending in one of"),
    ("missing/p.png", r"`--out` must be a path in an existing folder.*No such folder"),
    ("fifo.png", r"`--out` must be a regular file or a new name"),
])
def test_preview_writes_where_named_or_refuses(image_folder, tmp_path, capsys, name, refusal):
    import re

    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo.png")
    for neighbour in ("folder.png", "noext.png", "out.xyz.png"):  # never overwritten
        (tmp_path / neighbour).write_bytes(b"keep me")
    before = sorted(os.listdir(tmp_path))
    assert cli.main(["preview", str(image_folder), "--out", str(tmp_path / name),
                     "-n", "2", "--image-size", "8"]) == 2
    err = capsys.readouterr().err
    assert re.search(refusal, err) and err.count("\n") == 1, err  # one line, no traceback
    assert sorted(os.listdir(tmp_path)) == before and not os.listdir(tmp_path / "folder")
    for neighbour in ("folder.png", "noext.png", "out.xyz.png"):
        assert (tmp_path / neighbour).read_bytes() == b"keep me"


@pytest.mark.parametrize("ext,magic", [(".png", b"\x89PNG"), (".pdf", b"%PDF"),
                                       (".jpg", b"\xff\xd8")])
def test_preview_writes_exactly_the_path_named_in_its_format(image_folder, tmp_path, capsys,
                                                             ext, magic):
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / f"grid{ext}"
    assert cli.main(["preview", str(image_folder), "--out", str(out), "-n", "2",
                     "--image-size", "8"]) == 0
    assert out.read_bytes().startswith(magic)
    assert os.listdir(out.parent) == [out.name]  # nothing beside it, no temporary file
    assert capsys.readouterr().out.startswith(f"wrote {out}: 2 samples")


@pytest.mark.parametrize("n", ["0", "-1", "two"])
def test_preview_needs_a_positive_number_of_samples(image_folder, n):
    result = run("preview", image_folder, "-n", n)
    assert result.returncode == 2
    assert f"argument -n: must be a positive integer, not '{n}'" in result.stderr
    assert "Traceback" not in result.stderr and "NaN" not in result.stderr


def test_show_batch_refuses_a_path_it_would_not_write_exactly(image_folder, tmp_path):
    from kerasgen import viz

    gen = kg.ImageFolderGenerator(image_folder, image_size=8, batch_size=4)
    with pytest.raises(ValueError, match=r"`path` must be a file name, not a folder"):
        viz.show_batch(gen, path=tmp_path)
    with pytest.raises(ValueError, match=r"`n` must be a positive integer. Received: n=0"):
        viz.show_batch(gen, n=0, path=tmp_path / "p.png")
    assert viz.plot_class_distribution(gen, tmp_path / "c.svg") == str(tmp_path / "c.svg")
    assert (tmp_path / "c.svg").read_bytes().lstrip().startswith(b"<?xml")


# --- what a person reads: kerasgen's output only, one message per failure, exit codes

TENSORFLOW_NOISE = ("oneDNN", "absl", "cpu_feature_guard", "Memory patch", "I0000",
                    "TensorFlow binary", "Traceback")


def run_as_installed(*args, **env):
    """The console script with the environment a user has: TF_CPP_MIN_LOG_LEVEL unset
    (the test suite's conftest sets it), unless given in `env`."""
    base = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run(kerasgen_command() + [str(a) for a in args], capture_output=True,
                          text=True, timeout=120, env={**base, **env})


def assert_quiet(result):
    for noise in TENSORFLOW_NOISE:
        assert noise not in result.stdout + result.stderr, (noise, result.stderr[-3000:])


@pytest.fixture
def bad_folder(image_folder):
    (image_folder / "dog" / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    return image_folder


def test_bench_says_what_it_does_first_and_ends_with_advice(image_folder):
    result = run_as_installed("bench", image_folder, "--image-size", 8, "--batch-size", 4,
                              "--epochs", 2, "--cache", "memory")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_quiet(result)
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"kerasgen bench: 2 epochs of {image_folder} through Keras's "
                               "predict loop (8x8, batch 4, workers 1, cache memory, float32)")
    assert lines[1].startswith(f"{image_folder}: 12 images, 3 batches per epoch")
    assert lines[2].startswith("  epoch 0:") and "decode" in lines[2]
    assert lines[3].startswith("  epoch 1:") and "from the cache" in lines[3]
    assert "decode " not in lines[3]  # a cached epoch is not called decoding
    assert lines[4].startswith("advice: epochs after the first read decoded images from the "
                               "cache") and lines[4].endswith(".")
    assert len(lines) == 5


@pytest.mark.slow  # the command with worker processes, each importing TensorFlow: ~13 s
def test_bench_with_worker_processes_is_as_quiet(image_folder):
    """Each worker process imports TensorFlow when it rebuilds the generator: its
    start-up lines are dropped there too (kerasgen._quiet)."""
    result = run_as_installed("bench", image_folder, "--image-size", 8, "--batch-size", 4,
                              "--epochs", 1, "--workers", 2, "--processes")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_quiet(result)
    assert "measured in the worker processes" in result.stdout


def test_bench_of_a_corrupt_folder_ends_in_one_message(bad_folder):
    result = run_as_installed("bench", bad_folder, "--image-size", 8, "--epochs", 1)
    assert result.returncode == 2
    assert_quiet(result)
    assert result.stdout.startswith("kerasgen bench: 1 epoch of ")
    message = result.stderr.strip().splitlines()
    assert len(message) == 1, result.stderr
    assert message[0].startswith("kerasgen bench: Cannot decode image file ")
    assert "broken.jpg" in message[0] and "`kerasgen inspect`" in message[0]


def test_the_first_line_comes_before_keras_starts(image_folder, monkeypatch, capsys):
    def not_yet():
        raise RuntimeError("Keras would start here")

    monkeypatch.setattr(cli, "tensorflow_quiet", not_yet)
    assert cli.main(["bench", str(image_folder), "--epochs", "1"]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("kerasgen bench: 1 epoch of ") and out.endswith("starting Keras...\n")
    assert err == ("kerasgen bench: RuntimeError: Keras would start here (--debug shows the "
                   "traceback)\n")


def test_debug_shows_the_traceback_and_keeps_the_exit_status():
    for args in (["inspect", "nonexist", "--debug"], ["--debug", "inspect", "nonexist"]):
        result = run_as_installed(*args)
        assert result.returncode == 2 and "Traceback (most recent call last)" in result.stderr
        assert "FileNotFoundError" in result.stderr
        assert result.stderr.rstrip().splitlines()[-1].startswith("kerasgen inspect: ")
    plain = run_as_installed("inspect", "nonexist")
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert "--debug" in " ".join(run_as_installed("bench", "--help").stdout.split())


def test_inspect_exits_1_on_corrupt_or_missing_files(image_folder, bad_folder, tmp_path):
    report = run_as_installed("inspect", bad_folder)
    assert report.returncode == 1
    assert_quiet(report)
    assert "corrupt files: 1" in report.stdout and "broken.jpg" in report.stdout
    assert report.stderr.startswith("kerasgen inspect: found 1 corrupt file (listed above)")
    as_json = run_as_installed("inspect", bad_folder, "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["corrupt"][0]["problem"] == "corrupt"
    (image_folder / "dog" / "broken.jpg").unlink()
    assert run_as_installed("inspect", image_folder).returncode == 0
    listing = tmp_path / "list.csv"
    listing.write_text(f"filename,label\n{image_folder / 'cat' / 'cat_0.png'},cat\n"
                       f"{image_folder / 'cat' / 'gone.png'},cat\n")
    missing = run_as_installed("inspect", listing)
    assert missing.returncode == 1
    assert "corrupt files: 0\nmissing files: 1\n" in missing.stdout
    assert "found 1 missing file" in missing.stderr


def test_inspect_lists_the_classes_the_generator_has(image_folder, capsys):
    (image_folder / "emu").mkdir()
    with pytest.warns(UserWarning, match="holds no images") as generator_warning:
        gen = kg.ImageFolderGenerator(image_folder, image_size=8)
    with pytest.warns(UserWarning, match="holds no images"):
        report = kg.inspect(image_folder, verbose=0)
    assert list(report["classes"]) == gen.class_names == ["cat", "dog", "emu", "fox"]
    assert report["classes"]["emu"] == 0 and report["imbalance_ratio"] is None
    assert str(generator_warning[0].message) in report["warnings"]
    assert cli.main(["inspect", str(image_folder)]) == 0
    out = capsys.readouterr().out
    assert "4 classes, imbalance ratio undefined: 1 class without files" in out
    assert "  emu        0    0.0%  (no files)" in out
    assert f"warning: Class folder {str(image_folder / 'emu')!r} holds no images" in out


def test_inspect_of_a_flat_folder_says_what_the_generator_says(tmp_path):
    from tests.conftest import write_image

    for i in range(3):
        write_image(str(tmp_path / "flat" / f"{i}.png"))
    with pytest.raises(ValueError) as generator_error:
        kg.ImageFolderGenerator(tmp_path / "flat")
    result = run_as_installed("inspect", tmp_path / "flat")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"kerasgen inspect: {generator_error.value}")
    assert "No class subfolders in" in result.stderr and "--label-mode none" in result.stderr
    unlabeled = run_as_installed("inspect", tmp_path / "flat", "--label-mode", "none")
    assert unlabeled.returncode == 0 and unlabeled.stdout.startswith(
        f"{tmp_path / 'flat'}: 3 files\nheight:")
    with pytest.raises(ValueError, match="No class subfolders"):
        kg.inspect(tmp_path / "flat", verbose=0)
    assert kg.inspect(tmp_path / "flat", verbose=0, label_mode=None)["files"] == 3


def test_not_found_says_what_was_expected(tmp_path):
    for command in ("inspect", "bench"):
        result = run_as_installed(command, "nonexist")
        assert result.returncode == 2 and result.stderr == (
            f"kerasgen {command}: `source` must be an existing image folder or CSV file. "
            "Received: source='nonexist' (no such folder or CSV file).\n")
        assert "`csv`" not in result.stderr
    result = run_as_installed("inspect", tmp_path / "labels.csv")
    assert "(no such CSV file)" in result.stderr
    with pytest.raises(FileNotFoundError, match="no such folder or CSV file"):
        kg.inspect(tmp_path / "nothing", verbose=0)


def test_one_is_singular(tmp_path, capsys):
    from tests.conftest import write_image

    write_image(str(tmp_path / "one" / "cat" / "a.png"))
    assert cli.main(["inspect", str(tmp_path / "one")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{tmp_path / 'one'}: 1 file\n1 class, ")
    assert cli.main(["preview", str(tmp_path / "one"), "--out", str(tmp_path / "p.png"),
                     "-n", "1", "--image-size", "8"]) == 0
    assert capsys.readouterr().out.endswith(": 1 sample of 1 in 1 class\n")


@pytest.mark.parametrize("level,kept", [
    (None, ["plain line\n", "E0000 00:00:17.2  1 x.cc:1] an error\n"][:1]),
    ("1", ["W0000 00:00:17.2  1 x.cc:1] a warning\n", "plain line\n",
           "E0000 00:00:17.2  1 x.cc:1] an error\n"]),
    ("0", None)])
def test_tensorflow_lines_are_dropped_by_the_level_in_effect(level, kept):
    """What TensorFlow prints while it starts (caught on file descriptor 2) is dropped
    by TF_CPP_MIN_LOG_LEVEL (3 unless the user set one); other lines pass."""
    lines = ["WARNING: All log messages before absl::InitializeLog() is called are written "
             "to STDERR\n",
             "I0000 00:00:1796162897.157932    8903 port.cc:153] oneDNN custom operations\n",
             "I0000 00:00:1796162897.230665    8903 cpu_feature_guard.cc:227] This binary\n",
             "To enable the following instructions: AVX2 FMA, in other operations, rebuild\n",
             "W0000 00:00:17.2  1 x.cc:1] a warning\n", "plain line\n",
             "E0000 00:00:17.2  1 x.cc:1] an error\n"]
    code = ("import os, sys\nfrom kerasgen import cli\n"
            "with cli.tensorflow_quiet():\n"
            f"    os.write(2, {''.join(lines).encode()!r})\n"
            "    print('from python', file=sys.stderr)\n"
            "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=60)
    assert result.stdout == f"{level or 3}\n"  # a user's level is kept
    expected = lines if kept is None else kept
    assert result.stderr == "".join(expected) + "from python\n"


# --- hostile input: what inspect and the options refuse, as the generators refuse it

def write_listing(path, image_folder, labels, header="filename,label"):
    """A CSV of the folder's cat images, one row per label in `labels`."""
    images = sorted((image_folder / "cat").glob("cat_*"))
    rows = [f"{image},{label}" for image, label in zip(images, labels)]
    path.write_text("\n".join([header] + rows) + "\n")
    return path


@pytest.mark.parametrize("labels,mode", [(["cat", "", "dog"], "int"),
                                         (["cat", "dog", "fox"], "binary")])
def test_inspect_refuses_the_labels_the_generator_refuses(image_folder, tmp_path, labels,
                                                          mode):
    listing = write_listing(tmp_path / "t.csv", image_folder, labels)
    with pytest.raises(ValueError) as refusal:
        kg.CSVGenerator(listing, image_size=8, label_mode=mode)
    report = kg.inspect(listing, verbose=0, label_mode=mode)
    assert report["label_errors"] == [str(refusal.value)]
    assert "" not in (report["classes"] or {})  # no class without a name
    result = run("inspect", listing, "--label-mode", mode)
    assert result.returncode == 1, result.stderr
    assert f"label error: {refusal.value}" in result.stdout
    assert result.stderr == f"kerasgen inspect: {refusal.value}\n"
    fine = run("inspect", write_listing(tmp_path / "ok.csv", image_folder, ["cat", "dog"]))
    assert fine.returncode == 0 and fine.stderr == "" and "label error" not in fine.stdout


def test_inspect_refuses_a_column_the_csv_lacks(image_folder, tmp_path):
    listing = write_listing(tmp_path / "t.csv", image_folder, ["cat", "dog"])
    for column, value in (("y_col", "nope"), ("x_col", "path")):
        with pytest.raises(ValueError) as refusal:
            kg.CSVGenerator(listing, image_size=8, **{column: value})
        assert f"`{column}` must name a column of" in str(refusal.value)
        with pytest.raises(ValueError) as inspected:
            kg.inspect(listing, verbose=0, **{column: value})
        assert str(inspected.value) == str(refusal.value)
        result = run("inspect", listing, f"--{column.replace('_', '-')}", value)
        assert result.returncode == 2 and result.stderr == (
            f"kerasgen inspect: {refusal.value}\n")
    assert kg.inspect(listing, verbose=0, y_col="nope", label_mode=None)["classes"] is None


def tfrecord_bytes():
    """One TFRecord record (a header with a valid CRC, 5 bytes, a footer)."""
    import struct

    from kerasgen.tfrecord import masked_crc

    length = struct.pack("<Q", 5)
    return (length + struct.pack("<I", masked_crc(length)) + b"hello"
            + struct.pack("<I", masked_crc(b"hello")))


@pytest.mark.parametrize("name,kind,reader", [
    ("x.tfrecord", "a TFRecord", "kg.TFRecordGenerator"),
    ("x.tfrec", "a TFRecord", "kg.TFRecordGenerator"),
    ("records.bin", "a TFRecord", "kg.TFRecordGenerator"),  # known by its first header
    ("x.db", "an SQLite", "kg.SQLGenerator")])
def test_inspect_names_the_generator_of_a_tfrecord_or_sqlite_file(tmp_path, name, kind,
                                                                  reader):
    import sqlite3

    path = tmp_path / name
    if kind == "an SQLite":
        with sqlite3.connect(path) as db:
            db.execute("create table t (filename text, label text)")
        db.close()
    else:
        path.write_bytes(tfrecord_bytes() if name.endswith(".bin") else b"\x00" * 3)
    expected = (f"`source` must be an image folder or a CSV file (inspect reads those only). "
                f"Received: source={str(path)!r}, {kind} file: read it with {reader}.")
    with pytest.raises(ValueError) as refusal:
        kg.inspect(path, verbose=0)
    assert str(refusal.value) == expected
    result = run("inspect", path)
    assert result.returncode == 2 and result.stderr == f"kerasgen inspect: {expected}\n"
    assert "encoding" not in result.stderr


@pytest.mark.parametrize("args,message", [
    (["bench", "R", "--epochs", "0"], "argument --epochs: must be a positive integer, not '0'"),
    (["bench", "R", "--batch-size", "0"],
     "argument --batch-size: must be a positive integer, not '0'"),
    (["bench", "R", "--batch-size", "many"],
     "argument --batch-size: must be a positive integer, not 'many'"),
    (["bench", "R", "--workers", "-1"],
     "argument --workers: must be a non-negative integer, not '-1'"),
    (["bench", "R", "--decode-threads", "0"],
     "argument --decode-threads: must be a positive integer, not '0'"),
    (["preview", "R", "--seed", "-1"],
     "argument --seed: must be a non-negative integer, not '-1'"),
])
def test_numeric_options_are_refused_before_anything_starts(args, message, capsys,
                                                            monkeypatch):
    monkeypatch.setattr(cli, "tensorflow_quiet", lambda: pytest.fail("Keras started"))
    with pytest.raises(SystemExit) as exit_status:
        cli.main(args)
    assert exit_status.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines()[-1].endswith(message), err


def test_numeric_options_as_typed_at_the_console(image_folder):
    result = run("preview", image_folder, "--seed", "-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "argument --seed: must be a non-negative integer, not '-1'" in result.stderr
    assert cli.build_parser().parse_args(["bench", "R", "--workers", "0"]).workers == 0


def test_inspect_names_source_when_it_is_not_a_path(image_folder):
    import pandas as pd

    with pytest.raises(TypeError, match=r"^`source` must be a path \(str or os\.PathLike\) "
                       r"of an image folder or CSV file\. Received: source=None\.$"):
        kg.inspect(None)
    frame = pd.DataFrame({"filename": [str(image_folder / "cat" / "cat_0.png")],
                          "label": ["cat"]})
    with pytest.raises(TypeError, match=r"Received: source=a pandas DataFrame\. "
                       r"kg\.CSVGenerator takes DataFrames; kg\.inspect takes a path"):
        kg.inspect(frame)


def test_inspect_of_a_file_list_without_a_label_column_counts_files(tmp_path, capsys):
    """A CSV of file names only, and the default y_col: the files are checked and the
    report says why no class is counted (an error before the fix of the review)."""
    from .conftest import write_image

    for i in range(2):
        write_image(str(tmp_path / f"{i}.png"))
    (tmp_path / "files.csv").write_text("filename\n0.png\n1.png\n")
    with pytest.warns(UserWarning, match="has no column 'label'"):
        report = kg.inspect(tmp_path / "files.csv", directory=tmp_path, verbose=0)
    assert report["files"] == 2 and report["classes"] is None
    assert any("has no column 'label' (the default `y_col`)" in w for w in report["warnings"])
    with pytest.raises(ValueError, match="`y_col` must"):
        kg.inspect(tmp_path / "files.csv", directory=tmp_path, y_col="kind", verbose=0)


def test_inspect_warns_of_ids_that_leave_a_class_empty_without_failing(tmp_path):
    """Class ids 0 and 2 need num_classes=3 in the generator, which inspect cannot be
    told: a warning, not a label error (exit 0)."""
    from .conftest import write_image

    for i in range(3):
        write_image(str(tmp_path / f"{i}.png"))
    (tmp_path / "ids.csv").write_text("filename,label\n0.png,0\n1.png,2\n2.png,2\n")
    with pytest.warns(UserWarning, match="num_classes"):
        report = kg.inspect(tmp_path / "ids.csv", directory=tmp_path, verbose=0)
    assert not report["label_errors"]
    assert any("num_classes" in w for w in report["warnings"])
    assert cli.main(["inspect", str(tmp_path / "ids.csv"), "--directory", str(tmp_path)]) == 0
