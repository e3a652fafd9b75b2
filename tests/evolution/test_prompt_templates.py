"""Meta-prompts are files (issue 14 item 3): package templates, evolve.prompts_dir, $domain from the benchmark config."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.contracts.evolution import EDIT_OPS_CONTRACT, parse_edit_ops
from harness.evolution.prompts import TEMPLATE_CONTRACTS, TEMPLATES_DIR, MetaPrompts, PromptTemplateError, skill_editor_messages
from harness.pipeline.code_fingerprint import closure_files

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_template_is_a_shipped_file_and_only_the_simulator_speaks_of_videos(compose_cfg) -> None:
    assert sorted(p.stem for p in TEMPLATES_DIR.glob("*.md")) == sorted(TEMPLATE_CONTRACTS)
    assert not any("video" in p.read_text() for p in TEMPLATES_DIR.glob("*.md"))
    sim = MetaPrompts.load(compose_cfg().benchmark.domain)
    assert "questions about videos" in sim.system("skill_editor")
    jsonl = compose_cfg(["benchmark=jsonl", f"benchmark.path={REPO_ROOT / 'examples' / 'own-run' / 'questions.jsonl'}", "llm=openai"], tiny=False)
    real = MetaPrompts.load(jsonl.benchmark.domain)
    assert all("video" not in text for text in real.systems.values())
    assert real.system("diagnoser").startswith(f"You diagnose one failure of an AI agent that answers {jsonl.benchmark.domain}.")


def test_a_prompts_dir_overrides_a_subset_and_the_contract_stays_product_code(tmp_path: Path) -> None:
    (tmp_path / "skill_editor.md").write_text("You edit the skill file of a tax assistant that answers $domain. Be brief.\n")
    prompts = MetaPrompts.load("questions about tax law", tmp_path)
    system = prompts.system("skill_editor")
    assert system == f"You edit the skill file of a tax assistant that answers questions about tax law. Be brief.\n{EDIT_OPS_CONTRACT}"
    assert prompts.sources["skill_editor"] == str(tmp_path / "skill_editor.md")
    assert prompts.sources["diagnoser"] == str(TEMPLATES_DIR / "diagnoser.md")
    messages = skill_editor_messages(task_type="vat", skill_file="skills/vat/SKILL.md", skill_text="## Rules\n", cases=[], diagnoses=[],
                                     rejected=[], edit_budget=1, prompts=prompts)
    assert messages[0].content == system
    assert parse_edit_ops('<edit op="add"><new>Cite the article.</new></edit>').edits  # the reply format is unchanged


def test_bad_prompts_dirs_and_templates_are_named(tmp_path: Path) -> None:
    (tmp_path / "skil_editor.md").write_text("typo")
    with pytest.raises(PromptTemplateError, match="skil_editor.md is not a template; expected files named diagnoser.md"):
        MetaPrompts.load("q", tmp_path)
    (tmp_path / "skil_editor.md").unlink()
    (tmp_path / "momentum.md").write_text("Costs $5 per $item")
    with pytest.raises(PromptTemplateError, match="momentum.md: bad placeholder"):
        MetaPrompts.load("q", tmp_path)
    with pytest.raises(PromptTemplateError, match="is not a directory"):
        MetaPrompts.load("q", tmp_path / "missing")


def test_a_stage_fingerprint_includes_the_templates_it_reads() -> None:
    templates = {f"harness/evolution/templates/{name}.md" for name in TEMPLATE_CONTRACTS}
    for stage in ("stages.evolve", "stages.slow"):
        files = {p.relative_to(REPO_ROOT).as_posix() for p in closure_files([stage], REPO_ROOT)}
        assert templates <= files, stage
    assert not templates & {p.relative_to(REPO_ROOT).as_posix() for p in closure_files(["stages.library"], REPO_ROOT)}
