"""params.yaml: committed snapshot == composition of conf/, identical to DVC's own Hydra composition."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from harness.config.snapshot import main, params_diff, render_params
from tests.conftest import REPO_ROOT


def test_committed_params_yaml_is_up_to_date_with_conf() -> None:
    diff = params_diff(REPO_ROOT / "params.yaml", config_dir=REPO_ROOT / "conf")
    assert diff == "", "params.yaml is stale; run `python -m harness.config.snapshot`\n" + diff[:3000]


def test_snapshot_is_byte_identical_to_dvc_hydra_composition(tmp_path: Path) -> None:
    from dvc.utils.hydra import compose_and_dump

    for overrides in ([], ["gate.lambda=2.0", "train.epochs=1"]):
        dvc_out = tmp_path / "dvc_params.yaml"
        compose_and_dump(dvc_out, str(REPO_ROOT / "conf"), None, "config", str(REPO_ROOT), overrides)
        assert dvc_out.read_text() == render_params(overrides, config_dir=REPO_ROOT / "conf")
    written = yaml.safe_load(dvc_out.read_text())
    assert written["gate"]["lambda"] == 2.0 and len(written["train"]["schedule"]) == 5  # resolved lists


def test_params_yaml_holds_resolved_schedule_for_dvc_foreach() -> None:
    params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    schedule = params["train"]["schedule"]
    assert isinstance(schedule, list) and schedule[0] == {"epoch": 1, "step": 1, "prev": "state/init"}
    assert len(schedule) == params["train"]["epochs"] * params["train"]["steps_per_epoch"]
    assert "${" not in (REPO_ROOT / "params.yaml").read_text()


def test_check_mode_detects_stale_file_and_write_fixes_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "params.yaml"
    conf = str(REPO_ROOT / "conf")
    assert main(["--check", "--output", str(out), "--config-dir", conf]) == 1  # missing
    assert main(["--output", str(out), "--config-dir", conf, "gate.lambda=2.0"]) == 0
    assert yaml.safe_load(out.read_text())["gate"]["lambda"] == 2.0
    assert main(["--check", "--output", str(out), "--config-dir", conf]) == 1  # differs from conf/
    assert "-  lambda: 2.0" in capsys.readouterr().err  # the diff shows what is stale


def test_invalid_config_writes_nothing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "params.yaml"
    out.write_text("previous: content\n")
    assert main(["--output", str(out), "--config-dir", str(REPO_ROOT / "conf"), "gate.lambda_dir=0.5"]) == 2
    assert "gate.lambda_dir = 0.5" in capsys.readouterr().err
    assert out.read_text() == "previous: content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # no temp file left


def test_command_line_entry_point_writes_params(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "harness.config.snapshot", "--output", str(tmp_path / "a.yaml"),
                           "train=tiny"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load((tmp_path / "a.yaml").read_text())["train"]["run_name"] == "tiny"
