# ruff: noqa: E402
# keras.io example, ported to run offline with kerasgen's text_dataset_from_directory.
#
# Source: keras-team/keras-io, examples/nlp/text_classification_from_scratch.py,
#   the Keras 3 version ("Text classification from scratch", authors Mark Omernick,
#   Francois Chollet, "Last modified: 2026/02/02", commit 01ae2db4 in the code index),
#   https://keras.io/examples/nlp/text_classification_from_scratch/
#
# Differences from the original (everything else is the original code, in order):
#   1. This prelude (down to "end of prelude"): KERAS_IO_LOADER picks the loader; sizes
#      as constants; makes the aclImdb/ folder in a temporary working directory instead
#      of downloading and extracting aclImdb_v1.tar.gz: generated English-like reviews
#      (with the `<br />` tags and punctuation the example's standardization removes,
#      and a few non-ASCII words), REVIEWS_PER_FOLDER (80) files named
#      <id>_<rating>.txt in each of train/pos, train/neg, test/pos and test/neg
#      (instead of 12,500), 20 in train/unsup (instead of 50,000), and the archive's
#      other files (imdb.vocab, imdbEr.txt, README, train/ and test/ labeledBow.feat,
#      urls_*.txt, train/unsupBow.feat), which both loaders must skip.
#   2. `dataset_zip = keras.utils.get_file("aclImdb_v1.tar.gz", dataset_url,
#      extract=True,)` (the download) -> `dataset_zip = IMDB_ARCHIVE`, a path in the
#      working directory, so that the original's next line,
#      `dataset_dir = os.path.join(os.path.dirname(dataset_zip), "aclImdb")`, is the
#      prelude's aclImdb/ (the folder the example's shell cells work on).
#   3. The shell cells `ls aclImdb`, `ls aclImdb/test`, `ls aclImdb/train` and
#      `cat aclImdb/train/pos/6248_7.txt` are dropped; `rm -r aclImdb/train/unsup` is
#      kept as `shutil.rmtree("aclImdb/train/unsup")`.
#   4. The swapped lines (all three calls): `keras.utils.text_dataset_from_directory(`
#      -> `kg.text_dataset_from_directory(`, where `kg` is `kerasgen` (default) or
#      `keras.utils` (KERAS_IO_LOADER=keras, i.e. the original call).
#   5. No size changes beyond the data: the model constants (max_features,
#      embedding_dim, sequence_length), batch_size and `epochs = 3` are the original's.
#   6. The prose docstrings between the cells (with the option-1 snippet in one of
#      them) are left out; each section heading is kept as a comment.
#   The original's first lines, `import os` and `os.environ["KERAS_BACKEND"] =
#   "tensorflow"`, are kept, but run after the prelude has imported keras, so the backend
#   is the environment's (KERAS_BACKEND, TensorFlow when unset). The example needs the
#   TensorFlow backend (tests/test_keras_io_examples.py's TENSORFLOW_ONLY): with
#   KERAS_BACKEND=jax, `raw_train_ds.map(vectorize_text)` fails inside TextVectorization
#   ("Cannot convert a symbolic tf.Tensor (ExpandDims:0) to a numpy array"), with
#   Keras's loader as with kerasgen's; its end-to-end model also takes tf.string input.

# ---- prelude (not in the original) ----------------------------------------------------
import atexit
import os
import shutil
import tempfile

import keras
import numpy as np

KERAS_IO_LOADER = os.environ.get("KERAS_IO_LOADER", "kerasgen")
if KERAS_IO_LOADER == "kerasgen":
    import kerasgen as kg
elif KERAS_IO_LOADER == "keras":
    kg = keras.utils  # the original: keras.utils.text_dataset_from_directory
else:
    raise SystemExit(f"KERAS_IO_LOADER is 'kerasgen' or 'keras', not {KERAS_IO_LOADER!r}")
print(f"text_dataset_from_directory from {kg.__name__}")

REVIEWS_PER_FOLDER = 80  # train/pos, train/neg, test/pos, test/neg: 12,500 each
UNSUP_REVIEWS = 20  # train/unsup: 50,000

