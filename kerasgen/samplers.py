"""Class-imbalance samplers: pure functions (labels, seed, epoch) -> plan.

A plan is the list of samples of one epoch, in batch order. Random over/under-sampling
and balanced batches give an index array; SMOTE gives a `Plan` whose synthetic entries
are (i, neighbour slot, lam), realised at batch time as x_i + lam * (x_j - x_i), with j
the slot-th nearest same-class neighbour of i, found only when a batch needs it.

`sampling_strategy` follows imbalanced-learn: "auto", "minority", "not minority",
"not majority", "all", a float (two classes), or a dict {class: count}, classes by id
or by name.
"""

import inspect
import numbers
import threading
import warnings

import numpy as np

from kerasgen import _checks, batching, seeding

STRATEGIES = ("auto", "minority", "majority", "not minority", "not majority", "all")


class Plan:
    """An epoch plan: sample `indices`; for synthetic entries a neighbour `slot` >= 0
    and a mixing weight `lam` (originals have slot -1)."""

    def __init__(self, indices, slots=None, lams=None, neighbours=None):
        indices = np.asarray(indices)
        self.indices = indices if indices.dtype in (np.int32, np.int64) else indices.astype(
            np.int64)
        self.slots = slots
        self.lams = lams
        self.neighbours = neighbours  # resolves (i, slot) -> j
        self._synthetic_positions = None

    def __len__(self):
        return len(self.indices)

    def batch(self, start, stop):
        """(indices, partners or None, lams or None) of positions [start, stop)."""
        indices = self.indices[start:stop]
        if self.slots is None:
            return indices, None, None
        slots = self.slots[start:stop]
        if not (slots >= 0).any():
            return indices, None, None
        partners = np.full(len(indices), -1, dtype=np.int64)
        synthetic = slots >= 0
        bases = indices[synthetic]
        if not self.neighbours.known(bases):
            self.neighbours.prepare(self._upcoming_bases(start))
        partners[synthetic] = self.neighbours.resolve(bases, slots[synthetic])
        return indices, partners, self.lams[start:stop]

    def prepare_all(self):
        """Finds the neighbours of every synthetic entry now (before worker processes
        fork, so they inherit them instead of each searching anew)."""
        if self.slots is not None:
            self.neighbours.prepare(self.indices[self.slots >= 0])

    def _upcoming_bases(self, start):
        """Bases of the next synthetic entries from `start`: a block that doubles with what
        is already known (at least 256), so the first batch is quick and the whole epoch
        needs few neighbour queries."""
        if self._synthetic_positions is None:
            self._synthetic_positions = np.flatnonzero(self.slots >= 0)
        first = np.searchsorted(self._synthetic_positions, start)
        size = max(256, self.neighbours.num_known())
        return self.indices[self._synthetic_positions[first:first + size]]


def class_counts(labels):
    """{class id: count} for the classes present, ascending ids."""
    ids, counts = np.unique(np.asarray(labels), return_counts=True)
    return {int(c): int(n) for c, n in zip(ids, counts)}


def _class_id(key, class_names):
    if isinstance(key, str):
        if class_names is None or key not in class_names:
            raise ValueError(f"`sampling_strategy` names class {key!r}, which is not one "
                             f"of the classes {class_names}.")
        return class_names.index(key)
    return int(key)


