"""Versioned tree store and seeds (seed 000 §5).

A *store dir* holds immutable versions of one harness tree kind (skills or
prompts). A version is ONE file `<dir>/v<N>`: UTF-8 JSON
`{"format": "harness-version/1", "meta": {...}, "files": {path: text}}`
(files sorted by path). One file per version instead of a directory tree
keeps the number of files small: every DVC stage that carries a workspace
holds all of its versions, and DVC hashes (and caches) every file of every
stage output.

Only entries named exactly `v<N>` (N a non-negative integer without
leading zeros) are versions; everything else in the dir (legacy meta
files, staging files of an interrupted write, stray files) is ignored by
`list_versions`; an entry named `v<N>` that is not a packed version file is
listed (so its number is never reused) and refused by `read_version`. Versions sort by number, so v10 comes after v2. The first
version is v0.

A *seed* is a reusable starting point shared across experiments:
`<seed>/skills/`, `<seed>/prompts/`, `<seed>/seed.json` and, when promoted
from an evaluated workspace, `<seed>/runlog.sqlite` holding that eval run.
The store depends on nothing above it (workspace -> store, never back).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_json
from harness.log import RunLogReader, connect_readonly
from harness.tree import HarnessTree

_VERSION_RE = re.compile(r"^v(0|[1-9][0-9]*)$")
VERSION_FORMAT = "harness-version/1"
SEED_META = "seed.json"
SEED_RUNLOG = "runlog.sqlite"


class StoreError(RuntimeError):
    """A store, version or seed is missing, malformed or inconsistent."""


@dataclass(frozen=True)
class StoredVersion:
    version: str
    tree: HarnessTree
    meta: dict[str, Any]


@dataclass(frozen=True)
class Seed:
    path: Path
    skills: HarnessTree
    prompts: HarnessTree
    questions_ref: str
    meta: dict[str, Any]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------- versions


def parse_version(name: str) -> int | None:
    """The number of a canonical version name `v<N>`, else None."""
    m = _VERSION_RE.match(name) if isinstance(name, str) else None
    return int(m.group(1)) if m else None


def version_number(name: str) -> int:
    """Like parse_version, but a non-version name is an error naming it."""
    n = parse_version(name)
    if n is None:
        raise StoreError(f"{name!r} is not a version name (expected v<N>, e.g. v0, v12)")
    return n


def list_versions(store_dir: str | os.PathLike[str]) -> list[str]:
    """Version names present in `store_dir` (packed files and stray entries named v<N>), sorted by number; [] when
    the dir does not exist. Listing does not read the files: a stray file named `v<N>` is listed, and
    `read_version` reports what is wrong with it."""
    root = Path(store_dir)
    if not root.is_dir():
        return []
    found = [(parse_version(p.name), p.name) for p in root.iterdir() if not p.is_symlink() and (p.is_file() or p.is_dir())]
    return [name for n, name in sorted((n, name) for n, name in found if n is not None)]


def latest_version(store_dir: str | os.PathLike[str]) -> str | None:
    versions = list_versions(store_dir)
    return versions[-1] if versions else None


def next_version(store_dir: str | os.PathLike[str]) -> str:
    """`v0` for an empty store, else latest + 1."""
    latest = latest_version(store_dir)
    return "v0" if latest is None else f"v{version_number(latest) + 1}"


def pack_version(tree: HarnessTree, meta: Mapping[str, Any]) -> bytes:
    """The bytes of a packed version file: format tag, meta, files sorted by path."""
    doc = {"format": VERSION_FORMAT, "meta": dict(meta), "files": {path: tree[path] for path in sorted(tree)}}
    return json.dumps(doc, ensure_ascii=False, allow_nan=False, indent=1).encode("utf-8")


def unpack_version(path: str | os.PathLike[str]) -> StoredVersion:
    """Read a packed version file; checks the format and that the tree matches the recorded fingerprint."""
    file = Path(path)
    try:
        doc = json.loads(file.read_bytes().decode("utf-8"))
    except FileNotFoundError as exc:
        raise StoreError(f"{file}: version file does not exist") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{file}: not a packed harness version (expected UTF-8 JSON with format {VERSION_FORMAT!r}): {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != VERSION_FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise StoreError(f"{file}: format {found!r}, expected {VERSION_FORMAT!r}")
    meta, files = doc.get("meta"), doc.get("files")
    if not isinstance(meta, dict):
        raise StoreError(f"{file}: key 'meta' must be an object")
    if not isinstance(files, dict) or not all(isinstance(t, str) for t in files.values()):
        raise StoreError(f"{file}: key 'files' must map paths to text")
    tree = HarnessTree(files)
    _check_fingerprint(file, tree, meta)
    return StoredVersion(version=file.name, tree=tree, meta=meta)


def _check_fingerprint(where: Path, tree: HarnessTree, meta: Mapping[str, Any]) -> None:
    recorded = meta.get("fingerprint")
    if recorded != tree.fingerprint:
        raise StoreError(
            f"{where}: content fingerprint {tree.fingerprint} differs from the recorded {recorded!r}; "
            "versions are immutable (was it edited by hand?)"
        )


def _create_exclusive(target: Path, staging: Path) -> bool:
    """Give the complete file `staging` the name `target` unless `target` exists; True when it did.

    A hard link is atomic and never replaces an existing name; where hard
    links are not supported, an O_EXCL create + write + fsync does the same
    (minus atomicity of the content, which `unpack_version` then reports).
    """
    try:
        os.link(staging, target)
        return True
    except FileExistsError:
        return False
    except OSError:
        pass
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as out:
        out.write(staging.read_bytes())
        out.flush()
        os.fsync(out.fileno())
    return True


def advance_version(store_dir: str | os.PathLike[str], tree: HarnessTree, meta: Mapping[str, Any] | None = None) -> str:
    """Write `tree` as the next version (one packed file) and return its name.

    The file is written completely under a staging name, then takes the
    name `v<N>` only if nothing has it (`_create_exclusive`), so an existing
    version is never overwritten and a concurrent writer that took N first
    makes us retry with N+1. Meta gets `version`, `fingerprint`, `n_files`,
    `created_at` added and lives inside the same file (no window in which a
    version exists without its meta).
    """
    if not isinstance(tree, HarnessTree):
        raise TypeError(f"advance_version needs a HarnessTree, got {type(tree).__name__}")
    root = Path(store_dir)
    if len(tree) == 0:
        raise StoreError(f"{root}: refusing to store an empty harness tree as a version")
    user_meta = dict(meta or {})
    json.dumps(user_meta, allow_nan=False)  # fail before touching the disk
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".staging-{uuid.uuid4().hex}"
    try:
        last_tried = -1
        for _ in range(100):
            number = max(version_number(next_version(root)), last_tried + 1)
            last_tried = number
            version = f"v{number}"
            full_meta = {**user_meta, "version": version, "fingerprint": tree.fingerprint,
                         "n_files": len(tree), "created_at": user_meta.get("created_at", _now())}
            staging.write_bytes(pack_version(tree, full_meta))
            if _create_exclusive(root / version, staging):
                return version
            # another writer (or a stray entry) took this number
        raise StoreError(f"{root}: could not take a new version name after 100 attempts")
    finally:
        if staging.exists():
            staging.unlink()


def read_version(store_dir: str | os.PathLike[str], version: str) -> StoredVersion:
    """Load one version and its meta; checks the tree still matches the recorded fingerprint."""
    root = Path(store_dir)
    version_number(version)
    vpath = root / version
    if vpath.is_file() and not vpath.is_symlink():
        return unpack_version(vpath)
    if vpath.is_dir() and not vpath.is_symlink():
        raise StoreError(f"{vpath}: a directory, not a packed harness version file")
    raise StoreError(f"{root}: version {version!r} does not exist (have {list_versions(root)})")


def read_version_tree(store_dir: str | os.PathLike[str], version: str) -> HarnessTree:
    return read_version(store_dir, version).tree


# ---------------------------------------------------------------- seeds


def _stage_seed(seed_dir: Path, write) -> Path:
    """Build a seed in a staging dir with `write(staging)`, then rename it into place (never overwrites)."""
    if seed_dir.exists() and any(seed_dir.iterdir()):
        raise StoreError(f"seed {seed_dir} already exists; seeds are immutable (choose another name)")
    seed_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = seed_dir.with_name(f".{seed_dir.name}.staging-{uuid.uuid4().hex}")
    try:
        staging.mkdir()
        write(staging)
        if seed_dir.exists():
            seed_dir.rmdir()  # empty (checked above)
        os.rename(staging, seed_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return seed_dir


def init_seed(
    seed_dir: str | os.PathLike[str],
    skills: HarnessTree,
    prompts: HarnessTree,
    questions_ref: str,
    meta: Mapping[str, Any] | None = None,
) -> Seed:
    """Create a seed from two trees (e.g. a benchmark's base harness)."""
    if not questions_ref:
        raise StoreError(f"init_seed {seed_dir}: questions_ref must be a non-empty reference")
    seed_path = Path(seed_dir)
    info = {**dict(meta or {}), "questions_ref": questions_ref, "created_at": _now(),
            "skills_fingerprint": skills.fingerprint, "prompts_fingerprint": prompts.fingerprint}
    json.dumps(info, allow_nan=False)

    def write(staging: Path) -> None:
        skills.save(staging / "skills")
        prompts.save(staging / "prompts")
        atomic_write_json(staging / SEED_META, info)

    _stage_seed(seed_path, write)
    return read_seed(seed_path)


def read_seed(seed_dir: str | os.PathLike[str]) -> Seed:
    """Load a seed; checks its trees against the fingerprints recorded in seed.json."""
    path = Path(seed_dir)
    meta_file = path / SEED_META
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise StoreError(f"{path}: not a seed ({SEED_META} is missing)") from exc
    except json.JSONDecodeError as exc:
        raise StoreError(f"{meta_file}: not valid JSON: {exc}") from exc
    for key in ("questions_ref", "skills_fingerprint", "prompts_fingerprint"):
        if not meta.get(key):
            raise StoreError(f"{meta_file}: key {key!r} is missing or empty")
    for kind in ("skills", "prompts"):
        if not (path / kind).is_dir():
            raise StoreError(f"{path}: seed has no {kind}/ directory")
    skills = HarnessTree.load(path / "skills")
    prompts = HarnessTree.load(path / "prompts")
    for kind, tree in (("skills", skills), ("prompts", prompts)):
        if tree.fingerprint != meta[f"{kind}_fingerprint"]:
            raise StoreError(f"{path / kind}: fingerprint {tree.fingerprint} differs from {meta[f'{kind}_fingerprint']!r} in {SEED_META}")
    return Seed(path=path, skills=skills, prompts=prompts, questions_ref=meta["questions_ref"], meta=meta)


EVAL_FINGERPRINT_KEY = "harness_fingerprint"  # the eval run's `_runs.meta` key holding the evaluated tree's fingerprint


def _split_harness(tree: HarnessTree) -> tuple[HarnessTree, HarnessTree]:
    """(skills, prompts) of a native-layout tree: skills/ as its own tree, everything else as prompts."""
    return tree.subtree("skills"), tree.with_files({p: None for p in tree if p.startswith("skills/")})


def promote_to_seed(
    seed_dir: str | os.PathLike[str],
    *,
    run_log: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    eval_run_id: str,
    skills_store: str | os.PathLike[str] | None = None,
    prompts_store: str | os.PathLike[str] | None = None,
    skills_version: str | None = None,
    prompts_version: str | None = None,
    harness: HarnessTree | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Seed:
    """Promote to a seed the harness that `eval_run_id` evaluated; nothing is written unless the run describes it.

    The harness is either a workspace pair (`skills_store`/`prompts_store` at `skills_version`/`prompts_version`) or a
    native-layout `harness` tree (prompts plus skills/<...>). The eval run's `_runs` row must exist and record a
    questions reference, and:
    - for a workspace pair, exactly these versions (not NULL);
    - for a tree, its fingerprint in the run's meta (`EVAL_FINGERPRINT_KEY`, what `stages.eval` records);
    - in both cases, when the run's meta records a fingerprint, it must be the promoted tree's (prompts ∪ skills/).
    """
    by_versions = any(x is not None for x in (skills_store, prompts_store, skills_version, prompts_version))
    if by_versions == (harness is not None):
        raise StoreError("promote_to_seed: give either skills_store/prompts_store/skills_version/prompts_version "
                         "(a workspace pair) or harness (a tree), not both or neither")
    fragments = [run_log] if isinstance(run_log, (str, os.PathLike)) else list(run_log)
    runs = RunLogReader(fragments).runs(eval_run_id)
    if not runs:
        raise StoreError(f"promote_to_seed: eval run {eval_run_id!r} is not in the run log {[str(f) for f in fragments]}")
    run = runs[0]
    recorded_fingerprint = (run["meta"] or {}).get(EVAL_FINGERPRINT_KEY) if isinstance(run["meta"], dict) else None
    if by_versions:
        if None in (skills_store, prompts_store, skills_version, prompts_version):
            raise StoreError("promote_to_seed: a workspace pair needs skills_store, prompts_store, skills_version and prompts_version")
        version_number(str(skills_version))
        version_number(str(prompts_version))
        for key, wanted in (("skills_version", skills_version), ("prompts_version", prompts_version)):
            if run[key] is None:
                raise StoreError(f"promote_to_seed: eval run {eval_run_id!r} has {key} = NULL; back-fill it with update_run_versions after the eval")
            if run[key] != wanted:
                raise StoreError(f"promote_to_seed: eval run {eval_run_id!r} evaluated {key} {run[key]!r}, not the requested {wanted!r}")
        skills = read_version_tree(str(skills_store), str(skills_version))
        prompts = read_version_tree(str(prompts_store), str(prompts_version))
    else:
        assert harness is not None  # by_versions is False
        if not recorded_fingerprint:
            raise StoreError(f"promote_to_seed: eval run {eval_run_id!r} records no harness fingerprint (meta key "
                             f"{EVAL_FINGERPRINT_KEY!r}), so it does not say which harness it evaluated")
        skills, prompts = _split_harness(harness)
    if not run["questions_ref"]:
        raise StoreError(f"promote_to_seed: eval run {eval_run_id!r} has no questions_ref")
    promoted = prompts.merged(skills.prefixed("skills"))
    if recorded_fingerprint and recorded_fingerprint != promoted.fingerprint:
        raise StoreError(f"promote_to_seed: eval run {eval_run_id!r} evaluated the harness with fingerprint "
                         f"{recorded_fingerprint}, not this one ({promoted.fingerprint})")
    info = {**dict(meta or {}), "questions_ref": run["questions_ref"], "created_at": _now(),
            "skills_fingerprint": skills.fingerprint, "prompts_fingerprint": prompts.fingerprint,
            "harness_fingerprint": promoted.fingerprint, "eval_run_id": eval_run_id}
    if by_versions:
        info.update(skills_version=skills_version, prompts_version=prompts_version)
    json.dumps(info, allow_nan=False)

    def write(staging: Path) -> None:
        skills.save(staging / "skills")
        prompts.save(staging / "prompts")
        extract_run_db(fragments, eval_run_id, staging / SEED_RUNLOG)
        atomic_write_json(staging / SEED_META, info)

    seed_path = Path(seed_dir)
    _stage_seed(seed_path, write)
    return read_seed(seed_path)


def extract_run_db(
    sources: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    run_id: str,
    dst: str | os.PathLike[str],
) -> Path:
    """Copy every row of `run_id` from the source fragment(s) into a new SQLite file `dst`.

    Tables and indexes are re-created from the sources' original CREATE
    statements, so PRIMARY KEYs (and with them idempotent inserts) are kept.
    Tables without a `run_id` column are re-created empty. The file is built
    as a temp db beside `dst` and renamed; the temp db is removed in
    `finally` whatever happens.
    """
    paths = [Path(sources)] if isinstance(sources, (str, os.PathLike)) else [Path(p) for p in sources]
    target = Path(dst)
    if target.exists():
        raise StoreError(f"extract_run_db: {target} already exists")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex}")
    found_run = False
    out = sqlite3.connect(tmp)
    try:
        created: set[str] = set()
        for src_path in paths:
            src = connect_readonly(src_path)
            try:
                schema = src.execute(
                    "SELECT type, name, tbl_name, sql FROM sqlite_master "
                    "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type = 'index', rowid"
                ).fetchall()
                for obj in schema:
                    if obj["name"] not in created:
                        out.execute(obj["sql"])
                        created.add(obj["name"])
                for obj in schema:
                    if obj["type"] != "table":
                        continue
                    table = obj["name"]
                    cols = [r["name"] for r in src.execute(f'PRAGMA table_info("{table}")')]
                    if "run_id" not in cols:
                        continue
                    rows = src.execute(f'SELECT {", ".join(cols)} FROM "{table}" WHERE run_id = ?', (run_id,)).fetchall()
                    if table == "_runs" and rows:
                        found_run = True
                    out.executemany(
                        f'INSERT OR IGNORE INTO "{table}" ({", ".join(cols)}) VALUES ({", ".join("?" for _ in cols)})',
                        [tuple(r) for r in rows],
                    )
            finally:
                src.close()
        if not found_run:
            raise StoreError(f"extract_run_db: run {run_id!r} is not in _runs of {[str(p) for p in paths]}")
        out.commit()
        out.close()
        os.replace(tmp, target)
        return target
    finally:
        out.close()  # a no-op when already closed
        for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
            if leftover.exists():
                leftover.unlink()
