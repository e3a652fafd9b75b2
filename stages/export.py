"""export: write the delivered harness of a finished run into a directory, in a substrate's layout.

    python -m stages.export --to DIR [--surface native|codex|opencode] [--from DELIVERED] [--force]
    python -m stages.export --seed DIR [--from DELIVERED] [--unevaluated]   # a seed: the next run starts there

The certificate the run delivered the harness with (`certificate.json` beside `--from`) is copied into the
exported directory (`--to`); a harness tree never reads it as one of its files.
`--from` is the holdout stage's delivered tree (default: `<train.state_dir>/holdout/delivered` of
params.yaml, i.e. the `dvc repro` run; after `python -m stages.train` pass
`runs/<run_name>/<time>/state/holdout/delivered`). `--surface` defaults to `benchmark.harness_surface`
of params.yaml, the layout the run started from, so a Codex or OpenCode harness goes back as one
(harness/bench/layouts.py), with the trigger lines that surface's validator adds. The exported tree is checked by the Harness² validator of that surface; a
failed check is printed and the exit code is 1 (the files are written, so they can be inspected).
A seed (`--seed`, for train.init_seed=DIR) is written only from a tree the run evaluated: the holdout document
beside `--from` must name exactly this tree (its fingerprint); its test accuracy (base -> delivered) and the
certificate's summary are printed. `--unevaluated` writes a seed from a run's tree its holdout did not evaluate
(an edited copy beside the run's state) and records that in the seed.
Not a DVC stage: it only reads a finished run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import OmegaConf

from harness.config.secrets import print_error

if TYPE_CHECKING:
    from harness.tree import HarnessTree

SURFACES = ("native", "codex", "opencode")


def _params_value(params: Path, key: str, fallback: str) -> tuple[str, str]:
    """(value, where it came from) of `key` in params.yaml, else `fallback`."""
    if params.is_file():
        value = OmegaConf.select(OmegaConf.load(params), key, default=None)
        if value is not None:
            return str(value), f"{key} in {params}"
    return fallback, f"no {key} in {params}: default"


def _evaluation_of(source: Path, fingerprint: str) -> tuple[str | None, str]:
    """(problem or None, what the run measured of the tree at `source`): the holdout document beside it must be
    finished and name this tree's fingerprint."""
    from harness.contracts.certificate import CERTIFICATE_FILE, CertificateError, read_certificate
    from harness.loop.stages.holdout import read_holdout
    from harness.loop.state import StateError

    try:
        holdout = read_holdout(source.parent)
    except (StateError, FileNotFoundError, ValueError, KeyError, TypeError) as exc:
        return f"--from {source}: no finished holdout evaluation beside it ({exc})", ""
    if holdout.delivered.fingerprint != fingerprint:
        return (f"--from {source}: the tree (fingerprint {fingerprint}) is not the one the holdout evaluated "
                f"({holdout.delivered.fingerprint})"), ""
    measured = f"test accuracy {holdout.test['base']:.3f} -> {holdout.test['delivered']:.3f} (base -> delivered, {holdout.n_test} questions)"
    try:
        measured += f"; certificate: {read_certificate(source.parent / CERTIFICATE_FILE).summary}"
    except (CertificateError, FileNotFoundError):
        measured += "; no certificate"
    return None, measured


def _write_seed(source: Path, seed_dir: Path, unevaluated: bool = False) -> int:
    """The delivered tree as a seed; its questions reference is the run's (state/init/workspace manifest). Refused
    unless the run's holdout evaluated exactly this tree (`unevaluated`: written anyway, recorded in the seed)."""
    from harness import workspace as wsp
    from harness.store import StoreError, init_seed

    init_workspace = source.parent.parent / "init" / "workspace"  # <state>/holdout/delivered -> <state>/init/workspace
    try:
        questions_ref = wsp.read_manifest(init_workspace).questions_ref
    except (FileNotFoundError, ValueError, wsp.WorkspaceError) as exc:
        print_error(f"error: --from {source}: cannot read the run's questions reference from {init_workspace} ({exc}); "
                    "a seed records the questions of the run that made it, so --from is a run's "
                    "<state>/holdout/delivered (with or without --unevaluated)")
        return 2
    tree = _load_delivered(source)
    if tree is None:
        return 2
    problem, measured = _evaluation_of(source, tree.fingerprint)
    if problem is not None and not unevaluated:
        print_error(f"error: {problem}; a seed is written from an evaluated tree only (the holdout stage's "
                    "delivered tree), or pass --unevaluated")
        return 2
    if problem is not None:
        print_error(f"warning: {problem}; writing the seed anyway (--unevaluated)")
    skills = tree.subtree("skills")
    prompts = tree.with_files({p: None for p in tree if p.startswith("skills/")})
    meta = {"from": str(source), "fingerprint": tree.fingerprint, "evaluated": measured or None}
    try:
        seed = init_seed(seed_dir, skills, prompts, questions_ref, meta)
    except StoreError as exc:
        print_error(f"error: --seed {seed_dir}: {exc}")
        return 2
    if measured:
        print(f"the run measured this tree: {measured}")
    print(f"wrote seed {seed.path} ({len(skills)} skill files, {len(prompts)} prompt files) from {source}; "
          f"start a run from it with train.init_seed={seed_dir}")
    return 0


