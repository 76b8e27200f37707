"""Check what `make dist` built: metadata, contents, and the wheel installed for real.

``python .ci/check_dist.py DIST_DIR`` (run by ``make dist`` after ``python -m build``):

1. **Metadata** of the wheel and the sdist, parsed and validated field by field with
   ``packaging.metadata`` (what ``twine check`` does, offline and without twine's
   dependencies): name, version (that of ``streamcrypt.__version__``), licence expression
   and file, the README as a Markdown description, every extra, the console script.
2. **Contents**: the wheel holds the package, its ``py.typed`` and the browser module
   (``streamcrypt/web/ece.js`` and ``ece.d.ts``) and nothing of the
   source tree (tests, docs, bench); the sdist holds what a clone needs to run the tests
   (the vendored vectors included) and build the docs.
3. **Smoke test** per extra: a fresh venv with the wheel and that extra alone (and one
   with no extra), pinned by constraints.txt, run from an empty directory so that the
   source tree cannot be imported by mistake: import, a round trip in memory and through
   ``streamcrypt.open``, the extra's own import, ``streamcrypt --help`` (which must not
   point into the source tree) and a key-file round trip with the command.

Exits non-zero, naming what failed, at the first failure.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

from packaging.metadata import Metadata

REPO = Path(__file__).resolve().parent.parent

#: What each extra must make importable in the smoke test (none: the base install).
EXTRA_IMPORTS = {
    "": [],
    "aiohttp": ["aiohttp"],
    "asgi": ["starlette"],
    "cli": ["rich"],
    "backup": ["pyfastcdc", "zstandard", "fsspec", "streamcrypt.backup"],
    "server": ["uvicorn", "streamcrypt.backup._server"],
    "pkcs11": ["pkcs11", "streamcrypt.keys._pkcs11"],
    "bench": ["matplotlib"],
    "dask": ["distributed", "fsspec", "streamcrypt.cluster"],
    "legacy": ["Crypto.Cipher.Salsa20"],
    "monocypher": ["monocypher"],
    "ecies": ["coincurve"],
    "argon2": ["argon2"],
    "fuzz": ["atheris"],
    "docs": ["sphinx", "myst_parser", "furo"],
    "dist": ["build", "hatchling"],
    "test": ["pytest", "pyrage", "tink", "hypothesis"],
}

SMOKE = r"""
import importlib, os, sys, anyio, streamcrypt
from streamcrypt import transports

extra, wanted = sys.argv[1], sys.argv[2:]
assert streamcrypt.__file__.startswith(sys.prefix), streamcrypt.__file__  # the wheel, not the tree
ring = streamcrypt.KeyRing([streamcrypt.SecretKey.generate(key_id="smoke")])
data = os.urandom(300_000)
assert streamcrypt.decrypt_bytes(streamcrypt.encrypt_bytes(data, ring), ring) == data

async def files() -> None:
    async with streamcrypt.open("smoke.sc", "wb", key=ring) as f:
        await f.write(data)
    async with streamcrypt.open("smoke.sc", "rb", key=ring) as f:
        assert await f.read() == data

anyio.run(files)
for name in wanted:
    importlib.import_module(name)
if extra in ("aiohttp", "test"):
    from aiohttp import web
    http_keys = streamcrypt.KeyRing()
    http_keys.rotate(16)  # RFC 8188 keys are 16 bytes
    transports.setup_encryption(web.Application(), key=http_keys)
elif extra == "":
    try:
        transports.setup_encryption
    except ModuleNotFoundError as exc:
        assert "pip install 'streamcrypt[aiohttp]'" in str(exc), exc
    else:
        raise AssertionError("aiohttp is importable in the base install")
