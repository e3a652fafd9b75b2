import json
import sqlite3

import pytest

from harness.log import HarnessLog, RunLogReader
from harness.store import (
    StoreError,
    advance_version,
    extract_run_db,
    init_seed,
    latest_version,
    list_versions,
    next_version,
    parse_version,
    promote_to_seed,
    read_seed,
    read_version,
)
from harness.tree import HarnessTree

SKILLS = HarnessTree({"count/SKILL.md": "count carefully", "default-strategy/SKILL.md": "think"})
PROMPTS = HarnessTree({"system_prompt.md": "You are a solver.", "tools/zoom.md": "zoom in"})


@pytest.mark.parametrize("name, n", [("v0", 0), ("v2", 2), ("v10", 10), ("v123", 123)])
def test_parse_version_accepts(name, n):
    assert parse_version(name) == n


@pytest.mark.parametrize("name", ["v", "v01", "V1", "v1.0", "v-1", "1", "latest", "v1 ", ".v3.tmp-12", "v1.meta.json"])
def test_parse_version_rejects(name):
    assert parse_version(name) is None


def test_list_versions_numeric_order_and_ignores_other_entries(tmp_path):
    for name in ["v2", "v10", "v1", "v9", "v01", "latest", ".staging-abc", "notes"]:
        (tmp_path / name).mkdir()  # directories named like versions (stray entries)
    for name in ["v0", "v11", "v02", ".staging-def", "v3.meta.json"]:
        (tmp_path / name).write_text("{}")  # packed layout: version files (content is not read by listing)
    (tmp_path / "v12").symlink_to(tmp_path / "v11")
    assert list_versions(tmp_path) == ["v0", "v1", "v2", "v9", "v10", "v11"]
    assert latest_version(tmp_path) == "v11"
    assert next_version(tmp_path) == "v12"


def test_empty_or_missing_store(tmp_path):
    assert list_versions(tmp_path / "nope") == []
    assert latest_version(tmp_path) is None
    assert next_version(tmp_path) == "v0"


def test_advance_and_read_version(tmp_path):
    store = tmp_path / "skills"
    assert advance_version(store, SKILLS, {"reason": "init"}) == "v0"
    changed = SKILLS.with_files({"count/SKILL.md": "count twice"})
    assert advance_version(store, changed, {"reason": "accept"}) == "v1"
    v0, v1 = read_version(store, "v0"), read_version(store, "v1")
    assert v0.tree == SKILLS and v1.tree == changed
    assert v1.meta["reason"] == "accept" and v1.meta["fingerprint"] == changed.fingerprint and v1.meta["version"] == "v1"
    assert sorted(p.name for p in store.iterdir()) == ["v0", "v1"]  # one file per version, no staging left
    assert all((store / v).is_file() for v in ("v0", "v1"))
    doc = json.loads((store / "v1").read_text(encoding="utf-8"))
    assert doc["format"] == "harness-version/1" and doc["files"] == dict(changed) and doc["meta"] == v1.meta


def test_advance_past_ten_is_numeric(tmp_path):
    for i in range(12):
        assert advance_version(tmp_path, SKILLS.with_files({"n.md": str(i)})) == f"v{i}"
    assert read_version(tmp_path, "v11").tree["n.md"] == "11"
    assert read_version(tmp_path, "v2").tree["n.md"] == "2"


def test_advance_skips_a_stray_entry_named_like_a_version(tmp_path):
    advance_version(tmp_path, SKILLS)
    (tmp_path / "v1").write_text("stray")
    (tmp_path / "v2").mkdir()
    assert advance_version(tmp_path, SKILLS) == "v3"
    assert (tmp_path / "v1").read_text() == "stray"  # never overwritten
    with pytest.raises(StoreError, match="not a packed harness version"):
        read_version(tmp_path, "v1")