def _load_delivered(source: Path) -> "HarnessTree | None":
    """The native tree at `source`, or None after one error line naming what is wrong (a symlink, a non-UTF-8 file,
    no system_prompt.md: not a delivered harness)."""
    from harness.bench.layouts import load_in_layout

    try:
        return load_in_layout(source, "native")
    except ValueError as exc:
        print_error(f"error: --from {source}: {exc}")
        return None


def _copy_certificate(source: Path, target: Path) -> None:
    """Copy the certificate beside `source` (the holdout stage's) into `target`, saying what it certifies."""
    from harness.atomic import atomic_write_bytes
    from harness.contracts.certificate import CERTIFICATE_FILE, CertificateError, read_certificate

    path = source.parent / CERTIFICATE_FILE
    if not path.is_file():
        print(f"note: no {CERTIFICATE_FILE} beside {source}: exported without a certificate")
        return
    try:
        certificate = read_certificate(path)
    except CertificateError as exc:
        print_error(f"warning: {exc}; exported without a certificate")
        return
    atomic_write_bytes(target / CERTIFICATE_FILE, path.read_bytes())
    print(f"certificate: {certificate.summary} -> {target / CERTIFICATE_FILE}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.export", description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", type=Path, help="directory to write (must be empty or absent, unless --force)")
    target.add_argument("--seed", type=Path, help="write a seed (harness/store.py) for train.init_seed=DIR instead (immutable)")
    parser.add_argument("--surface", choices=SURFACES, help="layout to write (default: benchmark.harness_surface of params.yaml)")
    parser.add_argument("--from", dest="source", type=Path, help="delivered tree (default: <train.state_dir>/holdout/delivered)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="config snapshot for the defaults")
    parser.add_argument("--force", action="store_true", help="replace the content of a non-empty --to directory")
    parser.add_argument("--unevaluated", action="store_true", help="--seed: write a seed from a run's tree its holdout did not evaluate (e.g. an edited copy)")
    args = parser.parse_args(argv)

    from harness.bench.layouts import from_native
    from harness.h2.surfaces import surface_for
    from harness.h2.validator import validate_tree

    surface, surface_origin = (args.surface, "--surface") if args.surface else _params_value(args.params, "benchmark.harness_surface", "native")
    if args.source is None:
        state_dir, _ = _params_value(args.params, "train.state_dir", "state")
        args.source = Path(state_dir) / "holdout" / "delivered"
    if not args.source.is_dir():
        runs = sorted(Path("runs").glob("*/*/state/holdout/delivered"))[-3:] if Path("runs").is_dir() else []
        hint = f"; runs of `python -m stages.train` here: {', '.join(map(str, runs))}" if runs else ""
        print_error(f"error: --from {args.source}: no delivered harness (run `dvc repro`, or pass --from){hint}")
        return 2
    if args.seed is not None:
        return _write_seed(args.source, args.seed, args.unevaluated)
    if args.to.exists() and (not args.to.is_dir() or any(args.to.iterdir())) and not args.force:
        print_error(f"error: --to {args.to} exists and is not an empty directory; choose another or pass --force")
        return 2
    delivered = _load_delivered(args.source)
    if delivered is None:
        return 2
    tree = from_native(delivered, surface)
    verdict = validate_tree(tree, surface_for(surface))
    if verdict.ok and verdict.tree is not None:
        tree = verdict.tree  # with the auto-trigger lines the surface needs (e.g. skills listed in AGENTS.md)
    tree.save(args.to)
    _copy_certificate(args.source, args.to)
    added = f"; {len(verdict.auto_added)} trigger line(s) added" if verdict.auto_added else ""
    print(f"exported {len(tree)} files of {args.source} as a {surface} harness ({surface_origin}) to {args.to}{added}")
    if not verdict.ok:
        print_error(f"the exported tree fails the {surface} validator:\n" + "\n".join(f"  {e}" for e in verdict.errors))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
