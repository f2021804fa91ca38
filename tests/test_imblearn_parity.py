"""Parity with imbalanced-learn: the same `sampling_strategy` gives the same class counts,
and the same values fail with ValueError, in every kerasgen sampler that takes a strategy
(RandomOverSampler, RandomUnderSampler, SMOTE), through `fit_resample`, `kg.rebalance` and
a generator. Also the forms of `y` that imbalanced-learn's `fit_resample` accepts
(one-hot rows, strings, lists, pandas), handed back in the form given.

imbalanced-learn is run on the same data each time: its samplers and its
`check_sampling_strategy`, so a change on either side shows here.
"""

import re
from collections import Counter

import numpy as np
import pytest

import kerasgen as kg

imblearn = pytest.importorskip("imblearn")
from threadpoolctl import threadpool_limits  # noqa: E402  (scikit-learn's dependency)
from imblearn.over_sampling import SMOTE as ImbSMOTE  # noqa: E402
from imblearn.over_sampling import RandomOverSampler as ImbOver  # noqa: E402
from imblearn.under_sampling import RandomUnderSampler as ImbUnder  # noqa: E402
from imblearn.utils import check_sampling_strategy  # noqa: E402

# scikit-learn's neighbour search starts OpenMP threads for each tiny query: 40x slower
# than one thread on a busy 2-core machine. Both SMOTEs run under the same limit.
@pytest.fixture(autouse=True)
def one_thread():
    with threadpool_limits(1):
        yield


K = 2  # k_neighbors for both SMOTEs: the smallest class below has 3 samples

# (kind, kerasgen sampler, imbalanced-learn sampler, kg.rebalance method)
KINDS = [
    ("over", lambda s: kg.samplers.RandomOverSampler(sampling_strategy=s, seed=0),
     lambda s: ImbOver(sampling_strategy=s, random_state=0), "oversample"),
    ("over", lambda s: kg.samplers.SMOTE(k_neighbors=K, sampling_strategy=s, seed=0),
     lambda s: ImbSMOTE(k_neighbors=K, sampling_strategy=s, random_state=0), "smote"),
    ("under", lambda s: kg.samplers.RandomUnderSampler(sampling_strategy=s, seed=0),
     lambda s: ImbUnder(sampling_strategy=s, random_state=0), "undersample"),
]
KIND_IDS = ["RandomOverSampler", "SMOTE", "RandomUnderSampler"]

RATIOS = sorted(set(np.round(np.arange(0.01, 1.0001, 0.01), 2).tolist()) | {
    0.3333, 1 / 3, 2 / 3, 0.7, 0.29, 0.57, 0.15, 0.115, 0.0667, 0.999999, 1e-9})


def dataset(counts, values=None, seed=0):
    """x (two features, classes apart) and y with counts[i] samples of class values[i]."""
    values = list(range(len(counts))) if values is None else values
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(len(counts)), counts)
    rng.shuffle(ids)
    x = rng.normal(size=(len(ids), 2)) + 3.0 * ids[:, None]
    return x, np.asarray(values)[ids]


def outcome(fn):
    """Counter of the resampled y, or the exception type raised."""
    try:
        y_res = fn()
    except Exception as error:  # noqa: BLE001 - the type is what is compared
        return type(error)
    labels = np.asarray(y_res)
    if labels.ndim == 2:  # one-hot rows (imbalanced-learn: a column for two classes)
        labels = labels.argmax(1) if labels.shape[1] > 1 else labels[:, 0]
    return dict(Counter(labels.tolist()))


def imblearn_counts(strategy, y, kind):
    """Class counts after resampling by imbalanced-learn's own check_sampling_strategy."""
    targets = check_sampling_strategy(strategy, y, f"{kind}-sampling")
    counts = dict(Counter(np.asarray(y).tolist()))
    if kind == "over":
        return {c: n + targets.get(c, 0) for c, n in counts.items()}
    return {c: targets.get(c, n) for c, n in counts.items()}


def kerasgen_outcomes(make, method, strategy, x, y):
    """{path: outcome} through fit_resample, kg.rebalance and an ArrayGenerator (whose
    counts are keyed by class name: mapped back to y's values)."""
    values = np.unique(y).tolist()

    def generator():
        gen = kg.ArrayGenerator(x, y, sampler=make(strategy), seed=0, label_mode="int")
        after = gen.class_counts()["after"]
        return np.repeat(values, [after[str(v)] for v in values])

    paths = {
        "fit_resample": outcome(lambda: make(strategy).fit_resample(x, y)[1]),
        "rebalance": outcome(lambda: kg.rebalance(x, y, method=method, k_neighbors=K,
                                                  sampling_strategy=strategy, seed=0)[1]),
    }
    if not any(isinstance(v, int) and v < 0 for v in values):  # ids are 0..n-1
        paths["generator"] = outcome(generator)
    return paths


