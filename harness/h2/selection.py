"""Selection of the delivered final among the k finals.

- The pool is exactly the finals (never the base's reference rollout).
- Finals without an answer (dead rollout or empty deliverable) are dropped
  first, and the drop is recorded.
- k = 1 with a single live final: delivered without a selector.
- Otherwise the live finals are anonymised (ids A, B, C) in an order shuffled
  with the seed sha1(task|k|mode), so the selector cannot tell which
  harness or stage produced which deliverable; it sees only the task and the
  complete deliverables. A reply that is no valid choice and a selector
  failure both fall back to the first live final, recorded; so does a
  closed budget gate (`may_call` says no: the selector is not called).
- No live final at all: the base is delivered, recorded.
"""

from __future__ import annotations

import hashlib
import random
import string
from dataclasses import dataclass, field
from typing import Callable, Sequence

from harness.h2.adapters import Rollout
from harness.h2.roles import Call, Selector
from harness.tree import HarnessTree


@dataclass(frozen=True)
class Final:
    label: str
    tree: HarnessTree
    rollout: Rollout | None


@dataclass(frozen=True)
class Selection:
    chosen: str | None  # label of the delivered final; None = the base was delivered
    method: str  # "trivial" | "single-live" | "selector" | "fallback" | "base"
    anon: dict[str, str] = field(default_factory=dict)  # anonymous id -> final label
    dropped: tuple[tuple[str, str], ...] = ()  # (label, why)
    why: str = ""
    error: str | None = None
    seed: str = ""

    def to_dict(self) -> dict:
        return {
            "chosen": self.chosen,
            "method": self.method,
            "anon": dict(self.anon),
            "dropped": [list(d) for d in self.dropped],
            "why": self.why,
            "error": self.error,
            "seed": self.seed,
        }


def selection_seed(task_id: str, k: int, mode: str) -> str:
    return hashlib.sha1(f"{task_id}|{k}|{mode}".encode("utf-8")).hexdigest()


def anonymise(labels: Sequence[str], task_id: str, k: int, mode: str) -> dict[str, str]:
    """Anonymous id -> label, in an order shuffled by sha1(task|k|mode)."""
    order = list(labels)
    random.Random(int(selection_seed(task_id, k, mode), 16)).shuffle(order)
    ids = string.ascii_uppercase
    if len(order) > len(ids):
        raise ValueError(f"too many finals to anonymise ({len(order)})")
    return {ids[i]: label for i, label in enumerate(order)}


def _non_answer(final: Final) -> str | None:
    if final.rollout is None:
        return "final was not rolled"
    if not final.rollout.ok:
        return f"final rollout is dead ({final.rollout.error})"
    if not final.rollout.deliverable.strip():
        return "final deliverable is empty"
    return None


async def select_final(
    finals: Sequence[Final],
    *,
    k: int,
    mode: str,
    task_id: str,
    task_header: str,
    prompt: str,
    selector: Selector | None,
    key: str,
    may_call: Callable[[], str | None] | None = None,
) -> tuple[Selection, Call | None]:
    """`may_call()` is asked right before a selector call: a reason (the budget gate is closed) means no call."""
    seed = selection_seed(task_id, k, mode)
    dropped = tuple((f.label, why) for f in finals if (why := _non_answer(f)) is not None)
    live = [f for f in finals if _non_answer(f) is None]
    if not live:
        return Selection(None, "base", dropped=dropped, error="no final has an answer; the base is delivered", seed=seed), None
    if k == 1 and len(finals) == 1:
        return Selection(live[0].label, "trivial", dropped=dropped, why="k=1: the single final is delivered without a selector", seed=seed), None
    if len(live) == 1:
        return Selection(live[0].label, "single-live", dropped=dropped, why="only one final has an answer", seed=seed), None
    anon = anonymise([f.label for f in live], task_id, k, mode)
    if selector is None:
        return Selection(live[0].label, "fallback", anon, dropped, error="no selector configured; first live final delivered", seed=seed), None
    closed = may_call() if may_call is not None else None
    if closed is not None:
        return Selection(live[0].label, "fallback", anon, dropped, error=f"selector not called, {closed}; first live final delivered", seed=seed), None
    by_label = {f.label: f for f in live}
    candidates = {cid: by_label[label].rollout.deliverable for cid, label in anon.items()}  # type: ignore[union-attr]
    res = await selector.select(key=key, task_id=task_id, task_header=task_header, prompt=prompt, candidates=candidates)
    if res.choice is None:
        return Selection(live[0].label, "fallback", anon, dropped, why=res.why, error=f"selector failed: {res.error}; first live final delivered", seed=seed), res.call
    return Selection(anon[res.choice], "selector", anon, dropped, why=res.why, seed=seed), res.call
