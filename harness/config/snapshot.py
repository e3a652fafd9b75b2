"""Write or check `params.yaml`: the composed, resolved snapshot of `conf/` that DVC tracks.

    python -m harness.config.snapshot [overrides...]            # write params.yaml (atomic)
    python -m harness.config.snapshot --check [overrides...]    # exit 1 when params.yaml is stale

From any directory inside the project: conf/ and params.yaml are those of the
project root (the nearest directory upwards with dvc.yaml and conf/config.yaml).

The text is exactly what DVC's own Hydra composition writes (`dvc exp run`
with `hydra: enabled: true`: compose, `OmegaConf.resolve`, `OmegaConf.to_yaml`),
so `dvc exp run -S gate.lambda=2.0` rewrites the same keys. The environment
and `.env` are ignored here: params.yaml describes the experiment, not the machine.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path
from typing import Sequence

from omegaconf import OmegaConf

from harness.atomic import atomic_write_text
from harness.config.errors import ConfigError
from harness.config.load import load_config
from harness.config.secrets import print_error

DEFAULT_OUTPUT = "params.yaml"


def render_params(overrides: Sequence[str] = (), *, config_dir: str | os.PathLike[str] | None = None) -> str:
    """The params.yaml text for `conf/` + `overrides` (validated; environment ignored)."""
    cfg = load_config(overrides, config_dir=config_dir, env_file=None, environ={})
    return OmegaConf.to_yaml(cfg)


def write_params(
    path: str | os.PathLike[str] = DEFAULT_OUTPUT,
    overrides: Sequence[str] = (),
    *,
    config_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Compose and write params.yaml atomically (nothing is written when the config is invalid)."""
    return atomic_write_text(path, render_params(overrides, config_dir=config_dir))


def params_diff(
    path: str | os.PathLike[str] = DEFAULT_OUTPUT,
    overrides: Sequence[str] = (),
    *,
    config_dir: str | os.PathLike[str] | None = None,
) -> str:
    """Unified diff between the file at `path` and a fresh composition ('' when up to date)."""
    expected = render_params(overrides, config_dir=config_dir)
    current = Path(path).read_text(encoding="utf-8") if Path(path).is_file() else ""
    if current == expected:
        return ""
    return "".join(difflib.unified_diff(current.splitlines(True), expected.splitlines(True),
                                        fromfile=f"{path} (committed)", tofile=f"{path} (composed from conf/)"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.config.snapshot", description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. gate.lambda=2.0")
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 when the file is out of date")
    parser.add_argument("--output", default=None, help="file to write/check (default: params.yaml in the project root)")
    parser.add_argument("--config-dir", default=None, help="Hydra config directory (default: conf/ in the project root)")
    args = parser.parse_args(argv)
    if args.config_dir is None:  # the project's conf/ and params.yaml, found from the working directory upwards
        from harness.config.project import ProjectRootError, require_project_root

        try:
            root = require_project_root("harness.config.snapshot")
        except ProjectRootError as exc:
            print_error(str(exc))
            return 2
        args.config_dir = str(root / "conf")
        args.output = args.output or str(root / DEFAULT_OUTPUT)
    args.output = args.output or DEFAULT_OUTPUT
    try:
        if args.check:
            diff = params_diff(args.output, args.overrides, config_dir=args.config_dir)
            if diff:
                sys.stderr.write(diff[:20000])
                sys.stderr.write(f"\n{args.output} is out of date with conf/; run `python -m harness.config.snapshot`\n")
                return 1
            print(f"{args.output} is up to date")
            return 0
        written = write_params(args.output, args.overrides, config_dir=args.config_dir)
    except ConfigError as exc:
        print_error(f"error: {exc}")
        return 2
    print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
