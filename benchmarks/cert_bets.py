"""Is the certificate's e-process the lever for its cost? Pairs to the crossing of its bet mixture against other bets.

    python benchmarks/cert_bets.py                    # 2,000 paths a regime, budget 1,000 pairs, ~10 s
    python benchmarks/cert_bets.py --runs 500 --out /tmp/cert_bets.md

The certificate (harness/kernel/certificate.py) certifies when K_t(0) = mean_k prod_s (1 + lam_k Z_s) reaches 1 / alpha,
lam_k in BETS. Paired differences Z in {-1, 0, +1} with P(win) = p_w, P(loss) = p_l are drawn for a grid of regimes
(discordance p_w + p_l from 0.1 to 0.8, gain p_w - p_l from 2 to 40 points: wider than any world the e2e benchmark
picks), and every path is run through:

- `product`: the certificate's own `_log_wealth` with its BETS (the function the certify stage runs);
- `mix6`: the same mixture over six bets 0.05 ... 0.7 (a finer grid costs log 6 instead of log 3);
- `agrapa`: one predictable plug-in bet per pair, lam_t = clip(mean / second moment of the pairs before t, 0, 0.75),
  started from a prior of 2 pseudo-pairs of mean 0 (Waudby-Smith & Ramdas' aGRAPA; valid for any predictable lam_t);
- `kelly`: the one constant bet (p_w - p_l) / (p_w + p_l) that maximises the growth rate, known in advance. Not
  attainable (it needs the answer); it is the reference, with log(1 / alpha) / g* (g* its growth rate a pair) as
  the ideal expected crossing.

Reported per regime: mean pairs to the crossing (a path that never crosses counts the budget) and P(crossed within the
budget). Nothing here changes the product; the table says which bets would certify sooner.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as `python benchmarks/cert_bets.py`: the repo root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._report import publish, table  # noqa: E402
from harness.kernel.certificate import BETS, _log_wealth  # noqa: E402

# (p_win, p_loss): the gain is their difference, the discordance their sum
REGIMES = ((0.30, 0.10), (0.20, 0.05), (0.15, 0.05), (0.25, 0.15), (0.45, 0.25), (0.60, 0.20), (0.06, 0.02),
           (0.12, 0.08), (0.50, 0.30), (0.08, 0.00))
MIX6 = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7)
_NULL = np.array([0.0])  # the null mean the certificate tests (margin 0)


def _mixture(z: np.ndarray, bets: tuple[float, ...]) -> np.ndarray:
    """log K_t(0) of an equally weighted mixture of constant bets, one row a path: the certify stage's own
    `_log_wealth`, path by path."""
    return np.stack([_log_wealth(path, _NULL, np.asarray(bets, dtype=float))[0] for path in z])


def _agrapa(z: np.ndarray, cap: float = 0.75, prior_n: float = 2.0, prior_second: float = 0.25) -> np.ndarray:
    t = np.arange(z.shape[1])
    before = np.concatenate([np.zeros((z.shape[0], 1)), np.cumsum(z, axis=1)[:, :-1]], axis=1)
    before2 = np.concatenate([np.zeros((z.shape[0], 1)), np.cumsum(z * z, axis=1)[:, :-1]], axis=1)
    mean = before / (t + prior_n)
    second = (before2 + prior_n * prior_second) / (t + prior_n)
    lam = np.clip(mean / np.maximum(second, 1e-9), 0.0, cap)
    return np.cumsum(np.log1p(lam * z), axis=1)


def _crossing(log_k: np.ndarray, threshold: float, budget: int) -> np.ndarray:
    """Pairs to the first crossing of each path; budget + 1 when it never crosses."""
    hit = log_k >= threshold
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, budget + 1)


def run(runs: int, budget: int, alpha: float, seed: int,
        regimes: tuple[tuple[float, float], ...] = REGIMES) -> list[dict]:
    rng = np.random.default_rng(seed)
    threshold = math.log(1.0 / alpha)
    rows = []
    for p_win, p_loss in regimes:
        u = rng.random((runs, budget))
        z = np.where(u < p_win, 1.0, np.where(u < p_win + p_loss, -1.0, 0.0))
        kelly_bet = min(max((p_win - p_loss) / (p_win + p_loss), 0.0), 0.95)  # the growth-optimal bet, capped
        growth = p_win * math.log1p(kelly_bet) + p_loss * math.log1p(-kelly_bet)
        rows.append({
            "p_win": p_win, "p_loss": p_loss, "ideal": threshold / growth if growth > 0 else math.inf,
            **{name: _crossing(log_k, threshold, budget) for name, log_k in (
                ("product", _mixture(z, BETS)), ("mix6", _mixture(z, MIX6)), ("agrapa", _agrapa(z)),
                ("kelly", _mixture(z, (kelly_bet,))))},
        })
    return rows


NAMES = ("product", "mix6", "agrapa", "kelly")


def render(rows: list[dict], *, runs: int, budget: int, alpha: float, command: str, wall_s: float) -> str:
    body = []
    for r in rows:
        means = {n: float(np.minimum(r[n], budget).mean()) for n in NAMES}
        body.append([f"{r['p_win']:.2f}", f"{r['p_loss']:.2f}", f"{100 * (r['p_win'] - r['p_loss']):+.0f}",
                     f"{r['p_win'] + r['p_loss']:.2f}",
                     *[f"{means[n]:.0f} / {float((r[n] <= budget).mean()):.2f}" for n in NAMES],
                     f"{r['ideal']:.0f}", f"{means['product'] / means['kelly']:.2f}"])
    return "\n".join([
        "# The certificate's bets against other bets: pairs to the crossing",
        "",
        f"Command: `{command}` — {runs} paths a regime, budget {budget} pairs, alpha {alpha}; wall {wall_s:.0f} s.",
        "",
        "Cell: mean pairs to the crossing (a path that never crosses counts the budget) / P(crossed within the budget). "
        f"product = the certificate's mixture over BETS {BETS}; mix6 = the mixture over {MIX6}; agrapa = a "
        "predictable plug-in bet; kelly = the best constant bet known in advance (not attainable); ideal = "
        "log(1 / alpha) / its growth rate a pair.",
        "",
        *table(["p_win", "p_loss", "gain (pts)", "discordance", *NAMES, "ideal", "product / kelly"], body),
    ]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks" / "cert_bets.md")
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows = run(args.runs, args.budget, args.alpha, args.seed)
    command = "python benchmarks/cert_bets.py" + "".join(
        f" {flag} {value}" for flag, value, default in (("--runs", args.runs, 2000), ("--budget", args.budget, 1000),
                                                         ("--alpha", args.alpha, 0.05), ("--seed", args.seed, 1))
        if value != default)
    text = render(rows, runs=args.runs, budget=args.budget, alpha=args.alpha, command=command,
                  wall_s=time.monotonic() - started)
    results = {"runs": args.runs, "budget": args.budget, "alpha": args.alpha, "seed": args.seed, "rows": [
        {**{k: r[k] for k in ("p_win", "p_loss", "ideal")},
         **{n: {"mean_pairs": float(np.minimum(r[n], args.budget).mean()), "crossed": float((r[n] <= args.budget).mean())}
            for n in NAMES}} for r in rows]}
    publish(args.out, text, results, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
