"""Edit budget schedule (seed 000 §16): how many edits a candidate may apply at a given step."""

from __future__ import annotations


def edit_budget_at(step_index: int, total_steps: int, start: int, end: int) -> int:
    """Linear schedule from `start` (step 0) to `end` (last step), rounded half up, never below 1.

    `step_index` is 0-based over the whole run (epoch * steps_per_epoch + step).
    A run of one step uses `start`. Out-of-range arguments are errors.
    """
    if total_steps < 1:
        raise ValueError(f"edit_budget_at: total_steps must be >= 1, got {total_steps}")
    if not 0 <= step_index < total_steps:
        raise ValueError(f"edit_budget_at: step_index {step_index} outside [0, {total_steps})")
    if start < 1 or end < 1:
        raise ValueError(f"evolve.edit_budget_start/end must be >= 1, got {start}, {end}")
    if total_steps == 1:
        return start
    value = start + (end - start) * step_index / (total_steps - 1)
    return max(1, int(value + 0.5))
