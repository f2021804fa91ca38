"""The command line's hints point to what it takes: the flags of `kerasgen bench`, the
option a CSV's missing files need, defaults shown in a form the option accepts."""

import contextlib
import io
import re

import pytest

from kerasgen import cli
from tests.conftest import write_image


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", ["bench", "preview"])
def test_the_image_size_default_shown_in_help_is_a_form_the_option_takes(command):
    parser = cli.build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]  # noqa: SLF001
    text = sub.format_help()
    shown = re.search(r"--image-size IMAGE_SIZE\s+[^-]*?\(default:\s+([^)]*)\)", text,
                      re.S).group(1)
    assert shown in ("224x224", "128x128")
    assert sub.parse_args(["x", "--image-size", shown]).image_size == (
        int(shown.split("x")[0]),) * 2


def test_inspect_names_on_missing_for_a_csv_row_naming_a_missing_file(tmp_path):
    write_image(str(tmp_path / "a.png"))
    (tmp_path / "list.csv").write_text("filename,label\na.png,cat\ngone.png,dog\n")
    status, out, err = _run(["inspect", str(tmp_path / "list.csv")])
    assert status == 1
    assert "on_missing='skip'" in err and "on_error" not in err


def test_inspect_names_on_error_for_a_corrupt_file(tmp_path):
    write_image(str(tmp_path / "a" / "a.png"))
    (tmp_path / "a" / "b.png").write_bytes(b"\x89PNG not really")
    status, out, err = _run(["inspect", str(tmp_path)])
    assert status == 1
    assert "on_error='skip'" in err and "on_missing" not in err


@pytest.mark.filterwarnings("default::kerasgen._redact.KerasgenWarning")  # printed: checked
def test_bench_names_its_own_flags_and_skips_what_it_is_told_to(tmp_path):
    for k in range(3):
        write_image(str(tmp_path / "cat" / f"{k}.png"), seed=k)
    (tmp_path / "cat" / "bad.png").write_bytes(b"\x89PNG not really")
    status, out, err = _run(["bench", str(tmp_path), "--image-size", "8", "--epochs", "1"])
    assert status == 2
    assert "--on-error skip" in err and "on_error=" not in err
    status, out, err = _run(["bench", str(tmp_path), "--image-size", "8", "--epochs", "1",
                             "--on-error", "skip"])
    assert status == 0, err
    assert "kerasgen bench: warning: Skipping an undecodable image" in err
    assert "advice:" in out and "cache='auto'" not in out
    (tmp_path / "list.csv").write_text("filename\ncat/0.png\ncat/gone.png\n")
    status, out, err = _run(["bench", str(tmp_path / "list.csv"), "--image-size", "8",
                             "--epochs", "1"])
    assert status == 2 and "--on-missing skip" in err and "on_missing=" not in err
    status, out, err = _run(["bench", str(tmp_path / "list.csv"), "--image-size", "8",
                             "--epochs", "1", "--on-missing", "skip"])
    assert status == 0, err
    assert "warning: Skipping 1 row" in err and "gone.png" in err


@pytest.mark.parametrize("command", ["inspect", "bench"])
def test_a_row_leaving_directory_names_the_flag_that_reads_it(tmp_path, command):
    inside, outside = tmp_path / "data", tmp_path / "elsewhere"
    write_image(str(inside / "a.png"))
    write_image(str(outside / "b.png"), seed=1)
    (tmp_path / "list.csv").write_text("filename,label\na.png,x\n../elsewhere/b.png,y\n")
    argv = [command, str(tmp_path / "list.csv"), "--directory", str(inside)]
    if command == "bench":
        argv += ["--image-size", "8", "--epochs", "1"]
    status, out, err = _run(argv)
    assert status == 2 and "../elsewhere/b.png" in err
    assert "--allow-outside" in err and "allow_outside=" not in err
    status, out, err = _run(argv + ["--allow-outside"])
    assert status == 0, err
    assert ("2 files" in out) if command == "inspect" else ("2 images" in out)
