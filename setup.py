"""kerasgen3: keras.utils.PyDataset generators for Keras 3 (import name: kerasgen).

The distribution is named kerasgen3 because "kerasgen" on the package registry is an
unrelated, unmaintained Keras 2 project.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

# One version source: kerasgen/__init__.py (read, not imported: that needs the dependencies)
VERSION = re.search(r'^__version__ = "([^"]+)"', Path(__file__).with_name("kerasgen").joinpath(
    "__init__.py").read_text(encoding="utf-8"), re.M).group(1)

TENSORFLOW = ["tensorflow-cpu>=2.16"]
EXTRAS = {
    "tensorflow": TENSORFLOW,
    "pandas": ["pandas>=1.5"],
    "augment": ["albumentations>=2.0,<2.1"],
    "imbalance": ["scikit-learn>=1.3"],
    "gpu": ["numba>=0.59"],
    "viz": ["matplotlib>=3.7"],
    "progress": ["tqdm>=4.60"],
    "tfrecord": TENSORFLOW + ["google-crc32c>=1.5"],  # TFRecordGenerator checks CRC32Cs
    # ArrayRecordGenerator (grain's format); its records are tf.train.Example
    "arrayrecord": TENSORFLOW + ["array-record>=0.5"],
    "grain": ["grain>=0.2"],  # image_dataset_from_directory(format="grain")
    # kg.audio_dataset_from_directory and kg.AudioFolderGenerator decode through soundfile
    # (libsndfile; its wheels bundle the library); sampling_rate resamples with scipy
    "audio": ["soundfile>=0.12", "scipy>=1.8"],
    # kg.TableGenerator: Arrow tables, Arrow IPC/Feather files, Parquet row groups
    "tables": ["pyarrow>=14"],
    # URLs as paths (docs/remote.md): fsspec, with S3, Google Cloud Storage and HTTP(S)
    "remote": ["fsspec>=2023.6", "s3fs>=2023.6", "gcsfs>=2023.6", "aiohttp>=3.8",
               "obstore>=0.6"],
    # decoder="nvimgcodec": the plain wheel decodes on the CPU too (CI); on a GPU add
    # nvidia-nvjpeg-cu12 (or install nvidia-nvimgcodec-cu12[all])
    "nvimgcodec": ["nvidia-nvimgcodec-cu12>=0.9; platform_system == 'Linux'"],
    # engine=kg.RayEngine(...): batches made by the actors of a Ray cluster, and a
    # ray.data.Dataset as a TableGenerator's table (docs/distributed.md)
    "ray": ["ray[data]>=2.40"],
    # the documentation site (`make docs`: mkdocs.yml), its API reference from docstrings
    "docs": ["mkdocs>=1.6,<2", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"],
}
EXTRAS["demo"] = TENSORFLOW + ["scikit-learn>=1.3"]
EXTRAS["test"] = sorted(set(
    EXTRAS["demo"] + EXTRAS["pandas"] + EXTRAS["augment"] + EXTRAS["viz"]
    + EXTRAS["progress"] + EXTRAS["gpu"] + EXTRAS["imbalance"] + EXTRAS["tfrecord"]
    # the peers the tests compare with, and tools the tests use
    + EXTRAS["grain"] + EXTRAS["nvimgcodec"] + EXTRAS["remote"]
    + EXTRAS["arrayrecord"] + EXTRAS["audio"] + EXTRAS["tables"]
    + EXTRAS["ray"]  # a 2-node Ray cluster started by the tests (tests/raycluster.py)
    # a real S3 endpoint (moto's server mode) started by the tests themselves
    + ["moto[server]>=5", "webdataset>=0.2"]  # and webdataset, to compare shards with
    + ["datasets>=2.14"]  # Hugging Face datasets, a table kerasgen reads (tests/test_tables.py)
    + ["imbalanced-learn>=0.12", "pytest>=7", "pytest-timeout>=2",
       "pytest-xdist>=3.5",  # make test runs the suite in two processes or more
       "pillow>=9", "ruff>=0.5", "mypy>=1.8"]
    # Keras's own test file (shipped in its wheel) runs on absl; keras.io's examples run
    # as notebook code (IPython), and notebooks are tested in a real kernel
    + ["absl-py>=1", "ipython>=8", "ipykernel>=6", "nbclient>=0.9"]
    + ["jax[cpu]>=0.4.36"]  # `make test-jax`: the JAX backend (docs/backends.md)
    # the site is built by a test (tests/test_site.py), the notebooks run in a kernel
    + EXTRAS["docs"] + ["nbformat>=5"]
    # the sdist and wheel, checked (tests/test_package.py builds them with this venv's
    # setuptools: Python 3.12's venvs have none of their own)
    + ["build>=1", "twine>=5", "setuptools>=61", "wheel"]))
# every feature a user can install; not the tools of `test` and `docs` (nor `demo`'s
# scikit-learn beyond `imbalance`'s)
EXTRAS["all"] = sorted({req for name, reqs in EXTRAS.items()
                        if name not in ("test", "docs", "demo") for req in reqs})

setup(
    name="kerasgen3",
    version=VERSION,
    description="Fast, reproducible keras.utils.PyDataset generators for Keras 3: arrays, "
                "image folders, CSV lists, custom datasets.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    packages=find_packages(include=["kerasgen", "kerasgen.*"]),
    # the package at the project's root: an editable install (`make install`) puts the
    # root on sys.path (a .pth file) rather than a finder that warns about the folder
    package_dir={"": "."},
    package_data={"kerasgen": ["py.typed"]},  # PEP 561: the package ships its type hints
    # what is tested (Keras 3.15, NumPy 2.4, JAX 0.10) needs 3.11; CI runs 3.11 and 3.13
    python_requires=">=3.11",
    classifiers=[
        "Development Status :: 4 - Beta",
        "Intended Audience :: Developers",
        "Intended Audience :: Science/Research",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Topic :: Software Development :: Libraries :: Python Modules",
        "Typing :: Typed",
    ],
    keywords=["keras", "pydataset", "data loader", "data augmentation", "class imbalance",
              "tensorflow", "jax"],
    install_requires=["keras>=3.3", "numpy>=1.23", "opencv-python-headless>=4.8",
                      "pillow>=9",  # Pillow reads image headers (max_pixels)
                      "simplejpeg>=1.8",  # JPEGs decoded with libjpeg's warnings raised
                      "cloudpickle>=2"],  # worker processes: notebook classes, lambdas
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["kerasgen=kerasgen.cli:main"]},
)
