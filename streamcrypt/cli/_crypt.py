"""``streamcrypt encrypt`` and ``streamcrypt decrypt``: every format, streaming, atomic outputs.

Theory of operation
-------------------
Everything that can fail before data moves happens first, synchronously: key files are
read, recipients parsed, the passphrase prompted for, the options checked against the
format. Then the data streams in this thread, without an event loop (:mod:`._drive`):
the input is read in 1 MiB pieces, each pushed through the format's sans-I/O transforms
(segments sealed or opened by the calling thread and a helper side by side) and queued
for the output's writer thread, so memory stays bounded by a piece per stage and the
writer's queue.

Decryption releases only segments that verified. To a file (``-o``) the output is a
temporary beside the destination, renamed into place only after the whole stream
verified, and removed on any failure: a failed decryption leaves nothing behind. To
standard output the verified segments are written as they come (a pipe cannot be taken
back); a failure later in the stream ends the command with a non-zero exit code and a
message saying how much was written.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from ..abc import Transform
from ..codecs.armor import ArmorDecoder, ArmorEncoder, is_armored
from ..errors import (
    FormatError,
    InvalidKeySizeError,
    InvalidPublicKeyError,
    StreamCryptError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from ..keys import INTERACTIVE, MODERATE, SENSITIVE, Argon2Params
from ._cluster import run_cluster
from ._drive import drive, keep_freed_memory
from ._errors import EXIT_DATA, EXIT_KEY, EXIT_USAGE, CliError, describe, exit_code
from ._io import Input, Output, Progress, StdoutOutput, check_output, open_output_now
from ._keyfiles import (
    AGE_IDENTITY_KINDS,
    AGE_RECIPIENT_KINDS,
    KeyFile,
    KeyFileError,
    load_key_file,
    parse_public_key,
)
from ._lazymodule import LazyModule
from ._options import AWS_KEY_NAME, AWS_NAMESPACE

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from ..codecs import age as _age
    from ..codecs import aws as _aws
    from ..codecs import container as _container
    from ..codecs import envelope as _envelope
    from ..codecs import rclone as _rclone
    from ..codecs import tink as _tink
else:  # each format is imported when the command first uses it (start-up)
    _age = LazyModule("streamcrypt.codecs.age")
    _aws = LazyModule("streamcrypt.codecs.aws")
    _container = LazyModule("streamcrypt.codecs.container")
    _envelope = LazyModule("streamcrypt.codecs.envelope")
    _rclone = LazyModule("streamcrypt.codecs.rclone")
    _tink = LazyModule("streamcrypt.codecs.tink")

__all__ = ["run_decrypt", "run_encrypt"]

KDF_LEVELS: dict[str, Argon2Params] = {
    "interactive": INTERACTIVE,
    "moderate": MODERATE,
    "sensitive": SENSITIVE,
}
_AGE_PREFIXES = (b"age-encryption.org/", b"-----BEGIN AGE ENCRYPTED FILE-----")
#: Options only some formats take (checked with :func:`_reject`).
_RCLONE_ONLY = ("password2_file",)
_AWS_ONLY = ("key_namespace", "key_name", "context")


# ------------------------------------------------------------------------------ options


def _usage(message: str) -> CliError:
    return CliError(message, EXIT_USAGE)


def _first_line(path: str, what: str) -> str:
    """The first line of a secret's file (a passphrase, rclone's password2)."""
    try:
        with open(path, encoding="utf-8") as f:
            line = f.readline().rstrip("\r\n")
    except UnicodeDecodeError:  # its message would show a byte of the secret
        raise KeyFileError(f"the {what} file {path} is not valid UTF-8") from None
    except OSError as exc:
        raise KeyFileError(f"cannot read the {what} file {path}: {describe(exc)}") from None
    if not line:
        raise KeyFileError(f"the {what} file {path} is empty")
    return line


def _read_passphrase(args: argparse.Namespace, *, confirm: bool) -> str | None:
    if args.passphrase and args.passphrase_file:
        raise _usage("give --passphrase or --passphrase-file, not both")
    if args.passphrase_file:
        return _first_line(args.passphrase_file, "passphrase")
    if not args.passphrase:
        return None
    try:  # getpass prompts on /dev/tty: is there one?
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        raise _usage(
            "--passphrase needs a terminal to prompt on; use --passphrase-file FILE"
        ) from None
    phrase = getpass.getpass("Passphrase: ")
    if not phrase:
        raise KeyFileError("the passphrase is empty")
    if confirm and getpass.getpass("Confirm passphrase: ") != phrase:
        raise KeyFileError("the passphrases do not match")
    return phrase


def _aad(args: argparse.Namespace) -> bytes:
    return args.aad.encode("utf-8") if args.aad is not None else b""


@dataclass
class _Keys:
    key: KeyFile | None = None
    identities: list[KeyFile] = field(default_factory=list)
    passphrase: str | None = None
    #: ``-k`` when it holds 16, 24 or 32 raw bytes (an AES key for --format aws): no text
    #: key file is that short.
    raw_key: bytes | None = field(default=None, repr=False)

    def identity_files(self) -> list[KeyFile]:
        files = list(self.identities)
        if self.key is not None and self.key.kind in ("x25519", "age"):
            files.insert(0, self.key)
        return files


def _load_keys(args: argparse.Namespace, *, confirm: bool) -> _Keys:
    keys = _Keys()
    if args.key:
        keys.raw_key = _raw_aes_key(args.key)
        if keys.raw_key is None:
            keys.key = load_key_file(args.key)
    for path in args.identity:
        kf = load_key_file(path)
        kf.require("x25519", "age", purpose="-i takes an identity file")
        keys.identities.append(kf)
    keys.passphrase = _read_passphrase(args, confirm=confirm)
    return keys


def _raw_aes_key(path: str) -> bytes | None:
    """The bytes of ``path`` when it holds exactly 16, 24 or 32 bytes, else ``None``."""
    try:
        if os.path.getsize(path) not in (16, 24, 32):
            return None
        with open(path, "rb") as f:
            raw = f.read(33)
    except OSError:
        return None  # load_key_file reports it
    return raw if len(raw) in (16, 24, 32) else None


def _require_no_raw_key(args: argparse.Namespace, keys: _Keys, fmt: str) -> None:
    if keys.raw_key is not None:
        raise KeyFileError(
            f"{args.key} holds {len(keys.raw_key)} raw bytes, an AES key for --format aws; "
            f"--format {fmt} does not take it"
        )


def _rclone_keys(args: argparse.Namespace, keys: _Keys, why: str) -> _rclone.RcloneKeys:
    """rclone's keys from --passphrase / --passphrase-file and --password2-file."""
    _require_no_raw_key(args, keys, "rclone")
    _reject(args, "rclone", "identity", "aad", *_AWS_ONLY, why=why)
    _reject(args, "rclone", "key", why=why)
    if keys.passphrase is None:
        raise KeyFileError(
            "rclone crypt needs its password: --passphrase (prompt) or --passphrase-file FILE"
        )
    salt = _first_line(args.password2_file, "password2") if args.password2_file else ""
    try:
        return _rclone.RcloneKeys.from_password(keys.passphrase, salt)
    except StreamCryptError as exc:
        raise KeyFileError(describe(exc)) from None


