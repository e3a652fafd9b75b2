"""Configuration: Hydra tree `conf/`, typed schema, semantic validation, layers, secrets.

Importing this package registers the `ht.*` OmegaConf resolvers and the
`harness_schema` node in Hydra's ConfigStore (the Hydra plugin in
`hydra_plugins/harness_resolvers` does the same for processes that compose
`conf/` without importing harness first, e.g. DVC).
"""

from harness.config.hydra_store import register_schema
from harness.config.resolvers import register_resolvers

register_resolvers()
register_schema()