def target_counts(labels, sampling_strategy, kind, class_names=None):
    """{class id: count after sampling} with imbalanced-learn's meaning of the strategy.

    kind is "over" or "under". Classes that are not resampled keep their count.
    """
    counts = class_counts(labels)
    if len(counts) < 2:
        raise ValueError(f"Resampling needs at least two classes; the labels hold only "
                         f"{list(counts)}.")
    majority, minority = max(counts.values()), min(counts.values())
    strategy = sampling_strategy
    if isinstance(strategy, str):
        _checks.one_of("sampling_strategy", strategy, STRATEGIES)
        if strategy == "auto":
            strategy = "not majority" if kind == "over" else "not minority"
        if kind == "over" and strategy == "majority":
            raise ValueError("sampling_strategy='majority' means nothing to an over-sampler "
                             "(the majority is already the largest class).")
        if kind == "under" and strategy == "minority":
            raise ValueError("sampling_strategy='minority' means nothing to an "
                             "under-sampler (the minority is already the smallest class).")
        smallest = min(counts, key=lambda c: (counts[c], c))
        largest = max(counts, key=lambda c: (counts[c], -c))
        chosen = {
            "minority": [smallest],
            "majority": [largest],
            "not minority": [c for c in counts if c != smallest],  # imblearn: all but one
            "not majority": [c for c in counts if c != largest],
            "all": list(counts),
        }[strategy]
        goal = majority if kind == "over" else minority
        return {c: (goal if c in chosen else n) for c, n in counts.items()}
    if isinstance(strategy, numbers.Real) and not isinstance(strategy, bool):
        if len(counts) != 2:
            raise ValueError("`sampling_strategy` as a float works for two classes only. "
                             f"Received: sampling_strategy={strategy} with {len(counts)} "
                             "classes; pass a dict {class: count} instead.")
        if not 0 < strategy <= 1:
            _checks.fail("sampling_strategy", "a float in (0, 1] (minority / majority "
                         "after resampling)", strategy)
        small, large = sorted(counts, key=lambda c: (counts[c], c))
        if kind == "over":
            target = int(round(strategy * counts[large]))
            if target < counts[small]:
                raise ValueError(
                    f"sampling_strategy={strategy} would remove samples from the minority "
                    f"class ({counts[small]} -> {target}); an over-sampler only adds.")
            return {small: target, large: counts[large]}
        target = int(round(counts[small] / strategy))
        if target > counts[large]:
            raise ValueError(
                f"sampling_strategy={strategy} would add samples to the majority class "
                f"({counts[large]} -> {target}); an under-sampler only removes.")
        return {small: counts[small], large: target}
    if isinstance(strategy, dict):
        out = dict(counts)
        for key, value in strategy.items():
            c = _class_id(key, class_names)
            if c not in counts:
                raise ValueError(f"`sampling_strategy` names class {key!r}, which has no "
                                 f"samples (classes present: {list(counts)}).")
            value = _checks.non_negative_int(f"sampling_strategy[{key!r}]", value)
            if kind == "over" and value < counts[c]:
                raise ValueError(
                    f"An over-sampler only adds samples: class {key!r} has {counts[c]}, "
                    f"and sampling_strategy asks for {value}.")
            if kind == "under" and value > counts[c]:
                raise ValueError(
                    f"An under-sampler only removes samples: class {key!r} has "
                    f"{counts[c]}, and sampling_strategy asks for {value}.")
            out[c] = value
        return out
    _checks.fail("sampling_strategy", "a string, a float or a dict {class: count}",
                 strategy, TypeError)


class Sampler:
    """Shared parts: parameters stored as given, `plan`, and `fit_resample`."""

    kind = None

    def __init__(self, sampling_strategy="auto", seed=None):
        self.sampling_strategy = sampling_strategy
        self.seed = seeding.resolve_seed(seed)

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"

    def _params(self):
        return {"sampling_strategy": self.sampling_strategy, "seed": self.seed}

    def _labels(self, labels):
        if labels is None:
            raise ValueError(f"{type(self).__name__} needs one class label per sample; this "
                             "generator has none (label_mode 'multi_label', 'raw' floats, "
                             "'mask' or no labels).")
        return np.asarray(labels)

    def plan(self, labels, seed, epoch, **context):
        raise NotImplementedError

    def fit_resample(self, x, y):
        """Resamples arrays (x of any rank) like imbalanced-learn; returns (x_res, y_res)."""
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"`x` and `y` must hold the same number of samples. "
                             f"Received: len(x)={len(x)}, len(y)={len(y)}.")
        plan = self.plan(y, self.seed, 0, features=x.reshape(len(x), -1))
        x_res, y_res = realise(plan, x, y)
        self.sampling_strategy_ = class_counts(y_res)  # {class: count after resampling}
        return x_res, y_res


