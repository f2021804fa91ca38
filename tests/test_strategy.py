"""`sampling_strategy` resolution: one function per kind of strategy, behind a table."""

import numpy as np
import pytest

from kerasgen.samplers import _strategy as strategy
from kerasgen import samplers

LABELS = np.array([0] * 50 + [1] * 20 + [2] * 5)


@pytest.mark.parametrize("given, kind", [
    ("auto", "name"), ("not majority", "name"), (0.5, "ratio"), (1, "ratio"),
    ({1: 30}, "dict"), (lambda y: {1: 30}, "callable"),
])
def test_each_form_of_strategy_has_its_kind(given, kind):
    assert strategy.strategy_kind(given) == kind
    assert kind in strategy.RESOLVERS


@pytest.mark.parametrize("given, kind", [
    ("all", "name"), (0.6, "ratio"), ({0: 30}, "dict"), (lambda y: {0: 30}, "callable"),
])
def test_each_kind_is_resolved_by_its_function_in_the_table(monkeypatch, given, kind):
    labels = LABELS if kind != "ratio" else (LABELS > 0).astype(int)
    calls = []
    real = strategy.RESOLVERS[kind]

    def spy(value, classes):
        calls.append((value, classes.kind))
        return real(value, classes)

    monkeypatch.setitem(strategy.RESOLVERS, kind, spy)
    for other in set(strategy.RESOLVERS) - {kind}:
        monkeypatch.setitem(strategy.RESOLVERS, other, None)  # calling another fails
    targets, _ = strategy.resolve_strategy(labels, given, "under")
    assert calls == [(given, "under")]
    expected = {"name": {0: 5, 1: 5, 2: 5}, "ratio": {0: 41, 1: 25},
                "dict": {0: 30, 1: 20, 2: 5}, "callable": {0: 30, 1: 20, 2: 5}}
    assert targets == expected[kind]


def test_every_named_strategy_has_its_function():
    assert set(strategy.NAMED) == set(samplers.OVER_STRATEGIES) | set(samplers.UNDER_STRATEGIES)
    classes = strategy.Classes(samplers.class_counts(LABELS), "over")
    assert {name: f(classes) for name, f in strategy.NAMED.items()} == {
        "auto": [1, 2], "minority": [2], "majority": [0], "not minority": [0, 1],
        "not majority": [1, 2], "all": [0, 1, 2]}
    under = strategy.Classes(samplers.class_counts(LABELS), "under")
    assert strategy.NAMED["auto"](under) == [0, 1]


def test_the_resolvers_give_imbalanced_learns_counts_and_chosen_classes():
    classes = strategy.Classes(samplers.class_counts(LABELS), "over", y=LABELS)
    assert strategy.resolve_name("minority", classes) == ({0: 50, 1: 20, 2: 50}, [2])
    assert strategy.resolve_dict({1: 30}, classes) == ({0: 50, 1: 30, 2: 5}, [1])
    assert strategy.resolve_callable(lambda y: {2: len(y) // 5}, classes) == (
        {0: 50, 1: 20, 2: 15}, [2])
    two = strategy.Classes({0: 40, 1: 10}, "over")
    assert strategy.resolve_ratio(0.5, two) == ({0: 40, 1: 20}, [1])
    two_under = strategy.Classes({0: 40, 1: 10}, "under")
    assert strategy.resolve_ratio(0.5, two_under) == ({0: 20, 1: 10}, [0])


def test_a_callable_gets_y_once():
    calls = []

    def half(y):
        calls.append(len(y))
        return {1: 10}

    assert strategy.resolve_strategy(LABELS, half, "under") == ({0: 50, 1: 10, 2: 5}, [1])
    assert calls == [len(LABELS)]
    with pytest.raises(ValueError, match="as a callable must return a dict"):
        strategy.resolve_strategy(LABELS, lambda y: [1], "under")


def test_ties_break_toward_the_smaller_class_id():
    classes = strategy.Classes({0: 5, 1: 9, 2: 9, 3: 5}, "over")
    assert (classes.majority, classes.minority) == (1, 0)
    assert classes.name(1) == "1"
    named = strategy.Classes({0: 5, 1: 9}, "over", class_names=["cat", "dog"])
    assert named.name(1) == "'dog'" and named.class_id("dog") == 1
    with pytest.raises(ValueError, match="names class 'fox', which is not present"):
        named.class_id("fox")
