"""Semantic validation of a composed config (seed 000 §3: four layers).

The dataclass schema catches types and unknown keys; this module catches
values that type-check but make no sense. `validate_config` runs the four
layers of the seed — `_validate` (general), `_validate_edit_budget`,
`_validate_minibatch`, `_validate_gate` — collects every violation and
raises one `ConfigError` whose lines each name the key, the value and the
rule. Each layer is a pure function `cfg -> list[Violation]`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from harness.bench.soft import GATE_METRICS
from harness.config.errors import ConfigError, Violation
from harness.config.locations import location_violations
from harness.config.registries import CHOICE_REGISTRIES, PROPOSER_CHOICES
from harness.config.resolvers import IMPROVE_CONF_FILE, epoch_schedule_items, improve_tasks_dir, step_schedule_items
from harness.config.schema import RootConfig
from harness.config.suggest import RENAMED_KEYS, did_you_mean
from harness.contracts.answers import ANSWER_PARSING_MODES
from harness.contracts.roles import Role
from harness.identity import GATE_MARK
from harness.kernel.registry import component_problems, strategy_problems

BENCHMARKS = ("sim", "jsonl")
PROVIDERS = ("sim", "openai")
UNDECIDED_ACTIONS = ("probation", "reject")
H2_MODES = ("parallel", "sequential")
IMPROVE_EXECUTORS = ("sim", "command", "service")
IMPROVE_BACKENDS = ("inprocess", "ray", "auto")
SURFACE_NAMES = ("native", "codex", "opencode")  # harness.h2.surfaces.SURFACES (a test keeps them equal)
BUILTIN_SCORERS = ("exact", "normalized")
LLM_ROLES = tuple(role.value for role in Role)

_SCORER_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(_[A-Za-z0-9.-]+)*$")
# The simulated world's limits (harness/sim/world.py: TASK_TYPE_NAMES, the choice letters it draws; a test keeps
# them equal). Config sits below sim in the import layers, so the numbers are repeated here.
SIM_MAX_TASK_TYPES = 11
SIM_MAX_CHOICES = 6
# A task type names its skill folder (skills/<task_type>/SKILL.md) and shows in run ids, metric names and reports;
# 100 characters leaves room under the file system's 255-byte name limit for every name built from it.
TASK_TYPE_MAX_CHARS = 100

_UNSET = object()


def _get(cfg: DictConfig, key: str) -> Any:
    """Value at dotted `key`; `_UNSET` when absent or `???` (missing)."""
    return OmegaConf.select(cfg, key, default=_UNSET)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class _Checker:
    """Accumulates violations; `check(key, ok, rule)` records one when `ok(value)` is false."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg = cfg
        self.violations: list[Violation] = []

    def value(self, key: str) -> Any:
        return _get(self.cfg, key)

    def check(self, key: str, ok: Callable[[Any], bool], rule: str) -> bool:
        value = self.value(key)
        if value is _UNSET:
            self.violations.append(Violation(key, "???", "required value is missing; " + rule))
            return False
        try:
            passed = bool(ok(value))
        except (TypeError, ValueError):
            passed = False
        if not passed:
            self.violations.append(Violation(key, value, rule))
        return passed

    def add(self, key: str, value: Any, rule: str) -> None:
        self.violations.append(Violation(key, value, rule))

    def positive_int(self, key: str, minimum: int = 1) -> bool:
        return self.check(key, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
                          f"must be an integer >= {minimum}")

    def positive_number(self, key: str) -> bool:
        return self.check(key, lambda v: _is_number(v) and v > 0, "must be a finite number > 0")

    def one_of(self, key: str, allowed: tuple[str, ...]) -> bool:
        return self.check(key, lambda v: v in allowed, f"must be one of {', '.join(allowed)}")

    def ordered_pair(self, low_key: str, high_key: str, ok: Callable[[Any], bool], rule: str) -> None:
        """Both keys satisfy `ok` (`rule`), and the high one is >= the low one."""
        low_ok = self.check(low_key, ok, rule)
        if self.check(high_key, ok, rule) and low_ok:
            low = self.value(low_key)
            self.check(high_key, lambda v: v >= low, f"must be >= {low_key} = {low}")

    def registered(self, key: str) -> bool:
        """The value names a strategy of the registry behind `key` (harness/config/registries.py)."""
        names = CHOICE_REGISTRIES[key].names()
        return self.check(key, lambda v: v in names, f"must be one of {', '.join(names)} (registered strategies)")

    def non_empty_str(self, key: str) -> bool:
        return self.check(key, lambda v: isinstance(v, str) and v.strip() != "", "must be a non-empty string")