WORKDIR = tempfile.mkdtemp(prefix="keras_io_text_classification_from_scratch_")
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)
os.chdir(WORKDIR)
IMDB_ARCHIVE = os.path.join(WORKDIR, "aclImdb_v1.tar.gz")  # not made: aclImdb/ is
_rng = np.random.default_rng(0)
_WORDS = {
    "pos": "wonderful brilliant moving superb charming delightful masterpiece loved "
           "gripping beautiful funny touching great excellent memorable".split(),
    "neg": "boring awful dull terrible wooden predictable waste worst clumsy "
           "tedious bad pointless annoying forgettable mess".split(),
    "any": "the a movie film plot acting director story scene characters and but it "
           "was is this of to in with cast music ending camera script actor actress "
           "café naïve Amélie two hours really quite very".split(),
}


def _review(kind):
    sentences = []
    for _ in range(int(_rng.integers(3, 12))):
        pool = _WORDS["any"] * 2 + (_WORDS[kind] if kind != "unsup" else [])
        words = [pool[int(i)] for i in _rng.integers(0, len(pool), int(_rng.integers(5, 25)))]
        sentences.append(" ".join(words).capitalize() + str(_rng.choice([".", "!", "?", "..."])))
    return "<br /><br />".join(" ".join(sentences[i:i + 3])
                               for i in range(0, len(sentences), 3))


_review_id = 0
for _split in ("train", "test"):
    for _kind, _ratings in (("pos", (7, 8, 9, 10)), ("neg", (1, 2, 3, 4)),
                            ("unsup", (0,))):
        if _kind == "unsup" and _split == "test":
            continue
        os.makedirs(os.path.join("aclImdb", _split, _kind))
        _count = UNSUP_REVIEWS if _kind == "unsup" else REVIEWS_PER_FOLDER
        for _ in range(_count):
            _name = f"{_review_id}_{int(_rng.choice(_ratings))}.txt"
            with open(os.path.join("aclImdb", _split, _kind, _name), "w",
                      encoding="utf-8") as _f:
                _f.write(_review("pos" if _kind == "pos" else
                                 "neg" if _kind == "neg" else "unsup"))
            _review_id += 1
        if _kind != "unsup":
            with open(os.path.join("aclImdb", _split, f"urls_{_kind}.txt"), "w") as _f:
                _f.write("http://www.imdb.com/title/tt0000000/usercomments\n" * _count)
    with open(os.path.join("aclImdb", _split, "labeledBow.feat"), "w") as _f:
        _f.write("9 0:9 1:1 2:4\n1 0:7 3:2\n")
with open(os.path.join("aclImdb", "train", "unsupBow.feat"), "w") as _f:
    _f.write("0 0:8 1:6\n")
with open(os.path.join("aclImdb", "train", "urls_unsup.txt"), "w") as _f:
    _f.write("http://www.imdb.com/title/tt0000000/usercomments\n" * UNSUP_REVIEWS)
for _name, _text in (("imdb.vocab", "\n".join(sorted(set(sum(_WORDS.values(), []))))),
                     ("imdbEr.txt", "0.0490972013402\n0.201363575849\n"),
                     ("README", "Large Movie Review Dataset v1.0 (generated stand-in)\n")):
    with open(os.path.join("aclImdb", _name), "w", encoding="utf-8") as _f:
        _f.write(_text)
# ---- end of prelude -------------------------------------------------------------------

# ## Setup

import os

os.environ["KERAS_BACKEND"] = "tensorflow"

import keras
import tensorflow as tf
import numpy as np
from keras import layers

# ## Load the data: IMDB movie review sentiment classification

dataset_url = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
dataset_zip = IMDB_ARCHIVE
# The dataset is extracted into the same folder as the zip
dataset_dir = os.path.join(os.path.dirname(dataset_zip), "aclImdb")

# (shell cells `ls aclImdb`, `ls aclImdb/test`, `ls aclImdb/train`,
# `cat aclImdb/train/pos/6248_7.txt` dropped)

shutil.rmtree("aclImdb/train/unsup")  # the shell cell `rm -r aclImdb/train/unsup`

batch_size = 32
train_dir = os.path.join(dataset_dir, "train")
test_dir = os.path.join(dataset_dir, "test")

raw_train_ds = kg.text_dataset_from_directory(
    train_dir,
    batch_size=batch_size,
    validation_split=0.2,
    subset="training",
    seed=1337,
    class_names=["pos", "neg"],
)
raw_val_ds = kg.text_dataset_from_directory(
    train_dir,
    batch_size=batch_size,
    validation_split=0.2,
    subset="validation",
    seed=1337,
    class_names=["pos", "neg"],
)
raw_test_ds = kg.text_dataset_from_directory(test_dir, batch_size=batch_size)

