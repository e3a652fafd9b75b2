"""StageContext: what every stage function gets (frozen config, project root, lazy services).

`make_context(cfg, root)` is cheap: the benchmark adapter, the questions and
the LLM provider (a CachedProvider over `llm.cache_dir`, shared by every
stage and process) are built on first use. Tests and benchmarks may inject
a provider or a benchmark (e.g. a wrapper that counts calls or a trade-off
editor); the loop itself never sees an oracle.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from harness.kernel.types import GateParams, gate_params_from_config
from harness.llm.protocol import LLMProvider
from harness.loop.state import StatePaths
from harness.questions import Question

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from harness.bench.protocol import BenchmarkAdapter
    from harness.config.key_view import KeyView
    from harness.llm.cache import ResponseCache
    from harness.llm.metering import StageSpend

progress = logging.getLogger("harness.progress")


def gate_params(gate_cfg: Any) -> GateParams:
    """GateParams from the `gate` config group (kernel `gate_params_from_config`)."""
    return gate_params_from_config(gate_cfg)


@dataclass(frozen=True)
class InfraLimits:
    """The fields of GateParams that `guard_infra_failures` reads."""

    infra_max_ratio: float
    infra_min_denominator: int


class Throttle:
    """At most one progress line every `every_s` seconds per stage."""

    def __init__(self, every_s: float = 5.0):
        self.every_s = every_s
        self._last = 0.0

    def info(self, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            progress.info(msg, *args)


@dataclass
class StageContext:
    cfg: DictConfig | KeyView  # a pipeline stage sees only its declared keys (harness/config/key_view.py)
    root: Path
    llm_override: Optional[LLMProvider] = None
    bench_override: Optional[BenchmarkAdapter] = None
    _llm: Optional[LLMProvider] = field(default=None, repr=False)
    _bench: Optional[BenchmarkAdapter] = field(default=None, repr=False)
    _questions: Optional[dict[str, Question]] = field(default=None, repr=False)
    _cache: Optional[ResponseCache] = field(default=None, repr=False)

    @property
    def run_name(self) -> str:
        return str(self.cfg.train.run_name)

    @property
    def paths(self) -> StatePaths:
        return StatePaths(self.root, str(self.cfg.train.state_dir), str(self.cfg.benchmark.questions_path), str(self.cfg.pools.path))

    def config_dict(self) -> dict[str, Any]:
        """The whole resolved config as plain data (what a checkpoint fingerprints; also under a stage's KeyView)."""
        from omegaconf import OmegaConf

        from harness.config.key_view import KeyView

        cfg = self.cfg
        if isinstance(cfg, KeyView):
            return cfg.resume_metadata()
        return OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)  # type: ignore[return-value]

    @property
    def gate(self) -> GateParams:
        return gate_params(self.cfg.gate)

    @property
    def infra_limits(self) -> InfraLimits:
        """The INFRA guard's two keys only: a step rollout reads no other gate key (so gate.* changes keep it)."""
        return InfraLimits(float(self.cfg.gate.infra_max_ratio), int(self.cfg.gate.infra_min_denominator))

    def bench(self) -> BenchmarkAdapter:
        """The BenchmarkAdapter of `benchmark.name` (built once)."""
        if self.bench_override is not None:
            return self.bench_override
        if self._bench is None:
            from harness.compose import build_benchmark

            self._bench = build_benchmark(self.cfg.benchmark, self.root)
        return self._bench

    def llm(self) -> LLMProvider:
        """The configured provider behind the shared response cache (built once; an injected one is used as is),
        metered: every reply's cost is counted per role until the stage takes it (`take_spend`)."""
        if self._llm is None:
            from harness.llm.metering import MeteredProvider

            if self.llm_override is not None:
                self._llm = MeteredProvider(self.llm_override)
            else:
                from harness.compose import build_provider
                from harness.llm.cache import ResponseCache

                cache_dir = Path(str(self.cfg.llm.cache_dir))
                self._cache = ResponseCache(cache_dir if cache_dir.is_absolute() else self.root / cache_dir)
                world = getattr(self.bench(), "world", None) if str(self.cfg.llm.provider) == "sim" else None
                self._llm = MeteredProvider(build_provider(self.cfg.llm, world=world, cache=self._cache))
        return self._llm

    def meta_prompts(self) -> Any:
        """The meta roles' system messages (harness/evolution/prompts.py): the package templates, or
        `evolve.prompts_dir` (relative to the project root), with `benchmark.domain` as $domain."""
        from harness.evolution.prompts import MetaPrompts

        directory = self.cfg.evolve.prompts_dir
        if directory is not None and not Path(str(directory)).is_absolute():
            directory = self.root / str(directory)
        return MetaPrompts.load(str(self.cfg.benchmark.domain), directory)

    def take_spend(self) -> StageSpend:
        """What the LLM calls since the previous `take_spend` cost, per role (stages run one after another on
        a context, so this is the finishing stage's spend); empty when the stage made no call."""
        from harness.llm.metering import MeteredProvider, StageSpend

        return self._llm.take() if isinstance(self._llm, MeteredProvider) else StageSpend()

    def questions(self, path: Optional[Path] = None) -> dict[str, Question]:
        """qid -> Question from the prepared questions file (loaded once)."""
        if self._questions is None:
            from harness.questions import read_questions

            qs = read_questions(path or self.root / str(self.cfg.benchmark.questions_path))
            self._questions = {q.qid: q for q in qs}
        return self._questions

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None
            self._llm = None


def make_context(cfg: DictConfig | KeyView, root: str | Path, *, llm: Optional[LLMProvider] = None,
                 bench: Optional[BenchmarkAdapter] = None) -> StageContext:
    """The context of one stage process (or of a whole in-process training run)."""
    return StageContext(cfg=cfg, root=Path(root).resolve(), llm_override=llm, bench_override=bench)


def by_task_type(qids: Sequence[str], questions: Mapping[str, Question]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for q in qids:
        out.setdefault(questions[q].task_type, []).append(q)
    return out