def task_type_name_problem(name: Any) -> str | None:
    """Why `name` cannot be a task type (None when it can): it names the skill folder skills/<task_type>/."""
    from harness.bench.jsonl import DEFAULT_SKILL, TASK_TYPE_NAME

    if not isinstance(name, str) or TASK_TYPE_NAME.match(name) is None:
        return ("a task type names its skill folder (skills/<task_type>/SKILL.md): letters, digits, '_', '-', '.', "
                "starting with a letter or digit")
    if len(name) > TASK_TYPE_MAX_CHARS:
        return (f"a task type names its skill folder (skills/<task_type>/SKILL.md) and shows in run and metric names: "
                f"at most {TASK_TYPE_MAX_CHARS} characters, got {len(name)}")
    if name == DEFAULT_SKILL:
        return f"{DEFAULT_SKILL!r} is the shared skill every task type without its own file reads"
    return None


def base_url_problem(value: Any) -> str | None:
    """Why `value` cannot be `llm.base_url` (None when it can: null, or an http(s) URL with a host)."""
    from urllib.parse import urlsplit

    if value is None:
        return None
    rule = "must be an http(s) URL (e.g. http://127.0.0.1:8000/v1), or null for the provider's default"
    if not isinstance(value, str) or any(ch.isspace() for ch in value):
        return rule
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or parts.port > 0  # .port raises on a non-numeric port
    except ValueError:
        return rule
    return None if parts.scheme in ("http", "https") and parts.hostname and port_ok else rule


def n_task_types_of(cfg: DictConfig) -> int | None:
    """Number of task types known at config time: sim -> benchmark.n_task_types;
    jsonl -> len(benchmark.task_types) when listed, else None (checked at data time)."""
    if _get(cfg, "benchmark.name") == "sim":
        n = _get(cfg, "benchmark.n_task_types")
        return n if isinstance(n, int) and n >= 1 else None
    task_types = _get(cfg, "benchmark.task_types")
    return len(task_types) if task_types not in (_UNSET, None) and len(task_types) > 0 else None


def val_pool_violation(val_size: int, eval_min_per_class: int, n_task_types: int) -> Violation | None:
    """`pools.val_size >= pools.eval_min_per_class x n_task_types` (also called at data time for jsonl)."""
    needed = eval_min_per_class * n_task_types
    if val_size >= needed:
        return None
    return Violation(
        "pools.val_size",
        val_size,
        f"must be >= pools.eval_min_per_class x number of task types = {eval_min_per_class} x {n_task_types} = {needed}",
    )