print(f"Number of batches in raw_train_ds: {raw_train_ds.cardinality()}")
print(f"Number of batches in raw_val_ds: {raw_val_ds.cardinality()}")
print(f"Number of batches in raw_test_ds: {raw_test_ds.cardinality()}")

# It's important to take a look at your raw data to ensure your normalization
# and tokenization will work as expected. We can do that by taking a few
# examples from the training set and looking at them.
# This is one of the places where eager execution shines:
# we can just evaluate these tensors using .numpy()
# instead of needing to evaluate them in a Session/Graph context.
for text_batch, label_batch in raw_train_ds.take(1):
    for i in range(5):
        print(text_batch.numpy()[i])
        print(label_batch.numpy()[i])

# ## Prepare the data

import string
import re


# Having looked at our data above, we see that the raw text contains HTML break
# tags of the form '<br />'. These tags will not be removed by the default
# standardizer (which doesn't strip HTML). Because of this, we will need to
# create a custom standardization function.
def custom_standardization(input_data):
    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
    return tf.strings.regex_replace(
        stripped_html, f"[{re.escape(string.punctuation)}]", ""
    )


# Model constants.
max_features = 20000
embedding_dim = 128
sequence_length = 500

# Now that we have our custom standardization, we can instantiate our text
# vectorization layer. We are using this layer to normalize, split, and map
# strings to integers, so we set our 'output_mode' to 'int'.
# Note that we're using the default split function,
# and the custom standardization defined above.
# We also set an explicit maximum sequence length, since the CNNs later in our
# model won't support ragged sequences.
vectorize_layer = keras.layers.TextVectorization(
    standardize=custom_standardization,
    max_tokens=max_features,
    output_mode="int",
    output_sequence_length=sequence_length,
)

# Now that the vectorize_layer has been created, call `adapt` on a text-only
# dataset to create the vocabulary. You don't have to batch, but for very large
# datasets this means you're not keeping spare copies of the dataset in memory.

# Let's make a text-only dataset (no labels):
text_ds = raw_train_ds.map(lambda x, y: x)
# Let's call `adapt`:
vectorize_layer.adapt(text_ds)

# ## Two options to vectorize the data


def vectorize_text(text, label):
    text = tf.expand_dims(text, -1)
    return vectorize_layer(text), label


# Vectorize the data.
train_ds = raw_train_ds.map(vectorize_text)
val_ds = raw_val_ds.map(vectorize_text)
test_ds = raw_test_ds.map(vectorize_text)

# Do async prefetching / buffering of the data for best performance on GPU.
train_ds = train_ds.cache().prefetch(buffer_size=10)
val_ds = val_ds.cache().prefetch(buffer_size=10)
test_ds = test_ds.cache().prefetch(buffer_size=10)

# ## Build a model

# A integer input for vocab indices.
inputs = keras.Input(shape=(None,), dtype="int64")

# Next, we add a layer to map those vocab indices into a space of dimensionality
# 'embedding_dim'.
x = layers.Embedding(max_features, embedding_dim)(inputs)
x = layers.Dropout(0.5)(x)

# Conv1D + global max pooling
x = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(x)
x = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(x)
x = layers.GlobalMaxPooling1D()(x)

# We add a vanilla hidden layer:
x = layers.Dense(128, activation="relu")(x)
x = layers.Dropout(0.5)(x)

# We project onto a single unit output layer, and squash it with a sigmoid:
predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)

model = keras.Model(inputs, predictions)

# Compile the model with binary crossentropy loss and an adam optimizer.
model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])

# ## Train the model

epochs = 3

# Fit the model using the train and test datasets.
model.fit(train_ds, validation_data=val_ds, epochs=epochs)

# ## Evaluate the model on the test set

model.evaluate(test_ds)

# ## Make an end-to-end model

# A string input
inputs = keras.Input(shape=(1,), dtype="string")
# Turn strings into vocab indices
indices = vectorize_layer(inputs)
# Turn vocab indices into predictions
outputs = model(indices)

# Our end to end model
end_to_end_model = keras.Model(inputs, outputs)
end_to_end_model.compile(
    loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"]
)

# Test it with `raw_test_ds`, which yields raw strings
end_to_end_model.evaluate(raw_test_ds)