def realise(plan, x, y):
    """Materialises a plan over arrays: originals taken, synthetic samples blended."""
    if not isinstance(plan, Plan):
        plan = Plan(plan)
    indices, partners, lams = plan.batch(0, len(plan))
    x_res = np.take(x, indices, axis=0)
    if partners is not None:
        rows = partners >= 0
        x_res = batching.blend_rows(x_res, np.take(x, partners[rows], axis=0), lams[rows], rows)
    return x_res, np.take(y, indices, axis=0)


class _RandomSampler(Sampler):
    """Draws each class's share of the plan from (seed, epoch); shuffles the plan."""

    def plan(self, labels, seed, epoch, **context):
        labels = self._labels(labels)
        targets = target_counts(labels, self.sampling_strategy, self.kind,
                                context.get("class_names"))
        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        parts = [self._draw(np.flatnonzero(labels == c), target, rng)
                 for c, target in targets.items()]
        plan = rng.permutation(np.concatenate(parts))
        self.sample_indices_ = plan
        return plan


class RandomOverSampler(_RandomSampler):
    """Repeats random samples of the chosen classes up to the target counts, each epoch
    anew. Every original sample stays in the plan."""

    kind = "over"

    @staticmethod
    def _draw(members, target, rng):
        if target == len(members):
            return members
        return np.concatenate([members, rng.choice(members, target - len(members))])


class RandomUnderSampler(_RandomSampler):
    """Keeps a random subset of the chosen classes, down to the target counts, drawn anew
    each epoch (so over several epochs every sample is seen)."""

    kind = "under"

    @staticmethod
    def _draw(members, target, rng):
        if target == len(members):
            return members
        return rng.choice(members, target, replace=False)


class BalancedBatchSampler(Sampler):
    """Every batch holds equal counts per class (as near as batch_size allows: the
    remainder slots go to classes in turn). An epoch is `n_batches` batches; by default
    enough for each sample of the majority class to be seen once. Smaller classes
    repeat, each in a fresh order every pass."""

    def __init__(self, n_batches=None, seed=None):
        super().__init__("all", seed)
        self.n_batches = None if n_batches is None else _checks.positive_int("n_batches",
                                                                              n_batches)

    def _params(self):
        return {"n_batches": self.n_batches, "seed": self.seed}

    def plan(self, labels, seed, epoch, batch_size=32, **context):
        labels = self._labels(labels)
        counts = class_counts(labels)
        classes = list(counts)
        if len(classes) < 2:
            raise ValueError("BalancedBatchSampler needs at least two classes.")
        if batch_size < len(classes):
            raise ValueError(f"`batch_size` ({batch_size}) must be at least the number of "
                             f"classes ({len(classes)}) for balanced batches.")
        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        per_class, extra = divmod(batch_size, len(classes))
        n_batches = self.n_batches or int(np.ceil(max(counts.values()) / per_class))
        streams = {}
        for c in classes:
            members = np.flatnonzero(labels == c)
            taken = n_batches * (per_class + 1)
            passes = int(np.ceil(taken / len(members)))
            streams[c] = np.concatenate([rng.permutation(members) for _ in range(passes)])
        used = {c: 0 for c in classes}
        batches = []
        order = rng.permutation(len(classes))
        for b in range(n_batches):
            lucky = {classes[order[(b * extra + k) % len(classes)]] for k in range(extra)}
            batch = []
            for c in classes:
                n = per_class + (c in lucky)
                batch.append(streams[c][used[c]:used[c] + n])
                used[c] += n
            batches.append(rng.permutation(np.concatenate(batch)))
        return np.concatenate(batches)


