"""Typed schema of the configuration (registered in Hydra's ConfigStore).

Every group of `conf/` has a dataclass here; OmegaConf rejects a wrong type
or an unknown key at load time, naming the key. Semantic rules (seed 000 §3:
`_validate`, edit budget, minibatch, gate) live in harness/config/validate.py.

Secrets are not part of the schema: `llm.api_key_env` names the environment
variable that holds the key; the key itself is read from the environment or
`.env` only (harness/config/secrets.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.kernel.registry import gate_strategy_settings
from harness.kernel.types import GATE_CONFIG_KEY, gate_param_fields


@dataclass
class BenchmarkConfig:
    name: str = "sim"  # "sim" | "jsonl"
    # sim world
    seed: int = 7
    n_task_types: int = 11
    questions_per_type: int = 60
    n_choices: int = 4
    # jsonl: the user's questions (JSONL or Parquet), scoring
    path: Optional[str] = None
    scorer: str = "exact"  # "exact" | "normalized" | "<module>:<function>"
    task_types: list[str] = field(default_factory=list)  # empty = take the task types found in the file
    questions_path: str = "data/questions.parquet"
    answer_parsing: str = "lenient"  # "strict" (ANSWER: line only) | "lenient" (+ fallbacks, harness/contracts/answers.py)
    # jsonl: the starting harness, a directory laid out for `harness_surface` (null = a generic one);
    # every task type of the data without a skill file gets one seeded from its default strategy
    harness_dir: Optional[str] = None
    harness_surface: str = "native"  # "native" | "codex" | "opencode" (harness/h2/surfaces.py)
    # what the agent answers, in the meta prompts' words ($domain of harness/evolution/templates/*.md)
    domain: str = "questions"
    # a step rollout whose share of unreadable answers (ambiguous + none) exceeds this stops the run (1.0: never)
    max_unparsed_share: float = 0.9
    # the file the questions come from, prepare's DVC dependency: ${benchmark.path} (jsonl), the conf file (sim)
    source: Optional[str] = None
    # the starting harness, pools' and improve's DVC dependency: ${benchmark.harness_dir}, else the conf file
    harness_source: Optional[str] = None


@dataclass
class LLMConfig:
    provider: str = "sim"  # "sim" | "openai"
    model: str = "sim-solver-1"  # shared default model
    models: dict[str, str] = field(default_factory=dict)  # role -> model (falls back to `model`)
    base_url: Optional[str] = None
    api_key_env: str = "OPENAI_API_KEY"  # name of the env variable, never the key
    timeout_s: float = 60.0
    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    retry_after_max_s: float = 120.0  # a server's Retry-After is honoured up to this (>= backoff_max_s)
    temperature: float = 0.7
    max_tokens: int = 1024
    # role -> max_tokens (falls back to `max_tokens`), e.g. a short solver reply and a longer editor reply
    max_tokens_by_role: dict[str, int] = field(default_factory=dict)
    concurrency: int = 16  # requests in flight at once over every role and stage: the run's one concurrency knob
    # solver replies: ask for the answer's token log-probabilities with this many alternatives (0 = off); the
    # multiple-choice soft score (harness/bench/soft.py). OpenAI, vLLM and llama.cpp's server return them
    top_logprobs: int = 0
    # llm=openai: processes running the SDK's HTTP work (1 = in this process; >1 helps above ~300 requests/s, docs/llm.md)
    client_processes: int = 1
    # USD per million tokens: {model: {"input": x, "output": y}}
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    cache_dir: str = ".cache/llm"
    max_agent_steps: int = 4


# The gate's keys are defined once, by the kernel's GateParams core fields (harness/kernel/types.py,
# where each is documented) and by the params dataclasses of the registered gate strategies
# and gate components (kernel/registry.gate_params_types; a rule, plan, futility rule or FDR
# procedure added in its own file brings its keys): this schema is composed from their fields
# and defaults, again at every `register_schema()` (so a strategy registered after import is
# in it), listed in GATE_KEY_ORDER (then any other key, sorted).
# `lambda` is a Python keyword, so GateParams calls it `lambda_accept` and the schema
# names the field exactly as users write it (`gate.lambda`). Only `dataclasses.fields`
# and class defaults are used by OmegaConf; the class is never instantiated.
# the order params.yaml has always listed the gate keys in (a stable `dvc params diff` and snapshot): keys are owned
# by the core or a strategy, this tuple only orders them
GATE_KEY_ORDER = (
    "rule", "metric", "lambda", "lambda_dir", "theta1", "block_size", "anchor_fraction", "max_pairs", "undecided",
    "p_low", "p_high", "ema_gamma", "probe_every", "mcnemar_n", "mcnemar_alpha", "infra_max_ratio",
    "infra_min_denominator", "reask_top_fraction", "accept_prior", "accept_prior_low", "accept_prior_high",
    "accept_prior_points", "accept_within_block", "plan", "plan_prior_obs", "fdr", "fdr_level", "fdr_horizon",
    "screen", "screen_margin", "selection_n", "cap_evolve_n", "probation_settlement", "importance_floor",
    "reject_margin", "bet_low", "bet_high", "bet_points", "futility", "futility_gain", "futility_power", "futility_z",
    "futility_min_n",
)


def gate_config_class() -> type:
    defaults = {GATE_CONFIG_KEY.get(f.name, f.name): f.default for f in gate_param_fields()}
    defaults.update(gate_strategy_settings(set(defaults) | set(GATE_CONFIG_KEY)))
    rank = {key: i for i, key in enumerate(GATE_KEY_ORDER)}
    defaults = dict(sorted(defaults.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
    namespace: dict[str, Any] = {"__annotations__": {k: type(v) for k, v in defaults.items()}, "__module__": __name__, **defaults}
    cls = type("GateConfig", (object,), namespace)
    return dataclasses.dataclass(init=False, repr=False, eq=False)(cls)


GateConfig = gate_config_class()


@dataclass
class EvolveConfig:
    method: str = "reflective"  # "reflective" | "h2" | "candidates"
    edit_budget_start: int = 3  # max edits per candidate at the first step
    edit_budget_end: int = 1  # ... at the last step (linear schedule), also the slow update's budget
    cooldown_steps: int = 1  # steps a skill rests after an accept
    max_case_questions: int = 8  # failing questions shown to the editor per skill
    max_skill_chars: int = 6000
    # a task type reading a shared file (default-strategy) with >= new_skill_min_failures failures in a batch
    # gets a candidate new skill file of its own, seeded from the shared one (validated like every edit); 0 = off
    new_skill_min_failures: int = 0
    # a directory of meta-prompt templates (diagnoser.md, skill_editor.md, system_prompt_editor.md, tool_editor.md,
    # momentum.md) overriding the package's (harness/evolution/templates/); null = the package's
    prompts_dir: Optional[str] = None
    # derived (conf/evolve/*.yaml): prompts_dir, else the package's templates directory; the evolve and slow stages'
    # DVC dependency
    prompts_source: str = "harness/evolution/templates"
    # evolve=h2: the probe set of a skill's round (its settings: `h2_round`): the step's failing questions of the
    # skill, up to a quarter passing ones
    h2_probe_questions: int = 8
    # evolve=candidates: a JSONL file of edit ops or a directory of harness variants (docs/candidates.md)
    candidates_path: Optional[str] = None
    # derived (conf/evolve/*.yaml): candidates_path, else conf/evolve/candidates.yaml; the evolve stage's DVC dependency
    candidates_source: str = "conf/evolve/candidates.yaml"


@dataclass
class H2RoundConfig:
    """One Harness² round (harness/h2/run.py `improve_task`), the one config read by `evolve=h2` (a round per skill
    and step) and `stages.improve` (a round per task and mode): conf/h2_round/*.yaml."""

    k: int = 1  # candidates per round, 1..3
    mode: str = "parallel"  # "parallel" | "sequential"; stages.improve runs each of improve.modes (default [mode])
    budget_usd: Optional[float] = 1.0  # per round: over budget -> the remaining stages fall back; None = no USD cap
    max_sessions: Optional[int] = None  # per round: paid sessions that count; None = no cap


@dataclass
class PoolsConfig:
    test_size: int = 220
    val_size: int = 220
    diagnosis_size: int = 220
    eval_min_per_class: int = 20
    val_correct_ratio: Optional[float] = None  # None = natural distribution
    seed: int = 11
    path: str = "data/pools.json"


@dataclass
class BatchingConfig:
    batch_size: int = 44
    min_class_per_batch: int = 2
    small_class_threshold: int = 8  # classes with <= this many questions are packed whole (FFD)
    mix_correct: bool = True


@dataclass
class TrainConfig:
    epochs: int = 3
    early_stop_patience: int = 2  # epochs without a best improvement before stopping
    seed: int = 0
    run_name: str = "default"
    state_dir: str = "state"
    slow_update: bool = True
    momentum: bool = True
    momentum_check: str = "none"  # none | per_file (harness/loop/slow_update.py _check_momentum_files)
    type_check_drop: Optional[float] = None  # null | accuracy drop (harness/loop/slow_update.py _check_types)
    system_tool_update: bool = False
    # the slow update's R and R2 ask only the validation questions whose input changed since the run they are compared
    # with (harness/loop/slow_update.py evaluate); false: every question, every time
    reuse_identical: bool = True
    # a seed directory (harness/store.py; `python -m stages.export --seed DIR` writes one) the run starts from
    # instead of the benchmark's base harness; null = the base harness
    init_seed: Optional[str] = None
    # derived (conf/train/*.yaml): init_seed, else conf/train/default.yaml; the pools stage's DVC dependency, so a seed
    # directory replaced at the same path re-runs pools
    init_source: Optional[str] = None
    # derived in conf/config.yaml by the ${ht.ceil_div/schedule/epoch_schedule:...} resolvers
    # (harness/config/resolvers.py); validation requires them to match the loop
    steps_per_epoch: int = 5
    schedule: list[Any] = field(default_factory=list)
    epoch_schedule: list[Any] = field(default_factory=list)


@dataclass
class TrackingConfig:
    enabled: bool = True
    tracking_uri: Optional[str] = None  # None = sqlite:///<project root>/mlflow.db (absolute)
    experiment: str = "harness-trainer"
    improve_experiment: str = "harness-trainer-improve"  # Harness² rounds (stages.improve) log here, apart
    log_tables: bool = True
    parent_run_name: Optional[str] = None


@dataclass
class CommandExecutorConfig:
    """`improve.executor=command`: an external CLI agent run in a fresh temporary worktree."""

    command: list[str] = field(default_factory=list)  # argv template: {workdir} {prompt} {prompt_file}
    timeout_s: float = 3600.0
    keep_worktrees: bool = False


@dataclass
class ServiceExecutorConfig:
    """`improve.executor=service`: the seed-002 remote task service (API key from the env only)."""

    base_url: Optional[str] = None
    api_key_env: str = "TASK_SERVICE_API_KEY"  # name of the env variable, never the key
    timeout_s: float = 3600.0
    poll_interval_s: float = 2.0
    model: Optional[str] = None  # shared model for every role; None = the service's default
    role_models: dict[str, str] = field(default_factory=dict)  # probe|editor|selector|reflector|judge -> model


@dataclass
class ImproveConfig:
    """Harness² as a pipeline over tasks (`python -m stages.improve`, dvc.yaml `improve@<domain>`)."""

    executor: str = "sim"  # "sim" | "command" | "service"
    backend: str = "inprocess"  # where command probes run: "inprocess" | "ray" | "auto"
    manifest: Optional[str] = None  # sweep manifest (YAML/JSON); None = tasks derived from the sim benchmark
    # the directory holding every file the manifest's tasks name (prompt_file, source_dir, base_harness_dir); None = the
    # manifest's directory. A task naming a path outside it is refused (DVC would not see that file change)
    tasks_dir: Optional[str] = None
    # derived (conf/improve/default.yaml): improve@<domain>'s DVC dependencies, the manifest file and tasks_dir (the conf
    # file when there is no manifest)
    manifest_source: Optional[str] = None
    tasks_source: Optional[str] = None
    domains: list[str] = field(default_factory=list)  # the DVC foreach list; sim: task types
    tasks_per_domain: int = 2  # sim tasks per domain (stream order)
    questions_per_task: int = 4  # sim questions per task
    modes: list[str] = field(default_factory=lambda: ["parallel"])  # the rounds run per task (k, budget: h2_round)
    run_tag: str = "improve"
    # a stated budget for one `stages.improve` run (one improve@<domain> stage): LLM calls and minutes; past it every
    # further call is refused and the rounds fall back. With a real model (llm.provider != sim) and the sim executor,
    # Harness² runs only when one of them is set (docs/pipeline.md "Harness² on a real model")
    max_llm_calls: Optional[int] = None
    max_minutes: Optional[float] = None
    workers: int = 2  # domains run concurrently
    auto_apply: bool = False
    judge: bool = True  # grade each delivered deliverable (a judge failure is ungraded)
    surface: str = "native"  # manifest tasks: "native" | "codex" | "opencode"
    out_dir: str = "state/improve"  # <out_dir>/<domain>/: run dir, library, domain-report.json
    report_dir: str = "reports/improve"  # sweep-report.json and sweep-report.md
    command: CommandExecutorConfig = field(default_factory=CommandExecutorConfig)
    service: ServiceExecutorConfig = field(default_factory=ServiceExecutorConfig)


@dataclass
class CertifyConfig:
    """The delivery certificate (harness/kernel/certificate.py; docs/kernel.md "Two kinds of evidence")."""

    alpha: float = 0.05  # P(certified and truly not better than the reference) <= alpha
    max_pairs: int = 1000  # pair budget of one attempt (2 rollouts a pair)
    block_size: int = 20  # pairs between looks
    margin: float = 0.0  # 0: certify "better"; > 0: "not worse by more than margin" (non-inferiority)
    useful_fraction: float = 0.1  # after certifying, sample on until the lower bound >= this share of the estimate
    flag_drop: float = 0.02  # flag a task type whose estimated change is below minus this (2 points)
    min_type_pairs: int = 5  # ... with at least this many pairs
    type_pairs: int = 10  # > 0: a certified attempt tops each task type it changed up to this many pairs (flags only)
    futility: str = "predictive"  # none | bound | estimate | predictive: refuse early once certifying is out of reach / hopeless
    pairs_per_question: float = 20.0  # > 0: pair budget min(max_pairs, max(200, this x test-pool questions)); 0: max_pairs
    futility_z: float = 1.645  # futility=estimate: conditional power at mean + this x se of the gain (0: point estimate)
    futility_power: float = 0.2  # futility=predictive: refuse below this predictive P(certified in the pairs left)
    futility_min_n: int = 200  # futility=predictive: pairs before the predictive power may refuse
    skip_identical: bool = True  # ask only the test questions whose solver input changed (the others' difference is exactly 0)
    useful_pairs_ratio: Optional[float] = 0.5  # after a crossing at n pairs, sample on at most this x n more pairs; null: to max_pairs
    per_type: str = "rollback_shared"  # flagged types: rollback_shared (their skill files + shared files, one
    # re-certification) | rollback (their skill files) | flag (flags only)
    candidate: str = "best"  # certified first: best (the last epoch's best pointer) | current (the harness training ended with)
    fallbacks: int = 0  # not certified: try up to this many earlier epochs' best harnesses, else deliver the start
    fallback_share: float = 0.2  # share of alpha the fallbacks split (the final harness gets the rest)
    reference: Optional[str] = None  # a harness directory to certify against instead of the starting harness


@dataclass
class RootConfig:
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    gate: GateConfig = field(default_factory=lambda: GateConfig)  # type: ignore[valid-type]
    evolve: EvolveConfig = field(default_factory=EvolveConfig)
    pools: PoolsConfig = field(default_factory=PoolsConfig)
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    h2_round: H2RoundConfig = field(default_factory=H2RoundConfig)
    improve: ImproveConfig = field(default_factory=ImproveConfig)
    certify: CertifyConfig = field(default_factory=CertifyConfig)
    quiet: bool = False


def max_tokens_for(llm: Any, role: str) -> int:
    """`role`'s max_tokens under an `llm` config (LLMConfig or its DictConfig): `max_tokens_by_role[role]`, else `max_tokens`."""
    by_role = llm.max_tokens_by_role or {}
    return int(by_role[role]) if role in by_role else int(llm.max_tokens)
