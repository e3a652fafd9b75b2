"""A local Ray cluster of two nodes on 127.0.0.1 for tests and benchmarks: a head and one extra worker node, each
started by `ray start --block` in a process group of its own (so one node can be SIGKILLed whole, and every Ray
process of ours is stopped at the end without `ray stop`, which would stop every Ray cluster on the machine).

    with local_cluster(tmp_path) as cluster:
        ... hydra.launcher.address=cluster.address ...
        cluster.kill_worker()          # the worker node's raylet and its job processes, SIGKILL
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness.llm.local_server import free_port

BIN = Path(sys.executable).parent
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # the smallest store Ray accepts is ~75 MB


def cluster_env(token_file: Path) -> dict[str, str]:
    """What a node or a driver of the cluster needs in its environment: Ray's token authentication (on by default
    for `ray start` since Ray 2.5x) with this cluster's own token file, not the user's ~/.ray/auth_token."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file), "RAY_USAGE_STATS_ENABLED": "0"}


def _node_env(token_file: Path) -> dict[str, str]:
    """The nodes' environment: this venv first; no RAY_ADDRESS of the shell."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_", "HARNESS_", "HT__"))}
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    out.update(cluster_env(token_file))
    return out


@dataclass
class LocalCluster:
    address: str
    token_file: Path
    head: subprocess.Popen
    worker: subprocess.Popen
    logs: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    def kill_worker(self) -> None:
        """SIGKILL the worker node's whole process group (`ray start`, its raylet, its job processes)."""
        _kill_group(self.worker, signal.SIGKILL)

    @property
    def env(self) -> dict[str, str]:
        """The environment entries a driver (`stages.train ... hydra/launcher=ray`) needs to connect."""
        return {"RAY_ADDRESS": self.address, **cluster_env(self.token_file)}


_COUNT_NODES = ("import sys, ray; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                "print(sum(1 for n in ray.nodes() if n['Alive']))")


def _kill_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def _start(args: list[str], log: Path, token_file: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen([str(BIN / "ray"), "start", "--block", *args], stdout=out, stderr=subprocess.STDOUT,
                                env=_node_env(token_file), start_new_session=True)


def _distinct_free_ports(n: int) -> list[int]:
    """n free ports, all different: free_port() releases its port, so two calls can return the same one (ray refuses
    a node whose components share a port: seen in CI as 'node_manager is trying to use a port number ...')."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _node_args() -> list[str]:
    names = ("node-manager", "object-manager", "dashboard-agent-listen", "dashboard-agent-grpc", "metrics-export",
             "runtime-env-agent")
    return ["--num-cpus=1", "--num-gpus=0", f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--node-ip-address=127.0.0.1", "--disable-usage-stats",
            *(f"--{name}-port={port}" for name, port in zip(names, _distinct_free_ports(len(names))))]


def _wait_for_nodes(address: str, count: int, processes: list[subprocess.Popen], logs: Path, token_file: Path,
                    timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    alive = -1
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"`ray start` exited with {process.returncode}; logs: {logs}")
        host, port = address.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
        except OSError:  # the head's GCS is not listening yet
            time.sleep(0.5)
            continue
        try:
            done = subprocess.run([str(BIN / "python"), "-c", _COUNT_NODES, address], env=_node_env(token_file),
                                  capture_output=True, text=True, timeout=60, check=False)
        except subprocess.TimeoutExpired:
            continue
        alive = int(done.stdout.strip()) if done.stdout.strip().isdigit() else -1
        if alive >= count:
            return
        time.sleep(1.0)
    raise RuntimeError(f"the local Ray cluster at {address} has {alive} of {count} nodes after {timeout_s:.0f} s; logs: {logs}")


@contextmanager
def local_cluster(base: Path, timeout_s: float = 120.0) -> Iterator[LocalCluster]:
    """A head and one worker node on 127.0.0.1, 1 CPU each, dashboards off, temp dirs under `base`; every process
    of both nodes is stopped on exit, also after a failure."""
    base.mkdir(parents=True, exist_ok=True)
    logs = base / "logs"
    logs.mkdir(exist_ok=True)
    port = free_port()
    address = f"127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []
    token_file = base / "auth_token"
    token_file.write_text(secrets.token_hex(32))
    token_file.chmod(0o600)
    try:
        processes.append(_start(["--head", f"--port={port}", "--include-dashboard=false",
                                 f"--temp-dir={base / 'head'}",
                                 *_node_args()], logs / "head.log", token_file))
        _wait_for_nodes(address, 1, processes, logs, token_file, timeout_s)
        processes.append(_start([f"--address={address}", f"--temp-dir={base / 'worker'}", *_node_args()],
                                logs / "worker.log", token_file))
        _wait_for_nodes(address, 2, processes, logs, token_file, timeout_s)
        yield LocalCluster(address=address, token_file=token_file, head=processes[0], worker=processes[1], logs=logs, processes=processes)
    finally:
        for process in reversed(processes):
            _kill_group(process, signal.SIGTERM)
        for process in reversed(processes):
            try:
                process.wait(timeout=5)  # (a node drains for up to 30 s on SIGTERM: not worth waiting for here)
            except subprocess.TimeoutExpired:
                pass
            _kill_group(process, signal.SIGKILL)  # whatever of the group is left (workers, raylet)
            process.wait(timeout=20)
