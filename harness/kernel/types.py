"""Plain dataclasses shared by the decision kernel, the loop and the checkpoint.

Everything here is data: no I/O, no LLM. Field sets are part of the
checkpoint format (harness/loop/checkpoint.py revives them with `Cls(**d)`), so
adding a field is a format change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional

GateAction = Literal["accept", "reject", "continue", "probation", "infra"]  # "infra": INFRA guard aborted the gate

# Momentum / quadrant categories: the single source of truth.
IMPROVED = "IMPROVED"
REGRESSED = "REGRESSED"
PERSISTENT_FAIL = "PERSISTENT_FAIL"
STABLE_SUCCESS = "STABLE_SUCCESS"
CATEGORY_ORDER = (REGRESSED, IMPROVED, PERSISTENT_FAIL, STABLE_SUCCESS)  # REGRESSED first: strongest harm signal


@dataclass(frozen=True)
class BlockItem:
    """One slot of a gate block: ask `qid` with fresh `sample_index` (baseline and candidate)."""

    qid: str
    sample_index: int
    anchor: bool = False  # drawn uniformly from the whole validation pool, not from the ladder
    weight: float = 1.0  # importance weight 1 / (N pi) of a randomised plan (kernel/importance_plan.py); 1 = uniform
    weight_bound: float = 1.0  # the plan's largest weight, fixed before the gate: the betting e-process sizes its bets for it


@dataclass(frozen=True)
class PairResult:
    """One paired observation of a question in a gate block."""

    qid: str
    baseline: Optional[bool]  # None = infra failure / no outcome
    candidate: Optional[bool]
    sample_index: int = 0  # the candidate sample used in this pair
    anchor: bool = False  # drawn from the anchor stratum
    weight: float = 1.0  # importance weight of its slot (BlockItem.weight)
    weight_bound: float = 1.0  # BlockItem.weight_bound
    # gate.metric soft / mixed under a weighted rule: the metric's value in [0, 1] of which `baseline` / `candidate`
    # is the randomized rounding (None: the outcome is the value, as for hard outcomes and infra failures)
    baseline_value: Optional[float] = None
    candidate_value: Optional[float] = None
    # each arm's soft score when its rollout has one (any gate.metric): evidence a futility rule may read, never the
    # accept statistic
    baseline_soft: Optional[float] = None
    candidate_soft: Optional[float] = None

    @property
    def infra(self) -> bool:
        return self.baseline is None or self.candidate is None

    @property
    def sign(self) -> int:
        """+1 win, -1 loss, 0 tie or infra."""
        if self.infra or self.baseline == self.candidate:
            return 0
        return 1 if self.candidate else -1


def _registered_settings() -> tuple[tuple[str, Any], ...]:
    # GateParams() default: every registered strategy's (and gate component's) settings at their params defaults
    from harness.kernel.registry import gate_strategy_settings

    return tuple(sorted(gate_strategy_settings(()).items()))


@dataclass(frozen=True)
class GateParams:
    """The gate's core parameters (what every rule and plan shares) plus `settings`, the carrier of every setting a
    strategy or gate component owns in its own params dataclass (kernel/registry.py `params_of` reads them typed).
    Build one with strategy settings by `GateParams.build(**kw)`; `with_values(**kw)` is its `dataclasses.replace`."""

    rule: str = "betting"  # kernel/rules.RULES
    plan: str = "importance"  # gate.plan, kernel/plans.SAMPLING_PLANS: importance | random (population-valid) | static (the seed's ladder: strong null only)
    # what a pair's outcome is: hard (correct), soft or mixed ((hard + soft) / 2) rounded at random to {0, 1} with
    # that probability at the loop level (harness/loop/validate.gate_outcomes); a weighted rule bets on the value
    # itself (PairResult.baseline_value / candidate_value): pair differences stay in [-1, 1]
    metric: str = "hard"
    lambda_accept: float = 3.0  # accept when log E >= lambda (config key gate.lambda); fdr=elond replaces it per gate
    lambda_dir: float = -1.56  # reject boundary of the sequential rules (betting: reject e-process >= exp(-lambda_dir))
    block_size: int = 20
    max_pairs: int = 400
    undecided: str = "reject"  # "probation" | "reject"
    fdr: str = "elond"  # kernel/fdr.FDR_PROCEDURES: "none" | "elond" (each gate's accept level from e-LOND over the run)
    screen: bool = True  # run the candidate on the step's own questions first; GEPA's rule filters
    futility: str = "estimate"  # kernel/futility.FUTILITY_RULES: none | estimate | soft_estimate; only ever rejects
    infra_max_ratio: float = 0.2
    infra_min_denominator: int = 10
    # (key, value) of every gate.* setting a registered strategy or gate component declares in its params dataclass,
    # sorted by key: not a config key itself (kernel/registry.gate_strategy_settings lists them)
    settings: tuple[tuple[str, Any], ...] = field(default_factory=_registered_settings)

    @classmethod
    def build(cls, **values: Any) -> GateParams:
        """GateParams from core fields and strategy settings by name (defaults for the rest); ValueError naming a key
        that is neither."""
        return cls().with_values(**values)

    def with_values(self, **values: Any) -> GateParams:
        """A copy with these core fields and strategy settings changed; ValueError naming a key that is neither."""
        import dataclasses

        core = {f.name for f in gate_param_fields()}
        own = dict(self.settings)
        unknown = sorted(k for k in values if k not in core and k not in own)
        if unknown:
            raise ValueError(f"GateParams: unknown gate setting(s) {unknown}: neither a core field ({', '.join(sorted(core))}) "
                             f"nor a registered strategy's setting ({', '.join(sorted(own))})")
        own.update((k, v) for k, v in values.items() if k not in core)
        return dataclasses.replace(self, **{k: v for k, v in values.items() if k in core}, settings=tuple(sorted(own.items())))


# GateParams field -> config key where they differ (`lambda` is a Python keyword)
GATE_CONFIG_KEY: dict[str, str] = {"lambda_accept": "lambda"}


def gate_params_from_config(gate_cfg: Any) -> GateParams:
    """GateParams from the `gate` config group (a mapping or attribute object): every core field and every registered
    strategy's setting, by name.

    A missing key is an error naming it; values are coerced to the field's type (YAML `3` for a float field)."""
    from harness.kernel.registry import gate_strategy_settings

    def read(key: str, owner: str, default: Any) -> Any:
        try:
            raw = gate_cfg[key] if hasattr(gate_cfg, "__getitem__") else getattr(gate_cfg, key)
        except (KeyError, AttributeError) as exc:
            raise KeyError(f"config key gate.{key} is missing (needed by the gate: {owner})") from exc
        return type(default)(raw) if isinstance(default, (int, float, str, bool)) and not isinstance(raw, type(default)) else raw

    values: dict[str, Any] = {}
    for f in gate_param_fields():
        values[f.name] = read(GATE_CONFIG_KEY.get(f.name, f.name), f"GateParams.{f.name}", f.default)
    owned = gate_strategy_settings(())
    settings = tuple((key, read(key, "a registered strategy's params", default)) for key, default in sorted(owned.items()))
    return GateParams(**values, settings=settings)