def _validate(cfg: DictConfig) -> list[Violation]:
    """General layer: benchmark, llm, pools, evolve scalars, train, tracking."""
    c = _Checker(cfg)
    # benchmark
    if c.one_of("benchmark.name", BENCHMARKS):
        if c.value("benchmark.name") == "sim":
            c.check("benchmark.n_task_types", lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= SIM_MAX_TASK_TYPES,
                    f"must be an integer in [1, {SIM_MAX_TASK_TYPES}] (the simulated world has {SIM_MAX_TASK_TYPES} task types)")
            c.positive_int("benchmark.questions_per_type")
            c.check("benchmark.n_choices", lambda v: isinstance(v, int) and not isinstance(v, bool) and 2 <= v <= SIM_MAX_CHOICES,
                    f"must be an integer in [2, {SIM_MAX_CHOICES}] (the simulated world's questions have at most {SIM_MAX_CHOICES} choices)")
            c.non_empty_str("benchmark.source")
        elif c.check("benchmark.path", lambda v: isinstance(v, str) and v.strip() != "",
                     "benchmark=jsonl needs the questions file: benchmark.path=<file.jsonl|file.parquet>"):
            path = c.value("benchmark.path")
            c.check("benchmark.source", lambda v: v == path, f"must be benchmark.path ({path}) for benchmark=jsonl: "
                    "dvc.yaml's prepare stage depends on it")
    c.check("benchmark.scorer", lambda v: v in BUILTIN_SCORERS or _SCORER_REF.match(v) is not None,
            f"must be one of {', '.join(BUILTIN_SCORERS)} or '<module>:<function>'")
    if c.check("benchmark.task_types", lambda v: len(set(v)) == len(v) and all(isinstance(t, str) and t for t in v),
               "task types must be distinct non-empty strings"):
        listed = list(c.value("benchmark.task_types"))
        for name in listed:
            problem = task_type_name_problem(name)
            if problem:
                c.add("benchmark.task_types", listed, f"task type {_shown(name)}: {problem}")
    c.non_empty_str("benchmark.questions_path")
    c.one_of("benchmark.answer_parsing", ANSWER_PARSING_MODES)
    c.one_of("benchmark.harness_surface", SURFACE_NAMES)
    if c.value("benchmark.name") == "sim":
        c.check("benchmark.harness_dir", lambda v: v is None, "must be null for benchmark=sim (the simulated world has its own "
                "base harness); a starting harness is read by benchmark=jsonl")
    else:
        c.check("benchmark.harness_dir", lambda v: v is None or (isinstance(v, str) and Path(v).is_dir()),
                "must be null or an existing directory (relative to the project root)")
    harness_dir = c.value("benchmark.harness_dir")
    conf_file = f"conf/benchmark/{c.value('benchmark.name')}.yaml"
    c.check("benchmark.harness_source", lambda v: v == (harness_dir or conf_file),
            f"must be ${{ht.first:${{benchmark.harness_dir}},{conf_file}}} (derived, do not set it): dvc.yaml's pools and "
            "improve stages depend on it, so an edit inside your harness re-runs them")
    c.check("benchmark.max_unparsed_share", lambda v: _is_number(v) and 0 <= v <= 1, "must be in [0, 1] (1: never stop)")
    # llm
    if c.one_of("llm.provider", PROVIDERS) and c.value("benchmark.name") == "jsonl":
        c.check("llm.provider", lambda v: v != "sim", "llm=sim answers only the simulated benchmark's questions, "
                "not benchmark=jsonl's: use llm=openai with a server (llm.base_url) for your own questions")
    base_url_rule = base_url_problem(c.value("llm.base_url"))
    if base_url_rule:
        c.add("llm.base_url", c.value("llm.base_url"), base_url_rule)
    c.non_empty_str("llm.model")
    c.check("llm.models", lambda v: all(role in LLM_ROLES and isinstance(m, str) and m for role, m in v.items()),
            f"keys must be roles ({', '.join(LLM_ROLES)}) and values non-empty model names")
    c.check("llm.api_key_env", lambda v: _ENV_NAME.match(v) is not None,
            "must be the NAME of an environment variable (letters, digits, _), never the key itself")
    c.positive_number("llm.timeout_s")
    c.positive_int("llm.max_retries", minimum=0)
    if c.positive_number("llm.backoff_base_s") and c.positive_number("llm.backoff_max_s"):
        c.check("llm.backoff_max_s", lambda v: v >= c.value("llm.backoff_base_s"), "must be >= llm.backoff_base_s")
        if c.positive_number("llm.retry_after_max_s"):
            c.check("llm.retry_after_max_s", lambda v: v >= c.value("llm.backoff_max_s"), "must be >= llm.backoff_max_s")
    c.check("llm.temperature", lambda v: _is_number(v) and 0 <= v <= 2, "must be in [0, 2]")
    c.positive_int("llm.max_tokens")
    c.check("llm.max_tokens_by_role", lambda v: all(role in LLM_ROLES and isinstance(n, int) and not isinstance(n, bool) and n > 0
                                                    for role, n in v.items()),
            f"keys must be roles ({', '.join(LLM_ROLES)}) and values positive integers")
    c.positive_int("llm.concurrency")
    c.check("llm.top_logprobs", lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 20,
            "must be an integer in [0, 20] (0 = no log-probabilities; OpenAI allows at most 20)")
    c.positive_int("llm.client_processes")  # 1 = the SDK runs in the provider's process
    c.positive_int("llm.max_agent_steps")
    c.check("llm.prices", lambda v: all(set(p) <= {"input", "output"} and all(_is_number(x) and x >= 0 for x in p.values())
                                        for p in v.values()),
            "each model maps to {input: USD/Mtok >= 0, output: USD/Mtok >= 0}")
    c.non_empty_str("llm.cache_dir")
    # pools
    for key in ("pools.test_size", "pools.val_size", "pools.diagnosis_size", "pools.eval_min_per_class"):
        c.positive_int(key)
    c.check("pools.val_correct_ratio", lambda v: v is None,
            "must be null (the natural distribution): steering validation to a share of correct questions needs the "
            "baseline's correctness of every question, and the pools stage splits before any rollout "
            "(harness.kernel.pools.split_pools takes it, with `correctness`, for library use)")
    n_types = n_task_types_of(cfg)
    val_size, min_per_class = c.value("pools.val_size"), c.value("pools.eval_min_per_class")
    if n_types is not None and isinstance(val_size, int) and isinstance(min_per_class, int) and min_per_class >= 1:
        violation = val_pool_violation(val_size, min_per_class, n_types)
        if violation:
            c.violations.append(violation)
    if c.value("benchmark.name") == "sim":
        sizes = [c.value(f"pools.{k}") for k in ("test_size", "val_size", "diagnosis_size")]
        n_q, per_type = c.value("benchmark.n_task_types"), c.value("benchmark.questions_per_type")
        if all(isinstance(s, int) for s in sizes) and isinstance(n_q, int) and isinstance(per_type, int):
            total = n_q * per_type
            c.check("pools.diagnosis_size", lambda _: sum(sizes) <= total,
                    f"test_size + val_size + diagnosis_size = {sum(sizes)} exceeds the {total} sim questions "
                    "(benchmark.n_task_types x benchmark.questions_per_type)")
    c.non_empty_str("pools.path")
    # evolve (scalars; the budget has its own layer)
    c.registered("evolve.method")
    c.positive_int("evolve.cooldown_steps", minimum=0)
    c.positive_int("evolve.max_case_questions")
    c.positive_int("evolve.max_skill_chars")
    c.non_empty_str("benchmark.domain")
    c.check("evolve.prompts_dir", lambda v: v is None or (isinstance(v, str) and Path(v).is_dir()),
            "must be null (the package's templates) or a directory of meta-prompt templates")
    prompts_dir = c.value("evolve.prompts_dir")
    c.check("evolve.prompts_source", lambda v: v == (prompts_dir or "harness/evolution/templates"),
            "must be ${ht.first:${evolve.prompts_dir},harness/evolution/templates} (derived, do not set it)")
    c.check("evolve.new_skill_min_failures", lambda v: isinstance(v, int) and not isinstance(v, bool) and (v == 0 or v >= 2),
            "must be 0 (off) or an integer >= 2 (failures of one task type that share a cause: at least two)")
    c.positive_int("evolve.h2_probe_questions")
    # h2_round: the one Harness² round config (evolve=h2 and stages.improve)
    c.check("h2_round.k", lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 3,
            "must be an integer in [1, 3] (Harness² budget gate: k <= 3)")
    c.one_of("h2_round.mode", H2_MODES)
    if c.value("h2_round.budget_usd") is not None:
        c.positive_number("h2_round.budget_usd")
    if c.value("h2_round.max_sessions") is not None:
        c.positive_int("h2_round.max_sessions")
    _check_candidates(c)
    # train
    c.positive_int("train.epochs")
    c.positive_int("train.early_stop_patience")
    c.check("train.momentum_check", lambda v: v in ("none", "per_file"), "must be none or per_file")
    c.check("train.type_check_drop", lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1),
            "must be null or an accuracy drop in [0, 1)")
    c.check("train.init_seed", lambda v: v is None or (isinstance(v, str) and (Path(v) / "seed.json").is_file()),
            "must be null or a seed directory holding seed.json (write one with `python -m stages.export --seed DIR`)")
    init_seed = c.value("train.init_seed")
    c.check("train.init_source", lambda v: v == (init_seed or "conf/train/default.yaml"),
            "must be ${ht.first:${train.init_seed},conf/train/default.yaml} (derived, do not set it): dvc.yaml's pools "
            "stage depends on it, so a seed directory replaced at the same path re-runs pools")
    c.check("train.run_name", lambda v: _RUN_NAME.match(v) is not None and GATE_MARK not in f"_{v}_",
            "letters, digits, '.', '-', single '_' between parts; must not contain 'gate' as a part "
            f"(run ids with {GATE_MARK!r} are gate rollouts)")
    # train.state_dir and the other output paths: harness/config/locations.py (validate_config)
    _check_schedule(c)
    # tracking
    c.non_empty_str("tracking.experiment")
    c.non_empty_str("tracking.improve_experiment")
    for key in ("benchmark.seed", "pools.seed", "train.seed"):
        c.positive_int(key, minimum=0)
    # improve (Harness² over tasks)
    c.one_of("improve.executor", IMPROVE_EXECUTORS)
    c.one_of("improve.backend", IMPROVE_BACKENDS)
    c.one_of("improve.surface", SURFACE_NAMES)
    for key in ("improve.tasks_per_domain", "improve.questions_per_task", "improve.workers"):
        c.positive_int(key)
    if c.value("improve.max_llm_calls") is not None:
        c.positive_int("improve.max_llm_calls")
    if c.value("improve.max_minutes") is not None:
        c.positive_number("improve.max_minutes")
    manifest, tasks_dir = c.value("improve.manifest"), c.value("improve.tasks_dir")
    c.check("improve.tasks_dir", lambda v: v is None or (isinstance(v, str) and Path(v).is_dir()),
            "must be null (the manifest's directory) or an existing directory holding every file the manifest's tasks name")
    c.check("improve.manifest_source", lambda v: v == (manifest or IMPROVE_CONF_FILE),
            f"must be ${{ht.first:${{improve.manifest}},{IMPROVE_CONF_FILE}}} (derived, do not set it): dvc.yaml's "
            "improve@<domain> stages depend on it")
    c.check("improve.tasks_source", lambda v: v == improve_tasks_dir(tasks_dir, manifest),
            "must be ${ht.improve_tasks_dir:${improve.tasks_dir},${improve.manifest}} (derived, do not set it): dvc.yaml's "
            "improve@<domain> stages depend on it, so an edit to a task's file re-runs them")
    return c.violations


