"""train.momentum_check=per_file (issue 26, type regressions): a momentum rewrite of a skill file is kept only if R2
answers that file's validation questions at least as well as R did (harness/loop/slow_update.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import workspace as wsp
from harness.config.errors import ConfigError
from harness.config.load import load_config
from harness.loop.slow_update import EvalRun, SlowDeps, _check_momentum_files
from harness.store import read_version, read_version_tree
from harness.tree import HarnessTree

TYPES = ("alpha", "beta", "gamma")
PER_TYPE = 4


def _unused(*_args, **_kwargs):
    raise AssertionError("the momentum check runs no rollouts and calls no model")


def _setup(tmp_path: Path):
    from conftest import slow_setup

    ws, deps, skills, _ = slow_setup(tmp_path, TYPES, PER_TYPE, rollout=_unused, traces=_unused, probation_verdict=_unused,
                                     momentum_check="per_file")
    return ws, deps, skills


def _outcomes(right: dict[str, int]) -> dict[str, bool]:
    """`right[t]` of type t's PER_TYPE questions answered right."""
    return {f"{t}{i}": i < right[t] for t in TYPES for i in range(PER_TYPE)}


def test_a_rewrite_r2_answers_worse_goes_back_and_the_others_stay(tmp_path):
    ws, deps, skills = _setup(tmp_path)
    r_version = wsp.read_manifest(ws).skills_version
    momentum = wsp.promote(ws, "skills", skills.with_files({"alpha/SKILL.md": "alpha bad rule", "beta/SKILL.md": "beta good rule"}),
                           {"reason": "momentum"})
    r = EvalRun("R", r_version, "v0", _outcomes({"alpha": 3, "beta": 1, "gamma": 2}))
    r2 = EvalRun("R2", momentum, "v0", _outcomes({"alpha": 1, "beta": 3, "gamma": 2}))
    run, reverted = _check_momentum_files(deps, r, r2, r_version)
    assert reverted == ["alpha/SKILL.md"]
    current = wsp.read_manifest(ws).skills_version
    assert current == run.skills_version and current not in (r_version, momentum)
    tree = read_version_tree(ws / "skills", current)
    assert tree["alpha/SKILL.md"] == "alpha v0" and tree["beta/SKILL.md"] == "beta good rule"
    assert read_version(ws / "skills", current).meta["reason"] == "momentum check: reverted"
    # the run describing the current version: R's answers where the file went back, R2's elsewhere
    assert [run.outcomes[f"alpha{i}"] for i in range(PER_TYPE)] == [True, True, True, False]
    assert [run.outcomes[f"beta{i}"] for i in range(PER_TYPE)] == [True, True, True, False]
    assert run.run_id == "R2" and run.acc == pytest.approx((3 + 3 + 2) / 12)


def test_a_tie_keeps_the_rewrite(tmp_path):
    ws, deps, skills = _setup(tmp_path)
    r_version = wsp.read_manifest(ws).skills_version
    momentum = wsp.promote(ws, "skills", skills.with_files({"gamma/SKILL.md": "gamma rule"}), {"reason": "momentum"})
    r = EvalRun("R", r_version, "v0", _outcomes({"alpha": 3, "beta": 1, "gamma": 2}))
    r2 = EvalRun("R2", momentum, "v0", _outcomes({"alpha": 0, "beta": 0, "gamma": 2}))  # other types: not momentum's
    run, reverted = _check_momentum_files(deps, r, r2, r_version)
    assert reverted == [] and run is r2 and wsp.read_manifest(ws).skills_version == momentum


def test_every_rewrite_reverted_is_r_version_again(tmp_path):
    ws, deps, skills = _setup(tmp_path)
    r_version = wsp.read_manifest(ws).skills_version
    momentum = wsp.promote(ws, "skills", skills.with_files({"alpha/SKILL.md": "alpha bad rule"}), {"reason": "momentum"})
    r = EvalRun("R", r_version, "v0", _outcomes({"alpha": 4, "beta": 1, "gamma": 2}))
    r2 = EvalRun("R2", momentum, "v0", _outcomes({"alpha": 2, "beta": 1, "gamma": 2}))
    run, reverted = _check_momentum_files(deps, r, r2, r_version)
    assert reverted == ["alpha/SKILL.md"]
    assert wsp.read_manifest(ws).skills_version == r_version == run.skills_version
    assert run.outcomes == r.outcomes


