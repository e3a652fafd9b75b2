"""stages.train's pre-check (harness/config/precheck.py) and "did you mean" (harness/config/suggest.py).

The pre-check composes the real conf/ with Hydra as `stages.train` would and
validates every job; these tests call it in process. The command-line
behaviour (exit codes, nothing left behind) is tested through the real entry
point in tests/pipeline/test_one_line_errors.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.errors import ConfigError
from harness.config.load import load_config
from harness.config.precheck import (
    HYDRA_FILES,
    LOCK_FILE,
    HydraCompositionError,
    check_train_command_line,
    problems_message,
    remove_unused_job_dir,
)
from harness.config.suggest import schema_keys, suggest_key
from harness.pipeline.train_job import rebase_outputs

REPO_ROOT = Path(__file__).resolve().parents[2]


def _check(*argv: str):
    return check_train_command_line(list(argv), REPO_ROOT, rebase_outputs)


@pytest.mark.parametrize("typo,meant", [
    ("gate.lamda", "gate.lambda"), ("gate.blok_size", "gate.block_size"), ("train.epoch", "train.epochs"),
    ("pools.batch_size", "batching.batch_size"), ("trian.epochs", "train.epochs"), ("lamda", "gate.lambda"),
])
def test_a_misspelt_key_gets_the_closest_schema_key(typo: str, meant: str) -> None:
    assert meant in schema_keys()
    assert suggest_key(typo) == meant


@pytest.mark.parametrize("key", ["gate.foo", "gate.lambda", "zzz"])
def test_no_suggestion_for_a_known_or_unrelated_key(key: str) -> None:
    assert suggest_key(key) is None


def test_every_refusal_of_an_unknown_key_says_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"Did you mean gate\.lambda\?"):  # Hydra's "Could not override"
        load_config(["train=tiny", "gate.lamda=2"], env_file=None, environ={})
    with pytest.raises(ConfigError, match=r"gate\.lamda = '<set>': unknown key.*did you mean gate\.lambda\?"):
        load_config(["train=tiny", "+gate.lamda=2"], env_file=None, environ={})
    with pytest.raises(ConfigError, match=r"HT__GATE__LAMDA .*did you mean gate\.lambda\?"):
        load_config(["train=tiny"], env_file=None, environ={"HT__GATE__LAMDA": "2"})


def test_a_valid_run_and_a_valid_sweep_pass() -> None:
    assert _check("train=tiny") == []
    assert _check("train=tiny", "+sweep=gate_lambda") == []


def test_a_bad_run_is_reported_with_every_violation() -> None:
    problems = _check("train=tiny", "gate.rule=nonexistent", "+gate.foo=1")
    assert len(problems) == 1
    assert set(problems[0].error.keys) == {"gate.rule", "gate.foo"}
    message = problems_message("stages.train", problems)
    assert message.startswith("stages.train: invalid configuration (2 problems):")
    assert "gate.rule = 'nonexistent': must be one of" in message


def test_a_sweep_names_the_jobs_that_fail() -> None:
    problems = _check("train=tiny", "+sweep=gate_lambda", "gate.lambda=1.0,-1.0")
    assert [p.overrides for p in problems] == [("gate.lambda=-1.0", "train=tiny", "+sweep=gate_lambda")]
    assert "1 of the sweep's 2 jobs (gate.lambda=-1.0 train=tiny +sweep=gate_lambda)" in problems_message("stages.train", problems)
    every = _check("train=tiny", "+sweep=gate_lambda", "gate.rule=nonexistent")
    from omegaconf import OmegaConf

    sweep = OmegaConf.load(Path(__file__).resolve().parents[2] / "conf" / "sweep" / "gate_lambda.yaml")
    n = len(str(sweep.hydra.sweeper.params["gate.lambda"]).split(","))  # the jobs the committed sweep has
    assert len(every) == n and problems_message("stages.train", every).startswith(f"stages.train: every job of the sweep ({n}):")


def test_outputs_are_checked_where_the_job_puts_them() -> None:
    """train.state_dir=. is the job directory under stages.train (allowed), not the project root."""
    assert _check("train=tiny", "train.state_dir=.") == []
    problems = _check("train=tiny", "train.state_dir=../../../../x")  # up from runs/<name>/<time>/ and out of the project
    assert problems and problems[0].error.keys == ["train.state_dir"]


def test_hydras_own_error_gets_did_you_mean() -> None:
    with pytest.raises(HydraCompositionError) as info:
        _check("train=tiny", "gate.lamda=2")
    assert info.value.message.startswith("Could not override 'gate.lamda'.")
    assert info.value.message.rstrip().endswith("Did you mean gate.lambda?")


def test_commands_that_run_no_job_are_not_checked() -> None:
    assert _check("--cfg", "job", "gate.rule=nonexistent") == []
    assert _check("--help") == []


def _hydra_job_dir(path: Path) -> Path:
    for name in HYDRA_FILES:
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text("x: 1\n")
    (path / "train.log").write_text("")
    (path / LOCK_FILE).write_text("123 on host\n")
    return path


def test_a_job_dir_holding_only_hydras_files_is_removed(tmp_path: Path) -> None:
    job = _hydra_job_dir(tmp_path / "runs" / "default" / "t_1")
    assert remove_unused_job_dir(job, existed_before=False)
    assert not job.exists() and (tmp_path / "runs" / "default").is_dir()  # parents stay without up_to


def test_parents_left_empty_go_up_to_the_project_root(tmp_path: Path) -> None:
    other = _hydra_job_dir(tmp_path / "runs" / "other" / "t_0")
    job = _hydra_job_dir(tmp_path / "runs" / "default" / "t_1")
    assert remove_unused_job_dir(job, existed_before=False, up_to=tmp_path)
    assert not (tmp_path / "runs" / "default").exists()  # left empty: removed
    assert other.is_dir() and tmp_path.is_dir()  # runs/ holds another run: kept


@pytest.mark.parametrize("extra", ["state/init/DONE.json", "reports/metrics.json"])
def test_a_job_dir_with_anything_else_is_kept(tmp_path: Path, extra: str) -> None:
    job = _hydra_job_dir(tmp_path / "job")
    (job / extra).parent.mkdir(parents=True)
    (job / extra).write_text("{}")
    assert not remove_unused_job_dir(job, existed_before=False)
    assert (job / extra).is_file()


def test_a_job_dir_with_a_log_or_from_before_is_kept(tmp_path: Path) -> None:
    logged = _hydra_job_dir(tmp_path / "logged")
    (logged / "train.log").write_text("[train] job dir ...\n")
    assert not remove_unused_job_dir(logged, existed_before=False)
    earlier = _hydra_job_dir(tmp_path / "earlier")
    assert not remove_unused_job_dir(earlier, existed_before=True)
    assert logged.is_dir() and earlier.is_dir()


def test_the_lock_file_name_is_run_locks() -> None:
    from harness.pipeline.run_lock import LOCK_NAME

    assert LOCK_FILE == LOCK_NAME


def test_a_gate_budget_that_cannot_accept_is_refused_with_the_budget_that_can() -> None:
    problems = _check("train=tiny", "gate=strict", "gate.max_pairs=10", "gate.block_size=10")
    assert len(problems) == 1
    message = str(problems[0].error)
    assert "gate.max_pairs = 10: the gate cannot accept within 10 pairs even if every pair were a win" in message
    assert "gate.max_pairs >= 40 would" in message


def test_budget_sizing_warns_in_one_line_per_budget_that_misses_a_plausible_gain() -> None:
    warnings: list[str] = []
    assert check_train_command_line(["train=tiny", "gate=strict", "gate.max_pairs=40", "gate.block_size=10"], REPO_ROOT,
                                    rebase_outputs, warnings=warnings) == []
    gate = [w for w in warnings if w.startswith("gate ")]
    assert len(gate) == 1 and "\n" not in gate[0]
    assert "betting, log E >= 6.71, 40 pairs) at 40% discordant pairs: accepts no gain up to 40.0 points" in gate[0]
    quiet: list[str] = []
    check_train_command_line(["train=tiny", "gate.max_pairs=200", "certify.max_pairs=400", "certify.pairs_per_question=0"],
                             REPO_ROOT, rebase_outputs, warnings=quiet)
    assert quiet == []  # budgets that reach +5 points per edit and +10 delivered say nothing


def test_the_certificate_is_sized_with_the_pool_sized_budget_it_really_has() -> None:
    from harness.kernel.certificate import CertifyParams

    cfg = load_config(["train=tiny", "certify.max_pairs=400"], env_file=None, environ={})
    params = CertifyParams(**{k: cfg.certify[k] for k in CertifyParams.keys()})
    assert params.for_population(int(cfg.pools.test_size)).max_pairs == 200  # 20 x 6 questions, raised to the floor
    warnings: list[str] = []
    check_train_command_line(["train=tiny", "gate.max_pairs=200", "certify.max_pairs=400"], REPO_ROOT, rebase_outputs,
                             warnings=warnings)
    cert = [w for w in warnings if w.startswith("certificate ")]
    # 400 pairs reach +10 points (the test above); the 200 the 6-question pool gives do not, and the line says why
    assert len(cert) == 1 and "certify.pairs_per_question x pools.test_size, certify.max_pairs" in cert[0]
    assert "alpha 0.05, 200 pairs" in cert[0]


def test_the_entry_prints_each_warning_on_one_line_of_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.config.precheck import precheck_or_exit

    precheck_or_exit("stages.train", ["train=tiny", "gate.max_pairs=24", "certify.max_pairs=400", "certify.pairs_per_question=0"],
                     REPO_ROOT, rebase_outputs)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning (stages.train): gate (gate.max_pairs / gate.lambda; betting_budget")
    assert "more than a plausible edit (+5.0 points)" in lines[0]