class SMOTE(Sampler):
    """SMOTE-style synthetic over-sampling, never materialised.

    For each class to grow, each synthetic sample is (i, j, lam): i a sample of the class,
    j one of its k nearest same-class neighbours in feature space, lam uniform in [0, 1);
    the batch realises x_i + lam * (x_j - x_i). The bases i go through the class in a
    seeded order, round after round (each sample is a base about equally often), so
    neighbours are computed only for the bases a batch needs, once each.

    Feature space: the data itself for arrays; for images, `features=` passed to the
    generator (embeddings, say) or small thumbnails computed once.
    """

    kind = "over"

    def __init__(self, k_neighbors=5, sampling_strategy="auto", seed=None):
        super().__init__(sampling_strategy, seed)
        self.k_neighbors = _checks.positive_int("k_neighbors", k_neighbors)

    def _params(self):
        return {"k_neighbors": self.k_neighbors, **super()._params()}

    def plan(self, labels, seed, epoch, features=None, **context):
        labels = self._labels(labels)
        targets = target_counts(labels, self.sampling_strategy, "over",
                                context.get("class_names"))
        if features is None:
            raise ValueError("SMOTE needs a feature space: arrays give their data; for "
                             "image generators pass features= or let them make thumbnails.")
        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        neighbours = _neighbour_cache(self, features, labels, targets)
        index_type = np.int32 if len(labels) < 2**31 else np.int64  # plans stay compact
        indices, slots, lams = [], [], []
        for c, target in targets.items():
            members = np.flatnonzero(labels == c).astype(index_type)
            indices.append(members)
            slots.append(np.full(len(members), -1, np.int16))
            lams.append(np.zeros(len(members), np.float32))
            n_new = target - len(members)
            if n_new <= 0:
                continue
            k = neighbours.k_for(c)
            rounds = int(np.ceil(n_new / len(members)))
            bases = np.concatenate([rng.permutation(members) for _ in range(rounds)])[:n_new]
            indices.append(bases)
            slots.append(rng.integers(0, k, n_new).astype(np.int16))
            lams.append(rng.random(n_new, dtype=np.float32))
        indices, slots, lams = (np.concatenate(a) for a in (indices, slots, lams))
        order = _interleave(rng, slots >= 0)
        indices = indices[order]  # one array at a time: the plan's peak memory stays low
        slots = slots[order]
        lams = lams[order]
        del order
        return Plan(indices, slots, lams, neighbours)


def _interleave(rng, synthetic):
    """A random order that keeps the synthetic entries in their given order (so bases are
    met round by round, and neighbour blocks are computed in turn)."""
    index_type = np.int32 if len(synthetic) < 2**31 else np.int64
    order = np.arange(len(synthetic), dtype=index_type)
    rng.shuffle(order)  # in place: no int64 copy of a long plan
    places = np.flatnonzero(synthetic[order]).astype(index_type)
    order[places] = np.flatnonzero(synthetic).astype(index_type)
    return order


def _neighbour_cache(sampler, features, labels, targets):
    """One NeighbourCache per (sampler, features, labels): reused across epochs."""
    key = (id(features), id(labels), tuple(sorted(targets.items())))
    cache = getattr(sampler, "_neighbours", None)
    if cache is None or cache.key != key:
        cache = NeighbourCache(features, labels, [c for c, t in targets.items()
                                                  if t > (labels == c).sum()],
                               sampler.k_neighbors)
        cache.key = key
        sampler._neighbours = cache
    return cache