def test_advance_never_overwrites_a_version_taken_meanwhile(tmp_path, monkeypatch):
    """A concurrent writer takes v1 between our listing and our create: we move on to v2."""
    import harness.store as store

    advance_version(tmp_path, SKILLS)
    real_next = store.next_version
    calls = []

    def racing_next(root):
        name = real_next(root)
        if not calls:
            calls.append(name)
            (tmp_path / name).write_bytes(store.pack_version(PROMPTS, {"fingerprint": PROMPTS.fingerprint}))
        return name

    monkeypatch.setattr(store, "next_version", racing_next)
    assert advance_version(tmp_path, SKILLS.with_files({"x.md": "new"})) == "v2"
    assert read_version(tmp_path, "v1").tree == PROMPTS and read_version(tmp_path, "v2").tree["x.md"] == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v0", "v1", "v2"]


def test_packed_version_keeps_exact_text(tmp_path):
    tree = HarnessTree({"a/SKILL.md": "line\r\nü\ttab\n", "b.md": ""})
    advance_version(tmp_path, tree)
    assert read_version(tmp_path, "v0").tree == tree


def test_advance_refuses_bad_input_and_writes_nothing(tmp_path):
    with pytest.raises(StoreError, match="empty"):
        advance_version(tmp_path, HarnessTree())
    with pytest.raises(ValueError):
        advance_version(tmp_path, SKILLS, {"bad": float("nan")})
    with pytest.raises(TypeError):
        advance_version(tmp_path, {"a": "b"})
    assert list(tmp_path.iterdir()) == []


def test_read_version_errors(tmp_path):
    advance_version(tmp_path, SKILLS)
    with pytest.raises(StoreError, match="'v5' does not exist"):
        read_version(tmp_path, "v5")
    with pytest.raises(StoreError, match="not a version name"):
        read_version(tmp_path, "latest")
    doc = json.loads((tmp_path / "v0").read_text(encoding="utf-8"))
    doc["files"]["count/SKILL.md"] = "tampered"
    (tmp_path / "v0").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(StoreError, match="immutable"):
        read_version(tmp_path, "v0")
    for bad, match in ((b"\xff\xfe", "not a packed harness version"), (b"[1, 2]", "format 'list'"),
                       (b'{"format": "other"}', "format 'other'"),
                       (b'{"format": "harness-version/1", "meta": {}, "files": {"a": 1}}', "'files' must map paths to text"),
                       (b'{"format": "harness-version/1", "meta": [], "files": {}}', "'meta' must be an object")):
        (tmp_path / "v0").write_bytes(bad)
        with pytest.raises(StoreError, match=match):
            read_version(tmp_path, "v0")


def test_a_directory_named_like_a_version_is_listed_but_refused(tmp_path):
    (tmp_path / "v0").mkdir()
    assert list_versions(tmp_path) == ["v0"] and advance_version(tmp_path, PROMPTS) == "v1"
    with pytest.raises(StoreError, match="a directory, not a packed harness version"):
        read_version(tmp_path, "v0")


def test_init_and_read_seed(tmp_path):
    seed = init_seed(tmp_path / "seeds" / "base", SKILLS, PROMPTS, "sha256:abc", {"note": "base"})
    again = read_seed(tmp_path / "seeds" / "base")
    assert again.skills == SKILLS and again.prompts == PROMPTS and again.questions_ref == "sha256:abc"
    assert seed.meta["note"] == "base"
    with pytest.raises(StoreError, match="immutable"):
        init_seed(tmp_path / "seeds" / "base", SKILLS, PROMPTS, "x")
    with pytest.raises(StoreError, match="questions_ref"):
        init_seed(tmp_path / "seeds" / "other", SKILLS, PROMPTS, "")
    assert sorted(p.name for p in (tmp_path / "seeds").iterdir()) == ["base"]


def test_read_seed_errors(tmp_path):
    with pytest.raises(StoreError, match="not a seed"):
        read_seed(tmp_path)
    init_seed(tmp_path / "s", SKILLS, PROMPTS, "ref")
    (tmp_path / "s" / "prompts" / "system_prompt.md").write_text("edited")
    with pytest.raises(StoreError, match="fingerprint"):
        read_seed(tmp_path / "s")


