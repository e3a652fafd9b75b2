"""End-to-end benchmark of the training loop on the simulated world (issue 5 items 8-9).

    python benchmarks/e2e.py            # 5 seeds, default config, 6 acceptance rules + trade-off null
    python benchmarks/e2e.py --quick    # CI: 1 seed, a small world, 2 epochs

For every world seed:

1. our rule (`gate=betting`, the default config) trains for `train.epochs`
   epochs; its training rollouts (step + screen + gate + slow R/R0/R2 +
   probation settlements, each run's split in `rollouts_by_purpose`; held-out
   observation excluded) define the budget B;
2. `accept_all`, `gepa`, `mcnemar`, `skillopt`, `cap_evolve`, `sequential` (the sign e-process on the
   static ladder, the default before issue 13) and `oracle` (the ideal gate, free: `oracle_gate`, a
   bound for every gate, not a rule; `oracle_n<K>` / `oracle_seq<K>` on request: the Bayes-optimal decision
   from K pairs, K rollouts charged a gate, `bayes_gate`) run in the same loop on the same world
   for up to `--max-epochs` epochs (early stop out of the way); each is cut at
   the last epoch end whose cumulative training rollouts are <= B, and the
   best pointer of that epoch is what it delivers (same rollout budget);
3. the ORACLE (exact expected accuracy; only this benchmark uses it, never the
   loop) scores the base and delivered harnesses on the test pool, and every
   edit a gate installed (accept or probation) on the questions that read the
   edited file: harmful (down by > 0.1 pt), null (within 0.1 pt) or helped;
4. trade-off null: our rule with an editor that, on a share of its skill
   edits, proposes a rule that helps mid-difficulty questions and breaks easy
   ones of the same task type by exactly the same expected total; we count
   how many survive probation and the slow update into the delivered harness.

Runs use a state root under /dev/shm when it exists (the kernel's baseline
cache fsyncs every put) and no response cache (one process per run, nothing
to resume). Writes reports/benchmarks/e2e.md and a JSON next to it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing as mp
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RULES = ("betting", "betting_elond", "accept_all", "gepa", "minibatch", "mcnemar", "skillopt", "cap_evolve", "sequential", "oracle")
OURS = RULES[0]  # the default config (conf/gate/betting.yaml, whatever its gate.rule); it sets the budget B
ORACLE = "oracle"  # not a gate.rule: the ideal gate, free (oracle_gate); its runs use CONFIG_GROUP[ORACLE]
STRICT = "betting_elond"  # the default before issue 26: the betting e-process at e-LOND levels (conf/gate/strict.yaml)
CONFIG_GROUP = {ORACLE: "cap_evolve",  # a rule with gate questions and no screen / FDR, so every candidate reaches the gate
                OURS: "betting", STRICT: "strict"}
# a row's own settings, applied AFTER --override (which targets our rule): the strict row stays the old default
ROW_OVERRIDES = {STRICT: ["gate.rule=betting", "gate.fdr=elond", "gate.lambda=3.0", "gate.max_pairs=400", "gate.block_size=20",
                          "gate.futility_min_n=20", "gate.futility=estimate"]}
OWN_BUDGET = (OURS, STRICT)  # rows that train train.epochs and report their own spend (the strict row is not cut at B)
FIRST_LABELS = ("final", "current")  # the certificate's first candidate (certify.candidate best / current): not a fallback
CERTIFICATE = ("certify", "certificate.json")  # under the state dir, written by the certify stage when the pipeline has it
TRADEOFF_TAG = "Tradeoff heuristic"
QUICK_OVERRIDES = [
    "benchmark.n_task_types=4", "benchmark.questions_per_type=45", "pools.test_size=60", "pools.val_size=60",
    "pools.diagnosis_size=60", "pools.eval_min_per_class=10", "batching.batch_size=30",
]


# ---------------------------------------------------------------- the trade-off editor (benchmark only)


def _u(*parts: Any) -> float:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()[:12], 16) / 16**12


class TradeoffProvider:
    """LLMProvider wrapper: a share of skill edits become a zero-sum trade-off rule.

    Editor (FORMAT: edit-ops on a SKILL.md): with probability `share` the reply
    is one `add` of a line "Tradeoff heuristic <k>: ...". Solver: the lines are
    stripped before the simulated solver sees the prompt (so the base sample
    is unchanged) and, when the skill states one, the answer is flipped to the
    right letter w.p. `a` on mid-difficulty questions (0.3 <= p <= 0.7) that
    were wrong and to a wrong letter w.p. `b` on easy ones (p >= 0.8) that were
    right, `a` and `b` chosen per task type and harness (`tradeoff_rates`) so
    that the expected gain equals the expected loss on that type's questions
    (population effect exactly 0).
    """

    def __init__(self, inner: Any, world: Any, share: float = 0.35, a: float = 0.6):
        from harness.sim.solver import SolverModel

        self.inner, self.world, self.share, self.a = inner, world, share, a
        self.name = inner.name
        self.solver = SolverModel(world)
        self._b: dict[str, tuple[float, float]] = {}
        self.proposed = 0

    def model_for(self, role):
        return self.inner.model_for(role)

    async def complete(self, request):
        from harness.llm.protocol import ChatMessage, LLMRequest, LLMResponse

        msgs = request.messages
        system = msgs[0].content if msgs else ""
        if "FORMAT: edit-ops" in system and any("SKILL.md" in m.content for m in msgs[1:]):
            key = hashlib.sha1("".join(m.content for m in msgs).encode()).hexdigest()
            if _u(key, request.sample_index, "tradeoff") < self.share:
                self.proposed += 1
                k = int(_u(key, "id") * 1e6)
                text = (f'<edit op="add"><new>{TRADEOFF_TAG} {k}: when two choices look alike, prefer the one that '
                        f'matches the longest visible action.</new><why>recurring confusion between similar choices</why></edit>')
                return LLMResponse(text=text, model=self.inner.model_for(request.role), provider=self.name)
            return await self.inner.complete(request)
        if TRADEOFF_TAG not in system:
            return await self.inner.complete(request)
        stripped = "\n".join(line for line in system.split("\n") if TRADEOFF_TAG not in line)
        new_msgs = (ChatMessage(msgs[0].role, stripped),) + tuple(msgs[1:])
        inner_req = LLMRequest(role=request.role, messages=new_msgs, params=request.params, sample_index=request.sample_index)
        response = await self.inner.complete(inner_req)
        m = re.search(r"ANSWER:\s*([A-J])\s*$", response.text)
        if not m:
            return response
        from harness.contracts.solver import question_text_of

        qid = self.world.qid_by_text.get(question_text_of(msgs[1].content) or "")
        if qid is None:
            return response
        q = self.world.question(qid)
        read = self.solver.read(stripped)
        p = self.solver.p_correct(read, qid)
        a, b = self._rates_for(q.task_type, read)
        right = m.group(1) == q.answer
        u = _u(qid, request.sample_index, read.content_hash, "flip")
        letter = m.group(1)
        if not right and MID[0] <= p <= MID[1] and u < a:
            letter = q.answer
        elif right and p >= EASY and u < b:
            letters = "ABCDEFGHIJ"[: len(q.choices) or 4]
            wrong = [x for x in letters if x != q.answer]
            letter = wrong[int(_u(qid, request.sample_index, "wrong") * len(wrong))]
        if letter == m.group(1):
            return response
        return replace(response, text=response.text[: m.start(1)] + letter + response.text[m.end(1):])

    def _rates_for(self, task_type: str, read: Any) -> tuple[float, float]:
        key = f"{task_type}|{read.content_hash}"
        if key not in self._b:
            self._b[key] = tradeoff_rates([self.solver.p_correct(read, qid) for qid in self.world.qids_of(task_type)], self.a)
        return self._b[key]


MID = (0.3, 0.7)  # a trade-off rule flips wrong answers to right on questions of base accuracy in this range ...
EASY = 0.8  # ... and right answers to wrong on questions at least this easy


def tradeoff_rates(p: Sequence[float], a: float) -> tuple[float, float]:
    """(a', b) of one trade-off rule on questions of accuracies `p`: right w.p. a' on mid-difficulty wrong answers
    (0.3 <= p <= 0.7), wrong w.p. b on easy right ones (p >= 0.8), with expected gain = expected loss EXACTLY.

    b = a * gain / loss when that is <= 1; otherwise (too few easy answers to lose) b = 1 and a' = loss / gain
    (before this, b was capped at 1 with a unchanged: on 34 of 55 task types of seeds 7-11 the "zero-sum" rule
    then helped by up to 19.5 points, benchmarks/zero_sum_pool.py)."""
    gain = sum(1 - x for x in p if MID[0] <= x <= MID[1])  # expected wrong -> right per unit flip rate
    loss = sum(x for x in p if x >= EASY)  # expected right -> wrong per unit flip rate
    if gain <= 0 or loss <= 0:
        return 0.0, 0.0  # nothing to trade on this type: the rule does nothing
    if a * gain <= loss:
        return a, a * gain / loss
    return loss / gain, 1.0


# ---------------------------------------------------------------- the ideal gate (benchmark only)


HELPED = 0.001  # an edit whose true effect is above +0.1 pt "helped" (the oracle's classification in this benchmark)
IDEAL_RULE = re.compile(r"oracle_(n|seq)(\d+)$")  # the ideal decision at K pairs (bayes_gate); runs with CONFIG_GROUP[ORACLE]
PRIOR_START = ROOT / "benchmarks" / "ideal_prior_start.json"  # true effects of epoch-1 candidates (free oracle, dev seeds)
START_WEIGHT = 10  # the start pool counts as this many candidates, fading out as the run's own candidates come in
PRIOR_BANDWIDTH = 0.005  # Gaussian kernel (0.5 pt) on each prior effect: the posterior can sit between them at large K
GRID = 2001  # effect grid points on (-discordance, +discordance)
STOP_BAND = (0.2, 0.8)  # oracle_seq<K> draws on while P(effect > 0) is inside this band


def config_group(rule: str) -> str:
    """The conf/gate group a benchmark row runs with: the ideal rules run the ideal gate's group."""
    return CONFIG_GROUP.get(ORACLE if IDEAL_RULE.match(rule) else rule, rule)


def _reading_qids(world: Any, request: Any) -> list[str]:
    """The world's questions that read the edited skill file (the ones an edit of it can change)."""
    from harness.contracts.solver import resolve_skill_file

    return [q.qid for q in world.questions if resolve_skill_file(request.baseline_tree, q.task_type) == request.skill_file]


def _patch_gate(decide: Any) -> Any:
    """Put `decide` (request -> ValidationOutcome) in place of the loop's gate in this worker process; returns the
    function that puts the loop's gate back (a pool worker runs the next job next: the patch must not outlive this one)."""
    import harness.loop.gating as gating

    real = gating.validate_skill_local

    async def patched(request: Any) -> Any:
        return decide(request)

    gating.validate_skill_local = patched

    def restore() -> None:
        gating.validate_skill_local = real

    return restore


def oracle_gate(world: Any, log: Optional[list] = None) -> Any:
    """Replace the loop's gate by the ideal one in this worker process: accept exactly the edits whose true effect on
    the questions that read the edited file is above +0.1 point (what this benchmark counts as "helped"), with no
    rollouts. It is no gate anyone can run: it measures what a perfect, free gate would deliver for the step and slow
    rollouts alone, i.e. how far any gate could get on this budget comparison. `log` (optional) gets one row per gated
    candidate (epoch, true effect). Returns the function that puts the loop's gate back."""
    from harness.kernel.types import GateAction, GateVerdict
    from harness.loop.validate import ValidationOutcome
    from harness.sim.oracle import Oracle

    oracle = Oracle(world)

    def ideal(request: Any) -> Any:
        effect = oracle.edit_effect(request.baseline_tree, request.candidate_tree, _reading_qids(world, request))
        action: GateAction = "accept" if effect > HELPED else "reject"
        if log is not None:
            log.append({"epoch": request.epoch, "effect": effect, "pairs": 0, "action": action})
        verdict = GateVerdict(action, 0.0, 0.0, 0, 0, 0, 0, f"oracle gate: true effect {100 * effect:+.2f} pts")
        return ValidationOutcome(action=action, verdict=verdict, gate_run_id=request.gate_run_prefix)

    return _patch_gate(ideal)


def ideal_posterior(discordance: float, effects: Sequence[float], weights: Sequence[float]) -> Any:
    """The posterior of an edit's effect from its pairs, for an edit of known discordance D = P(pair differs).

    Pairs on questions drawn uniformly, arms independent: each pair difference is +1 / -1 / 0 with probability
    (D + effect) / 2, (D - effect) / 2, 1 - D, exactly (the law of one pair, the question integrated out), so the
    likelihood of `wins` and `losses` is trinomial (ties carry no information once D is known). Prior: the `effects`
    with their `weights`, each smoothed by a PRIOR_BANDWIDTH Gaussian, on the grid of effects in (-D, D) (uniform
    when no prior mass falls there). Returns (wins, losses) -> (posterior mean effect, P(effect > 0))."""
    grid = np.linspace(-discordance, discordance, GRID + 2)[1:-1]
    e, w = np.asarray(effects, float), np.asarray(weights, float)
    prior = (w[None, :] * np.exp(-0.5 * ((grid[:, None] - e[None, :]) / PRIOR_BANDWIDTH) ** 2)).sum(axis=1) if e.size else grid * 0
    if not prior.sum() > 0:
        prior = np.ones_like(grid)
    log_up, log_down = np.log((discordance + grid) / 2), np.log((discordance - grid) / 2)

    def posterior(wins: int, losses: int) -> tuple[float, float]:
        log_post = np.log(prior + 1e-300) + wins * log_up + losses * log_down
        post = np.exp(log_post - log_post.max())
        post /= post.sum()
        return float(post @ grid), float(post[grid > 0].sum())

    return posterior


def bayes_gate(world: Any, pairs: int, *, sequential: bool = False, start: Sequence[float] = (), log: Optional[list] = None) -> Any:
    """Replace the loop's gate by the Bayes-optimal decision from `pairs` pairs of evidence (benchmark only).

    Per gated candidate: the questions that read the edited file; `pairs` pairs, each a question drawn uniformly from
    them with a baseline outcome ~ Bern(p) and a candidate outcome ~ Bern(q) (true p, q; arms independent), drawn from
    an RNG seeded by the world seed and the gate's run id; install iff the posterior mean effect (`ideal_posterior`)
    is > +0.1 pt. Prior: the true effects of the candidates this run gated before (weight 1 each) and the `start` pool
    (total weight START_WEIGHT minus the run's count, so it is gone after START_WEIGHT candidates). `sequential`: draw
    pairs one at a time and stop once P(effect > 0) leaves STOP_BAND, or at `pairs`. The outcome charges one rollout a
    pair (the baseline arm free); nothing is written to the predictions databases, so run_one adds the pairs of `log`
    (one row per gated candidate) to the run's rollouts. Returns the function that puts the loop's gate back."""
    from harness.kernel.types import GateAction, GateVerdict
    from harness.loop.validate import ValidationOutcome
    from harness.sim.oracle import Oracle

    oracle = Oracle(world)
    seen: list[float] = []  # true effects of the candidates gated so far in this run
    rows = log if log is not None else []

    def decide(request: Any) -> Any:
        qids = _reading_qids(world, request)
        p = np.array(oracle.p_correct_each(request.baseline_tree, qids))
        q = np.array(oracle.p_correct_each(request.candidate_tree, qids))
        effect = float(q.mean() - p.mean())
        up, down = float(np.mean(q * (1 - p))), float(np.mean(p * (1 - q)))
        law = [up, down, max(0.0, 1.0 - up - down)]
        rng = np.random.default_rng(int(hashlib.sha1(f"{world.seed}|{request.gate_run_prefix}".encode()).hexdigest()[:16], 16))
        fade = max(0, START_WEIGHT - len(seen)) / len(start) if start else 0.0
        posterior = ideal_posterior(up + down, [*seen, *start], [1.0] * len(seen) + [fade] * len(start))
        if sequential:
            wins = losses = n = 0
            for z in rng.choice(3, size=pairs, p=law):  # 0 = win, 1 = loss, 2 = tie
                n, wins, losses = n + 1, wins + int(z == 0), losses + int(z == 1)
                mean, p_pos = posterior(wins, losses)
                if not STOP_BAND[0] < p_pos < STOP_BAND[1]:
                    break
        else:  # the counts of `pairs` independent pairs, each of the law above
            wins, losses, _ = (int(x) for x in rng.multinomial(pairs, law))
            n = pairs
            mean, p_pos = posterior(wins, losses)
        action: GateAction = "accept" if mean > HELPED else "reject"
        seen.append(effect)
        rows.append({"epoch": request.epoch, "effect": effect, "discordance": up + down, "pairs": n, "wins": wins,
                     "losses": losses, "posterior_mean": mean, "p_positive": p_pos, "action": action})
        verdict = GateVerdict(action, 0.0, 0.0, wins, losses, n - wins - losses, n,
                              f"ideal decision at {n} pairs: posterior mean {100 * mean:+.2f} pts (true {100 * effect:+.2f})")
        return ValidationOutcome(action=action, verdict=verdict, gate_run_id=request.gate_run_prefix, rollouts=n)

    return _patch_gate(decide)


def ideal_gate_for(rule: str, world: Any, start: Sequence[float], log: list) -> Any:
    """The patched gate of an ideal row (`oracle`, `oracle_n<K>`, `oracle_seq<K>`); None for a real rule."""
    if rule == ORACLE:
        return oracle_gate(world, log)
    m = IDEAL_RULE.match(rule)
    return bayes_gate(world, int(m.group(2)), sequential=m.group(1) == "seq", start=start, log=log) if m else None


def charge_ideal_pairs(curve: list[dict], log: Sequence[dict]) -> None:
    """Add the pairs an ideal rule charged (1 rollout each, no predictions written) to each epoch end's cumulative
    rollouts and to its gate rollouts (`by_purpose`), in place; `charged` keeps the amount added."""
    for point in curve:
        point["charged"] = sum(row["pairs"] for row in log if row["epoch"] <= point["epoch"])
        point["rollouts"] += point["charged"]
        point["by_purpose"]["gate"] += point["charged"]


def check_purpose_split(curve: Sequence[dict]) -> None:
    """Each epoch end's rollouts by purpose sum to its training rollouts; raises naming the epoch otherwise."""
    for point in curve:
        split = sum(point["by_purpose"].values())
        if split != point["rollouts"]:
            raise AssertionError(f"epoch {point['epoch']}: rollouts by purpose {point['by_purpose']} sum to {split}, "
                                 f"not the {point['rollouts']} training rollouts")


# ---------------------------------------------------------------- world variant: coupled arms (benchmark only)


def couple_arms(coupling: float) -> None:
    """World variant (`--arm-coupling c`, benchmark only, in this worker process): with probability c a simulated
    solver draw is keyed by (world seed, qid, sample index) alone, so two harnesses asked the same question with the
    same sample index share their uniforms: common random numbers, as a seed-honouring server gives a gate's two arms
    (benchmarks/real_coupling.py measured SmolLM2 on llama.cpp: discordance 0.069 with the same seed against 0.263
    with different seeds, ratio 0.26; a shared draw is discordant only with probability |p_C - p_B|, so c = 0.74
    gives about that ratio when the arms' accuracies are close). c = 0 is the default world: every draw keyed by
    the harness's content hash too, the arms independent."""
    import functools
    import inspect

    import harness.sim.solver as solver

    plain = inspect.unwrap(solver.uniforms)  # the world's own draws: an earlier call's coupled draws wrap them (__wrapped__)
    if coupling <= 0:
        solver.uniforms = plain
        return

    @functools.wraps(plain)
    def coupled(key: str, n: int) -> list[float]:
        parts = key.split("|")  # seed | qid | content hash | sample index [| tag]
        if len(parts) >= 4 and plain("|".join((parts[0], parts[1], parts[3], "couple")), 1)[0] < coupling:
            return plain("|".join(parts[:2] + parts[3:] + ["shared"]), n)
        return plain(key, n)

    solver.uniforms = coupled


# ---------------------------------------------------------------- one run


def _count_rollouts(fragments: list[Path]) -> dict[str, int]:
    out: dict[str, int] = {}
    for db in fragments:
        if not db.exists():
            continue
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for kind, n in conn.execute("SELECT r.kind, COUNT(*) FROM predictions p JOIN _runs r USING (run_id) GROUP BY r.kind"):
                out[kind] = out.get(kind, 0) + n
        finally:
            conn.close()
    return out


def _training(counts: dict[str, int]) -> int:
    return sum(n for kind, n in counts.items() if kind != "holdout")


# what a training rollout was for, by its run's `_runs.kind` (harness.identity.run_kind, or the kind the loop records:
# slow_update's R / R0 / R2 / anchor re-runs, harness.h2.loop_bridge.PROBE_RUN_KIND); held-out observation is not training
PURPOSE_OF_KIND = {"step": "step", "gate_screen": "screen", "gate": "gate", "slow_r": "slow_R", "slow_r0": "slow_R0",
                   "slow_r2": "slow_R2", "slow_anchor": "settle", "h2_probe": "h2_probe"}
PURPOSES = tuple(PURPOSE_OF_KIND.values())
PURPOSE_LABELS = {"step": "step (diagnosis batches)", "screen": "pre-gate screen", "gate": "gate pairs", "slow_R": "slow R",
                  "slow_R0": "slow R0", "slow_R2": "slow R2", "settle": "probation settlements", "h2_probe": "Harness² probes"}


def rollouts_by_purpose(counts: dict[str, int]) -> dict[str, int]:
    """Training rollouts (`counts`: `_count_rollouts`, per run kind) per purpose, every one of PURPOSES (0 when unused);
    a run kind with no purpose raises, so a new kind of training run cannot drop out of the split unseen."""
    unknown = sorted(set(counts) - set(PURPOSE_OF_KIND) - {"holdout"})
    if unknown:
        raise ValueError(f"predictions database _runs.kind {unknown}: no purpose in benchmarks/e2e.py PURPOSE_OF_KIND "
                         f"(expected kinds {sorted(PURPOSE_OF_KIND)} or holdout)")
    out = dict.fromkeys(PURPOSES, 0)
    for kind, n in counts.items():
        if kind != "holdout":
            out[PURPOSE_OF_KIND[kind]] += n
    return out


def _discordance(oracle: Any, old: Any, new: Any, qids: Sequence[str]) -> dict:
    """P(Z = +1) and P(Z = -1) of a pair (Z = C - B, C the new tree, B the old) on a question drawn uniformly from
    `qids`, for independent arms (`plus`/`minus`: mean q(1 - p), p(1 - q)) and for arms sharing their draw
    (`shared_plus`/`shared_minus`: mean max(q - p, 0), max(p - q, 0)); benchmarks/evidence_floor.py reads them."""
    p = np.array(oracle.p_correct_each(old, qids))
    q = np.array(oracle.p_correct_each(new, qids))
    return {"plus": float(np.mean(q * (1 - p))), "minus": float(np.mean(p * (1 - q))),
            "shared_plus": float(np.mean(np.maximum(q - p, 0.0))), "shared_minus": float(np.mean(np.maximum(p - q, 0.0)))}


def _by_type(oracle: Any, world: Any, tree: Any, test: Sequence[str]) -> dict[str, float]:
    """Oracle accuracy of `tree` on the test-pool questions of each task type."""
    qids: dict[str, list[str]] = {}
    for q in test:
        qids.setdefault(world.question(q).task_type, []).append(q)
    return {tt: oracle.expected_accuracy(tree, qs) for tt, qs in sorted(qids.items())}


def certificate_spend(cert: Any) -> dict[str, int]:
    """Where a certificate's pairs went: to the crossing and after it (the useful-bound phase) on the certified first
    attempt, on refused attempts (by why they stopped), and on the per-type rollback re-certification."""
    out = {"to_crossing": 0, "after_crossing": 0, "refused_budget": 0, "refused_futility": 0, "refused_ucb": 0,
           "recertify": 0}
    for a in cert.attempts:
        if a.decision == "skipped":
            continue
        if a.rollback is not None:
            out["recertify"] += a.pairs
        elif a.decision == "certified":
            out["to_crossing"] += a.crossed_at or a.pairs
            out["after_crossing"] += a.pairs - (a.crossed_at or a.pairs)
        else:
            why = "futility" if "futility" in a.reason else "ucb" if "upper bound" in a.reason else "budget"
            out[f"refused_{why}"] += a.pairs
    return out


def _certificate(state: Path) -> dict | None:
    """The certify stage's certificate of this run (harness/contracts/certificate.py; None when the pipeline has no
    certify stage or it did not run): the delivered attempt's figures (the first attempt's when none certified)."""
    from harness.contracts.certificate import CertificateError, read_certificate

    path = state.joinpath(*CERTIFICATE)
    if not path.is_file():
        return None
    try:
        cert = read_certificate(path)
    except CertificateError:
        return None
    shown = cert.described
    first_s = cert.population.get("first_attempts", cert.population)
    # what certify.per_type=flag would have delivered from the same run: the first certified attempt (the rollback
    # re-certification is the only attempt the two modes do not share: same slots, same sample indices)
    first = next((a for a in cert.attempts if a.rollback is None and a.decision == "certified"), None)
    retry = next((a for a in cert.attempts if a.rollback is not None), None)
    retried = None if retry is None or retry.rollback is None else {
        "decision": retry.decision, "rollouts": retry.rollouts, "task_types": list(retry.rollback["task_types"]),
        "kept": sorted(retry.rollback.get("kept", {})), "delivered": cert.chosen is retry}
    return {"certified": cert.certified, "decision": shown.decision if shown else "skipped", "alpha": cert.alpha,
            "pairs": shown.pairs if shown else 0, "rollouts": cert.rollouts, "spend": certificate_spend(cert),
            "discordance": (shown.wins + shown.losses + shown.infra) / shown.pairs if shown and shown.pairs else None,
            "estimate": shown.estimate if shown else None, "lower_bound": shown.lower_bound if shown else None,
            "width": shown.width if shown else None, "delivered": cert.delivered,
            # certify.skip_identical: the questions the first attempts asked, their share of the test pool, and the task
            # types that read identical input (None / [] in certificates without the fields; files without
            # `first_attempts` held the first attempts' figures in the population block itself)
            "asked_questions": first_s.get("asked_questions"), "asked_share": first_s.get("asked_share"),
            "identical_types": list(first_s.get("identical_task_types") or []),
            "flagged_types": list(cert.flagged_task_types), "per_type": cert.per_type,
            "rollback": retried,
            "flag_mode": {"delivered": first.label if first else "base", "skills_version": first.skills_version if first else "v0",
                          "prompts_version": first.prompts_version if first else "v0",
                          "rollouts": cert.rollouts - (retry.rollouts if retry else 0),
                          "flagged_types": sorted(t.task_type for t in first.per_task_type if t.flagged) if first else []}}


def _type_trace(oracle: Any, world: Any, ws: Path, skills_version: str, prompts_version: str, test: Sequence[str]) -> list[dict]:
    """`--type-trace`: the skills versions from v0 to `skills_version` (parent chain, meta as stored: gate accept /
    probation, probation rollback, momentum) with each step's oracle change per task type on the test pool (pts,
    only types that moved by > 0.5 pt): which install moved which type."""
    from harness import workspace as wsp
    from harness.store import read_version, read_version_tree

    chain = []
    version: Optional[str] = skills_version
    while version:
        stored = read_version(ws / "skills", version)
        chain.append(stored)
        version = stored.meta.get("parent")
    prompts = read_version_tree(ws / "prompts", prompts_version)
    rows, before = [], None
    for stored in reversed(chain):
        by_type = _by_type(oracle, world, wsp.compose_view(stored.tree, prompts), test)
        moved: dict[str, float] = {} if before is None else {tt: round(100 * (v - before[tt]), 2) for tt, v in by_type.items() if abs(v - before[tt]) > 0.005}
        meta = {k: v for k, v in stored.meta.items() if k not in ("fingerprint", "n_files", "created_at")}
        rows.append({**meta, "moved": moved})
        before = by_type
    return rows


def job_config(job: dict) -> dict:
    """The resolved config of one job (seed, rule, epochs, overrides, optional patience), composed in the parent process:
    the rule's gate group, then the job's overrides (which target our rule), then the row's own settings."""
    from omegaconf import OmegaConf

    from harness.config.load import load_config

    overrides = [f"benchmark.seed={job['seed']}", f"gate={config_group(job['rule'])}", f"train.epochs={job['epochs']}", "tracking=none",
                 "quiet=true", f"train.run_name={job['rule']}_s{job['seed']}", *job["overrides"], *ROW_OVERRIDES.get(job["rule"], [])]
    if job.get("patience"):
        overrides.append(f"train.early_stop_patience={job['patience']}")
    composed = OmegaConf.to_container(load_config(overrides, env_file=None, environ={}), resolve=True)
    if not isinstance(composed, dict):
        raise TypeError(f"config of job {job['rule']} seed {job['seed']}: expected a mapping, got {type(composed).__name__}")
    return composed


def run_one(job: dict) -> dict:
    """Train one (seed, rule) and measure it with the oracle."""
    from harness import workspace as wsp
    from harness.compose import build_benchmark, build_provider
    from harness.contracts.solver import resolve_skill_file
    from harness.loop.runner import Runner, steps_in_epoch
    from harness.loop.state import is_done, read_lineage, resolve_fragments
    from harness.sim.benchmark import SimBenchmark
    from harness.sim.oracle import Oracle
    from harness.store import read_version_tree

    seed, rule, epochs = job["seed"], job["rule"], job["epochs"]
    couple_arms(float(job.get("arm_coupling", 0.0)))
    import harness.loop.slow_update as su

    four_way_holdout = su._four_way_holdout
    if job.get("skip_epoch_holdout"):
        # the per-epoch four-way held-out is observation only (never a decision, excluded from the rollout
        # counts); the benchmark judges with the oracle instead, so it skips those rollouts to save time (for this
        # run only: restored below, so a caller in the same process, a test, gets the product's slow update back)
        su._four_way_holdout = lambda deps, state, log: []
    base_dir = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    root = Path(tempfile.mkdtemp(prefix=f"e2e_{rule}_{seed}_", dir=base_dir))
    started = time.monotonic()
    restore_gate = None
    try:
        from omegaconf import OmegaConf

        cfg = OmegaConf.create(job["cfg"])  # composed once in the parent: immune to conf/ edits during the run
        OmegaConf.set_readonly(cfg, True)
        bench = build_benchmark(cfg.benchmark, root)
        if not isinstance(bench, SimBenchmark):
            raise ValueError(f"benchmark.name = {cfg.benchmark.name}: benchmarks/e2e.py needs the simulated world (sim), "
                             "whose oracle scores the harnesses")
        world = bench.world
        provider = build_provider(cfg.llm, world=world)
        ideal_log: list[dict] = []  # one row per gated candidate of an ideal row (oracle, oracle_n<K>, oracle_seq<K>)
        restore_gate = ideal_gate_for(rule, world, job.get("ideal_start", ()), ideal_log)
        if job.get("tradeoff"):
            provider = TradeoffProvider(provider, world)
        result = Runner(cfg, root, llm=provider, bench=bench).train()
        oracle = Oracle(world)
        pools = json.loads((root / str(cfg.pools.path)).read_text())
        test = pools["test"]
        n_steps = steps_in_epoch(cfg)
        state = root / str(cfg.train.state_dir)
        ws_final = state / f"e{epochs}" / "slow" / "workspace"
        base_tree = world.base_harness()
        curve = []
        for e in range(1, epochs + 1):
            slow = state / f"e{e}" / "slow"
            if not is_done(slow):
                break
            lineage = read_lineage(slow)
            if lineage.stopped and not (slow / "report.json").exists():
                break  # an epoch after early stopping: passed through, nothing trained (the curve ends at the stop)
            counts = _count_rollouts(resolve_fragments(root, lineage))
            best = wsp.read_best(slow / "workspace")
            if best is None:
                raise ValueError(f"{slow / 'workspace'}: no best pointer in the manifest after a finished slow update")
            m = wsp.read_manifest(slow / "workspace")
            report = json.loads((slow / "report.json").read_text())
            best_tree = wsp.harness_view(slow / "workspace", best.skills, best.prompts)
            curve.append({
                "epoch": e, "rollouts": _training(counts), "by_purpose": rollouts_by_purpose(counts), "stopped": lineage.stopped,
                "best": [best.skills, best.prompts], "best_test": oracle.expected_accuracy(best_tree, test),
                "best_by_type": _by_type(oracle, world, best_tree, test),
                "current_test": oracle.expected_accuracy(wsp.harness_view(slow / "workspace", m.skills_version, m.prompts_version), test),
                "rollbacks": len(report["rollbacks"]),
            })
        charge_ideal_pairs(curve, ideal_log)  # the ideal rows' pairs are in no predictions database
        check_purpose_split(curve)
        # every edit a gate installed, judged by the oracle on the questions that read the edited file
        edits = []
        gates = gate_rollouts = screened_out = 0
        fdr_tests = fdr_spent = None
        fdr_levels: list[float] = []
        for e in range(1, epochs + 1):
            for s in range(1, n_steps + 1):
                rep = state / f"e{e}" / f"s{s}" / "gate" / "report.json"
                if not rep.exists():
                    continue
                doc = json.loads(rep.read_text())
                for row in doc["skills"]:
                    if row.get("gate_run_id") and row.get("n_pairs") is not None:
                        gates += 1
                        gate_rollouts += int(row["rollouts"] or 0)
                    screened_out += row.get("screen") == "failed"
                    if row.get("fdr_test") is not None:
                        fdr_tests, fdr_spent = row["fdr_test"], row.get("fdr_spent")
                    if row.get("fdr_level") is not None and row.get("screen") != "failed":
                        fdr_levels.append(float(row["fdr_level"]))
                    if row["action"] not in ("accept", "probation"):
                        continue
                    old_sv, new_sv = row["skills_version_before"], row["skills_version_after"]
                    gate_ws = state / f"e{e}" / f"s{s}" / "gate" / "workspace"
                    pv = wsp.read_manifest(gate_ws).prompts_version
                    old = wsp.harness_view(gate_ws, old_sv, pv)
                    new = wsp.harness_view(gate_ws, new_sv, pv)
                    target = f"skills/{row['skill_file']}"
                    qids = [q.qid for q in world.questions if resolve_skill_file(old, q.task_type) == target]
                    effect = oracle.edit_effect(old, new, qids)
                    discordance = _discordance(oracle, old, new, qids)
                    test_share = sum(resolve_skill_file(old, world.question(q).task_type) == target for q in test) / len(test)
                    new_text = read_version_tree(gate_ws / "skills", new_sv)[row["skill_file"]]
                    old_text = read_version_tree(gate_ws / "skills", old_sv).get(row["skill_file"], "")
                    tradeoff = TRADEOFF_TAG in new_text and new_text.count(TRADEOFF_TAG) > old_text.count(TRADEOFF_TAG)
                    edits.append({"epoch": e, "step": s, "action": row["action"], "skill_file": row["skill_file"],
                                  "effect": effect, "tradeoff": tradeoff, "rollouts": row["rollouts"],
                                  "discordance": discordance, "test_share": test_share})
        delivered_dir = state / "holdout" / "delivered"
        from harness.tree import HarnessTree

        delivered = HarnessTree.load(delivered_dir)
        cert = _certificate(state)
        flag_mode = None
        if cert is not None and cert["rollback"] is not None:  # the same run under certify.per_type=flag
            fm = cert["flag_mode"]
            flag_tree = wsp.harness_view(ws_final, fm["skills_version"], fm["prompts_version"])
            flag_mode = {"delivered_test": oracle.expected_accuracy(flag_tree, test),
                         "delivered_by_type": _by_type(oracle, world, flag_tree, test), "certify_rollouts": fm["rollouts"]}
        trace = None
        if job.get("type_trace") and ws_final.exists():  # the delivered harness when it is a workspace version, else the final best
            best = wsp.read_best(ws_final)
            trace = _type_trace(oracle, world, ws_final, best.skills, best.prompts, test) if best else None
        out = {
            "seed": seed, "rule": rule, "epochs": epochs, "tradeoff": bool(job.get("tradeoff")), "type_trace": trace,
            "base_test": oracle.expected_accuracy(base_tree, test),
            "delivered_test": oracle.expected_accuracy(delivered, test),
            "base_by_type": _by_type(oracle, world, base_tree, test), "delivered_by_type": _by_type(oracle, world, delivered, test),
            "certificate": cert, "flag_mode": flag_mode,
            "sampled_test": result["test"], "delivered": result["delivered"], "stopped_early": result["stopped_early"],
            "curve": curve, "rollouts_by_purpose": curve[-1]["by_purpose"] if curve else dict.fromkeys(PURPOSES, 0), "edits": edits, "gates": gates, "gate_rollouts": gate_rollouts, "screened_out": screened_out,
            "fdr_tests": fdr_tests, "fdr_spent": fdr_spent, "fdr_levels": fdr_levels, "ideal_gates": ideal_log or None,
            "gate_settings": {k: job["cfg"]["gate"].get(k) for k in ("rule", "fdr", "max_pairs", "lambda")},
            "tradeoff_in_delivered": sum(text.count(TRADEOFF_TAG) for text in delivered.values()),
            "tradeoff_in_final_current": sum(t.count(TRADEOFF_TAG) for t in wsp.harness_view(ws_final).values()) if ws_final.exists() else None,
            "tradeoff_proposed": getattr(provider, "proposed", None),
            "wall_s": time.monotonic() - started,
        }
        return out
    finally:
        su._four_way_holdout = four_way_holdout
        if restore_gate is not None:
            restore_gate()
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- aggregation


def _delivery(run: dict, point: dict, *, ours: bool) -> dict:
    """What one run delivers at its budget point, against the base: the true gain, the per-task-type changes (oracle, test
    pool; None in JSONs older than issue 26) and our run's certificate (None when absent)."""
    base = run.get("base_by_type")
    if ours:
        got = run.get("delivered_by_type")
    elif point.get("epoch", 0) == 0:
        got = base  # nothing within the budget: the base is delivered
    else:
        got = point.get("best_by_type")
    diffs = None if base is None or got is None else {tt: got[tt] - base[tt] for tt in base if tt in got}
    return {"gain": point["best_test"] - run["base_test"], "by_type": diffs, "certificate": run.get("certificate") if ours else None}


def _delivery_summary(deliveries: list[dict]) -> dict:
    """Shares of runs whose delivered harness is truly worse than the base (overall; on some task type by > 1 / > 2 pts),
    and, when the runs carry certificates, the certified share, mean lower bound and width, how often the bound held
    (lower bound <= the true gain) and P(certified and truly worse)."""
    n = len(deliveries)
    typed = [d["by_type"] for d in deliveries if d["by_type"] is not None]
    out: dict[str, Any] = {"runs": n, "worse_than_base": sum(d["gain"] < 0 for d in deliveries),
                           "typed_runs": len(typed),
                           "type_worse_1pt": sum(any(v < -0.01 for v in t.values()) for t in typed),
                           "type_worse_2pt": sum(any(v < -0.02 for v in t.values()) for t in typed),
                           "worst_type_pts": [round(100 * min(t.values()), 2) for t in typed if t]}
    certs = [(d["certificate"], d["gain"]) for d in deliveries if d["certificate"] is not None]
    if certs:
        def nums(key: str) -> list[float]:
            return [float(c[key]) for c, _ in certs if isinstance(c.get(key), (int, float)) and not isinstance(c.get(key), bool)]
        lows = [(float(c["lower_bound"]), g) for c, g in certs if isinstance(c.get("lower_bound"), (int, float))]
        out["certificate"] = {
            "runs": len(certs), "certified": sum(bool(c.get("certified")) for c, _ in certs),
            "certified_and_worse": sum(bool(c.get("certified")) and g < 0 for c, g in certs),
            "mean_lower_bound": statistics.mean(nums("lower_bound")) if nums("lower_bound") else None,
            "mean_width": statistics.mean(nums("width")) if nums("width") else None,
            "mean_rollouts": statistics.mean(nums("rollouts")) if nums("rollouts") else None,
            "bound_held": sum(low <= g + 1e-12 for low, g in lows), "bounds": len(lows),
            "fallback": sum(c.get("delivered") is not None and not str(c["delivered"]).startswith(FIRST_LABELS) for c, _ in certs),
            "rolled_back": sum(bool((c.get("rollback") or {}).get("delivered")) for c, _ in certs),
            "flagged_runs": sum(bool(c.get("flagged_types")) for c, _ in certs),
            "asked_share": nums("asked_share"),
            "spend": {k: statistics.mean(int((c.get("spend") or {}).get(k, 0)) for c, _ in certs)
                      for k in ("to_crossing", "after_crossing", "refused_budget", "refused_futility", "refused_ucb", "recertify")}
            if all(c.get("spend") for c, _ in certs) else None}
    return out


def delivery_lines(summary: dict) -> list[str]:
    """The delivery table: true regressions against the base (overall and per task type) and the certificates."""
    rules = [r for r in summary["rules"] if "runs" in summary[r]]
    L = ["", "## What is delivered, against the base (oracle, test pool)", "",
         "Per run: the delivered harness (our rule) or the best pointer at the budget cut (other rules) against the base, "
         "overall and on each task type's test questions. `worse` = truly worse than the base overall; `type > 1 / > 2 pts` = "
         "some task type worse than the base by more than 1 / 2 points.", "",
         "| rule | runs | worse than base | some type worse > 1 pt | some type worse > 2 pts | worst type per run (pts) |",
         "|---|---|---|---|---|---|"]
    for rule in rules:
        d = summary[rule]
        t = d["typed_runs"]
        per_type = (f"{d['type_worse_1pt']}/{t} ({100 * d['type_worse_1pt'] / t:.0f} %) | {d['type_worse_2pt']}/{t} "
                    f"({100 * d['type_worse_2pt'] / t:.0f} %) | {d['worst_type_pts']}") if t else "– | – | –"
        L.append(f"| {rule} | {d['runs']} | {d['worse_than_base']}/{d['runs']} | {per_type} |")
    certs = [(r, summary[r]["certificate"]) for r in rules if summary[r].get("certificate")]
    if certs:
        L += ["", "Certificates (`state/certify/certificate.json`, the delivered harness against the base on fresh test-pool samples):", "",
              "| rule | runs with a certificate | certified | fallback delivered | certified and truly worse | mean lower bound (pts) | "
              "mean width (pts) | lower bound <= true gain | runs with a flagged task type | mean certify rollouts |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for rule, c in certs:
            low = "–" if c["mean_lower_bound"] is None else f"{100 * c['mean_lower_bound']:+.2f}"
            width = "–" if c["mean_width"] is None else f"{100 * c['mean_width']:.2f}"
            spent = "–" if c["mean_rollouts"] is None else f"{c['mean_rollouts']:.0f}"
            L.append(f"| {rule} | {c['runs']} | {c['certified']}/{c['runs']} | {c['fallback']} | {c['certified_and_worse']} | "
                     f"{low} | {width} | {c['bound_held']}/{c['bounds']} | {c['flagged_runs']} | {spent} |")
        spends = [(rule, c["spend"]) for rule, c in certs if c.get("spend")]
        if spends:
            L += ["", "Where the certificate's pairs go (mean pairs a run, 2 rollouts a pair; docs/certificate.md):", "",
                  "| rule | to the crossing | after it (useful bound) | refused at the budget | refused by futility | "
                  "refused by the upper bound | rollback re-certification |", "|---|---|---|---|---|---|---|"]
            for rule, sp in spends:
                L.append(f"| {rule} | " + " | ".join(f"{sp[k]:.0f}" for k in ("to_crossing", "after_crossing", "refused_budget",
                                                                             "refused_futility", "refused_ucb", "recertify")) + " |")
        for rule, c in certs:
            shares = c.get("asked_share") or []
            if shares:  # certify.skip_identical (docs/certificate.md "Only the questions whose input changed")
                L += ["", f"Questions the certificate asked ({rule}, `certify.skip_identical`): the first attempt asked fewer than "
                          f"the whole test pool in {sum(s < 1 for s in shares)}/{len(shares)} runs (the other questions read "
                          f"identical input), mean share asked {statistics.mean(shares):.2f}."]
    return L


def as_product(run: dict) -> dict:
    """One run (with a certificate) as a certified product: its epochs, training and certificate rollouts and their
    total, the delivered gain (pts), certified, worse than the base, and some task type worse than the base by > 2 pts
    (None when the run has no per-type figures)."""
    cert = run["certificate"]
    training, certificate = float(run["curve"][-1]["rollouts"]), float(int(cert.get("rollouts") or 0))
    typed = bool(run.get("delivered_by_type") and run.get("base_by_type"))
    return {"epochs": int(run["curve"][-1]["epoch"]), "training": training, "certificate": certificate,
            "total": training + certificate, "gain_pts": 100 * (run["delivered_test"] - run["base_test"]),
            "certified": bool(cert.get("certified")), "worse": run["delivered_test"] < run["base_test"],
            "type_worse_2pt": any(run["delivered_by_type"][t] - run["base_by_type"][t] < -0.02 for t in run["base_by_type"])
                              if typed else None}


def own_runs(runs: list[dict], rules: Sequence[str]) -> dict[str, dict]:
    """Each rule's own run (its epochs, not cut at B) with what the product's certify stage delivered from it: every
    run ends with that stage, whatever its rule, so the rules compare as certified products (issue 26)."""
    out: dict[str, dict] = {}
    for rule in rules:
        rs = [r for r in runs if r["rule"] == rule and not r["tradeoff"] and r["curve"]]
        if not rs or not all(r.get("certificate") for r in rs):
            continue  # an ideal row's charged pairs, or a JSON from before the certify stage: no comparable total
        ps = [as_product(r) for r in rs]
        typed = [p["type_worse_2pt"] for p in ps if p["type_worse_2pt"] is not None]
        training, certificate = statistics.mean(p["training"] for p in ps), statistics.mean(p["certificate"] for p in ps)
        out[rule] = {"runs": len(rs), "epochs": sorted({p["epochs"] for p in ps}), "training": training,
                     "certificate": certificate, "total": training + certificate,
                     "gain_pts": statistics.mean(p["gain_pts"] for p in ps),
                     "certified": sum(p["certified"] for p in ps), "worse": sum(p["worse"] for p in ps),
                     "typed_runs": len(typed), "type_worse_2pt": sum(typed)}
    return out


def own_run_lines(own: dict[str, dict]) -> list[str]:
    if not own:
        return []
    L = ["", "## Each rule's own run, certified by the same stage", "",
         "Not cut at B: each rule trains its own epochs (our rule the config's, the others up to the max epochs, an early stop "
         "ends one sooner), then the product's certify stage tests its final harness against the base and delivers what it "
         "certified (or the start). Rollouts: training (the whole run) + the certificate's; gain: the delivered harness "
         "against the base (oracle, test pool)." + (
             " The ideal rows at K pairs (`oracle_n<K>`, `oracle_seq<K>`) are charged one rollout a pair they drew (the "
             "baseline arm free), included in training." if any(IDEAL_RULE.match(rule) for rule in own) else ""), "",
         "| rule | runs | epochs | training | certificate | total | delivered gain (pts) | certified | worse than base | some type worse > 2 pts |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for rule, o in own.items():
        L.append(f"| {rule} | {o['runs']} | {', '.join(map(str, o['epochs']))} | {o['training']:.0f} | {o['certificate']:.0f} | "
                 f"{o['total']:.0f} | {o['gain_pts']:+.2f} | {o['certified']}/{o['runs']} | {o['worse']}/{o['runs']} | "
                 f"{o['type_worse_2pt']}/{o['typed_runs']} |")
    return L


def per_type_modes(runs: list[dict]) -> dict | None:
    """Our rule's runs under certify.per_type=rollback (as run) and =flag (the same runs, the re-certification taken out:
    what the first certified attempt, or the base, would have delivered): gain, runs with some task type worse than the
    base by > 2 pts, training + certificate rollouts. None when no run has a certificate in rollback mode."""
    ours = sorted((r for r in runs if r["rule"] == OURS and not r["tradeoff"] and r.get("certificate")), key=lambda r: r["seed"])
    if not ours or not all(r["certificate"].get("per_type", "flag") != "flag" for r in ours):
        return None

    def row(pick: str) -> dict:
        gains, worse, spent = [], 0, []
        for r in ours:
            alt = r.get("flag_mode") if pick == "flag" else None
            test = alt["delivered_test"] if alt else r["delivered_test"]
            by_type = alt["delivered_by_type"] if alt else r["delivered_by_type"]
            cert = alt["certify_rollouts"] if alt else r["certificate"]["rollouts"]
            gains.append(100 * (test - r["base_test"]))
            worse += any(by_type[t] - r["base_by_type"][t] < -0.02 for t in r["base_by_type"])
            spent.append(r["curve"][-1]["rollouts"] + cert)
        return {"runs": len(ours), "mean_gain_pts": statistics.mean(gains), "type_worse_2pt": worse,
                "mean_rollouts_with_cert": statistics.mean(spent)}

    tried = [r["certificate"]["rollback"] for r in ours if r["certificate"].get("rollback")]
    return {"mode": ours[0]["certificate"]["per_type"], "rollback": row("rollback"), "flag": row("flag"), "rollback_tried": len(tried),
            "rollback_certified": sum(t["decision"] == "certified" for t in tried),
            "rollback_skipped": sum(t["decision"] == "skipped" for t in tried),
            "kept_types": sum(len(t["kept"]) for t in tried), "rollback_rollouts": sum(t["rollouts"] for t in tried)}


def per_type_lines(modes: dict | None) -> list[str]:
    if not modes:
        return []
    L = ["", "## Flagged task types: per-file rollback or flag only (issue 26 item 1)", "",
         f"Our rule's runs as run (`certify.per_type={modes.get('mode', 'rollback')}`) and the same runs under `certify.per_type=flag` "
         "(the rollback re-certification taken out; both modes share every other rollout). A rollback puts the flagged types' skill "
         "files (`rollback_shared`: and the system prompt and tool guides) back to the start's and certifies that harness once more "
         "on fresh samples; it is delivered when certified (docs/certificate.md). "
         f"Rollbacks tried: {modes['rollback_tried']} ({modes['rollback_certified']} certified, {modes['rollback_skipped']} with "
         f"nothing to roll back; {modes['kept_types']} flagged types kept their file because it was the start's: shared files "
         f"changed them), {modes['rollback_rollouts']} rollouts in all.", "",
         "| certify.per_type | runs | mean gain (pts) | some type worse than base > 2 pts | mean rollouts, training + certificate |",
         "|---|---|---|---|---|"]
    for mode in ("rollback", "flag"):
        m = modes[mode]
        L.append(f"| {modes.get('mode', 'rollback') if mode == 'rollback' else mode} | {m['runs']} | {m['mean_gain_pts']:+.2f} | {m['type_worse_2pt']}/{m['runs']} "
                 f"({100 * m['type_worse_2pt'] / m['runs']:.0f} %) | {m['mean_rollouts_with_cert']:.0f} |")
    return L


def at_budget(run: dict, budget: int) -> dict:
    """The last epoch end within `budget` training rollouts (its best pointer is what the rule delivers)."""
    ok = [c for c in run["curve"] if c["rollouts"] <= budget]
    return ok[-1] if ok else {"epoch": 0, "rollouts": 0, "best_test": run["base_test"], "by_purpose": dict.fromkeys(PURPOSES, 0)}


def mean_split(splits: Sequence[Optional[dict]]) -> Optional[dict[str, float]]:
    """Mean rollouts per purpose over runs; None when some run has no split (a JSON from before it was recorded)."""
    if not splits or any(s is None for s in splits):
        return None
    return {p: statistics.mean(float(s.get(p, 0)) for s in splits if s is not None) for p in PURPOSES}


def purpose_lines(summary: dict) -> list[str]:
    """Where each rule's training rollouts go (mean per run, at the point the budget table charges) and our certificate's."""
    rules = [r for r in summary["rules"] if summary[r].get("rollouts_by_purpose")]
    if not rules:
        return []
    shown = [p for p in PURPOSES if p != "h2_probe" or any(summary[r]["rollouts_by_purpose"][p] for r in rules)]
    L = ["", "## Where the training rollouts go", "",
         "Mean rollouts a run, by purpose, at the point the table above charges (budget cut; own-budget rows: the whole run), "
         "from the predictions databases' run kinds (`_runs.kind`, harness/identity.py `run_kind`). Gate pairs: every rollout a "
         "gate ran after its screen (an ideal row's charged pairs included); probation settlements: the anchor re-runs. The certificate runs after "
         "training and is not in the total.", "",
         "| rule | " + " | ".join(PURPOSE_LABELS[p] for p in shown) + " | training total | certificate |",
         "|---|" + "---|" * (len(shown) + 2)]
    for rule in rules:
        split = summary[rule]["rollouts_by_purpose"]
        cert = (summary[rule].get("certificate") or {}).get("mean_rollouts")
        L.append(f"| {rule} | " + " | ".join(f"{split[p]:.0f}" for p in shown) + f" | {sum(split.values()):.0f} | "
                 + ("–" if cert is None else f"{cert:.0f}") + " |")
    return L


def rollouts_to_reach(run: dict, acc: float) -> int | None:
    for c in run["curve"]:
        if c["best_test"] >= acc - 1e-12:
            return c["rollouts"]
    return None


def _shares(installed: list[dict]) -> dict:
    n = len(installed)
    hurt = sum(e["effect"] < -0.001 for e in installed)
    null = sum(abs(e["effect"]) <= 0.001 for e in installed)
    helped = sum(e["effect"] > 0.001 for e in installed)
    return {"installed": n, "hurt": hurt, "null": null, "helped": helped,
            "hurt_share": hurt / n if n else 0.0, "bad_share": (hurt + null) / n if n else 0.0}


def ideal_rules(runs: list[dict]) -> list[str]:
    """The ideal rows at K pairs present in `runs`, fixed K before sequential, by K."""
    found = {r["rule"] for r in runs if IDEAL_RULE.match(r["rule"])}
    return sorted(found, key=lambda rule: (rule.startswith("oracle_seq"), int(IDEAL_RULE.match(rule).group(2))))  # type: ignore[union-attr]


def summarize(runs: list[dict], quick: bool, wall: float, cmd: str, measured: str | None = None) -> tuple[str, dict]:
    """The report page and its summary; `measured`: when the runs were measured (default: now)."""
    measured = measured or time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    seeds = sorted({r["seed"] for r in runs})
    by = {(r["seed"], r["rule"], r["tradeoff"]): r for r in runs}
    rules = [rule for rule in RULES if any((s, rule, False) in by for s in seeds)] + ideal_rules(runs)
    summary: dict[str, Any] = {"rules": rules}
    for rule in rules:
        gains, accs, spent, installed, deliveries = [], [], [], [], []
        splits: list[Optional[dict]] = []  # rollouts by purpose at the charged point (None in JSONs without the split)
        for seed in seeds:
            ours = by[(seed, OURS, False)]
            run = by.get((seed, rule, False))
            if run is None:
                continue
            budget = ours["curve"][-1]["rollouts"]
            if rule in OWN_BUDGET:
                point = {"best_test": run["delivered_test"], "rollouts": run["curve"][-1]["rollouts"], "epoch": run["curve"][-1]["epoch"],
                         "by_purpose": run["curve"][-1].get("by_purpose")}
            else:
                point = at_budget(run, budget)
            splits.append(point.get("by_purpose"))
            accs.append(point["best_test"])
            gains.append(point["best_test"] - run["base_test"])
            spent.append(point["rollouts"])
            installed += [e for e in run["edits"] if e["epoch"] <= point["epoch"]]
            deliveries.append(_delivery(run, point, ours=rule in OWN_BUDGET))
        gated = [by[(s, rule, False)] for s in seeds if (s, rule, False) in by]
        n_gates = sum(r.get("gates", 0) for r in gated)
        summary[rule] = {"mean_test": statistics.mean(accs), "mean_gain_pts": 100 * statistics.mean(gains),
                         "gains_pts": [round(100 * g, 2) for g in gains], "mean_rollouts": statistics.mean(spent),
                         "rollouts_by_purpose": mean_split(splits), **_shares(installed), "gates": n_gates,
                         "rollouts_per_gate": sum(r.get("gate_rollouts", 0) for r in gated) / n_gates if n_gates else 0.0,
                         "screened_out": sum(r.get("screened_out", 0) for r in gated),
                         "fdr_spent": [r.get("fdr_spent") for r in gated], "fdr_tests": [r.get("fdr_tests") for r in gated],
                         "full_rollouts": statistics.mean(r["curve"][-1]["rollouts"] for r in gated if r["curve"]) if gated else 0.0,
                         **_delivery_summary(deliveries)}
    # every rule vs GEPA: rollouts it needs to reach GEPA's accuracy within B (our rule's budget), vs GEPA's own
    reach: dict[str, list[dict]] = {}
    for rule in rules:
        rows = []
        for seed in seeds:
            ours, gepa, run = by[(seed, OURS, False)], by.get((seed, "gepa", False)), by.get((seed, rule, False))
            if gepa is None or run is None:
                continue
            target = at_budget(gepa, ours["curve"][-1]["rollouts"])
            r_rule = rollouts_to_reach(run, target["best_test"])
            r_gepa = rollouts_to_reach(gepa, target["best_test"])
            rows.append({"seed": seed, "gepa_acc": target["best_test"], "rule_rollouts": r_rule, "gepa_rollouts": r_gepa,
                         "ratio": (r_rule / r_gepa) if (r_rule is not None and r_gepa) else None})
        reach[rule] = rows
    summary["reach_gepa"] = reach
    trade = [r for r in runs if r["tradeoff"]]
    tsum = None
    if trade:
        t_edits = [e for r in trade for e in r["edits"] if e["tradeoff"]]
        proposed = sum(r["tradeoff_proposed"] or 0 for r in trade)
        in_delivered = sum(r["tradeoff_in_delivered"] for r in trade)
        tsum = {"proposed": proposed, "installed": len(t_edits), "accepted": sum(e["action"] == "accept" for e in t_edits),
                "probation": sum(e["action"] == "probation" for e in t_edits),
                "in_final_current": sum(r["tradeoff_in_final_current"] or 0 for r in trade), "in_delivered": in_delivered,
                "delivered_share": in_delivered / proposed if proposed else 0.0,
                "delivered_gain_pts": 100 * statistics.mean(r["delivered_test"] - r["base_test"] for r in trade),
                "screened_out": sum(r.get("screened_out", 0) for r in trade)}
    summary["tradeoff"] = tsum
    L = [f"# End-to-end benchmark (simulated world){' — QUICK mode' if quick else ''}", "",
         f"Command: `{cmd}` — measured {measured}, wall {wall / 60:.1f} min on this machine.",
         f"Seeds (world `benchmark.seed`): {seeds}. Oracle = exact expected accuracy on the test pool (never seen by the loop).", "",
         "## Base vs delivered, same rollout budget", "",
         f"Budget B = training rollouts our rule (`{OURS}`, the config's defaults) spent (step + screen + gate + slow R/R0/R2 + "
         f"probation settlements, split below; held-out observation excluded). `{STRICT}` (the default before issue 26, `gate=strict`) trains the same epochs and reports its own "
         "delivered harness and spend, not cut at B. Other rules run up to the max epochs and deliver the best pointer of the last epoch end within B. "
         "Installed = a gate accept or a probation install within that cut; the oracle classifies each by its expected effect on the "
         "questions that read the edited file: harmful (< -0.1 pt), null (within ±0.1 pt), helped (> +0.1 pt).", "",
         "| rule | mean test acc (oracle) | mean gain (pts) | per-seed gain (pts) | mean rollouts used | installed | harmful | null | helped | harmful or null | gates | rollouts / gate | screened out |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rule in rules:
        s = summary[rule]
        L.append(f"| {rule} | {s['mean_test']:.4f} | {s['mean_gain_pts']:+.2f} | {s['gains_pts']} | {s['mean_rollouts']:.0f} | "
                 f"{s['installed']} | {s['hurt']} | {s['null']} | {s['helped']} | {100 * s['bad_share']:.1f} % | {s['gates']} | "
                 f"{s['rollouts_per_gate']:.1f} | {s['screened_out']} |")
    base = statistics.mean(by[(s, OURS, False)]["base_test"] for s in seeds)
    L += ["", f"Mean base test accuracy (oracle): {base:.4f}."]
    L += purpose_lines(summary)
    L += ["",
          "## Rollouts to reach GEPA's budget-matched accuracy", "",
          "Target accuracy per seed: GEPA's best-pointer test accuracy (oracle) within B. Cell: rollouts the rule needed to reach it "
          "(first epoch end whose best pointer is at least as accurate) / GEPA's own, as a ratio; n/a = never reached.", "",
          "| rule | " + " | ".join(f"seed {r['seed']} (GEPA {r['gepa_acc']:.4f} at {r['gepa_rollouts']})" for r in reach.get("gepa", [])) + " | reached |",
          "|---|" + "---|" * (len(reach.get("gepa", [])) + 1)]
    for rule in rules:
        cells = [f"{r['rule_rollouts']} ({r['ratio']:.2f}×)" if r["ratio"] is not None else "n/a" for r in reach[rule]]
        L.append(f"| {rule} | " + " | ".join(cells) + f" | {sum(r['ratio'] is not None for r in reach[rule])}/{len(reach[rule])} |")
    if tsum:
        L += ["", "## Trade-off null editor (our rule)", "",
              "A share of skill edits is replaced by a rule that helps mid-difficulty questions and breaks easy ones of the same "
              "task type by the same expected total (population effect 0).", "",
              f"- proposed: {tsum['proposed']}; screened out before a gate: {tsum['screened_out']} (all candidates of these runs); "
              f"installed by a gate: {tsum['installed']} (accept {tsum['accepted']}, probation {tsum['probation']})",
              f"- still in the final current harness: {tsum['in_final_current']}; in the DELIVERED harness: {tsum['in_delivered']} "
              f"(**{100 * tsum['delivered_share']:.1f} % of proposed**)",
              f"- mean delivered gain over base in these runs: {tsum['delivered_gain_pts']:+.2f} pts"]
    fdr_runs = [(r["seed"], r.get("fdr_tests"), r.get("fdr_spent")) for r in runs if r["rule"] == OURS and not r["tradeoff"]]
    if any(t for _, t, _ in fdr_runs):
        L += ["", "## Run-level false-discovery control (our rule)", "",
              "| seed | e-LOND tests (gates given a level) | base budget spent (of fdr_level) |", "|---|---|---|"]
        L += [f"| {seed} | {t} | {sp:.4f} |" if sp is not None else f"| {seed} | {t} | — |" for seed, t, sp in fdr_runs]
    L += delivery_lines(summary)
    summary["own_runs"] = own_runs(runs, rules)
    L += own_run_lines(summary["own_runs"])
    summary["per_type_modes"] = per_type_modes(runs)
    L += per_type_lines(summary["per_type_modes"])
    L += _reading(summary)
    L += _why(summary, runs, seeds, by)
    return "\n".join(L) + "\n", summary


def gate_cost_text(settings: dict, run_level: bool) -> str:
    """Why a gated candidate costs what it does, for the gate the runs used (`gate_settings` of a run; {} = unknown)."""
    pair = "each pair two rollouts (fresh baseline, no reuse of earlier gates' stopped samples), where GEPA pays one candidate rollout per minibatch question;"
    if run_level or (settings.get("max_pairs") is not None and int(settings["max_pairs"]) > 100):
        return f"an anytime-valid accept at a small level needs a few hundred fresh pairs, {pair}"
    if settings.get("max_pairs") is None:  # a JSON from before the runs recorded their gate
        return f"the gate settings are not in this JSON; {pair}"
    return (f"the per-edit decision is a short test of at most gate.max_pairs = {settings['max_pairs']} pairs (`{settings.get('rule')}`: "
            f"accept early at log E >= gate.lambda = {settings.get('lambda')}, at the budget on the sign of the gain estimate; no "
            f"run-level control, gate.fdr = {settings.get('fdr')}): its job is accuracy per rollout, the certificate guards the "
            f"delivery; {pair}")


def _why(summary: dict, runs: list[dict], seeds: list[int], by: dict) -> list[str]:
    """Where our rule's rollouts go and what its guarantees cost, measured in this run."""
    ours = [by[(s, OURS, False)] for s in seeds]
    total = sum(r["curve"][-1]["rollouts"] for r in ours)
    gate = sum(r["gate_rollouts"] for r in ours)
    levels = sorted(x for r in ours for x in r.get("fdr_levels", []))
    L = ["", "## Why (measured in this run)", "",
         f"- our rule spent {100 * gate / total:.0f} % of its training rollouts in gates: {summary[OURS]['rollouts_per_gate']:.0f} "
         f"rollouts per gated candidate (screened-out ones included) against GEPA's {summary.get('gepa', {}).get('rollouts_per_gate', float('nan')):.1f}; "
         + gate_cost_text(ours[0].get("gate_settings") or {}, any(r.get("fdr_tests") for r in ours))]
    if levels and any(r.get("fdr_tests") for r in ours):  # levels exist only under run-level control (gate.fdr)
        med = levels[len(levels) // 2]
        L.append(f"- run-level control: the median level a gate was given is {med:.2g} (accept at log E >= {math.log(1 / med):.1f}, "
                 f"against 3.0 for a lone gate at 0.05), which multiplies the pairs a real edit needs by about {math.log(1 / med) / 3.0:.1f};")
    ideal = summary["reach_gepa"].get(ORACLE, [])
    if ideal and ORACLE in summary:
        ratios = [r["ratio"] for r in ideal]
        reached = [x for x in ratios if x is not None]
        L.append(f"- the ideal gate (`{ORACLE}`: installs exactly the helpful edits, for free: no rule installs better or pays less "
                 f"for its decisions) delivers {summary[ORACLE]['mean_gain_pts']:+.1f} pts for {summary[ORACLE]['mean_rollouts']:.0f} "
                 f"rollouts and reaches GEPA's accuracy on {len(reached)} of {len(ratios)} seeds, at "
                 + ", ".join("n/a" if x is None else f"{x:.2f}x" for x in ratios)
                 + (": the target (<= 1.0x on every seed) is missed even by a perfect gate that costs nothing, since on some seed "
                    "the helpful candidates this loop's steps propose reach GEPA's accuracy later than GEPA's unguarded installs do "
                    "(step and slow rollouts alone cost more than GEPA's whole run there);"
                    if any(x is None or x > 1.0 for x in ratios) else
                    ": a free perfect gate would meet <= 1.0x on every seed, so what separates a rule from the target is the cost of "
                    "its evidence;"))
    L.append("- what any valid gate must pay for these installs, and which subsets of them could still reach GEPA's accuracy "
             "within its rollouts: `python benchmarks/evidence_floor.py` (reports/benchmarks/evidence_floor.md, read from this "
             "run's JSON);")
    g = summary.get("gepa")
    if g:
        L.append(f"- GEPA's rule installs {g['installed']} edits of which {g['hurt']} harmful and {g['null']} null "
                 f"({100 * g['bad_share']:.0f} %) and still delivers {g['mean_gain_pts']:+.1f} pts for {g['mean_rollouts']:.0f} rollouts: "
                 "in this simulated world cheap unguarded installs buy accuracy per rollout, and what is delivered is chosen by the "
                 "full-validation best pointer, not by the gate alone. Our rule's guarantees are about what is installed "
                 f"({summary[OURS]['hurt'] + summary[OURS]['null']} harmful or null of {summary[OURS]['installed']}), "
                 "which this budget comparison does not reward.")
    return L


def _reading(summary: dict) -> list[str]:
    """The targets of issue 13 item 7, checked against this run's numbers."""
    ours = summary[OURS]
    reach = summary["reach_gepa"].get(OURS, [])
    reached = [r for r in reach if r["ratio"] is not None]
    every = bool(reach) and len(reached) == len(reach)
    worst = max((r["ratio"] for r in reached), default=None)
    t = summary.get("tradeoff")
    L = _reading_26(summary)
    L += ["", "## Targets (issue 13, item 7)", "",
         f"- our default reaches GEPA's budget-matched accuracy on every seed with <= 1.0x GEPA's rollouts: reached in "
         f"{len(reached)} of {len(reach)} seeds" + (f", ratios {[round(r['ratio'], 2) for r in reached]}" if reached else "")
         + (" — **met**" if every and worst is not None and worst <= 1.0 else " — **NOT met**")
         + (f" (stretch <= 0.5x: {'met' if every and worst is not None and worst <= 0.5 else 'not met'})." if reached else "."),
         f"- <= 5 % of installs harmful or null: **{ours['hurt'] + ours['null']} of {ours['installed']} "
         f"({100 * ours['bad_share']:.1f} %)** — {'met' if ours['bad_share'] <= 0.05 else '**NOT met**'}."]
    if t:
        L.append(f"- <= 5 % of proposed zero-sum edits in delivered harnesses: **{t['in_delivered']} of {t['proposed']} "
                 f"({100 * t['delivered_share']:.1f} %)** — {'met' if t['delivered_share'] <= 0.05 else '**NOT met**'}.")
    return L


def _reading_26(summary: dict) -> list[str]:
    """The per-edit targets of issue 26 item 3 (default world), checked against this run's numbers."""
    ours, sk, gepa = summary[OURS], summary.get("skillopt"), summary.get("gepa")
    reach = summary["reach_gepa"].get(OURS, [])
    ratios = sorted(r["ratio"] for r in reach if r["ratio"] is not None)
    L = ["", "## Targets (issue 26, item 3)", ""]
    if sk:
        L.append(f"- mean delivered gain >= the SkillOpt-like rule's (budget-matched): {ours['mean_gain_pts']:+.2f} against "
                 f"{sk['mean_gain_pts']:+.2f} — {'met' if ours['mean_gain_pts'] >= sk['mean_gain_pts'] else '**NOT met**'}.")
    if gepa:
        cert = ours.get("certificate") or {}
        with_cert = ours["mean_rollouts"] + float(cert.get("mean_rollouts") or 0.0)
        own = gepa.get("full_rollouts", gepa["mean_rollouts"])
        L.append(f"- mean rollouts <= GEPA's: {ours['mean_rollouts']:.0f} for training + {float(cert.get('mean_rollouts') or 0.0):.0f} "
                 f"for the certificate = {with_cert:.0f}, against GEPA's {gepa['mean_rollouts']:.0f} within B (GEPA's own run, up to "
                 f"the max epochs: {gepa.get('full_rollouts', float('nan')):.0f}) — "
                 f"{'met' if with_cert <= own else '**NOT met**'} against its own run, certificate included.")
    if reach:
        median = statistics.median([r["ratio"] if r["ratio"] is not None else math.inf for r in reach])
        L.append(f"- reaches GEPA's budget-matched accuracy on >= 7 of 8 seeds at <= 1.0x GEPA's rollouts (median): reached on "
                 f"{len(ratios)} of {len(reach)} seeds, median ratio {'n/a' if math.isinf(median) else f'{median:.2f}'} — "
                 f"{'met' if len(ratios) >= math.ceil(7 * len(reach) / 8) and median <= 1.0 else '**NOT met**'}.")
    if ours.get("typed_runs"):
        share = ours["type_worse_2pt"] / ours["typed_runs"]
        L.append(f"- delivered harnesses with some task type worse than the base by > 2 pts <= 10 % of runs: "
                 f"{ours['type_worse_2pt']}/{ours['typed_runs']} ({100 * share:.0f} %) — {'met' if share <= 0.10 else '**NOT met**'} "
                 "(per task type the test pool has few questions; what the certificate does with a flagged type is "
                 "`certify.per_type`, see 'Flagged task types' below).")
    L.append(f"- delivered harness truly worse than the base: {ours['worse_than_base']} of {ours['runs']} runs.")
    return L


def ablation_lines(entries: list[tuple[str, dict]], main_runs: list[dict]) -> list[str]:
    """Our rule under other configurations (their own e2e JSONs, sequential only) next to this run's GEPA target accuracies."""
    by_main = {(r["seed"], r["rule"], r["tradeoff"]): r for r in main_runs}
    L = ["", "## Our rule under other configurations (separate runs, same seeds)", "",
         "Each row is its own `benchmarks/e2e.py --rules` run (our rule and its trade-off run only); `reach` = rollouts to GEPA's "
         "accuracy of the main run above (GEPA within that row's own budget), as a ratio to GEPA's rollouts, one per seed in seed order.", "",
         "| configuration | command | mean gain (pts) | mean rollouts | installed | harmful | null | zero-sum delivered / proposed | reach GEPA |",
         "|---|---|---|---|---|---|---|---|---|"]
    for label, doc in entries:
        runs = doc["runs"]
        seq = sorted((r for r in runs if r["rule"] == OURS and not r["tradeoff"]), key=lambda r: r["seed"])  # reach in seed order
        inst = [e for r in seq for e in r["edits"]]
        sh = _shares(inst)
        ratios = []
        for r in seq:
            gepa = by_main.get((r["seed"], "gepa", False))
            if gepa is None:
                continue
            target = at_budget(gepa, r["curve"][-1]["rollouts"])["best_test"]
            mine, theirs = rollouts_to_reach(r, target), rollouts_to_reach(gepa, target)
            ratios.append(f"{mine / theirs:.2f}" if mine is not None and theirs else "n/a")
        trade = [r for r in runs if r["tradeoff"]]
        proposed = sum(r["tradeoff_proposed"] or 0 for r in trade)
        delivered = sum(r["tradeoff_in_delivered"] for r in trade)
        gain = statistics.mean(100 * (r["delivered_test"] - r["base_test"]) for r in seq)
        spent = statistics.mean(r["curve"][-1]["rollouts"] for r in seq)
        L.append(f"| {label} | `{doc.get('cmd', '?')}` | {gain:+.2f} | {spent:.0f} | {sh['installed']} | {sh['hurt']} | {sh['null']} | "
                 f"{delivered}/{proposed} | {', '.join(ratios)} |")
    return L


def _compare_text(specs: list[str], runs: list[dict]) -> str:
    entries = []
    for spec in specs:
        label, sep, path = spec.rpartition("=")  # labels may contain "=" (config overrides)
        if not sep or not label:
            raise SystemExit(f"--compare {spec!r}: expected LABEL=path/to/e2e.json")
        entries.append((label, json.loads(Path(path).read_text(encoding="utf-8"))))
    return "\n".join(ablation_lines(entries, runs)) + "\n" if entries else ""


def _shown_path(path: Path) -> str:
    """A path as the report's command line shows it: relative to the project when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI mode: 1 seed, small world, 2 epochs")
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    ap.add_argument("--epochs", type=int, default=None, help="our rule's epochs (default: the config's train.epochs)")
    ap.add_argument("--max-epochs", type=int, default=None, help="cap for the other rules under the same budget")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (spawned)")
    ap.add_argument("--no-tradeoff", action="store_true")
    ap.add_argument("--epoch-holdout", action="store_true", help="keep the per-epoch four-way held-out observation (slower)")
    ap.add_argument("--from-json", type=Path, default=None, help="re-render the report from a saved e2e JSON (no training)")
    ap.add_argument("--out", type=Path, default=None, help="default reports/benchmarks/e2e.md (--quick: e2e_quick.md)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for every run (repeatable), e.g. gate.fdr=elond")
    ap.add_argument("--compare", action="append", default=[], metavar="LABEL=JSON",
                    help="add our rule's figures from another e2e JSON (e.g. an ablation run) to the report")
    ap.add_argument("--arm-coupling", type=float, default=0.0,
                    help="world variant: share of solver draws shared by the two arms of a pair (couple_arms; default 0)")
    ap.add_argument("--type-trace", action="store_true",
                    help="diagnostic: record, per run of our rule, every skills version of the final best's lineage with its oracle change per task type")
    ap.add_argument("--rules", nargs="*", default=None, help=f"subset of {list(RULES)} ({OURS} is always run: it sets B)")
    ap.add_argument("--prior-start", type=Path, default=PRIOR_START,
                    help="the start pool of oracle_n<K> / oracle_seq<K>'s prior (JSON with 'effects'; default: the default world's, dev seeds 15-30)")
    args = ap.parse_args(argv)
    default_out = ROOT / "reports" / "benchmarks" / ("e2e_quick.md" if args.quick else "e2e.md")
    out_given = args.out is not None and args.out.resolve() != default_out
    args.out = args.out or default_out
    if args.from_json:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        text, _ = summarize(saved["runs"], args.quick, saved.get("wall_s", 0.0), saved.get("cmd", "python benchmarks/e2e.py"),
                            measured=saved.get("measured", "at a time the JSON does not record"))
        text += _compare_text(args.compare, saved["runs"])
        args.out.write_text(text, encoding="utf-8")
        print(text)
        return 0
    seeds = args.seeds or ([7] if args.quick else [7, 8, 9, 10, 11])
    overrides = (QUICK_OVERRIDES if args.quick else []) + list(args.override)
    unknown = [r for r in args.rules or [] if r not in RULES and not IDEAL_RULE.match(r)]
    if unknown:
        raise SystemExit(f"--rules {unknown}: expected names in {list(RULES)} or oracle_n<K> / oracle_seq<K>")
    others = [r for r in RULES[1:] if args.rules is None or r in args.rules] + [r for r in args.rules or [] if IDEAL_RULE.match(r)]
    start: list[float] = []
    if any(IDEAL_RULE.match(rule) for rule in others):
        if not args.prior_start.is_file():
            raise SystemExit(f"--prior-start {args.prior_start}: no such file (the oracle_n<K> / oracle_seq<K> rows need it)")
        start = json.loads(args.prior_start.read_text(encoding="utf-8"))["effects"]
    epochs = args.epochs or (2 if args.quick else 3)
    max_epochs = args.max_epochs or (4 if args.quick else 6)
    jobs = []
    for seed in seeds:
        jobs.append({"seed": seed, "rule": OURS, "epochs": epochs, "overrides": overrides, "tradeoff": False})
        for rule in others:
            if rule in OWN_BUDGET:  # the strict row: its own 3-epoch run, as the product ran it
                jobs.append({"seed": seed, "rule": rule, "epochs": epochs, "overrides": overrides, "tradeoff": False})
                continue
            jobs.append({"seed": seed, "rule": rule, "epochs": max_epochs, "overrides": overrides, "patience": max_epochs,
                         **({"ideal_start": start} if IDEAL_RULE.match(rule) else {})})
        if not args.no_tradeoff:
            jobs.append({"seed": seed, "rule": OURS, "epochs": epochs, "overrides": overrides, "tradeoff": True})
    if not 0.0 <= args.arm_coupling <= 1.0:
        raise SystemExit(f"--arm-coupling {args.arm_coupling}: must be in [0, 1]")
    for job in jobs:
        job["skip_epoch_holdout"] = not args.epoch_holdout
        job["arm_coupling"] = args.arm_coupling
        job["type_trace"] = args.type_trace and job["rule"] == OURS
        job["cfg"] = job_config(job)
    started = time.monotonic()
    partial = args.out.with_suffix(".partial.jsonl")
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text("")
    runs = []
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        for run in pool.imap_unordered(run_one, jobs, chunksize=1):
            runs.append(run)
            with open(partial, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(run, default=str) + "\n")
            print(f"[e2e] {len(runs)}/{len(jobs)} seed {run['seed']} {run['rule']}{' tradeoff' if run['tradeoff'] else ''}: "
                  f"base {run['base_test']:.3f} -> delivered {run['delivered_test']:.3f} ({run['wall_s']:.0f} s)", flush=True)
    wall = time.monotonic() - started
    partial.unlink()
    cmd = ("python benchmarks/e2e.py" + (" --quick" if args.quick else "") + (f" --seeds {' '.join(map(str, args.seeds))}" if args.seeds else "")
           + (f" --epochs {args.epochs}" if args.epochs else "") + (f" --max-epochs {args.max_epochs}" if args.max_epochs else "")
           + (" --no-tradeoff" if args.no_tradeoff else "") + (" --epoch-holdout" if args.epoch_holdout else "")
           + "".join(f" --override {o}" for o in args.override) + (f" --rules {' '.join(args.rules)}" if args.rules is not None else "")
           + (f" --arm-coupling {args.arm_coupling}" if args.arm_coupling else "") + (" --type-trace" if args.type_trace else "")
           + (f" --prior-start {_shown_path(args.prior_start)}" if start and args.prior_start != PRIOR_START else "")
           + (f" --out {_shown_path(args.out)}" if out_given else ""))
    measured = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    text, summary = summarize(runs, args.quick, wall, cmd, measured)
    text += _compare_text(args.compare, runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps({"summary": summary, "runs": runs, "wall_s": wall, "cmd": cmd, "measured": measured}, indent=1, default=str),
                                             encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
