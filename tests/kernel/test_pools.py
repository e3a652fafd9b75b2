from collections import Counter

import pytest

from harness.kernel.pools import Pools, split_pools


def questions(sizes):
    return [(f"{t}_{i:03d}", t) for t, n in sizes.items() for i in range(n)]


def test_split_is_disjoint_sized_and_keeps_minimums():
    qs = questions({"a": 100, "b": 45, "c": 60})
    pools = split_pools(qs, test_size=60, val_size=60, diagnosis_size=40, eval_min_per_class=10, seed=1)
    assert (len(pools.test), len(pools.validation), len(pools.diagnosis)) == (60, 60, 40)
    assert not (set(pools.test) & set(pools.validation)) and not (set(pools.test) | set(pools.validation)) & set(pools.diagnosis)
    test_counts = Counter(pools.task_type_of[q] for q in pools.test)
    assert test_counts == Counter({"a": 29, "b": 13, "c": 18})  # natural distribution 100:45:60 of 60
    assert min(Counter(pools.task_type_of[q] for q in pools.validation).values()) >= 10


def test_deterministic_and_input_order_free():
    qs = questions({"a": 30, "b": 30})
    kw = dict(test_size=20, val_size=20, diagnosis_size=10, eval_min_per_class=5, seed=4)
    assert split_pools(qs, **kw) == split_pools(list(reversed(qs)), **kw)
    assert split_pools(qs, **kw).test != split_pools(qs, **{**kw, "seed": 5}).test


def test_impossible_minimum_names_the_class():
    with pytest.raises(ValueError, match="'b'.*eval_min_per_class=10"):
        split_pools(questions({"a": 60, "b": 15}), test_size=20, val_size=20, diagnosis_size=0, eval_min_per_class=10, seed=0)
    with pytest.raises(ValueError, match="diagnosis_size=50"):
        split_pools(questions({"a": 60}), test_size=20, val_size=20, diagnosis_size=50, eval_min_per_class=5, seed=0)


def test_val_correct_ratio():
    qs = [(q, t, i % 2 == 0) for i, (q, t) in enumerate(questions({"a": 80}))]
    pools = split_pools(qs, test_size=20, val_size=20, diagnosis_size=10, eval_min_per_class=5, seed=0, val_correct_ratio=0.25)
    known = {q: c for q, _, c in qs}
    assert sum(known[q] for q in pools.validation) == 5
    with pytest.raises(ValueError, match="correctness"):
        split_pools(questions({"a": 80}), test_size=20, val_size=20, diagnosis_size=10, eval_min_per_class=5, seed=0, val_correct_ratio=0.5)


def test_pools_json_roundtrip_and_by_task_type():
    pools = split_pools(questions({"a": 30, "b": 30}), test_size=10, val_size=10, diagnosis_size=10, eval_min_per_class=5, seed=0)
    assert Pools.from_json(pools.to_json()) == pools
    assert set(pools.by_task_type("validation")) == {"a", "b"}
