"""A stage's view of the config: only the keys it declares, so its DVC `params:` cannot drift from its code.

Each pipeline entry point declares the dotted keys its computation reads
(`PARAMS` in `stages/<name>.py`; a group name such as "llm" declares the whole
group). The stage's code then sees the config through `KeyView`, and reading
any other key raises `UndeclaredKeyError` naming the stage and the key: a new
read fails the first run (and the tests), not silently a later `dvc status`.
tests/pipeline/test_dvc_params.py checks that dvc.yaml lists exactly these keys.

The checkpoint's resume metadata (a copy of the whole config, never an input
of the computation) is the one full read: `resume_metadata()`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast

WHOLE = None  # a declared leaf: everything below it is readable


class UndeclaredKeyError(RuntimeError):
    """A stage read a config key it does not declare (RuntimeError: `hasattr`/`getattr(..., default)` must not hide it)."""


def key_tree(keys: Iterable[str]) -> dict[str, Any]:
    """("llm", "evolve.method", "evolve.h2_probe_questions") -> {"llm": WHOLE, "evolve": {"method": WHOLE, "h2_probe_questions": WHOLE}}."""
    tree: dict[str, Any] = {}
    for key in keys:
        parts = key.split(".")
        if not key or any(not p for p in parts):
            raise ValueError(f"declared config key {key!r} is not a dotted key")
        node: dict[str, Any] | None = tree
        for part in parts[:-1]:
            assert node is not None
            node = node.setdefault(part, {})
            if node is WHOLE:
                break  # inside a group declared whole: already readable
        if node is not None:
            node[parts[-1]] = WHOLE  # a whole declaration absorbs earlier sub-keys
    return tree


def resolved(config: Any) -> dict:
    """The resolved plain dict of what `config` lets one read: a KeyView's declared keys, or a whole DictConfig."""
    from omegaconf import OmegaConf

    if isinstance(config, KeyView):
        return config.to_container()
    return cast(dict, OmegaConf.to_container(config, resolve=True)) if OmegaConf.is_config(config) else dict(config)


class KeyView:
    """Attribute and item access to `config` restricted to `declared` (see the module docstring)."""

    __slots__ = ("_config", "_tree", "_stage", "_prefix", "_root")

    def __init__(self, config: Any, declared: Iterable[str] | Mapping[str, Any], stage: str, *, _prefix: str = "",
                 _root: Any = None) -> None:
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_tree", declared if isinstance(declared, Mapping) else key_tree(declared))
        object.__setattr__(self, "_stage", stage)
        object.__setattr__(self, "_prefix", _prefix)
        object.__setattr__(self, "_root", config if _root is None else _root)

    def _read(self, name: str) -> Any:
        if name not in self._tree:
            declared = ", ".join(sorted(self._tree)) or "nothing"
            raise UndeclaredKeyError(
                f"stage {self._stage} reads config key {self._prefix}{name}, which it does not declare "
                f"(declared under {self._prefix or 'the root'}: {declared}); add it to the stage's PARAMS and to its "
                f"`params:` in dvc.yaml")
        value = self._config[name]
        sub = self._tree[name]
        if sub is WHOLE:
            return value
        return KeyView(value, sub, self._stage, _prefix=f"{self._prefix}{name}.", _root=self._root)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._read(name)

    def __getitem__(self, name: str) -> Any:
        return self._read(name)

    def get(self, name: str, default: Any = None) -> Any:
        return self._read(name)  # a default does not make an undeclared read harmless

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tree and name in self._config

    def __iter__(self) -> Iterator[str]:
        return iter(self._tree)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"stage {self._stage}: the config is read-only ({self._prefix}{name})")

    def __repr__(self) -> str:
        return f"KeyView({self._stage}: {self._prefix or '<root>'} {sorted(self._tree)})"

    def to_container(self) -> dict:
        """The declared keys, resolved, as plain data."""
        from omegaconf import OmegaConf

        out: dict[str, Any] = {}
        for name in self._tree:
            value = self._read(name)
            if isinstance(value, KeyView):
                out[name] = value.to_container()
            else:
                out[name] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        return out

    def resume_metadata(self) -> dict:
        """The whole resolved config (a checkpoint's record of what it ran with; not an input of the computation)."""
        from omegaconf import OmegaConf

        root = self._root
        return cast(dict, OmegaConf.to_container(root, resolve=True)) if OmegaConf.is_config(root) else dict(root)
