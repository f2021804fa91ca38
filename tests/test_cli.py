"""The `kerasgen` command as people type it: the real console script's output for
`--version`, `--help` (every option with its default) and `--image-size` in the forms
people write; preview titles that say what the picture shows."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

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
    for shown in ("(default: (224, 224))", "(default: 32)", "(default: auto)",
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
