"""Secrets never shown: a URL's password or token, and storage options' keys, kept out of
every channel kerasgen writes to (errors with their notes and causes, warnings,
`gen.skipped`, `fit`'s errors, the command line's output), through `kerasgen._redact`.
The storage layer's channels (the remote cache's files, log records, storage_options'
checks) are tested in tests/test_secrets_storage.py."""

import contextlib
import inspect
import io
import os
import shutil
import traceback
import warnings

import pytest

import kerasgen as kg
from kerasgen import _redact
from kerasgen import cli
from tests.conftest import write_image
from tests.servers import HTTPFolderServer

PASSWORD = "hunter2-Pa55word"
TOKEN = "tok-8f3a9c1e77"
SIGNATURE = "sig-5be0d1c2aa"


def _everything(error):
    """All an error shows: its message, notes, causes and contexts, as printed."""
    return "".join(traceback.format_exception(error))


def _no_secret(text):
    for secret in (PASSWORD, TOKEN, SIGNATURE):
        assert secret not in text, f"{secret!r} shown in: {text[:2000]}"


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "site"
    for name in ("cat", "dog"):
        for k in range(3):
            write_image(str(root / "pets" / name / f"{k}.png"), seed=k)
    with HTTPFolderServer(root) as server:
        yield server, root


def _secret_url(server, path):
    return f"http://alice:{PASSWORD}@127.0.0.1:{server.port}/{path}"


# ------------------------------------------------------------------------- the function
@pytest.mark.parametrize("url, expected", [
    ("https://bob:pw-longer@host.example/a/b.png", "https://***@host.example/a/b.png"),
    ("https://host/a.png?X-Amz-Signature=abcdef&X-Amz-Date=2026",
     "https://host/a.png?X-Amz-Signature=***&X-Amz-Date=***"),
    ("s3://bucket/key.png", "s3://bucket/key.png"),
    ("https://host?token=abcdef", "https://host?token=***"),
    ("https://host/a.png?flag", "https://host/a.png?flag"),
    ("https://host/a.png?w=1&id=42", "https://host/a.png?w=1&id=42"),  # two objects stay two
    ("https://host/a.png?t=aB3xY9kLm2Qw7Zr5&w=2", "https://host/a.png?t=***&w=2"),  # token-like
    ("https://acct.blob.core.windows.net/c/a.png?sv=2022-11-02&se=2026&sp=r&sig=abcDEF123",
     "https://acct.blob.core.windows.net/c/a.png?sv=***&se=***&sp=***&sig=***"),  # a SAS
])
def test_redact_url_masks_user_information_and_query_values(url, expected):
    assert _redact.redact_url(url) == expected
    assert _redact.redact(f"Cannot read {url!r}: gone") == f"Cannot read {expected!r}: gone"


def test_known_secrets_are_masked_outside_urls_too():
    _redact.remember(_redact.option_secrets(
        {"key": "AKIA-abcdefgh", "secret": "s3cr3t-value-x", "client_kwargs": {
            "region_name": "eu-west-1"}, "config_kwargs": {"session_token": "sess-1234567"}}))
    text = "botocore said AKIA-abcdefgh / s3cr3t-value-x / sess-1234567 in eu-west-1"
    assert _redact.redact(text) == "botocore said *** / *** / *** in eu-west-1"


def test_known_secrets_are_masked_as_whole_tokens_only_and_modes_are_not_secrets():
    """gcsfs's token="anon" names a way in, not a secret; a remembered secret is masked
    where it stands alone, never inside a longer word of a path."""
    _redact.remember(_redact.option_secrets({"token": "anon", "key": "datas3t",
                                             "secret": "w0rds-and-more"}))
    text = "/anon/datas3ts/anonymous/cat.png; key datas3t, secret=w0rds-and-more."
    assert _redact.redact(text) == "/anon/datas3ts/anonymous/cat.png; key ***, secret=***."


# ------------------------------------------------------------------------- errors
def test_an_error_at_construction_shows_no_password(served):
    server, _ = served
    with pytest.raises(FileNotFoundError) as caught:
        kg.ImageFolderGenerator(_secret_url(server, "nowhere"), image_size=(8, 8))
    text = _everything(caught.value)
    assert f"127.0.0.1:{server.port}/nowhere" in text  # still names the folder
    _no_secret(text)


