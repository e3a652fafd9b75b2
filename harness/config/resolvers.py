"""OmegaConf resolvers of the `ht.` namespace: the explicit training schedule.

`dvc.yaml` cannot loop, so the loop is unrolled with `foreach` over lists
that these resolvers derive when `conf/` is composed (the lists land,
resolved, in `params.yaml`):

    train.steps_per_epoch: ${ht.ceil_div:${pools.diagnosis_size},${batching.batch_size}}
    train.schedule:        ${ht.schedule:${train.epochs},${train.steps_per_epoch},${train.state_dir}}
    train.epoch_schedule:  ${ht.epoch_schedule:${train.epochs},${train.steps_per_epoch},${train.state_dir}}

Item layout (docs/ARCHITECTURE.md, "Pipeline state"): step 1 of epoch 1
starts from `<state>/init`, step S>1 from the previous step's gate output,
step 1 of epoch E>1 from the previous epoch's slow update. The schedule and
the layout are derived once, in `harness.kernel.schedule`, which these
resolvers, the in-process runner and `harness.loop.state.StatePaths` call.
Items carry only what `dvc.yaml` cannot interpolate (the numbers and `prev`):
DVC parses `params.yaml` once per stage at every status check, so every
scalar here is paid ~60 times per `dvc repro`.

Registered on import of `harness.config` and by the Hydra plugin module
`hydra_plugins/harness_resolvers` (Hydra imports every module under the
`hydra_plugins` namespace at startup, which is how DVC's composition sees them).
A resolver that returns a plain list fails inside OmegaConf, hence
`OmegaConf.create(...)`.

`benchmark=jsonl` sizes (conf/pools/jsonl.yaml, conf/batching/jsonl.yaml) are
derived from the questions file by `ht.fit` and `ht.fit_batch`
(harness/bench/sizing.py), so params.yaml carries numbers that fit the data.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, cast

from omegaconf import ListConfig, OmegaConf

from harness.kernel import schedule

NAMESPACE = "ht"


def _positive_int(name: str, value: Any) -> int:
    # Interpolated values arrive as int, or as str when they come from a string node.
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"ht resolver: {name} must be an integer, got {value!r}") from None
    if number < 1 or str(number) != str(value).strip():
        raise ValueError(f"ht resolver: {name} must be an integer >= 1, got {value!r}")
    return number


def ceil_div(numerator: Any, denominator: Any) -> int:
    """ceil(numerator / denominator) for positive integers (train.steps_per_epoch: harness.kernel.schedule.steps_per_epoch)."""
    num = _positive_int("numerator", numerator)
    den = _positive_int("denominator", denominator)
    return schedule.steps_per_epoch(num, den)


def _state_dir(value: Any) -> str:
    if not str(value).rstrip("/"):
        raise ValueError("ht resolver: train.state_dir must not be empty")
    return str(value)


def step_schedule_items(epochs: Any, steps_per_epoch: Any, state_dir: Any = "state") -> list[dict[str, Any]]:
    """One item {epoch, step, prev} per (epoch, step), in execution order (harness.kernel.schedule.step_items)."""
    n_epochs = _positive_int("train.epochs", epochs)
    n_steps = _positive_int("train.steps_per_epoch", steps_per_epoch)
    return schedule.step_items(n_epochs, n_steps, _state_dir(state_dir))


def epoch_schedule_items(epochs: Any, steps_per_epoch: Any, state_dir: Any = "state") -> list[dict[str, Any]]:
    """One item {epoch, prev} per epoch: where the epoch starts (harness.kernel.schedule.epoch_items; the
    epoch's last gate is `<state>/e<E>/s<steps_per_epoch>/gate`)."""
    n_epochs = _positive_int("train.epochs", epochs)
    n_steps = _positive_int("train.steps_per_epoch", steps_per_epoch)
    return schedule.epoch_items(n_epochs, n_steps, _state_dir(state_dir))


def _schedule(epochs: Any, steps_per_epoch: Any, state_dir: Any = "state") -> ListConfig:
    return OmegaConf.create(step_schedule_items(epochs, steps_per_epoch, state_dir))


def _epoch_schedule(epochs: Any, steps_per_epoch: Any, state_dir: Any = "state") -> ListConfig:
    return OmegaConf.create(epoch_schedule_items(epochs, steps_per_epoch, state_dir))


def fit(key: Any, path: Any, task_types: Any = ()) -> int:
    """`pools.<key>` that fits the questions file at `path` (relative to the working directory)."""
    from harness.bench.sizing import POOL_KEYS, fit_sizes, task_type_counts

    if key not in POOL_KEYS:
        raise ValueError(f"ht.fit: key must be one of {', '.join(POOL_KEYS)}, got {key!r}")
    if path in (None, ""):
        raise ValueError("benchmark.path: benchmark=jsonl needs the questions file (benchmark.path=<file.jsonl|file.parquet>); "
                         "the pools.* sizes are derived from it")
    file_path = Path(str(path))
    if not file_path.is_file():
        raise ValueError(f"benchmark.path = {path}: no such file (looked in {Path.cwd()}); the pools.* sizes of benchmark=jsonl "
                         "are derived from it: create it, or set pools.test_size, pools.val_size, pools.diagnosis_size "
                         "and pools.eval_min_per_class")
    types = [str(t) for t in (task_types or ())]
    counts = task_type_counts(file_path, types)
    return int(getattr(fit_sizes(counts, source=f"benchmark.path = {path}"), str(key)))


def fit_batch(key: Any, diagnosis_size: Any) -> int:
    """`batching.<key>` for a diagnosis pool of `diagnosis_size` questions (five steps per epoch)."""
    from harness.bench.sizing import batch_sizes

    batch, min_class = batch_sizes(_positive_int("pools.diagnosis_size", diagnosis_size))
    if key == "batch_size":
        return batch
    if key == "min_class_per_batch":
        return min_class
    raise ValueError(f"ht.fit_batch: key must be batch_size or min_class_per_batch, got {key!r}")


# Harness² over tasks on the simulator (conf/improve/default.yaml): these three task types exist in every
# sim world size, also train=tiny's three.
SIM_IMPROVE_DOMAINS = ("object_recognition", "spatial_perception", "temporal_reasoning")


def improve_domains(benchmark: Any, path: Any = None, task_types: Any = ()) -> ListConfig:
    """`improve.domains` by default: the sim's three task types, or every task type of the questions file (jsonl)."""
    if benchmark == "sim":
        return OmegaConf.create(list(SIM_IMPROVE_DOMAINS))
    if path in (None, "") or not Path(str(path)).is_file():
        # no file to read: validation names a missing benchmark.path, prepare a missing file; with benchmark=jsonl the
        # pool sizes are derived from the file too (ht.fit), so a params.yaml without it exists only when every pool
        # size was set by hand
        return OmegaConf.create([])
    from harness.bench.sizing import task_type_counts

    return OmegaConf.create(sorted(task_type_counts(Path(str(path)), [str(t) for t in (task_types or ())])))


def first(*values: Any) -> Any:
    """The first value that is not null (evolve.prompts_source: prompts_dir, else the package's templates)."""
    for value in values:
        if value is not None and value != "":
            return value
    raise ValueError("ht.first: every value is null")


IMPROVE_CONF_FILE = "conf/improve/default.yaml"


def improve_tasks_dir(tasks_dir: Any = None, manifest: Any = None) -> str:
    """`improve.tasks_source`, a DVC dependency of improve@<domain>: `improve.tasks_dir`, else the manifest's directory
    (its tasks' relative paths are relative to it), else the conf file (no manifest: the sim's tasks name no file)."""
    if tasks_dir not in (None, ""):
        return str(tasks_dir)
    if manifest in (None, ""):
        return IMPROVE_CONF_FILE
    return os.path.dirname(str(manifest)) or "."


_RESOLVERS = {
    f"{NAMESPACE}.ceil_div": ceil_div,
    f"{NAMESPACE}.schedule": _schedule,
    f"{NAMESPACE}.epoch_schedule": _epoch_schedule,
    f"{NAMESPACE}.fit": fit,
    f"{NAMESPACE}.fit_batch": fit_batch,
    f"{NAMESPACE}.improve_domains": improve_domains,
    f"{NAMESPACE}.first": first,
    f"{NAMESPACE}.improve_tasks_dir": improve_tasks_dir,
}


def _process_id() -> int:
    import os

    return os.getpid()


def register_resolvers() -> None:
    """Register the `ht.*` resolvers once (idempotent; safe on re-import)."""
    for name, function in _RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, cast(Callable[..., Any], function))
    # `${ht.pid:}` in conf/hydra/default.yaml's run/sweep dirs; cached like Hydra's `now`, so a sweep's
    # jobs (copied configs, joblib workers) keep the launching process's value
    if not OmegaConf.has_resolver(f"{NAMESPACE}.pid"):
        OmegaConf.register_new_resolver(f"{NAMESPACE}.pid", _process_id, use_cache=True)
