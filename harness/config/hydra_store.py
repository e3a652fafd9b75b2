"""Registration of the typed schema in Hydra's ConfigStore.

`conf/config.yaml` lists `harness_schema` first in its defaults, so every
group file is merged into the dataclass schema of harness/config/schema.py:
a wrong type or an unknown key fails at compose time naming the full key.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from harness.config import schema

SCHEMA_NAME = "harness_schema"


def register_schema() -> None:
    """Store the root schema under `harness_schema` (idempotent: re-storing replaces it), its gate section composed
    anew from the strategies registered now."""
    schema.GateConfig = schema.gate_config_class()  # RootConfig.gate names the module's GateConfig
    ConfigStore.instance().store(name=SCHEMA_NAME, node=schema.RootConfig)
