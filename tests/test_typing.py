"""The public API is typed (PEP 484) and says so (PEP 561's py.typed).

Every public function, class constructor, method and property of the public modules
(those tests/test_dropin.py lists, less the command line) annotates its parameters and its
return, and the hints resolve to real names: the names a type checker sees, including
those a module imports only under `typing.TYPE_CHECKING`. A type checker run on code
written as a user writes it finds no error, and finds the errors the hints exist for.
"""

import ast
import importlib
import inspect
import os
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest

import kerasgen as kg

PACKAGE = Path(kg.__file__).parent
ROOT = PACKAGE.parent

# The public modules (tests/test_dropin.py: PUBLIC_MODULES), less `cli`: the command line,
# whose API is its arguments. `arrays.malloc` defines kg.tune_malloc and kg.leave_malloc.
MODULES = ("arrayrecord", "audio", "augment", "base", "callbacks", "generators", "gpu",
           "image_dataset", "inspection", "loader", "rebalance", "samplers", "sources", "sql",
           "stream", "table", "text", "tfrecord", "timeseries", "viz", "webdataset")
# Methods checked besides the public names: what a user calls through an operator.
DUNDERS = ("__init__", "__call__", "__len__", "__getitem__")
# base.py's hints come with the rewrite of Generator (branch i15-base): remove this
# once that branch is merged.
NOT_YET: dict[str, str] = {}  # public classes whose hints are still to come, with why


def _type_checking_names(module):
    """The names `module` imports under `if TYPE_CHECKING:`, imported: what a type checker
    resolves its hints with."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    names = dict(vars(module))
    for node in tree.body:
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test):
            code = compile(ast.Module(body=node.body, type_ignores=[]), module.__file__,
                           "exec")
            exec(code, names)  # the module's own import statements
    return names


def _missing(function, module, bound):
    """The parameters of `function` without an annotation (and "return" when its return
    has none), after resolving every hint; a hint that does not resolve raises."""
    signature = inspect.signature(function)
    params = list(signature.parameters.values())[1 if bound else 0:]
    missing = [p.name for p in params if p.annotation is inspect.Parameter.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    namespace = _type_checking_names(module)
    for each in [function, *typing.get_overloads(function)]:
        typing.get_type_hints(each, globalns=namespace)
    return missing


def _functions_of(cls):
    """(name, function, bound) of what `cls` itself defines: public methods, properties
    (their getter and setter), static and class methods, and DUNDERS (less what Python
    puts there: a Protocol's `__init__`)."""
    for name, value in vars(cls).items():
        if getattr(value, "__module__", cls.__module__) != cls.__module__:
            continue
        if name.startswith("_") and name not in DUNDERS:
            continue
        if isinstance(value, property):
            yield from ((f"{name}.{part}", f, True)
                        for part, f in (("fget", value.fget), ("fset", value.fset)) if f)
        elif isinstance(value, staticmethod):
            yield name, value.__func__, False
        elif isinstance(value, classmethod):
            yield name, value.__func__, True
        elif inspect.isfunction(value):
            yield name, value, True


def _public_modules():
    """The public modules, and where a public package (`kg.sources`, `kg.samplers`) is a
    face over modules of its own, the modules that define its classes."""
    modules = [importlib.import_module(f"kerasgen.{m}") for m in MODULES]
    homes = {getattr(module, name).__module__ for module in modules
             if hasattr(module, "__path__") for name in getattr(module, "__all__", [])
             if inspect.isclass(getattr(module, name))}
    return modules + [importlib.import_module(home) for home in sorted(homes)]


def _public_classes():
    """Every class a public module or kg.__all__ defines, and every kerasgen class they
    inherit from (where their inherited methods live: `_ImageFileGenerator`, ...)."""
    found = [getattr(kg, name) for name in kg.__all__ if inspect.isclass(getattr(kg, name))]
    for module in _public_modules():
        found += [v for k, v in vars(module).items() if inspect.isclass(v)
                  and v.__module__ == module.__name__ and not k.startswith("_")]
    owners = {}
    for cls in found:
        for base in cls.__mro__:
            if base.__module__.split(".")[0] == "kerasgen":
                owners[f"{base.__module__}.{base.__qualname__}"] = base
    return owners


def _xfail_not_yet(name):
    if name in NOT_YET:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=NOT_YET[name]))
    return name


