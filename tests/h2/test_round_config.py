"""One Harness² round config (conf/h2_round/, `h2_round.*`) read by evolve=h2 and stages.improve (issue 29 item 4).

Both entry points declare it, evolve=h2 selects its loop size, the sweep's settings take k and the budget gates from
it, and each old key (`evolve.h2_*`, `improve.k` / `budget_usd` / `max_sessions`) is refused naming its new key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.errors import ConfigError
from harness.config.load import load_config
from harness.config.suggest import RENAMED_KEYS
from harness.pipeline.improve import ImproveOptions, settings_from
from stages import evolve as evolve_stage
from stages import improve as improve_stage


def load(*overrides: str):
    return load_config(list(overrides), env_file=None, environ={})


def test_default_round_is_the_sweeps_former_settings_and_evolve_h2_selects_the_loop_round() -> None:
    default = load()
    assert dict(default.h2_round) == {"k": 1, "mode": "parallel", "budget_usd": 1.0, "max_sessions": None}
    assert list(default.improve.modes) == ["parallel"]
    loop = load("evolve=h2")
    assert dict(loop.h2_round) == {"k": 3, "mode": "parallel", "budget_usd": 5.0, "max_sessions": 18}
    assert loop.evolve.h2_probe_questions == 8


def test_both_entry_points_read_the_one_round(tmp_path: Path) -> None:
    assert "h2_round" in evolve_stage.PARAMS
    assert all("h2_round" in keys for keys in improve_stage.PARAMS.values())
    cfg = load("evolve=h2", "h2_round.k=2", "h2_round.mode=sequential", "h2_round.max_sessions=7")
    settings = settings_from(cfg, ImproveOptions(), tmp_path)
    assert (settings.k, settings.modes, settings.budget_usd, settings.max_sessions) == (2, ("sequential",), 5.0, 7)
    assert settings_from(cfg, ImproveOptions(k=1, budget=0.25), tmp_path).k == 1  # the command line still wins


@pytest.mark.parametrize("old", sorted(RENAMED_KEYS))
def test_an_old_round_key_is_refused_naming_its_new_key(old: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(f"{old}=2")
    assert f"renamed: {old} is now {RENAMED_KEYS[old]}" in str(info.value).lower()


def test_an_old_round_key_from_the_environment_names_its_new_key() -> None:
    with pytest.raises(ConfigError, match=r"HT__IMPROVE__K .*renamed: improve\.k is now h2_round\.k"):
        load_config([], env_file=None, environ={"HT__IMPROVE__K": "2"})
