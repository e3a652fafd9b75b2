#!/bin/bash
# Re-render reports/benchmarks/e2e.md from the saved main run (reports/benchmarks/e2e.json, the issue 26 default), and
# reports/benchmarks/e2e_before_issue26.md from the run of the strict default before it (row `betting` there = today's
# gate=strict) with that default's ablation runs (reports/benchmarks/e2e_ablations/*.json, each made by the command it
# records), without training anything. The ablations are history (measured on cf1ef2f; metric=soft/mixed on f630499,
# futility=soft_estimate on 6c8e069): a label names the setting as measured, and one whose key issue 29 removed says so.
cd "$(dirname "$0")/.." && python benchmarks/e2e.py --from-json reports/benchmarks/e2e.json > /dev/null && \
A=reports/benchmarks/e2e_ablations && python benchmarks/e2e.py --from-json reports/benchmarks/e2e_before_issue26.json \
 --out reports/benchmarks/e2e_before_issue26.md \
 --compare "gate.futility_min_pairs=60 (sign-rule futility, removed in issue 29)=$A/betting_futility60.json" \
 --compare "gate.futility_min_pairs=100 (sign-rule futility, removed in issue 29)=$A/betting_futility100.json" \
 --compare "gate.futility_min_pairs=100 gate.screen_margin=1 (sign-rule futility, removed in issue 29)=$A/betting_futility100_screen1.json" \
 --compare "gate.max_pairs=200=$A/betting_cap200.json" \
 --compare "gate.futility=none=$A/betting_futility_none.json" \
 --compare "gate.futility=bound (removed in issue 29)=$A/betting_futility_bound.json" \
 --compare "gate.futility=power (the default before cf1ef2f; removed in issue 29)=$A/betting_futility_power.json" \
 --compare "gate.futility=soft_estimate (the gain bound from the soft scores; opt-in)=$A/betting_futility_soft_estimate.json" \
 --compare "gate.futility_gain=0.05=$A/betting_futility_power_gain05.json" \
 --compare "gate.metric=soft (bets on the soft scores; tests their mean: the accuracy only when calibrated, as in the simulator; soft_gate.md)=$A/betting_metric_soft.json" \
 --compare "gate.metric=mixed (bets on (hard + soft) / 2)=$A/betting_metric_mixed.json" \
 --compare "gate.baseline_reuse=unaccepted (was opt-in; invalid, removed in issue 29; fdr.md section 2b)=$A/betting_reuse_unaccepted.json" \
 --compare "gate.baseline_reuse=unaccepted gate.futility_min_pairs=60 (both removed in issue 29)=$A/betting_reuse_unaccepted_futility60.json" \
 --compare "gate.baseline_reuse=gates (not valid after a rolled-back accept, fdr.md section 2; removed in issue 29)=$A/betting_reuse_gates.json" \
 --compare "train.epochs=6 (no trade-off runs)=$A/betting_epochs6.json" \
 --compare "train.epochs=9 (no trade-off runs)=$A/betting_epochs9.json" \
 --compare "train.epochs=6 gate.futility_gain=0.05 (no trade-off runs)=$A/betting_epochs6_futility_gain05.json" \
 --compare "train.epochs=6 gate.baseline_reuse=unaccepted gate.futility_min_pairs=60 (no trade-off runs; both gate keys removed in issue 29)=$A/betting_epochs6_reuse_unaccepted_futility60.json" > /dev/null
