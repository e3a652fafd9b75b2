"""The ht.* schedule resolvers: exact items, OmegaConf integration, Hydra plugin registration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from harness.config.resolvers import ceil_div, epoch_schedule_items, register_resolvers, step_schedule_items
from tests.conftest import REPO_ROOT


def test_ceil_div() -> None:
    assert [ceil_div(220, 44), ceil_div(221, 44), ceil_div(1, 44), ceil_div(8, 4)] == [5, 6, 1, 2]
    for bad in [(0, 4), (4, 0), (4.5, 2), ("x", 2), (True, 2)]:
        with pytest.raises(ValueError):
            ceil_div(*bad)


def test_step_schedule_chains_prev_to_previous_gate_or_slow_update() -> None:
    items = step_schedule_items(2, 2, "state")
    assert items == [
        {"epoch": 1, "step": 1, "prev": "state/init"},
        {"epoch": 1, "step": 2, "prev": "state/e1/s1/gate"},
        {"epoch": 2, "step": 1, "prev": "state/e1/slow"},
        {"epoch": 2, "step": 2, "prev": "state/e2/s1/gate"},
    ]


def test_epoch_schedule_matches_architecture_doc() -> None:
    assert epoch_schedule_items(2, 5, "state/") == [{"epoch": 1, "prev": "state/init"}, {"epoch": 2, "prev": "state/e1/slow"}]
    with pytest.raises(ValueError, match="steps_per_epoch"):
        epoch_schedule_items(2, 0, "state")


def test_every_prev_is_an_earlier_output() -> None:
    from harness.loop.state import StatePaths

    paths = StatePaths(Path("/r"), "st")
    items = step_schedule_items(3, 4, "st")
    produced = {paths.init} | {paths.gate(i["epoch"], i["step"]) for i in items} | {paths.slow(e) for e in range(1, 4)}
    assert all(Path("/r") / item["prev"] in produced for item in items)
    assert [Path("/r") / i["prev"] for i in items] == [paths.prev_of_step(i["epoch"], i["step"]) for i in items]
    assert len({paths.step_dir(i["epoch"], i["step"]) for i in items}) == len(items) == 12  # every stage writes a new path


def test_resolvers_return_omegaconf_lists_inside_a_config() -> None:
    register_resolvers()
    register_resolvers()  # idempotent
    cfg = OmegaConf.create({
        "pools": {"diagnosis_size": 9}, "batching": {"batch_size": 4},
        "train": {"epochs": 2, "state_dir": "state",
                  "steps_per_epoch": "${ht.ceil_div:${pools.diagnosis_size},${batching.batch_size}}",
                  "schedule": "${ht.schedule:${train.epochs},${train.steps_per_epoch},${train.state_dir}}",
                  "epoch_schedule": "${ht.epoch_schedule:${train.epochs},${train.steps_per_epoch},${train.state_dir}}"},
    })
    assert cfg.train.steps_per_epoch == 3
    assert isinstance(cfg.train.schedule, ListConfig) and len(cfg.train.schedule) == 6
    assert cfg.train.epoch_schedule[1].prev == "state/e1/slow" and cfg.train.schedule[4].prev == "state/e2/s1/gate"
    cfg.train.epochs = 1  # lazily re-derived
    assert [(i.epoch, i.step) for i in cfg.train.schedule] == [(1, 1), (1, 2), (1, 3)]
    cfg.train.epochs = 0
    with pytest.raises(InterpolationResolutionError, match="train.epochs"):
        _ = cfg.train.schedule


def test_composed_config_carries_the_resolved_schedule(compose_cfg) -> None:
    cfg = compose_cfg(tiny=False)
    assert cfg.train.steps_per_epoch == 5  # ceil(220 / 44)
    assert len(cfg.train.schedule) == 15 and len(cfg.train.epoch_schedule) == 3
    assert cfg.train.schedule[5].prev == "state/e1/slow"
    assert cfg.train.epoch_schedule[2].prev == "state/e2/slow"


def test_hydra_plugin_registers_resolvers_and_schema_without_importing_harness() -> None:
    # what DVC does: put the repo root on sys.path and let Hydra discover hydra_plugins/*
    code = (
        "import sys; sys.path.append(sys.argv[1])\n"
        "from hydra.core.plugins import Plugins; Plugins.instance()\n"
        "from omegaconf import OmegaConf\n"
        "from hydra.core.config_store import ConfigStore\n"
        "print(OmegaConf.has_resolver('ht.schedule'), OmegaConf.has_resolver('ht.ceil_div'),\n"
        "      'harness_schema.yaml' in ConfigStore.instance().repo)\n"
    )
    env = dict(os.environ, PYTHONSAFEPATH="1")
    done = subprocess.run([sys.executable, "-P", "-c", code, str(REPO_ROOT)], cwd="/", env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]