def _check_candidates(c: _Checker) -> None:
    """evolve=candidates: the path is set, exists and its format parses (what needs the harness: the first step)."""
    from harness.contracts.candidates import CandidatesError, check_format

    path = c.value("evolve.candidates_path")
    c.check("evolve.candidates_source", lambda v: v == (path or "conf/evolve/candidates.yaml"),
            "must be ${ht.first:${evolve.candidates_path},conf/evolve/candidates.yaml} (derived, do not set it): "
            "dvc.yaml's evolve stage depends on it")
    method = c.value("evolve.method")
    if method not in PROPOSER_CHOICES or "evolve.candidates_path" not in PROPOSER_CHOICES[method]:
        c.check("evolve.candidates_path", lambda v: v is None,
                f"is read only by evolve=candidates (evolve.method = {c.value('evolve.method')}); drop it or choose evolve=candidates")
        return
    if not c.check("evolve.candidates_path", lambda v: isinstance(v, str) and v.strip() != "",
                   "evolve=candidates needs evolve.candidates_path=<file.jsonl of edit ops | directory of harness variants>"):
        return
    try:
        check_format(path)
    except CandidatesError as exc:
        c.add("evolve.candidates_path", path, str(exc))


def _check_schedule(c: _Checker) -> None:
    """steps_per_epoch = ceil(diagnosis_size / batch_size) and the schedule lists match the loop."""
    diag, batch = c.value("pools.diagnosis_size"), c.value("batching.batch_size")
    if not c.positive_int("train.steps_per_epoch"):
        return
    steps, epochs, state_dir = c.value("train.steps_per_epoch"), c.value("train.epochs"), c.value("train.state_dir")
    if isinstance(diag, int) and isinstance(batch, int) and diag >= 1 and batch >= 1:
        c.check("train.steps_per_epoch", lambda v: v == -(-diag // batch),
                f"must equal ceil(pools.diagnosis_size / batching.batch_size) = {-(-diag // batch)} (derived, do not set it)")
    if not (isinstance(epochs, int) and epochs >= 1 and isinstance(state_dir, str) and state_dir.strip("/")):
        return
    expected_steps = step_schedule_items(epochs, steps, state_dir)
    expected_epochs = epoch_schedule_items(epochs, steps, state_dir)
    c.check("train.schedule", lambda v: _plain(v) == expected_steps,
            "must be ${ht.schedule:${train.epochs},${train.steps_per_epoch},${train.state_dir}} (derived, do not set it)")
    c.check("train.epoch_schedule", lambda v: _plain(v) == expected_epochs,
            "must be ${ht.epoch_schedule:${train.epochs},${train.steps_per_epoch},${train.state_dir}} (derived, do not set it)")


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _validate_edit_budget(cfg: DictConfig) -> list[Violation]:
    """Edit budget layer: 1 <= edit_budget_end <= edit_budget_start."""
    c = _Checker(cfg)
    start_ok = c.positive_int("evolve.edit_budget_start")
    if c.positive_int("evolve.edit_budget_end") and start_ok:
        start = c.value("evolve.edit_budget_start")
        c.check("evolve.edit_budget_end", lambda v: v <= start,
                f"must be <= evolve.edit_budget_start = {start} (the budget decays from start to end)")
    return c.violations


def _validate_minibatch(cfg: DictConfig) -> list[Violation]:
    """Mini-batch layer: 1 <= min_class_per_batch < batch_size (strictly), small_class_threshold >= 1."""
    c = _Checker(cfg)
    batch_ok = c.positive_int("batching.batch_size")
    if c.positive_int("batching.min_class_per_batch") and batch_ok:
        batch = c.value("batching.batch_size")
        c.check("batching.min_class_per_batch", lambda v: v < batch,
                f"must be strictly < batching.batch_size = {batch}")
    c.positive_int("batching.small_class_threshold")
    return c.violations


@dataclasses.dataclass(frozen=True)
class _NoParams:
    """The params of a strategy that declares none."""


class _Section:
    """The config values of one section by attribute (`gate.futility_gain` as `.futility_gain`), as the checker reads them."""

    def __init__(self, c: _Checker, section: str):
        self._c, self._section = c, section

    def __getattr__(self, name: str) -> Any:
        return self._c.value(f"{self._section}.{name}")


def _collect_strategy_checks(c: _Checker, key: str) -> None:
    """The problems every strategy of the registry behind `key` reports on its own params (their `check()`)."""
    section = key.rpartition(".")[0]
    for field, value, expected in strategy_problems(CHOICE_REGISTRIES[key], _Section(c, section)):
        c.add(f"{section}.{field}", value, expected)


def _check_rule_plan(c: _Checker) -> None:
    """A weighted rule (betting) needs a population-valid plan; a weighted plan (importance) needs a weighted rule:
    any other rule would ignore the importance weights and test the pi-weighted effect, not the pool's."""
    rule = CHOICE_REGISTRIES["gate.rule"].get(c.value("gate.rule"))
    plan = CHOICE_REGISTRIES["gate.plan"].get(c.value("gate.plan"))
    if rule.questions != "sampling":  # the rule brings its own questions; gate.plan is not used
        return
    if rule.weighted and not plan.population_valid:
        valid = [n for n in CHOICE_REGISTRIES["gate.plan"].names() if CHOICE_REGISTRIES["gate.plan"].get(n).population_valid]
        c.add("gate.plan", plan.name, f"gate.rule={rule.name} needs a plan that draws questions with known probabilities: "
                                        f"one of {', '.join(valid)}")
    if plan.weighted and not rule.weighted:
        weighted = [n for n in CHOICE_REGISTRIES["gate.rule"].names() if CHOICE_REGISTRIES["gate.rule"].get(n).weighted]
        c.add("gate.plan", plan.name, f"gate.plan={plan.name} hands out importance weights that gate.rule={rule.name} "
                                        f"ignores (it would test the pi-weighted effect); use gate.rule {', '.join(weighted)} "
                                        "or another gate.plan")


def _validate_gate(cfg: DictConfig) -> list[Violation]:
    """Gate layer: thresholds, block/pair budget, ladder bounds, rule-specific parameters."""
    c = _Checker(cfg)
    rule_known = c.registered("gate.rule")
    if c.registered("gate.plan") and rule_known:
        _check_rule_plan(c)
    if c.one_of("gate.metric", GATE_METRICS) and c.value("gate.metric") != "hard":
        c.check("gate.metric", lambda v: c.value("llm.top_logprobs") != 0 or c.value("benchmark.scorer") not in BUILTIN_SCORERS,
                "soft and mixed need a soft score: llm.top_logprobs > 0 (token log-probabilities) or a benchmark.scorer "
                "'module:function' that returns floats in [0, 1]")
    c.check("gate.lambda", lambda v: _is_number(v) and v > 0, "must be > 0 (accept when log E-process >= lambda)")
    c.check("gate.lambda_dir", lambda v: _is_number(v) and v < 0,
            "must be < 0 (reject when the direction log-likelihood ratio <= lambda_dir)")
    if c.positive_int("gate.block_size") and c.positive_int("gate.max_pairs"):
        block = c.value("gate.block_size")
        c.check("gate.max_pairs", lambda v: v >= block, f"must be >= gate.block_size = {block} (at least one block)")
    c.one_of("gate.undecided", UNDECIDED_ACTIONS)
    _collect_strategy_checks(c, "gate.rule")  # each rule's own settings (bets, mcnemar_*, selection_n, cap_evolve_n)
    _collect_strategy_checks(c, "gate.plan")  # each plan's own settings (importance_floor, the static ladder's p_low ...)
    rules = CHOICE_REGISTRIES["gate.rule"]
    chosen = rules.get(c.value("gate.rule")) if c.value("gate.rule") in rules else None
    n, max_pairs = c.value("gate.mcnemar_n"), c.value("gate.max_pairs")
    reads_n = "mcnemar_n" in {f.name for f in dataclasses.fields(getattr(chosen, "params_type", None) or _NoParams)}
    if reads_n and isinstance(n, int) and n >= 1 and isinstance(max_pairs, int):  # a fixed-n rule needs its n within the budget
        c.check("gate.mcnemar_n", lambda v: v <= max_pairs, f"must be <= gate.max_pairs = {max_pairs} (pair budget)")
    c.check("gate.infra_max_ratio", lambda v: _is_number(v) and 0 < v <= 1, "must be in (0, 1]")
    c.positive_int("gate.infra_min_denominator")
    c.registered("gate.fdr")
    _collect_strategy_checks(c, "gate.fdr")  # e-LOND's fdr_horizon
    c.check("gate.screen", lambda v: isinstance(v, bool), "must be true or false")
    for field, value, expected in component_problems(_Section(c, "gate")):  # screen_margin, probation_settlement, ema_gamma
        c.add(f"gate.{field}", value, expected)
    c.registered("gate.futility")  # read by the betting rule only
    _collect_strategy_checks(c, "gate.futility")
    return c.violations


def _gate_schema() -> type:
    from harness.config import schema

    return schema.GateConfig


@functools.lru_cache(maxsize=8)
def _schema_shape(schema: Any, gate_schema: type) -> dict[str, Any]:
    """Nested {key: sub-shape | None (leaf) | FREE (free-form mapping)} of a dataclass schema (`gate_schema`: the
    composed gate section it was built with, a cache key: re-registering the schema recomposes it)."""

    def shape(ref: DictConfig) -> Any:
        if OmegaConf.get_type(ref) in (dict, None):
            return _FREE
        nodes = {key: ref._get_node(key) for key in ref.keys()}
        return {key: shape(node) if isinstance(node, DictConfig) else None for key, node in nodes.items()}

    return shape(OmegaConf.structured(schema))


_FREE = "free-form"


def unknown_keys(cfg: DictConfig, schema: Any = RootConfig) -> list[Violation]:
    """Keys present in `cfg` but not in the dataclass schema (e.g. added with `+key=`).

    Dict-typed fields of the schema (llm.models, llm.prices) accept any key."""
    violations: list[Violation] = []

    def walk(node: DictConfig, shape: Any, prefix: str) -> None:
        if shape == _FREE or not isinstance(shape, dict):
            return
        for key in node.keys():
            full = prefix + str(key)
            if key not in shape:
                section = prefix.rstrip(".") or "the root"
                hint = f"; {RENAMED_KEYS[full]}" if full in RENAMED_KEYS else (did_you_mean(full) or "; check the spelling")
                violations.append(Violation(full, "<set>", f"unknown key: not in the schema of {section} "
                                                           f"(harness/config/schema.py){hint}"))
                continue
            child = node._get_node(key)
            if isinstance(child, DictConfig) and not child._is_missing():
                walk(child, shape[key], full + ".")

    walk(cfg, _schema_shape(schema, _gate_schema()), "")
    return violations


def _validate_data_sizes(cfg: DictConfig) -> list[Violation]:
    """benchmark=jsonl: the pool sizes against the questions file, when it exists (harness/bench/sizing.py).

    A missing file is prepare's error (it names the file); sizes derived by `ht.fit` always pass."""
    path = _get(cfg, "benchmark.path")
    if _get(cfg, "benchmark.name") != "jsonl" or not isinstance(path, str) or not Path(path).is_file():
        return []
    sizes = {key: _get(cfg, f"pools.{key}") for key in ("test_size", "val_size", "diagnosis_size", "eval_min_per_class")}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in sizes.values()):
        return []  # the general layer reports them
    from harness.bench.sizing import SizingError, check_sizes, task_type_counts
    from harness.questions import QuestionsError

    task_types = _get(cfg, "benchmark.task_types")
    try:
        counts = task_type_counts(path, [str(t) for t in task_types] if task_types not in (_UNSET, None) else [])
        named = [Violation("benchmark.path", path, f"task type {_shown(name)} in the file: {problem}")
                 for name in sorted(counts) if (problem := task_type_name_problem(name))]
        if named:
            return named
        check_sizes(counts, source=f"benchmark.path = {path}", **sizes)
    except SizingError as exc:
        return [Violation("pools", " ".join(f"{k}={v}" for k, v in sizes.items()), str(exc))]
    except QuestionsError as exc:
        return [Violation("benchmark.path", path, str(exc))]
    return []


