"""harness/loop/documents.py: typed inter-stage documents, one serializer."""

import json

import pytest

from harness.kernel.types import CaseSample, Edit, EditApplication, EvolutionRecord, ToolCasePack
from harness.loop.documents import (
    CandidateDoc,
    DeliveredDoc,
    DocumentError,
    EvolveDoc,
    HoldoutDoc,
    RolloutDoc,
    SkippedDoc,
    read_document,
    write_document,
)


def _evolve_doc():
    rec = EvolutionRecord("t", "t.md", "old", "new", edits=[Edit("add", "x")],
                          apply_report=[EditApplication(Edit("add", "x"), "applied")], usd=0.25)
    return EvolveDoc(run_id="r_e1_s1", method="reflective", edit_budget=3,
                     candidates=[CandidateDoc("t", ["t", "u"], "t.md", ["q1"], rec)],
                     skipped=[SkippedDoc("v", ["v"], "v.md", "skipped_no_change", "why", edits_proposed=0, h2={"k": [1]})],
                     system_cases=[CaseSample("q1", "t", "Q?", None, "A", False)],
                     tool_packs={"calc": ToolCasePack("calc", 1, calls=2, errors=1, examples={"a": "b"})}, diagnosis_usd=1)


def test_round_trip_rebuilds_nested_dataclasses(tmp_path):
    doc = _evolve_doc()
    write_document(tmp_path / "evolve.json", doc)
    back = read_document(tmp_path / "evolve.json", EvolveDoc)
    assert back == EvolveDoc(**{**doc.__dict__, "diagnosis_usd": 1.0})
    assert isinstance(back.candidates[0].record.apply_report[0].edit, Edit)
    rollout = RolloutDoc("r", 1001, "v0", "v0", {"q1": True, "q2": None})
    write_document(tmp_path / "outcomes.json", rollout)
    assert read_document(tmp_path / "outcomes.json", RolloutDoc) == rollout
    assert list(json.loads((tmp_path / "outcomes.json").read_text())["outcomes"]) == ["q1", "q2"]  # order kept
    holdout = HoldoutDoc(DeliveredDoc("v3", "v1", "abc", 0.5, None), {"base": 0.1, "delivered": 0.5}, 10, False, "")
    write_document(tmp_path / "holdout.json", holdout)
    assert read_document(tmp_path / "holdout.json", HoldoutDoc) == holdout


def test_missing_extra_and_mistyped_fields_name_file_and_field(tmp_path):
    path = tmp_path / "outcomes.json"
    path.write_text(json.dumps({"run_id": "r", "sample_index": 1, "skills_version": "v0", "prompts_version": "v0", "outcomes": {}}))
    with pytest.raises(DocumentError, match=r"outcomes.json: RolloutDoc missing key\(s\) \['stopped'\]"):
        read_document(path, RolloutDoc)
    path.write_text(json.dumps({**RolloutDoc.stopped_at("r").__dict__, "extra": 1}))
    with pytest.raises(DocumentError, match=r"unexpected key\(s\) \['extra'\]"):
        read_document(path, RolloutDoc)
    path.write_text(json.dumps({**RolloutDoc.stopped_at("r").__dict__, "outcomes": {"q": "yes"}}))
    with pytest.raises(DocumentError, match=r"outcomes.json.outcomes\['q'\]: expected bool"):
        read_document(path, RolloutDoc)
    path.write_text(json.dumps({**RolloutDoc.stopped_at("r").__dict__, "sample_index": True}))
    with pytest.raises(DocumentError, match=r"sample_index: expected int"):
        read_document(path, RolloutDoc)