def test_a_csv_row_naming_a_missing_signed_url_shows_no_signature(served, tmp_path):
    server, _ = served
    base = f"http://127.0.0.1:{server.port}/pets/cat"
    table = tmp_path / "list.csv"
    table.write_text(f"filename,label\n{base}/0.png?X-Amz-Signature={SIGNATURE},cat\n"
                     f"{base}/9.png?X-Amz-Signature={SIGNATURE}&token={TOKEN},cat\n")
    with pytest.raises(FileNotFoundError, match=r"9\.png\?X-Amz-Signature=\*\*\*") as caught:
        kg.CSVGenerator(str(table), image_size=(8, 8))
    _no_secret(_everything(caught.value))
    with pytest.warns(UserWarning, match="does not exist") as warned:  # the warning channel
        gen = kg.CSVGenerator(str(table), image_size=(8, 8), on_missing="skip")
    _no_secret(" ".join(str(w.message) for w in warned))
    assert len(gen.skipped) == 1 and "9.png" in gen.skipped[0]
    _no_secret(repr(gen.skipped))


def test_fit_names_an_object_gone_after_listing_without_its_password(served):
    keras = pytest.importorskip("keras")
    server, root = served
    gen = kg.ImageFolderGenerator(_secret_url(server, "pets"), image_size=(8, 8),
                                  batch_size=6, shuffle=False, cache=None, seed=0)
    os.remove(root / "pets" / "dog" / "1.png")
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(2, activation="softmax")])
    model.compile("sgd", "sparse_categorical_crossentropy")
    with pytest.raises(FileNotFoundError, match="1.png") as caught:
        model.fit(gen, epochs=1, verbose=0)
    _no_secret(_everything(caught.value))
    with pytest.raises(FileNotFoundError) as caught:  # a batch made here and now
        gen.make_batch(0)
    _no_secret(_everything(caught.value))


def test_a_skipped_object_is_reported_without_its_password(served):
    server, root = served
    gen = kg.ImageFolderGenerator(_secret_url(server, "pets"), image_size=(8, 8),
                                  batch_size=6, shuffle=False, cache=None, seed=0,
                                  on_error="skip")
    shutil.copyfile(__file__, root / "pets" / "dog" / "2.png")  # not an image any more
    with pytest.warns(UserWarning, match="Skipping an undecodable image") as warned:
        batch = gen[0]
    assert batch[0].shape == (6, 8, 8, 3)
    _no_secret(" ".join(str(w.message) for w in warned))
    assert len(gen.skipped) == 1 and gen.skipped[0].endswith("pets/dog/2.png")
    _no_secret(repr(gen.skipped))


def test_what_kerasgen_raises_in_a_subclass_constructor_is_redacted():
    class Mine(kg.Generator):
        def __init__(self, url, **kwargs):
            super().__init__(num_samples=3, batch_size=url, **kwargs)

        def load_sample(self, index):
            return index

    with pytest.raises(ValueError, match=r"batch_size='https://\*\*\*@host/x'") as caught:
        Mine(f"https://me:{PASSWORD}@host/x")
    _no_secret(_everything(caught.value))


def test_a_warning_from_a_constructor_names_the_users_line(tmp_path):
    """The redacting wrappers of the constructors are passed over: a warning of
    validation_subset names this file's line, not kerasgen's."""
    for k in range(3):
        write_image(str(tmp_path / f"{k}.png"), seed=k)
    (tmp_path / "list.csv").write_text("filename,label\n0.png,a\n1.png,a\n2.png,b\n")
    for name, k in (("a", 0), ("a", 1), ("b", 2)):
        write_image(str(tmp_path / "folder" / name / f"{k}.png"), seed=k)
    with pytest.warns(UserWarning, match="has no sample of 1 class") as warned:
        line = inspect.currentframe().f_lineno + 1
        kg.CSVGenerator(tmp_path / "list.csv", image_size=(8, 8), validation_split=0.3,
                        subset="validation", seed=1)
    assert [(w.filename, w.lineno) for w in warned] == [(__file__, line)]
    with pytest.warns(UserWarning, match="has no sample of 1 class") as warned:
        line = inspect.currentframe().f_lineno + 1
        kg.ImageFolderGenerator(tmp_path / "folder", image_size=(8, 8), validation_split=0.3,
                                subset="validation", seed=1)
    assert [(w.filename, w.lineno) for w in warned] == [(__file__, line)]