def drop_empty(counts):
    return counts if isinstance(counts, type) else {c: n for c, n in counts.items() if n}


@pytest.mark.parametrize("counts,values", [
    ((200, 30), None),      # the issue's example: 0.3333 over-sampling adds 36, not 37
    ((30, 200), None),      # minority first
    ((100, 7), None),
    ((57, 13), ["ant", "bee"]),
    ((40, 40), None),       # equal classes: ties break toward the first, as imbalanced-learn
    ((1000, 3), None),
    ((60, 43), [-1, 5]),
], ids=["200-30", "30-200", "100-7", "strings", "equal", "1000-3", "negative-ids"])
def test_float_ratios_give_imbalanced_learns_counts(counts, values):
    x, y = dataset(counts, values)
    mismatches = []
    for ratio in RATIOS:
        for (kind, make, make_imblearn, method), name in zip(KINDS, KIND_IDS):
            expected = outcome(lambda: make_imblearn(ratio).fit_resample(x, y)[1])
            try:
                checked = imblearn_counts(ratio, y, kind)
            except ValueError:
                checked = ValueError
            assert checked == expected  # imbalanced-learn agrees with itself
            if expected is not ValueError:
                assert sum(expected.values()) > 0
            for path, got in kerasgen_outcomes(make, method, ratio, x, y).items():
                if drop_empty(got) != drop_empty(expected):
                    mismatches.append((name, ratio, path, got, expected))
    assert not mismatches, mismatches[:10]


@pytest.mark.parametrize("counts", [(40, 10), (200, 30), (22, 14), (600, 599), (43, 43),
                                    (1000, 3)])
def test_the_ratio_an_error_suggests_is_the_least_that_works(counts):
    x, y = dataset(counts)
    for kind, make, make_imblearn, _ in KINDS[::2]:  # RandomOverSampler, RandomUnderSampler
        for ratio in (0.01, 0.1, 0.5):
            try:
                make(ratio).fit_resample(x, y)
                continue
            except ValueError as error:
                message = str(error)
            if "equally large" in message:
                assert counts[0] == counts[1] and kind == "over"
                continue
            least = float(re.search(r"Pass a larger ratio: ([0-9.]+) is", message).group(1))
            make(least).fit_resample(x, y)  # works, with imbalanced-learn too
            make_imblearn(least).fit_resample(x, y)
            with pytest.raises(ValueError):  # one hundredth less does not
                make_imblearn(round(least - 0.01, 2)).fit_resample(x, y)


def test_the_issues_examples():
    x, y = dataset((200, 30))
    assert Counter(kg.rebalance(x, y, "oversample", 0.3333)[1].tolist()) == {0: 200, 1: 66}
    assert Counter(kg.rebalance(x, y, "smote", 0.3333)[1].tolist()) == {0: 200, 1: 66}
    assert Counter(kg.rebalance(x, y, "undersample", 0.7)[1].tolist()) == {0: 42, 1: 30}
    # a numpy float32 ratio is computed in float64, as imbalanced-learn's int64 counts do
    ratio = np.float32(0.3333)
    assert (Counter(kg.rebalance(x, y, "oversample", ratio)[1].tolist())
            == Counter(ImbOver(sampling_strategy=ratio).fit_resample(x, y)[1].tolist()))


def over_callable(y):
    counts = Counter(np.asarray(y).tolist())
    return {c: max(n, 25) for c, n in counts.items()}


def under_callable(y):
    counts = Counter(np.asarray(y).tolist())
    return {c: min(n, 6) for c, n in counts.items()}


MULTI = [((50, 20, 20, 5), None), ((7, 7, 30), ["cat", "dog", "fox"]),
         ((12, 40, 12, 40), [3, 9, 11, 20])]
OVER_STRATEGIES = ["auto", "minority", "not minority", "not majority", "all", over_callable]
UNDER_STRATEGIES = ["auto", "majority", "not minority", "not majority", "all",
                    under_callable]


@pytest.mark.parametrize("counts,values", MULTI, ids=["ints", "strings-with-ties",
                                                      "sparse-ids-with-ties"])
