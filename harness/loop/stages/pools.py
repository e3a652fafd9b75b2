"""pools: the test -> validation -> diagnosis split (frozen once written) and the initial state at v0/v0."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from harness import workspace as wsp
from harness.bench.sizing import check_sizes
from harness.kernel.ladder import GatePools
from harness.kernel.pools import PoolParams
from harness.loop.context import StageContext, by_task_type
from harness.loop.persistence import build_or_load_pools, save_gate_pools
from harness.loop.state import GATE_POOLS, WORKSPACE, Lineage, fresh_output, mark_done, rel_to, save_state, write_lineage
from harness.loop.train_state import Progress, TrainState
from harness.questions import questions_digest

progress = logging.getLogger("harness.progress")


def start_tree(ctx: StageContext):
    """The harness training starts from: the seed `train.init_seed` (on benchmark=jsonl every task type of the data still
    gets a skill file), else the benchmark's base harness."""
    bench = ctx.bench()
    seed_dir = ctx.cfg.train.init_seed
    if seed_dir is None:
        return bench.base_harness()
    from harness.bench.jsonl import with_task_type_skills
    from harness.store import read_seed

    path = Path(str(seed_dir))
    seed = read_seed(path if path.is_absolute() else ctx.root / path)
    tree = seed.prompts.with_files({f"skills/{p}": t for p, t in seed.skills.items()})
    return with_task_type_skills(tree, list(bench.task_types), source=str(seed_dir)) if bench.name == "jsonl" else tree


def stage_pools(ctx: StageContext, questions: Path, out_pools: Path, out_init: Path) -> None:
    """test -> validation -> diagnosis split (frozen once written) and the initial state at v0/v0."""
    qs = ctx.questions(Path(questions))
    params = PoolParams.from_config(ctx.cfg.pools)
    if not Path(out_pools).exists():  # a frozen split is checked against the questions instead
        check_sizes(Counter(q.task_type for q in qs.values()), test_size=params.test_size, val_size=params.val_size,
                    diagnosis_size=params.diagnosis_size, eval_min_per_class=params.eval_min_per_class, source=str(questions))
    pools = build_or_load_pools(Path(out_pools), list(qs.values()), params).to_json()
    out = fresh_output(Path(out_init))
    base = start_tree(ctx)
    skills = base.subtree("skills")
    prompts = base.with_files({p: None for p in base if p.startswith("skills/")})
    qpath = Path(questions) if Path(questions).is_absolute() else ctx.root / questions
    # `<path>@sha256:<digest>` with the path relative to the project root (state stays relocatable)
    ref = f"{rel_to(ctx.root, qpath)}@sha256:{questions_digest(qpath)}"
    wsp.init_workspace(out / WORKSPACE, skills, prompts, ref, base=ctx.root)
    save_gate_pools(out / GATE_POOLS, GatePools.build(by_task_type(pools["validation"], qs)))
    state = TrainState(epoch_start_skills=dict(skills.to_dict()))
    save_state(out, state, Progress(epoch=1, step=0, phase="epoch_done"), ctx.config_dict())
    write_lineage(out, Lineage())
    mark_done(out, {"stage": "pools", "skills_version": "v0", "prompts_version": "v0"})
    progress.info("[pools] test %d, validation %d, diagnosis %d", len(pools["test"]), len(pools["validation"]), len(pools["diagnosis"]))
