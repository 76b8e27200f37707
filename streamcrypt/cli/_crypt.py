"""``streamcrypt encrypt`` and ``streamcrypt decrypt``: every format, streaming, atomic outputs.

Theory of operation
-------------------
Everything that can fail before data moves happens first, synchronously: key files are
read, recipients parsed, the passphrase prompted for, the options checked against the
format. Formats are the codecs' descriptors (:data:`streamcrypt.codecs.FORMATS`): one
table (:data:`_USES`) says which options each takes, one function per format and
direction turns the command line into :class:`~streamcrypt.codecs.FormatOptions`, the
descriptor builds the transforms (armor included), and decryption asks the descriptors
which one the input's first bytes are. Then the data streams without an event loop
(:mod:`._drive`), memory bounded by a piece per thread and stage and the writer's queue.

Decryption releases only segments that verified. To a file (``-o``) the output is a
temporary beside the destination, renamed into place only after the whole stream
verified, and removed on any failure: a failed decryption leaves nothing behind. To
standard output the verified segments are written as they come (a pipe cannot be taken
back); a failure later in the stream ends the command with a non-zero exit code and a
message saying how much was written.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import keys as _keys_package
from .._lazy import LazyModule
from ..abc import Transform
from ..codecs import FORMATS, FormatOptions
from ..engine import DEFAULT_WORKERS
from ..errors import (
    FormatError,
    InvalidKeySizeError,
    InvalidPublicKeyError,
    StreamCryptError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from ._cluster import run_cluster
from ._drive import drive, keep_freed_memory
from ._errors import EXIT_DATA, EXIT_KEY, EXIT_USAGE, CliError, describe, exit_code
from ._io import (
    Input,
    Progress,
    StdoutOutput,
    check_output,
    open_output_now,
    takes_back,
)
from ._keyfiles import (
    AGE_IDENTITY_KINDS,
    AGE_RECIPIENT_KINDS,
    KeyFile,
    KeyFileError,
    identity_files,
    load_key_file,
    parse_public_key,
    read_secret_line,
)
from ._options import AWS_KEY_NAME, AWS_NAMESPACE, MAGICS, NATIVE_MAX_HEADER_SIZE

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

#: ``--kdf``: each level's Argon2id preset in :mod:`streamcrypt.keys`, by name (read when
#: used: the password KDFs cost start-up to import).
KDF_LEVELS = {"interactive": "INTERACTIVE", "moderate": "MODERATE", "sensitive": "SENSITIVE"}


# ------------------------------------------------------------------------------ options


def _usage(message: str) -> CliError:
    return CliError(message, EXIT_USAGE)


def _read_passphrase(args: argparse.Namespace, *, confirm: bool) -> str | None:
    if args.passphrase and args.passphrase_file:
        raise _usage("give --passphrase or --passphrase-file, not both")
    if args.passphrase_file:
        return read_secret_line(args.passphrase_file, "passphrase")
    if not args.passphrase:
        return None
    try:  # getpass prompts on /dev/tty: is there one?
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        raise _usage(
            "--passphrase needs a terminal to prompt on; use --passphrase-file FILE"
        ) from None
    import getpass  # here: only a prompt needs it (start-up)

    phrase = getpass.getpass("Passphrase: ")
    if not phrase:
        raise KeyFileError("the passphrase is empty")
    if confirm and getpass.getpass("Confirm passphrase: ") != phrase:
        raise KeyFileError("the passphrases do not match")
    return phrase


def _plugin_ui() -> _age.PluginUI:
    """How the command answers an age plugin, as age does: messages on standard error, a
    PIN or secret asked for on the terminal (answered ``fail`` without one)."""

    def secret(prompt: str) -> str | None:
        try:
            os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
        except OSError:
            return None
        import getpass  # here: only a prompt needs it (start-up)

        return getpass.getpass(f"{prompt}: ")

    return _age.PluginUI(message=lambda text: print(text, file=sys.stderr), request_secret=secret)


def _with_plugin_ui(keys: list[Any]) -> list[Any]:
    """``keys``, the age plugin ones given the terminal (:func:`_plugin_ui`)."""
    for key in keys:
        if isinstance(key, _age.PluginRecipient | _age.PluginIdentity):
            key.ui = _plugin_ui()
    return keys


def _aad(args: argparse.Namespace) -> bytes:
    return args.aad.encode("utf-8") if args.aad is not None else b""


@dataclass
class _Keys:
    key: KeyFile | None = field(default=None, repr=False)
    identities: list[KeyFile] = field(default_factory=list, repr=False)
    passphrase: str | None = field(default=None, repr=False)
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
    keys.identities = identity_files(args.identity)
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


# ------------------------------------------------------------------------------ formats

#: The descriptor (of :data:`streamcrypt.codecs.FORMATS`) behind each ``--format``
#: choice: ``native`` is the container under a symmetric key or the envelope otherwise.
_CLI_NAME = {"envelope": "native"}
#: The formats decryption tells by their first bytes, in the order it asks them.
_DETECTED = ("native", "envelope", "age", "rclone", "aws")
#: Every option that only some formats take, in the order a misplaced one is reported.
_FORMAT_OPTIONS = (
    "recipient",
    "recipients_file",
    "identity",
    "passphrase",
    "passphrase_file",
    "key",
    "password2_file",
    "suite",
    "segment_size",
    "aad",
    "kdf",
    "work_factor",
    "armor",
    "sign_with",
    "verify_with",
    "allow_unverified",
    "key_namespace",
    "key_name",
    "context",
)
_PEOPLE = frozenset({"recipient", "recipients_file", "identity", "passphrase", "passphrase_file"})
_LAYOUT = frozenset({"suite", "segment_size", "aad"})
_AWS = frozenset({"key", "key_namespace", "key_name", "context"})
_RCLONE = frozenset({"passphrase", "passphrase_file", "password2_file"})


@dataclass(frozen=True)
class _Use:
    """How one format is used by one command: the options it takes (of
    :data:`_FORMAT_OPTIONS`), why the others do not apply (for a format the user did not
    name with ``--format``), and how its :class:`FormatOptions` are made."""

    takes: frozenset[str]
    why: str
    options: Callable[[argparse.Namespace, _Keys], FormatOptions]


def _check_options(args: argparse.Namespace, keys: _Keys, name: str, decrypting: bool) -> None:
    """A usage error for the first option given that format ``name`` does not take.

    The message names ``--format`` only when the user gave it; otherwise it says how the
    format was chosen (detected from the input, inferred from the keys)."""
    use = _USES[name, decrypting]
    fmt = _CLI_NAME.get(name, name)
    for option in _FORMAT_OPTIONS:
        if option in use.takes or getattr(args, option, None) in (None, False, [], ""):
            continue
        if option == "key" and keys.raw_key is not None:
            break  # reported below, with what the file holds
        flag = "--" + option.replace("_", "-")
        if args.format:
            raise _usage(f"{flag} does not apply to --format {fmt}")
        raise _usage(f"{flag} does not apply: {use.why}")
    if keys.raw_key is not None and name != "aws":
        raise KeyFileError(
            f"{args.key} holds {len(keys.raw_key)} raw bytes, an AES key for --format aws; "
            f"--format {fmt} does not take it"
        )


def _segment_size(args: argparse.Namespace) -> int:
    seg = args.segment_size or _container.DEFAULT_SEGMENT_SIZE
    if not _container.MIN_SEGMENT_SIZE <= seg <= _container.MAX_SEGMENT_SIZE:
        raise _usage(
            f"--segment-size must be {_container.MIN_SEGMENT_SIZE}..{_container.MAX_SEGMENT_SIZE}"
        )
    return seg


def _rclone_keys(args: argparse.Namespace, keys: _Keys) -> _rclone.RcloneKeys:
    """rclone's keys from --passphrase / --passphrase-file and --password2-file."""
    if keys.passphrase is None:
        raise KeyFileError(
            "rclone crypt needs its password: --passphrase (prompt) or --passphrase-file FILE"
        )
    salt = read_secret_line(args.password2_file, "password2") if args.password2_file else ""
    try:
        return _rclone.RcloneKeys.from_password(keys.passphrase, salt)
    except StreamCryptError as exc:
        raise KeyFileError(describe(exc)) from None


