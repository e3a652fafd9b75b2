"""Semantic rules of seed 000 §3 (four layers): each rule fails on a bad value and passes on a good one,
and the error names the key, the value and the rule."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from harness.config.errors import ConfigError
from harness.config.validate import (
    _validate,
    _validate_edit_budget,
    _validate_gate,
    _validate_minibatch,
    val_pool_violation,
    validate_config,
)


def _mutable(cfg: DictConfig) -> DictConfig:
    copied = copy.deepcopy(cfg)
    OmegaConf.set_readonly(copied, False)
    return copied


def _with(cfg: DictConfig, key: str, value: Any) -> DictConfig:
    changed = _mutable(cfg)
    OmegaConf.update(changed, key, value, merge=False)
    return changed


def _violated_keys(cfg: DictConfig) -> list[str]:
    try:
        validate_config(cfg)
    except ConfigError as err:
        return err.keys
    return []


# (key, bad value, good value, words of the rule that the message must contain)
# base: train=tiny (3 task types, eval_min_per_class 2, batch 4, block 3, max_pairs 12, budget 2 -> 1)
RULES = [
    ("pools.val_size", 5, 6, "eval_min_per_class x number of task types"),
    ("batching.min_class_per_batch", 4, 3, "strictly < batching.batch_size"),
    ("batching.min_class_per_batch", 0, 1, ">= 1"),
    ("batching.small_class_threshold", 0, 1, ">= 1"),
    ("gate.lambda_dir", 0.0, -0.1, "< 0"),
    ("gate.lambda", 0.0, 0.5, "> 0"),
    ("gate.theta1", 0.5, 0.55, "(0.5, 1)"),
    ("gate.anchor_fraction", 1.5, 1.0, "0 <= anchor_fraction <= 1"),
    ("gate.p_low", -0.1, 0.0, "[0, 1]"),
    ("gate.p_high", 0.01, 1.0, "> gate.p_low"),
    ("gate.ema_gamma", 0.0, 1.0, "0 < ema_gamma <= 1"),
    ("gate.block_size", 0, 1, ">= 1"),
    ("gate.max_pairs", 2, 3, ">= gate.block_size"),
    ("gate.undecided", "maybe", "reject", "probation, reject"),
    ("gate.rule", "vibes", "gepa", "accept_all, betting, betting_budget, cap_evolve, gepa, mcnemar, minibatch, sequential, skillopt"),
    ("gate.plan", "adaptiv", "random", "importance, random, static"),
    ("gate.plan", "static", "random", "gate.rule=betting_budget needs a plan that draws questions with known probabilities"),
    ("gate.fdr", "bh", "none", "elond, none"),
    ("gate.probe_every", 0, 1, ">= 1"),
    ("gate.mcnemar_alpha", 1.0, 0.01, "(0, 1)"),
    ("gate.infra_max_ratio", 0.0, 1.0, "(0, 1]"),
    ("gate.infra_min_denominator", 0, 1, ">= 1"),
    ("evolve.edit_budget_end", 3, 2, "<= evolve.edit_budget_start"),
    ("evolve.edit_budget_end", 0, 1, ">= 1"),
    ("evolve.edit_budget_start", 0, 5, ">= 1"),
    ("evolve.method", "magic", "h2", "h2, reflective"),
    ("h2_round.mode", "both", "sequential", "parallel, sequential"),
    ("h2_round.budget_usd", 0.0, 0.01, "> 0"),
    ("improve.max_llm_calls", 0, 1, ">= 1"),
    ("improve.max_minutes", 0.0, 0.5, "> 0"),
    ("evolve.cooldown_steps", -1, 0, ">= 0"),
    ("pools.test_size", 0, 1, ">= 1"),
    ("pools.diagnosis_size", 19, 18, "exceeds the 30 sim questions"),
    ("pools.eval_min_per_class", 0, 1, ">= 1"),
    ("pools.val_correct_ratio", 0.5, None, "the pools stage splits before any rollout"),
    ("train.epochs", 0, 1, ">= 1"),
    ("train.early_stop_patience", 0, 3, ">= 1"),
    ("train.steps_per_epoch", 3, 2, "ceil(pools.diagnosis_size / batching.batch_size)"),
    ("train.run_name", "nightly_gate_run", "nightly-run", "gate"),
    ("train.state_dir", "../state", "state/", "relative path"),
    ("llm.provider", "anthropic", "openai", "sim, openai"),
    ("llm.timeout_s", 0.0, 0.5, "> 0"),
    ("llm.max_retries", -1, 0, ">= 0"),
    ("llm.backoff_max_s", 0.1, 0.5, ">= llm.backoff_base_s"),
    ("llm.retry_after_max_s", 10.0, 20.0, ">= llm.backoff_max_s"),
    ("llm.temperature", 3.0, 0.0, "[0, 2]"),
    ("llm.max_tokens", 0, 1, ">= 1"),
    ("llm.concurrency", 0, 1, ">= 1"),
    ("llm.top_logprobs", 21, 5, "[0, 20]"),
    ("llm.max_agent_steps", 0, 1, ">= 1"),
    ("llm.api_key_env", "my key", "MY_KEY", "NAME of an environment variable"),
    ("llm.models", {"painter": "m"}, {"editor": "gpt-4o"}, "roles"),
    ("llm.max_tokens_by_role", {"editor": 0}, {"editor": 512}, "positive integers"),
    ("llm.max_tokens_by_role", {"painter": 5}, {"solver": 96}, "roles"),
    ("benchmark.name", "mmlu", "jsonl", "sim, jsonl"),
    ("benchmark.scorer", "fuzzy", "mypkg.scoring:score", "<module>:<function>"),
    ("benchmark.n_choices", 1, 2, "[2, 6]"),
    ("benchmark.n_choices", 7, 6, "at most 6 choices"),
    ("benchmark.n_task_types", 0, 2, "[1, 11]"),
    ("benchmark.n_task_types", 12, 11, "has 11 task types"),
    ("benchmark.task_types", ["x" * 101], ["x" * 100], "at most 100 characters"),
    ("benchmark.task_types", ["a/b"], ["a_b"], "names its skill folder"),
    ("llm.base_url", "not-a-url", "http://127.0.0.1:8000/v1", "must be an http(s) URL"),
    ("llm.base_url", "ftp://host/v1", None, "must be an http(s) URL"),
    ("gate.accept_prior_points", 1, 2, "a one-point grid needs gate.accept_prior_low == gate.accept_prior_high"),
    ("train.state_dir", ".", "state", "is the project root"),
    ("train.state_dir", "harness/state", "runs/state", "the project's own code and config"),
    ("improve.out_dir", "./", "state/improve", "is the project root"),
    ("benchmark.task_types", ["a", "a"], ["a", "b"], "distinct"),
    ("tracking.experiment", " ", "x", "non-empty"),
]


@pytest.mark.parametrize("key,bad,good,rule", RULES, ids=[f"{k}={b!r}" for k, b, _, _ in RULES])
def test_rule_fails_on_bad_value_and_passes_on_good(compose_cfg, key: str, bad: Any, good: Any, rule: str) -> None:
    base = compose_cfg()
    with pytest.raises(ConfigError) as info:
        validate_config(_with(base, key, bad))
    message = str(info.value)
    assert key in info.value.keys
    line = next(line for line in message.splitlines() if line.strip().startswith(f"- {key} ="))
    assert repr(bad) in line and rule in line, line
    good_cfg = _with(base, key, good)
    if key == "benchmark.name" and good == "jsonl":
        OmegaConf.update(good_cfg, "benchmark.path", "q.jsonl")
        OmegaConf.update(good_cfg, "llm.provider", "openai")
    assert key not in _violated_keys(good_cfg)


def test_base_tiny_and_default_configs_are_valid(compose_cfg) -> None:
    validate_config(_mutable(compose_cfg()))
    validate_config(_mutable(compose_cfg(tiny=False)))


def test_all_violations_reported_together(compose_cfg) -> None:
    cfg = _with(compose_cfg(), "gate.lambda_dir", 0.2)
    OmegaConf.update(cfg, "batching.min_class_per_batch", 9)
    OmegaConf.update(cfg, "evolve.edit_budget_end", 9)
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    assert {"gate.lambda_dir", "batching.min_class_per_batch", "evolve.edit_budget_end"} <= set(info.value.keys)
    assert "3 problems" in str(info.value)


def test_each_layer_is_a_pure_function_returning_its_own_violations(compose_cfg) -> None:
    cfg = _with(compose_cfg(), "gate.lambda_dir", 0.2)
    OmegaConf.update(cfg, "batching.min_class_per_batch", 9)
    OmegaConf.update(cfg, "evolve.edit_budget_end", 9)
    OmegaConf.update(cfg, "pools.val_size", 1)
    assert [v.key for v in _validate_gate(cfg)] == ["gate.lambda_dir"]
    assert [v.key for v in _validate_minibatch(cfg)] == ["batching.min_class_per_batch"]
    assert [v.key for v in _validate_edit_budget(cfg)] == ["evolve.edit_budget_end"]
    assert [v.key for v in _validate(cfg)] == ["pools.val_size"]


def test_mcnemar_n_must_fit_the_pair_budget(compose_cfg) -> None:
    cfg = _with(compose_cfg(["gate=mcnemar"]), "gate.mcnemar_n", 13)
    assert "gate.mcnemar_n" in _violated_keys(cfg)
    assert "gate.mcnemar_n" not in _violated_keys(_with(cfg, "gate.mcnemar_n", 12))
    # the budget rule only binds the mcnemar rule
    assert "gate.mcnemar_n" not in _violated_keys(_with(compose_cfg(), "gate.mcnemar_n", 13))


def test_a_weighted_plan_needs_a_weighted_rule(compose_cfg) -> None:
    """gate.plan=importance hands out importance weights that only the betting rule reads."""
    cfg = _with(compose_cfg(["gate=sequential"]), "gate.plan", "importance")
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    assert info.value.keys == ["gate.plan"] and "ignores" in str(info.value)
    assert _violated_keys(compose_cfg(["gate=sequential"])) == []  # the sign rule on its static ladder stays selectable
    assert _violated_keys(_with(compose_cfg(["gate=gepa"]), "gate.plan", "static")) == []  # gepa brings its own questions


def test_jsonl_val_size_uses_listed_task_types_then_the_data(compose_cfg, tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps({"qid": f"{t}{i}", "task_type": t, "question": "?", "answer": "x"}) + "\n"
                            for t in "abcd" for i in range(10)))
    jsonl = ["benchmark=jsonl", f"benchmark.path={path}", "llm=openai"]
    with pytest.raises(ConfigError) as info:  # 4 listed types x eval_min_per_class 2 = 8 > val_size 6
        compose_cfg([*jsonl, "benchmark.task_types=[a,b,c,d]"])
    assert "pools.val_size = 6" in str(info.value) and "2 x 4 = 8" in str(info.value)
    compose_cfg([*jsonl, "benchmark.task_types=[a,b,c]"])  # 3 x 2 = 6 fits
    with pytest.raises(ConfigError) as info:  # unlisted: the 4 task types of the file, checked when the config loads
        compose_cfg(jsonl)
    assert info.value.keys == ["pools"] and "eval_min_per_class=2 x 4 task types" in str(info.value)
    assert val_pool_violation(6, 2, 4) is not None and val_pool_violation(8, 2, 4) is None


def test_jsonl_requires_a_path(compose_cfg) -> None:
    with pytest.raises(ConfigError) as info:
        compose_cfg(["benchmark=jsonl", "llm=openai"])
    assert info.value.keys == ["benchmark.path"]


def test_semantic_error_through_load_config_names_key_value_rule(compose_cfg) -> None:
    with pytest.raises(ConfigError) as info:
        compose_cfg(["gate.lambda_dir=0.5"])
    assert "gate.lambda_dir = 0.5: must be < 0" in str(info.value)


def test_the_old_gate_ladder_key_is_refused_in_one_line_naming_gate_plan():
    """Issue 29 renamed gate.ladder (it is a sampling plan, not always a ladder): the old key gets one line naming the new one."""
    from harness.config.load import load_config

    with pytest.raises(ConfigError) as info:
        load_config(overrides=["gate.ladder=static"])
    message = str(info.value)
    assert "\n" not in message and message.startswith("gate.ladder: unknown key") and "gate.plan" in message
    assert load_config(overrides=["gate.plan=random"]).gate.plan == "random"


def test_the_old_gate_ladder_prior_obs_key_names_gate_plan_prior_obs():
    """The importance plan's prior weight was named after the ladder; the old key gets one line naming the new one."""
    from harness.config.load import load_config

    with pytest.raises(ConfigError) as info:
        load_config(overrides=["gate.ladder_prior_obs=2"])
    message = str(info.value)
    assert "\n" not in message and message.startswith("gate.ladder_prior_obs: unknown key") and "gate.plan_prior_obs" in message
    assert load_config(overrides=["gate.plan_prior_obs=2"]).gate.plan_prior_obs == 2


