"""library: fingerprint the training library's sources (one dependency for every training stage).

    python -m stages.library --out state/library.json harness/agent harness/bench ... harness/workspace.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.library", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("paths", nargs="+", type=Path, help="library files and directories (relative to the project root)")
    args = parser.parse_args(argv)
    from harness.atomic import atomic_write_json
    from harness.pipeline.code_fingerprint import fingerprint

    atomic_write_json(args.out, fingerprint(args.paths, Path.cwd()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
