import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.kernel.batching import Batches, BatchParams, make_batches, mix_by_correctness


def pool(sizes):
    return {f"{t}_{i:03d}": t for t, n in sizes.items() for i in range(n)}


sizes_strategy = st.dictionaries(st.sampled_from("abcdefgh"), st.integers(1, 40), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(sizes=sizes_strategy, batch_size=st.integers(2, 30), m=st.integers(1, 5), seed=st.integers(0, 3), epoch=st.integers(1, 3), data=st.data())
def test_batching_properties(sizes, batch_size, m, seed, epoch, data):
    m = min(m, batch_size - 1)
    task_type_of = pool(sizes)
    correctness = {q: data.draw(st.sampled_from([True, False, None])) for q in task_type_of}
    params = BatchParams(batch_size, m, small_class_threshold=data.draw(st.integers(0, 10)))
    batches = make_batches(task_type_of, params, seed=seed, epoch=epoch, correctness=correctness)
    flat = [q for b in batches.batches for q in b]
    assert sorted(flat) == sorted(task_type_of)  # every question exactly once per epoch
    assert len(batches.batches) == math.ceil(len(task_type_of) / batch_size)
    lengths = [len(b) for b in batches.batches]
    assert max(lengths) <= batch_size and max(lengths) - min(lengths) <= 1
    # min_class_per_batch: every (batch, task type) below min(m, class size) is reported, never silent
    reported = {(i, t) for i, t, _ in batches.shortfalls}
    for i, b in enumerate(batches.batches):
        for t, n in Counter(task_type_of[q] for q in b).items():
            if n < min(m, sizes[t]):
                assert (i, t) in reported
    assert make_batches(task_type_of, params, seed=seed, epoch=epoch, correctness=correctness) == batches


def test_default_sim_shape_has_every_class_in_every_batch_without_shortfall():
    task_type_of = pool({f"t{i}": 20 for i in range(11)})
    batches = make_batches(task_type_of, BatchParams(44, 2), seed=0, epoch=1)
    assert [len(b) for b in batches.batches] == [44] * 5 and batches.shortfalls == ()
    for b in batches.batches:
        assert set(Counter(task_type_of[q] for q in b).values()) == {4}


def test_small_classes_packed_whole():
    task_type_of = pool({"big": 40, "s1": 3, "s2": 5})
    batches = make_batches(task_type_of, BatchParams(12, 2, small_class_threshold=6), seed=1, epoch=1)
    for small in ("s1", "s2"):
        holders = [i for i, b in enumerate(batches.batches) if any(task_type_of[q] == small for q in b)]
        assert len(holders) == 1


def test_correctness_mixing_uses_is_false_exactly():
    qids = ["w1", "w2", "u1", "r1", "r2", "r3"]
    mixed = mix_by_correctness(qids, {"w1": False, "w2": False, "u1": None, "r1": True})
    assert sorted(mixed) == sorted(qids) and mixed.index("w1") < mixed.index("w2")
    assert mixed.index("w2") - mixed.index("w1") >= 2  # spread evenly, not bunched; None is not wrong
    assert mix_by_correctness(["a", "b"], {"a": None, "b": True}) == ["a", "b"]  # no wrong answer: no mixing
    # every batch of a task type with wrong answers gets some of them
    task_type_of = pool({"a": 40})
    correctness = {q: i % 4 != 0 for i, q in enumerate(sorted(task_type_of))}
    batches = make_batches(task_type_of, BatchParams(10, 2), seed=0, epoch=1, correctness=correctness)
    assert all(any(correctness[q] is False for q in b) for b in batches.batches)


def test_parameter_self_check_and_seed_dependence():
    with pytest.raises(ValueError, match="min_class_per_batch"):
        make_batches(pool({"a": 5}), BatchParams(4, 4), seed=0, epoch=1)
    task_type_of = pool({"a": 30, "b": 30})
    one = make_batches(task_type_of, BatchParams(10, 2), seed=0, epoch=1)
    assert make_batches(task_type_of, BatchParams(10, 2), seed=0, epoch=2) != one
    assert Batches.from_json(one.to_json()) == one