def _workspace_with_eval(tmp_path, *, skills_version="v1", prompts_version="v0", questions_ref="sha256:q"):
    skills, prompts = tmp_path / "ws" / "skills", tmp_path / "ws" / "prompts"
    advance_version(skills, SKILLS)
    advance_version(skills, SKILLS.with_files({"count/SKILL.md": "better"}))
    advance_version(prompts, PROMPTS)
    db = tmp_path / "ws" / "runlog.sqlite"
    with HarnessLog(db) as log:
        log.record_run("other_run", "step", "v0", "v0")
        log.insert("predictions", [{"run_id": "other_run", "qid": "q1", "sample_index": 0}])
        log.record_run("eval1", "eval")
        if skills_version is not None:
            log.update_run_versions("eval1", skills_version, prompts_version, questions_ref)
        log.insert("predictions", [{"run_id": "eval1", "qid": f"q{i}", "sample_index": 0, "correct": i % 2} for i in range(5)])
        log.insert("traces", [{"run_id": "eval1", "qid": "q1", "sample_index": 0, "step": 0, "kind": "msg", "content": "hi"}])
    return skills, prompts, db


def test_promote_to_seed(tmp_path):
    skills, prompts, db = _workspace_with_eval(tmp_path)
    seed = promote_to_seed(tmp_path / "seed", skills_store=skills, prompts_store=prompts,
                           skills_version="v1", prompts_version="v0", run_log=db, eval_run_id="eval1")
    assert seed.skills["count/SKILL.md"] == "better" and seed.prompts == PROMPTS
    assert seed.questions_ref == "sha256:q" and seed.meta["eval_run_id"] == "eval1"
    reader = RunLogReader(tmp_path / "seed" / "runlog.sqlite")
    assert {r["run_id"] for r in reader.predictions()} == {"eval1"}
    assert len(reader.predictions()) == 5 and [r["run_id"] for r in reader.runs()] == ["eval1"]


@pytest.mark.parametrize(
    "recorded, requested, match",
    [
        (("v1", "v0"), ("v0", "v0"), "evaluated skills_version 'v1', not the requested 'v0'"),
        (("v1", "v0"), ("v1", "v1"), "evaluated prompts_version 'v0'"),
        ((None, None), ("v1", "v0"), "NULL"),
    ],
)
def test_promote_to_seed_strong_version_check(tmp_path, recorded, requested, match):
    skills, prompts, db = _workspace_with_eval(tmp_path, skills_version=recorded[0], prompts_version=recorded[1])
    with pytest.raises(StoreError, match=match):
        promote_to_seed(tmp_path / "seed", skills_store=skills, prompts_store=prompts,
                        skills_version=requested[0], prompts_version=requested[1], run_log=db, eval_run_id="eval1")
    assert not (tmp_path / "seed").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["ws"]


def test_promote_to_seed_unknown_run_or_missing_questions(tmp_path):
    skills, prompts, db = _workspace_with_eval(tmp_path, questions_ref=None)
    kw = dict(skills_store=skills, prompts_store=prompts, skills_version="v1", prompts_version="v0", run_log=db)
    with pytest.raises(StoreError, match="'nope' is not in the run log"):
        promote_to_seed(tmp_path / "seed", eval_run_id="nope", **kw)
    with pytest.raises(StoreError, match="no questions_ref"):
        promote_to_seed(tmp_path / "seed", eval_run_id="eval1", **kw)
    assert not (tmp_path / "seed").exists()


HARNESS = PROMPTS.merged(SKILLS.prefixed("skills"))  # the native layout stages.eval evaluates


def _tree_eval(tmp_path, *, fingerprint, questions_ref="q.parquet@sha256:ab"):
    db = tmp_path / "ev" / "runlog.sqlite"
    with HarnessLog(db) as log:
        log.record_run("eval_tree", "eval", questions_ref=questions_ref,
                       meta=None if fingerprint is None else {"harness_fingerprint": fingerprint})
        log.insert("predictions", [{"run_id": "eval_tree", "qid": "q1", "sample_index": 4_000_000, "correct": 1}])
    return db


def test_promote_to_seed_of_an_evaluated_tree(tmp_path):
    db = _tree_eval(tmp_path, fingerprint=HARNESS.fingerprint)
    seed = promote_to_seed(tmp_path / "seed", run_log=db, eval_run_id="eval_tree", harness=HARNESS, meta={"note": "x"})
    assert seed.skills == SKILLS and seed.prompts == PROMPTS and seed.questions_ref == "q.parquet@sha256:ab"
    assert seed.meta["harness_fingerprint"] == HARNESS.fingerprint and "skills_version" not in seed.meta
    assert [r["run_id"] for r in RunLogReader(tmp_path / "seed" / "runlog.sqlite").runs()] == ["eval_tree"]


