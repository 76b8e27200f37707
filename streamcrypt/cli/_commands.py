"""``keygen``, ``hash``, ``sign``, ``verify``, ``serve``, ``connect`` and ``bench``."""

from __future__ import annotations

import argparse
import base64
import binascii
import hmac
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .._lazy import LazyModule
from ..errors import FormatError, InvalidSignatureError
from ._errors import EXIT_DATA, EXIT_IO, EXIT_USAGE, CliError, describe
from ._io import Input, Progress, check_output, open_output, open_output_now
from ._keyfiles import (
    load_key_file,
    new_key_text,
    parse_public_key,
    public_lines,
    write_key_file,
)

if TYPE_CHECKING:
    import anyio
    import anyio.abc

    from .. import primitives as _primitives
    from .. import transports as _transports
else:  # imported by the commands that use them: keygen needs none (start-up)
    anyio = LazyModule("anyio", "anyio.abc")
    _primitives = LazyModule("streamcrypt.primitives")
    _transports = LazyModule("streamcrypt.transports")  # sockets, TLS, files


def _say(message: str) -> None:
    print(f"streamcrypt: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------- keygen


def run_keygen(args: argparse.Namespace) -> int:
    """Write a new key file (mode 0600) and print its public half, if any, to stdout; or,
    without ``-o``, the key to stdout and its public half to stderr, as age-keygen does.
    ``-y``: print the public half of each key in an existing key file instead."""
    to_stdout = args.output in (None, "-")
    if args.pkcs11 is not None:
        return _keygen_pkcs11(args)
    if args.public:
        if args.type is not None or args.key_id is not None or args.size or args.force:
            raise CliError("-y takes only an input key file and -o", EXIT_USAGE)
        kf = load_key_file(args.input or "-")
        out = "".join(line + "\n" for line in public_lines(kf))
        if to_stdout:
            sys.stdout.write(out)
            sys.stdout.flush()
        else:
            check_output(args.output)
            write_key_file(args.output, out, force=True, mode=0o644)
        return 0
    if args.input is not None:
        raise CliError("keygen takes no input file (except with -y)", EXIT_USAGE)
    check_output(args.output)
    text, public = new_key_text(args.type or "symmetric", args.key_id, args.size)
    if to_stdout:
        sys.stdout.write(text)
        sys.stdout.flush()
        if public is not None:
            print(f"Public key: {public}", file=sys.stderr, flush=True)
        return 0
    write_key_file(args.output, text, force=args.force)
    if public is not None:
        print(public, flush=True)
    return 0


def _keygen_pkcs11(args: argparse.Namespace) -> int:
    """``keygen --pkcs11 URI``: a new AES-256 key in the token, non-extractable; prints
    the URI that names it (no PIN: the URI's ``pin-source=env:VAR`` gives it)."""
    if args.public or args.input or args.output or args.type or args.size or args.force:
        raise CliError("--pkcs11 takes only the URI and --key-id", EXIT_USAGE)
    if "pin-source=env:" not in args.pkcs11:
        raise CliError(
            "--pkcs11 needs the PIN's source in the URI: ...&pin-source=env:VAR", EXIT_USAGE
        )
    from ..keys import Pkcs11Key  # here: only this form needs it (start-up)

    key = Pkcs11Key.generate(args.pkcs11, key_id=args.key_id)
    print(args.pkcs11, flush=True)
    print(f"made {key!r}, not extractable", file=sys.stderr, flush=True)
    return 0


# --------------------------------------------------------------------------------- hash


def _hash_tap(algo: str, key: bytes | None) -> _primitives.HashTap:
    if algo == "blake3":
        return _primitives.Blake3Tap(key=key)
    if key is not None:
        return _primitives.HmacTap(key, algo)
    return _primitives.Sha256Tap() if algo == "sha256" else _primitives.Sha512Tap()


def _digest(
    inp: Input,
    tap: _primitives.HashTap | _primitives.Ed25519phSigner | _primitives.Ed25519phVerifier,
) -> None:
    """Feed all of ``inp`` to ``tap``, read in this thread."""
    while chunk := inp.read():
        tap.update(chunk)


def _hash_one(
    name: str, algo: str, key: bytes | None, quiet: bool, *, report: bool = True
) -> str | None:
    """The hex digest of one input (``-`` is stdin); ``None`` on an I/O error (reported on
    stderr if ``report``)."""
    try:
        inp = Input(name)
        try:
            tap = _hash_tap(algo, key)
            with Progress(f"hashing {inp.name}", inp.size, enabled=not quiet) as progress:
                inp.progress = progress
                _digest(inp, tap)
            tap.finalize()
        finally:
            inp.close()
    except OSError as exc:
        if report:
            _say(f"error: {describe(exc)}")
        return None
    return tap.hexdigest()


def _check_lines(path: str) -> list[tuple[str, str]]:
    """``(digest, name)`` from the lines of a checksum file (``-`` is stdin), as sha256sum
    writes them: ``<hex>  <name>`` or ``<hex> *<name>``."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = describe(exc) if isinstance(exc, OSError) else "not UTF-8 text"
        raise CliError(f"cannot read the checksum file {path}: {reason}", EXIT_IO) from None
    entries: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, sep, name = line.partition(" ")
        if not sep or name[:1] not in (" ", "*") or not name[1:]:
            raise CliError(
                f"{path} line {number} is not '<hex digest>  <name>' (as sha256sum writes)",
                EXIT_USAGE,
            )
        entries.append((digest.lower(), name[1:]))
    if not entries:
        raise CliError(f"the checksum file {path} lists no file", EXIT_USAGE)
    return entries


def _run_check(args: argparse.Namespace, key: bytes | None) -> int:
    """``hash --check``: recompute each listed digest; ``<name>: OK`` or ``FAILED``."""
    failed = unreadable = total = 0
    for path in args.files or ["-"]:
        for digest, name in _check_lines(path):
            total += 1
            got = _hash_one(name, args.algo, key, args.quiet, report=False)
            if got is None:
                unreadable += 1
                print(f"{name}: FAILED open or read", flush=True)
            elif hmac.compare_digest(got, digest):
                print(f"{name}: OK", flush=True)
            else:
                failed += 1
                print(f"{name}: FAILED", flush=True)
    if failed:
        raise CliError(
            f"{failed} of {total} computed digests did not match ({args.algo}"
            + (", keyed" if key is not None else "")
            + ")",
            EXIT_DATA,
        )
    if unreadable:
        raise CliError(f"{unreadable} of {total} listed files could not be read", EXIT_IO)
    return 0


def run_hash(args: argparse.Namespace) -> int:
    """Print ``<hex digest>  <name>`` for each input, as sha256sum does (``-`` is stdin);
    with ``--check``, verify the digests listed in the given files instead."""
    key = None
    if args.hmac_key:
        kf = load_key_file(args.hmac_key)
        kf.require("symmetric", purpose="--hmac-key needs a symmetric key file")
        assert kf.symmetric is not None
        key = kf.symmetric.secret_bytes()
    if args.check:
        return _run_check(args, key)
    status = 0
    for name in args.files or ["-"]:
        digest = _hash_one(name, args.algo, key, args.quiet)
        if digest is None:
            status = EXIT_IO
            continue
        print(f"{digest}  {name}", flush=True)
    return status


# ---------------------------------------------------------------------- sign and verify


def run_sign(args: argparse.Namespace) -> int:
    """Ed25519ph over the input; the base64 signature (one line) to stdout or ``-o``."""
    check_output(args.output)
    kf = load_key_file(args.key)
    kf.require("ed25519", purpose="sign needs an Ed25519 key file (keygen --type ed25519)")
    assert kf.ed25519 is not None
    signer = _primitives.Ed25519phSigner(kf.ed25519)
    inp = Input(args.input)
    try:
        with Progress("signing", inp.size, enabled=not args.quiet) as progress:
            inp.progress = progress
            _digest(inp, signer)
        signer.finalize()
        out = open_output_now(args.output)
        try:
            out.put(base64.b64encode(signer.signature()) + b"\n")
        except BaseException:
            out.abort_now()
            raise
        out.commit_now()
    finally:
        inp.close()
    return 0


def _read_signature(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise CliError(
            f"cannot read the signature {path}: {exc.strerror or exc}", EXIT_IO
        ) from None
    if len(raw) == _primitives.ED25519_SIGNATURE_SIZE:  # a raw binary signature
        return raw
    try:
        return base64.b64decode(raw.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise FormatError(f"the signature {path} is neither base64 nor 64 raw bytes") from None


def run_verify(args: argparse.Namespace) -> int:
    """Check an Ed25519ph signature over the input; prints ``<name>: OK`` on success."""
    public = parse_public_key(args.public_key, kind="ed25519")
    inp = Input(args.input)
    try:
        signature = _read_signature(args.signature)
        verifier = _primitives.Ed25519phVerifier(public, signature)
        with Progress("verifying", inp.size, enabled=not args.quiet) as progress:
            inp.progress = progress
            _digest(inp, verifier)
        try:
            verifier.finalize()
        except InvalidSignatureError:
            raise InvalidSignatureError(
                f"the signature does not verify for {inp.name}: wrong public key, altered "
                "input or altered signature"
            ) from None
    finally:
        inp.close()
    print(f"{inp.name}: OK", flush=True)
    return 0


# ------------------------------------------------------------------- serve and connect


def _stream_options(args: argparse.Namespace, *, server: bool) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.psk_file:
        kf = load_key_file(args.psk_file)
        kf.require("symmetric", purpose="--psk-file needs a symmetric key file")
        options["psk"] = kf.symmetric
    if args.key:
        if args.psk_file:
            raise CliError("give --psk-file or -k (static keys), not both", EXIT_USAGE)
        kf = load_key_file(args.key)
        kf.require("x25519", "age", purpose="-k needs an X25519 identity (keygen --type x25519)")
        if len(kf.x25519_raw) != 1:
            raise CliError(f"{kf.path} must hold exactly one X25519 identity", EXIT_USAGE)
        options["static_key"] = kf.x25519_raw[0]
    if server:
        allowed = {parse_public_key(v, kind="x25519") for v in args.allow}
        if allowed:
            if not args.key:
                raise CliError("--allow needs -k (the server's own static key)", EXIT_USAGE)
            options["accept_peer"] = lambda peer: peer in allowed
        if not options:
            raise CliError("serve needs --psk-file KEYFILE or -k X25519KEY", EXIT_USAGE)
    else:
        if args.server_key:
            if args.psk_file:
                raise CliError("give --psk-file or --server-key, not both", EXIT_USAGE)
            options["server_public_key"] = parse_public_key(args.server_key, kind="x25519")
        elif not args.psk_file:
            raise CliError(
                "connect needs --psk-file KEYFILE or --server-key PUBKEY (with -k for a "
                "client key)",
                EXIT_USAGE,
            )
    return options


async def _pipe(stream: _transports.EncryptedStream, output: str | None) -> None:
    """stdin -> stream and stream -> ``output`` until both directions have ended.

    The close record goes out only after stdin ended; any other end (an error, Ctrl-C)
    aborts the session, so the peer fails instead of taking a partial transfer for a
    whole one. What comes in is committed (``-o FILE`` renamed into place) only after
    the peer's authenticated close; if the peer aborted, the temporary is removed and
    the peer's error (:class:`TruncatedStreamError`, exit 1) ends the command."""
    stdin = Input(None)
    out = await open_output(output)

    async def outgoing() -> None:
        async for chunk in stdin.chunks():
            await stream.send(chunk)
        await stream.send_eof()

    async def incoming() -> None:
        while True:
            try:
                data = await stream.receive()
            except anyio.EndOfStream:
                return
            await out.write(data)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(outgoing)
            tg.start_soon(incoming)
        await out.commit()
    except BaseException:
        await out.abort()
        raise
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()  # an abort unless outgoing() sent the close record


def _run_async(fn: Callable[[], Awaitable[None]]) -> None:
    try:
        anyio.run(fn)
    except BaseExceptionGroup as group:
        exc: BaseException = group
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        raise exc from None


def run_serve(args: argparse.Namespace) -> int:
    """Listen, run one encrypted session with the first client that completes the
    handshake (stdin to it, it to stdout), then exit."""
    options = _stream_options(args, server=True)
    check_output(args.output)

    async def main() -> None:
        listener = await anyio.create_tcp_listener(local_host=args.host, local_port=args.port)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        if not args.quiet:
            _say(f"listening on {args.host}:{port}")
        busy = False
        async with listener, anyio.create_task_group() as tg:

            async def handle(transport: Any) -> None:
                nonlocal busy
                if busy:
                    await transport.aclose()
                    return
                try:
                    stream = await _transports.EncryptedStream.wrap(
                        transport, server_side=True, **options
                    )
                except Exception as exc:
                    _say(
                        f"warning: the handshake with a client failed "
                        f"({type(exc).__name__}: {describe(exc)}); still listening"
                    )
                    return
                if busy:
                    await stream.aclose()
                    return
                busy = True
                try:
                    await _pipe(stream, args.output)
                finally:
                    tg.cancel_scope.cancel()

            tg.start_soon(listener.serve, handle)

    _run_async(main)
    return 0


def run_connect(args: argparse.Namespace) -> int:
    """Connect, handshake, then stdin to the server and the server to stdout."""
    options = _stream_options(args, server=False)
    check_output(args.output)

    async def main() -> None:
        try:
            transport = await anyio.connect_tcp(args.host, args.port)
        except OSError as exc:
            raise CliError(
                f"cannot connect to {args.host}:{args.port}: {describe(exc)}", EXIT_IO
            ) from None
        stream = await _transports.EncryptedStream.wrap(transport, **options)
        await _pipe(stream, args.output)

    _run_async(main)
    return 0


# -------------------------------------------------------------------------------- clean


def run_clean(args: argparse.Namespace) -> int:
    """Remove the temporaries that killed runs (``kill -9``, a crash) left beside their
    outputs; prints each path removed, and says how many younger ones were kept."""
    status = 0
    for directory in args.directories or ["."]:
        try:
            removed = _transports.remove_stale_temporaries(directory, older_than=args.older_than)
            kept = _temporaries_left(directory)
        except OSError as exc:
            _say(f"error: {describe(exc)}")
            status = EXIT_IO
            continue
        for path in removed:
            print(path, flush=True)
        if kept:
            _say(
                f"kept {kept} temporar{'y' if kept == 1 else 'ies'} in {directory} modified "
                f"less than {args.older_than:g} s ago (a run may still be writing it); "
                "--older-than 0 removes them once no streamcrypt writes there"
            )
    return status


def _temporaries_left(directory: str) -> int:
    """How many output temporaries (``.NAME.streamcrypt-<16 hex>.tmp``) remain."""
    with os.scandir(directory) as entries:
        return sum(
            1
            for e in entries
            if e.name.startswith(".") and ".streamcrypt-" in e.name and e.name.endswith(".tmp")
        )


# -------------------------------------------------------------------------------- bench


def run_bench(args: argparse.Namespace) -> int:
    """Run ``python -m bench`` from the working directory (a source checkout)."""
    import subprocess
    from pathlib import Path

    here = Path.cwd()
    if not (here / "bench" / "__main__.py").is_file():
        _say(
            "error: the benchmarks ship with the source checkout, not the package: run "
            "'make bench' or 'python -m bench [--quick]' (or 'streamcrypt bench') from "
            "the streamcrypt repository"
        )
        return EXIT_USAGE
    command = [sys.executable, "-m", "bench", *(["--quick"] if args.quick else [])]
    return subprocess.call(command, cwd=here)
