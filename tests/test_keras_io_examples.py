"""keras.io's own examples run with only the loader changed to kerasgen's.

Each script in tests/keras_io/ is a keras-io example kept verbatim except for a prelude
that makes its data locally (nothing is downloaded), smaller sizes and the swapped
line(s), `kg.<function>(` for the Keras dataset utility the example calls (the header of
each script lists every difference). KERAS_IO_LOADER=keras runs the same script with
Keras's own function, the check that the port itself is faithful; here they run with
kerasgen's.
"""

import os
import pathlib
import subprocess
import sys

import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parent / "keras_io"
# Examples that need the TensorFlow backend, with the reason (as tests/conftest.py's
# TENSORFLOW_ONLY). The others only need TensorFlow installed (tf.data) and run on any.
TENSORFLOW_ONLY = {
    "dcgan_overriding_train_step.py": "its train_step uses tf.GradientTape",
    "text_classification_from_scratch.py": (
        "it sets KERAS_BACKEND=tensorflow itself; on JAX its TextVectorization fails "
        "inside tf.data's .map (with Keras's loader too), and its end-to-end model "
        "takes tf.string input"),
}
# The Keras function each example's swapped line calls; each script prints
# "<function> from kerasgen" (or "from keras...") first, naming the loader it runs.
LOADER_FUNCTION = {
    "text_classification_from_scratch.py": "text_dataset_from_directory",
    "timeseries_weather_forecasting.py": "timeseries_dataset_from_array",
}
DEFAULT_LOADER_FUNCTION = "image_dataset_from_directory"
TIMEOUT_S = 240
TAIL_CHARS = 6000


def run_script(path, cwd):
    env = dict(os.environ, KERAS_IO_LOADER="kerasgen", TF_CPP_MIN_LOG_LEVEL="2",
               MPLBACKEND="Agg", TMPDIR=str(cwd))
    env["KERAS_BACKEND"] = os.environ.get("KERAS_BACKEND", "tensorflow")
    try:
        result = subprocess.run([sys.executable, str(path)], cwd=cwd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as error:
        output = error.output or ""
        if isinstance(output, bytes):
            output = output.decode(errors="replace")
        pytest.fail(f"{path.name} ran past {TIMEOUT_S} s\n--- last output\n"
                    f"{output[-TAIL_CHARS:]}")
    return result.returncode, result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in SCRIPTS.glob("*.py")))
def test_keras_io_example_runs_with_kerasgen(name, tmp_path):
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    if name in TENSORFLOW_ONLY and backend != "tensorflow":
        pytest.skip(f"needs the TensorFlow backend: {TENSORFLOW_ONLY[name]}")
    returncode, output = run_script(SCRIPTS / name, tmp_path)
    assert returncode == 0, (
        f"{name} exited with {returncode}\n--- last output\n{output[-TAIL_CHARS:]}")
    function = LOADER_FUNCTION.get(name, DEFAULT_LOADER_FUNCTION)
    assert f"{function} from kerasgen" in output, output[-TAIL_CHARS:]