def gate_param_fields() -> list[Any]:
    """GateParams' core fields, each a gate.* config key (all but `settings`, which carries the strategies' keys)."""
    import dataclasses

    return [f for f in dataclasses.fields(GateParams) if f.name != "settings"]


@dataclass(frozen=True)
class GateVerdict:
    action: GateAction
    log_e: float  # log of the accept e-process
    log_lr_dir: float  # direction statistic (log-LR of theta1 vs 1/2)
    wins: int
    losses: int
    ties: int
    n_pairs: int
    reason: str = ""
    infra_failures: int = 0  # pairs with an infrastructure failure on either side


@dataclass(frozen=True)
class QuadrantClassification:
    improved: tuple[str, ...] = ()
    regressed: tuple[str, ...] = ()
    persistent_fail: tuple[str, ...] = ()
    stable_success: tuple[str, ...] = ()


@dataclass
class CaseSample:
    """One judged rollout as the diagnoser and editor see it: what the solver was shown (question, lettered
    choices, context entries), its parsed answer, the correct one, and (failures) the end of its trace."""

    qid: str
    task_type: str
    question: str
    predicted: Optional[str]
    answer: str
    correct: bool
    trace_excerpt: str = ""
    choices: list[str] = field(default_factory=list)  # the solver's choices A, B, ... (empty: not multiple choice)
    context: list[str] = field(default_factory=list)  # the question's context entries (the `get_context` tool's answers)

    @classmethod
    def of(cls, question: Any, *, predicted: Optional[str], correct: bool, trace_excerpt: str = "") -> CaseSample:
        """The case of one rollout of `question` (a harness.questions.Question): its fields copied from the question
        record, never re-parsed from a prompt."""
        return cls(qid=question.qid, task_type=question.task_type, question=question.question, predicted=predicted,
                   answer=question.answer, correct=correct, trace_excerpt=trace_excerpt, choices=list(question.choices),
                   context=list(question.context))


