"""The cost/accuracy curve of the per-edit decision over gate.lambda (issue 26 item 2): reports/benchmarks/lambda_curve.md.

    python benchmarks/lambda_curve.py                        # lambda 0.1 0.25 0.5 1 2 3 5, seeds 7-14, our rule only (~1-3 min a value)
    python benchmarks/lambda_curve.py --lambdas 1 2 --seeds 7 8
    python benchmarks/lambda_curve.py --render               # re-render the page from the saved JSONs, no training
    python benchmarks/lambda_curve.py --key gate.max_pairs --values 8 12 20 --seeds $(seq 15 30) \
        --out reports/benchmarks/cheap_gate.md                # any other key: the cheap-gate grid (issue 26 item 3)

Each value is one `benchmarks/e2e.py --rules --no-tradeoff --override gate.lambda=<v>` run of the default config (our
rule alone: every value sets its own budget), saved as reports/benchmarks/lambda_curve/lambda_<v>.json. The table gives,
per value, the mean delivered gain (oracle, test pool), the mean training rollouts, installs and how many of them were
harmful or null, and the runs whose delivered harness is worse than the base (overall; some task type by > 2 pts).
`conf/sweep/gate_lambda.yaml` sweeps values read off this curve.

`--key KEY --values V...` measures any other config key the same way (extra `--override`s are part of each row's
setting), saved under a folder named after `--out` (cheap_gate.md -> cheap_gate/); that page adds the certificate's
rollouts and what `certify.per_type=flag` would have delivered from the same runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as `python benchmarks/lambda_curve.py`: the repo root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks._report import publish  # noqa: E402

OUT = ROOT / "reports" / "benchmarks" / "lambda_curve.md"
RUNS = ROOT / "reports" / "benchmarks" / "lambda_curve"


KEY = "gate.lambda"


def _label(value: float) -> str:
    return f"{value:g}"


def _runs_dir(out: Path) -> Path:
    """Where the e2e JSONs of the page `out` go: lambda_curve/ for the default page, else a folder named after it."""
    return RUNS if out.resolve() == OUT.resolve() else out.with_suffix("")


def _stem(key: str, value: float, extra: list[str]) -> str:
    if key == KEY and not extra:
        return f"lambda_{_label(value)}"  # the names the saved lambda_curve runs have
    return "__".join(o.replace("=", "_") for o in [f"{key}={_label(value)}", *extra])


def measure(value: float, seeds: list[int], extra: list[str], key: str = KEY, runs: Path = RUNS) -> Path:
    """One e2e run of our rule at `key` = `value` (plus the `extra` overrides); returns its JSON."""
    from benchmarks import e2e

    out = runs / f"{_stem(key, value, extra)}.md"
    runs.mkdir(parents=True, exist_ok=True)
    args = ["--seeds", *map(str, seeds), "--rules", "--no-tradeoff", "--override", f"{key}={_label(value)}", "--out", str(out)]
    for o in extra:
        args += ["--override", o]
    e2e.main(args)
    return out.with_suffix(".json")


def _setting(cmd: str) -> str:
    """The config overrides of an e2e command line: the row's setting ('defaults' when none)."""
    words = cmd.split()
    return " ".join(words[i + 1] for i, w in enumerate(words[:-1]) if w == "--override") or "defaults"


def row(path: Path) -> dict:
    doc = json.loads(path.read_text(encoding="utf-8"))
    runs = sorted((r for r in doc["runs"] if r["rule"] == "betting" and not r["tradeoff"]), key=lambda r: r["seed"])
    edits = [e for r in runs for e in r["edits"]]
    typed = [r for r in runs if r.get("base_by_type") and r.get("delivered_by_type")]
    worse2 = sum(any(r["delivered_by_type"][t] - v < -0.02 for t, v in r["base_by_type"].items()) for r in typed)
    ours = doc.get("summary", {}).get("betting", {})
    cert, modes = ours.get("certificate") or {}, doc.get("summary", {}).get("per_type_modes") or {}
    lam = path.stem.split("_", 1)[1] if path.stem.startswith("lambda_") else ""
    return {"lambda": float(lam) if lam.replace(".", "", 1).isdigit() else None, "cmd": doc.get("cmd", "?"),
            "setting": _setting(doc.get("cmd", "")), "seeds": [r["seed"] for r in runs],
            "gain": statistics.mean(100 * (r["delivered_test"] - r["base_test"]) for r in runs),
            "gains": [round(100 * (r["delivered_test"] - r["base_test"]), 2) for r in runs],
            "rollouts": statistics.mean(r["curve"][-1]["rollouts"] for r in runs),
            "gate_rollouts": statistics.mean(r["gate_rollouts"] for r in runs),
            "installed": len(edits), "bad": sum(e["effect"] <= 0.001 for e in edits),
            "worse": sum(r["delivered_test"] < r["base_test"] for r in runs), "worse2": worse2, "typed": len(typed),
            "runs": len(runs), "measured": doc.get("measured", "?"),
            "train_rollouts": ours.get("mean_rollouts"), "gates": ours.get("gates"), "rollouts_per_gate": ours.get("rollouts_per_gate"),
            "cert_rollouts": cert.get("mean_rollouts"), "certified": cert.get("certified"),
            "flag_gain": (modes.get("flag") or {}).get("mean_gain_pts"), "flag_worse2": (modes.get("flag") or {}).get("type_worse_2pt")}


