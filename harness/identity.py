"""Run identity: every run id, run tag, sample-index range and the gate marker, in one place.

Run ids of training (`<run_name>` is `train.run_name`):

  <run_name>_e<E>_s<S>                      step rollout of epoch E, step S
  <run_name>_e<E>_s<S>_gate_<task_type>     gate rollouts of one skill (the `_gate_` marker)
  <run_name>_e<E>_s<S>_gate_<task_type>_screen  its pre-gate screen on the step's own questions
  <run_name>_e<E>_s<S>_h2_<key>_<label>     Harness² probe rollouts inside training
  <run_name>_e<E>_slowR / _slowR2 / _slowR0 slow-update full-validation runs
  <run_name>_e<E>_<task_type>_slowA         probation anchor re-run
  <run_name>_e<E>_holdout_<sv>_<pv>         per-epoch held-out evaluation
  <run_name>_holdout_<which>                final held-out evaluation
  <run_name>_certify_<arm>                  the delivery certificate's rollouts (arm: base, or a candidate's label)
  compare_<tag>_<arm>                       `stages.compare`'s rollouts
  <run_name>_eval_<pool>_<sv>_<pv>          an evaluation of one pool

No leak (seed 000 §10): the ladder's p̂ is never fed by a run id containing
`GATE_MARK`, so no other run id and no run name may contain it.

Sample indices (a new index is a fresh sample, the same index hits the
response cache): agent LLM call k of rollout sample s uses s*STEP_STRIDE + k;
the rollout samples themselves are reserved per purpose below, far apart.
"""

from __future__ import annotations

import hashlib
import re

GATE_MARK = "_gate_"
SCREEN_SUFFIX = "_screen"  # a gate prefix + this: the pre-gate screen (its own run kind, `gate_screen`)

# rollout sample indices, per purpose
STEP_STRIDE = 1000  # agent loop: LLM call k of sample s uses s * STEP_STRIDE + k
STEP_INDEX = 1000  # step rollouts: STEP_INDEX * E + S
SLOW_R_INDEX = 2000  # slow update R: SLOW_R_INDEX * E (R2: + 1)
HOLDOUT_INDEX = 3_000_000
PROBATION_ANCHOR_INDEX = 4_000_000  # + E: the anchor version's fresh sample for an e-process settlement
EVAL_INDEX = 4_000_000  # Runner.eval of a pool
CERTIFY_INDEX = 5_000_000  # the delivery certificate: + pair number (fresh samples, never the held-out's)
COMPARE_INDEX = 6_000_000  # stages.compare: + 10**6 * (--seed) + pair number
GATE_SAMPLE_BASE = 10_000_000  # gates: GATE_SAMPLE_BASE + hash(run id) % 10**6 * 100, ~1e7..1.1e8
PROBE_INDEX_BASE = 1 << 40  # Harness² probes inside training: far above every range above

_TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_STEP_LIKE_RE = re.compile(r"^s\d")
_EPOCH_OF_RUN = re.compile(r"_e(\d+)_")


class RunTagError(ValueError):
    pass


# ---------------------------------------------------------------- training run ids


def step_run_id(run_name: str, epoch: int, step: int) -> str:
    return f"{run_name}_e{epoch}_s{step}"


def gate_run_prefix(run_name: str, epoch: int, step: int, task_type: str) -> str:
    return f"{step_run_id(run_name, epoch, step)}{GATE_MARK}{task_type}"


def screen_run_id(gate_prefix: str) -> str:
    return f"{gate_prefix}{SCREEN_SUFFIX}"


def h2_probe_run_prefix(run_name: str, epoch: int, step: int, key: str) -> str:
    return f"{step_run_id(run_name, epoch, step)}_h2_{key}"


def r_run_id(run_name: str, epoch: int) -> str:
    return f"{run_name}_e{epoch}_slowR"


def r2_run_id(run_name: str, epoch: int) -> str:
    return f"{run_name}_e{epoch}_slowR2"


def r0_run_id(run_name: str, epoch: int) -> str:
    return f"{run_name}_e{epoch}_slowR0"


def anchor_run_id(run_name: str, epoch: int, task_type: str) -> str:
    return f"{run_name}_e{epoch}_{task_type}_slowA"


def epoch_holdout_run_id(run_name: str, epoch: int, skills_version: str, prompts_version: str) -> str:
    return f"{run_name}_e{epoch}_holdout_{skills_version}_{prompts_version}"


def holdout_run_id(run_name: str, which: str) -> str:
    return f"{run_name}_holdout_{which}"


def eval_run_id(run_name: str, pool: str, skills_version: str, prompts_version: str) -> str:
    return f"{run_name}_eval_{pool}_{skills_version}_{prompts_version}"


