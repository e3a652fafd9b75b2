"""`hydra/launcher=processes`: a sweep's jobs in parallel, each in a fresh process of its own.

joblib's launcher runs jobs in a pool of loky workers: when one worker dies (the OOM killer, ``kill -9``), loky
declares the pool broken and every job of the sweep ends with it. Here a dead job process fails its own job
only: the others run to the end, the launcher returns the dead job as FAILED (Hydra then ends the multirun
with that error), and the job's MLflow run, left RUNNING by the dead process, is ended KILLED by the sweep's
parent (its owner is gone: harness/tracking/live.py).

    python -m stages.train +sweep=gate_lambda hydra/launcher=processes hydra.launcher.n_jobs=2
"""

import logging
import multiprocessing
import signal
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

log = logging.getLogger(__name__)
# (no `from __future__ import annotations`: Hydra's plugin scan loads this module outside sys.modules, where
# dataclasses cannot resolve string annotations)


@dataclass
class ProcessLauncherConf:
    _target_: str = "hydra_plugins.harness_launcher.process_launcher.ProcessLauncher"
    n_jobs: int = 2  # jobs running at once


ConfigStore.instance().store(group="hydra/launcher", name="processes", node=ProcessLauncherConf, provider="harness")


class JobProcessDied(RuntimeError):
    """A sweep job's process ended without returning (killed by a signal, or exited in the middle)."""


def run_pickled_job(payload: bytes) -> bytes:
    """One sweep job as Hydra's launchers run it, from its pickled (index, overrides, context, config, task,
    singletons); its JobReturn pickled (an unpicklable return value: the job's status, its error named). The body of
    a job process here and of a job's Ray task (ray_launcher.py)."""
    import cloudpickle  # (installed with mlflow and loky)
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job
    from omegaconf import open_dict

    index, overrides, hydra_context, config, task_function, singleton_state = cloudpickle.loads(payload)
    setup_globals()
    Singleton.set_state(singleton_state)
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{index}"
        sweep_config.hydra.job.num = index
    HydraConfig.instance().set_config(sweep_config)
    ret = run_job(hydra_context=hydra_context, config=sweep_config, task_function=task_function,
                  job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    try:
        return bytes(cloudpickle.dumps(ret))
    except Exception as error:  # noqa: BLE001  an unpicklable return value: the job's status, its error named
        log.warning("job %d: its return value cannot be sent back (%s)", index, error)
        return bytes(cloudpickle.dumps(JobReturn(
            overrides=ret.overrides, status=ret.status, working_dir=ret.working_dir, task_name=ret.task_name,
            _return_value=None if ret.status == JobStatus.COMPLETED else RuntimeError(str(ret._return_value)))))


def _run_job_in_process(payload: bytes, results: Any) -> None:
    """The body of a job process: the job's JobReturn sent back pickled."""
    results.send_bytes(run_pickled_job(payload))



class ProcessLauncher(Launcher):
    def __init__(self, n_jobs: int = 2) -> None:
        self.n_jobs = max(1, int(n_jobs))
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.task_function, self.hydra_context = config, task_function, hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import cloudpickle  # (installed with mlflow and loky)
        from hydra.core.singleton import Singleton

        setup_globals()
        assert self.config is not None and self.task_function is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info("Launching %d jobs, %d at a time, each in its own process; sweep output dir: %s",
                 len(job_overrides), self.n_jobs, sweep_dir)
        for number, overrides in enumerate(job_overrides):
            log.info("\t#%d : %s", number, " ".join(filter_overrides(overrides)))
        context = multiprocessing.get_context("spawn")  # nothing of this process (threads, database handles) is shared
        state = Singleton.get_state()
        waiting = list(enumerate(job_overrides))
        running: Dict[int, Tuple[Any, Any]] = {}
        results: Dict[int, JobReturn] = {}
        while waiting or running:
            while waiting and len(running) < self.n_jobs:
                number, overrides = waiting.pop(0)
                payload = cloudpickle.dumps((initial_job_idx + number, list(overrides), self.hydra_context, self.config,
                                             self.task_function, state))
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(target=_run_job_in_process, args=(payload, sender),
                                          name=f"hydra-job-{initial_job_idx + number}")
                process.start()
                sender.close()  # the child holds the only writer: EOF once it is gone
                running[number] = (process, receiver)
            ready = wait([receiver for _, receiver in running.values()])
            for number in [n for n, (_, receiver) in running.items() if receiver in ready]:
                process, receiver = running.pop(number)
                try:
                    results[number] = cloudpickle.loads(receiver.recv_bytes())
                except EOFError:  # the process died before sending its result
                    process.join()
                    results[number] = self._died(number + initial_job_idx, job_overrides[number], process.exitcode)
                receiver.close()
                process.join()
        return [results[number] for number in range(len(job_overrides))]

    def _died(self, index: int, overrides: Sequence[str], exitcode: Optional[int]) -> JobReturn:
        how = (f"killed by {signal.Signals(-exitcode).name}" if exitcode is not None and exitcode < 0
               else f"exited with status {exitcode} without a result")
        log.error("job %d (%s): its process was %s; the other jobs go on", index, " ".join(overrides), how)
        return JobReturn(overrides=list(overrides), status=JobStatus.FAILED,
                         _return_value=JobProcessDied(f"sweep job {index} ({' '.join(overrides)}): its process was {how}"))
