"""Every public module declares ``__all__``, every listed name exists, and every public
class or function a module defines is listed; lower layers never import upper ones."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import typing
from pathlib import Path
from types import ModuleType

import pytest

import streamcrypt

OPTIONAL = {"aiohttp", "starlette"}  # extras: modules needing them are checked if installed


def _modules() -> list[str]:
    found = pkgutil.walk_packages(streamcrypt.__path__, "streamcrypt.")
    return ["streamcrypt", *(info.name for info in found)]


PUBLIC = [m for m in _modules() if not any(part.startswith("_") for part in m.split("."))]


def _import(name: str) -> ModuleType:
    return importlib.import_module(name)


@pytest.mark.parametrize("name", PUBLIC)
def test_all_lists_the_public_names(name: str) -> None:
    module = _import(name)
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
    "abc": 0,
    "deprecation": 0,
    "_lazy": 0,
    "paths": 0,
    "_state": 0,
    "keys": 0,
    "primitives": 1,
    "codecs": 2,
    "engine": 3,
    "transports": 4,
    "backup": 5,
    "cluster": 5,
    "_api": 5,
    "_rekey": 5,
    "cli": 5,
    "testing": 5,
    "__init__": 5,
    "__main__": 5,
}

ROOT = Path(streamcrypt.__file__).parent


def _module_of(rel: Path) -> tuple[str, ...]:
    """``codecs/age.py`` -> ("streamcrypt", "codecs", "age"); a package is its ``__init__``."""
    parts = ("streamcrypt", *rel.with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _is_module(parts: tuple[str, ...]) -> bool:
    path = ROOT.joinpath(*parts[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(rel: Path) -> list[tuple[tuple[str, ...], str | None]]:
    """Every streamcrypt module ``rel`` imports, in any form, as (module, name imported
    from it or None): ``import streamcrypt.x``, ``from streamcrypt.x import y``,
    ``from ..x import y``, ``from .. import x``, ``from . import x``."""
    package = _module_of(rel) if rel.name == "__init__.py" else _module_of(rel)[:-1]
    found: list[tuple[tuple[str, ...], str | None]] = []
    for node in ast.walk(ast.parse((ROOT / rel).read_text())):
        if isinstance(node, ast.Import):
            found += [
                (tuple(a.name.split(".")), None)
                for a in node.names
                if a.name.split(".")[0] == "streamcrypt"
            ]
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package[: len(package) - (node.level - 1)]
            assert len(base) >= 1, f"{rel}: relative import above the package"
            module = (*base, *node.module.split(".")) if node.module else base
        elif node.module and node.module.split(".")[0] == "streamcrypt":
            module = tuple(node.module.split("."))
        else:
            continue
        for alias in node.names:
            sub = (*module, alias.name)
            if _is_module(sub):  # ``from .. import ecies`` imports the module ecies
                found.append((sub, None))
            else:
                found.append((module, alias.name))
    return found


def _sources() -> list[Path]:
    return sorted(p.relative_to(ROOT) for p in ROOT.rglob("*.py"))


def _layer_of(module: tuple[str, ...]) -> int | None:
    if len(module) == 1:  # the package itself: its __init__
        return LAYERS["__init__"]
    return LAYERS[module[1]]


def test_layers_import_only_downward() -> None:
    for rel in _sources():
        own = _layer_of(_module_of(rel))
        assert own is not None
        for module, _name in _imports(rel):
            layer = _layer_of(module)
            assert layer is not None and layer <= own, (
                f"{rel} (layer {own}) imports {'.'.join(module)} (layer {layer})"
            )


#: Private plumbing every package may import: the one lazy-export helper (layer 0).
SHARED_PLUMBING = {("streamcrypt", "_lazy")}


def _private_owner(module: tuple[str, ...]) -> tuple[str, ...] | None:
    """The package whose private module ``module`` is, or None if it is public."""
    if module in SHARED_PLUMBING:
        return None
    for i, part in enumerate(module):
        if part.startswith("_") and not part.startswith("__"):
            return module[:i]
    return None


def test_no_module_imports_another_packages_private_module() -> None:
    """Private modules (``_name``) and private names are used only inside their own
    package (its subpackages included: ``codecs.age`` and ``codecs.aws`` are part of
    ``codecs``); every other
    package imports the public name from the owner's public module (``streamcrypt.abc``,
    ``streamcrypt.codecs``, ...)."""
    for rel in _sources():
        mod = _module_of(rel)
        package = mod if rel.name == "__init__.py" else mod[:-1]
        for module, name in _imports(rel):
            owner = _private_owner(module)
            if owner is not None:
                assert package[: len(owner)] == owner, (
                    f"{rel} imports private module {'.'.join(module)}; import the public "
                    f"name from {'.'.join(owner)} instead"
                )
            if name is not None and name.startswith("_") and not name.startswith("__"):
                is_package = (ROOT.joinpath(*module[1:]) / "__init__.py").is_file()
                home = module if is_package else module[:-1]
                assert home == package, f"{rel} imports private name {name} from {'.'.join(module)}"


def _annotated(module: ModuleType) -> list[object]:
    """The public classes and functions ``module`` lists, and the public methods (and
    ``__init__``) those classes define."""
    found: list[object] = []
    for item in module.__all__:
        value = getattr(module, item)
        if inspect.isfunction(value):
            found.append(value)
        elif inspect.isclass(value):
            found.append(value)
            found += [
                member
                for key, member in vars(value).items()
                if inspect.isfunction(member) and (key == "__init__" or not key.startswith("_"))
            ]
    return found


@pytest.mark.parametrize("name", PUBLIC)
def test_public_annotations_resolve_at_run_time(name: str) -> None:
    """``typing.get_type_hints`` works on everything public (documentation tools and
    validation libraries call it): no annotation names a type imported for type checkers
    only."""
    failures = []
    for obj in _annotated(_import(name)):
        try:
            typing.get_type_hints(obj)
        except Exception as exc:
            failures.append(f"{getattr(obj, '__qualname__', obj)}: {exc!r}")
    assert not failures, f"get_type_hints fails in {name}: {failures}"


_KINDS = inspect.Parameter


def _code_parameters(fn: typing.Any) -> list[tuple[str, typing.Any]]:
    """The parameters ``fn``'s code really takes, as (name, kind), whatever its
    ``__signature__`` or ``__wrapped__`` claim."""
    code = fn.__code__
    names = code.co_varnames
    positional = code.co_argcount
    keyword = code.co_kwonlyargcount
    out = [
        (
            name,
            _KINDS.POSITIONAL_ONLY if i < code.co_posonlyargcount else _KINDS.POSITIONAL_OR_KEYWORD,
        )
        for i, name in enumerate(names[:positional])
    ]
    at = positional + keyword
    if code.co_flags & inspect.CO_VARARGS:
        out.append((names[at], _KINDS.VAR_POSITIONAL))
        at += 1
    out += [(name, _KINDS.KEYWORD_ONLY) for name in names[positional : positional + keyword]]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        out.append((names[at], _KINDS.VAR_KEYWORD))
    return out


def _functions(module: ModuleType) -> list[typing.Any]:
    """The public functions ``module`` lists and the methods of the classes it lists."""
    found = []
    for item in module.__all__:
        value = getattr(module, item)
        members = vars(value).items() if inspect.isclass(value) else [(item, value)]
        for key, member in members:
            fn = member.__func__ if isinstance(member, staticmethod | classmethod) else member
            if inspect.isfunction(fn) and (key == "__init__" or not key.startswith("_")):
                found.append(fn)
    return found


#: Wrappers of the deprecation module (one release of old names) are checked by their
#: own tests, and go with it.
_SHIMS = str(ROOT / "deprecation.py")


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_function_takes_the_parameters_its_signature_reports(name: str) -> None:
    """What ``inspect.signature`` reports (help(), IDEs, documentation) is what the code
    takes: no ``__signature__`` override, and a wrapper (``__wrapped__``) passes through
    exactly the wrapped function's parameters, so every parameter can be passed by the
    name and in the way the signature shows. (``formats.tink.encrypt_bytes`` reported
    ``plaintext`` but took it by position only.)"""
    wrong = []
    for fn in _functions(_import(name)):
        if fn.__code__.co_filename == _SHIMS:
            continue
        reported = [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]
        if "__signature__" in vars(fn):
            wrong.append(f"{fn.__qualname__}: sets __signature__")
            continue
        real = fn
        while hasattr(real, "__wrapped__") and not real.__code__.co_filename.startswith(str(ROOT)):
            real = real.__wrapped__  # a stdlib decorator: its target is what is called
        if _code_parameters(real) != reported and not _passes_through(fn, real):
            wrong.append(f"{fn.__qualname__}: reports {reported}, takes {_code_parameters(real)}")
    assert not wrong, wrong


def _passes_through(fn: typing.Any, real: typing.Any) -> bool:
    """A method whose signature drops ``self`` (bound) or a stdlib wrapper that takes
    ``*args, **kwargs`` and calls ``real`` with them."""
    return fn is not real and [k for _n, k in _code_parameters(fn)] == [
        _KINDS.VAR_POSITIONAL,
        _KINDS.VAR_KEYWORD,
    ]


#: Ciphers that authenticate nothing, or legacy modes: only in ``primitives.hazmat``.
HAZMAT = {
    "AesCbcDecryptor",
    "AesCbcEncryptor",
    "AesCfb8Decryptor",
    "AesCfb8Encryptor",
    "AesCfbDecryptor",
    "AesCfbEncryptor",
    "AesCtrDecryptor",
    "AesCtrEncryptor",
    "AesEcbDecryptor",
    "AesEcbEncryptor",
    "AesIgeDecryptor",
    "AesIgeEncryptor",
    "AesOfbDecryptor",
    "AesOfbEncryptor",
    "AesPcbcDecryptor",
    "AesPcbcEncryptor",
    "AesXtsDecryptor",
    "AesXtsEncryptor",
    "ChaCha20",
    "Salsa20",
    "XChaCha20",
    "XSalsa20",
    "XorCipher",
    "xor",
    "xts_tweak",
}


def test_unauthenticated_and_legacy_ciphers_live_in_hazmat_only() -> None:
    from streamcrypt import primitives
    from streamcrypt.primitives import hazmat

    assert set(hazmat.__all__) == HAZMAT
    assert not HAZMAT & set(primitives.__all__)
    assert not HAZMAT & set(dir(primitives)) - {"hazmat"}
    for name in HAZMAT:
        assert getattr(hazmat, name).__module__.startswith("streamcrypt.primitives._")
        with pytest.raises(AttributeError):
            getattr(primitives, name)


def test_the_top_level_namespace_lists_what_a_user_calls() -> None:
    """``dir(streamcrypt)`` and ``help(streamcrypt)`` show the calls, the key types and
    the subpackages, not plumbing (the lazy-export helper, the demo)."""
    import pydoc

    shown = {name for name in dir(streamcrypt) if not name.startswith("_")}
    assert set(streamcrypt.__all__) | {"open"} <= shown
    assert not {"lazy", "demo", "deprecation", "formats", "TYPE_CHECKING"} & shown
    page = pydoc.render_doc(streamcrypt, renderer=pydoc.plaintext)
    contents = page.split("PACKAGE CONTENTS", 1)[1].split("\n\n", 1)[0].split()
    # (``deprecation`` goes with the last shim of the codecs that still use it.)
    assert not {"lazy", "demo", "formats", "ecies"} & set(contents), contents


@pytest.mark.parametrize(
    "name", ["streamcrypt.keys", "streamcrypt.primitives", "streamcrypt.primitives.hazmat"]
)
def test_a_lazy_package_shows_type_checkers_what_it_exports(name: str) -> None:
    """A lazy package names each export in its table (``__all__`` and the run-time
    import come from it) and again under ``if TYPE_CHECKING:`` for type checkers: the two
    agree, name for name and module for module."""
    package = _import(name)
    tree = ast.parse(Path(inspect.getfile(package)).read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    seen: list[str] = []
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        home = importlib.import_module("." * node.level + node.module, package.__package__)
        for alias in node.names:
            assert alias.asname == alias.name, f"{name}: import {alias.name} as itself"
            assert getattr(package, alias.name) is getattr(home, alias.name), alias.name
            seen.append(alias.name)
    assert sorted(seen) == sorted(package.__all__)


#: Parameters typed ``Any`` on purpose: options passed through to fsspec or a filesystem
#: object it made, and ``hash_tap``'s options, which depend on the tap's name.
ANY_ALLOWED = {"storage_options", "fs", "options"}


def _signatures() -> list[tuple[str, inspect.Signature]]:
    found: list[tuple[str, inspect.Signature]] = []
    seen: set[int] = set()
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            members = (
                [(f"{name}.{m}", v) for m, v in vars(obj).items() if not m.startswith("_")]
                + [(f"{name}.__init__", vars(obj).get("__init__"))]
                if isinstance(obj, type)
                else [(name, obj)]
            )
            for where, member in members:
                function = getattr(member, "__func__", member)
                if not callable(function) or isinstance(function, type):
                    continue
                try:
                    found.append((f"{module_name}.{where}", inspect.signature(function)))
                except (TypeError, ValueError):
                    continue
    return found


def test_public_signatures_name_no_private_type_and_no_needless_any() -> None:
    """A public function or constructor whose parameter is typed by a private class (a
    user cannot make one) or by ``Any`` (issue 26: EncryptedFile took ``_Writer``, Feeder
    ``list[_Stage]``, OffloadPolicy.run ``*args: Any``) is plumbing showing."""
    bad = []
    signatures = _signatures()
    for where, signature in signatures:
        for p in signature.parameters.values():
            hint = str(p.annotation)
            private = [w for w in re.findall(r"[\w.]+", hint) if w.split(".")[-1][:1] == "_"]
            private = [w for w in private if w.split(".")[-1] not in ("_T", "_empty")]
            if private or (re.search(r"\bAny\b", hint) and p.name not in ANY_ALLOWED):
                bad.append(f"{where}({p.name}: {hint})")
    assert len(signatures) > 500
    assert not bad


#: Issue 26: rooms a newcomer can find; a module past this is split by concern.
MODULE_LINES = 1000


def test_no_module_is_over_a_thousand_lines() -> None:
    long = {
        str(rel): n
        for rel in _sources()
        if (n := len((ROOT / rel).read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}


def test_no_deprecation_module_or_shim() -> None:
    """Nothing was released: an old name is changed at its callers, never kept as an alias
    that warns (issue 26)."""
    shims = [
        str(rel)
        for rel in _sources()
        if "deprecat" in rel.name or "DeprecationWarning" in (ROOT / rel).read_text()
    ]
    assert shims == []


#: Parameters that must be bytes-like: ``bytes(16)`` is sixteen zero bytes, so ``bytes()``
#: on one of them turns an ``int`` into a fixed salt, nonce or AAD (abc.as_bytes refuses).
BYTES_PARAMETERS = {
    "aad",
    "ad",
    "salt",
    "info",
    "nonce",
    "nonce_prefix",
    "keyid",
    "person",
    "iv",
    "tweak",
    "context",
    "tag",
    "mac",
}


def test_no_bytes_like_parameter_goes_through_bytes() -> None:
    found = [
        f"{rel}:{node.lineno} bytes({node.args[0].id})"
        for rel in _sources()
        for node in ast.walk(ast.parse((ROOT / rel).read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "bytes"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in BYTES_PARAMETERS
    ]
    assert found == []


#: Parameters that carry the data itself: ``bytes(16)`` of one encrypts sixteen zero bytes
#: in place of a refusal (``ecies.encrypt(key, 16)`` did, as did ``Eme`` and the
#: content chunker); abc.as_bytes / as_buffer refuse an ``int`` or a ``str``, typed.
DATA_PARAMETERS = {"data", "plaintext", "ciphertext", "message", "payload", "chunk"}


def test_no_data_parameter_goes_through_bytes() -> None:
    """A function's own data parameter never goes through ``bytes()`` (its locals of
    those names may: a list of ints made in the function is its own business), but in
    ``abc.as_bytes``, the rule itself, once it knows the type."""
    found = []
    for rel in _sources():
        for fn in ast.walk(ast.parse((ROOT / rel).read_text())):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if (str(rel), fn.name) == ("abc.py", "as_bytes"):
                continue
            args = fn.args
            params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            found += [
                f"{rel}:{node.lineno} {fn.name}: bytes({node.args[0].id})"
                for node in ast.walk(fn)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "bytes"
                and len(node.args) == 1
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in DATA_PARAMETERS & params
            ]
    assert found == []


def _ecies_encrypt(data: object) -> object:
    from streamcrypt.codecs import ecies

    return ecies.encrypt(ecies.generate_keypair()[1], data)  # type: ignore[arg-type]


def _eme(data: object) -> object:
    from streamcrypt.primitives import Eme

    return Eme(bytes(32)).encrypt(bytes(16), data)  # type: ignore[arg-type]


def _chunker(data: object) -> object:
    from streamcrypt.primitives import ContentChunker

    return ContentChunker().update(data)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [16, "sixteen bytes!!!"], ids=["int", "str"])
@pytest.mark.parametrize("call", [_ecies_encrypt, _eme, _chunker])
def test_data_that_is_not_bytes_like_is_refused_not_taken_as_zero_bytes(
    call: typing.Callable[[object], object], bad: object
) -> None:
    """Each took an ``int`` as that many zero bytes and encrypted (or chunked) them."""
    from streamcrypt.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="must be bytes-like"):
        call(bad)


@pytest.mark.parametrize(
    ("options", "what"),
    [
        ({"format": "ece", "salt": 16}, "salt"),  # was sixteen zero bytes: one salt for all
        ({"format": "ece", "keyid": 3}, "keyid"),
        ({"format": "ece", "salt": "s" * 16}, "salt"),
        ({"format": "tink", "aad": 5}, "aad"),
        ({"aad": 5}, "aad"),
    ],
)
def test_an_int_or_str_where_bytes_go_is_refused_typed(
    options: dict[str, object], what: str
) -> None:
    from streamcrypt.errors import InvalidParameterError

    key = bytes(16) if options.get("format") == "ece" else bytes(32)
    with pytest.raises(InvalidParameterError, match=f"{what}=? must be bytes-like"):
        streamcrypt.encrypt_bytes(b"x", key=key, **options)  # type: ignore[arg-type]


def test_as_bytes_takes_every_buffer_and_refuses_the_rest() -> None:
    import array

    from streamcrypt.abc import as_buffer, as_bytes
    from streamcrypt.errors import InvalidParameterError

    data = b"abcdef"
    assert as_bytes(data, "x") is data
    assert as_bytes(bytearray(data), "x") == data
    assert as_bytes(memoryview(data)[::2], "x") == b"ace"
    # as_buffer copies only what it must: bytes and bytearray as they are, a wider
    # buffer as a byte view of the same memory, a non-contiguous one as its bytes
    block = bytearray(data)
    assert as_buffer(data, "x") is data and as_buffer(block, "x") is block
    words = array.array("H", [1, 2])
    view = as_buffer(words, "x")
    assert isinstance(view, memoryview) and view.format == "B" and bytes(view) == words.tobytes()
    assert as_buffer(memoryview(data)[::2], "x") == b"ace"
    for bad in (16, "salt", None, [1, 2]):
        with pytest.raises(InvalidParameterError, match="x must be bytes-like"):
            as_bytes(bad, "x")  # type: ignore[arg-type]
        with pytest.raises(InvalidParameterError, match="x must be bytes-like"):
            as_buffer(bad, "x")  # type: ignore[arg-type]