def _aws_keyring(args: argparse.Namespace, keys: _Keys, why: str) -> _aws.RawAesKeyring:
    """The raw AES keyring of -k (16, 24 or 32 raw bytes) and its names."""
    _reject(args, "aws", "identity", "passphrase", "passphrase_file", "aad", why=why)
    _reject(args, "aws", *_RCLONE_ONLY, why=why)
    if keys.raw_key is None:
        if args.key:
            raise KeyFileError(
                f"{args.key} is not a raw AES key: --format aws takes -k FILE holding "
                "exactly 16, 24 or 32 bytes"
            )
        raise KeyFileError("--format aws needs -k KEYFILE (a raw AES key of 16, 24 or 32 bytes)")
    return _aws.RawAesKeyring(
        args.key_namespace or AWS_NAMESPACE, args.key_name or AWS_KEY_NAME, keys.raw_key
    )


def _aws_context(args: argparse.Namespace) -> dict[str, str]:
    context: dict[str, str] = {}
    for item in args.context:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _usage(f"--context takes KEY=VALUE, not {item!r}")
        context[name] = value
    return context


def _reject(args: argparse.Namespace, fmt: str, *names: str, why: str | None = None) -> None:
    """A usage error for any of the options ``names`` given, though ``fmt`` ignores them.

    ``why`` says how the format was chosen when ``--format`` was not given (detected from
    the input, inferred from the keys), so the message never names an option the user did
    not type."""
    for name in names:
        value = getattr(args, name, None)
        if value not in (None, False, [], ""):
            flag = "--" + name.replace("_", "-")
            if args.format or why is None:
                raise _usage(f"{flag} does not apply to --format {fmt}")
            raise _usage(f"{flag} does not apply: {why}")