def test_a_file_r_did_not_measure_as_it_was_is_not_judged(tmp_path):
    """A probation rollback after R changed alpha's file: R's answers describe neither text, so no verdict on it."""
    ws, deps, skills = _setup(tmp_path)
    r_version = wsp.promote(ws, "skills", skills.with_files({"alpha/SKILL.md": "alpha accepted edit"}), {"reason": "gate accepted"})
    rolled = wsp.promote(ws, "skills", skills, {"reason": "probation rollback"})
    momentum = wsp.promote(ws, "skills", skills.with_files({"alpha/SKILL.md": "alpha v0 + momentum"}), {"reason": "momentum"})
    r = EvalRun("R", r_version, "v0", _outcomes({"alpha": 4, "beta": 1, "gamma": 2}))
    r2 = EvalRun("R2", momentum, "v0", _outcomes({"alpha": 0, "beta": 1, "gamma": 2}))
    run, reverted = _check_momentum_files(deps, r, r2, rolled)
    assert reverted == [] and wsp.read_manifest(ws).skills_version == momentum


def test_the_key_is_validated():
    assert load_config(["train.momentum_check=per_file"], env_file=None, environ={}).train.momentum_check == "per_file"
    with pytest.raises(ConfigError, match="train.momentum_check = 'sometimes': must be none or per_file"):
        load_config(["train.momentum_check=sometimes"], env_file=None, environ={})


# ---------------------------------------------------------------- train.type_check_drop (epoch-end check of installs)


def _epoch(tmp_path: Path):
    from harness.loop.train_state import TrainState

    ws, deps, skills = _setup(tmp_path)
    state = TrainState()
    state.begin_epoch("v0", "v0", skills.to_dict())
    installed = wsp.promote(ws, "skills", skills.with_files({"alpha/SKILL.md": "alpha harmful edit", "beta/SKILL.md": "beta good edit"}),
                            {"reason": "gate accepted"})
    return ws, deps, state, installed


def _type_check(deps: SlowDeps, state, installed: str, prev_right: dict[str, int], r_right: dict[str, int]):
    """R answered `installed` with `r_right`, the epoch start `prev_right`; the check at drop 0.1, and the skills
    tree it leaves current (a new version whenever it reverted something)."""
    from harness.loop.slow_update import _check_types

    ws = deps.workspace_dir
    run, reverted = _check_types(deps, state, EvalRun("R", installed, "v0", _outcomes(r_right)), _outcomes(prev_right), 0.1)
    current = wsp.read_manifest(ws).skills_version
    assert run.skills_version == current and (current != installed) == bool(reverted)
    return run, reverted, read_version_tree(ws / "skills", current)


def test_type_check_reverts_a_file_whose_type_lost_more_than_the_drop(tmp_path):
    ws, deps, state, installed = _epoch(tmp_path)
    # gamma's file unchanged: not judged
    run, reverted, tree = _type_check(deps, state, installed, {"alpha": 3, "beta": 1, "gamma": 2}, {"alpha": 1, "beta": 3, "gamma": 0})
    assert reverted == ["alpha/SKILL.md"]
    assert tree["alpha/SKILL.md"] == "alpha v0" and tree["beta/SKILL.md"] == "beta good edit"
    assert [run.outcomes[f"alpha{i}"] for i in range(PER_TYPE)] == [True, True, True, False]  # the epoch start's answers
    assert state.correctness["alpha0"] is True and run.outcomes["beta0"] is True


def test_type_check_keeps_a_drop_within_the_margin(tmp_path):
    from harness.loop.slow_update import _check_types

    ws, deps, state, installed = _epoch(tmp_path)
    prev = _outcomes({"alpha": 3, "beta": 1, "gamma": 2})
    r = EvalRun("R", installed, "v0", _outcomes({"alpha": 2, "beta": 1, "gamma": 2}))  # alpha -25 pts on 4 questions
    assert _check_types(deps, state, r, prev, 0.3)[1] == []
    assert _check_types(deps, state, r, prev, 0.2)[1] == ["alpha/SKILL.md"]
    # the measured default (reports/benchmarks/type_regressions.md) is on; SlowDeps built by hand has both checks off
    train = load_config([], env_file=None, environ={}).train
    assert (train.momentum_check, train.type_check_drop) == ("per_file", 0.1)
    assert (SlowDeps.momentum_check, SlowDeps.type_check_drop) == ("none", None)