def certify_run_id(run_name: str, arm: str) -> str:
    return f"{run_name}_certify_{arm}"


def is_gate_run(run_id: str) -> bool:
    return GATE_MARK in run_id


def is_step_run(run_id: str, run_name: str, epoch: int) -> bool:
    """A step rollout of `epoch` (never a gate run)."""
    return re.fullmatch(re.escape(f"{run_name}_e{epoch}_s") + r"\d+", run_id) is not None and not is_gate_run(run_id)


def run_kind(run_id: str) -> str:
    """gate_screen | gate | slow_r2 | slow_r0 | slow_r | slow_anchor | holdout | certify | step (the `_runs.kind` of the
    loop's inference runs: a training run's rollouts per purpose are its predictions grouped by it)."""
    if is_gate_run(run_id):
        return "gate_screen" if run_id.endswith(SCREEN_SUFFIX) else "gate"
    if "_certify_" in run_id:
        return "certify"
    for suffix, kind in (("_slowR2", "slow_r2"), ("_slowR0", "slow_r0"), ("_slowR", "slow_r"), ("_slowA", "slow_anchor")):
        if run_id.endswith(suffix):
            return kind
    return "holdout" if "_holdout_" in run_id else "step"


def epoch_of_run(run_id: str) -> int | None:
    """E of a run id with an `_e<E>_` part, None for the others (final held-out, evals)."""
    match = _EPOCH_OF_RUN.search(run_id + "_")
    return int(match.group(1)) if match else None


# What a training run's rollouts were for, in the order reports stack them (`run_purpose`).
PURPOSES = ("training batch", "gate screen", "gate", "Harness² probe", "slow-update validation", "per-epoch held-out",
            "certificate", "other")
_SLOW_RUN = re.compile(r"_e\d+_(slowR\d?|[^_].*_slowA)$")
_STEP_RUN = re.compile(r"_e\d+_s\d+$")


def run_purpose(run_id: str) -> str:
    """One of PURPOSES for a run id of the forms listed in this module's docstring."""
    if GATE_MARK in run_id:
        return "gate screen" if run_id.endswith(SCREEN_SUFFIX) else "gate"
    if "_h2_" in run_id:
        return "Harness² probe"
    if "_certify_" in run_id:
        return "certificate"
    if _SLOW_RUN.search(run_id):
        return "slow-update validation"
    if re.search(r"_e\d+_holdout_", run_id):
        return "per-epoch held-out"
    if _STEP_RUN.search(run_id):
        return "training batch"
    return "other"


def gate_sample_start(gate_run_id: str) -> int:
    """First sample index of a gate: GATE_SAMPLE_BASE + stable_hash(run_id) % 10**6 * 100."""
    digest = int(hashlib.sha1(gate_run_id.encode("utf-8")).hexdigest(), 16)
    return GATE_SAMPLE_BASE + (digest % 10**6) * 100


def probe_sample_index(label: str) -> int:
    """A stable fresh sample index per Harness² probe label inside training, in the reserved probe range."""
    return PROBE_INDEX_BASE + int(hashlib.sha1(label.encode("utf-8")).hexdigest()[:10], 16) % PROBE_INDEX_BASE


# ---------------------------------------------------------------- Harness² sweeps


def label_sample_index(label: str) -> int:
    """A stable sample index per execution label or call key: a new label is a fresh sample, a re-run hits the cache."""
    return int(hashlib.sha1(label.encode("utf-8")).hexdigest()[:8], 16)


def validate_run_tag(tag: str) -> str:
    """Return `tag` or raise RunTagError saying which rule it breaks."""
    if not isinstance(tag, str) or not tag:
        raise RunTagError(f"run tag must be a non-empty string, got {tag!r}")
    if tag.startswith("-"):
        raise RunTagError(f"run tag {tag!r} starts with '-' (it would be read as a command-line option)")
    if _STEP_LIKE_RE.match(tag):
        raise RunTagError(f"run tag {tag!r} starts with 's<digits>', which collides with step run ids ('_s<N>')")
    if not _TAG_RE.match(tag):
        raise RunTagError(f"run tag {tag!r} may only contain letters, digits, '.', '_' and '-' (max 64 chars, starting with a letter or digit)")
    return tag


def idempotency_key(run_tag: str, role: str, label: str) -> str:
    """``h2-{run_tag}-{role}-{label}``: the same tag reuses work (resume); a new tag starts over."""
    validate_run_tag(run_tag)
    if not role or not label:
        raise ValueError("idempotency key needs a role and a label")
    return f"h2-{run_tag}-{role}-{label}"


def sweep_task_run_id(run_tag: str, task_id: str, mode: str, k: int) -> str:
    return f"{run_tag}/{task_id}/{mode}/k{k}"