@dataclass
class SkillCasePack:
    task_type: str
    skill_file: str
    cases: list[CaseSample] = field(default_factory=list)


@dataclass
class SystemCasePack:
    """Failures accumulated over an epoch for the system prompt's slow update."""

    epoch: int
    cases: list[CaseSample] = field(default_factory=list)


@dataclass
class ToolCasePack:
    """Tool-usage evidence accumulated over an epoch for one tool guide."""

    tool: str
    epoch: int
    calls: int = 0
    errors: int = 0
    examples: dict[str, str] = field(default_factory=dict)


@dataclass
class RejectedEdit:
    task_type: str
    skill_file: str
    summary: str
    epoch: int
    step: int
    reason: str = ""


@dataclass
class Probation:
    """An edit accepted on probation; settled by the slow update."""

    task_type: str
    skill_file: str
    anchor_skills_version: str  # version to revert the file to on regression
    opened_epoch: int
    opened_step: int
    correctness_snapshot: dict[str, bool] = field(default_factory=dict)
    pending_edits: list[RejectedEdit] = field(default_factory=list)
    accepted_version: str = ""
    kind: str = "probation"  # "probation" (undecided gate) | "accepted" (accepted edit under watch)


@dataclass(frozen=True)
class ProbationVerdict:
    """Settlement of one Probation against the slow update's full-validation re-run."""

    action: Literal["keep", "rollback"]
    wins: int  # snapshot wrong -> re-run right
    losses: int  # snapshot right -> re-run wrong
    n_compared: int
    acc_before: Optional[float]
    acc_after: Optional[float]
    reason: str = ""


@dataclass
class Edit:
    """One edit proposed by the editor. `op`: add | replace | delete."""

    op: str
    text: str
    old: str = ""
    rationale: str = ""


@dataclass
class EditApplication:
    edit: Edit
    status: str  # "applied" | "not_found" | "duplicate" | "over_budget" | "invalid"
    detail: str = ""


@dataclass
class EvolutionRecord:
    """Outcome of evolving one skill file at one step."""

    task_type: str
    skill_file: str
    old_text: str
    new_text: str
    edits: list[Edit] = field(default_factory=list)
    apply_report: list[EditApplication] = field(default_factory=list)
    no_change_reason: str = ""
    parse_error: str = ""
    usd: float = 0.0
    reply_format: str = ""  # the editor's reply format: text | json_schema | json_object_schema (contracts/structured.py)

    @property
    def changed(self) -> bool:
        return self.new_text != self.old_text

    @property
    def applied_edits(self) -> list[Edit]:
        return [a.edit for a in self.apply_report if a.status == "applied"]


@dataclass
class DiagnosisResult:
    """Per-question diagnoses of one rollout run, grouped by task type."""

    run_id: str
    by_task_type: dict[str, list[str]] = field(default_factory=dict)  # task_type -> diagnosis texts
    failures: dict[str, list[CaseSample]] = field(default_factory=dict)
    usd: float = 0.0
    reply_format: str = ""  # the diagnoser's reply format (contracts/structured.py)
    n_unparseable: int = 0  # failures whose diagnosis reply did not parse twice
