"""Configuration: Hydra tree `conf/`, typed schema, semantic validation, layers, secrets.

Importing this package registers the `ht.*` OmegaConf resolvers, and — in a
process that has already imported Hydra — the `harness_schema` node in
Hydra's ConfigStore (the Hydra plugin in `hydra_plugins/harness_resolvers`
imports this package when Hydra starts, e.g. under DVC's composition).
Importing Hydra costs ~0.3 s of CPU, so a process that only loads a
snapshot (every DVC stage: `load_params`) never imports it; composing
(`load_config`, `stages.train`) calls `register_schema()` first.
"""

import sys

from harness.config.resolvers import register_resolvers

register_resolvers()
if "hydra" in sys.modules:
    from harness.config.hydra_store import register_schema

    register_schema()