def test_config_validation_collects_each_futility_rules_own_check(compose_cfg) -> None:
    """The futility keys are checked by the strategies' own params (`check()`), not restated in validate.py: a toy
    rule (tests/kernel/toy_futility.py, one registry line) brings its rule, and a gate runs with it."""
    from harness.kernel.futility import FUTILITY_RULES, EstimateParams
    from harness.kernel.types import GateParams
    from tests.kernel.toy_futility import HalfwayFutility

    base = compose_cfg()
    with pytest.raises(ConfigError) as info:
        validate_config(_with(base, "gate.futility_z", -1.0))
    assert info.value.keys == ["gate.futility_z"] and "z-score" in str(info.value)
    assert [f for f, _ in EstimateParams(futility_z=-1.0).check()] == ["futility_z"]  # the message's one source
    FUTILITY_RULES.register("halfway", HalfwayFutility())
    try:
        assert _violated_keys(_with(_with(base, "gate.futility", "halfway"), "gate.futility_gain", 0.6)) == ["gate.futility_gain"]
        assert _violated_keys(_with(base, "gate.futility", "halfway")) == []
        from tests.kernel.test_futility import _gate

        params = GateParams.build(futility="halfway", futility_gain=0.05)
        actions = [_gate(params, seed, 0.0) for seed in range(6)]
        assert any(reason.startswith("futility (halfway)") for _, _, reason in actions)  # it ran inside the real gate
    finally:
        FUTILITY_RULES.unregister("halfway")
