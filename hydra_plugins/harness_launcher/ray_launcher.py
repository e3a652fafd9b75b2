"""`hydra/launcher=ray`: a sweep's jobs as tasks on an existing Ray cluster.

    ray start --head --port=6379                              # on the head machine (once)
    ray start --address=HEAD:6379                             # on every other machine
    python -m stages.train +sweep=gate_lambda hydra/launcher=ray hydra.launcher.address=HEAD:6379

The address comes from ``hydra.launcher.address``, else ``RAY_ADDRESS``; ``address: local`` starts a Ray inside
this process instead (one machine, for a try-out). When no cluster answers at the address the sweep ends with one
line and exit 2: a local Ray is never started in its place.

Each job runs in a fresh Ray worker process (``max_calls=1``: nothing of one job's process is reused by the next),
in the project directory of its node (``hydra.launcher.project_dir``, default: the launching process's project
root, which every node must then hold at the same path), and logs its MLflow child run under the sweep's parent
run: the parent's id and the swept keys travel with the task, not through a shared file. The tracking URI must be
one every node reaches (an ``mlflow server``, docs/pipeline.md "Sweeps on a Ray cluster"). No more jobs are in
flight than the cluster has CPU slots, so no job waits in the queue of a node that may die. A job whose node or
worker dies after its MLflow run began is FAILED (``max_retries: 0``, the default: it is not run twice) and that
run, left RUNNING by the dead process, is ended FAILED by this launcher; one that died before its run began is
submitted once more. The other jobs go on.
"""

import logging
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

log = logging.getLogger(__name__)
# (no `from __future__ import annotations`: Hydra's plugin scan loads this module outside sys.modules, where
# dataclasses cannot resolve string annotations)

LOCAL = "local"  # `address: local`: start a Ray in this process, no cluster


@dataclass
class RayLauncherConf:
    _target_: str = "hydra_plugins.harness_launcher.ray_launcher.RayLauncher"
    address: Optional[str] = None  # HOST:PORT of the cluster's head (GCS); None: RAY_ADDRESS; "local": a Ray in-process
    num_cpus: float = 1.0  # CPUs a job holds on its node (the cluster runs as many jobs at once as it has CPUs)
    max_retries: int = 0  # re-runs of a job whose node or worker died; 0: that job is FAILED
    project_dir: Optional[str] = None  # the project's directory on the nodes; None: this process's project root
    connect_timeout_s: float = 5.0  # how long the head's address may take to answer


ConfigStore.instance().store(group="hydra/launcher", name="ray", node=RayLauncherConf, provider="harness")


class RayClusterUnreachable(RuntimeError):
    """No Ray cluster answers at the configured address."""


class JobNodeDied(RuntimeError):
    """A sweep job's Ray worker or node died before the job returned."""


def cluster_address(configured: Optional[str], environ: Optional[Dict[str, str]] = None) -> str:
    """The address to connect to: `configured` (hydra.launcher.address), else RAY_ADDRESS; a clear error without."""
    environ = dict(os.environ) if environ is None else environ
    address = (configured or environ.get("RAY_ADDRESS") or "").strip()
    if not address:
        raise RayClusterUnreachable("hydra/launcher=ray: no cluster address: set hydra.launcher.address=HOST:PORT or "
                                    "RAY_ADDRESS (hydra.launcher.address=local starts a Ray in this process instead)")
    return address


def check_reachable(address: str, timeout_s: float) -> None:
    """Raise RayClusterUnreachable unless something accepts TCP connections at `address` (HOST:PORT; ray:// too):
    ray.init itself would retry for a minute and then print a traceback."""
    host_port = address.split("://", 1)[-1]
    host, sep, port = host_port.rpartition(":")
    if not sep or not port.isdigit():
        raise RayClusterUnreachable(f"hydra.launcher.address (or RAY_ADDRESS) = {address!r}: expected HOST:PORT of the "
                                    "Ray head, e.g. 10.0.0.5:6379, or 'local'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise RayClusterUnreachable(f"hydra/launcher=ray: no Ray cluster answers at {address} ({error.strerror or error}); "
                                    "start one (`ray start --head`) or fix hydra.launcher.address / RAY_ADDRESS") from None