def test_string_dict_and_callable_strategies_give_imbalanced_learns_counts(counts, values):
    x, y = dataset(counts, values)
    classes = np.unique(y).tolist()
    grow = {classes[-1]: counts[-1] + 17, classes[0]: counts[0]}
    shrink = {classes[1]: 3, classes[-1]: 0}
    mismatches = []
    for (kind, make, make_imblearn, method), name in zip(KINDS, KIND_IDS):
        for strategy in (OVER_STRATEGIES + [grow] if kind == "over"
                         else UNDER_STRATEGIES + [shrink]):
            expected = outcome(lambda: make_imblearn(strategy).fit_resample(x, y)[1])
            assert isinstance(expected, dict), (name, strategy, expected)
            if not callable(strategy):
                assert drop_empty(imblearn_counts(strategy, y, kind)) == expected
            for path, result in kerasgen_outcomes(make, method, strategy, x, y).items():
                if drop_empty(result) != drop_empty(expected):
                    mismatches.append((name, strategy, path, result, expected))
            assert sampling_strategy_of(make(strategy), x, y) == sampling_strategy_of(
                make_imblearn(strategy), x, y), (name, strategy)
    assert not mismatches, mismatches


def sampling_strategy_of(sampler, x, y):
    """`sampling_strategy_` after fit_resample, keys as plain Python values, in order."""
    sampler.fit_resample(x, y)
    return [(np.asarray(k).item(), int(n)) for k, n in sampler.sampling_strategy_.items()]


@pytest.mark.parametrize("counts,values", [((200, 30), None), ((57, 13), ["ant", "bee"])])
def test_float_strategies_give_imbalanced_learns_sampling_strategy_(counts, values):
    x, y = dataset(counts, values)
    for (kind, make, make_imblearn, _), name in zip(KINDS, KIND_IDS):
        for ratio in (0.3333, 0.5, 1.0):
            assert sampling_strategy_of(make(ratio), x, y) == sampling_strategy_of(
                make_imblearn(ratio), x, y), (name, ratio)
        sampler = make(0.5)
        sampler.fit_resample(x, y)
        after = dict(Counter(np.asarray(sampler.fit_resample(x, y)[1]).tolist()))
        assert sampler.class_counts_ == after


def test_dict_keys_in_a_generator_are_class_ids_or_names():
    x, y = dataset((50, 20, 5), ["cat", "dog", "fox"])
    for strategy in [{"fox": 25}, {2: 25}]:
        gen = kg.ArrayGenerator(x, y, sampler=kg.samplers.RandomOverSampler(strategy),
                                label_mode="int")
        assert gen.class_counts()["after"] == {"cat": 50, "dog": 20, "fox": 25}
    # a callable gets the generator's class ids (gen.labels)
    seen = []
    sampler = kg.samplers.RandomOverSampler(lambda ids: seen.append(ids) or {1: 30})
    gen = kg.ArrayGenerator(x, y, sampler=sampler, label_mode="int")
    assert gen.class_counts()["after"] == {"cat": 50, "dog": 30, "fox": 5}
    np.testing.assert_array_equal(seen[0], gen.labels)


# Values imbalanced-learn refuses with a ValueError (its InvalidParameterError is one),
# refused here with a ValueError too: when the sampler is made for the value alone,
# at fit_resample / generator construction for what depends on the data.
Y2, Y3 = dataset((40, 10))[1], dataset((30, 10, 5))[1]
INIT_ERRORS = [
    ([0, 1], "over", "A list of classes is imbalanced-learn's form for cleaning samplers"),
    ((0, 1), "under", "A list of classes"),
    ({0, 1}, "over", "must be a float in \\(0, 1\\] \\(two classes\\), one of 'auto'"),
    (None, "under", "Received: sampling_strategy=None"),
    ("most", "over", "Received: sampling_strategy='most'"),
    ("majority", "over", "cannot grow the majority class"),
    ("minority", "under", "cannot shrink the minority class"),
    (1.5, "over", "must be a float in \\(0, 1\\]"),
    (0.0, "under", "must be a float in \\(0, 1\\]"),
    (-0.2, "over", "must be a float in \\(0, 1\\]"),
    (float("nan"), "under", "must be a float in \\(0, 1\\]"),
]
FIT_ERRORS = [
    (0.5, Y3, "over", "works for two classes only"),
    (0.5, Y3, "under", "works for two classes only"),
    (0.25, Y2, "over",
     r"int\(40 \* 0.25 - 10\) = 0 samples to add.*Pass a larger ratio: 0.28 is"),
    (0.1, Y2, "over", "must add at least one"),
    (0.2, Y2, "under",
     r"from 40 to int\(10 / 0.2\) = 50 samples.*Pass a larger ratio: 0.25 is"),
    ({5: 3}, Y2, "over", "names class 5, which is not present in the data"),
    ({5: 3}, Y2, "under", "not present in the data"),
    ({1: 3}, Y2, "over", "An over-sampler only adds samples: class 1 has 10"),
    ({1: 30}, Y2, "under", "An under-sampler only removes samples: class 1 has 10"),
    ({1: -3}, Y2, "under", "must be a non-negative integer"),
    (lambda y: {7: 30}, Y2, "over", "names class 7"),
    (lambda y: {1: 2}, Y2, "over", "only adds samples"),
    (lambda y: [1], Y2, "over", "as a callable must return a dict"),  # imblearn: an
    # AttributeError ('list' object has no attribute 'keys')
    ("auto", np.zeros(20, int), "over", "at least two classes"),
    ("auto", np.zeros(20, int), "under", "at least two classes"),
]


