"""library: one code fingerprint per stage entry point, from its import closure (harness/pipeline/code_fingerprint.py).

    python -m stages.library --out-dir state/library prepare pools batches ...   # -> state/library/<stage>.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.library", description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument("stages", nargs="+", help="entry points stages.<name> to fingerprint")
    args = parser.parse_args(argv)
    from harness.config.project import stage_root_message
    from harness.config.secrets import print_error

    wrong_place = stage_root_message("stages.library", Path("dvc.yaml"))  # fingerprints the tree DVC runs it in
    if wrong_place:
        print_error(wrong_place)
        return 2
    from harness.atomic import atomic_write_json
    from harness.pipeline.code_fingerprint import stage_fingerprints

    for stage, print_ in stage_fingerprints(args.stages, Path.cwd()).items():
        atomic_write_json(args.out_dir / f"{stage}.json", print_)
    return 0


if __name__ == "__main__":
    sys.exit(main())