def _aws_options(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    """The raw AES keyring of -k (16, 24 or 32 raw bytes), its names and --context."""
    if keys.raw_key is None:
        if args.key:
            raise KeyFileError(
                f"{args.key} is not a raw AES key: --format aws takes -k FILE holding "
                "exactly 16, 24 or 32 bytes"
            )
        raise KeyFileError("--format aws needs -k KEYFILE (a raw AES key of 16, 24 or 32 bytes)")
    ring = _aws.RawAesKeyring(
        args.key_namespace or AWS_NAMESPACE, args.key_name or AWS_KEY_NAME, keys.raw_key
    )
    context: dict[str, str] = {}
    for item in args.context:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _usage(f"--context takes KEY=VALUE, not {item!r}")
        context[name] = value
    return FormatOptions(key=ring, encryption_context=context)


def _aws_reading(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    """:func:`_aws_options` for decrypting. A signed message's signature is checked at its
    end: into an atomic output file (a temporary removed unless the whole run succeeds)
    frames may go as they verify; standard output and special files cannot be taken back,
    so there the codec holds the plaintext until the signature verified (up to its
    ``max_buffered`` bound, then a typed error)."""
    return _aws_options(args, keys)._replace(allow_unverified=takes_back(args.output))


def _tink_keyset(keys: _Keys, purpose: str) -> _tink.TinkKeyset:
    key = keys.key
    if key is None:
        raise KeyFileError("--format tink needs -k KEYSET (a cleartext Tink JSON keyset)")
    key.require("tink", purpose=purpose)
    keyset = key.tink_keyset
    assert keyset is not None
    return keyset


def _identities_of(keys: _Keys, kind: Literal["age", "x25519"], purpose: str) -> list[Any]:
    """The identities of ``-i`` (and of ``-k`` holding identities), all of ``kind``."""
    found: list[Any] = []
    for kf in keys.identity_files():
        kf.require(kind, purpose=purpose)
        found.extend(kf.age_identities if kind == "age" else kf.envelope_identities)
    return found


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


def _check_people(keys: _Keys, kind: str, found: list[Any], wrong_key: str, missing: str) -> None:
    """A key error for ``-k`` holding another kind than ``kind`` (``wrong_key`` follows
    what it holds) or for neither recipients/identities ``found`` nor a passphrase."""
    if keys.key is not None and keys.key.kind != kind:
        raise KeyFileError(f"{keys.key.path} holds {keys.key.describe()}{wrong_key}")
    if not found and keys.passphrase is None:
        raise KeyFileError(missing)


def _recipients(
    args: argparse.Namespace,
    keys: _Keys,
    kind: Literal["age", "x25519"],
    parse: Callable[[str], Any],
    messages: tuple[str, str, str],
) -> list[Any]:
    """The recipients of ``-r`` / ``-R`` (parsed by ``parse``) and of the identity files,
    all of ``kind``; ``messages``: an identity file of another kind, ``-k`` of another
    kind (after what it holds), neither recipients nor a passphrase."""
    recipients: list[Any] = []
    for text, where in _recipient_texts(args):
        try:
            recipients.append(parse(text))
        except StreamCryptError as exc:
            raise _bad_recipient(text, where, exc) from None
    recipients.extend(ident.recipient for ident in _identities_of(keys, kind, messages[0]))
    _check_people(keys, kind, recipients, messages[1], messages[2])
    return recipients


def _age_writing(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    recipients = _with_plugin_ui(
        _recipients(args, keys, "age", _age.parse_recipient, _AGE_MESSAGES)
    )
    if recipients and keys.passphrase is not None:
        raise _usage("age files take either recipients or a passphrase, not both")
    work = args.work_factor if args.work_factor is not None else _age.DEFAULT_WORK_FACTOR
    if not 1 <= work <= 30:
        raise _usage("--work-factor must be between 1 and 30")
    return FormatOptions(
        recipients=tuple(recipients),
        passphrase=keys.passphrase,
        work_factor=work,
        armor=bool(args.armor),
    )


_AGE_MESSAGES = (
    f"age encryption needs age identities ({AGE_IDENTITY_KINDS}) "
    f"or -r recipients ({AGE_RECIPIENT_KINDS})",
    f"; age encrypts to -r recipients ({AGE_RECIPIENT_KINDS}), -i identity files "
    f"({AGE_IDENTITY_KINDS}) or --passphrase",
    "age encryption needs -r RECIPIENT, -i IDENTITY or --passphrase",
)
_NATIVE_MESSAGES = (
    "the native format needs streamcrypt identities",
    "; the native format takes a symmetric key, -r sc-x25519-pub1... recipients, -i "
    "identity files or --passphrase",
    "encryption needs a key: -k KEYFILE, -r RECIPIENT, -i IDENTITY or --passphrase",
)


def _envelope_writing(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    if keys.key is not None and keys.key.kind != "x25519":  # before -i: says what -k is
        _check_people(keys, "x25519", [], _NATIVE_MESSAGES[1], "")
    recipients = _recipients(args, keys, "x25519", _envelope.parse_recipient, _NATIVE_MESSAGES)
    signer = None
    if args.sign_with:
        signing = load_key_file(args.sign_with)
        signing.require("ed25519", purpose="--sign-with needs an Ed25519 key file")
        signer = signing.ed25519
    return FormatOptions(
        recipients=tuple(recipients),
        passphrase=keys.passphrase,
        suite=args.suite or "aes-256-gcm",
        segment_size=_segment_size(args),
        aad=_aad(args),
        work_factor=getattr(_keys_package, KDF_LEVELS[args.kdf or "moderate"]),
        sign_with=signer,
    )


def _tink_writing(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    key = keys.key
    keyset = _tink_keyset(keys, "--format tink needs a Tink JSON keyset")
    try:
        keyset.primary  # noqa: B018 - raises for a keyset without a usable primary
    except StreamCryptError as exc:
        raise KeyFileError(f"{key.path if key else ''}: {exc}") from None
    return FormatOptions(key=keyset, aad=_aad(args))


def _native_writing(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    assert keys.key is not None and keys.key.symmetric is not None
    return FormatOptions(
        key=keys.key.symmetric,
        suite=args.suite or "aes-256-gcm",
        segment_size=_segment_size(args),
        aad=_aad(args),
    )


def _encrypt_format(args: argparse.Namespace, keys: _Keys) -> str:
    """The descriptor to write: ``--format``, else the one the keys imply."""
    fmt = str(args.format) if args.format else _implied_format(args, keys)
    if fmt == "native" and not (keys.key is not None and keys.key.kind == "symmetric"):
        return "envelope"
    return fmt


def _age_habit(args: argparse.Namespace, keys: _Keys) -> bool:
    """Whether the line reads as age's: age's own command line (no command word) with a
    passphrase (``streamcrypt -p -o notes.age notes.txt``), or an output named ``*.age``
    unless ``-k`` is a symmetric key (that writes native, and :func:`_plan_encrypt` warns)."""
    if getattr(args, "age_style", False) and (args.passphrase or args.passphrase_file):
        return True
    symmetric = keys.key is not None and keys.key.kind == "symmetric"
    return _named_age(args) and not symmetric


def _named_age(args: argparse.Namespace) -> bool:
    return str(args.output or "").lower().endswith(".age")


def _implied_format(args: argparse.Namespace, keys: _Keys) -> str:
    if keys.raw_key is not None:
        return "aws"
    if keys.key is not None and keys.key.kind == "tink":
        return "tink"
    if keys.key is not None and keys.key.kind == "age":
        return "age"
    if (
        args.armor
        or args.work_factor is not None
        or _age_habit(args, keys)
        or any(r.lower().startswith(("age1", "ssh-")) for r, _ in _recipient_texts(args))
        or any(kf.kind == "age" for kf in keys.identities)
    ):
        return "age"
    return "native"


def _plan_encrypt(args: argparse.Namespace) -> Plan:
    keys = _load_keys(args, confirm=True)
    name = _encrypt_format(args, keys)
    _check_options(args, keys, name, decrypting=False)
    options = _USES[name, False].options(args, keys)
    fmt = FORMATS[name]
    if name != "age" and _named_age(args):  # --format (or -k) chose another: say so
        sys.stderr.write(
            f"streamcrypt: warning: {args.output} is a {_CLI_NAME.get(name, name)} file, "
            "not an age file (age cannot read it; --format age writes age)\n"
        )
    return Plan(_CLI_NAME.get(name, name), lambda head: fmt.encryptors(options))


# ------------------------------------------------------------------------------ decrypt


def _age_reading(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    identities = _identities_of(
        keys, "age", f"an age file needs age identities ({AGE_IDENTITY_KINDS})"
    )
    _check_people(
        keys,
        "age",
        identities,
        ", but the input is an age file: give an age identity file "
        f"({AGE_IDENTITY_KINDS}) or --passphrase",
        "the input is an age file: give -i IDENTITY or --passphrase",
    )
    return FormatOptions(identities=tuple(_with_plugin_ui(identities)), passphrase=keys.passphrase)


def _envelope_reading(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    """The envelope's options for decrypting. With ``--verify-with`` the output is an
    atomic regular file (:func:`_only_file` refuses the others), removed unless the whole
    run, signature included, succeeds: segments go into it as they verify
    (``allow_unverified=True``), so a large file streams instead of being held until the
    signature at its end."""
    purpose = "a streamcrypt envelope needs streamcrypt identities"
    identities = _identities_of(keys, "x25519", purpose)
    _check_people(
        keys,
        "x25519",
        identities,
        ", but the input is a passphrase/recipient envelope: give an identity file (-i) or "
        "--passphrase",
        "the input is an envelope: give -i IDENTITY or --passphrase",
    )
    if args.verify_with and args.allow_unverified:
        raise _usage("give --verify-with (check the signature) or --allow-unverified, not both")
    verify = parse_public_key(args.verify_with, kind="ed25519") if args.verify_with else None
    return FormatOptions(
        identities=tuple(identities),
        passphrase=keys.passphrase,
        aad=_aad(args),
        verify_with=verify,
        allow_unverified=args.allow_unverified or (verify is not None and takes_back(args.output)),
    )


def _native_reading(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    if keys.key is None:
        raise KeyFileError("the input is a native container: give -k KEYFILE")
    keys.key.require("symmetric", purpose="a native container needs a symmetric key")
    return FormatOptions(key=keys.key.symmetric, aad=_aad(args))


def _tink_reading(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    keyset = _tink_keyset(keys, "a Tink ciphertext needs a Tink JSON keyset")
    return FormatOptions(key=keyset, aad=_aad(args))


def _rclone_options(args: argparse.Namespace, keys: _Keys) -> FormatOptions:
    return FormatOptions(key=_rclone_keys(args, keys))


#: Each format by command: the options it takes, why others do not apply, how its
#: FormatOptions are made. The one table the checks and the plans read.
_USES: dict[tuple[str, bool], _Use] = {
    ("native", False): _Use(
        _LAYOUT | {"key"},
        "-k is a symmetric key, so the output is a native container under it",
        _native_writing,
    ),
    ("envelope", False): _Use(
        _PEOPLE | _LAYOUT | {"key", "kdf", "sign_with"},
        "the keys given make a native file",
        _envelope_writing,
    ),
    ("age", False): _Use(
        _PEOPLE | {"key", "work_factor", "armor"}, "the keys given make an age file", _age_writing
    ),
    ("tink", False): _Use(
        frozenset({"key", "aad"}),
        "-k is a Tink keyset, so the output is a Tink ciphertext",
        _tink_writing,
    ),
    ("rclone", False): _Use(_RCLONE, "--format rclone", _rclone_options),
    ("aws", False): _Use(
        _AWS, "-k is a raw AES key, so the output is an AWS Encryption SDK message", _aws_options
    ),
    ("native", True): _Use(
        frozenset({"key", "aad"}),
        "the input is a native streamcrypt container, encrypted under a symmetric key: "
        "give that key file with -k KEYFILE",
        _native_reading,
    ),
    ("envelope", True): _Use(
        _PEOPLE | {"key", "aad", "verify_with", "allow_unverified"},
        "the input is a streamcrypt envelope (recipients or a passphrase)",
        _envelope_reading,
    ),
    ("age", True): _Use(_PEOPLE | {"key"}, "the input is an age file", _age_reading),
    ("tink", True): _Use(
        frozenset({"key", "aad"}),
        "the input is not a streamcrypt or age file, so it is read as a Tink ciphertext "
        "under the -k keyset",
        _tink_reading,
    ),
    ("rclone", True): _Use(_RCLONE, "the input is an rclone crypt file", _rclone_options),
    ("aws", True): _Use(_AWS, "the input is an AWS message", _aws_reading),
}


def _identifies(name: str, head: bytes) -> bool:
    """Whether the input starting with ``head`` is format ``name``; a format its magic
    alone identifies (:data:`MAGICS`) is not imported to ask it (start-up)."""
    magic = MAGICS.get(name)
    return head.startswith(magic) if magic is not None else FORMATS[name].identifies(head)


def _detect(head: bytes, keys: _Keys) -> str:
    """The descriptor of the input: the first of :data:`_DETECTED` its bytes identify."""
    for name in _DETECTED:
        if _identifies(name, head):
            return name
    if keys.key is not None and keys.key.kind == "tink":
        return "tink"
    if not head:
        raise FormatError("the input is empty: there is nothing to decrypt")
    raise FormatError(
        "the input is not a streamcrypt container or envelope, an age, rclone crypt or "
        "AWS Encryption SDK file "
        "(for a Tink ciphertext give -k KEYSET or --format tink)"
    )


def _decrypt_format(args: argparse.Namespace, keys: _Keys, head: bytes) -> str:
    """The descriptor to read: ``--format`` (``native``: the envelope if the input is
    one), else the one the input's first bytes name."""
    if args.format == "native":
        return "envelope" if _identifies("envelope", head) else "native"
    if args.format:
        return str(args.format)
    try:
        return _detect(head, keys)
    except FormatError as exc:  # the data, not the key, is the problem here
        raise CliError(describe(exc), EXIT_DATA) from None


def _only_file(args: argparse.Namespace) -> str | None:
    """The option that needs an output that can be taken back, if given."""
    return "--verify-with" if getattr(args, "verify_with", None) else None


def _plan_decrypt(args: argparse.Namespace) -> Plan:
    keys = _load_keys(args, confirm=False)
    # The signature covers the whole stream and is checked at its end, while standard
    # output or a special file cannot be taken back: a co-recipient holding the file key
    # could forge every segment before it. Only an atomic output file is safe.
    check_output(args.output, only_file=_only_file(args))
    peek = NATIVE_MAX_HEADER_SIZE

    def build(head: bytes) -> list[Transform]:
        name = _decrypt_format(args, keys, head)
        _check_options(args, keys, name, decrypting=True)
        options = _USES[name, True].options(args, keys)
        return FORMATS[name].decryptors(options, head, at_end=len(head) < peek)

    def check(head: bytes) -> None:
        key = keys.key
        if not head.startswith(MAGICS["native"]) or key is None or key.symmetric is None:
            return
        parsed = _container.read_header(head[:peek])
        if parsed is None:
            return  # too short: the decryptor reports the truncation
        named, ours = parsed[0].key_id, key.symmetric.key_id
        if named and ours and named != ours:
            raise UnknownKeyError(
                f"the input was encrypted with key id {named!r}, but {key.path} holds key id "
                f"{ours!r}: use the key file with that id"
            )

    return Plan(args.format or "auto", build, check, peek=peek)


# ------------------------------------------------------------------------------ running


def _stages(plan: Plan, inp: Input) -> list[Transform]:
    head = inp.peek_now(plan.peek) if plan.peek else b""
    plan.check(head)
    try:
        return plan.build(head)
    except (InvalidKeySizeError, InvalidPublicKeyError, FormatError, UnknownKeyError) as exc:
        raise CliError(describe(exc), EXIT_KEY) from None


def _run(args: argparse.Namespace, *, decrypting: bool) -> int:
    """``encrypt`` or ``decrypt``: on a Dask cluster with ``--scheduler``, else here."""
    if getattr(args, "scheduler", None):
        return run_cluster(args, "decrypt" if decrypting else "encrypt")
    # A local run given what only a cluster run takes: a usage error, not ignored.
    if getattr(args, "destination", None):
        raise _usage("a second positional (DST_URL) needs --scheduler; use -o OUT")
    if getattr(args, "key_env", None):
        raise _usage("--key-env (a key in the workers' environment) needs --scheduler; use -k")
    check_output(args.output)  # before any work: a bad -o fails at once
    inp = Input(args.input)
    try:
        plan = _plan_decrypt(args) if decrypting else _plan_encrypt(args)
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
            out = open_output_now(args.output, durable=args.fsync, only_file=_only_file(args))
            # The plan runs in this thread (no event loop: see ._drive); reading a regular
            # file never blocks for long, so any thread may do it. ``out`` is committed
            # only after a clean end.
            try:
                threads = DEFAULT_WORKERS if inp.size is not None else 1
                drive(_stages(plan, inp), inp.read, out.put, threads=threads)
                out.commit_now()
            except BaseException as exc:
                out.abort_now()
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


def run_encrypt(args: argparse.Namespace) -> int:
    """``streamcrypt encrypt`` (on a Dask cluster with ``--scheduler``)."""
    return _run(args, decrypting=False)


def run_decrypt(args: argparse.Namespace) -> int:
    """``streamcrypt decrypt`` (on a Dask cluster with ``--scheduler``)."""
    return _run(args, decrypting=True)
