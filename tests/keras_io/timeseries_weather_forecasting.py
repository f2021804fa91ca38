# ruff: noqa: E402, F841
# keras.io example, ported to run offline with kerasgen's timeseries_dataset_from_array.
#
# Source: keras-team/keras-io, examples/timeseries/timeseries_weather_forecasting.py,
#   the Keras 3 version ("Timeseries forecasting for weather prediction", authors
#   Prabhanshu Attri, Yashika Sharma, Kristi Takach, Falak Shah, "Last modified:
#   2026/02/01"), https://keras.io/examples/timeseries/timeseries_weather_forecasting/
#   Read from the code cells of its generated rendering
#   (examples/timeseries/md/timeseries_weather_forecasting.md, same version); the .py
#   commits stored in the code index (0a57de48, e70ae747) are the older tf.keras version
#   ("Last modified: 2020/07/20", with a correlation heatmap cell the Keras 3 version no
#   longer has).
#
# Differences from the original (everything else is the original code, in order):
#   1. This prelude (down to "end of prelude"): Agg backend; KERAS_IO_LOADER picks the
#      loader; sizes as constants; writes jena_climate_2009_2016.csv.zip in a temporary
#      working directory instead of downloading it: the CSV has the Jena climate
#      table's 15 columns ("Date Time" as "01.01.2009 00:10:00", then the 14 features
#      under the names the example reads) and ROWS (6,000) rows at 10-minute steps
#      instead of 420,551: daily and slower sines plus noise, with the physical
#      relations between the columns roughly kept (Tpot from T, vapour pressures from T
#      and rh, rho from p and T, ...).
#   2. `zip_path = keras.utils.get_file(origin=uri, fname="jena_climate_2009_2016.csv.zip")`
#      (the download) -> `zip_path = JENA_ZIP`, the prelude's zip; the rest of that
#      cell (ZipFile, extractall next to the zip, read_csv) is the original's.
#   3. The swapped lines (both calls): `keras.preprocessing.timeseries_dataset_from_array(`
#      -> `kg.timeseries_dataset_from_array(`, where `kg` is `kerasgen` (default) or
#      `keras.preprocessing` (KERAS_IO_LOADER=keras, i.e. the original call; in Keras 3
#      it is the same function as keras.utils.timeseries_dataset_from_array).
#   4. No size changes beyond the data: the original's `past = 720`, `future = 72`,
#      `step = 6`, `batch_size = 256` and `epochs = 1` are kept, so with 6,000 rows
#      training has 3,576 windows (14 batches) and validation 204 (1 batch, so the
#      final `dataset_val.take(5)` loop plots one batch instead of five).
#   5. The prose between the cells is left out; each section heading is kept as a
#      comment.
#   The `plt.show()` calls are the original's; with the Agg backend they do nothing.

# ---- prelude (not in the original) ----------------------------------------------------
import atexit
import os
import shutil
import tempfile
import zipfile

import matplotlib

matplotlib.use("Agg")

import keras
import keras.preprocessing
import numpy as np
import pandas as pd

KERAS_IO_LOADER = os.environ.get("KERAS_IO_LOADER", "kerasgen")
if KERAS_IO_LOADER == "kerasgen":
    import kerasgen as kg
elif KERAS_IO_LOADER == "keras":
    kg = keras.preprocessing  # the original: keras.preprocessing.timeseries_dataset_...
else:
    raise SystemExit(f"KERAS_IO_LOADER is 'kerasgen' or 'keras', not {KERAS_IO_LOADER!r}")
print(f"timeseries_dataset_from_array from {kg.__name__}")

ROWS = 6000  # the real table has 420,551 rows, one every 10 minutes