# ------------------------------------------------------------------------- command line
def _run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("extra", [[], ["--json"], ["--debug"]])
def test_kerasgen_inspect_prints_no_token_or_password(served, tmp_path, extra):
    server, _ = served
    table = tmp_path / "list.csv"
    signed = f"?X-Amz-Signature={SIGNATURE}&token={TOKEN}"
    table.write_text("filename,label\n"
                     f"{_secret_url(server, 'pets/cat/0.png')},cat\n"
                     f"http://127.0.0.1:{server.port}/pets/dog/0.png{signed},dog\n"
                     f"http://127.0.0.1:{server.port}/pets/dog/7.png{signed},dog\n")
    status, out, err = _run_cli(["inspect", str(table)] + extra)
    assert status == 1, err  # the missing 7.png
    assert "7.png" in out + err
    _no_secret(out + err)
    if not extra:  # the two URLs that exist were read (with their password and token)
        assert "formats: png 2" in out and "missing files: 1" in out, out
        report = kg.inspect(table, verbose=0)
        assert report["files"] == 3 and report["formats"] == {"png": 2}
        assert [c["problem"] for c in report["corrupt"]] == ["missing"]
        _no_secret(repr(report))


def test_a_failing_command_prints_no_password(served):
    server, _ = served
    for extra in ([], ["--debug"]):
        status, out, err = _run_cli(["preview", _secret_url(server, "nowhere"), "--out",
                                     "x.png"] + extra)
        assert status == 2 and "nowhere" in err
        _no_secret(out + err)


# ------------------------------------------------------------------------- warnings
def test_kerasgen_warns_only_through_redact():
    """Every warning kerasgen gives is redacted: no module calls warnings.warn itself."""
    import kerasgen
    package = os.path.dirname(kerasgen.__file__)
    direct = []
    for folder, _, files in os.walk(package):
        for name in files:
            if name.endswith(".py") and name != "_redact.py":
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    if "warnings.warn(" in f.read():
                        direct.append(os.path.relpath(path, package))
    assert direct == []


def test_redact_warn_masks_and_keeps_the_callers_line():
    def caller():
        _redact.warn(f"see https://u:{PASSWORD}@h/x", stacklevel=2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # the next line, calling caller()
        caller()
    assert str(caught[0].message) == "see https://***@h/x"
    assert caught[0].filename == __file__ and caught[0].lineno == line


def test_redacted_errors_keep_their_type_and_attributes():
    error = FileNotFoundError(2, "No such file", f"https://u:{PASSWORD}@h/x")
    try:
        try:
            raise KeyError(f"https://u:{PASSWORD}@h/y")
        except KeyError as inner:
            raise error from inner
    except FileNotFoundError as raised:
        _redact.redact_error(raised)
        assert raised.errno == 2 and raised.filename == "https://***@h/x"
        _no_secret(_everything(raised))


def test_keras_function_names_a_folder_without_its_password(served):
    server, _ = served
    with pytest.raises(FileNotFoundError) as caught:
        kg.image_dataset_from_directory(_secret_url(server, "nowhere"), image_size=(8, 8))
    assert "nowhere" in str(caught.value)
    _no_secret(_everything(caught.value))


def test_a_stream_names_a_shard_without_its_password_or_token(served, tmp_path):
    from tests.test_stream import images, write_tar

    server, root = served
    write_tar(root / "train-0.tar", range(4))
    good = f"http://alice:{PASSWORD}@127.0.0.1:{server.port}/train-0.tar?token={TOKEN}"
    gone = f"http://alice:{PASSWORD}@127.0.0.1:{server.port}/train-9.tar?token={TOKEN}"
    with pytest.raises(FileNotFoundError, match="train-9.tar") as caught:
        kg.StreamGenerator([good, gone], **images())
    _no_secret(_everything(caught.value))
    gen = kg.StreamGenerator([good], **images(batch_size=2))
    assert gen[0][0].shape == (2, 4, 4, 3)  # read with its credentials
    (root / "train-0.tar").write_bytes(b"not a tar at all" * 64)  # broken after listing
    broken = kg.StreamGenerator([good], **images(batch_size=2))
    with pytest.raises((ValueError, OSError)) as caught:
        broken[0]
    assert "train-0.tar" in str(caught.value)
    _no_secret(_everything(caught.value))