def render_grid(paths: list[Path], title: str, note: str = "") -> str:
    """Any key's grid (`--key`): per setting, training and certificate rollouts, the delivered gain under the run's
    certify.per_type and under flag (the same runs), type regressions and installs."""
    rows = [dict(r, rollouts=r["train_rollouts"] or r["rollouts"]) for r in map(row, paths)]  # e2e's own training figure
    rows.sort(key=lambda r: r["rollouts"] + (r["cert_rollouts"] or 0))
    L = [f"# {title}", "",
         "Generated by `python benchmarks/lambda_curve.py --key KEY --values ... --out <this page>` (re-render: `--render`). "
         "Each row is one `benchmarks/e2e.py --rules --no-tradeoff` run of the config with the row's overrides (our rule only): "
         "the simulated world, the oracle's expected accuracy on the test pool. Gain = what the run delivers (certificate "
         "and its per-type rollback included); flag gain = what `certify.per_type=flag` delivers from the same runs. "
         "Rows by training + certificate rollouts." + (f" {note}" if note else ""), "",
         "| setting | mean gain (pts) | flag gain (pts) | training rollouts | certificate rollouts | training + certificate | "
         "gates | rollouts / gate | installs | harmful or null | certified | worse than base | some type worse > 2 pts (flag) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def num(v: float | None, fmt: str) -> str:
        return "n/a" if v is None else format(v, fmt)

    for r in rows:
        L.append(f"| `{r['setting']}` | {r['gain']:+.2f} | {num(r['flag_gain'], '+.2f')} | {r['rollouts']:.0f} | "
                 f"{num(r['cert_rollouts'], '.0f')} | {r['rollouts'] + (r['cert_rollouts'] or 0):.0f} | {num(r['gates'], 'd')} | "
                 f"{num(r['rollouts_per_gate'], '.1f')} | {r['installed']} | {r['bad']} ({100 * r['bad'] / max(r['installed'], 1):.0f} %) | "
                 f"{num(r['certified'], 'd')}/{r['runs']} | {r['worse']}/{r['runs']} | {r['worse2']}/{r['typed']} ({num(r['flag_worse2'], 'd')}) |")
    L += ["", f"Seeds: {rows[0]['seeds'] if rows else []}; measured {', '.join(sorted({r['measured'] for r in rows}))}.",
          "Commands: " + "; ".join(f"`{r['cmd']}`" for r in rows), ""]
    return "\n".join(L)


def render(paths: list[Path]) -> str:
    rows = sorted((row(p) for p in paths), key=lambda r: r["lambda"])
    L = ["# gate.lambda: the cost/accuracy curve of the per-edit decision", "",
         "Generated by `python benchmarks/lambda_curve.py` (re-render: `--render`). Each row is one "
         "`benchmarks/e2e.py` run of the default config with `gate.lambda` set (command in the last column; our rule only, "
         "no trade-off runs): the simulated world, 3 epochs, the oracle's expected accuracy on the test pool.", "",
         "| gate.lambda | mean gain (pts) | per-seed gain (pts) | mean training rollouts | of which in gates | installs | harmful or null | "
         "delivered worse than base | some type worse > 2 pts | command |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        L.append(f"| {r['lambda']:g} | {r['gain']:+.2f} | {r['gains']} | {r['rollouts']:.0f} | {r['gate_rollouts']:.0f} | "
                 f"{r['installed']} | {r['bad']} ({100 * r['bad'] / max(r['installed'], 1):.0f} %) | {r['worse']}/{r['runs']} | "
                 f"{r['worse2']}/{r['typed']} | `{r['cmd']}` |")
    L += ["", f"Seeds: {rows[0]['seeds'] if rows else []}; measured {', '.join(sorted({r['measured'] for r in rows}))}.", ""]
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lambdas", "--values", type=float, nargs="*", default=[0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0],
                    help="the values of --key")
    ap.add_argument("--key", default=KEY, help="the config key to vary (default gate.lambda: this page)")
    ap.add_argument("--seeds", type=int, nargs="*", default=list(range(7, 15)))
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra config override for every run")
    ap.add_argument("--render", action="store_true", help="re-render from the saved JSONs (no training)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--note", default=None, help="a grid page's note (what 'defaults' meant when it ran); kept in <runs>/NOTE.txt")
    args = ap.parse_args(argv)
    runs = _runs_dir(args.out.resolve())
    if not args.render:
        started = time.monotonic()
        for value in args.lambdas:
            measure(value, args.seeds, args.override, args.key, runs)
        print(f"[lambda_curve] {len(args.lambdas)} values in {(time.monotonic() - started) / 60:.1f} min", flush=True)
    paths = sorted(runs.glob("lambda_*.json" if runs == RUNS else "*.json"))
    if not paths:
        raise SystemExit(f"lambda_curve: no saved runs in {runs}; run without --render first")
    if args.note is not None:
        (runs / "NOTE.txt").write_text(args.note, encoding="utf-8")
    note = (runs / "NOTE.txt").read_text(encoding="utf-8").strip() if (runs / "NOTE.txt").exists() else ""
    text = render(paths) if runs == RUNS else render_grid(paths, f"{args.out.stem}: the per-edit decision's cost and accuracy", note)
    publish(args.out, text, {"source": [str(p.relative_to(ROOT)) for p in paths], "rows": [row(p) for p in paths]}, echo=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