def check_command_line(argv: Sequence[str], environ: Optional[Dict[str, str]] = None) -> None:
    """Before Hydra starts a sweep (and its callback opens the MLflow parent run): raise RayClusterUnreachable when
    the command line selects `hydra/launcher=ray` and no cluster answers at its address (`local` is not checked)."""
    if "hydra/launcher=ray" not in argv:
        return
    configured = next((a.split("=", 1)[1] for a in argv if a.startswith("hydra.launcher.address=")), None)
    if (configured or (environ if environ is not None else os.environ).get("RAY_ADDRESS", "")).strip() == LOCAL:
        return
    timeout = next((float(a.split("=", 1)[1]) for a in argv if a.startswith("hydra.launcher.connect_timeout_s=")),
                   RayLauncherConf.connect_timeout_s)
    check_reachable(cluster_address(configured, environ), timeout)


def _run_job_on_node(payload: bytes, project_dir: str, environ: Dict[str, str]) -> bytes:
    """The body of a job's Ray task: the job as Hydra's launchers run it, in `project_dir`; its JobReturn pickled."""
    import os
    import sys

    os.chdir(project_dir)  # config paths are relative to the project root
    if project_dir not in sys.path:
        sys.path.insert(0, project_dir)  # the project's code, before any installed copy
    os.environ.update(environ)  # the sweep's parent run and swept keys (a fresh worker: max_calls=1)
    from hydra_plugins.harness_launcher.process_launcher import run_pickled_job

    return run_pickled_job(payload)