def samplers_of(kind):
    return [(make, make_imblearn, method) for k, make, make_imblearn, method in KINDS
            if k == kind]


@pytest.mark.parametrize("strategy,kind,match", INIT_ERRORS,
                         ids=[repr(s)[:20] + "-" + k for s, k, _ in INIT_ERRORS])
def test_invalid_strategies_are_value_errors_when_the_sampler_is_made(strategy, kind, match):
    x, y = dataset((40, 10))
    for make, make_imblearn, method in samplers_of(kind):
        with pytest.raises(ValueError):
            make_imblearn(strategy).fit_resample(x, y)
        with pytest.raises(ValueError, match=match):
            make(strategy)
        with pytest.raises(ValueError, match=match):
            kg.rebalance(x, y, method=method, sampling_strategy=strategy)


@pytest.mark.parametrize("strategy,y,kind,match", FIT_ERRORS,
                         ids=[f"{i}-{k}" for i, (_, _, k, _) in enumerate(FIT_ERRORS)])
def test_strategies_that_do_not_fit_the_data_are_value_errors(strategy, y, kind, match):
    x = np.random.default_rng(0).normal(size=(len(y), 2))
    for make, make_imblearn, method in samplers_of(kind):
        with pytest.raises(AttributeError if "callable must return" in match else ValueError):
            make_imblearn(strategy).fit_resample(x, y)
        sampler = make(strategy)
        with pytest.raises(ValueError, match=match):
            sampler.fit_resample(x, y)
        with pytest.raises(ValueError, match=match):
            kg.rebalance(x, y, method=method, sampling_strategy=strategy)
        with pytest.raises(ValueError, match=match):  # before training: at construction
            kg.ArrayGenerator(x, y, sampler=make(strategy), label_mode="int", seed=0)


def test_a_bool_strategy_is_refused_where_imbalanced_learn_reads_it_as_1():
    x, y = dataset((40, 10))
    assert Counter(ImbOver(sampling_strategy=True).fit_resample(x, y)[1]) == {0: 40, 1: 40}
    with pytest.raises(ValueError, match="Received: sampling_strategy=True"):
        kg.samplers.RandomOverSampler(sampling_strategy=True)


# ----------------------------------------------------------------- forms of y

def check_rows_follow_labels(x, y_rows, x_res, y_res_rows):
    """Every resampled row of x that is an original carries that original's label."""
    for row, label in zip(x_res, y_res_rows):
        match = np.flatnonzero((x == row).all(axis=1))
        if len(match):
            assert all(np.array_equal(y_rows[m], label) for m in match)


@pytest.mark.parametrize("form", ["int64", "int8", "float-ids", "bool", "str", "object-str",
                                  "list-str", "column", "one-hot-float32", "one-hot-int",
                                  "one-hot-bool", "one-hot-2-classes", "series-category",
                                  "dataframe-one-hot"])