@dataclass
class Plan:
    """What to run: the transform stages, built once the input's first bytes are known."""

    fmt: str
    build: Callable[[bytes], list[Transform]]
    check: Callable[[bytes], None] = lambda head: None
    peek: int = 0


# ------------------------------------------------------------------------------ encrypt


def _recipient_texts(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Every recipient of ``-r`` and ``-R``, each with where it came from (for messages)."""
    texts = [(t.strip(), f"-r recipient number {n}") for n, t in enumerate(args.recipient, 1)]
    for path in args.recipients_file:
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            reason = describe(exc) if isinstance(exc, OSError) else "not UTF-8 text"
            raise KeyFileError(f"cannot read the recipients file {path}: {reason}") from None
        found = [
            (line.strip(), f"{path} line {n}")
            for n, line in enumerate(lines, 1)
            if line.strip() and not line.strip().startswith("#")
        ]
        if not found:
            raise KeyFileError(f"the recipients file {path} holds no recipient")
        texts.extend(found)
    return texts


def _bad_recipient(text: str, where: str, exc: Exception) -> KeyFileError:
    """The message for a recipient that does not parse; never echoes it (it may be a
    secret key pasted by mistake)."""
    hint = ""
    if where.startswith("-r") and os.path.isfile(text):
        hint = f" ({text} is a file: give a file of recipients with -R)"
    elif isinstance(exc, FormatError) and not isinstance(exc, UnsupportedFormatError):
        hint = f"; a recipient is {AGE_RECIPIENT_KINDS} (age) or sc-x25519-pub1... (native)"
    return KeyFileError(f"{where} does not parse: {exc}{hint}")


def _encrypt_format(args: argparse.Namespace, keys: _Keys) -> str:
    if args.format:
        return str(args.format)
    if keys.raw_key is not None:
        return "aws"
    if keys.key is not None and keys.key.kind == "tink":
        return "tink"
    if keys.key is not None and keys.key.kind == "age":
        return "age"
    if (
        args.armor
        or args.work_factor is not None
        or any(r.lower().startswith(("age1", "ssh-")) for r, _ in _recipient_texts(args))
        or any(kf.kind == "age" for kf in keys.identities)
    ):
        return "age"
    return "native"


def _plan_encrypt(args: argparse.Namespace) -> Plan:
    keys = _load_keys(args, confirm=True)
    fmt = _encrypt_format(args, keys)
    aad = _aad(args)
    key = keys.key
    _other_format_options(args, keys, fmt, f"the keys given choose the {fmt} format")
    if fmt in ("rclone", "aws"):
        why = (
            "-k is a raw AES key, so the output is an AWS Encryption SDK message"
            if fmt == "aws"
            else "--format rclone"
        )
        _reject(args, fmt, "recipient", "recipients_file", "armor", why=why)
        _reject(args, fmt, "suite", "segment_size", "kdf", "work_factor", "sign_with", why=why)
        if fmt == "rclone":
            rclone_keys = _rclone_keys(args, keys, why)
            return Plan(fmt, lambda head: [_rclone.RcloneEncryptor(rclone_keys)])
        ring = _aws_keyring(args, keys, why)
        context = _aws_context(args)
        return Plan(fmt, lambda head: [_aws.AwsEncryptor(ring, encryption_context=context)])
    if fmt == "tink":
        why = "-k is a Tink keyset, so the output is a Tink ciphertext"
        _reject(args, fmt, "recipient", "recipients_file", "identity", "passphrase", why=why)
        _reject(args, fmt, "passphrase_file", "armor", why=why)
        _reject(args, fmt, "suite", "segment_size", "kdf", "work_factor", "sign_with", why=why)
        if key is None:
            raise KeyFileError("--format tink needs -k KEYSET (a cleartext Tink JSON keyset)")
        key.require("tink", purpose="--format tink needs a Tink JSON keyset")
        keyset = key.tink_keyset
        assert keyset is not None
        try:
            keyset.primary  # noqa: B018 - raises for a keyset without a usable primary
        except StreamCryptError as exc:
            raise KeyFileError(f"{key.path}: {exc}") from None
        return Plan(fmt, lambda head: [_tink.TinkStreamEncryptor(keyset, aad=aad)])
    if fmt == "age":
        why = "the keys given make an age file"
        _reject(args, fmt, "suite", "segment_size", "aad", "kdf", "sign_with", why=why)
        recipients: list[_age.RecipientLike] = []
        for text, where in _recipient_texts(args):
            try:
                recipients.append(_age.parse_recipient(text))
            except StreamCryptError as exc:
                raise _bad_recipient(text, where, exc) from None
        for kf in keys.identity_files():
            kf.require(
                "age",
                purpose=f"age encryption needs age identities ({AGE_IDENTITY_KINDS}) "
                f"or -r recipients ({AGE_RECIPIENT_KINDS})",
            )
            recipients.extend(ident.recipient for ident in kf.age_identities)
        if key is not None and key.kind != "age":
            raise KeyFileError(
                f"{key.path} holds {key.describe()}; age encrypts to -r recipients "
                f"({AGE_RECIPIENT_KINDS}), -i identity files ({AGE_IDENTITY_KINDS}) "
                "or --passphrase"
            )
        if not recipients and keys.passphrase is None:
            raise KeyFileError("age encryption needs -r RECIPIENT, -i IDENTITY or --passphrase")
        if recipients and keys.passphrase is not None:
            raise _usage("age files take either recipients or a passphrase, not both")
        work = args.work_factor if args.work_factor is not None else _age.DEFAULT_WORK_FACTOR
        if not 1 <= work <= 30:
            raise _usage("--work-factor must be between 1 and 30")
        phrase = keys.passphrase
        armor = bool(args.armor)

        def build_age(head: bytes) -> list[Transform]:
            stages: list[Transform] = [
                _age.AgeEncryptor(recipients=recipients, passphrase=phrase, work_factor=work)
            ]
            if armor:
                stages.append(ArmorEncoder())
            return stages

        return Plan(fmt, build_age)
    # native
    _reject(args, fmt, "armor", "work_factor", why="the keys given make a native file")
    suite = args.suite or "aes-256-gcm"
    seg = args.segment_size or _container.DEFAULT_SEGMENT_SIZE
    if not _container.MIN_SEGMENT_SIZE <= seg <= _container.MAX_SEGMENT_SIZE:
        raise _usage(
            f"--segment-size must be {_container.MIN_SEGMENT_SIZE}..{_container.MAX_SEGMENT_SIZE}"
        )
    if key is not None and key.kind == "symmetric":
        why = "-k is a symmetric key, so the output is a native container under it"
        _reject(args, fmt, "recipient", "recipients_file", "identity", "passphrase", why=why)
        _reject(args, fmt, "passphrase_file", "kdf", "sign_with", why=why)
        secret = key.symmetric
        assert secret is not None
        return Plan(
            fmt,
            lambda head: [
                _container.StreamEncryptor(secret, suite=suite, segment_size=seg, aad=aad)
            ],
        )
    if key is not None and key.kind != "x25519":
        raise KeyFileError(
            f"{key.path} holds {key.describe()}; the native format takes a symmetric key, "
            "-r sc-x25519-pub1... recipients, -i identity files or --passphrase"
        )
    env_recipients: list[_envelope.RecipientLike] = []
    for text, where in _recipient_texts(args):
        try:
            env_recipients.append(_envelope.parse_recipient(text))
        except StreamCryptError as exc:
            raise _bad_recipient(text, where, exc) from None
    for kf in keys.identity_files():
        kf.require("x25519", purpose="the native format needs streamcrypt identities")
        env_recipients.extend(ident.recipient for ident in kf.envelope_identities)
    if not env_recipients and keys.passphrase is None:
        raise KeyFileError(
            "encryption needs a key: -k KEYFILE, -r RECIPIENT, -i IDENTITY or --passphrase"
        )
    signer = None
    if args.sign_with:
        signing = load_key_file(args.sign_with)
        signing.require("ed25519", purpose="--sign-with needs an Ed25519 key file")
        signer = signing.ed25519
    params = KDF_LEVELS[args.kdf or "moderate"]
    phrase_n = keys.passphrase

    def build_envelope(head: bytes) -> list[Transform]:
        return [
            _envelope.EnvelopeEncryptor(
                recipients=env_recipients,
                passphrase=phrase_n,
                suite=suite,
                segment_size=seg,
                aad=aad,
                sign_with=signer,
                work_factor=params,
            )
        ]

    return Plan(fmt, build_envelope)


# ------------------------------------------------------------------------------ decrypt


def _other_format_options(args: argparse.Namespace, keys: _Keys, fmt: str, why: str) -> None:
    """Usage errors for the options of rclone / aws given with another format."""
    if fmt != "rclone":
        _reject(args, fmt, *_RCLONE_ONLY, why=why)
    if fmt != "aws":
        _reject(args, fmt, *_AWS_ONLY, why=why)
        _require_no_raw_key(args, keys, fmt)


def _detect(head: bytes, keys: _Keys) -> str:
    if head.startswith(_container.MAGIC):
        return "native"
    if head.startswith(_envelope.MAGIC):
        return "native"
    if head.lstrip().startswith(_AGE_PREFIXES):
        return "age"
    if _rclone.is_rclone(head):
        return "rclone"
    if _aws.is_aws(head):
        return "aws"
    if keys.key is not None and keys.key.kind == "tink":
        return "tink"
    if not head:
        raise FormatError("the input is empty: there is nothing to decrypt")
    raise FormatError(
        "the input is not a streamcrypt container or envelope, an age, rclone crypt or "
        "AWS Encryption SDK file "
        "(for a Tink ciphertext give -k KEYSET or --format tink)"
    )


def _plan_decrypt(args: argparse.Namespace) -> Plan:
    keys = _load_keys(args, confirm=False)
    aad = _aad(args)
    verify = None
    if args.verify_with:
        if args.output in (None, "-"):
            # The signature covers the whole stream and is checked at its end, while
            # standard output cannot be taken back: a co-recipient holding the file key
            # could forge every segment before it. Only an atomic output file is safe.
            raise _usage(
                "--verify-with needs -o FILE: the signature is checked at the end of the "
                "stream, and standard output cannot be taken back"
            )
        verify = parse_public_key(args.verify_with, kind="ed25519")

    def build(head: bytes) -> list[Transform]:
        try:
            fmt = args.format or _detect(head, keys)
        except FormatError as exc:  # the data, not the key, is the problem here
            raise CliError(describe(exc), EXIT_DATA) from None
        key = keys.key
        _other_format_options(args, keys, fmt, f"the input is in the {fmt} format")
        if fmt in ("rclone", "aws"):
            why = "the input is " + (
                "an rclone crypt file" if fmt == "rclone" else "an AWS message"
            )
            _reject(args, fmt, "verify_with", why=why)
            if fmt == "rclone":
                return [_rclone.RcloneDecryptor(_rclone_keys(args, keys, why))]
            ring = _aws_keyring(args, keys, why)
            return [_aws.AwsDecryptor(ring, encryption_context=_aws_context(args))]
        if fmt == "tink":
            _reject(
                args,
                fmt,
                *("identity", "passphrase", "passphrase_file", "verify_with"),
                why="the input is not a streamcrypt or age file, so it is read as a Tink "
                "ciphertext under the -k keyset",
            )
            if key is None:
                raise KeyFileError("--format tink needs -k KEYSET (a cleartext Tink JSON keyset)")
            key.require("tink", purpose="a Tink ciphertext needs a Tink JSON keyset")
            assert key.tink_keyset is not None
            return [_tink.TinkStreamDecryptor(key.tink_keyset, aad=aad)]
        if fmt == "age":
            _reject(args, fmt, "aad", "verify_with", why="the input is an age file")
            identities: list[_age.IdentityLike] = []
            for kf in keys.identity_files():
                kf.require(
                    "age", purpose=f"an age file needs age identities ({AGE_IDENTITY_KINDS})"
                )
                identities.extend(kf.age_identities)
            if key is not None and key.kind != "age":
                raise KeyFileError(
                    f"{key.path} holds {key.describe()}, but the input is an age file: "
                    f"give an age identity file ({AGE_IDENTITY_KINDS}) or --passphrase"
                )
            if not identities and keys.passphrase is None:
                raise KeyFileError("the input is an age file: give -i IDENTITY or --passphrase")
            stages: list[Transform] = []
            if is_armored(head):
                stages.append(ArmorDecoder())
            stages.append(_age.AgeDecryptor(identities=identities, passphrase=keys.passphrase))
            return stages
        if head.startswith(_container.MAGIC) or (
            args.format == "native" and not head.startswith(_envelope.MAGIC)
        ):
            _reject(
                args,
                fmt,
                *("identity", "passphrase", "passphrase_file", "verify_with"),
                why="the input is a native streamcrypt container, encrypted under a "
                "symmetric key: give that key file with -k KEYFILE",
            )
            if key is None:
                raise KeyFileError("the input is a native container: give -k KEYFILE")
            key.require("symmetric", purpose="a native container needs a symmetric key")
            secret = key.symmetric
            assert secret is not None
            return [_container.StreamDecryptor(secret, aad=aad)]
        env_identities: list[_envelope.IdentityLike] = []
        for kf in keys.identity_files():
            kf.require("x25519", purpose="a streamcrypt envelope needs streamcrypt identities")
            env_identities.extend(kf.envelope_identities)
        if key is not None and key.kind != "x25519":
            raise KeyFileError(
                f"{key.path} holds {key.describe()}, but the input is a passphrase/recipient "
                "envelope: give an identity file (-i) or --passphrase"
            )
        if not env_identities and keys.passphrase is None:
            raise KeyFileError("the input is an envelope: give -i IDENTITY or --passphrase")
        return [
            _envelope.EnvelopeDecryptor(
                identities=env_identities,
                passphrase=keys.passphrase,
                aad=aad,
                verify_with=verify,
            )
        ]

    def check(head: bytes) -> None:
        key = keys.key
        if not head.startswith(_container.MAGIC) or key is None or key.symmetric is None:
            return
        parsed = _container.read_header(head[: _container.MAX_HEADER_SIZE])
        if parsed is None:
            return  # too short: the decryptor reports the truncation
        named, ours = parsed[0].key_id, key.symmetric.key_id
        if named and ours and named != ours:
            raise UnknownKeyError(
                f"the input was encrypted with key id {named!r}, but {key.path} holds key id "
                f"{ours!r}: use the key file with that id"
            )

    return Plan(args.format or "auto", build, check, peek=_container.MAX_HEADER_SIZE)


# ------------------------------------------------------------------------------ running


def _stages(plan: Plan, inp: Input) -> list[Transform]:
    head = inp.peek_now(plan.peek) if plan.peek else b""
    plan.check(head)
    try:
        return plan.build(head)
    except (InvalidKeySizeError, InvalidPublicKeyError, FormatError, UnknownKeyError) as exc:
        raise CliError(describe(exc), EXIT_KEY) from None


def _stream(plan: Plan, inp: Input, out: Output) -> None:
    """Run the plan from ``inp`` into ``out`` in this thread (no event loop: see
    :mod:`._drive`); ``out`` is committed only after a clean end."""
    try:
        drive(_stages(plan, inp), inp.read, out.put)
    except BaseException:
        out.abort_now()
        raise
    out.commit_now()


def _run(
    args: argparse.Namespace, planner: Callable[[argparse.Namespace], Plan], *, decrypting: bool
) -> int:
    check_output(args.output)  # before any work: a bad -o fails at once
    inp = Input(args.input)
    try:
        plan = planner(args)
        if (
            not decrypting
            and args.output in (None, "-")
            and not getattr(args, "armor", False)
            and sys.stdout.isatty()
        ):
            raise _usage(
                "refusing to write binary ciphertext to a terminal; use -o FILE, a "
                "redirection, or --armor (age)"
            )
        verb = "decrypting" if decrypting else "encrypting"
        keep_freed_memory()
        with Progress(verb, inp.size, enabled=not args.quiet) as progress:
            inp.progress = progress
            out = open_output_now(args.output)
            try:
                _stream(plan, inp, out)
            except BaseException as exc:
                if decrypting and isinstance(out, StdoutOutput) and out.written:
                    raise CliError(
                        f"decryption failed ({describe(exc)}) after {out.written} bytes "
                        "of authenticated plaintext were written to standard output: "
                        "the output is incomplete, discard it",
                        exit_code(exc),
                    ) from exc
                raise
    finally:
        inp.close()
    return 0


def _refuse_cluster_options(args: argparse.Namespace) -> None:
    """A local run given what only a cluster run takes: a usage error, not ignored."""
    if getattr(args, "destination", None):
        raise _usage("a second positional (DST_URL) needs --scheduler; use -o OUT")
    if getattr(args, "key_env", None):
        raise _usage("--key-env (a key in the workers' environment) needs --scheduler; use -k")


def run_encrypt(args: argparse.Namespace) -> int:
    """``streamcrypt encrypt`` (on a Dask cluster with ``--scheduler``)."""
    if getattr(args, "scheduler", None):
        return run_cluster(args, "encrypt")
    _refuse_cluster_options(args)
    return _run(args, _plan_encrypt, decrypting=False)


def run_decrypt(args: argparse.Namespace) -> int:
    """``streamcrypt decrypt`` (on a Dask cluster with ``--scheduler``)."""
    if getattr(args, "scheduler", None):
        return run_cluster(args, "decrypt")
    _refuse_cluster_options(args)
    return _run(args, _plan_decrypt, decrypting=True)
