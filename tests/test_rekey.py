"""Recipients changed in place (``streamcrypt.rekey``, ``streamcrypt rekey``): age files
and envelopes get a new header, the payload's bytes stay, the Go ``age`` binary agrees,
and a failure or cancellation leaves the file as it was with no temporary beside it."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pyrage
import pytest
from test_age import _LoggedPQ, _WrapsFor
from test_age_plugin import _fake

import streamcrypt
from streamcrypt import _rekey
from streamcrypt.codecs import age, envelope
from streamcrypt.codecs.age import _header as age_header
from streamcrypt.codecs.age._rekey import rekey_headers
from streamcrypt.errors import (
    AuthenticationError,
    FileChangedError,
    InvalidParameterError,
    UnknownKeyError,
    UnsupportedFormatError,
)
from streamcrypt.primitives import Ed25519PrivateKey

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[1]
DATA = os.urandom(300_000)  # five age chunks, a partial last one
needs_age = pytest.mark.skipif(
    not (shutil.which("age") and shutil.which("age-keygen")), reason="`make peers` installs age"
)


def age_file(tmp_path: Path, *recipients: object, data: bytes = DATA) -> Path:
    path = tmp_path / "data.age"
    path.write_bytes(streamcrypt.encrypt_bytes(data, format="age", recipients=list(recipients)))
    return path


def age_payload(raw: bytes) -> bytes:
    """What follows an age header: the payload nonce and the chunks."""
    header = age.parse_header(raw)
    assert header is not None
    return raw[header.size :]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def keygen(directory: Path, name: str) -> tuple[Path, str]:
    """An age identity file made by the Go age-keygen, and its recipient."""
    path = directory / name
    subprocess.run(["age-keygen", "-o", str(path)], check=True, capture_output=True)
    public = subprocess.run(["age-keygen", "-y", str(path)], check=True, capture_output=True)
    return path, public.stdout.decode().strip()


def go_age_encrypt(path: Path, *recipients: str) -> Path:
    """``DATA`` encrypted by the Go age binary to ``recipients``."""
    args = [x for r in recipients for x in ("-r", r)]
    subprocess.run(["age", *args, "-o", str(path), "-"], input=DATA, check=True)
    return path


def go_age_decrypts(identity: Path, path: Path) -> bytes | None:
    run = subprocess.run(["age", "-d", "-i", str(identity), str(path)], capture_output=True)
    return run.stdout if run.returncode == 0 else None


@pytest.fixture
def xfs_path(xfs_dir: Path, tmp_path: Path) -> Iterator[Path]:
    """This test's own directory on the session's XFS with reflinks (``xfs_dir``: the
    payload's blocks are cloned there), removed after it."""
    directory = xfs_dir / tmp_path.name
    directory.mkdir()
    yield directory
    shutil.rmtree(directory)


@pytest.fixture(params=["tmp", "xfs"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A directory for the file to re-key: ``tmp`` on this machine's temporary file system
    (ext4 here: no reflinks, so the payload is copied), ``xfs`` on an XFS with reflinks
    (``xfs_path``)."""
    return tmp_path if request.param == "tmp" else request.getfixturevalue("xfs_path")


def kinds(raw: bytes) -> list[str]:
    header = age.parse_header(raw)
    assert header is not None
    return [s.kind for s in header.stanzas]


def check_layout(where: Path, before: bytes, after: bytes) -> None:
    """The payload's bytes kept; on XFS the new header's length the old one's modulo the
    block, by one grease stanza at most, last (where the lengths differ, there is one);
    elsewhere (the copy) no grease."""
    assert age_payload(after) == age_payload(before)
    if not is_xfs(where):
        assert "grease" not in kinds(after)
        return
    assert (len(after) - len(before)) % os.statvfs(where).f_bsize == 0
    assert "grease" not in kinds(after)[:-1]  # one at most, last
    assert kinds(after)[-1] == "grease" or len(after) == len(before)


def is_xfs(directory: Path) -> bool:
    run = subprocess.run(["stat", "-f", "-c", "%T", str(directory)], capture_output=True)
    return run.stdout.strip() == b"xfs"


# ------------------------------------------------------------------------------ age


@needs_age
async def test_go_age_opens_with_the_added_identity_not_the_removed_one(
    tmp_path: Path, where: Path
) -> None:
    """On XFS the re-keyed file carries the grease stanza that aligns its payload: Go age
    skips it as the spec says."""
    a_file, a = keygen(tmp_path, "a.key")
    b_file, b = keygen(tmp_path, "b.key")
    c_file, c = keygen(tmp_path, "c.key")
    d_file, d = keygen(tmp_path, "d.key")
    path = go_age_encrypt(where / "data.age", a, b)
    before = path.read_bytes()
    await streamcrypt.rekey(path, identities=a_file, add=[c, d], remove=a)  # a's: by -i
    after = path.read_bytes()
    assert go_age_decrypts(c_file, path) == go_age_decrypts(d_file, path) == DATA
    assert go_age_decrypts(b_file, path) == DATA  # the stanza kept is b's, untouched
    assert go_age_decrypts(a_file, path) is None
    check_layout(where, before, after)  # nonce and chunks: the same bytes
    assert len(age_payload(before)) > len(DATA) and len(after) != len(before)
    assert leftovers(where) == []


async def test_payload_bytes_are_kept_and_the_header_remacs(tmp_path: Path) -> None:
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    path = age_file(tmp_path, a.recipient)
    before = path.read_bytes()
    mode = 0o640
    path.chmod(mode)
    await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
    after = path.read_bytes()
    assert age_payload(after) == age_payload(before)
    assert after != before and (path.stat().st_mode & 0o777) == mode
    for ident in (a, b):
        assert streamcrypt.decrypt_bytes(after, identities=[ident]) == DATA
    tampered = bytearray(after)
    tampered[30] ^= 1  # inside the first stanza's share: the MAC must catch it
    with pytest.raises((AuthenticationError, UnknownKeyError)):
        streamcrypt.decrypt_bytes(bytes(tampered), identities=[b])


async def test_a_header_longer_than_the_first_read_is_read_again(tmp_path: Path) -> None:
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    many = [age.X25519Identity.generate().recipient for _ in range(800)]
    path = age_file(tmp_path, *many, a.recipient)
    before = path.read_bytes()
    assert age.parse_header(before).size > _rekey._FIRST_HEAD  # type: ignore[union-attr]
    await streamcrypt.rekey(path, identities=a, add=b.recipient)
    after = path.read_bytes()
    assert streamcrypt.decrypt_bytes(after, identities=[b]) == DATA
    assert age_payload(after) == age_payload(before)


async def test_an_ssh_stanza_is_removed_by_its_public_key_alone(tmp_path: Path) -> None:
    a = age.X25519Identity.generate()
    ssh = age.SshEd25519Identity.generate()
    path = age_file(tmp_path, a.recipient, ssh.recipient)
    await streamcrypt.rekey(path, identities=[a], remove=[str(ssh.recipient)])
    raw = path.read_bytes()
    assert [s.kind for s in age.parse_header(raw).stanzas] == ["X25519"]  # type: ignore[union-attr]
    assert streamcrypt.decrypt_bytes(raw, identities=[a]) == DATA
    with pytest.raises(UnknownKeyError):
        streamcrypt.decrypt_bytes(raw, identities=[ssh])


async def test_recipients_replaces_every_stanza_none_of_which_need_be_told_apart(
    tmp_path: Path,
) -> None:
    """The way to drop an X25519 recipient whose identity the caller does not hold."""
    a, b, c = (age.X25519Identity.generate() for _ in range(3))
    path = age_file(tmp_path, a.recipient, b.recipient)
    before = path.read_bytes()
    with pytest.raises(InvalidParameterError, match="alone"):
        await streamcrypt.rekey(path, identities=a, recipients=c.recipient, add=a.recipient)
    assert path.read_bytes() == before
    await streamcrypt.rekey(path, identities=a, recipients=[a.recipient, str(c.recipient)])
    after = path.read_bytes()
    assert len(age.parse_header(after).stanzas) == 2  # type: ignore[union-attr]
    for ident in (a, c):
        assert streamcrypt.decrypt_bytes(after, identities=[ident]) == DATA
    with pytest.raises(UnknownKeyError):
        streamcrypt.decrypt_bytes(after, identities=[b])
    assert age_payload(after) == age_payload(before)


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("wrong identity", UnknownKeyError),
        ("remove every recipient", InvalidParameterError),
        ("remove an X25519 recipient without its identity", UnknownKeyError),
        ("remove a recipient the file does not have", UnknownKeyError),
        ("mix post-quantum with classic", InvalidParameterError),
        ("mix a post-quantum subclass with classic", InvalidParameterError),
        ("mix what wraps for post-quantum with classic", InvalidParameterError),
        ("tampered header", AuthenticationError),
    ],
)
async def test_refusals_are_typed_and_leave_the_file_as_it_was(
    tmp_path: Path, case: str, error: type[Exception]
) -> None:
    a, b, other = (age.X25519Identity.generate() for _ in range(3))
    path = age_file(tmp_path, a.recipient, b.recipient)
    if case == "tampered header":
        raw = bytearray(path.read_bytes())
        at = raw.index(b"\n---") - 2  # in the last body line of the last stanza
        raw[at] = ord("B") if raw[at] == ord("A") else ord("A")  # still base64
        path.write_bytes(bytes(raw))
    before = path.read_bytes()
    pq = age.MLKEM768X25519Identity.generate().recipient
    kwargs = {
        "wrong identity": {"identities": [other], "add": [other.recipient]},
        "remove every recipient": {"identities": [a, b], "remove": [a.recipient, b.recipient]},
        "remove an X25519 recipient without its identity": {
            "identities": [a],
            "remove": [b.recipient],
        },
        "remove a recipient the file does not have": {
            "identities": [a, other],
            "remove": [other.recipient],
        },
        "mix post-quantum with classic": {"identities": [a], "add": [pq]},
        # labels are those of the stanzas a recipient writes, whatever its class
        "mix a post-quantum subclass with classic": {
            "identities": [a],
            "add": [_LoggedPQ(pq.public_bytes())],
        },
        "mix what wraps for post-quantum with classic": {"identities": [a], "add": [_WrapsFor(pq)]},
        "tampered header": {"identities": [a], "add": [other.recipient]},
    }[case]
    with pytest.raises(error):
        await streamcrypt.rekey(path, **kwargs)  # type: ignore[arg-type]
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


#: What is not a list of keys, nor one key: each is one item (as one_or_many reads it),
#: refused by its type; bytes of any kind are never iterated as a list of ints.
_NOT_KEYS = [None, "identity", 5, b"", bytearray(b"age1"), memoryview(b"age1")]


@pytest.mark.parametrize("fmt", [age, envelope], ids=["age", "envelope"])
@pytest.mark.parametrize(
    "given", _NOT_KEYS, ids=lambda v: str(v) if v == "identity" else type(v).__name__
)
def test_what_is_not_a_key_is_refused_typed_by_every_reader_of_keys(
    fmt: object, given: object
) -> None:
    """KeyList.keys (rekey's recipients=, add=, remove=) and KeyList.__call__ (an
    encryptor's recipients=, a decryptor's identities=) read one way: a bare TypeError
    from iterating None, or remove=b"" taken as "nothing", fails here."""
    me = fmt.X25519Identity.generate()  # type: ignore[attr-defined]
    bad = me if given == "identity" else given  # an identity where a recipient goes
    if fmt is age:
        blob = streamcrypt.encrypt_bytes(b"x", format="age", recipients=[me.recipient])
        encryptor, decryptor = age.AgeEncryptor, age.AgeDecryptor
    else:
        blob = streamcrypt.encrypt_bytes(b"x", format="envelope", recipients=[me.recipient])
        encryptor, decryptor = envelope.EnvelopeEncryptor, envelope.EnvelopeDecryptor
    for kw in ("recipients", "add", "remove"):
        with pytest.raises(InvalidParameterError, match=f"not {type(bad).__name__}"):
            fmt.rekey_header(blob, identities=[me], **{kw: bad})  # type: ignore[attr-defined]
    with pytest.raises(InvalidParameterError, match=f"not {type(bad).__name__}"):
        encryptor(recipients=bad, passphrase="pw")  # type: ignore[arg-type]
    not_identity = me.recipient if given == "identity" else given
    with pytest.raises(InvalidParameterError, match=f"not {type(not_identity).__name__}"):
        decryptor(identities=not_identity)  # type: ignore[arg-type]


async def test_a_passphrase_file_takes_no_recipient(tmp_path: Path) -> None:
    path = tmp_path / "pw.age"
    raw = streamcrypt.encrypt_bytes(DATA, format="age", passphrase="pw", work_factor=8)
    path.write_bytes(raw)
    with pytest.raises(InvalidParameterError, match="only stanza"):
        await streamcrypt.rekey(path, passphrase="pw", add=age.X25519Identity.generate().recipient)
    assert path.read_bytes() == raw


#: A classic age plugin (no labels): one stanza per file key, nothing real wrapped.
_CLASSIC_PLUGIN = """\
read_phase1()
out.write(b"-> recipient-stanza 0 classic-ish\\nAAAA\\n"); out.flush(); os.read(0, 100)
out.write(b"-> done\\n\\n"); out.flush()
"""


async def test_who_may_share_a_file_is_one_rule_for_encrypting_and_rekeying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A classic plugin recipient (no labels) beside a post-quantum one is refused by
    encrypt (label sets differ): rekey(add=) refuses it too."""
    from streamcrypt.codecs._bech32 import bech32_encode

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "classic", _CLASSIC_PLUGIN)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    classic = age.PluginRecipient(bech32_encode("age1classic", b"k"), timeout=10)
    pq = age.MLKEM768X25519Identity.generate()
    with pytest.raises(InvalidParameterError, match="label sets differ"):
        streamcrypt.encrypt_bytes(DATA, format="age", recipients=[classic, pq.recipient])
    path = age_file(tmp_path, pq.recipient)
    before = path.read_bytes()
    with pytest.raises(InvalidParameterError, match="label sets differ"):
        await streamcrypt.rekey(path, identities=pq, add=classic)
    assert path.read_bytes() == before
    # A kept plugin stanza (or age's grease) says nothing of its labels: the rule checks
    # what the header shows, so a classic recipient joins a classic plugin's file.
    x = age.X25519Identity.generate()
    mixed = tmp_path / "mixed.age"
    mixed.write_bytes(
        streamcrypt.encrypt_bytes(DATA, format="age", recipients=[classic, x.recipient])
    )
    await streamcrypt.rekey(mixed, identities=x, add=age.X25519Identity.generate().recipient)
    kinds = [s.kind for s in age.parse_header(mixed.read_bytes()).stanzas]
    assert kinds == ["classic-ish", "X25519", "X25519"]
    assert leftovers(tmp_path) == []


async def test_what_has_no_recipients_in_place_is_refused(tmp_path: Path) -> None:
    a = age.X25519Identity.generate()
    armored = tmp_path / "armored.age"
    armored.write_bytes(
        streamcrypt.encrypt_bytes(DATA, format="age", recipients=[a.recipient], armor=True)
    )
    native = tmp_path / "native.sc"
    native.write_bytes(streamcrypt.encrypt_bytes(DATA, os.urandom(32)))
    for path in (armored, native):
        before = path.read_bytes()
        with pytest.raises(UnsupportedFormatError):
            await streamcrypt.rekey(path, identities=[a], add=[a.recipient])
        assert path.read_bytes() == before
    link = tmp_path / "link.age"
    link.symlink_to(age_file(tmp_path, a.recipient))
    with pytest.raises(OSError):  # never replaced through a link
        await streamcrypt.rekey(link, identities=[a], add=[a.recipient])
    assert link.is_symlink()


# ------------------------------------------------------------------------- envelope


def envelope_payload(raw: bytes) -> bytes:
    """What follows the envelope header and the container header: the segments."""
    header = envelope.parse_header(raw)
    assert header is not None
    inner = streamcrypt.codecs.container.read_header(raw[header.size :])
    assert inner is not None
    return raw[header.size + inner[1] + streamcrypt.codecs.container.TAG_SIZE :]


@pytest.mark.parametrize("aad", [b"", b"bound context"])
async def test_envelope_round_trips_add_and_remove(tmp_path: Path, aad: bytes) -> None:
    a = envelope.X25519Identity.generate(text_form="envelope")
    b = envelope.X25519Identity.generate(text_form="envelope")
    e = envelope.EciesIdentity.generate()
    path = tmp_path / "data.sc"
    path.write_bytes(
        streamcrypt.encrypt_bytes(
            DATA, format="envelope", recipients=[a.recipient, e.recipient], aad=aad
        )
    )
    before = path.read_bytes()
    await streamcrypt.rekey(path, identities=[a], add=[str(b.recipient)], aad=aad)
    added = path.read_bytes()
    for ident in (a, b, e):
        assert streamcrypt.decrypt_bytes(added, identities=[ident], aad=aad) == DATA
    await streamcrypt.rekey(path, identities=[b, a, e], remove=[a.recipient, e.recipient], aad=aad)
    after = path.read_bytes()
    assert streamcrypt.decrypt_bytes(after, identities=[b], aad=aad) == DATA
    for gone in (a, e):
        with pytest.raises(UnknownKeyError):
            streamcrypt.decrypt_bytes(after, identities=[gone], aad=aad)
    assert envelope_payload(after) == envelope_payload(before)
    assert len(envelope.parse_header(after).stanzas) == 1  # type: ignore[union-attr]
    await streamcrypt.rekey(path, identities=[b], recipients=[e.recipient], aad=aad)
    only_e = path.read_bytes()
    assert streamcrypt.decrypt_bytes(only_e, identities=[e], aad=aad) == DATA
    with pytest.raises(UnknownKeyError):
        streamcrypt.decrypt_bytes(only_e, identities=[b], aad=aad)
    after = only_e
    if aad:  # the associated data is checked before anything is rewritten
        with pytest.raises(AuthenticationError):
            await streamcrypt.rekey(path, identities=[e], add=[a.recipient], aad=b"other")
        assert path.read_bytes() == after


async def test_a_signed_envelope_is_refused(tmp_path: Path) -> None:
    a = envelope.X25519Identity.generate(text_form="envelope")
    path = tmp_path / "signed.sc"
    raw = streamcrypt.encrypt_bytes(
        DATA, format="envelope", recipients=[a.recipient], sign_with=Ed25519PrivateKey.generate()
    )
    path.write_bytes(raw)
    with pytest.raises(InvalidParameterError, match="signed"):
        await streamcrypt.rekey(path, identities=[a], add=[a.recipient])
    assert path.read_bytes() == raw


# ---------------------------------------------------------------- shared payload

#: FS_IOC_FIEMAP (_IOWR('f', 11, struct fiemap)), its sync flag, and the extent flag of
#: blocks shared with another file (linux/fiemap.h).
_FIEMAP, _FIEMAP_FLAG_SYNC, _FIEMAP_EXTENT_SHARED = 0xC020660B, 1, 0x2000
_EXTENT = struct.Struct("=QQQ16xI12x")  # fe_logical, fe_physical, fe_length, fe_flags


def extents(path: Path) -> list[tuple[int, int, int, int]]:
    """The file's extents (logical, physical, length, flags), its dirty pages written
    first (FIEMAP)."""
    count = 256
    buf = bytearray(struct.pack("=QQIIII", 0, 2**64 - 1, _FIEMAP_FLAG_SYNC, 0, count, 0))
    buf += bytes(_EXTENT.size * count)
    with open(path, "rb") as f:
        fcntl.ioctl(f.fileno(), _FIEMAP, buf)
    mapped = struct.unpack_from("=I", buf, 20)[0]
    return [_EXTENT.unpack_from(buf, 32 + _EXTENT.size * i) for i in range(mapped)]


@contextlib.contextmanager
def kept(path: Path) -> Iterator[Path]:
    """The file now at ``path`` kept alive by an open descriptor (a re-key refuses a file
    with other hard links), reachable as ``/proc/self/fd/N`` after its name is replaced."""
    fd = os.open(path, os.O_RDONLY)
    try:
        yield Path(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def physical(path: Path, offset: int) -> int:
    """Where on the device the byte at ``offset`` of the file lies."""
    for logical, phys, length, _ in extents(path):
        if logical <= offset < logical + length:
            return phys + offset - logical
    raise AssertionError(f"no extent holds byte {offset} of {path}")


async def test_on_xfs_the_payload_blocks_are_shared_not_copied(xfs_path: Path) -> None:
    """The old file's blocks (kept alive by an open descriptor) are the new file's from
    the payload's first block boundary on: FIEMAP marks them shared and maps both to the
    same place; the few bytes before it and the header are the new file's own."""
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    data = os.urandom(3 << 20)
    path = age_file(xfs_path, a.recipient, data=data)
    before = path.read_bytes()
    with kept(path) as old:
        await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
        after = path.read_bytes()
        check_layout(xfs_path, before, after)
        assert streamcrypt.decrypt_bytes(after, identities=[b]) == data
        block = os.statvfs(xfs_path).f_bsize
        old_size = len(before) - len(age_payload(before))
        start = -(-old_size // block) * block  # the payload's first block boundary
        delta = len(after) - len(before)
        new_extents = extents(path)
        assert all(
            flags & _FIEMAP_EXTENT_SHARED
            for logical, _, _, flags in new_extents
            if logical >= start + delta
        )
        assert not any(flags & _FIEMAP_EXTENT_SHARED for _, _, _, flags in new_extents[:1])
        for offset in range(start, len(before), 1 << 20):
            assert physical(path, offset + delta) == physical(old, offset)
    assert leftovers(xfs_path) == []


async def test_pyrage_reads_a_file_with_the_grease(xfs_path: Path) -> None:
    a = pyrage.x25519.Identity.generate()
    b = pyrage.x25519.Identity.generate()
    path = xfs_path / "data.age"
    path.write_bytes(pyrage.encrypt(DATA, [a.to_public()]))
    await streamcrypt.rekey(path, identities=age.parse_identity(str(a)), add=str(b.to_public()))
    after = path.read_bytes()
    assert kinds(after)[-1] == "grease"
    assert pyrage.decrypt(after, [b]) == DATA
    assert pyrage.decrypt(after, [a]) == DATA


async def test_a_second_rekey_drops_the_old_grease_and_sizes_a_new_one(
    xfs_path: Path, tmp_path: Path
) -> None:
    """On XFS: one grease stanza after each re-key, sized anew; it is no recipient (a
    removal of every real one is still refused). Copied to the copy path's file system
    and re-keyed there: the grease goes and none comes."""
    a, b, c = (age.X25519Identity.generate() for _ in range(3))
    path = age_file(xfs_path, a.recipient)
    first = path.read_bytes()
    await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
    second = path.read_bytes()
    await streamcrypt.rekey(path, identities=[a, b], add=[c.recipient], remove=[a.recipient])
    third = path.read_bytes()
    assert kinds(third) == ["X25519", "X25519", "grease"]
    check_layout(xfs_path, second, third)
    check_layout(xfs_path, first, third)
    assert streamcrypt.decrypt_bytes(third, identities=[c]) == DATA
    with pytest.raises(InvalidParameterError, match="nobody can open"):
        await streamcrypt.rekey(path, identities=[b, c], remove=[b.recipient, c.recipient])
    assert path.read_bytes() == third
    elsewhere = tmp_path / "data.age"
    elsewhere.write_bytes(third)
    await streamcrypt.rekey(elsewhere, identities=[c, b], remove=[b.recipient])
    assert kinds(elsewhere.read_bytes()) == ["X25519"]
    assert age_payload(elsewhere.read_bytes()) == age_payload(first)


@pytest.mark.parametrize("refusal", [errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY])
async def test_where_the_clone_is_refused_the_header_has_no_grease_and_the_payload_is_copied(
    xfs_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    path = age_file(xfs_path, a.recipient)
    before = path.read_bytes()
    tried: list[int] = []

    def refuse(fd: int, request: int, arg: bytes) -> bytes:
        tried.append(request)
        raise OSError(refusal, os.strerror(refusal))

    monkeypatch.setattr(fcntl, "ioctl", refuse)
    await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
    after = path.read_bytes()
    assert tried == [_rekey._FICLONERANGE]
    assert kinds(after) == ["X25519", "X25519"]
    assert age_payload(after) == age_payload(before)
    assert streamcrypt.decrypt_bytes(after, identities=[b]) == DATA
    assert leftovers(xfs_path) == []


async def test_a_passphrase_header_gets_no_grease_and_its_payload_is_copied(xfs_path: Path) -> None:
    """An scrypt stanza stays alone (the spec; Go age and this reader refuse anything
    beside it): a new passphrase header one byte longer than the old is not padded, so
    its payload, off the block grid, is copied."""
    path = xfs_path / "pw.age"
    path.write_bytes(streamcrypt.encrypt_bytes(DATA, format="age", passphrase="pw", work_factor=8))
    before = path.read_bytes()
    new = age.ScryptRecipient("pw2", work_factor=10)  # "10": one byte more than "8"
    await streamcrypt.rekey(path, passphrase="pw", recipients=new)
    after = path.read_bytes()
    assert kinds(after) == ["scrypt"] and len(after) == len(before) + 1
    assert age_payload(after) == age_payload(before)
    assert streamcrypt.decrypt_bytes(after, passphrase="pw2") == DATA
    assert not any(flags & _FIEMAP_EXTENT_SHARED for *_, flags in extents(path))


async def test_an_envelope_is_cloned_only_where_its_header_keeps_its_length_modulo_the_block(
    xfs_path: Path,
) -> None:
    """The envelope has no grease: one recipient swapped for another of its type keeps the
    header's length, so its payload is cloned; a recipient added moves it off the block
    grid, so it is copied."""
    a, b, c = (envelope.X25519Identity.generate(text_form="envelope") for _ in range(3))
    path = xfs_path / "data.sc"
    path.write_bytes(
        streamcrypt.encrypt_bytes(DATA * 10, format="envelope", recipients=[a.recipient])
    )
    before = path.read_bytes()
    for change, shared in (
        ({"recipients": [b.recipient]}, True),
        ({"add": [c.recipient]}, False),
    ):
        with kept(path):
            await streamcrypt.rekey(path, identities=[a, b], **change)  # type: ignore[arg-type]
            assert any(f & _FIEMAP_EXTENT_SHARED for *_, f in extents(path)) == shared
    after = path.read_bytes()
    assert envelope_payload(after) == envelope_payload(before)
    assert streamcrypt.decrypt_bytes(after, identities=[c]) == DATA * 10


def test_a_grease_stanza_takes_exactly_the_bytes_asked() -> None:
    for size in range(age_header.MIN_GREASE, 3 * 4096):
        stanza = age_header.grease_stanza(size)
        assert len(age_header._encode_stanza(stanza)) == size
        assert stanza.kind == "grease" and not stanza.body.strip(b"\0")
    with pytest.raises(InvalidParameterError):
        age_header.grease_stanza(age_header.MIN_GREASE - 1)


@pytest.mark.parametrize("others", [0, 1, 5])
def test_the_aligned_header_is_the_old_ones_length_modulo_the_block(others: int) -> None:
    """Whatever the old header's length and the block: the aligned header's length is
    congruent to it, the grease at least the shortest and less than a block more; where
    the new header already is (a block of exactly the growth), no grease."""
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    many = [age.X25519Identity.generate().recipient for _ in range(others)]
    raw = streamcrypt.encrypt_bytes(b"x", format="age", recipients=[a.recipient, *many])
    plain, _, size = rekey_headers(raw, 0, identities=a, add=b.recipient)
    growth = len(plain) - size
    for block in (512, 4096, 65536, growth + 5, growth + age_header.MIN_GREASE):
        again, aligned, old_size = rekey_headers(raw, block, identities=a, add=b.recipient)
        assert old_size == size and len(again) == len(plain) and "grease" not in kinds(again)
        assert (len(aligned) - size) % block == 0
        grease = len(aligned) - len(plain)
        assert age_header.MIN_GREASE <= grease < block + age_header.MIN_GREASE
        assert kinds(aligned) == [*kinds(again), "grease"]
        assert streamcrypt.decrypt_bytes(aligned + raw[size:], identities=[b]) == b"x"
    _, aligned, _ = rekey_headers(raw, growth, identities=a, add=b.recipient)
    assert len(aligned) == len(plain) and "grease" not in kinds(aligned)


# ------------------------------------------------------------ failure, cancellation


async def test_cancellation_at_any_point_leaves_the_old_file_or_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The payload is copied in many slow steps; cancelled at points before, during and
    after the copy, the file is whole (old or re-keyed) and no temporary is left."""
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    copy = _rekey._copy
    steps: list[int] = []

    def slow_copy(src: int, dst: int, offset: int, count: int) -> int:
        steps.append(offset)
        time.sleep(0.01)
        return copy(src, dst, offset, count)

    monkeypatch.setattr(_rekey, "_STEP", 16 << 10)
    monkeypatch.setattr(_rekey, "_copy", slow_copy)
    outcomes = set()
    for delay in (0.0, 0.0002, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.05, 0.12, 5.0):
        path = age_file(tmp_path, a.recipient)
        before = path.read_bytes()
        steps.clear()
        with anyio.move_on_after(delay):
            await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
        raw = path.read_bytes()
        assert leftovers(tmp_path) == []
        if raw == before:
            outcomes.add("old after a copy" if steps else "old")
        else:
            assert streamcrypt.decrypt_bytes(raw, identities=[b]) == DATA
            assert age_payload(raw) == age_payload(before)
            outcomes.add("new")
    # cancelled in the middle of the copy at least once, and completed at least once
    assert {"old after a copy", "new"} <= outcomes, outcomes


async def test_a_failing_copy_leaves_the_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    path = age_file(tmp_path, a.recipient)
    before = path.read_bytes()

    def broken(src: int, dst: int, offset: int, count: int) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_rekey, "_copy", broken)
    with pytest.raises(OSError, match="No space"):
        await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


async def test_a_failing_or_cancelled_clone_leaves_the_file_and_no_temporary(
    xfs_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clone error that is not a refusal (here ENOSPC) is raised, not copied round; a
    cancellation before, during or after the (slowed) clone leaves the old file or the
    new one, whole, and no temporary."""
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    path = age_file(xfs_path, a.recipient)
    before = path.read_bytes()
    ioctl = fcntl.ioctl

    def full(fd: int, request: int, arg: bytes) -> bytes:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fcntl, "ioctl", full)
    with pytest.raises(OSError, match="No space"):
        await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
    assert path.read_bytes() == before and leftovers(xfs_path) == []

    def slow(fd: int, request: int, arg: bytes) -> bytes:
        time.sleep(0.02)
        return ioctl(fd, request, arg)

    monkeypatch.setattr(fcntl, "ioctl", slow)
    outcomes = set()
    for delay in (0.0, 0.001, 0.003, 0.01, 0.02, 0.05, 5.0):
        path.write_bytes(before)
        with anyio.move_on_after(delay):
            await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
        raw = path.read_bytes()
        assert leftovers(xfs_path) == []
        if raw == before:
            outcomes.add("old")
        else:
            check_layout(xfs_path, before, raw)
            assert streamcrypt.decrypt_bytes(raw, identities=[b]) == DATA
            outcomes.add("new")
    assert outcomes == {"old", "new"}, outcomes


def test_the_plain_copy_serves_where_the_kernel_copy_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    data = os.urandom(3 * _rekey._CHUNK + 5)
    src.write_bytes(data)

    def refuse(*args: object) -> int:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    with open(src, "rb") as s, open(dst, "wb") as d:
        assert _rekey._copy(s.fileno(), d.fileno(), 7, len(data) - 7) == len(data) - 7
    assert dst.read_bytes() == data[7:]


# ---------------------------------------------------------------------------- CLI


def sc(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "streamcrypt", *map(str, args)],
        capture_output=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@needs_age
def test_the_command_end_to_end(tmp_path: Path) -> None:
    a_file, a = keygen(tmp_path, "a.key")
    b_file, b = keygen(tmp_path, "b.key")
    c_file, c = keygen(tmp_path, "c.key")
    (tmp_path / "more.txt").write_text(f"# recipients\n{c}\n")
    files = [tmp_path / "one.age", tmp_path / "two.age"]
    for path in files:
        go_age_encrypt(path, a)
    originals = [p.read_bytes() for p in files]

    run = sc("rekey", "-i", b_file, "-a", c, *files, cwd=tmp_path)  # b opens nothing
    assert run.returncode == 3, run.stderr
    assert run.stderr.decode().count("streamcrypt: error: ") == 2
    assert [p.read_bytes() for p in files] == originals

    run = sc("rekey", "-i", a_file, "-a", b, "-A", "more.txt", *files, cwd=tmp_path)
    assert run.returncode == 0 and run.stderr == b"", run.stderr
    for path in files:
        assert go_age_decrypts(b_file, path) == DATA
        assert go_age_decrypts(c_file, path) == DATA

    run = sc("rekey", "-i", a_file, "-x", a, files[0], cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert go_age_decrypts(a_file, files[0]) is None
    assert go_age_decrypts(b_file, files[0]) == DATA
    assert age_payload(files[0].read_bytes()) == age_payload(originals[0])

    run = sc("rekey", "-i", a_file, "-r", c, files[1], cwd=tmp_path)  # only c, b dropped
    assert run.returncode == 0, run.stderr
    assert go_age_decrypts(b_file, files[1]) is None
    assert go_age_decrypts(c_file, files[1]) == DATA

    assert sc("rekey", "-i", c_file, files[1], cwd=tmp_path).returncode == 2  # nothing asked
    assert sc("rekey", "-i", c_file, "-r", c, "-x", c, files[1], cwd=tmp_path).returncode == 2
    bad = sc("rekey", "-i", a_file, "-a", "AGE-SECRET-KEY-1NOTAKEY", files[1], cwd=tmp_path)
    assert bad.returncode == 3 and b"AGE-SECRET" not in bad.stderr
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("other_writer", ["replaces", "appends"])
async def test_a_file_changed_during_a_rekey_is_never_replaced(
    where: Path, other_writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer saves a new version (a temporary renamed over the name, as
    streamcrypt writes) or appends in place while the payload is cloned or copied: the
    re-key refuses at its commit, and the other writer's bytes stand (review 8a: they
    were silently undone)."""
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    path = age_file(where, a.recipient)
    newer = streamcrypt.encrypt_bytes(b"version 2", format="age", recipients=[a.recipient])
    clone = _rekey._clone

    def racing(*args: object) -> bool:
        if other_writer == "replaces":
            (where / "v2").write_bytes(newer)
            os.replace(where / "v2", path)
        else:
            with open(path, "ab") as f:
                f.write(b"appended")
        return clone(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_rekey, "_clone", racing)
    expected = newer if other_writer == "replaces" else None
    if expected is None:
        expected = path.read_bytes() + b"appended"
    with pytest.raises(FileChangedError):
        await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
    assert path.read_bytes() == expected
    assert leftovers(where) == []


async def test_a_file_with_other_hard_links_is_refused(tmp_path: Path) -> None:
    """A re-key replaces one name: another link would keep the old header, so a removed
    recipient would still read the file through it (review 8a)."""
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    path = age_file(tmp_path, a.recipient, b.recipient)
    os.link(path, tmp_path / "other-name.age")
    before = path.read_bytes()
    with pytest.raises(InvalidParameterError, match="hard link"):
        await streamcrypt.rekey(path, identities=[a], remove=[b.recipient])
    assert path.read_bytes() == before and os.stat(path).st_nlink == 2
    assert leftovers(tmp_path) == []


async def test_the_new_file_keeps_the_owner_and_group_of_the_old(where: Path) -> None:
    """Root re-keys a file of another user: the new file is still that user's, with its
    group and mode (review 8a: it became root's, and the owner lost access)."""
    a, b = age.X25519Identity.generate(), age.X25519Identity.generate()
    path = age_file(where, a.recipient)
    os.chown(path, 65534, 65534)
    os.chmod(path, 0o640)
    await streamcrypt.rekey(path, identities=[a], add=[b.recipient])
    st = os.stat(path)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (65534, 65534, 0o640)