CLASSES = _public_classes()


@pytest.mark.parametrize("name", [_xfail_not_yet(n) for n in sorted(CLASSES)])
def test_every_public_method_of_a_public_class_is_annotated(name):
    cls = CLASSES[name]
    module = sys.modules[cls.__module__]
    missing = {f"{cls.__qualname__}.{method}": gaps
               for method, function, bound in _functions_of(cls)
               if (gaps := _missing(function, module, bound))}
    assert not missing, f"parameters or returns without a type hint: {missing}"


@pytest.mark.parametrize("module_name", ["kerasgen", "kerasgen.arrays.malloc"]
                         + [f"kerasgen.{m}" for m in MODULES])
def test_every_public_function_is_annotated(module_name):
    module = importlib.import_module(module_name)
    functions = {k: v for k, v in vars(module).items()
                 if inspect.isfunction(v) and v.__module__ == module_name
                 and (not k.startswith("_") or module_name == "kerasgen")}
    if module_name == "kerasgen.arrays.malloc":  # public through kg.tune_malloc / leave_malloc
        functions = {k: functions[k] for k in ("tune_malloc", "leave_malloc")}
    missing = {k: gaps for k, f in functions.items() if (gaps := _missing(f, module, False))}
    assert not missing, f"parameters or returns without a type hint: {missing}"


def test_every_name_of_all_is_checked_here():
    """A name added to kg.__all__ from a module these tests do not read fails here."""
    for name in kg.__all__:
        value = getattr(kg, name)
        where = value.__name__ if inspect.ismodule(value) else value.__module__
        assert inspect.ismodule(value) or inspect.isclass(value) or inspect.isfunction(
            value), name
        assert (where == "kerasgen.arrays.malloc" or where.split(".")[-1] in MODULES
                or f"{where}.{name}" in CLASSES), name  # a class: annotations checked above


def test_a_hint_that_does_not_resolve_is_found():
    """The check above fails for a missing hint and for a name that does not exist."""
    namespace = {}
    exec("def f(a: int, b, *args, **kwargs) -> None: ...\n"
         "def g(a: 'NoSuchName') -> int: ...", namespace)
    module = type(sys)("fake")
    module.__file__ = __file__
    assert _missing(namespace["f"], module, False) == ["b"]
    if sys.version_info >= (3, 10):
        with pytest.raises(NameError, match="NoSuchName"):
            _missing(namespace["g"], module, False)