WORKDIR = tempfile.mkdtemp(prefix="keras_io_timeseries_weather_forecasting_")
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)
os.chdir(WORKDIR)
_rng = np.random.default_rng(0)
_t = np.arange(ROWS)
_day = np.sin(2 * np.pi * (_t / 144 - 0.3))  # 144 steps of 10 minutes a day
_slow = np.sin(2 * np.pi * _t / (144 * 9))  # a weather front every 9 days
_p = 990 + 6 * _slow + 0.3 * _rng.standard_normal(ROWS)
_T = 8 + 5 * _day + 4 * _slow + 0.4 * _rng.standard_normal(ROWS)
_rh = np.clip(75 - 15 * _day + 5 * _slow + 3 * _rng.standard_normal(ROWS), 20, 100)
_vpmax = 6.1078 * np.exp(17.27 * _T / (_T + 237.3))
_vpact = _rh / 100 * _vpmax
_b = np.log(_vpact / 6.1078)
_wv = np.abs(2 + 1.2 * _slow + 0.5 * _rng.standard_normal(ROWS))
_columns = {
    "Date Time": (pd.Timestamp("2009-01-01 00:10:00")
                  + pd.to_timedelta(10 * _t, unit="min")).strftime("%d.%m.%Y %H:%M:%S"),
    "p (mbar)": _p,
    "T (degC)": _T,
    "Tpot (K)": (_T + 273.15) * (1000 / _p) ** 0.286,
    "Tdew (degC)": 237.3 * _b / (17.27 - _b),
    "rh (%)": _rh,
    "VPmax (mbar)": _vpmax,
    "VPact (mbar)": _vpact,
    "VPdef (mbar)": _vpmax - _vpact,
    "sh (g/kg)": 622 * _vpact / _p,
    "H2OC (mmol/mol)": 1000 * _vpact / _p,
    "rho (g/m**3)": 100 * _p / (287.05 * (_T + 273.15)) * 1000,
    "wv (m/s)": _wv,
    "max. wv (m/s)": _wv * 1.6 + np.abs(0.3 * _rng.standard_normal(ROWS)),
    "wd (deg)": (200 + 60 * _slow + 40 * _rng.standard_normal(ROWS)) % 360,
}
JENA_ZIP = os.path.join(WORKDIR, "jena_climate_2009_2016.csv.zip")
with zipfile.ZipFile(JENA_ZIP, "w", zipfile.ZIP_DEFLATED) as _zip:
    _zip.writestr("jena_climate_2009_2016.csv",
                  pd.DataFrame(_columns).round(2).to_csv(index=False))
# ---- end of prelude -------------------------------------------------------------------

# ## Setup

import os
import pandas as pd
import matplotlib.pyplot as plt
import keras

# ## Climate Data Time-Series

from zipfile import ZipFile

uri = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/jena_climate_2009_2016.csv.zip"
zip_path = JENA_ZIP
zip_file = ZipFile(zip_path)

# FIX: Extract to the cache directory, not the current working directory
zip_file.extractall(path=os.path.dirname(zip_path))

# FIX: Construct the absolute path safely (works on Windows/Linux/Mac)
csv_path = os.path.join(os.path.dirname(zip_path), "jena_climate_2009_2016.csv")

df = pd.read_csv(csv_path)

# ## Raw Data Visualization

titles = [
    "Pressure",
    "Temperature",
    "Temperature in Kelvin",
    "Temperature (dew point)",
    "Relative Humidity",
    "Saturation vapor pressure",
    "Vapor pressure",
    "Vapor pressure deficit",
    "Specific humidity",
    "Water vapor concentration",
    "Airtight",
    "Wind speed",
    "Maximum wind speed",
    "Wind direction in degrees",
]

feature_keys = [
    "p (mbar)",
    "T (degC)",
    "Tpot (K)",
    "Tdew (degC)",
    "rh (%)",
    "VPmax (mbar)",
    "VPact (mbar)",
    "VPdef (mbar)",
    "sh (g/kg)",
    "H2OC (mmol/mol)",
    "rho (g/m**3)",
    "wv (m/s)",
    "max. wv (m/s)",
    "wd (deg)",
]

colors = [
    "blue",
    "orange",
    "green",
    "red",
    "purple",
    "brown",
    "pink",
    "gray",
    "olive",
    "cyan",
]

date_time_key = "Date Time"


