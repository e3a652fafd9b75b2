"""Tracking URIs are absolute and never leak credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.tracking.store import TrackingConfigError, artifact_location_for, redact_uri, resolve_tracking_uri


def test_default_is_absolute_sqlite_under_project_root(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"


def test_relative_sqlite_is_made_absolute(tmp_path: Path) -> None:
    assert resolve_tracking_uri("sqlite:///runs/m.db", tmp_path) == f"sqlite:///{tmp_path.resolve()}/runs/m.db"
    assert resolve_tracking_uri("sqlite:////abs/m.db", tmp_path) == "sqlite:////abs/m.db"


def test_servers_and_env_pass_through(tmp_path: Path, monkeypatch) -> None:
    pg = "postgresql+psycopg2://mlflow@db.internal:5432/mlflow"
    assert resolve_tracking_uri(pg, tmp_path) == pg
    assert resolve_tracking_uri("http://127.0.0.1:5000", tmp_path) == "http://127.0.0.1:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking:5000")
    assert resolve_tracking_uri(None, tmp_path) == "http://tracking:5000"
    assert resolve_tracking_uri("sqlite:///x.db", tmp_path).endswith("/x.db")  # config wins over env


def test_bare_directory_means_file_store(tmp_path: Path) -> None:
    assert resolve_tracking_uri("mlruns", tmp_path) == (tmp_path.resolve() / "mlruns").as_uri()


def test_bad_sqlite_uri_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(TrackingConfigError, match="tracking.tracking_uri"):
        resolve_tracking_uri("sqlite://m.db", tmp_path)


def test_redact_and_artifact_location(tmp_path: Path) -> None:
    assert redact_uri("postgresql+psycopg2://user:s3cret@host/db") == "postgresql+psycopg2://user:***@host/db"
    assert artifact_location_for(f"sqlite:///{tmp_path}/m.db", tmp_path) == (tmp_path.resolve() / "mlruns").as_uri()
    assert artifact_location_for("http://x:5000", tmp_path) is None


def test_dvc_temp_experiment_copies_use_the_original_project(tmp_path: Path, monkeypatch) -> None:
    from harness.tracking.store import shared_project_root

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    copy = tmp_path / ".dvc" / "tmp" / "exps" / "tmpabc123"
    copy.mkdir(parents=True)
    assert shared_project_root(copy) == tmp_path.resolve()
    assert shared_project_root(tmp_path) == tmp_path.resolve()
    assert resolve_tracking_uri(None, copy) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"


def test_stage_response_cache_is_shared_from_temp_copies(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from harness.config.load import freeze
    from harness.pipeline.entry import share_response_cache

    cfg = freeze(OmegaConf.create({"llm": {"cache_dir": ".cache/llm"}}))
    copy = tmp_path / ".dvc" / "tmp" / "exps" / "tmpabc123"
    copy.mkdir(parents=True)
    assert share_response_cache(cfg, copy).llm.cache_dir == str(tmp_path.resolve() / ".cache/llm")
    assert share_response_cache(cfg, tmp_path) is cfg
