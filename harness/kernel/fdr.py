"""Run-level false-discovery control over the gates of one run: e-LOND (Xu & Ramdas, AISTATS 2024).

A run performs many gates (~70-120); each is a test of H0_t "edit t does
not help" whose evidence is an e-value e_t (the gate's accept e-process at
its stopping time: optional stopping keeps it an e-value). e-LOND gives
test t the level

    alpha_t = alpha * gamma_t * (D_{t-1} + 1)

where D_{t-1} is the number of discoveries (installs) among the first t-1
tests and (gamma_t) is a fixed non-negative sequence with sum <= 1, and
discovers H_t iff e_t >= 1 / alpha_t. This controls the false discovery
rate E[false installs / max(installs, 1)] <= alpha under ARBITRARY
dependence between the e-values (so the gates may share a baseline, a
ladder, an editor). Under the global null (every edit useless) FDR is the
probability of at least one false install.

For the gate this is a per-gate accept threshold fixed BEFORE the gate
runs: lambda_t = ln(1 / alpha_t). The gate's e-process is anytime-valid,
so stopping at the first crossing of lambda_t gives e_t >= 1/alpha_t
exactly when the gate accepts.

gamma: `horizon` H gates share most of the budget evenly, later blocks of H
get geometrically-ish less: gamma_t = 6 / (pi^2 k^2 H) with k = ceil(t / H)
(sum over t is exactly 1). A run that performs about H gates spends ~61 %
of alpha's base budget; a much longer run keeps testing at smaller levels.

The state is three numbers persisted with the training state (resume and
the DVC stages continue the same sequence): tests so far, discoveries so
far, and the base budget spent alpha * sum_{s<=t} gamma_s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Protocol

from harness.kernel.registry import Registry, is_int_at_least, is_number, params_of

__all__ = ["FDR_PROCEDURES", "FdrProcedure", "FdrState", "GateLevel", "elond_gamma", "elond_level", "elond_record", "level_lambda"]

_PI2_6 = math.pi**2 / 6.0


@dataclass(frozen=True)
class FdrState:
    """Where the run is in its e-LOND sequence: `tests` levels handed out, `discoveries` among them,
    `spent` = alpha * sum of gamma over the tests so far (the base budget used, <= alpha)."""

    tests: int = 0
    discoveries: int = 0
    spent: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.tests, int) and isinstance(self.discoveries, int)):
            raise ValueError(f"FdrState: tests and discoveries must be ints, got {self.tests!r}, {self.discoveries!r}")
        if self.tests < 0 or not 0 <= self.discoveries <= self.tests:
            raise ValueError(f"FdrState: need 0 <= discoveries <= tests, got tests={self.tests} discoveries={self.discoveries}")
        if not (math.isfinite(self.spent) and self.spent >= 0.0):
            raise ValueError(f"FdrState: spent must be finite and >= 0, got {self.spent!r}")

    def to_dict(self) -> dict[str, float | int]:
        return {"tests": self.tests, "discoveries": self.discoveries, "spent": self.spent}

    @classmethod
    def from_dict(cls, d: object, where: str = "gate_fdr") -> "FdrState":
        if not isinstance(d, dict) or set(d) != {"tests", "discoveries", "spent"}:
            raise ValueError(f"{where}: expected an object with keys tests, discoveries, spent; got {d!r}")
        tests, disc, spent = d["tests"], d["discoveries"], d["spent"]
        if isinstance(tests, bool) or isinstance(disc, bool) or not isinstance(tests, int) or not isinstance(disc, int):
            raise ValueError(f"{where}: tests and discoveries must be integers, got {tests!r}, {disc!r}")
        if isinstance(spent, bool) or not isinstance(spent, (int, float)):
            raise ValueError(f"{where}.spent: must be a number, got {spent!r}")
        return cls(tests, disc, float(spent))


def _check(alpha: float, horizon: int) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"gate.fdr_level must be in (0, 1), got {alpha!r}")
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ValueError(f"gate.fdr_horizon must be an integer >= 1, got {horizon!r}")


def elond_gamma(t: int, horizon: int) -> float:
    """gamma_t (t >= 1) = 6 / (pi^2 k^2 horizon), k = ceil(t / horizon); sums to exactly 1 over t."""
    if t < 1:
        raise ValueError(f"elond_gamma: t must be >= 1, got {t}")
    _check(0.5, horizon)
    k = (t + horizon - 1) // horizon
    return 1.0 / (_PI2_6 * k * k * horizon)


def elond_level(state: FdrState, alpha: float, horizon: int) -> float:
    """alpha_t of the next test t = state.tests + 1: alpha * gamma_t * (discoveries so far + 1)."""
    _check(alpha, horizon)
    return alpha * elond_gamma(state.tests + 1, horizon) * (state.discoveries + 1)


def level_lambda(level: float) -> float:
    """The gate's accept threshold on log E for a level: ln(1 / level)."""
    if not 0.0 < level <= 1.0:
        raise ValueError(f"level must be in (0, 1], got {level!r}")
    return -math.log(level)


