"""Sources: what the samples are, as objects a generator takes whole.

A source knows how many samples there are, their labels, how to name sample i in an
error and how to load it; nothing of epochs, order, augmentation or batches' targets.
Every kerasgen generator is a builder of one (`gen.source`) over `kg.Generator`, which
takes any object with these members:

```python
class Records:                       # a list of (encoded image bytes, label) records
    def __init__(self, records):
        self.records = records
        self.labels = [label for _, label in records]   # or None: no labels
        self.class_names = None                         # None: sorted distinct labels

    def __len__(self):
        return len(self.records)

    def describe(self, index):       # how error messages name sample `index`
        return f"record {index}"

    def load(self, index):           # -> x, or (x, y) when the sample carries its target
        data = np.frombuffer(self.records[index][0], np.uint8)
        return cv2.imdecode(data, cv2.IMREAD_COLOR)[..., ::-1]

gen = kg.Generator(source=Records(records), label_mode="int", batch_size=32, seed=1)
```

A source may also have `features` (the feature space SMOTE searches, one row per
sample), `file_paths` (one path per sample: `get_state` records them) and
`load_batch(request)` (a whole batch at once, see `BatchRequest`; `ArraySource` and the
image sources have one).

Sources compose as tf.data's datasets do: `concatenate(a, b)` holds the samples of `a`
then those of `b` (with one class-id mapping over both), `zip(a, b)` sample i of each
as one multi-input sample `(x_a, x_b)` (`zip(image=a, meta=b)`: a dict), labelled by
the first part with labels.

This package is the public face; the sources themselves live in its modules: `_core`
(the protocol and the helpers over any source), `_batch_request` (`BatchRequest`, a
batch loaded one sample at a time), `_arrays` (`ArraySource`), `_compose`
(`concatenate`, `zip`), `_listing` and `_csv_table` (folders and CSV tables), `_image`,
`_paired` and `_detection` (image files), `_annotations` and `_boxes` (detection
annotations), `_stream_records` (a stream batch's records). Objects behind URLs are
read by `kerasgen.storage`.
"""

from kerasgen.sources._arrays import ArraySource
from kerasgen.sources._batch_request import BatchRequest
from kerasgen.sources._compose import concatenate, zip
from kerasgen.sources._core import BatchSource, Source

__all__ = ["ArraySource", "BatchRequest", "BatchSource", "Source", "concatenate", "zip"]
