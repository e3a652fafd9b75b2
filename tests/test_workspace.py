import json
import threading

import pytest

from harness.contracts.solver import render_system_message, resolve_skill_file
from harness.questions import (
    Question,
    QuestionsError,
    make_questions_ref,
    write_questions,
)
from harness.store import init_seed, list_versions, read_version
from harness.tree import HarnessTree, TreePathError
from harness.workspace import (
    BestPointer,
    WorkspaceError,
    copy_workspace,
    drop_empty_run_scratch,
    harness_view,
    init_workspace,
    init_workspace_from_seed,
    promote,
    read_best,
    read_manifest,
    record_run,
    set_current,
    update_best,
)

SKILLS = HarnessTree({"count/SKILL.md": "count carefully", "default-strategy/SKILL.md": "think step by step"})
PROMPTS = HarnessTree({"system_prompt.md": "You are a solver.", "tools/zoom.md": "zoom in"})


@pytest.fixture
def qref(tmp_path):
    path = tmp_path / "data" / "questions.parquet"
    write_questions(path, [Question("q1", "count", "How many?", "A", choices=("1", "2"))])
    return make_questions_ref(path)


@pytest.fixture
def ws(tmp_path, qref):
    root = tmp_path / "ws"
    init_workspace(root, SKILLS, PROMPTS, qref)
    return root


def test_init_layout_and_manifest(ws, qref):
    m = read_manifest(ws)
    assert (m.skills_version, m.prompts_version, m.best, m.history, m.questions_ref) == ("v0", "v0", None, (), qref)
    assert list_versions(ws / "skills") == ["v0"] and list_versions(ws / "prompts") == ["v0"]
    assert json.loads((ws / "manifest.json").read_text())["format"] == 1
    assert (ws / "runs").is_dir()
    assert sorted(p.name for p in ws.parent.iterdir()) == ["data", "ws"]  # no staging left


def test_init_refuses_existing_and_missing_questions(ws, tmp_path, qref):
    with pytest.raises(WorkspaceError, match="already exists"):
        init_workspace(ws, SKILLS, PROMPTS, qref)
    with pytest.raises(QuestionsError, match="does not exist"):
        init_workspace(tmp_path / "ws2", SKILLS, PROMPTS, str(tmp_path / "missing.parquet"))
    assert not (tmp_path / "ws2").exists()


def test_questions_ref_detects_changed_file(tmp_path, qref):
    path = tmp_path / "data" / "questions.parquet"
    write_questions(path, [Question("q9", "count", "Other?", "x")])
    with pytest.raises(QuestionsError, match="changed"):
        init_workspace(tmp_path / "ws", SKILLS, PROMPTS, qref)


def test_record_run_idempotent(ws):
    assert record_run(ws, "r_e1_s1") is True
    assert record_run(ws, "r_e1_s1") is False
    assert record_run(ws, "r_e1_s2") is True
    assert read_manifest(ws).history == ("r_e1_s1", "r_e1_s2")
    assert (ws / "runs" / "r_e1_s1").is_dir()
    (ws / "runs" / "r_e1_s1" / "note.txt").write_text("kept")
    record_run(ws, "r_e1_s1")
    assert (ws / "runs" / "r_e1_s1" / "note.txt").read_text() == "kept"
    for bad in ("a/b", "..", "/abs"):
        with pytest.raises((WorkspaceError, TreePathError)):
            record_run(ws, bad)


