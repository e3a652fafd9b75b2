from __future__ import annotations

import asyncio

from harness.h2.adapters import Rollout
from harness.h2.library import Experience, Library
from harness.h2.roles import FunctionResponder, Selector, parse_choice
from harness.h2.run import improve_task
from harness.h2.selection import Final, anonymise, select_final, selection_seed
from harness.tree import HarnessTree

from .conftest import BASE, ToyTask, level, make_roles


def final(label, deliverable="level 1\n", ok=True):
    tree = HarnessTree({"AGENTS.md": f"level: {label}\n"})
    return Final(label, tree, Rollout(label, tree.fingerprint, ok, deliverable if ok else "", error=None if ok else "boom"))


def test_anonymisation_is_seeded_by_task_k_mode():
    labels = ["final1", "final2", "final3"]
    a = anonymise(labels, "task-1", 3, "parallel")
    assert a == anonymise(labels, "task-1", 3, "parallel") and sorted(a.values()) == labels and list(a) == ["A", "B", "C"]
    variants = {tuple(anonymise(labels, f"task-{i}", 3, "parallel").values()) for i in range(12)}
    assert len(variants) > 1  # the order really depends on the seed
    assert selection_seed("t", 3, "parallel") != selection_seed("t", 3, "sequential")


def _select(finals, selector, k=None):
    return asyncio.run(select_final(finals, k=k or len(finals), mode="parallel", task_id="t", task_header="Task type: x", prompt="p", selector=selector, key="h2-x-selector-t"))


def test_k1_single_final_is_trivial_without_selector_call():
    calls = []
    sel = Selector(FunctionResponder(lambda r, m, k: calls.append(k) or "```choice\nA\n```"))
    s, call = _select([final("final1")], sel)
    assert s.method == "trivial" and s.chosen == "final1" and call is None and calls == []


def test_selector_sees_only_anonymous_deliverables_and_choice_is_parsed():
    seen = []

    def fn(role, messages, key):
        seen.append(messages[-1].content)
        return "```choice\nB\n```\n<why>B is complete</why>"

    s, call = _select([final("final1", "x\n"), final("final2", "y\n"), final("final3", "z\n")], Selector(FunctionResponder(fn)))
    assert s.method == "selector" and s.chosen == s.anon["B"] and s.why == "B is complete" and call is not None
    assert "final1" not in seen[0] and "level:" not in seen[0] and "## Candidate A" in seen[0]


def test_non_answers_dropped_and_selector_failure_falls_back():
    sel = Selector(FunctionResponder(lambda r, m, k: "I like the second one"))
    s, _ = _select([final("final1", ok=False), final("final2"), final("final3")], sel)
    assert s.dropped[0][0] == "final1" and "dead" in s.dropped[0][1]
    assert s.method == "fallback" and s.chosen == "final2" and "no ```choice block" in s.error
    s2, _ = _select([final("final1", ok=False), final("final2", ok=False)], sel)
    assert s2.method == "base" and s2.chosen is None
    assert parse_choice("```choice\nZ\n```", ["A", "B"])[2] == "choice 'Z' is not one of the candidates ['A', 'B']"


def test_experience_kept_only_with_cue_lesson_evidence():
    assert Experience.from_mapping({"cue": "a", "lesson": "b", "evidence": "c", "confidence": "0.4"}).confidence == 0.4
    for missing in ("cue", "lesson", "evidence"):
        d = {"cue": "a", "lesson": "b", "evidence": "c"}
        d[missing] = "  "
        assert Experience.from_mapping(d) is None


def test_library_layout_stream_order_and_index_rebuilt_from_disk(tmp_path):
    lib = Library(tmp_path, "tag1", "parallel", "accounting")
    exp = Experience("cue", "lesson", "evidence", 0.5)
    lib.adopt("task-b", 1, BASE, exp)
    lib.adopt("task-a", 0, BASE.with_files({"AGENTS.md": "level: 9\n"}), exp)
    d = tmp_path / "tag1" / "parallel" / "accounting"
    assert (d / "harnesses" / "task-a" / "harness" / "AGENTS.md").read_text() == "level: 9\n"
    assert (d / "harnesses" / "task-a" / "EXPERIENCE.md").read_text().startswith("# Experience from task task-a")
    index = (d / "INDEX.md").read_text()
    assert index.index("task-a") < index.index("task-b")
    assert [e.task_id for e in lib.visible(1)] == ["task-a"] and lib.visible(0) == []
    assert "task-b" not in lib.context_files(1)["INDEX.md"]
    (d / "INDEX.md").unlink()
    (d / "harnesses" / "task-b" / "entry.json").unlink()  # an interrupted write is not an entry
    lib.rebuild_index()
    assert "task-b" not in (d / "INDEX.md").read_text()


def test_auto_apply_off_by_default_and_on_takes_latest_adopted(tmp_path):
    lib = Library(tmp_path, "tag1", "parallel", "toys")
    default = ToyTask().base
    adopted = default.with_files({"AGENTS.md": "level: 7\n"})
    lib.adopt("toy-0", 0, adopted, Experience("c", "l", "e"))
    assert lib.base_for(1, default, auto_apply=False)[0] == default
    assert lib.base_for(1, default, auto_apply=True)[0] == adopted
    assert lib.base_for(0, default, auto_apply=True)[0] == default  # no earlier entry


def test_round_writes_library_and_later_task_sees_it(tmp_path):
    lib = Library(tmp_path / "lib", "t1", "parallel", "toys")
    r0 = asyncio.run(improve_task(ToyTask(task_id="toy-0"), make_roles(), work_dir=tmp_path / "w0", k=1, run_tag="t1", library=lib, stream_index=0))
    assert r0.summary["library"].startswith("written") and r0.summary["experience"]["lesson"] == "raise the level"
    t1 = ToyTask(task_id="toy-1")
    r1 = asyncio.run(improve_task(t1, make_roles(), work_dir=tmp_path / "w1", k=1, run_tag="t1", library=lib, stream_index=1))
    assert "toy-0" in (tmp_path / "w1" / "contexts" / "inv1" / "library" / "INDEX.md").read_text()
    assert r1.summary["base_fingerprint"] == t1.base.fingerprint  # auto_apply off: base unchanged
    r2 = asyncio.run(improve_task(ToyTask(task_id="toy-2"), make_roles(), work_dir=tmp_path / "w2", k=1, run_tag="t1", library=lib, stream_index=2, auto_apply=True))
    assert r2.summary["base_source"].startswith("library entry toy-1") and level(HarnessTree.load(tmp_path / "lib/t1/parallel/toys/harnesses/toy-1/harness")) == 2


def test_reflection_without_evidence_is_not_written(tmp_path):
    lib = Library(tmp_path / "lib", "t1", "parallel", "toys")
    roles = make_roles(reflector=lambda r, m, k: '<experience>{"cue": "x", "lesson": "y", "evidence": ""}</experience>')
    r = asyncio.run(improve_task(ToyTask(), roles, work_dir=tmp_path / "w", k=1, run_tag="t1", library=lib))
    assert "experience dropped (cue, lesson or evidence is empty)" in r.summary["library"] and lib.entries() == []