def elond_record(state: FdrState, alpha: float, horizon: int, *, discovered: bool) -> FdrState:
    """The state after test t = state.tests + 1 ended (discovered = the gate accepted at its level)."""
    _check(alpha, horizon)
    t = state.tests + 1
    return FdrState(t, state.discoveries + (1 if discovered else 0), state.spent + alpha * elond_gamma(t, horizon))


@dataclass(frozen=True)
class GateLevel:
    """The level one gate is given: its accept threshold on log E and the report fields that say so."""

    lambda_accept: float
    fields: dict


class FdrProcedure(Protocol):
    """A run-level procedure (`gate.fdr`): the level of the next gate, and the state after it ended."""

    @property
    def name(self) -> str: ...

    @property
    def run_level(self) -> bool:
        """Each gate's level comes from a run-level error budget (strict mode: only e-process crossings may install)."""
        ...

    def level(self, state: FdrState, params) -> GateLevel: ...

    def record(self, state: FdrState, params, *, discovered: bool) -> FdrState: ...

    def report(self, state: FdrState) -> dict:
        """Run-level report fields after a gate (the level spent so far)."""
        ...


@dataclass(frozen=True)
class NoFdr:
    """`gate.fdr=none`: every gate at the fixed level exp(-gate.lambda); the run's state is not advanced."""

    name: str = "none"
    run_level: bool = False

    def level(self, state: FdrState, params) -> GateLevel:
        return GateLevel(params.lambda_accept, {"fdr_level": math.exp(-params.lambda_accept)})

    def record(self, state: FdrState, params, *, discovered: bool) -> FdrState:
        return state

    def report(self, state: FdrState) -> dict:
        return {}


@dataclass(frozen=True)
class ELondParams:
    """The settings e-LOND owns (gate.<field>): the run's target FDR and the horizon of its gamma sequence."""

    fdr_level: float = 0.1  # target false discovery rate over the run's installs
    fdr_horizon: int = 50  # gamma_t = 6 / (pi^2 k^2 H), k = ceil(t / H)

    def check(self) -> list[tuple[str, str]]:
        problems = [] if is_int_at_least(self.fdr_horizon, 1) else [("fdr_horizon", "must be an integer >= 1")]
        if not (is_number(self.fdr_level) and 0 < self.fdr_level < 1):
            problems.append(("fdr_level", "must be in (0, 1)"))
        return problems


@dataclass(frozen=True)
class ELond:
    """`gate.fdr=elond`: the level alpha_t of e-LOND over the run (module doc), threshold ln(1 / alpha_t)."""

    name: str = "elond"
    run_level: bool = True
    params_type: ClassVar[type] = ELondParams

    def level(self, state: FdrState, params) -> GateLevel:
        own = params_of(ELondParams, params)
        level = elond_level(state, own.fdr_level, own.fdr_horizon)
        return GateLevel(level_lambda(level), {"fdr_level": level, "fdr_test": state.tests + 1})

    def record(self, state: FdrState, params, *, discovered: bool) -> FdrState:
        own = params_of(ELondParams, params)
        return elond_record(state, own.fdr_level, own.fdr_horizon, discovered=discovered)

    def report(self, state: FdrState) -> dict:
        return {"fdr_spent": state.spent}


FDR_PROCEDURES: Registry[FdrProcedure] = Registry("gate.fdr", {"none": NoFdr(), "elond": ELond()})