@pytest.mark.parametrize("fingerprint, questions_ref, match", [
    ("0123456789abcdef", "q@sha256:ab", "evaluated the harness with fingerprint 0123456789abcdef, not this one"),
    (None, "q@sha256:ab", "records no harness fingerprint"),
    ("same", None, "no questions_ref"),
])
def test_promote_to_seed_refuses_a_tree_the_run_did_not_evaluate(tmp_path, fingerprint, questions_ref, match):
    db = _tree_eval(tmp_path, fingerprint=HARNESS.fingerprint if fingerprint == "same" else fingerprint, questions_ref=questions_ref)
    with pytest.raises(StoreError, match=match):
        promote_to_seed(tmp_path / "seed", run_log=db, eval_run_id="eval_tree", harness=HARNESS)
    assert not (tmp_path / "seed").exists()


def test_promote_to_seed_versions_and_recorded_fingerprint_must_agree(tmp_path):
    skills, prompts, db = _workspace_with_eval(tmp_path)
    with HarnessLog(db) as log:  # an eval of v1/v0 whose recorded fingerprint is another tree's
        log.record_run("eval2", "eval", "v1", "v0", "sha256:q", meta={"harness_fingerprint": HARNESS.fingerprint})
    kw = dict(skills_store=skills, prompts_store=prompts, skills_version="v1", prompts_version="v0", run_log=db)
    with pytest.raises(StoreError, match="not this one"):
        promote_to_seed(tmp_path / "seed", eval_run_id="eval2", **kw)
    with pytest.raises(StoreError, match="either .* or harness"):
        promote_to_seed(tmp_path / "seed", eval_run_id="eval1", harness=HARNESS, **kw)
    with pytest.raises(StoreError, match="either .* or harness"):
        promote_to_seed(tmp_path / "seed", run_log=db, eval_run_id="eval1")
    assert not (tmp_path / "seed").exists()


def test_extract_run_db_keeps_primary_keys_and_only_that_run(tmp_path):
    _, _, db = _workspace_with_eval(tmp_path)
    out = extract_run_db(db, "eval1", tmp_path / "out.sqlite")
    conn = sqlite3.connect(out)
    original = sqlite3.connect(db)
    sql = "SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY name"
    assert conn.execute(sql).fetchall() == original.execute(sql).fetchall()
    assert conn.execute("SELECT DISTINCT run_id FROM predictions").fetchall() == [("eval1",)]
    assert conn.execute("SELECT COUNT(*) FROM traces").fetchone() == (1,)
    # the PRIMARY KEY survived: a duplicate insert is ignored
    conn.execute("INSERT OR IGNORE INTO predictions (run_id, qid, sample_index) VALUES ('eval1', 'q1', 0)")
    assert conn.execute("SELECT COUNT(*) FROM predictions").fetchone() == (5,)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO predictions (run_id, qid, sample_index) VALUES ('eval1', 'q1', 0)")
    conn.close()
    original.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.sqlite", "ws"]


def test_extract_run_db_missing_run_cleans_temp(tmp_path):
    _, _, db = _workspace_with_eval(tmp_path)
    with pytest.raises(StoreError, match="'ghost' is not in _runs"):
        extract_run_db(db, "ghost", tmp_path / "out.sqlite")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
    with pytest.raises(StoreError, match="already exists"):
        extract_run_db(db, "eval1", db)


def test_extract_run_db_over_fragments(tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with HarnessLog(a) as la, HarnessLog(b) as lb:
        la.record_run("r", "eval", "v0", "v0", "ref")
        la.insert("predictions", [{"run_id": "r", "qid": "q1", "sample_index": 0}])
        lb.insert("predictions", [{"run_id": "r", "qid": "q2", "sample_index": 0}, {"run_id": "x", "qid": "q", "sample_index": 0}])
    out = extract_run_db([a, b], "r", tmp_path / "o.sqlite")
    assert sorted(r["qid"] for r in RunLogReader(out).predictions()) == ["q1", "q2"]