def _validate_certify(cfg: DictConfig) -> list[Violation]:
    """The certificate's own checks (kernel CertifyParams.check) plus the keys the stage adds."""
    from harness.kernel.certificate import CertifyParams

    c = _Checker(cfg)
    if _get(cfg, "certify") is _UNSET:
        return []
    keys = CertifyParams.keys()
    values = {k: _get(cfg, f"certify.{k}") for k in keys}
    if all(v is not _UNSET for v in values.values()):
        for key, value, rule in CertifyParams(**values).check():
            c.add(key, value, rule)
    c.check("certify.fallbacks", lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10,
            "must be an integer in [0, 10]")
    c.check("certify.candidate", lambda v: v in ("best", "current"), "must be 'best' or 'current'")
    c.check("certify.per_type", lambda v: v in ("flag", "rollback", "rollback_shared"),
            "must be 'rollback', 'rollback_shared' or 'flag'")
    c.check("certify.fallback_share", lambda v: _is_number(v) and 0 < v < 1, "must be a number in (0, 1)")
    c.check("certify.reference", lambda v: v is None or (isinstance(v, str) and v.strip() != ""),
            "must be null or a harness directory")
    return c.violations


def _shown(name: str, limit: int = 40) -> str:
    """`name` quoted, cut to `limit` characters with its length when longer (a 300-character name stays readable)."""
    return repr(name) if len(name) <= limit else f"{name[:limit]!r}... ({len(name)} characters)"


def validate_config(cfg: DictConfig) -> None:
    """Run the four layers of seed 000 §3 (plus the unknown-key check and, for benchmark=jsonl, the sizes
    against the questions file); raise one ConfigError listing all."""
    violations = unknown_keys(cfg) + _validate(cfg) + _validate_edit_budget(cfg) + _validate_minibatch(cfg) + _validate_gate(cfg)
    violations += _validate_certify(cfg)
    violations += location_violations(cfg)  # output paths and the tracking URI
    if not violations:
        violations = _validate_data_sizes(cfg)
    if violations:
        raise ConfigError(violations)