print("smoke ok:", extra or "(no extra)")
"""


def fail(message: str) -> None:
    sys.exit(f"check_dist: {message}")


def check_metadata(raw: bytes, where: str, project: dict[str, object]) -> None:
    meta = Metadata.from_email(raw, validate=True)  # raises on any invalid field
    version = str(project["version"])
    if (meta.name, str(meta.version)) != (project["name"], version):
        fail(f"{where}: {meta.name} {meta.version}, pyproject.toml says {version}")
    if str(meta.license_expression) != project["license"]:
        fail(f"{where}: licence {meta.license_expression!r}")
    if meta.description_content_type != "text/markdown" or not meta.description:
        fail(f"{where}: the README is not the Markdown description")
    if "make demo" not in meta.description:
        fail(f"{where}: the description is not the README")
    extras = set(project["optional-dependencies"])  # type: ignore[call-overload]
    if set(meta.provides_extra or ()) != extras:
        fail(f"{where}: extras {meta.provides_extra}, pyproject.toml has {sorted(extras)}")
    if "LICENSE" not in (meta.license_files or []):
        fail(f"{where}: no LICENSE file declared")


def check_wheel(wheel: Path, project: dict[str, object]) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = f"streamcrypt-{project['version']}.dist-info"
        check_metadata(z.read(f"{info}/METADATA"), wheel.name, project)
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    for script in (
        "streamcrypt = streamcrypt.cli:run",
        "age-plugin-pkcs11 = streamcrypt.cli._age_plugin_pkcs11:main",
    ):
        if script not in entry_points:
            fail(f"the wheel lacks the console script {script.split()[0]}")
    for needed in (
        "streamcrypt/__init__.py",
        "streamcrypt/py.typed",
        "streamcrypt/web/ece.js",  # the browser module and its types (docs/browser.md)
        "streamcrypt/web/ece.d.ts",
        f"{info}/licenses/LICENSE",
    ):
        if needed not in names:
            fail(f"the wheel lacks {needed}")
    stray = [n for n in names if not n.startswith(("streamcrypt/", f"{info}/"))]
    if stray:
        fail(f"the wheel holds files outside the package: {stray[:5]}")


def check_sdist(sdist: Path, project: dict[str, object]) -> None:
    top = f"streamcrypt-{project['version']}"
    with tarfile.open(sdist) as t:
        names = set(t.getnames())
        pkg_info = t.extractfile(f"{top}/PKG-INFO")
        assert pkg_info is not None
        raw = pkg_info.read()
    check_metadata(raw, sdist.name, project)
    for needed in (
        "README.md",
        "CHANGELOG.md",
        "LICENSE",
        "constraints.txt",
        "docs/conf.py",
        "docs/CLI.md",
        "tests/support.py",
        "tests/js/ece.test.mjs",
        "tests/vectors/README.md",
        "tests/vectors/SHA256SUMS",
        "tests/vectors/age-testkit/x25519",
    ):
        if f"{top}/{needed}" not in names:
            fail(f"the sdist lacks {needed}")


def run(args: list[str], cwd: Path) -> str:
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        fail(f"{' '.join(args)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
    return out.stdout


def smoke(wheel: Path, extra: str, imports: list[str], scratch: Path) -> None:
    venv = scratch / f"venv-{extra or 'none'}"
    work = scratch / f"work-{extra or 'none'}"
    work.mkdir()
    run([sys.executable, "-m", "venv", str(venv)], scratch)
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    spec = f"{wheel}[{extra}]" if extra else str(wheel)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run([*pip, "-c", str(REPO / "constraints.txt"), spec], work)
    print(run([str(python), "-c", SMOKE, extra, *imports], work).strip())
    helptext = run([str(bin_dir / "streamcrypt"), "--help"], work)
    if "docs/" in helptext or "encrypt" not in helptext:
        fail(f"[{extra}] streamcrypt --help points into the source tree:\n{helptext}")
    (work / "note.txt").write_text("smoke\n")
    streamcrypt = str(bin_dir / "streamcrypt")
    run([streamcrypt, "keygen", "-o", "k.key"], work)
    run([streamcrypt, "encrypt", "-k", "k.key", "-o", "note.sc", "note.txt"], work)
    if run([streamcrypt, "decrypt", "-k", "k.key", "note.sc"], work) != "smoke\n":
        fail(f"[{extra}] the command's round trip changed the data")
    if "docs/" in (work / "k.key").read_text():
        fail(f"[{extra}] the key file points into the source tree")


def main() -> None:
    dist = Path(sys.argv[1]).resolve()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        fail(f"expected one wheel and one sdist in {dist}, found {wheels + sdists}")
    check_wheel(wheels[0], project)
    check_sdist(sdists[0], project)
    print(f"metadata and contents ok: {wheels[0].name}, {sdists[0].name}")
    missing = set(project["optional-dependencies"]) - set(EXTRA_IMPORTS)
    if missing:
        fail(f"extras without a smoke test: {sorted(missing)} (add them to EXTRA_IMPORTS)")
    with tempfile.TemporaryDirectory(prefix="streamcrypt-dist-") as tmp:
        for extra, imports in EXTRA_IMPORTS.items():
            smoke(wheels[0], extra, imports, Path(tmp))
    print("dist: all checks passed")


if __name__ == "__main__":
    main()
