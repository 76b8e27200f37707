"""Every public module declares ``__all__``, every listed name exists, and every public
class or function a module defines is listed; lower layers never import upper ones."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import streamcrypt

OPTIONAL = {"aiohttp", "starlette"}  # extras: modules needing them are checked if installed


def _modules() -> list[str]:
    found = pkgutil.walk_packages(streamcrypt.__path__, "streamcrypt.")
    return ["streamcrypt", *(info.name for info in found)]


PUBLIC = [m for m in _modules() if not any(part.startswith("_") for part in m.split("."))]


@pytest.mark.parametrize("name", PUBLIC)
def test_all_lists_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    for item in exported:
        assert hasattr(module, item), f"{name}.__all__ lists {item!r}, which does not exist"
    for item, value in vars(module).items():
        if item.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if getattr(value, "__module__", None) == name:
            assert item in exported, f"{name} defines public {item!r} but __all__ omits it"


# Layer of each subpackage (docs: ARCHITECTURE). A module may import only its own layer
# or lower ones.
LAYERS = {
    "errors": 0,
    "keys": 0,
    "_state": 0,
    "_json": 0,
    "primitives": 1,
    "codecs": 2,
    "engine": 3,
    "transports": 4,
    "formats": 5,
    "backup": 5,
    "ecies": 2,
    "cluster": 5,
    "_api": 5,
    "cli": 5,
    "demo": 5,
    "testing": 5,
    "__init__": 5,
    "__main__": 5,
}


def _layer(rel: Path) -> int:
    top = rel.parts[0].removesuffix(".py")
    return LAYERS[top]


def test_layers_import_only_downward() -> None:
    root = Path(streamcrypt.__file__).parent
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        own = _layer(rel)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0 and node.module:
                # resolve relative imports against the package of this file
                base = list(rel.parent.parts)[: len(rel.parent.parts) - (node.level - 1)]
                target = [*base, *node.module.split(".")]
                if not target:
                    continue
                top = target[0]
                if top in LAYERS:
                    assert LAYERS[top] <= own, f"{rel} (layer {own}) imports {'.'.join(target)}"
            elif (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("streamcrypt.")
            ):
                top = node.module.split(".")[1]
                assert LAYERS.get(top, 5) <= own, f"{rel} imports {node.module}"
