"""Which model answers which role: `llm.models[role]`, else the shared `llm.model`."""

from __future__ import annotations

from typing import Any

from harness.llm.protocol import Role


def model_for_role(llm_cfg: Any, role: Role | str) -> str:
    """`llm_cfg.models[role]` when set (non-empty), else `llm_cfg.model`."""
    role_name = Role(role).value
    models = getattr(llm_cfg, "models", None) or {}
    chosen = models.get(role_name)
    if chosen:
        return str(chosen)
    if not getattr(llm_cfg, "model", None):
        raise ValueError(f"llm.model is empty and llm.models has no entry for role {role_name!r}")
    return str(llm_cfg.model)


def check_role_names(llm_cfg: Any) -> None:
    """Raise ValueError naming `llm.models.<key>` when a key is not a known role."""
    known = {r.value for r in Role}
    for key in (getattr(llm_cfg, "models", None) or {}):
        if key not in known:
            raise ValueError(f"llm.models.{key}: unknown role; expected one of {sorted(known)}")
