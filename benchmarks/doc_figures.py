"""Figures that docs and config comments quote from benchmark results agree with the JSON in reports/benchmarks/.

    python benchmarks/doc_figures.py --write    # after `python benchmarks/pipeline.py` (a fresh clone's `dvc repro`)
    python benchmarks/doc_figures.py --check    # exit 1 when a quoted block or figure differs (tests/docs/test_doc_figures.py)

Two kinds of quote. Run blocks sit between `<!-- figures:<name> -->` and `<!-- /figures -->` (README.md,
docs/pipeline.md); their text is rendered here from reports/benchmarks/pipeline.json (`--write` rewrites them).
Figures inside prose and YAML comments are listed in `QUOTES`: (file, the quoted text with `{}` for each figure)
-> (JSON file, the key each figure renders); `--check` fails when a quote is missing or a figure differs from its
key; `--write` rewrites those figures to the JSON's values (the words around them, e.g. "met", are re-read by hand).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "reports" / "benchmarks" / "pipeline.json"
DOCS = (ROOT / "README.md", ROOT / "docs" / "pipeline.md")
BLOCK = re.compile(r"(<!-- figures:([a-z-]+) -->\n)(.*?)(<!-- /figures -->)", re.S)


def _pts(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f} pts"


def quickstart(res: dict[str, Any]) -> str:
    m, full = res["metrics"], res["full"]
    cert = ("certified" if m.get("certify_certified") == 1.0 else "not certified") if "certify_certified" in m else "no certificate"
    return (f"On the 2-core development machine (load {res['load_start']} at start) `dvc repro` took "
            f"{full['wall'] / 60:.1f} min wall ({full['cpu'] / 60:.1f} min CPU) for {res['stages']} stages, and a second "
            f"`dvc repro` {res['noop']['wall_median']:.1f} s (nothing to do); the delivered harness was {cert} "
            f"(gain {_pts(m.get('certify_estimate'))}, lower bound {_pts(m.get('certify_lower_bound'))}), held-out "
            f"accuracy {m['holdout_base_hard_acc']:.3f} -> {m['test_hard_acc']:.3f} (base -> delivered), "
            f"{m['rollouts']:,} training rollouts + {int(m.get('certify_rollouts') or 0):,} for the certificate "
            f"(commit {res['commit']}, `reports/benchmarks/pipeline.md`).\n")


def default_run(res: dict[str, Any]) -> str:
    m = res["metrics"]
    oracle = f", oracle {m['true_test_acc_delivered']:.3f}" if m.get("true_test_acc_delivered") is not None else ""
    return (f"The default run (commit {res['commit']}, `python benchmarks/pipeline.py`) moves held-out accuracy from "
            f"{m['holdout_base_hard_acc']:.3f} to {m['test_hard_acc']:.3f}{oracle} (`holdout_base_hard_acc` -> "
            f"`test_hard_acc` in `reports/metrics.json`) with {m['accepted']} accepted edits and {m['rollouts']:,} "
            f"training rollouts; its certificate: {_pts(m.get('certify_estimate'))}, anytime lower bound "
            f"{_pts(m.get('certify_lower_bound'))} on {int(m.get('certify_pairs') or 0)} pairs.\n")


RENDERERS: dict[str, Callable[[dict[str, Any]], str]] = {"quickstart": quickstart, "default-run": default_run}


def rendered(text: str, res: dict[str, Any], where: Path) -> str:
    def one(match: re.Match) -> str:
        name = match.group(2)
        if name not in RENDERERS:
            raise SystemExit(f"{where}: unknown figures block {name!r} (known: {', '.join(RENDERERS)})")
        return match.group(1) + RENDERERS[name](res) + match.group(4)

    return BLOCK.sub(one, text)


_STEP = re.compile(r"([^.\[\]]+)(?:\[([^=\]]+)=([^\]]+)\])?")


def lookup(data: Any, key: str) -> Any:
    """`key` in `data`: dotted names; `rows[lambda=0.5]` picks the one row of list `rows` whose `lambda` equals 0.5."""
    for part in re.findall(r"[^.\[]+(?:\[[^\]]*\])?", key):
        m = _STEP.fullmatch(part)
        if m is None or not isinstance(data, dict) or m.group(1) not in data:
            raise KeyError(key)
        data = data[m.group(1)]
        if m.group(2) is not None:
            field, want = m.group(2), m.group(3)
            rows = [r for r in data if str(r.get(field)) == want or _same_number(r.get(field), want)]
            if len(rows) != 1:
                raise KeyError(f"{key}: {len(rows)} rows with {field}={want}")
            data = rows[0]
    return data


def _same_number(value: Any, text: str) -> bool:
    try:
        return isinstance(value, (int, float)) and float(value) == float(text)
    except ValueError:
        return False


@dataclass(frozen=True)
class Figure:
    """One quoted figure: (`key` [- `minus`]) x `scale` [/ `per` x 100] of the JSON, rendered with the format `spec`."""

    key: str
    spec: str = ""
    scale: float = 1.0  # 100: a share quoted in percent or points
    per: str | None = None  # a percentage of another key: 100 * key / per
    minus: str | None = None  # a difference of two keys: key - minus

    def render(self, data: Any) -> str:
        value = lookup(data, self.key)
        if self.minus is not None:
            value -= lookup(data, self.minus)
        if self.per is not None:
            whole = lookup(data, self.per)
            if whole == 0:  # a share of nothing (e.g. harmful share of 0 installs): quoted as a dash
                return "–"
            value = 100 * value / whole
        return format(value * self.scale if self.scale != 1.0 else value, self.spec)

    def label(self) -> str:
        expr = self.key if self.minus is None else f"{self.key} - {self.minus}"
        expr = expr if self.per is None else f"100 * ({expr}) / {self.per}"
        return expr if self.scale == 1.0 else f"{self.scale:g} * {expr}"


def _chunk(chunk: str) -> str:
    """A literal stretch of a quote as a regex in which every whitespace run matches any whitespace run (line wraps)."""
    words = chunk.split()
    if not words:
        return r"\s+" if chunk else ""
    return ((r"\s+" if chunk[0].isspace() else "") + r"\s+".join(map(re.escape, words))
            + (r"\s+" if chunk[-1].isspace() else ""))


@dataclass(frozen=True)
class Quote:
    """Text quoted in `doc` (repo-relative; `{}` marks each figure) whose figures come from `source` (repo-relative JSON)."""

    doc: str
    text: str
    source: str
    figures: tuple[Figure, ...]

    def pattern(self) -> re.Pattern[str]:
        return re.compile(r"(\S+?)".join(_chunk(c) for c in self.text.split("{}")))


def _e2e(key: str) -> str:
    return f"summary.{key}"


def _lam(lam: str, key: str) -> str:
    return f"rows[lambda={lam}].{key}"


_LAMBDAS = ("0.1", "0.25", "0.5", "1", "2", "3", "5")
E2E = "reports/benchmarks/e2e.json"
CERT = "reports/benchmarks/certificate.json"


def _cert(key: str) -> str:
    return f"summary.worlds.all worlds.{key}"


QUOTES: tuple[Quote, ...] = (
    Quote("conf/certify/default.yaml",
          "(e2e seeds 7-14, reports/benchmarks/e2e.json: some type > 2 pts worse {}/{}, flag {}/{}; gain {} / {})",
          E2E, (Figure(_e2e("per_type_modes.rollback.type_worse_2pt")), Figure(_e2e("per_type_modes.rollback.runs")),
                Figure(_e2e("per_type_modes.flag.type_worse_2pt")), Figure(_e2e("per_type_modes.flag.runs")),
                Figure(_e2e("per_type_modes.rollback.mean_gain_pts"), "+.1f"),
                Figure(_e2e("per_type_modes.flag.mean_gain_pts"), "+.1f"))),
    Quote("docs/kernel.md",
          "λ = 0.1 / 0.25 / 0.5 / 1 / 2 / 3 / 5 deliver {} / {} / {} / {} / {} / {} / {} points for "
          "{} / {} / {} / {} / {} / {} / {} rollouts, with {} / {} / {} / {} / {} / {} / {} % of installs harmful or null.",
          "reports/benchmarks/lambda_curve.json",
          tuple(Figure(_lam(v, "gain"), "+.1f") for v in _LAMBDAS)
          + tuple(Figure(_lam(v, "rollouts"), ",.0f") for v in _LAMBDAS)
          + tuple(Figure(_lam(v, "bad"), ".0f", per=_lam(v, "installed")) for v in _LAMBDAS)),
    Quote("docs/kernel.md",
          "the default trains for **{} rollouts** ({} rollouts per gated candidate, {} installs of which {} % harmful or "
          "null) and delivers **{} points** after the certificate's per-type rollback ({} with flags only, the same runs); "
          "under the same budget GEPA's rule {} ({} used; {} for its own 6 epochs), the SkillOpt-like rule {}, the ideal "
          "gate {}; strict mode (`betting_elond`, its own 3 epochs) {} for {}.",
          E2E, (Figure(_e2e("betting.mean_rollouts"), ",.0f"), Figure(_e2e("betting.rollouts_per_gate"), ".0f"),
                Figure(_e2e("betting.installed")), Figure(_e2e("betting.bad_share"), ".0f", scale=100),
                Figure(_e2e("per_type_modes.rollback.mean_gain_pts"), "+.2f"),
                Figure(_e2e("per_type_modes.flag.mean_gain_pts"), "+.2f"), Figure(_e2e("gepa.mean_gain_pts"), "+.2f"),
                Figure(_e2e("gepa.mean_rollouts"), ",.0f"), Figure(_e2e("gepa.full_rollouts"), ",.0f"),
                Figure(_e2e("skillopt.mean_gain_pts"), "+.2f"), Figure(_e2e("oracle.mean_gain_pts"), "+.2f"),
                Figure(_e2e("betting_elond.mean_gain_pts"), "+.2f"), Figure(_e2e("betting_elond.mean_rollouts"), ",.0f"))),
    Quote("docs/kernel.md",
          "certified {} of {}, mean lower bound {} points, width {}, the bound below the true gain {} of {}, {} certificate "
          "rollouts a run (flags only: {});",
          E2E, (Figure(_e2e("betting.certificate.certified")), Figure(_e2e("betting.certificate.runs")),
                Figure(_e2e("betting.certificate.mean_lower_bound"), "+.2f", scale=100),
                Figure(_e2e("betting.certificate.mean_width"), ".1f", scale=100),
                Figure(_e2e("betting.certificate.bound_held")), Figure(_e2e("betting.certificate.bounds")),
                Figure(_e2e("betting.certificate.mean_rollouts"), ",.0f"),
                Figure(_e2e("per_type_modes.flag.mean_rollouts_with_cert"), ",.0f", minus=_e2e("betting.mean_rollouts")))),
    Quote("docs/kernel.md",
          "rollouts ≤ GEPA's own run **met** ({} % against it): {} + {} for the certificate = {} against {} (was",
          E2E, (Figure(_e2e("per_type_modes.rollback.mean_rollouts_with_cert"), ".1f",
                       minus=_e2e("gepa.full_rollouts"), per=_e2e("gepa.full_rollouts")),
                Figure(_e2e("betting.mean_rollouts"), ",.0f"), Figure(_e2e("betting.certificate.mean_rollouts"), ",.0f"),
                Figure(_e2e("per_type_modes.rollback.mean_rollouts_with_cert"), ",.0f"),
                Figure(_e2e("gepa.full_rollouts"), ",.0f"))),
    Quote("docs/kernel.md",
          "certified with Δ ≤ 0 in **{} of {}** runs (the target: ≤ α and refused in ≥ 95 %), certified while what is "
          "delivered (rollbacks included) is not better in {} of {}, the lower bound above the true gain in {} of {} "
          "(target ≤ α), power {} % for Δ > +3 points ({} of {}, mixed candidates included)",
          CERT, (Figure(_cert("certified_null")), Figure(_cert("null")), Figure(_cert("certified_delivered_not_better")),
                 Figure(_cert("runs")), Figure(_cert("lcb_above_delta")), Figure(_cert("runs")),
                 Figure(_cert("power_hits"), ".0f", per=_cert("power_n")), Figure(_cert("power_hits")),
                 Figure(_cert("power_n")))),
    Quote("docs/loop.md",
          "per edit, {} rollouts per gated\n  candidate (GEPA's rule {}), {} % of installs harmful or null; for the delivery, one certificate of {} rollouts a\n"
          "  run (certified {} of {}, mean lower bound {} points, width {}). Training {} + certificate {} = {} against\n"
          "  GEPA's own {}; delivered {} points against GEPA's {} and SkillOpt-like {} on the same training",
          E2E, (Figure(_e2e("betting.rollouts_per_gate"), ".1f"), Figure(_e2e("gepa.rollouts_per_gate"), ".1f"),
                Figure(_e2e("betting.bad_share"), ".0f", scale=100), Figure(_e2e("betting.certificate.mean_rollouts"), ",.0f"),
                Figure(_e2e("betting.certificate.certified")), Figure(_e2e("betting.certificate.runs")),
                Figure(_e2e("betting.certificate.mean_lower_bound"), "+.2f", scale=100),
                Figure(_e2e("betting.certificate.mean_width"), ".1f", scale=100),
                Figure(_e2e("betting.mean_rollouts"), ",.0f"), Figure(_e2e("betting.certificate.mean_rollouts"), ",.0f"),
                Figure(_e2e("per_type_modes.rollback.mean_rollouts_with_cert"), ",.0f"),
                Figure(_e2e("gepa.full_rollouts"), ",.0f"), Figure(_e2e("per_type_modes.rollback.mean_gain_pts"), "+.2f"),
                Figure(_e2e("gepa.mean_gain_pts"), "+.2f"), Figure(_e2e("skillopt.mean_gain_pts"), "+.2f"))),
    Quote("docs/kernel.md", "a mean width (estimate − bound) of {} points, bound / true gain {}. Before",
          CERT, (Figure(_cert("mean_width_pts"), ".1f"), Figure(_cert("mean_lcb_over_delta"), ".2f"))),
)


def check_quotes(root: Path, quotes: tuple[Quote, ...] = QUOTES) -> list[str]:
    """One line per quote not found once in its file and per figure that differs from its JSON key; [] when all agree."""
    problems: list[str] = []
    loaded: dict[str, Any] = {}
    for q in quotes:
        if q.source not in loaded:
            loaded[q.source] = json.loads((root / q.source).read_text(encoding="utf-8"))
        text = (root / q.doc).read_text(encoding="utf-8")
        found = list(q.pattern().finditer(text))
        if len(found) != 1:
            problems.append(f"{q.doc}: the quote {q.text[:60]!r}... is found {len(found)} times (expected once)")
            continue
        for quoted, fig in zip(found[0].groups(), q.figures):
            try:
                want = fig.render(loaded[q.source])
            except (KeyError, TypeError) as exc:
                problems.append(f"{q.doc}: {q.source} has no key {fig.label()} ({exc})")
                continue
            if quoted != want:
                problems.append(f"{q.doc}: quotes {quoted}, {q.source} {fig.label()} is {want}")
    return problems


def write_quotes(root: Path, quotes: tuple[Quote, ...] = QUOTES) -> list[str]:
    """Rewrite each figure of a quote found once in its file to its JSON's value; the repo-relative files changed.
    The words around a figure are not touched: a claim such as "met" is re-read by hand (check_quotes still runs)."""
    loaded: dict[str, Any] = {}
    changed: list[str] = []
    for q in quotes:
        if q.source not in loaded:
            loaded[q.source] = json.loads((root / q.source).read_text(encoding="utf-8"))
        path = root / q.doc
        text = path.read_text(encoding="utf-8")
        found = list(q.pattern().finditer(text))
        if len(found) != 1:
            continue  # check_quotes names it
        try:
            wanted = [fig.render(loaded[q.source]) for fig in q.figures]
        except (KeyError, TypeError):
            continue  # check_quotes names the missing key
        match = found[0]
        new = text
        for i in reversed(range(len(wanted))):  # from the end: earlier spans keep their offsets
            new = new[: match.start(i + 1)] + wanted[i] + new[match.end(i + 1):]
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(q.doc)
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if not SOURCE.is_file():
        print(f"{SOURCE} is missing: run python benchmarks/pipeline.py first", file=sys.stderr)
        return 2
    res = json.loads(SOURCE.read_text(encoding="utf-8"))
    stale = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        new = rendered(text, res, doc)
        if new != text:
            stale.append(doc)
            if args.write:
                doc.write_text(new, encoding="utf-8")
    if args.write:
        stale += [ROOT / doc for doc in dict.fromkeys(write_quotes(ROOT)) if ROOT / doc not in stale]
    problems = check_quotes(ROOT)
    for problem in problems:
        print(problem, file=sys.stderr)
    if args.check and stale:
        print(f"quoted figures differ from {SOURCE.relative_to(ROOT)} in: {', '.join(str(d.relative_to(ROOT)) for d in stale)}; "
              "run python benchmarks/doc_figures.py --write", file=sys.stderr)
    if problems:  # a quote not found once, or a missing key: the text is fixed by hand
        print(f"{len(problems)} quoted figure(s) disagree with their JSON (benchmarks/doc_figures.py QUOTES)", file=sys.stderr)
    if problems or (args.check and stale):
        return 1
    print(("updated " if args.write else "up to date: ") + (", ".join(str(d.relative_to(ROOT)) for d in stale) or "nothing to change"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
