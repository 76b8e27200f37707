"""What the API reference documents, module by module (a local Sphinx extension).

Every public module (no ``_`` in its dotted name) gets a page (autosummary, template
``_templates/autosummary/module.rst``) documenting each name of its ``__all__``:

* the names the top-level package exports (``streamcrypt.open``, ``streamcrypt.KeyRing``,
  ...) on its page; other classes and functions where they are defined: on the page of
  the public module that exports them from its private submodules (``streamcrypt.codecs``
  for ``streamcrypt.codecs._format.FormatOptions``); a page that re-exports a name
  documented elsewhere links to it instead (``streamcrypt.keys.KeyRing``);
* constants and type aliases (which carry no docstring of their own) with the ``#:``
  comment above their assignment, or failing that the plain ``#`` comment block there,
  and the expression they are assigned (when short).

After reading, every name of the plan must have become a documented object: a public
name with no documentation is a warning, which ``make docs`` (``-W``) turns into a
failure.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from sphinx.util import logging

import streamcrypt

logger = logging.getLogger(__name__)

#: Public names a module serves that its ``__all__`` leaves out on purpose:
#: ``streamcrypt.open`` (kept out of ``__all__`` so a star import keeps the builtin) and
#: the aiohttp helpers (loaded on first use, as they need the ``aiohttp`` extra).
EXTRA_NAMES: dict[str, list[str]] = {
    "streamcrypt": ["open"],
    "streamcrypt.transports": sorted(streamcrypt.transports._AIOHTTP_NAMES),
}

#: Docs for constants whose defining module has no comment for them (modules that other
#: work is rewriting: move these into ``#:`` comments there when it lands).
DATA_DOCS: dict[str, str] = {
    "streamcrypt.engine.DEFAULT_WORKERS": (
        "Threads of the shared worker pool: the number of CPUs, at least 2."
    ),
    "streamcrypt.codecs.FORMATS": (
        "Every segmented format by name, its descriptor the codec module's ``FORMAT``; "
        "built on first access (it imports every format)."
    ),
    "streamcrypt.codecs.KeyLike": (
        "What ``key=`` takes: a symmetric key or key ring (32 bytes, a ``SecretKey``, a "
        "``KeyRing``), a Tink keyset or streaming key, ``RcloneKeys``, an AWS keyring or a "
        "list of them, and for reading RFC 8188 a key id lookup."
    ),
    "streamcrypt.codecs.RecipientLike": (
        "A recipient of a format with stanzas (age, envelope): a public key's object, its "
        "text, a recipients file's text or its path."
    ),
    "streamcrypt.codecs.IdentityLike": (
        "An identity of a format with stanzas (age, envelope): a secret key's object, its "
        "text, an identity file's text or its path."
    ),
    "streamcrypt.codecs.aws.KeyringLike": "What ``key=`` takes for AWS: a keyring or a list of them.",
    "streamcrypt.codecs.aws.RsaPadding": "The RSA keyring's padding scheme, as the SDKs name it.",
    "streamcrypt.engine.DEFAULT_POLICY": (
        "The :class:`OffloadPolicy` with every default, taken wherever ``policy=`` is left out."
    ),
}

#: Longest assigned expression shown as a constant's value.
MAX_VALUE = 72


@dataclass
class Data:
    name: str
    doc: list[str]
    value: str | None


@dataclass
class Page:
    members: list[str] = field(default_factory=list)
    data: list[Data] = field(default_factory=list)
    aliases: list[tuple[str, str]] = field(default_factory=list)


#: Public modules that are not library API, and where they are documented instead.
NOT_API: dict[str, str] = {
    "streamcrypt.cli": "the streamcrypt command's entry point: CLI.md is its reference",
}


def public_modules() -> list[str]:
    """Every public module of the package that is library API (not in :data:`NOT_API`)."""
    found = pkgutil.walk_packages(streamcrypt.__path__, "streamcrypt.")
    names = ["streamcrypt", *(info.name for info in found)]
    return [
        n
        for n in names
        if not any(part.startswith("_") for part in n.split(".")) and n not in NOT_API
    ]


def exported(module: ModuleType) -> list[str]:
    return [*module.__all__, *EXTRA_NAMES.get(module.__name__, ())]


def _home(obj: Any) -> tuple[str, str] | None:
    """The public module (and name there) that documents a class or function: the
    top-level package for the names it exports (``streamcrypt.KeyRing``, the names people
    remember, documented where they are imported from), else its defining module with
    the private parts dropped (``a.b._c`` -> ``a.b``)."""
    defined = getattr(obj, "__module__", None)
    if not isinstance(defined, str) or not defined.startswith("streamcrypt"):
        return None
    for name in exported(streamcrypt):
        if getattr(streamcrypt, name) is obj:
            return "streamcrypt", name
    parts = defined.split(".")
    while any(p.startswith("_") for p in parts):
        parts.pop()
    public = importlib.import_module(".".join(parts))
    for name in exported(public):
        if getattr(public, name, None) is obj:
            return public.__name__, name
    return None


def _sources(module: ModuleType) -> list[Path]:
    """The module's own file, then (for a package) its private submodules' files."""
    own = Path(inspect.getfile(module))
    if own.name != "__init__.py":
        return [own]
    return [own, *sorted(p for p in own.parent.glob("_*.py") if p.name != "__init__.py")]


def _assignment(path: Path, name: str) -> Data | None:
    """The doc and the assigned expression of a module-level ``name = ...`` in ``path``,
    following ``from .module import name`` (and ``import *``) to where it is assigned."""
    text = path.read_text()
    lines = text.splitlines()
    for node in ast.parse(text).body:
        if isinstance(node, ast.ImportFrom) and node.level and node.module:
            star = any(a.name == "*" for a in node.names)
            if star or any((a.asname or a.name) == name == a.name for a in node.names):
                base = path.parent.joinpath(*[".."] * (node.level - 1), *node.module.split("."))
                target = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
                found = _assignment(target.resolve(), name) if target.exists() else None
                if found is not None or not star:
                    return found
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if not any(isinstance(t, ast.Name) and t.id == name for t in targets):
            continue
        doc: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].lstrip().startswith("#"):
            doc.insert(0, lines[i].strip())
            i -= 1
        special = [ln[2:].strip() for ln in doc if ln.startswith("#:")]
        plain = [ln.lstrip("#").strip() for ln in doc]
        value = ast.get_source_segment(text, node.value) if node.value is not None else None
        if value is not None and ("\n" in value or len(value) > MAX_VALUE):
            value = None
        return Data(name, special or plain, value)
    return None


def _data(module: ModuleType, name: str) -> Data:
    for path in _sources(module):
        found = _assignment(path, name)
        if found is not None:
            break
    else:
        found = Data(name, [], None)
    extra = DATA_DOCS.get(f"{module.__name__}.{name}")
    if extra and not found.doc:
        found.doc = [extra]
    return found


def plan() -> dict[str, Page]:
    pages: dict[str, Page] = {}
    for modname in public_modules():
        module = importlib.import_module(modname)
        page = pages[modname] = Page()
        for name in exported(module):
            obj = getattr(module, name)
            if isinstance(obj, ModuleType):
                page.aliases.append((name, obj.__name__))
            elif inspect.isclass(obj) or inspect.isfunction(inspect.unwrap(obj)):
                home = _home(obj)
                if home is None or home == (modname, name):
                    page.members.append(name)
                else:
                    page.aliases.append((name, ".".join(home)))
            else:
                page.data.append(_data(module, name))
    return pages


def _check(app: Any, env: Any) -> None:
    objects = env.get_domain("py").objects
    for modname, page in app.config.autosummary_context["api"].items():
        if f"_api/{modname}" not in env.all_docs:
            logger.warning("public module %s has no page: list it in docs/api.md", modname)
        for name in [*page.members, *(d.name for d in page.data)]:
            if f"{modname}.{name}" not in objects:
                logger.warning("public name %s.%s is not documented", modname, name)
        for d in page.data:
            if not d.doc:
                logger.warning(
                    "public constant %s.%s has no comment: add a #: comment above it",
                    modname,
                    d.name,
                )


#: A dotted name through a private module: ``streamcrypt.codecs._format.FormatOptions``.
_PRIVATE_PATH = re.compile(r"\bstreamcrypt((?:\.[A-Za-z]\w*)*)((?:\._\w+)+)\.([A-Za-z]\w*)\b")


def _public_path(match: re.Match[str]) -> str:
    """The name where the reference documents it (its public module), if that exports it."""
    public = "streamcrypt" + match.group(1)
    module = importlib.import_module(public)
    if match.group(3) in exported(module):
        return f"{public}.{match.group(3)}"
    return match.group(0)


def _public_signature(
    app: Any,
    what: str,
    name: str,
    obj: Any,
    options: Any,
    signature: str | None,
    returns: str | None,
) -> tuple[str | None, str | None]:
    """Signatures name types by their public path, never through a private module (a
    dataclass's annotations come out as ``streamcrypt.codecs._format.FormatOptions``)."""
    return _public_text(signature), _public_text(returns)


def _public_text(text: str | None) -> str | None:
    return None if text is None else _PRIVATE_PATH.sub(_public_path, text)


def setup(app: Any) -> dict[str, Any]:
    app.connect("env-updated", _check)
    app.connect("autodoc-process-signature", _public_signature)
    return {"parallel_read_safe": True}
