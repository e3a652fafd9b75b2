"""The live MLflow run of a training run: created at its first loop stage, resumed, ended FAILED or KILLED.

Every DVC stage runs `StageTracking` (harness/pipeline/entry.py), so this
module's import closure is part of every stage's code fingerprint: it stays
small (no report, no plots, no collection). Epoch logging and the final
report are in harness/pipeline/tracking_run.py, used only by the stages that
log (``slow@e``, ``report``) and by ``stages.train``.

- `TrainingTracker.start` creates the run, RUNNING, with the settings as
  params, locations as tags, source, git commit and user set, and records its
  id in the pipeline state (`harness.tracking.live`); later stages and resumes
  find it there (a FAILED or KILLED run of the same settings is set RUNNING
  again, never duplicated).
- `TrainingTracker.mark` ends it FAILED (a stage raised) or KILLED (SIGINT or
  SIGTERM).
- `TrainingTracker.finish` logs what only the finished run has and ends it
  FINISHED; logging the same finished run again changes nothing.

Only settings are params (`training_params`): output locations and run
directories are tags, so comparing a sweep's children shows exactly what was
swept (docs/tracking.md).
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.pipeline.run_lock import RunDirInUse, run_dir_lock
from harness.tracking.live import (
    FAILED,
    FINISHED,
    KILLED,
    NONCE_TAG,
    PENDING,
    RUNNING,
    LiveRun,
    live_run_path,
    owner_alive,
    read_live_run,
    run_owner,
    settings_key,
    write_live_run,
)

LIVE_LOCK_NAME = ".mlflow_run.lock"


class LiveRunInUse(RunDirInUse):
    """Another live process owns the unfinished MLflow run of this training state (one line, exit 2)."""

log = logging.getLogger("harness.progress")

# Config keys that say where a run's files are, not how it trains: tags, never params.
LOCATION_KEYS = {
    "train.state_dir": "harness.state_dir",
    "benchmark.questions_path": "harness.questions_path",
    "pools.path": "harness.pools_path",
    "llm.cache_dir": "harness.llm_cache_dir",
    "benchmark.source": "harness.benchmark_source",
    "benchmark.harness_source": "harness.harness_source",
}
# Not settings of the training run: where it is logged (tracking.*), Harness² over tasks (improve.*: its own
# runs, in its own experiment), console verbosity, and the schedule lists derived from train.epochs/steps.
NOT_SETTINGS = ("tracking.", "improve.", "quiet", "train.schedule", "train.epoch_schedule")
# The DVC stages of the training loop: the first one that runs starts (or resumes) the live run.
LOOP_STAGES = ("batches", "rollout", "evolve", "gate", "slow", "certify", "holdout")
SOURCE_NAMES = {"dvc": "dvc repro (stages.*)", "train": "python -m stages.train"}


def config_params(cfg: Any) -> dict[str, str]:
    """The resolved config as flat strings, secrets redacted (every key; `training_params` picks the settings)."""
    from harness.config.key_view import resolved
    from harness.config.secrets import redact, secret_values
    from harness.tracking.store import redact_uri

    data = redact(resolved(cfg), secret_values(cfg.llm))
    flat: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        else:
            flat[prefix] = "null" if value is None else str(value)

    walk("", data)
    if flat.get("tracking.tracking_uri") not in (None, "null"):
        flat["tracking.tracking_uri"] = redact_uri(flat["tracking.tracking_uri"])
    return flat


def training_params(cfg: Any) -> dict[str, str]:
    """The run's MLflow params: its settings only (no locations, no tracking or improve keys)."""
    return {k: v for k, v in config_params(cfg).items()
            if k not in LOCATION_KEYS and not k.startswith(NOT_SETTINGS) and k not in NOT_SETTINGS}


def location_tags(cfg: Any, run_dir: Path | None = None) -> dict[str, str]:
    flat = config_params(cfg)
    tags = {tag: flat[key] for key, tag in LOCATION_KEYS.items() if key in flat}
    if run_dir is not None:
        tags["harness.run_dir"] = str(run_dir)
    return tags


