"""`python -m stages.export --seed`: a seed is written only from the tree the run's holdout evaluated.

A run laid out as the stages leave it (state/init/workspace, state/holdout/{delivered, holdout.json, DONE.json}) is
built with the real workspace, document and stage-marker code; the seed is refused when the holdout is missing or
evaluated another tree, written (with what was measured) when it names this tree, and `--unevaluated` overrides.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import workspace as wsp
from harness.loop.documents import HOLDOUT, DeliveredDoc, HoldoutDoc, write_document
from harness.loop.state import mark_done
from harness.tree import HarnessTree
from stages import export

DELIVERED = HarnessTree({"skills/addition/SKILL.md": "# Addition\n- Carry the tens.\n", "system_prompt.md": "Answer."})


@pytest.fixture
def run(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.jsonl").write_text('{"question": "1+1?", "answer": "2", "task_type": "addition"}\n')
    wsp.init_workspace(tmp_path / "state" / "init" / "workspace", DELIVERED.subtree("skills"),
                       DELIVERED.with_files({"skills/addition/SKILL.md": None}), "q.jsonl", base=tmp_path)
    DELIVERED.save(tmp_path / "state" / "holdout" / "delivered")
    return tmp_path / "state" / "holdout" / "delivered"


def evaluate(delivered: Path, fingerprint: str) -> None:
    holdout = delivered.parent
    write_document(holdout / HOLDOUT, HoldoutDoc(DeliveredDoc("v3", "v1", fingerprint, 0.7, 2), {"base": 0.5, "delivered": 0.75},
                                                 8, False, ""))
    mark_done(holdout, {"stage": "holdout"})


def test_a_seed_from_a_tree_no_holdout_evaluated_is_refused(run: Path, capsys) -> None:
    assert export.main(["--seed", "seeds/a", "--from", str(run)]) == 2
    assert "no finished holdout evaluation beside it" in capsys.readouterr().err
    assert not Path("seeds/a").exists()


def test_a_seed_from_a_tree_the_holdout_did_not_evaluate_is_refused(run: Path, capsys) -> None:
    evaluate(run, "0" * 16)
    assert export.main(["--seed", "seeds/a", "--from", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"fingerprint {DELIVERED.fingerprint}) is not the one the holdout evaluated" in err
    assert not Path("seeds/a").exists()


def test_the_evaluated_tree_is_seeded_with_what_was_measured(run: Path, capsys) -> None:
    evaluate(run, DELIVERED.fingerprint)
    assert export.main(["--seed", "seeds/a", "--from", str(run)]) == 0
    out = capsys.readouterr().out
    assert "test accuracy 0.500 -> 0.750 (base -> delivered, 8 questions); no certificate" in out
    meta = json.dumps(json.loads(next(Path("seeds/a").rglob("seed.json")).read_text()))
    assert "0.500 -> 0.750" in meta


def test_unevaluated_writes_the_seed_and_says_so(run: Path, capsys) -> None:
    assert export.main(["--seed", "seeds/b", "--from", str(run), "--unevaluated"]) == 0
    assert "writing the seed anyway (--unevaluated)" in capsys.readouterr().err
    assert next(Path("seeds/b").rglob("seed.json")).is_file()


def test_a_tree_that_is_not_a_delivered_harness_is_refused_in_one_line_and_nothing_is_written(tmp_path: Path, capsys,
                                                                                               monkeypatch) -> None:
    """--to and --seed from an empty tree, a tree with a non-UTF-8 file or a symlink, and --seed from a tree with no
    run around it: exit 2, one `error: --from ...` line naming why (no traceback), and no --to / --seed directory."""
    monkeypatch.chdir(tmp_path)
    trees = {name: tmp_path / name for name in ("empty", "latin", "linked", "lone")}
    for tree in trees.values():
        tree.mkdir()
    (trees["latin"] / "system_prompt.md").write_bytes("R\xe9ponds.\n".encode("latin-1"))
    (trees["linked"] / "elsewhere.md").write_text("Answer.\n")
    (trees["linked"] / "system_prompt.md").symlink_to(trees["linked"] / "elsewhere.md")
    DELIVERED.save(trees["lone"])
    cases = [(["--to", "out_empty", "--from", str(trees["empty"])], "no system_prompt.md"),
             (["--to", "out_latin", "--from", str(trees["latin"])], "system_prompt.md"),
             (["--to", "out_linked", "--from", str(trees["linked"])], "symlink"),
             (["--seed", "seed_lone", "--from", str(trees["lone"]), "--unevaluated"], "cannot read the run's questions reference")]
    for argv, why in cases:
        assert export.main(argv) == 2, argv
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: --from {argv[3]}") and why in lines[0], err
        assert not Path(argv[1]).exists(), argv
