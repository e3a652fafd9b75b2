"""The certificate file (`certificate.json`): one format for training's delivery certificate and `stages.compare`.

Written by `harness.loop.certify` (the only writer), read by export, the report, MLflow logging and the
benchmarks. A reader refuses a file of another format or with a missing key, naming the file and the key.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from harness.atomic import atomic_write_text
from harness.tree import CERTIFICATE_NAME

CERTIFICATE_FILE = CERTIFICATE_NAME  # at a harness root it is ignored by HarnessTree.load
CERTIFICATE_FORMAT = "harness-trainer/certificate@1"


class CertificateError(ValueError):
    """A certificate file that cannot be read as this format."""


@dataclass(frozen=True)
class TypeRow:
    task_type: str
    pairs: int
    estimate: float  # mean paired difference on this type's questions (fixed-n, indicative)
    ci_low: float
    ci_high: float
    flagged: bool  # estimate below -flag_drop with at least min_type_pairs pairs
    # the type reads byte-identical input under both harnesses (certify.skip_identical): estimate exactly 0, no pairs,
    # never flagged; False in files written before it existed
    identical_input: bool = False


@dataclass(frozen=True)
class Attempt:
    """One candidate put through the test (the delivered harness first, then earlier checkpoints)."""

    label: str  # "final" (the training's best pointer), "current" (the harness training ended with), "epoch <E>" (a fallback), "candidate" (stages.compare)
    fingerprint: str  # the candidate tree's content fingerprint
    skills_version: Optional[str]
    prompts_version: Optional[str]
    alpha: float  # the level this attempt was given (the attempts' levels sum to the certificate's alpha)
    decision: str  # certified | not_certified | infra | skipped
    reason: str
    pairs: int
    wins: int
    losses: int
    ties: int
    infra: int
    rollouts: int  # rollouts this attempt ran (baseline outcomes shared between attempts are counted once)
    estimate: Optional[float]
    lower_bound: Optional[float]  # anytime-valid, at the attempt's alpha
    upper_bound: Optional[float]
    log_e: Optional[float]  # the e-process's running maximum
    threshold: Optional[float]  # log(1 / alpha)
    crossed_at: Optional[int]
    per_task_type: list[TypeRow] = field(default_factory=list)
    # a per-type rollback re-certification (certify.per_type=rollback): "of" (the certified attempt it modifies),
    # "task_types" (flagged, rolled back), "files" ({path: "restored" | "removed"}), "kept" ({task type: why its
    # file was not rolled back}), "first_index" (its fresh sample indices), "level" (why its alpha is the parent's);
    # None for every other attempt (and in files written before it existed)
    rollback: Optional[dict[str, Any]] = None
    # the questions this attempt drew from (certify.skip_identical): those of the population whose input changed, their
    # number and share of the population (estimate and bounds above are in population units), and the task types that
    # read identical input; None / [] in files written before it existed (every question was asked)
    asked_questions: Optional[int] = None
    share: Optional[float] = None
    identical_task_types: list[str] = field(default_factory=list)

    @property
    def width(self) -> Optional[float]:
        """estimate - lower bound: how much the guarantee gives up against the point estimate."""
        return None if self.estimate is None or self.lower_bound is None else self.estimate - self.lower_bound


@dataclass(frozen=True)
class Certificate:
    """What was certified, against what, on which population, at which level, and what is delivered."""

    certified: bool
    delivered: str  # label of the delivered harness: an attempt's label, or "base" (the reference) when none certified
    summary: str  # one line for people: the decision, the gain and its bound, or why nothing is certified
    kind: str  # superiority | non_inferiority
    margin: float
    alpha: float
    population: dict[str, Any]  # pool, n_questions, qids_sha1, sampling
    baseline: dict[str, Any]  # label, fingerprint (and path when a directory was named)
    attempts: list[Attempt]
    rollouts: int
    flagged_task_types: list[str]
    format: str = CERTIFICATE_FORMAT
    per_type: str = "flag"  # certify.per_type: "flag" (flags only) or "rollback" (one per-file rollback re-certification)
    # the level of every attempt and why they add up to alpha (docs/certificate.md "Levels"); {} in older files
    levels: dict[str, Any] = field(default_factory=dict)

    @property
    def chosen(self) -> Optional[Attempt]:
        """The certified attempt that is delivered (None when the baseline is delivered)."""
        return next((a for a in self.attempts if a.label == self.delivered and a.decision == "certified"), None)

    @property
    def described(self) -> Optional[Attempt]:
        """The attempt the summary's figures, the `certify_*` metrics and the report's tables describe: the delivered
        one; when none is certified, the first one tested (the training's final harness unless it was skipped), else
        the first attempt (None when there is none)."""
        tested = next((a for a in self.attempts if a.decision != "skipped"), None)
        return self.chosen or tested or next(iter(self.attempts), None)

    def asked_line(self, attempt: Optional[Attempt] = None) -> Optional[str]:
        """'asked 124 of 300 test questions (the other 176 read identical input)' for `attempt` (default: `described`);
        None when it asked every question (or the file predates certify.skip_identical)."""
        a = attempt or self.described
        n = self.population.get("n_questions")
        if a is None or a.asked_questions is None or not isinstance(n, int) or a.asked_questions >= n:
            return None
        pool = self.population.get("pool")
        return (f"asked {a.asked_questions} of {n} {'' if pool in (None, 'all') else f'{pool} '}questions "
                f"(the other {n - a.asked_questions} read identical input)")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for attempt, raw in zip(self.attempts, out["attempts"]):
            raw["width"] = attempt.width
        return out


def write_certificate(path: Path, certificate: Certificate) -> Path:
    """Atomically write `certificate` as JSON to `path` (a file, or a directory that gets CERTIFICATE_FILE)."""
    path = Path(path)
    if path.is_dir():
        path = path / CERTIFICATE_FILE
    atomic_write_text(path, json.dumps(certificate.to_json(), indent=2, sort_keys=True) + "\n")
    return path


_OPTIONAL = ("format", "per_task_type", "rollback", "per_type", "levels", "identical_input", "asked_questions", "share",
             "identical_task_types")  # keys with a default: absent in older files


def _take(cls: type, raw: dict[str, Any], where: str) -> dict[str, Any]:
    names = [f.name for f in fields(cls)]
    missing = [n for n in names if n not in raw and n not in _OPTIONAL]
    if missing:
        raise CertificateError(f"{where}: missing key(s) {missing}")
    return {n: raw[n] for n in names if n in raw}


def read_certificate(path: Path) -> Certificate:
    """The certificate in `path` (a file or a directory holding CERTIFICATE_FILE); CertificateError naming the file."""
    path = Path(path)
    if path.is_dir():
        path = path / CERTIFICATE_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CertificateError(f"{path}: no certificate file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CertificateError(f"{path}: not a readable JSON certificate ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != CERTIFICATE_FORMAT:
        got = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise CertificateError(f"{path}: format {got!r}, expected {CERTIFICATE_FORMAT!r}")
    try:
        attempts = []
        for i, a in enumerate(raw["attempts"]):
            data = _take(Attempt, a, f"{path}: attempts[{i}]")
            data["per_task_type"] = [TypeRow(**_take(TypeRow, t, f"{path}: attempts[{i}].per_task_type"))
                                     for t in a.get("per_task_type", [])]
            attempts.append(Attempt(**data))
        data = _take(Certificate, raw, str(path))
        data["attempts"] = attempts
        return Certificate(**data)
    except (KeyError, TypeError) as exc:
        raise CertificateError(f"{path}: malformed certificate ({exc})") from None