@pytest.mark.parametrize("kind_index", [0, 1, 2], ids=KIND_IDS)
def test_y_comes_back_in_the_form_it_was_given(form, kind_index):
    kind, make, make_imblearn, method = KINDS[kind_index]
    two = form in ("bool", "one-hot-2-classes")
    x, ids = dataset((30, 9) if two else (30, 12, 9))
    names = np.array(["fox", "ant", "bee"])
    pd = pytest.importorskip("pandas") if form.startswith(("series", "dataframe")) else None
    y = {
        "int64": lambda: ids.astype(np.int64),
        "int8": lambda: ids.astype(np.int8),
        "float-ids": lambda: ids.astype(np.float64) + 1.0,
        "bool": lambda: ids.astype(bool),
        "str": lambda: names[ids],
        "object-str": lambda: names[ids].astype(object),
        "list-str": lambda: names[ids].tolist(),
        "column": lambda: names[ids][:, None],
        "one-hot-float32": lambda: np.eye(3, dtype=np.float32)[ids],
        "one-hot-int": lambda: np.eye(3, dtype=np.int64)[ids],
        "one-hot-bool": lambda: np.eye(3, dtype=bool)[ids],
        "one-hot-2-classes": lambda: np.eye(2, dtype=np.float32)[ids],
        "series-category": lambda: pd.Series(names[ids], name="animal", dtype="category"),
        "dataframe-one-hot": lambda: pd.DataFrame(np.eye(3, dtype=np.uint8)[ids],
                                                  columns=["fox", "ant", "bee"]),
    }[form]()
    x_res, y_res = make("auto").fit_resample(x, y)
    again = kg.rebalance(x, y, method=method, k_neighbors=K, seed=0)[1]
    for result in (y_res, again):
        assert type(result) is type(y)
        if isinstance(y, np.ndarray):
            assert result.dtype == y.dtype and result.shape[1:] == y.shape[1:]
        elif form == "series-category":
            assert result.dtype == y.dtype and result.name == "animal"
        elif form == "dataframe-one-hot":
            assert list(result.columns) == list(y.columns)
            assert (result.dtypes == y.dtypes).all()
    rows = np.asarray(y)
    res_rows = np.asarray(y_res)
    assert set(map(repr, res_rows.tolist())) <= set(map(repr, rows.tolist()))
    check_rows_follow_labels(x, rows, x_res, res_rows)
    # the counts are imbalanced-learn's on the same y (a one-hot DataFrame as an array:
    # imbalanced-learn takes one-hot arrays, not DataFrames)
    same = rows if form == "dataframe-one-hot" else y
    expected = outcome(lambda: make_imblearn("auto").fit_resample(x, same)[1])
    assert sorted(outcome(lambda: y_res).values()) == sorted(expected.values())


def test_one_hot_and_string_dict_keys_are_ys_classes():
    x, ids = dataset((30, 12, 9))
    one_hot = np.eye(3, dtype=np.float32)[ids]
    sampler = kg.samplers.RandomOverSampler(sampling_strategy={2: 20}, seed=0)
    _, y_res = sampler.fit_resample(x, one_hot)
    assert y_res.sum(0).tolist() == [30, 12, 20]
    assert sampler.class_counts_ == {0: 30, 1: 12, 2: 20}
    assert sampler.sampling_strategy_ == {2: 11}  # samples added, as imbalanced-learn
    strings = np.array(["fox", "ant", "bee"])[ids]
    sampler = kg.samplers.RandomUnderSampler(sampling_strategy={"fox": 10}, seed=0)
    _, y_res = sampler.fit_resample(x, strings)
    assert sampler.class_counts_ == {"ant": 12, "bee": 9, "fox": 10}
    assert sampler.sampling_strategy_ == {"fox": 10}  # the count kept, as imbalanced-learn
    with pytest.raises(ValueError, match=r"names class 3, which is not present.*"
                                         r"\['ant', 'bee', 'fox'\]"):
        kg.samplers.RandomUnderSampler(sampling_strategy={3: 1}).fit_resample(x, strings)
    # a callable gets y as imbalanced-learn gives it: the strings; one-hot -> column ids
    seen = []
    kg.samplers.RandomOverSampler(lambda y: seen.append(y) or {}).fit_resample(x, strings)
    kg.samplers.RandomOverSampler(lambda y: seen.append(y) or {}).fit_resample(x, one_hot)
    np.testing.assert_array_equal(seen[0], strings)
    np.testing.assert_array_equal(seen[1], ids)


def test_smote_rows_of_one_hot_y_are_synthesised_within_their_class():
    x, ids = dataset((30, 12, 9))
    one_hot = np.eye(3, dtype=np.float32)[ids]
    x_res, y_res = kg.samplers.SMOTE(k_neighbors=K, seed=1).fit_resample(x, one_hot)
    assert y_res.dtype == np.float32 and y_res.sum(0).tolist() == [30, 30, 30]
    for c in range(3):  # the classes lie 3 apart: a blend stays in its class's box
        members = x[ids == c]
        rows = x_res[y_res[:, c] == 1]
        assert (rows >= members.min(0) - 1e-9).all() and (rows <= members.max(0) + 1e-9).all()


