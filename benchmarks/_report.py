"""The benchmarks' one report writer: the results as JSON next to the Markdown page, and Markdown tables.

`publish(md_path, text, results)` writes `<name>.md` and `<name>.json` (atomically, folders created); the JSON is
what docs and tests read figures from, the Markdown is rendered from the same values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_json, atomic_write_text

__all__ = ["jsonable", "publish", "results_path", "table"]


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data: numpy scalars/arrays to Python, tuples to lists, non-string keys to strings,
    NaN / infinity to None (JSON has neither), dataclasses to dicts, Paths to strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy scalar or array
        return jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def results_path(md_path: Path) -> Path:
    """Where the results of the page `md_path` go: the same name with `.json`."""
    return Path(md_path).with_suffix(".json")


def publish(md_path: Path, text: str, results: Mapping[str, Any], *, echo: bool = False) -> Path:
    """Write the page `md_path` and its results JSON beside it; return the JSON's path. `echo` prints the page."""
    json_path = results_path(md_path)
    atomic_write_json(json_path, jsonable(results), indent=1)
    atomic_write_text(md_path, text if text.endswith("\n") else text + "\n")
    if echo:
        print(text)
    return json_path


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table's lines: the header, its rule, one line per row (cells as `str`, "|" escaped)."""
    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(row) for row in rows)]
