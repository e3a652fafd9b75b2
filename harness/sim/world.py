"""The simulated world: a seeded benchmark with known ground truth (DESIGN §7).

A `World` is a pure function of `(seed, WorldParams)`: every process that
builds it from the same config gets the same task types, questions, hidden
rules and behaviour knobs, so separate pipeline stages agree without sharing
anything but config.

Per task type the world hides
  * insights — rules that help (positive logit weight) on the subset of the
    type's questions they apply to,
  * traps    — plausible rules that hurt (negative weight) where they apply,
  * neutrals — rules with no effect.
Each rule is one canonical sentence. The solver "states" a rule when the
sentence appears in the text it reads (see `harness/sim/matching.py`).

P(correct) of a question (computed in `harness/sim/solver.py`):
  logistic(base_ability[type] + Σ stated applicable insights − Σ stated
           applicable traps − difficulty − always-on length cost)
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Literal, Mapping

from harness.contracts.solver import (
    DEFAULT_SKILL,
    LETTERS,
    SYSTEM_PROMPT_PATH,
    skill_path,
)
from harness.questions import Question
from harness.tree import HarnessTree

from .matching import normalize

RuleKind = Literal["insight", "trap", "neutral"]
RULE_KINDS: tuple[RuleKind, ...] = ("insight", "trap", "neutral")

TASK_TYPE_NAMES: tuple[str, ...] = (
    "temporal_reasoning",
    "spatial_perception",
    "object_recognition",
    "action_recognition",
    "counting_problem",
    "attribute_perception",
    "ocr_problems",
    "information_synopsis",
    "object_reasoning",
    "action_reasoning",
    "temporal_perception",
)

# Cue nouns: what a rule is about. A rule's cue appears in solver hints and
# diagnoses, which is how evidence points the editor at a rule.
CUE_NOUNS: tuple[str, ...] = (
    "timestamps", "scene transitions", "on-screen text", "speaker identity", "object positions",
    "camera angle", "background details", "repeated actions", "subtitle timing", "hand movements",
    "color cues", "object counts", "facial expressions", "audio cues", "motion direction",
    "opening shot", "closing shot", "relative sizes", "occluded objects", "crowd behaviour",
    "lighting changes", "room layout", "tool usage", "clothing details", "vehicle movement",
    "gesture sequence", "text overlays", "shot boundaries", "object interactions", "narrator statements",
    "body posture", "distance cues", "entry and exit moments", "duplicate objects", "mirror reflections",
    "street signage", "weather conditions", "speed changes", "dialogue order", "brand logos",
)

RULE_TEMPLATES: dict[str, tuple[str, ...]] = {
    "insight": (
        "locate the {cue} first and check every choice against them",
        "confirm the {cue} at two separate moments before committing to an answer",
        "eliminate the choices that contradict the {cue} before comparing the rest",
        "write down what the {cue} show and only then read the choices",
    ),
    "trap": (
        "trust the first impression of the {cue} and do not re-check them",
        "prefer the choice that mentions the {cue} most directly",
        "ignore the {cue} whenever the question looks easy",
        "assume the {cue} stay the same for the whole video",
    ),
    "neutral": (
        "mention the {cue} briefly in the reasoning",
        "keep the reasoning about the {cue} short and clear",
        "restate the part of the question about the {cue} before answering",
        "describe the {cue} in plain words",
    ),
}

QUESTION_STEMS: dict[str, tuple[str, ...]] = {
    "temporal_reasoning": ("what happens right after the {obj} appears?", "what caused the {obj} to move?", "in which order do the {obj} events occur?"),
    "spatial_perception": ("where is the {obj} relative to the table?", "which side of the frame is the {obj} on?", "how far is the {obj} from the camera?"),
    "object_recognition": ("which object is held next to the {obj}?", "what is the {obj} made of?", "which item is placed on the {obj}?"),
    "action_recognition": ("what is the person doing with the {obj}?", "which action is performed before touching the {obj}?", "how does the person use the {obj}?"),
    "counting_problem": ("how many {obj} are visible?", "how many times is the {obj} picked up?", "how many people walk past the {obj}?"),
    "attribute_perception": ("what colour is the {obj}?", "what shape is the {obj}?", "what pattern is on the {obj}?"),
    "ocr_problems": ("what does the label on the {obj} say?", "which number is written on the {obj}?", "what word appears above the {obj}?"),
    "information_synopsis": ("what is the main topic of the scene with the {obj}?", "which summary fits the {obj} segment best?", "what is the video about, judging by the {obj}?"),
    "object_reasoning": ("why is the {obj} placed there?", "what would happen if the {obj} were removed?", "what is the {obj} most likely used for?"),
    "action_reasoning": ("why does the person reach for the {obj}?", "what is the purpose of moving the {obj}?", "what will the person do next with the {obj}?"),
    "temporal_perception": ("when does the {obj} first appear?", "how long is the {obj} on screen?", "at which point does the {obj} change?"),
}
STEM_OBJECTS = ("cup", "door", "bicycle", "lamp", "box", "dog", "window", "car", "book", "phone", "chair", "bag", "clock", "ball", "bottle")
CHOICE_POOL = (
    "the red one", "the blue one", "on the left", "on the right", "before the cut", "after the cut",
    "two", "three", "four", "five", "opening it", "closing it", "a kitchen", "an office", "a street",
    "at the start", "in the middle", "near the end", "a child", "an adult", "round", "square",
    "striped", "plain", "to clean it", "to hide it", "to show it", "to repair it", "EXIT", "OPEN",
)


@dataclass(frozen=True)
class Rule:
    rule_id: str  # "<task_type>/<kind>/<i>"
    task_type: str
    kind: RuleKind
    cue: str
    text: str  # canonical sentence
    weight: float  # logit effect where it applies: > 0 insight, < 0 trap, 0 neutral

    @property
    def norm(self) -> str:
        return normalize(self.text)


@dataclass(frozen=True)
class TaskTypeSpec:
    name: str
    base_ability: float
    rules: tuple[Rule, ...]

    def of_kind(self, kind: RuleKind) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.kind == kind)


@dataclass(frozen=True)
class WorldParams:
    """Every knob of the world and of the simulated roles (calibrated defaults)."""

    n_task_types: int = 11
    questions_per_type: int = 60
    n_choices: int = 4
    # hidden rules per task type
    n_insights: int = 4
    n_traps: int = 3
    n_neutrals: int = 4
    insight_weight: tuple[float, float] = (0.9, 1.9)
    trap_weight: tuple[float, float] = (0.7, 1.5)
    insight_coverage: tuple[float, float] = (0.4, 0.8)  # share of the type's questions a rule applies to
    trap_coverage: tuple[float, float] = (0.5, 0.9)
    base_ability_mean: float = 0.2
    base_ability_sd: float = 0.45
    difficulty_sd: float = 1.0
    # base harness: how many task types get their own skill, and what it states
    base_skill_types: int = 7
    base_insight_types: int = 2  # own-skill types whose base skill states one insight
    base_trap_types: int = 2  # own-skill types whose base skill states one trap
    # always-on length cost (system prompt + tool guides)
    length_budget_chars: int = 1600
    length_cost_per_kchar: float = 0.6
    # solver behaviour
    hint_right_prob: float = 0.45  # wrong answer's hint names a missing applicable insight
    tool_call_prob: float = 0.15
    # what the solver says: P(states "Confidence: high") given its sampled answer is right / wrong
    confidence_when_right: float = 0.75
    confidence_when_wrong: float = 0.30
    # token log-probabilities at the answer letter: P(right letter) of a sample is Beta(k p, k (1 - p)) with
    # k = soft_concentration, conditioned on the sampled outcome (harness/sim/solver.letter_distribution)
    soft_concentration: float = 4.0
    # diagnoser behaviour
    diagnosis_keep_cue_prob: float = 0.85
    # editor behaviour
    editor_malformed_prob: float = 0.06
    editor_follow_evidence_prob: float = 0.4
    editor_prior: tuple[float, float, float, float] = (0.15, 0.57, 0.2, 0.08)  # insight, neutral, trap, fix (delete a stated trap)
    editor_n_edits: tuple[float, float, float] = (0.65, 0.25, 0.10)  # P(1), P(2), P(3) edits, capped by budget
    # Harness² composer (harness/sim/composer.py): keep a candidate when its probe's share of confident
    # answers beats the base's by more than min_gain ± jitter/2
    composer_min_gain: float = 0.10
    composer_gain_jitter: float = 0.10
    # selector / judge behaviour
    selector_best_prob: float = 0.75

    def replace(self, **changes) -> "WorldParams":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class QuestionTruth:
    qid: str
    task_type: str
    difficulty: float
    answer: str
    applies: tuple[tuple[str, float], ...]  # (rule_id, signed weight) of the insights/traps applying here


@dataclass
class World:
    seed: int
    params: WorldParams
    task_types: tuple[TaskTypeSpec, ...]
    questions: list[Question]
    truth: dict[str, QuestionTruth]
    base_tree: HarnessTree
    rules: dict[str, Rule] = field(default_factory=dict)
    qid_by_text: dict[str, str] = field(default_factory=dict)
    spec_by_name: dict[str, TaskTypeSpec] = field(default_factory=dict)

    @classmethod
    def generate(cls, seed: int, n_task_types: int = 11, questions_per_type: int = 60, n_choices: int = 4, params: WorldParams | None = None) -> "World":
        """Build the world for `seed`; explicit size arguments override `params`."""
        base = params or WorldParams()
        p = base.replace(n_task_types=n_task_types, questions_per_type=questions_per_type, n_choices=n_choices)
        return _generate(int(seed), p)

    @classmethod
    def from_config(cls, bench_cfg) -> "World":
        """From the `benchmark` config group (seed, n_task_types, questions_per_type, n_choices)."""
        return cls.generate(
            seed=int(bench_cfg.seed),
            n_task_types=int(bench_cfg.n_task_types),
            questions_per_type=int(bench_cfg.questions_per_type),
            n_choices=int(bench_cfg.n_choices),
        )

    @property
    def task_type_names(self) -> list[str]:
        return [t.name for t in self.task_types]

    def base_harness(self) -> HarnessTree:
        return self.base_tree

    def question(self, qid: str) -> Question:
        return self._by_qid[qid]

    @property
    def _by_qid(self) -> dict[str, Question]:
        cache = self.__dict__.get("_qcache")
        if cache is None:
            cache = {q.qid: q for q in self.questions}
            self.__dict__["_qcache"] = cache
        return cache

    def rules_of(self, task_type: str, kind: RuleKind | None = None) -> tuple[Rule, ...]:
        spec = self.spec_by_name[task_type]
        return spec.rules if kind is None else spec.of_kind(kind)

    def qids_of(self, task_type: str) -> list[str]:
        return [q.qid for q in self.questions if q.task_type == task_type]


def display_name(task_type: str) -> str:
    return task_type.replace("_", " ")


def _uniform(rng: random.Random, bounds: tuple[float, float]) -> float:
    return bounds[0] + (bounds[1] - bounds[0]) * rng.random()


def _generate(seed: int, p: WorldParams) -> World:
    if not 1 <= p.n_task_types <= len(TASK_TYPE_NAMES):
        raise ValueError(f"benchmark.n_task_types must be between 1 and {len(TASK_TYPE_NAMES)}, got {p.n_task_types}")
    if p.questions_per_type < 1:
        raise ValueError(f"benchmark.questions_per_type must be >= 1, got {p.questions_per_type}")
    if not 2 <= p.n_choices <= min(len(LETTERS), 6):
        raise ValueError(f"benchmark.n_choices must be between 2 and 6, got {p.n_choices}")
    n_rules = p.n_insights + p.n_traps + p.n_neutrals
    if n_rules > len(CUE_NOUNS):
        raise ValueError(f"too many rules per task type ({n_rules}); at most {len(CUE_NOUNS)} cues exist")
    rng = random.Random(f"sim-world|{seed}")
    names = TASK_TYPE_NAMES[: p.n_task_types]

    specs: list[TaskTypeSpec] = []
    rules: dict[str, Rule] = {}
    for tt in names:
        cues = rng.sample(CUE_NOUNS, n_rules)
        made: list[Rule] = []
        for kind, count in (("insight", p.n_insights), ("trap", p.n_traps), ("neutral", p.n_neutrals)):
            for i in range(count):
                cue = cues[len(made)]
                template = rng.choice(RULE_TEMPLATES[kind])
                text = f"For {display_name(tt)} questions, {template.format(cue=cue)}."
                if kind == "insight":
                    weight = _uniform(rng, p.insight_weight)
                elif kind == "trap":
                    weight = -_uniform(rng, p.trap_weight)
                else:
                    weight = 0.0
                made.append(Rule(f"{tt}/{kind}/{i}", tt, kind, cue, text, round(weight, 4)))  # type: ignore[arg-type]
        specs.append(TaskTypeSpec(tt, round(rng.gauss(p.base_ability_mean, p.base_ability_sd), 4), tuple(made)))
        rules.update({r.rule_id: r for r in made})
    _check_rules_distinct(rules)

    questions: list[Question] = []
    truth: dict[str, QuestionTruth] = {}
    clip = rng.randrange(1000, 2000)
    for spec in specs:
        n = p.questions_per_type
        coverage: dict[str, set[int]] = {}
        for rule in spec.rules:
            if rule.kind == "neutral":
                continue
            share = _uniform(rng, p.insight_coverage if rule.kind == "insight" else p.trap_coverage)
            k = max(1, round(share * n))
            coverage[rule.rule_id] = set(rng.sample(range(n), k))
        for i in range(n):
            clip += rng.randrange(1, 7)
            qid = f"{spec.name}-{i:03d}"
            stem = rng.choice(QUESTION_STEMS[spec.name]).format(obj=rng.choice(STEM_OBJECTS))
            text = f"In clip {clip}, {stem}"
            choices = tuple(rng.sample(CHOICE_POOL, p.n_choices))
            answer = LETTERS[rng.randrange(p.n_choices)]
            difficulty = round(rng.gauss(0.0, p.difficulty_sd), 4)
            applies = tuple((rid, rules[rid].weight) for rid in sorted(coverage) if i in coverage[rid])
            questions.append(Question(qid=qid, task_type=spec.name, question=text, answer=answer, choices=choices, difficulty=difficulty, metadata={"source": "sim", "world_seed": seed}))
            truth[qid] = QuestionTruth(qid, spec.name, difficulty, answer, applies)

    world = World(
        seed=seed,
        params=p,
        task_types=tuple(specs),
        questions=questions,
        truth=truth,
        base_tree=_base_tree(specs, p, rng),
        rules=rules,
        qid_by_text={q.question: q.qid for q in questions},
        spec_by_name={s.name: s for s in specs},
    )
    if len(world.qid_by_text) != len(questions) or len(truth) != len(questions):
        raise AssertionError("sim world generated duplicate question texts")  # clip numbers strictly increase
    return world


def _check_rules_distinct(rules: Mapping[str, Rule]) -> None:
    """No rule's normalised text may contain another's, or stating one would state both."""
    norms = [(r.rule_id, r.norm) for r in rules.values()]
    for rid_a, a in norms:
        for rid_b, b in norms:
            if rid_a != rid_b and a in b:
                raise AssertionError(f"sim rule {rid_a} is contained in {rid_b}; cue vocabulary is ambiguous")


SKILL_FRONTMATTER = "---\nname: {name}\ndescription: {description}\n---\n"
BASE_SYSTEM_PROMPT = (
    "You are a careful assistant that answers multiple-choice questions about videos.\n"
    "Read the question and every choice, reason briefly, then give exactly one letter.\n"
)
TOOL_GUIDES = {
    "lookup_frames": (
        "lookup_frames returns a short text description of the frames around a moment of the video.\n"
        'Arguments: {"focus": "<what to look at>"}. Call it at most once, when the question depends on a detail you cannot recall.\n'
    ),
}


def skill_document(name: str, description: str, rules: list[str], title: str) -> str:
    """A native SKILL.md: frontmatter, a title, and a `## Rules` bullet list."""
    body = "\n".join(f"- {r}" for r in rules) if rules else ""
    return SKILL_FRONTMATTER.format(name=name, description=description) + f"\n# {title}\n\n## Rules\n{body}\n"


def _base_tree(specs: list[TaskTypeSpec], p: WorldParams, rng: random.Random) -> HarnessTree:
    files: dict[str, str] = {SYSTEM_PROMPT_PATH: BASE_SYSTEM_PROMPT}
    for tool, guide in TOOL_GUIDES.items():
        files[f"tools/{tool}.md"] = guide
    files[skill_path(DEFAULT_SKILL)] = skill_document(
        DEFAULT_SKILL,
        "Use for any video question that has no dedicated skill.",
        ["Read every choice before answering.", "Prefer the choice that matches the whole clip, not one frame."],
        "Default strategy",
    )
    own = specs[: min(p.base_skill_types, len(specs))]
    with_insight = set(range(min(p.base_insight_types, len(own))))
    with_trap = set(range(len(own) - min(p.base_trap_types, len(own)), len(own)))
    for i, spec in enumerate(own):
        stated = [rng.choice(spec.of_kind("neutral")).text] if spec.of_kind("neutral") else []
        if i in with_insight and spec.of_kind("insight"):
            stated.append(spec.of_kind("insight")[0].text)
        if i in with_trap and spec.of_kind("trap"):
            stated.append(spec.of_kind("trap")[0].text)
        files[skill_path(spec.name)] = skill_document(
            spec.name,
            f"Use for {display_name(spec.name)} questions about videos.",
            stated,
            display_name(spec.name).capitalize(),
        )
    return HarnessTree(files)
