"""Numbers as a person reads them: progress lines, MLflow's UI tables, the sweep comparison.

Stored values (metrics.json, MLflow metrics, Parquet tables) keep full precision; what is shown is rounded
to 4 decimals, or to 3 significant digits below 0.001 so a small level (0.00122) keeps its digits.
"""

from __future__ import annotations

import logging
import math
from typing import Any


def rounded(value: float) -> float:
    """`value` rounded for display (NaN, infinities and 0 unchanged)."""
    if not math.isfinite(value) or value == 0:
        return value
    if abs(value) >= 1e-3:
        return round(value, 4)
    return float(f"{value:.3g}")


def readable(value: Any) -> str:
    """`value` as text for a person: floats `rounded` (0.3333, not 0.3333333333333333), anything else str()."""
    if isinstance(value, float):
        return repr(rounded(value))  # the shortest text of the rounded float
    return str(value)


class RoundFloatArgs(logging.Filter):
    """Rounds the float arguments of a log record (``log.info("acc %s", 0.681818...)`` shows 0.6818); format
    specs such as ``%.1f`` still apply, to the rounded float."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(rounded(a) if isinstance(a, float) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: rounded(a) if isinstance(a, float) else a for k, a in record.args.items()}
        return True