def test_string_options_are_exactly_the_values_the_code_accepts():
    from kerasgen import _typing, image_dataset, samplers, tfrecord
    from kerasgen.loading import images as _images
    from kerasgen.labels import encoding as _labels
    from kerasgen.arrays import batching as _batching

    rebalance = importlib.import_module("kerasgen.rebalance")  # kg.rebalance: the function

    def values(hint):
        """The values of a Literal, of a Union of Literals and None, in order."""
        if hint is type(None):
            return (None,)
        if typing.get_origin(hint) is typing.Literal:
            return typing.get_args(hint)
        return tuple(v for arg in typing.get_args(hint) for v in values(arg))

    assert values(_typing.ColorMode) == tuple(_images.COLOR_MODES)
    assert values(_typing.Interpolation) == tuple(_images.INTERPOLATIONS)
    assert values(_typing.LabelMode) + (None,) == _labels.LABEL_MODES
    assert values(_typing.DType) + (None,) == _batching.DTYPES
    assert values(tfrecord.FeatureKind) == tfrecord.KINDS
    assert values(rebalance.Method) == tuple(rebalance.METHODS)
    assert set(values(_typing.StrategyName)) == (set(samplers.OVER_STRATEGIES)
                                                 | set(samplers.UNDER_STRATEGIES))
    hints = typing.get_type_hints(image_dataset.image_dataset_from_directory)
    assert values(hints["label_mode"]) == image_dataset.LABEL_MODES
    assert values(_typing.DatasetFormat) == image_dataset.FORMATS
    from kerasgen import loader

    assert values(_typing.Decoder) == loader.DECODERS
    from kerasgen import timeseries

    hints = typing.get_type_hints(timeseries.TimeseriesGenerator.__init__)
    assert values(hints["label_mode"]) == timeseries.LABEL_MODES
    hints = typing.get_type_hints(timeseries.timeseries_dataset_from_array)
    assert values(hints["format"]) == timeseries.FORMATS
    from kerasgen import text

    hints = typing.get_type_hints(text.text_dataset_from_directory)
    assert values(hints["label_mode"]) == text.LABEL_MODES
    assert values(hints["format"]) == text.FORMATS
    from kerasgen import table

    hints = typing.get_type_hints(table.TableGenerator.__init__)
    assert values(hints["label_mode"]) == table.LABEL_MODES
    from kerasgen import audio

    hints = typing.get_type_hints(audio.AudioFolderGenerator.__init__)
    assert values(hints["label_mode"]) == audio.LABEL_MODES
    hints = typing.get_type_hints(audio.audio_dataset_from_directory)
    assert values(hints["label_mode"]) == audio.KERAS_LABEL_MODES
    assert values(hints["format"]) == audio.FORMATS


def test_py_typed_is_in_the_package_and_in_setup_package_data():
    assert (PACKAGE / "py.typed").is_file()
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    setup = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and getattr(node.func, "id", None) == "setup")
    options = {k.arg: k.value for k in setup.keywords}
    assert "py.typed" in ast.literal_eval(options["package_data"])["kerasgen"]


# ----------------------------------------------------------------- a type checker
USER_CODE = '''
import numpy as np

import kerasgen as kg
from kerasgen import samplers

x = np.zeros((20, 4), "float32")
y = np.array([0] * 15 + [1] * 5)

gen = kg.ArrayGenerator(x, y, batch_size=4, seed=0, label_mode="int",
                        sampler=samplers.SMOTE(k_neighbors=3))
features = kg.ArrayGenerator({"a": x, "b": x}, {"out": y}, sample_weight=np.ones(20))
folder = kg.ImageFolderGenerator("images", image_size=(32, 32), color_mode="grayscale",
                                 interpolation="area", cache=None, on_error="skip")
train, val = kg.ImageFolderGenerator.split("images", validation_split=0.2, seed=1)
paths: list[str] = train.file_paths + val.file_paths
csv = kg.CSVGenerator("list.csv", x_col="path", y_col=["a", "b"], label_mode="multi_label",
                      cache="cache.bin", directory=None)
ds = kg.image_dataset_from_directory("images", label_mode="categorical")
pair_train, pair_val = kg.image_dataset_from_directory(
    "images", validation_split=0.2, subset="both", seed=3, format="kerasgen")
skipped: list[str] = pair_train.skipped
tf_pair = kg.image_dataset_from_directory("images", validation_split=0.2, subset="both",
                                          seed=3, batch_size=None, cache=None)
images_sql = kg.SQLGenerator("db.sqlite", "SELECT * FROM t")
features_sql = kg.SQLGenerator("db.sqlite", "SELECT * FROM t", x_col=["a", "b"])
records = kg.TFRecordGenerator(["a.tfrecord"], {"image": "image", "label": "label"})

x_res, y_res = kg.rebalance(x, y, method="undersample", sampling_strategy={0: 5})
x_list, y_list = kg.rebalance(x.tolist(), y.tolist(), sampling_strategy=0.5, seed=None)
weights: dict[int, float] = kg.class_weights(y)
counts: dict[int, int] = samplers.class_counts(y)
plan = samplers.BalancedBatchSampler(num_batches=3).plan(y, seed=0, epoch=1, batch_size=4)
sampler: samplers.Sampler = samplers.RandomOverSampler(sampling_strategy="minority")
x_over, y_over = samplers.SMOTE().fit_resample(x, y)
report = kg.inspect("images", verbose=0)
print(kg.inspection.format_report(report))
applied: bool = kg.tune_malloc(1 << 20)
kg.leave_malloc()
released: bool = kg.gpu.release_gpu_memory()
free = kg.gpu.memory_info(0)
callbacks = [kg.callbacks.GeneratorCheckpoint("state.json", every_n_batches=10),
             kg.callbacks.PipelineStats(gen)]
state = kg.callbacks.restore(gen, "state.json")
kg.viz.show_batch(gen, n=4, path="preview.png")
doubled: float = kg.gpu.run_isolated(lambda a: a * 2.0, 3.0)
'''