@pytest.mark.parametrize("y,match", [
    (np.eye(3)[[0, 1, 2, 0]] + np.eye(3)[[1, 1, 0, 0]] * [[1], [0], [0], [0]],
     r"row 0 of y has 2 1s \(multi-hot\)"),
    (np.array([[1, 0], [0, 0], [0, 1], [1, 0]]), "row 1 of y has no 1"),
    (np.array([[0.9, 0.1], [0.2, 0.8], [1, 0], [0, 1]]), r"row 0 of y is \[0.9, 0.1\]"),
    (np.array([["a", "b"]] * 4), "2-D `y` must be one-hot rows of 0 and 1.*dtype <U1"),
    (np.zeros((4, 2, 2)), r"`y` must be 1-D class labels or 2-D one-hot.*shape \(4, 2, 2\)"),
    (np.array([0.0, 1.0, np.nan, 1.0]), r"y holds NaN \(row 2, 1 rows in all\)"),
    (np.array([0.0, 1.5, 1.0, 0.0]), r"non-integer numbers \(row 1: 1.5\)"),
    (np.array(["a", None, "b", "a"], dtype=object), r"holds None \(row 1\)"),
    (np.array(["a", float("nan"), "b", "a"], dtype=object), r"holds nan \(row 1\)"),
    (np.array(["a", 1, "b", 2], dtype=object), r"mixes label types \(int, str\)"),
    (np.array(3), r"shape \(\)"),
    (np.array([]), "at least one label"),
], ids=["multi-hot", "no-one", "probabilities", "2-D-strings", "3-D", "nan", "continuous",
        "none", "object-nan", "mixed", "scalar", "empty"])
def test_bad_forms_of_y_are_value_errors_naming_y(y, match):
    x = np.zeros((len(y) if y.ndim else 4, 2))
    for make in (kg.samplers.RandomOverSampler(seed=0), kg.samplers.SMOTE(seed=0),
                 kg.samplers.RandomUnderSampler(seed=0),
                 kg.samplers.BalancedBatchSampler(seed=0)):
        with pytest.raises(ValueError, match=match):
            make.fit_resample(x, y)
    with pytest.raises(ValueError, match=match):
        kg.rebalance(x, y)


def test_x_and_y_lengths_must_match():
    with pytest.raises(ValueError, match=r"`x` and `y` must hold the same number of "
                                         r"samples. Received: x of shape \(5, 2\), 4 labels"):
        kg.rebalance(np.zeros((5, 2)), np.array(["a", "b", "a", "b"]))


def test_x_comes_back_in_the_form_it_was_given():
    pd = pytest.importorskip("pandas")
    x, ids = dataset((30, 12))
    frame = pd.DataFrame({"a": x[:, 0], "b": np.arange(len(x), dtype=np.int32)})
    x_res, y_res = kg.rebalance(frame, ids.tolist(), method="oversample")
    assert isinstance(x_res, pd.DataFrame) and list(x_res.columns) == ["a", "b"]
    assert x_res.dtypes.tolist() == frame.dtypes.tolist() and isinstance(y_res, list)
    assert Counter(y_res) == {0: 30, 1: 30}
    # every row is an original row with its original label
    for (a, b), label in zip(x_res.itertuples(index=False), y_res):
        assert frame.a[b] == a and ids[b] == label
    x_list, _ = kg.rebalance(x.tolist(), ids, method="undersample")
    assert isinstance(x_list, list) and len(x_list) == 24


def test_balanced_batch_sampler_fit_resample_takes_the_same_forms():
    x, ids = dataset((30, 12, 9))
    sampler = kg.samplers.BalancedBatchSampler(num_batches=4, seed=0)
    strings = np.array(["fox", "ant", "bee"])[ids].astype(object)
    _, y_res = sampler.fit_resample(x, strings)
    counts = Counter(y_res.tolist())
    assert y_res.dtype == object and set(counts) == {"fox", "ant", "bee"}
    assert sum(counts.values()) == 4 * 32 and max(counts.values()) - min(counts.values()) <= 2
    _, y_res = sampler.fit_resample(x, np.eye(3, dtype=bool)[ids])
    assert y_res.dtype == bool and y_res.shape == (128, 3) and (y_res.sum(1) == 1).all()