def test_a_tiny_run_carries_both_checks_through_the_slow_stage(tmp_path):
    """The keys reach the slow update through the stage (harness/loop/stages/slow.py); every file a check reverted
    holds, in the workspace's version after it, the text the check restored (epoch start or before momentum)."""
    import json

    from conftest import make_runner, tiny_cfg

    cfg = tiny_cfg("train.momentum_check=per_file", "train.type_check_drop=0.0")
    runner, _, cache = make_runner(tmp_path, cfg)
    runner.train()
    cache.close()
    state = tmp_path / str(cfg.train.state_dir)
    reverted = 0
    for e in range(1, int(cfg.train.epochs) + 1):
        report = json.loads((state / f"e{e}" / "slow" / "report.json").read_text())
        assert (report["momentum_check"], report["type_check_drop"]) == ("per_file", 0.0)
        reverted += len(report["momentum_reverted"]) + len(report["type_check_reverted"])
    assert reverted > 0  # drop 0: the tiny run reverts something (a wiring that never reaches the checks would not)
    ws = state / f"e{cfg.train.epochs}" / "slow" / "workspace"
    from harness.store import list_versions

    for version in list_versions(ws / "skills"):
        meta = read_version(ws / "skills", version).meta
        if not str(meta.get("reason", "")).startswith(("type check", "momentum check")):
            continue
        tree = read_version_tree(ws / "skills", version)
        parent = read_version_tree(ws / "skills", meta["parent"])
        assert all(tree.get(f) != parent.get(f) for f in meta["files"])  # each listed file was put back


def _shared_epoch(tmp_path: Path, shared_text: str):
    """alpha reads its own file; beta and gamma read the shared default-strategy file. The epoch installed a harmful
    edit of alpha's file and an edit of the shared file."""
    from harness.loop.train_state import TrainState

    ws, deps, _ = _setup(tmp_path)
    skills = HarnessTree({"alpha/SKILL.md": "alpha v0", "default-strategy/SKILL.md": "default v0"})
    start = wsp.promote(ws, "skills", skills, {"reason": "epoch start"})
    state = TrainState()
    state.begin_epoch(start, "v0", skills.to_dict())
    installed = wsp.promote(ws, "skills", skills.with_files({"alpha/SKILL.md": "alpha harmful edit",
                                                            "default-strategy/SKILL.md": shared_text}), {"reason": "gate accepted"})
    return ws, deps, state, installed


def test_type_check_reverts_the_harmful_own_file_and_keeps_a_shared_file_that_helps_overall(tmp_path):
    """Seed 14's case (reports/benchmarks/type_regressions.md): one reader of the shared file shows a drop beyond the
    margin (noise on a few questions) while the shared edit helps its readers overall; only alpha's file goes back."""
    _, deps, state, installed = _shared_epoch(tmp_path, "default helpful edit")
    # gamma -25 pts, beta +100
    run, reverted, tree = _type_check(deps, state, installed, {"alpha": 3, "beta": 0, "gamma": 3}, {"alpha": 1, "beta": 4, "gamma": 2})
    assert reverted == ["alpha/SKILL.md"]
    assert tree["alpha/SKILL.md"] == "alpha v0" and tree["default-strategy/SKILL.md"] == "default helpful edit"
    assert [run.outcomes[f"alpha{i}"] for i in range(PER_TYPE)] == [True, True, True, False]  # the epoch start's answers
    assert [run.outcomes[f"gamma{i}"] for i in range(PER_TYPE)] == [True, True, False, False]  # R's: the edit stays


def test_type_check_reverts_a_shared_file_its_readers_lost_on_overall(tmp_path):
    _, deps, state, installed = _shared_epoch(tmp_path, "default harmful edit")
    # gamma -50 pts, beta 0: pooled -2
    run, reverted, tree = _type_check(deps, state, installed, {"alpha": 1, "beta": 2, "gamma": 3}, {"alpha": 1, "beta": 2, "gamma": 1})
    assert reverted == ["default-strategy/SKILL.md"]
    assert tree["default-strategy/SKILL.md"] == "default v0" and tree["alpha/SKILL.md"] == "alpha harmful edit"
    assert [run.outcomes[f"gamma{i}"] for i in range(PER_TYPE)] == [True, True, True, False]
    assert state.correctness["gamma2"] is True
