"""The command lines of ``encrypt`` and ``decrypt`` (the options they share and the few
that differ) and the choices every command offers, for the parser in ``__init__``.

This module and the ones it imports stay light (argparse and the cluster options): the
parser is built on every run, so ``--help``, ``--version`` and usage errors import no
format, no primitive and no pycryptodome. The defaults below restate the codecs' own
constants as literals for that reason; ``tests/test_cli_startup.py`` checks that they
agree.
"""

from __future__ import annotations

import argparse

from ._cluster import add_cluster_arguments
from ._usage import FORMATS

#: ``keygen --type``.
KEY_TYPES = ("symmetric", "x25519", "ed25519", "age", "age-pq")
#: ``keygen --size``: :data:`streamcrypt.keys.keyfile.KEY_SIZES`, not imported (start-up);
#: tests/test_keyfile.py checks that the two agree.
KEY_SIZES = (16, 32)
#: ``hash --algo``.
HASH_ALGOS = ("blake3", "sha256", "sha512")
#: ``encrypt --kdf``: the Argon2id levels of :mod:`streamcrypt.keys`, sorted.
KDF_LEVEL_NAMES = ("interactive", "moderate", "sensitive")
#: ``encrypt --suite``: :data:`streamcrypt.codecs.container.SUITE_IDS`, sorted.
SUITES = ("aes-256-gcm", "chacha20-poly1305", "xchacha20-poly1305")
#: :data:`streamcrypt.codecs.container.DEFAULT_SEGMENT_SIZE`.
SEGMENT_SIZE = 65536
#: :data:`streamcrypt.codecs.age.DEFAULT_WORK_FACTOR`.
AGE_WORK_FACTOR = 18
#: The formats a fixed magic alone identifies (no armor), each its codec's ``MAGIC``:
#: decryption rules them out by the input's first bytes without importing them.
MAGICS = {"native": b"SCRY", "envelope": b"SCEV", "rclone": b"RCLONE\x00\x00"}
#: :data:`streamcrypt.codecs.container.MAX_HEADER_SIZE`: the bytes decryption peeks at.
NATIVE_MAX_HEADER_SIZE = 605
#: The aws format's raw AES keyring names when ``--key-namespace``/``--key-name`` are left out.
AWS_NAMESPACE = "streamcrypt"
AWS_KEY_NAME = "default"


def add_arguments(p: argparse.ArgumentParser, *, decrypt: bool) -> None:
    """The options ``encrypt`` and ``decrypt`` share (and the few that differ)."""
    p.add_argument("input", nargs="?", metavar="IN", help="input file (default: standard input)")
    p.add_argument(
        "-o", "--output", metavar="OUT", help="output file, written atomically (default: stdout)"
    )
    p.add_argument(
        "--fsync",
        action="store_true",
        help="-o: wait until the output is on disk before renaming it into place",
    )
    p.add_argument(
        "-k",
        "--key",
        metavar="KEYFILE",
        help="key file: symmetric key (native), Tink JSON keyset (tink), raw AES key of "
        "16, 24 or 32 bytes (aws), or an identity file",
    )
    p.add_argument(
        "-i",
        "--identity",
        metavar="FILE",
        action="append",
        default=[],
        help="identity file: age (AGE-SECRET-KEY-1..., AGE-SECRET-KEY-PQ-1..., or an SSH "
        "private key such as ~/.ssh/id_ed25519 or ~/.ssh/id_rsa) or streamcrypt "
        "(SC-X25519-SECRET-1...); repeatable" + ("" if decrypt else "; encrypts to its public key"),
    )
    if not decrypt:
        p.add_argument(
            "-r",
            "--recipient",
            metavar="RECIPIENT",
            action="append",
            default=[],
            help="public key to encrypt to: age1..., age1pq1..., 'ssh-ed25519 AAAA...' or "
            "'ssh-rsa AAAA...' (age), or sc-x25519-pub1... (native); repeatable",
        )
        p.add_argument(
            "-R",
            "--recipients-file",
            metavar="FILE",
            action="append",
            default=[],
            help="a file of recipients, one per line ('#' comments), as age's -R; repeatable",
        )
    p.add_argument(
        "-p", "--passphrase", action="store_true", help="prompt for a passphrase (no echo)"
    )
    p.add_argument(
        "--passphrase-file",
        metavar="FILE",
        help="read the passphrase from the first line of FILE (for scripts)",
    )
    p.add_argument(
        "--password2-file",
        metavar="FILE",
        help="rclone: read password2 (the crypt remote's salt) from the first line of FILE",
    )
    p.add_argument(
        "--key-namespace",
        metavar="NS",
        help=f"aws: the raw AES keyring's namespace (provider id; default {AWS_NAMESPACE})",
    )
    p.add_argument(
        "--key-name",
        metavar="NAME",
        help=f"aws: the raw AES keyring's key name (default {AWS_KEY_NAME})",
    )
    p.add_argument(
        "--context",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="aws: an encryption context entry (on decrypt: one the message must carry); "
        "repeatable",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        help="native (default), age, tink, rclone or aws; "
        + ("detected from the input when left out" if decrypt else "inferred from the keys"),
    )
    p.add_argument("--aad", metavar="TEXT", help="associated data (native, tink), UTF-8")
    if decrypt:
        p.add_argument(
            "--verify-with",
            metavar="PUBKEY",
            help="native envelopes: require an Ed25519 signature by this public key",
        )
        p.add_argument(
            "--allow-unverified",
            action="store_true",
            help="native envelopes: read a signed envelope WITHOUT checking its signature "
            "(without this or --verify-with, a signed envelope is refused)",
        )
    else:
        p.add_argument("--armor", "-a", action="store_true", help="age: ASCII-armored output")
        add_native_arguments(p)
        p.add_argument(
            "--kdf",
            choices=KDF_LEVEL_NAMES,
            help="native passphrase: Argon2id strength (default moderate)",
        )
        p.add_argument(
            "--work-factor",
            type=int,
            metavar="N",
            help=f"age passphrase: scrypt log2 N (default {AGE_WORK_FACTOR})",
        )
        p.add_argument(
            "--sign-with",
            metavar="ED25519KEY",
            help="native envelopes: sign the ciphertext with this Ed25519 key file",
        )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_cluster_arguments(p)


def add_native_arguments(p: argparse.ArgumentParser) -> None:
    """``--suite`` and ``--segment-size``: the native container's parameters, for every
    command that writes one (``encrypt``, ``rekey``)."""
    p.add_argument(
        "--suite",
        choices=SUITES,
        help="native: the AEAD suite (default aes-256-gcm)",
    )
    p.add_argument(
        "--segment-size",
        type=int,
        metavar="BYTES",
        help=f"native: plaintext bytes per segment (default {SEGMENT_SIZE})",
    )