def show_raw_visualization(data):
    time_data = data[date_time_key]
    fig, axes = plt.subplots(
        nrows=7, ncols=2, figsize=(15, 20), dpi=80, facecolor="w", edgecolor="k"
    )
    for i in range(len(feature_keys)):
        key = feature_keys[i]
        c = colors[i % (len(colors))]
        t_data = data[key]
        t_data.index = time_data
        t_data.head()
        ax = t_data.plot(
            ax=axes[i // 2, i % 2],
            color=c,
            title="{} - {}".format(titles[i], key),
            rot=25,
        )
        ax.legend([titles[i]])
    plt.tight_layout()


show_raw_visualization(df)

# ## Data Preprocessing

split_fraction = 0.715
train_split = int(split_fraction * int(df.shape[0]))
step = 6

past = 720
future = 72
learning_rate = 0.001
batch_size = 256
epochs = 1


def normalize(data, train_split):
    data_mean = data[:train_split].mean(axis=0)
    data_std = data[:train_split].std(axis=0)
    return (data - data_mean) / data_std


print(
    "The selected parameters are:",
    ", ".join([titles[i] for i in [0, 1, 5, 7, 8, 10, 11]]),
)
selected_features = [feature_keys[i] for i in [0, 1, 5, 7, 8, 10, 11]]
features = df[selected_features]
features.index = df[date_time_key]
features.head()

features = normalize(features.values, train_split)
features = pd.DataFrame(features)
features.head()

train_data = features.loc[0 : train_split - 1]
val_data = features.loc[train_split:]

# # Training dataset

start = past + future
end = start + train_split

x_train = train_data[[i for i in range(7)]].values
y_train = features.iloc[start:end][[1]]

sequence_length = int(past / step)

dataset_train = kg.timeseries_dataset_from_array(
    x_train,
    y_train,
    sequence_length=sequence_length,
    sampling_rate=step,
    batch_size=batch_size,
)

# ## Validation dataset

x_end = len(val_data) - past - future

label_start = train_split + past + future

x_val = val_data.iloc[:x_end][[i for i in range(7)]].values
y_val = features.iloc[label_start:][[1]]

dataset_val = kg.timeseries_dataset_from_array(
    x_val,
    y_val,
    sequence_length=sequence_length,
    sampling_rate=step,
    batch_size=batch_size,
)


for batch in dataset_train.take(1):
    inputs, targets = batch

print("Input shape:", inputs.numpy().shape)
print("Target shape:", targets.numpy().shape)

# ## Training

inputs = keras.layers.Input(shape=(inputs.shape[1], inputs.shape[2]))
lstm_out = keras.layers.LSTM(32)(inputs)
outputs = keras.layers.Dense(1)(lstm_out)

model = keras.Model(inputs=inputs, outputs=outputs)
model.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate), loss="mse")
model.summary()

path_checkpoint = "model_checkpoint.weights.h5"
es_callback = keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=0, patience=5)

modelckpt_callback = keras.callbacks.ModelCheckpoint(
    monitor="val_loss",
    filepath=path_checkpoint,
    verbose=1,
    save_weights_only=True,
    save_best_only=True,
)

history = model.fit(
    dataset_train,
    epochs=epochs,
    validation_data=dataset_val,
    callbacks=[es_callback, modelckpt_callback],
)


def visualize_loss(history, title):
    loss = history.history["loss"]
    val_loss = history.history["val_loss"]
    epochs = range(len(loss))
    plt.figure()
    plt.plot(epochs, loss, "b", label="Training loss")
    plt.plot(epochs, val_loss, "r", label="Validation loss")
    plt.title(title)
    plt.xlabel("Epochs")
    plt.ylabel("Loss")
    plt.legend()
    plt.show()


visualize_loss(history, "Training and Validation Loss")

# ## Prediction


def show_plot(plot_data, delta, title):
    labels = ["History", "True Future", "Model Prediction"]
    marker = [".-", "rx", "go"]
    time_steps = list(range(-(plot_data[0].shape[0]), 0))
    if delta:
        future = delta
    else:
        future = 0

    plt.title(title)
    for i, val in enumerate(plot_data):
        if i:
            plt.plot(future, plot_data[i], marker[i], markersize=10, label=labels[i])
        else:
            plt.plot(time_steps, plot_data[i].flatten(), marker[i], label=labels[i])
    plt.legend()
    plt.xlim([time_steps[0], (future + 5) * 2])
    plt.xlabel("Time-Step")
    plt.show()
    return


for x, y in dataset_val.take(5):
    show_plot(
        [x[0][:, 1].numpy(), y[0].numpy(), model.predict(x)[0]],
        12,
        "Single Step Prediction",
    )