class RayLauncher(Launcher):
    def __init__(self, address: Optional[str] = None, num_cpus: float = 1.0, max_retries: int = 0,
                 project_dir: Optional[str] = None, connect_timeout_s: float = 5.0) -> None:
        self.address, self.num_cpus, self.max_retries = address, float(num_cpus), max(0, int(max_retries))
        self.project_dir, self.connect_timeout_s = project_dir, float(connect_timeout_s)
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.task_function, self.hydra_context = config, task_function, hydra_context

    def _connect(self) -> None:
        import ray

        if ray.is_initialized():
            return
        address = (self.address or os.environ.get("RAY_ADDRESS") or "").strip()
        if address == LOCAL:
            ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True)
            return
        try:
            address = cluster_address(self.address)
            check_reachable(address, self.connect_timeout_s)
        except RayClusterUnreachable as error:
            print(f"stages.train: {error}", file=sys.stderr)  # one line, as the entry's other errors
            raise SystemExit(2) from None
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=True)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import cloudpickle
        from hydra.core.singleton import Singleton

        setup_globals()
        assert self.config is not None and self.task_function is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        self._connect()
        import ray

        from harness.tracking.store import PARENT_RUN_ENV, SWEPT_KEYS_ENV

        project_dir = str(Path(self.project_dir or Path.cwd()).resolve())
        environ = {name: os.environ[name] for name in (PARENT_RUN_ENV, SWEPT_KEYS_ENV) if name in os.environ}
        log.info("Launching %d jobs on the Ray cluster (%s CPUs, %d nodes alive); sweep output dir: %s",
                 len(job_overrides), ray.cluster_resources().get("CPU", 0),
                 sum(1 for node in ray.nodes() if node.get("Alive")), self.config.hydra.sweep.dir)
        for number, overrides in enumerate(job_overrides):
            log.info("\t#%d : %s", number, " ".join(filter_overrides(overrides)))
        remote = ray.remote(num_cpus=self.num_cpus, max_calls=1, max_retries=self.max_retries,
                            retry_exceptions=False)(_run_job_on_node)
        state = Singleton.get_state()

        def submit(number: int) -> Any:
            payload = cloudpickle.dumps((initial_job_idx + number, list(job_overrides[number]), self.hydra_context,
                                         self.config, self.task_function, state))
            return remote.remote(payload, project_dir, environ)

        # no more jobs in flight than the cluster has slots: a job waiting in a node's queue when the node dies would
        # fail without having started
        waiting = list(range(len(job_overrides)))
        running: Dict[Any, int] = {}
        results: Dict[int, JobReturn] = {}
        resubmitted: set = set()
        while waiting or running:
            slots = max(1, int(ray.cluster_resources().get("CPU", 0) // max(self.num_cpus, 1e-9)))
            while waiting and len(running) < slots:
                number = waiting.pop(0)
                running[submit(number)] = number
            ready, _ = ray.wait(list(running), num_returns=1)
            number = running.pop(ready[0])
            try:
                results[number] = cloudpickle.loads(ray.get(ready[0]))
            except ray.exceptions.RayError as error:  # its worker or node died (or the task could not start there)
                if not self._fail_orphaned_run(initial_job_idx + number, job_overrides[number]) and number not in resubmitted:
                    resubmitted.add(number)  # it died before its MLflow run began: once more, on a live node
                    log.warning("job %d: its Ray worker died before the job began (%s); submitted again",
                                initial_job_idx + number, _first_line(error))
                    running[submit(number)] = number
                    continue
                results[number] = self._died(initial_job_idx + number, job_overrides[number], error)
        return [results[number] for number in range(len(job_overrides))]

    def _died(self, index: int, overrides: Sequence[str], error: BaseException) -> JobReturn:
        why = _first_line(error)
        log.error("job %d (%s): its Ray worker died (%s); the other jobs go on", index, " ".join(overrides), why)
        return JobReturn(overrides=list(overrides), status=JobStatus.FAILED,
                         _return_value=JobNodeDied(f"sweep job {index} ({' '.join(overrides)}): its Ray worker died: {why}"))

    def _fail_orphaned_run(self, index: int, overrides: Sequence[str]) -> bool:
        """End FAILED the MLflow child run the dead job left RUNNING (found by its job directory under the sweep's
        parent run): its process is on another node, which the parent's own clean-up cannot see. False when the
        job has no child run (it died before its training began); True when it has one, or without tracking."""
        from harness.tracking.store import PARENT_RUN_ENV

        parent = os.environ.get(PARENT_RUN_ENV)
        assert self.config is not None and self.hydra_context is not None
        tracking = self.config.get("tracking")
        if not parent or tracking is None or not tracking.get("enabled", False):
            return True  # nothing tells whether it began: not run twice
        from mlflow.tracking import MlflowClient
        from omegaconf import open_dict

        from harness.tracking.hydra_callback import RUN_DIR_TAG
        from harness.tracking.store import resolve_tracking_uri

        sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.num = index  # the job's subdir (`${hydra.job.num}` by default), as on its node
        job_dir = (Path(str(sweep_config.hydra.sweep.dir)) / str(sweep_config.hydra.sweep.subdir)).as_posix()
        client = MlflowClient(tracking_uri=resolve_tracking_uri(tracking.get("tracking_uri"), Path.cwd()))
        experiment = client.get_experiment_by_name(str(tracking.get("experiment")))
        if experiment is None:
            return False
        query = f"tags.`mlflow.parentRunId` = '{parent}'"
        began = False
        for run in client.search_runs([experiment.experiment_id], query, max_results=5000):
            run_dir = Path(run.data.tags.get(RUN_DIR_TAG, "")).as_posix()
            if run_dir == job_dir or run_dir.endswith("/" + job_dir):  # absolute on its node, relative here
                began = True
                if run.info.status == "RUNNING":
                    client.set_terminated(run.info.run_id, status="FAILED")
                    log.info("MLflow run %s ended FAILED: its job's Ray worker died", run.info.run_id)
        return began


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__