def default_run_name(cfg: Any) -> str:
    """``train.run_name``, plus the DVC experiment's name under `dvc exp run` (DVC_EXP_NAME)."""
    name = str(cfg.train.run_name)
    exp = os.environ.get("DVC_EXP_NAME")
    return f"{name} {exp}" if exp else name


class TrainingTracker:
    """The live MLflow run of one training run (project `root`, pipeline-state directory `directory`)."""

    def __init__(self, cfg: Any, root: Path, directory: Path, *, run_name: str, source: str,
                 parent_run_id: str | None = None, run_dir: Path | None = None) -> None:
        from harness.tracking.store import redact_uri, resolve_tracking_uri

        self.cfg, self.root, self.directory = cfg, Path(root), Path(directory)
        self.uri = resolve_tracking_uri(cfg.tracking.tracking_uri, self.root)
        self.uri_key = redact_uri(self.uri)
        self.experiment = str(cfg.tracking.experiment)
        self.params = training_params(cfg)
        self.key = settings_key(self.params)
        self.run_name, self.source, self.parent_run_id, self.run_dir = run_name, source, parent_run_id, run_dir
        self.owner = run_owner()

    def _mine(self) -> LiveRun | None:
        ref = read_live_run(self.directory)
        return ref if ref is not None and ref.same_run(self.uri_key, self.experiment, self.key) else None

    def _record(self, run_id: str, status: str) -> None:
        owner = self.owner
        write_live_run(self.directory, LiveRun(run_id, self.uri_key, self.experiment, self.key, status, self.run_name,
                                               str(owner.pid), owner.host, owner.started))

    def _refuse_a_live_owner(self, ref: LiveRun | None) -> None:
        """Raise LiveRunInUse when another live process owns the unfinished run of this state directory."""
        owner = None if ref is None or ref.status not in (RUNNING, PENDING) else ref.owner
        if owner is None or owner == self.owner:
            return
        alive = owner_alive(owner)
        if alive is False:
            return
        raise LiveRunInUse(
            f"the training state of {self.directory} ({live_run_path(self.directory)}) is being trained by "
            f"{owner.describe()}{'' if alive else ' (another host: cannot tell whether it still runs)'}; two "
            "processes on one state would write into one MLflow run and one state; wait for it to end, or give this "
            "run another train.state_dir" + ("" if alive else f" (or delete {live_run_path(self.directory)} once "
                                             "that process is gone)"))

    def tags(self) -> dict[str, str]:
        from harness.tracking.provenance import current_user, git_commit, git_dirty

        tags = {"harness.kind": "training", "harness.benchmark": str(self.cfg.benchmark.name),
                "harness.run_name": str(self.cfg.train.run_name), "harness.tracking_uri": self.uri_key,
                "mlflow.source.name": SOURCE_NAMES.get(self.source, self.source), "mlflow.source.type": "LOCAL",
                **location_tags(self.cfg, self.run_dir)}
        user = current_user()
        if user:
            tags["mlflow.user"] = user
        commit = git_commit(self.root)
        if commit:
            tags["mlflow.source.git.commit"] = commit
            tags["harness.git_dirty"] = str(git_dirty(self.root))
        return tags

    def start(self) -> str:
        """The run to log into: this settings' RUNNING run of this owner (no MLflow import), its RUNNING run of a
        dead owner, or its FAILED or KILLED run, taken over and set RUNNING (a resume), or a new run (first start,
        other settings, or a finished run re-executed). Raises LiveRunInUse when another live process owns the
        state's unfinished run. A new or resumed run first ends KILLED the RUNNING runs of dead owners on this
        host (`reap_dead_runs`): a killed run re-run in another directory never sees its old record."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with run_dir_lock(self.directory, LIVE_LOCK_NAME, wait=True):  # one process at a time reads and records
            return self._start()

    def _start(self) -> str:
        ref = read_live_run(self.directory)
        self._refuse_a_live_owner(ref)
        mine = ref if ref is not None and ref.same_run(self.uri_key, self.experiment, self.key) else None
        if mine is not None and mine.status == RUNNING and mine.owner == self.owner:
            return mine.run_id
        from harness.tracking.mlflow_log import (
            complete_params,
            find_tagged,
            open_run,
            reap_dead_runs,
            run_status,
            set_run_status,
            set_tags,
        )
        from harness.tracking.store import init_tracking_db

        # the store complete before any MLflow client opens it: a client on a missing SQLite file would create and
        # migrate it in place (a kill there leaves it half-migrated), and MLflow keeps its engine on that file
        init_tracking_db(self.uri)
        owner_tags = self.owner.tags()
        if mine is not None and mine.status in (RUNNING, FAILED, KILLED) and run_status(self.uri, mine.run_id) is not None:
            set_tags(self.uri, mine.run_id, owner_tags)  # before RUNNING: a reaper never sees it with the old owner
            self._reparent(mine.run_id)
            set_run_status(self.uri, mine.run_id, RUNNING)
            self._record(mine.run_id, RUNNING)
            log.info("[mlflow] resumed run %s (%s, was %s)", mine.run_id, mine.run_name,
                     mine.status if mine.status != RUNNING else "left RUNNING by a process that is gone")
            return mine.run_id
        if mine is not None and mine.status == PENDING:  # killed between creating the run and recording it
            found = find_tagged(self.uri, self.experiment, NONCE_TAG, mine.run_id)
            if found is not None:
                complete_params(self.uri, found, self.params)  # the kill may have cut the params short
                set_tags(self.uri, found, owner_tags)
                self._reparent(found)
                set_run_status(self.uri, found, RUNNING)
                self._record(found, RUNNING)
                log.info("[mlflow] resumed run %s (%s, created by a process killed before it recorded it)",
                         found, mine.run_name)
                return found
        if ref is not None and mine is None and ref.status == RUNNING and ref.tracking_uri == self.uri_key:
            if run_status(self.uri, ref.run_id) == RUNNING:  # superseded by other settings: it will never end
                set_run_status(self.uri, ref.run_id, KILLED)
        try:
            for run_id in reap_dead_runs(self.uri, self.experiment):
                log.info("[mlflow] run %s ended KILLED: its process is gone", run_id)
        except Exception as error:  # noqa: BLE001  a store that cannot be searched fails below, naming itself
            log.warning("[mlflow] could not look for runs of dead processes: %s", error)
        nonce = uuid.uuid4().hex
        self._record(nonce, PENDING)
        run_id = open_run(tracking_uri=self.uri, experiment=self.experiment, project_root=self.root,
                          run_name=self.run_name, params=self.params,
                          tags={**self.tags(), **owner_tags, NONCE_TAG: nonce}, parent_run_id=self.parent_run_id)
        self._record(run_id, RUNNING)
        log.info("[mlflow] run %s (%s) started in experiment %s", run_id, self.run_name, self.experiment)
        return run_id

    def _reparent(self, run_id: str) -> None:
        """A resumed sweep job's run belongs to the sweep's current parent run (a re-run sweep re-attaches its
        children, never leaving them under a parent that will not end)."""
        if self.parent_run_id is None:
            return
        from harness.tracking.mlflow_log import PARENT_TAG, run_tag, set_tags

        if run_tag(self.uri, run_id, PARENT_TAG) != self.parent_run_id:
            set_tags(self.uri, run_id, {PARENT_TAG: self.parent_run_id})

    def mark(self, status: str) -> None:
        """End this settings' unfinished run with `status` (FAILED, KILLED); nothing when there is none."""
        mine = self._mine()
        if mine is None or mine.status in (FINISHED, status):
            return
        from harness.tracking.mlflow_log import find_tagged, run_status, set_run_status

        if mine.status == PENDING:  # the run may exist: find it by its nonce
            found = find_tagged(self.uri, self.experiment, NONCE_TAG, mine.run_id)
            if found is None:
                return  # never created: nothing to end, the next start creates it
            mine = replace(mine, run_id=found)

        if run_status(self.uri, mine.run_id) is not None:
            set_run_status(self.uri, mine.run_id, status)
        self._record(mine.run_id, status)
        log.info("[mlflow] run %s ended %s", mine.run_id, status)

    def finish(self, run: Any, *, timestamp_ms: int, epoch_times_ms: dict[int, int]) -> str:
        """Log the finished run (`TrackedRun`) and end it FINISHED; an already logged identical run is returned."""
        from harness.tracking.mlflow_log import find_finished, finish_run

        mine = self._mine()
        if mine is None or mine.status == FINISHED:
            found = find_finished(self.uri, self.experiment, run.identity)
            if found is not None:
                if mine is None or mine.run_id != found:
                    self._record(found, FINISHED)
                self._reparent(found)  # a finished job of a re-run sweep belongs to the sweep's current parent
                return found
        run_id = self.start()
        try:
            finish_run(self.uri, run_id, run, timestamp_ms=timestamp_ms, epoch_times_ms=epoch_times_ms)
        except BaseException:
            self._record(run_id, FAILED)
            raise
        self._record(run_id, FINISHED)
        return run_id