# Each line must be an error, or reveal the type given.
USER_MISTAKES = '''
import numpy as np

import kerasgen as kg

kg.ImageFolderGenerator("images", color_mode="cmyk")  # E: 'cmyk'
kg.ArrayGenerator(np.zeros(3), label_mode="one_hot")  # E: 'one_hot'
kg.CSVGenerator("list.csv", interpolation="cubic")  # E: 'cubic'
kg.rebalance(np.zeros(3), np.zeros(3), method="smote-nc")  # E: No overload variant of "rebalance"
name: str = kg.class_weights([0, 1])  # E: dict[int, float]
one = kg.image_dataset_from_directory("images", format="kerasgen")
reveal_type(one)  # R: ImageFolderGenerator
both = kg.image_dataset_from_directory("images", validation_split=0.2, subset="both", seed=1,
                                       format="kerasgen")
reveal_type(both)  # R: tuple[kerasgen.generators.ImageFolderGenerator, kerasgen.generators
reveal_type(kg.SQLGenerator("db", "SELECT 1", ["a"]))  # R: SQLFeatureGenerator
reveal_type(kg.SQLGenerator("db", "SELECT 1"))  # R: SQLImageGenerator
reveal_type(kg.gpu.run_isolated(lambda: 3))  # R: int
'''

# Keras, TensorFlow and the optional dependencies ship no hints: their names are Any.
UNTYPED = ("keras", "tensorflow", "cv2", "albumentations", "pandas", "sklearn", "numba",
           "google_crc32c", "matplotlib", "tqdm", "cloudpickle")
MYPY_CONFIG = (f"[mypy]\npython_version = {sys.version_info.major}.{sys.version_info.minor}\n"
               f"[mypy-{','.join(name + '.*' for name in UNTYPED)}]\n"
               "ignore_missing_imports = True\n")


def test_a_type_checker_passes_user_code_and_catches_user_mistakes(tmp_path, request):
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e .[test]")
    (tmp_path / "user_code.py").write_text(USER_CODE)
    (tmp_path / "mistakes.py").write_text(textwrap.dedent(USER_MISTAKES))
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    # pytest's cache keeps mypy's: warm runs take about a second, cold ones about ten
    config_cache = getattr(request.config, "cache", None)  # None with -p no:cacheprovider
    cache = config_cache.mkdir("mypy") if config_cache is not None else tmp_path / "cache"
    # kerasgen found on the path as an installed package: mypy reads it for its py.typed
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir",
         str(cache), "--no-error-summary", "--show-column-numbers", "user_code.py",
         "mistakes.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    lines = result.stdout.splitlines()
    assert not [line for line in lines if line.startswith("user_code.py")], result.stdout
    assert result.stderr == "", result.stderr
    found = {}
    for line in lines:
        number = int(line.split(":")[1])
        found.setdefault(number, []).append(line)
    for number, source in enumerate(textwrap.dedent(USER_MISTAKES).splitlines(), 1):
        if "  # E: " in source:
            expected = source.split("  # E: ")[1]
            assert any(": error: " in f and expected in f for f in found.get(number, [])), (
                source, found.get(number), result.stdout)
        elif "  # R: " in source:
            expected = source.split("  # R: ")[1]
            assert any("Revealed type is" in f and expected in f
                       for f in found.get(number, [])), (source, found.get(number),
                                                          result.stdout)