class NeighbourCache:
    """k nearest same-class neighbours, computed on demand in blocks and kept.

    Uses scikit-learn's NearestNeighbors (exact search), fitted once per class; queries
    run for blocks of consecutive bases as the epoch reaches them.
    """

    def __init__(self, features, labels, classes, k_neighbors):
        self.features = features
        self.labels = labels
        self.k = {}
        self.models = {}
        self.members = {}
        self._lock = threading.Lock()
        for c in classes:
            members = np.flatnonzero(labels == c)
            if len(members) < 2:
                raise ValueError(f"SMOTE cannot synthesise class {c}: it has "
                                 f"{len(members)} sample; it needs at least two.")
            k = min(k_neighbors, len(members) - 1)
            if k < k_neighbors:
                warnings.warn(f"Class {c} has {len(members)} samples, fewer than "
                              f"k_neighbors + 1 = {k_neighbors + 1}; SMOTE uses k={k} "
                              "for it.", stacklevel=4)
            self.k[c] = k
            self.members[c] = members
        # Neighbours in one int32 table, a row per sample of the classes to grow
        # (-1: not found yet), and each sample's row.
        self.row = np.full(len(labels), -1, np.int32)
        grown = np.concatenate([self.members[c] for c in classes]) if classes else []
        self.row[grown] = np.arange(len(grown), dtype=np.int32)
        self.table = np.full((len(grown), max(self.k.values(), default=1)), -1, np.int32)
        self._known = 0

    def k_for(self, c):
        return self.k[c]

    def _model(self, c):
        if c not in self.models:
            try:
                from sklearn.neighbors import NearestNeighbors
            except ImportError as error:
                raise ImportError('SMOTE needs scikit-learn: pip install "kerasgen3[imbalance]" '
                                  "(or pip install scikit-learn)") from error
            points = self._points(self.members[c])
            self.models[c] = NearestNeighbors(n_neighbors=self.k[c] + 1).fit(points)
        return self.models[c]

    def _points(self, indices):
        return np.asarray(self.features[indices], dtype=np.float32).reshape(len(indices), -1)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_lock"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def num_known(self):
        return self._known

    def known(self, bases):
        return bool((self.table[self.row[bases], 0] >= 0).all())

    def prepare(self, bases):
        """Computes the neighbours of those `bases` not known yet."""
        with self._lock:
            missing = np.unique(bases[self.table[self.row[bases], 0] < 0])
            if len(missing):
                self._compute(missing)

    def resolve(self, bases, slots):
        """j for each (base, slot): the slot-th nearest same-class neighbour of base."""
        if not self.known(bases):
            self.prepare(bases)
        return self.table[self.row[bases], slots].astype(np.int64)

    def _compute(self, bases):
        for c in np.unique(self.labels[bases]):
            c = int(c)
            group = bases[self.labels[bases] == c]
            _, found = self._model(c).kneighbors(self._points(group))
            members, k = self.members[c], self.k[c]
            for b, row in zip(group.tolist(), members[found]):
                self.table[self.row[b], :k] = row[row != b][:k]
            self._known += len(group)


def as_sampler(sampler):
    """A function (labels, seed, epoch, **context) -> plan for any accepted sampler."""
    if sampler is None:
        return None
    if isinstance(sampler, Sampler):
        return sampler.plan
    if callable(getattr(sampler, "fit_resample", None)):
        return _ImblearnSampler(sampler)
    plan = getattr(sampler, "plan", None)
    if callable(plan):
        params = inspect.signature(plan).parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return plan
        return _PlanOnly(sampler)
    _checks.fail("sampler", "None, a kg.samplers sampler, an imbalanced-learn sampler or "
                 "an object with a plan(labels, seed, epoch) method", sampler, TypeError)


class _PlanOnly:
    """A sampler whose plan takes (labels, seed, epoch) only (picklable, unlike a lambda)."""

    def __init__(self, sampler):
        self.sampler = sampler

    def __call__(self, labels, seed, epoch, **context):
        return self.sampler.plan(labels, seed, epoch)


class _ImblearnSampler:
    """Runs an imbalanced-learn under/over-sampler each epoch with a seed derived from
    (seed, epoch), on the generator's feature space (the data for arrays, `features=` or
    thumbnails for images), and takes its `sample_indices_` as the plan."""

    def __init__(self, sampler):
        self.sampler = sampler

    def __call__(self, labels, seed, epoch, **context):
        if labels is None:
            raise ValueError("An imbalanced-learn sampler needs one class label per sample.")
        from sklearn.base import clone

        rng = seeding.rng(seed, seeding.SAMPLER, epoch)
        sampler = clone(self.sampler)
        if "random_state" in sampler.get_params():
            sampler.set_params(random_state=int(rng.integers(2**31)))
        features = context.get("features")
        if features is None:  # Random samplers never look at x
            x = np.arange(len(labels)).reshape(-1, 1)
        else:  # NearMiss, TomekLinks... choose by the features
            x = np.asarray(features[np.arange(len(labels))], np.float32).reshape(len(labels), -1)
        sampler.fit_resample(x, np.asarray(labels))
        if not hasattr(sampler, "sample_indices_"):
            raise TypeError(
                f"{type(sampler).__name__} makes new samples and has no `sample_indices_`, "
                "so it cannot pick samples inside a generator. Use kg.samplers.SMOTE, or "
                "kg.rebalance() on arrays.")
        return rng.permutation(np.asarray(sampler.sample_indices_))
