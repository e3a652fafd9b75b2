"""Hydra plugin hook: registers harness's OmegaConf resolvers and config schema.

Hydra imports every module under the `hydra_plugins` namespace package when
it starts (`Plugins.instance()`); DVC's Hydra composition (`dvc exp run`)
does the same with the repository root on `sys.path`. Importing
`harness.config` registers the `ht.*` resolvers and the `harness_schema`
ConfigStore node, so `conf/config.yaml` composes in those processes too.
No `__init__.py` lives in `hydra_plugins/` itself: it must stay a namespace
package shared with installed plugins (hydra_joblib_launcher).

In a `dvc exp run` process this import is the first code of ours that runs
before DVC composes and writes `params.yaml`: a secret in a `-S` value is
refused here (the error names the key, never the value).
"""

import sys

import harness.config  # noqa: F401  (import registers resolvers + schema)
from harness.config.secrets import refuse_dvc_set_params

refuse_dvc_set_params(sys.argv)