def test_record_run_concurrent_threads(ws):
    ids = [f"run{i % 10}" for i in range(60)]
    threads = [threading.Thread(target=record_run, args=(ws, rid)) for rid in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(read_manifest(ws).history) == sorted({*ids})


def test_promote_and_best_pointer_independent_of_current(ws):
    v1 = promote(ws, "skills", SKILLS.with_files({"count/SKILL.md": "count twice"}), {"reason": "accept"})
    assert v1 == "v1" and read_manifest(ws).skills_version == "v1"
    assert read_version(ws / "skills", "v1").meta["parent"] == "v0"
    assert read_best(ws) is None
    best = update_best(ws, "v1", "v0", 0.75, 1)
    assert best == BestPointer("v1", "v0", 0.75, 1)
    v2 = promote(ws, "skills", SKILLS.with_files({"count/SKILL.md": "worse"}))
    assert v2 == "v2"
    m = read_manifest(ws)
    assert m.skills_version == "v2" and m.best == BestPointer("v1", "v0", 0.75, 1)
    with pytest.raises(WorkspaceError, match="'v9' does not exist"):
        update_best(ws, "v9", "v0", 0.9, 2)
    assert read_best(ws) == best
    with pytest.raises(WorkspaceError, match="kind must be"):
        promote(ws, "tools", SKILLS)
    set_current(ws, skills=best.skills)
    assert read_manifest(ws).skills_version == "v1"
    with pytest.raises(WorkspaceError):
        set_current(ws, prompts="v3")


def test_harness_view_is_the_solver_layout(ws):
    promote(ws, "skills", SKILLS.with_files({"count/SKILL.md": "new count"}))
    view = harness_view(ws, "v0", "v0")
    assert sorted(view) == ["skills/count/SKILL.md", "skills/default-strategy/SKILL.md", "system_prompt.md", "tools/zoom.md"]
    assert view["skills/count/SKILL.md"] == "count carefully"
    assert harness_view(ws)["skills/count/SKILL.md"] == "new count"  # current versions by default
    assert resolve_skill_file(view, "ocr") == "skills/default-strategy/SKILL.md"
    msg = render_system_message(view, "count")
    assert "You are a solver." in msg and "zoom in" in msg and "count carefully" in msg


def test_harness_view_refuses_clashing_prompts(ws):
    promote(ws, "prompts", PROMPTS.with_files({"skills/count/SKILL.md": "smuggled"}))
    with pytest.raises(WorkspaceError, match="skills/ paths"):
        harness_view(ws)


def test_init_from_seed_fails_fast_before_touching_existing_workspace(ws, tmp_path):
    record_run(ws, "old_run")
    before = (ws / "manifest.json").read_text()
    init_seed(tmp_path / "seed_bad", SKILLS, PROMPTS, str(tmp_path / "gone.parquet"))
    with pytest.raises(QuestionsError, match="does not exist"):
        init_workspace_from_seed(ws, tmp_path / "seed_bad")
    assert (ws / "manifest.json").read_text() == before  # untouched, not archived
    assert not list(tmp_path.glob("ws.archive-*"))


def test_init_from_seed_archives_old_workspace(ws, tmp_path, qref):
    record_run(ws, "old_run")
    seed_skills = SKILLS.with_files({"count/SKILL.md": "seeded"})
    init_seed(tmp_path / "seed", seed_skills, PROMPTS, qref)
    m = init_workspace_from_seed(ws, tmp_path / "seed")
    assert m.history == () and m.questions_ref == qref
    assert harness_view(ws)["skills/count/SKILL.md"] == "seeded"
    (archive,) = tmp_path.glob("ws.archive-*")
    assert read_manifest(archive).history == ("old_run",)


def test_init_from_seed_into_fresh_dir(tmp_path, qref):
    init_seed(tmp_path / "seed", SKILLS, PROMPTS, qref)
    init_workspace_from_seed(tmp_path / "new", tmp_path / "seed")
    assert read_manifest(tmp_path / "new").skills_version == "v0"


def test_copy_workspace(ws, tmp_path):
    record_run(ws, "r1")
    promote(ws, "skills", SKILLS.with_files({"a/SKILL.md": "x"}))
    (ws / ".cand_tmp" / "cand-1").mkdir(parents=True)
    (ws / ".cand_tmp" / "cand-1" / "f.md").write_text("scratch")
    dst = copy_workspace(ws, tmp_path / "state" / "e1" / "ws")
    assert read_manifest(dst) == read_manifest(ws)
    assert harness_view(dst) == harness_view(ws)
    assert not (dst / ".cand_tmp").exists()
    promote(dst, "skills", SKILLS)  # the copy is independent
    assert read_manifest(ws).skills_version == "v1" and read_manifest(dst).skills_version == "v2"
    with pytest.raises(WorkspaceError, match="already exists"):
        copy_workspace(ws, dst)
    with pytest.raises(WorkspaceError, match="not a workspace"):
        copy_workspace(tmp_path / "data", tmp_path / "x")


def test_copy_workspace_refuses_symlinks(ws, tmp_path):
    (ws / "runs" / "link").symlink_to(tmp_path)
    with pytest.raises(WorkspaceError, match="symlink"):
        copy_workspace(ws, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.pop("best"), "key 'best' is missing"),
        (lambda d: d.update(skills_version="latest"), "skills_version"),
        (lambda d: d.update(format=99), "format 99"),
    ],
)
def test_malformed_manifest(ws, mutate, match):
    d = json.loads((ws / "manifest.json").read_text())
    mutate(d)
    (ws / "manifest.json").write_text(json.dumps(d))
    with pytest.raises(WorkspaceError, match=match):
        read_manifest(ws)


def test_each_version_is_one_file_so_a_workspace_copy_stays_small(ws, tmp_path):
    """DVC hashes every file of every workspace-carrying stage: N versions cost N files, not N trees."""
    for i in range(5):
        promote(ws, "skills", SKILLS.with_files({f"t{i}/SKILL.md": f"rule {i}"}))
    record_run(ws, "r_e1_s1")
    files = sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*") if p.is_file())
    assert files == ["manifest.json", "prompts/v0"] + [f"skills/v{i}" for i in range(6)]
    dst = copy_workspace(ws, tmp_path / "copy")
    assert harness_view(dst, "v3", "v0") == harness_view(ws, "v3", "v0")
    assert harness_view(dst, "v5", "v0")["skills/t4/SKILL.md"] == "rule 4"


def test_copy_skips_empty_run_scratch_but_keeps_history_and_used_scratch(ws, tmp_path):
    for run in ("r1", "r2", "r3"):
        record_run(ws, run)
    (ws / "runs" / "r2" / "notes.txt").write_text("kept")
    dst = copy_workspace(ws, tmp_path / "copy")
    assert read_manifest(dst).history == ("r1", "r2", "r3")
    assert sorted(p.name for p in (dst / "runs").iterdir()) == ["r2"]
    assert (dst / "runs" / "r2" / "notes.txt").read_text() == "kept"
    assert record_run(dst, "r1") is False and (dst / "runs" / "r1").is_dir()  # still known, scratch made again


def test_mark_done_drops_empty_run_scratch_of_the_stage_workspace(ws, tmp_path):
    from harness.loop.state import WORKSPACE, mark_done

    out = tmp_path / "stage"
    dst = copy_workspace(ws, out / WORKSPACE)
    for run in ("r1", "r2"):
        record_run(dst, run)
    (dst / "runs" / "r2" / "notes.txt").write_text("kept")
    assert drop_empty_run_scratch(tmp_path / "no-workspace") == 0
    mark_done(out)
    assert sorted(p.name for p in (dst / "runs").iterdir()) == ["r2"]
    assert read_manifest(dst).history[-2:] == ("r1", "r2")
    assert json.loads((out / "DONE.json").read_text())["done"] is True