def tracker_for(cfg: Any, project_root: Path, telemetry: Path, *, run_name: str | None = None, source: str = "dvc",
                parent_run_id: str | None = None, run_dir: Path | None = None) -> TrainingTracker | None:
    """The tracker of the run laid out by `cfg` (None when ``tracking.enabled`` is false)."""
    if not bool(cfg.tracking.enabled):
        return None
    return TrainingTracker(cfg, project_root, telemetry, run_name=run_name or default_run_name(cfg), source=source,
                           parent_run_id=parent_run_id, run_dir=run_dir)


class StageTracking:
    """One DVC stage's part in the live run (a no-op unless ``tracking.enabled``): a loop stage starts or
    resumes it, a stage that raises ends it FAILED and one interrupted (SIGINT, or SIGTERM, which then raises)
    ends it KILLED. ``slow@e`` logs its epoch and the report finishes the run through tracking_run.py."""

    def __init__(self, stage: str, cfg: Any, project_root: Path) -> None:
        from harness.loop.telemetry import telemetry_dir

        self.kind = stage.partition("@")[0]
        self.tracker = (tracker_for(cfg, project_root, telemetry_dir(project_root, str(cfg.train.state_dir)))
                        if self.kind in (*LOOP_STAGES, "report") else None)
        self._signals: Any = None

    def __enter__(self) -> "StageTracking":
        if self.tracker is not None:
            from harness.tracking.live import sigterm_raises

            if self.kind in LOOP_STAGES:
                self.tracker.start()
            self._signals = sigterm_raises()
            self._signals.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self.tracker is None or exc_type is None:
                return
            mark_interrupted(self.tracker, exc)  # before the handler is restored: a second SIGTERM is ignored
        finally:
            if self._signals is not None:
                self._signals.__exit__(None, None, None)
                self._signals = None
        from harness.tracking.live import RunKilled

        if issubclass(exc_type, RunKilled):
            raise SystemExit(143) from exc  # 128 + SIGTERM, as if the signal had ended the process


def mark_interrupted(tracker: TrainingTracker, error: BaseException) -> None:
    """End the run KILLED (Ctrl-C, SIGTERM) or FAILED (anything else) after `error`; a tracking error while doing
    so is logged as a warning, since the training error is what the user must see."""
    from harness.tracking.live import RunKilled

    status = KILLED if isinstance(error, (KeyboardInterrupt, RunKilled)) else FAILED
    try:
        tracker.mark(status)
    except Exception as mark_error:  # noqa: BLE001
        log.warning("[mlflow] could not mark the run %s: %s", status, mark_error)
