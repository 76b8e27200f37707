"""The streamcrypt backup store format, version 1: keys, packs, index files, snapshots.

Theory of operation
-------------------
A store (layout and rationale: docs/BACKUP.md) holds content-defined chunks of files,
each stored once under its *chunk id*: keyed BLAKE3 of the chunk's plaintext. Keys come
in two parts (:class:`BackupKeys`), each derived by HKDF-SHA256 under its own label, so
no key serves two purposes:

- the *writer's* keys, from one 32-byte secret: the chunk-id key, the chunker seed, the
  Ed25519 key that signs snapshots and the config, and the keys of the writer's id lists
  and metadata cache;
- the *data* keys (:class:`DataKeys`) that seal and open packs, index files and
  snapshots.

A **symmetric store** derives both parts from its one master key. A **write-only store**
is made with age recipients instead (``age1...``; the recipient model of
:mod:`streamcrypt.codecs.age`): its config lists them, and the writer holds only the
writer's secret. Each backup run (a *session*) draws a fresh 32-byte session secret,
stores it once as an age file to the recipients (``keys/<session id>``, before anything
it seals), and derives that run's data keys from it; packs, index files and snapshots
name their session (a pack in its header, an index file or snapshot as its container's
key id). The writer forgets the session secret when the run ends, so it can never open
what it stored; the identity unwraps the session files and opens everything. The
writer's secret itself is stored to the recipients too (``keys/writer``): the identity
recomputes chunk ids, checks and makes signatures, and changing the recipients rewraps
only the small files in ``keys/`` (:func:`seal_key_file`), never the data.

The writer deduplicates against what it can read: an *id list* per index file (the
packs that index names and their chunk ids, sealed under a key of the writer's secret
and bound to the list's name, so only a holder of the writer's secret reads or writes
them; a chunk counts as stored only while its pack is in the store) and its own
metadata cache (the last snapshot's manifest of a source, kept on the writer's machine
under another such key).

**Blobs and packs.** A chunk is compressed with zstd (kept raw when that does not make
it smaller) and sealed as one *blob*; many blobs go into one *pack* file, as restic and
borg do, so thousands of small files are not thousands of objects::

    pack    = header || blob_0 || ... || blob_n-1 || sealed table || u32_be(len(sealed table))
    header  = "SCBK" | version u8 (= 1) | kind u8 | salt (32 bytes)
              kind 1: symmetric store, the salt is random
              kind 2: write-only store, the salt is session id (16) | random (16)
    key     = HKDF-SHA256(pack data key, salt, "streamcrypt-backup v1 pack " || pack id)
    blob    = AES-256-GCM(key, nonce = u96_be(offset of the blob in the pack),
                          payload, aad = "blob" || chunk id || flags)
    table   = AES-256-GCM(key, nonce = 12 x 0xff, count u32 || count x entry,
                          aad = "table" || header)
    entry   = chunk id (32) | flags u8 (bit 0: zstd) | offset u32 | sealed length u32
              | plaintext length u32

Each blob authenticates alone and only under its own id and pack (the pack id, a random
name, is bound into the key), so one damaged byte condemns one blob, and a blob moved or
renamed does not open. Opening a blob also recomputes its id from the plaintext.

**Index files** map chunk ids to their places (the entries of many packs); **snapshot
files** hold the signed manifest of one backup. Both are native containers (docs/FORMAT.md)
over zstd-compressed bytes, each under its own key and associated data; a snapshot is
additionally signed with Ed25519 over its name and ciphertext, so the public key alone
checks it. The store's ``config`` is plain JSON, signed the same way.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections import ChainMap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import zstandard

from ..abc import Buffer, as_bytes
from ..errors import (
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    InvalidSignatureError,
    StreamCryptError,
    UnknownKeyError,
    UnsupportedFormatError,
    UntrustedRecipientError,
)
from ..keys import HoldsSecrets, SecretKey, constant_time_equal, hkdf, load_json, random_bytes
from ..primitives import (
    AES256GCM,
    CDC_AVG_SIZE,
    CDC_MAX_SIZE,
    CDC_MIN_SIZE,
    ED25519_SIGNATURE_SIZE,
    ContentChunker,
    Ed25519PrivateKey,
    Ed25519PublicKey,
    blake3_keyed,
)
from . import container
from ._backup_manifest import FORMAT, ID_SIZE, VERSION, Manifest, Node
from ._stanza import (
    IdentityLike,
    KeyIdentity,
    KeyList,
    PublicKey,
    Recipient,
    RecipientLike,
    key_lines,
)

__all__ = [
    "DEFAULT_PACK_SIZE",
    "DEFAULT_ZSTD_LEVEL",
    "FLAG_ZSTD",
    "ID_SIZE",
    "MAX_CONFIG_SIZE",
    "PACK_HEADER_SIZE",
    "SESSION_ID_SIZE",
    "BackupKeys",
    "BlobEntry",
    "DataKeys",
    "Manifest",
    "Node",
    "PackOpener",
    "PackWriter",
    "StoreConfig",
    "check_recipients",
    "compress_blob",
    "decode_ids",
    "decode_index",
    "encode_ids",
    "encode_index",
    "listed_recipient",
    "open_cache",
    "open_key_file",
    "open_snapshot",
    "recipient_texts",
    "seal_cache",
    "seal_key_file",
    "seal_snapshot",
    "verify_snapshot_signature",
    "vouched_recipients",
]

#: Plaintext bytes of blobs a pack collects before it is sealed and stored (restic's
#: default pack size).
DEFAULT_PACK_SIZE = 16 << 20
#: zstd level of chunk compression: 3 is zstd's default and close to restic's "auto".
DEFAULT_ZSTD_LEVEL = 3
#: Blob flag: the chunk was compressed with zstd before sealing.
FLAG_ZSTD = 0x01

_LABEL = b"streamcrypt-backup v1 "
_MAGIC = b"SCBK"
_KIND_PACK = 1
#: Pack kind of a write-only store: the salt starts with the session id.
_KIND_SESSION_PACK = 2
_SALT_SIZE = 32
#: Bytes of a write-only store's session id (it names ``keys/<hex>``).
SESSION_ID_SIZE = 16
#: Bytes of a pack file's header: magic, version and salt.
PACK_HEADER_SIZE = len(_MAGIC) + 2 + _SALT_SIZE
_TAG = 16
_TABLE_NONCE = b"\xff" * 12
_ENTRY = struct.Struct(">32sBIII")
_COUNT = struct.Struct(">I")
_INDEX_MAGIC = b"SCBI\x01"
_INDEX_AAD = _LABEL + b"index"
_SNAPSHOT_AAD = _LABEL + b"snapshot\x00"
_SIGNED_SNAPSHOT = _LABEL + b"signed snapshot\x00"
_SIGNED_CONFIG = _LABEL + b"signed config\x00"
_IDS_MAGIC = b"SCBL\x02"
_IDS_AAD = _LABEL + b"id list"
_CACHE_AAD = _LABEL + b"writer cache\x00"
_KEY_FILE_MAGIC = _LABEL + b"key file\x00"
#: Bytes of a session or writer secret.
_SECRET_SIZE = 32
#: Largest plaintext a blob may declare (the chunker's maximum is 16 MiB).
_MAX_BLOB = 1 << 24
#: Largest manifest or index plaintext a reader decompresses.
_MAX_DOC = 1 << 31
#: Largest store config or lock file a reader takes (a real one is a few hundred bytes);
#: read at most one byte more, so a huge one is refused without being read whole.
MAX_CONFIG_SIZE = 1 << 16


# -- keys ---------------------------------------------------------------------------------------


def _sub(secret: bytes, label: str, length: int = 32) -> bytes:
    return hkdf(secret, info=_LABEL + label.encode(), length=length)


@dataclass(frozen=True, slots=True, repr=False)
class DataKeys(HoldsSecrets):
    """The keys that seal and open packs, index files and snapshots: a symmetric store's
    (``session`` empty) or one backup session's of a write-only store."""

    session: bytes
    pack: SecretKey
    index: SecretKey
    snapshot: SecretKey

    @classmethod
    def derive(cls, secret: bytes, session: bytes = b"") -> DataKeys:
        """The data keys of a master key or session secret (the session id, as hex, is
        the key id its containers carry)."""
        kid = session.hex()
        return cls(
            session=session,
            pack=SecretKey(_sub(secret, "pack encryption")),
            index=SecretKey(_sub(secret, "index encryption"), key_id=kid),
            snapshot=SecretKey(_sub(secret, "snapshot encryption"), key_id=kid),
        )

    def __repr__(self) -> str:
        return f"DataKeys(<hidden>, session={self.session.hex()!r})"


@dataclass(frozen=True, slots=True, repr=False)
class BackupKeys(HoldsSecrets):
    """The keys one holder of a store has: the writer's part (chunk ids, chunker seed,
    signing, id lists, cache), the data keys new objects are sealed under (``data``;
    ``None`` until a write-only store's session begins), and, for a ``reader`` (the
    master key, or a write-only store's identity), the data keys that open what is
    stored (``opens``: session id -> keys). A write-only store's writer is no reader.
    """

    chunk_id: SecretKey
    signing: Ed25519PrivateKey
    chunker_seed: int = field(repr=False)
    ids: SecretKey
    cache: SecretKey
    data: DataKeys | None = None
    opens: Mapping[bytes, DataKeys] = field(default_factory=dict)
    reader: bool = False
    _chunk_id_raw: bytes = field(default=b"", repr=False)

    @classmethod
    def writer(cls, secret_key: SecretKey) -> BackupKeys:
        """A write-only store's writer keys (from the writer's secret): they seal nothing
        until :meth:`sealing` gives them a session, and open nothing."""
        secret = secret_key.secret_bytes()
        if len(secret) != _SECRET_SIZE:
            raise InvalidParameterError("a backup key is 32 bytes")
        chunk_id = _sub(secret, "chunk id")
        return cls(
            chunk_id=SecretKey(chunk_id),
            signing=Ed25519PrivateKey(_sub(secret, "snapshot signing")),
            chunker_seed=int.from_bytes(_sub(secret, "chunker seed", 8), "big") >> 1,
            ids=SecretKey(_sub(secret, "id list encryption")),
            cache=SecretKey(_sub(secret, "writer cache encryption")),
            _chunk_id_raw=chunk_id,
        )

    @classmethod
    def derive(cls, master: SecretKey) -> BackupKeys:
        """A symmetric store's keys: both parts from its master key."""
        keys = cls.writer(master)
        data = DataKeys.derive(master.secret_bytes())
        return replace(keys, data=data, opens={b"": data}, reader=True)

    def sealing(self, data: DataKeys) -> BackupKeys:
        """These keys sealing under ``data`` (a new session); a holder that opens what is
        stored (the identity) opens it too, a writer still opens nothing."""
        # a chain, not a copy: an identity's sessions may be unwrapped only when asked for
        # (ChainMap only reads its maps here; typeshed wants them mutable)
        chain = ChainMap({data.session: data}, self.opens)  # type: ignore[arg-type]
        opens = chain if self.reader else {}
        return replace(self, data=data, opens=opens)

    def sealer(self) -> DataKeys:
        """The data keys new objects are sealed under; :class:`UnknownKeyError` before a
        write-only store's session began."""
        if self.data is None:
            raise UnknownKeyError("no backup session began: nothing can be sealed yet")
        return self.data

    def opener(self, session: bytes, what: str) -> DataKeys:
        """The data keys of ``session`` (empty: a symmetric store's). Raises
        :class:`UnknownKeyError` when these keys cannot open it: a write-only store's
        writer key, or an identity the session was not wrapped to."""
        found = self.opens.get(session)
        if found is None:
            if not self.reader:
                raise UnknownKeyError(
                    f"{what} is sealed to a write-only store's recipients: opening it "
                    "needs the store's identity, not the writer key"
                )
            raise UnknownKeyError(f"{what} belongs to a session these keys cannot open")
        return found

    def chunk_id_of(self, data: Buffer) -> bytes:
        """The id of a chunk: keyed BLAKE3 of its plaintext (32 bytes)."""
        return blake3_keyed(self._chunk_id_raw or self.chunk_id, data)

    def chunker(self, config: StoreConfig) -> ContentChunker:
        """A chunker with the store's sizes and this key's boundaries."""
        return ContentChunker(
            config.avg_size,
            min_size=config.min_size,
            max_size=config.max_size,
            seed=self.chunker_seed,
        )

    def __repr__(self) -> str:
        return f"BackupKeys(<hidden>, signer={self.signing.public_bytes().hex()})"


def _sign(keys: BackupKeys, context: bytes, message: bytes) -> bytes:
    return keys.signing.sign(context + message)


# -- the store's config ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The store's parameters (plain, signed JSON at ``STORE/config``)."""

    store_id: str
    signer: bytes
    #: A write-only store's age recipients (text); empty for a symmetric store.
    recipients: tuple[str, ...] = ()
    avg_size: int = CDC_AVG_SIZE
    min_size: int = CDC_MIN_SIZE
    max_size: int = CDC_MAX_SIZE
    pack_size: int = DEFAULT_PACK_SIZE
    zstd_level: int = DEFAULT_ZSTD_LEVEL

    @classmethod
    def new(cls, keys: BackupKeys, **params: int) -> StoreConfig:
        return cls(random_bytes(16).hex(), keys.signing.public_bytes(), (), **params)

    @property
    def write_only(self) -> bool:
        """A store made with recipients: its writer cannot read it back."""
        return bool(self.recipients)

    def _doc(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"recipients": list(self.recipients)} if self.recipients else {}
        return extra | {
            "format": FORMAT,
            "version": VERSION,
            "id": self.store_id,
            "signer": self.signer.hex(),
            "chunker": {"avg": self.avg_size, "min": self.min_size, "max": self.max_size},
            "pack_size": self.pack_size,
            "zstd_level": self.zstd_level,
        }

    def encode(self, keys: BackupKeys) -> bytes:
        body = json.dumps(self._doc(), sort_keys=True, separators=(",", ":"))
        signature = _sign(keys, _SIGNED_CONFIG, body.encode())
        return json.dumps({"config": body, "signature": signature.hex()}, indent=1).encode()

    @classmethod
    def decode(
        cls, data: bytes, keys: BackupKeys | None = None, *, removing: Sequence[str] = ()
    ) -> StoreConfig:
        """Parse (and with ``keys``, check the signer and signature of) a config file.

        Each recipient must be one age recipient in its canonical text form
        (:func:`listed_recipient`), except the entries in ``removing``: the exact texts
        ``rekey`` removes, the owner's way to drop one that is not. Raises
        :class:`FormatError`, :class:`UnsupportedFormatError`,
        :class:`UnknownKeyError` (the store belongs to another key),
        :class:`UntrustedRecipientError` (a recipient not so) and
        :class:`InvalidSignatureError`.
        """
        outer = load_json(data, "the store config", max_size=MAX_CONFIG_SIZE)
        try:
            body = outer["config"]
            if not isinstance(body, str):
                raise TypeError
            doc = load_json(body, "the store config", max_size=MAX_CONFIG_SIZE)
            signature = bytes.fromhex(outer["signature"])
            if doc["format"] != FORMAT:
                raise FormatError("not a streamcrypt backup store config")
            if doc["version"] != VERSION:
                raise UnsupportedFormatError(
                    f"backup store version {doc['version']}; this reads {VERSION}"
                )
            chunker = doc["chunker"]
            config = cls(
                store_id=str(doc["id"]),
                signer=bytes.fromhex(doc["signer"]),
                avg_size=int(chunker["avg"]),
                min_size=int(chunker["min"]),
                max_size=int(chunker["max"]),
                pack_size=int(doc["pack_size"]),
                zstd_level=int(doc["zstd_level"]),
                recipients=tuple(_text(r) for r in doc.get("recipients", ())),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise FormatError(f"the store config is malformed ({type(exc).__name__})") from None
        if not 1 << 16 <= config.pack_size <= 1 << 30 or not 1 <= config.zstd_level <= 22:
            raise FormatError("the store config holds a pack size or zstd level out of range")
        if keys is not None:
            if config.signer != keys.signing.public_bytes():
                raise UnknownKeyError(
                    "this key does not belong to the store (its config names another "
                    "signer): check the key file"
                )
            keys.signing.public_key().verify(_SIGNED_CONFIG + body.encode(), signature)
        for text in config.recipients:
            if text not in removing:
                listed_recipient(text)
        return config


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value


def recipient_texts(recipients: Iterable[RecipientLike] | RecipientLike) -> tuple[str, ...]:
    """The text forms of age recipients (``age1...``, ``ssh-ed25519 ...``; a text or file
    of them, one a line): what a write-only store's config lists. Raises
    :class:`FormatError` for a key that is not an age recipient,
    :class:`InvalidParameterError` for a recipient without a text form, or none."""
    from .age import parse_recipient  # write-only stores only: age stays out of start-up

    given = [recipients] if isinstance(recipients, str | os.PathLike) else recipients
    out: list[str] = []
    for item in given:  # type: ignore[union-attr]
        if isinstance(item, os.PathLike):
            with open(item, encoding="utf-8") as f:
                item = f.read()
        for text in key_lines(item) if isinstance(item, str) else [str(item)]:
            try:
                recipient = str(parse_recipient(text))
            except FormatError:
                if not isinstance(item, str):
                    raise InvalidParameterError(
                        f"a write-only store's recipient needs an age text form, not "
                        f"{type(item).__name__}"
                    ) from None
                raise
            if recipient not in out:
                out.append(recipient)
    if not out:
        raise InvalidParameterError("a write-only store needs at least one recipient")
    return tuple(out)


def vouched_recipients(
    identities: Iterable[IdentityLike] | IdentityLike,
    recipients: Iterable[RecipientLike] | RecipientLike = (),
) -> frozenset[PublicKey]:
    """The recipients the holder of ``identities`` vouches for: the public key of each
    identity that is a key (X25519, ML-KEM, SSH; a plugin identity's is not known
    without its plugin) and the ``recipients`` the caller names. Raises what
    :func:`recipient_texts` raises for a named one; :class:`FormatError` for an identity
    that does not parse."""
    from .age import parse_identity, parse_recipient

    given: KeyList[Any] = KeyList("unwrap", parse_identity, "an identity must be an age key", "")
    out = {i.recipient for i in given.keys(identities) if isinstance(i, KeyIdentity)}
    named = recipient_texts(recipients) if recipients else ()
    out.update(parse_recipient(text) for text in named)
    return frozenset(out)


def listed_recipient(text: str) -> Recipient:
    """The recipient a write-only store's config lists as ``text``: exactly one age
    recipient, in its canonical form (``str(recipient) == text``: no comment, no second
    line, no other spelling), so that what is checked is what is wrapped. Raises
    :class:`UntrustedRecipientError` (showing ``text``, saying how the owner removes it)."""
    from .age import parse_recipient

    try:
        recipient: Recipient | None = parse_recipient(text)
    except StreamCryptError:
        recipient = None
    if recipient is None or str(recipient) != text:
        shown = repr(text) if len(text) <= 300 else f"{text[:300]!r}... ({len(text)} characters)"
        raise UntrustedRecipientError(
            f"the store's config lists {shown}, which is not one age recipient in its "
            "canonical form. Only the writer's key signs the config, so whoever holds it "
            "may have put it there: the owner removes it with rekey -x and that exact "
            "text, as the config file lists it (docs/BACKUP.md, write-only stores)"
        )
    return recipient


def check_recipients(listed: Sequence[str], vouched: frozenset[PublicKey]) -> tuple[Recipient, ...]:
    """The recipients ``listed`` (a write-only store's, as its config has them), each
    :func:`listed_recipient`, if each one is in ``vouched`` (:func:`vouched_recipients`):
    what is wrapped to. Raises :class:`UntrustedRecipientError` naming the others: the
    config is signed by the writer key, which whoever takes the writer holds, so an
    owner wraps nothing to a recipient only the config names (docs/BACKUP.md, threat
    model)."""
    parsed = [listed_recipient(text) for text in listed]
    others = [
        text for text, recipient in zip(listed, parsed, strict=True) if recipient not in vouched
    ]
    if others:
        shown = ", ".join(repr(text[:80]) for text in others)
        raise UntrustedRecipientError(
            f"the store's config lists recipients not vouched for: {shown}. Only the "
            "writer's key signs the config, so a new key is wrapped only to the given "
            "identities' own recipients and those named (recipients=, -r/-R): name each "
            "that is yours, or remove it (rekey -x) if it is not"
        )
    return tuple(parsed)


# -- key files (write-only stores) ----------------------------------------------------------------


def seal_key_file(recipients: Sequence[Recipient], label: str, secret: bytes) -> bytes:
    """An age file to ``recipients`` (parsed, never text: what was checked is what is
    wrapped) holding ``secret`` (a session's or the writer's), bound to ``label`` (the
    session id's hex, or ``"writer"``)."""
    from .age import AgeEncryptor

    enc = AgeEncryptor(recipients=list(recipients))
    return enc.update(_KEY_FILE_MAGIC + label.encode() + b"\x00" + secret) + enc.finalize()


def open_key_file(
    identities: Iterable[IdentityLike] | IdentityLike, label: str, data: bytes
) -> bytes:
    """The secret of a key file written by :func:`seal_key_file` for ``label``. Raises
    :class:`UnknownKeyError` (no identity opens it), :class:`AuthenticationError`,
    :class:`FormatError` (not a key file, or one for another label)."""
    from .age import AgeDecryptor

    dec = AgeDecryptor(identities=identities)
    try:
        plain = dec.update(data) + dec.finalize()
    except UnknownKeyError:
        raise UnknownKeyError(
            f"no identity given opens keys/{label}: the store is wrapped to other recipients"
        ) from None
    head = _KEY_FILE_MAGIC + label.encode() + b"\x00"
    if len(plain) != len(head) + _SECRET_SIZE or not plain.startswith(head):
        raise FormatError(f"keys/{label} is not the store's key file of that name")
    return plain[len(head) :]


# -- blobs ----------------------------------------------------------------------------------------

_compressors = threading.local()


def compress_blob(data: Buffer, level: int = DEFAULT_ZSTD_LEVEL) -> tuple[int, bytes]:
    """``(flags, payload)``: zstd-compressed when that is smaller, else the raw bytes.

    Thread-safe (one compressor per thread); zstd releases the GIL while it works.
    """
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_compressors, "cache", None)
    if cache is None:
        cache = _compressors.cache = {}
    compressor = cache.get(level)
    if compressor is None:
        compressor = cache[level] = zstandard.ZstdCompressor(
            level=level, write_checksum=False, write_content_size=True
        )
    packed = compressor.compress(data)
    if len(packed) < len(data):
        return FLAG_ZSTD, packed
    return 0, as_bytes(data, "data")


def _decompress(payload: bytes, limit: int, what: str) -> bytes:
    """The zstd frame ``payload`` of at most ``limit`` bytes (one decompressor per thread)."""
    decompressor: zstandard.ZstdDecompressor | None = getattr(_compressors, "reader", None)
    if decompressor is None:
        decompressor = _compressors.reader = zstandard.ZstdDecompressor()
    try:
        out = decompressor.decompress(payload, max_output_size=limit)
    except zstandard.ZstdError:
        raise FormatError(f"an authenticated {what} does not decompress") from None
    return out


@dataclass(frozen=True, slots=True)
class BlobEntry:
    """Where one blob lies in its pack, and what it holds."""

    chunk_id: bytes
    flags: int
    offset: int
    length: int
    raw_length: int

    def encode(self) -> bytes:
        return _ENTRY.pack(self.chunk_id, self.flags, self.offset, self.length, self.raw_length)


def _encode_entries(entries: Sequence[BlobEntry]) -> bytes:
    return _COUNT.pack(len(entries)) + b"".join([e.encode() for e in entries])


def _decode_entries(data: bytes, pos: int) -> tuple[list[BlobEntry], int]:
    if len(data) < pos + _COUNT.size:
        raise FormatError("a blob table is truncated")
    (count,) = _COUNT.unpack_from(data, pos)
    pos += _COUNT.size
    end = pos + count * _ENTRY.size
    if len(data) < end:
        raise FormatError("a blob table is truncated")
    entries = [
        BlobEntry(cid, flags, off, length, raw)
        for cid, flags, off, length, raw in _ENTRY.iter_unpack(data[pos:end])
    ]
    for e in entries:
        if e.length < _TAG or e.raw_length > _MAX_BLOB:
            raise FormatError("a blob table holds an impossible blob size")
    return entries, end


def _pack_cipher(data: DataKeys, pack_id: bytes, salt: bytes) -> AES256GCM:
    if len(pack_id) != ID_SIZE:
        raise InvalidParameterError("a pack id is 32 bytes")
    key = hkdf(data.pack.secret_bytes(), salt=salt, info=_LABEL + b"pack " + pack_id)
    return AES256GCM(key)


def _blob_aad(chunk_id: bytes, flags: int) -> bytes:
    return b"blob" + chunk_id + bytes([flags])


class PackWriter(HoldsSecrets):
    """Collect blobs into one pack (sans-I/O): ``add`` seals a blob at once, ``finish``
    returns the pack's bytes. The pack id is random (its hex is the file name)."""

    __slots__ = ("_aead", "_header", "_parts", "_size", "entries", "pack_id")

    def __init__(self, keys: BackupKeys, pack_id: bytes | None = None) -> None:
        self.pack_id = random_bytes(ID_SIZE) if pack_id is None else pack_id
        data = keys.sealer()
        kind = _KIND_SESSION_PACK if data.session else _KIND_PACK
        salt = data.session + random_bytes(_SALT_SIZE - len(data.session))
        self._aead = _pack_cipher(data, self.pack_id, salt)
        self._header = _MAGIC + bytes([VERSION, kind]) + salt
        self._parts: list[bytes] = [self._header]
        self._size = len(self._header)
        self.entries: list[BlobEntry] = []

    @property
    def size(self) -> int:
        """Bytes of the pack so far (without the table)."""
        return self._size

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, chunk_id: bytes, flags: int, payload: Buffer, raw_length: int) -> BlobEntry:
        """Seal a blob (already compressed by :func:`compress_blob`) into the pack."""
        offset = self._size
        sealed = self._aead.seal(offset.to_bytes(12, "big"), payload, _blob_aad(chunk_id, flags))
        entry = BlobEntry(chunk_id, flags, offset, len(sealed), raw_length)
        self._parts.append(sealed)
        self._size += len(sealed)
        self.entries.append(entry)
        return entry

    def add_sealed(self, entry: BlobEntry, plaintext_payload: Buffer) -> BlobEntry:
        """Re-seal a blob moved from another pack (its payload, still compressed)."""
        return self.add(entry.chunk_id, entry.flags, plaintext_payload, entry.raw_length)

    def finish(self) -> bytes:
        table = self._aead.seal(
            _TABLE_NONCE, _encode_entries(self.entries), b"table" + self._header
        )
        return b"".join([*self._parts, table, _COUNT.pack(len(table))])


class PackOpener(HoldsSecrets):
    """Read a pack (sans-I/O): :meth:`table` from its tail, :meth:`payload` and
    :meth:`blob` from the sealed bytes of one blob.

    Raises :class:`FormatError` (not a pack, malformed table),
    :class:`UnknownKeyError` (a write-only store's pack, and a writer's keys) and
    :class:`AuthenticationError` (a damaged, moved or renamed pack or blob).
    """

    __slots__ = ("_aead", "_header", "keys", "pack_id")

    def __init__(self, keys: BackupKeys, pack_id: bytes, header: Buffer) -> None:
        head = bytes(header[:PACK_HEADER_SIZE])
        kinds = (_KIND_PACK, _KIND_SESSION_PACK)
        if len(head) < PACK_HEADER_SIZE or head[:4] != _MAGIC or head[5] not in kinds:
            raise FormatError(f"pack {pack_id.hex()[:16]}... is not a streamcrypt pack")
        if head[4] != VERSION:
            raise UnsupportedFormatError(f"pack version {head[4]}; this reads {VERSION}")
        self.keys = keys
        self.pack_id = pack_id
        self._header = head
        session = head[6 : 6 + SESSION_ID_SIZE] if head[5] == _KIND_SESSION_PACK else b""
        data = keys.opener(session, f"pack {pack_id.hex()[:16]}...")
        self._aead = _pack_cipher(data, pack_id, head[6:])

    @staticmethod
    def table_size(tail: Buffer) -> int:
        """Bytes at the end of the pack that hold the sealed table (from its last 4)."""
        if len(tail) < _COUNT.size:
            raise FormatError("a pack is shorter than its trailer")
        return int.from_bytes(tail[-_COUNT.size :], "big") + _COUNT.size

    def table(self, tail: Buffer, pack_size: int) -> list[BlobEntry]:
        """The authenticated blob table, from the pack's last bytes (``tail``)."""
        need = self.table_size(tail)
        if len(tail) < need or pack_size < PACK_HEADER_SIZE + need:
            raise FormatError(f"pack {self.pack_id.hex()[:16]}... is truncated")
        sealed = bytes(tail[len(tail) - need : len(tail) - _COUNT.size])
        try:
            plain = self._aead.open(_TABLE_NONCE, sealed, b"table" + self._header)
        except AuthenticationError:
            raise AuthenticationError(
                f"the table of pack {self.pack_id.hex()[:16]}... did not authenticate: "
                "the pack was altered or renamed"
            ) from None
        entries, end = _decode_entries(plain, 0)
        limit = pack_size - need
        for e in entries:
            if e.offset < PACK_HEADER_SIZE or e.offset + e.length > limit:
                raise FormatError("a pack table points outside its pack")
        if end != len(plain):
            raise FormatError("a pack table has trailing bytes")
        return entries

    def payload(self, entry: BlobEntry, sealed: Buffer) -> bytes:
        """The blob's payload, still compressed (authenticated under its id and flags)."""
        try:
            return self._aead.open(
                entry.offset.to_bytes(12, "big"), sealed, _blob_aad(entry.chunk_id, entry.flags)
            )
        except AuthenticationError:
            raise AuthenticationError(
                f"chunk {entry.chunk_id.hex()[:16]}... in pack {self.pack_id.hex()[:16]}... "
                "did not authenticate: the pack is damaged"
            ) from None

    def blob(self, entry: BlobEntry, sealed: Buffer) -> bytes:
        """The chunk's plaintext: authenticated, decompressed, and checked against its id."""
        plain = self.payload(entry, sealed)
        if entry.flags & FLAG_ZSTD:
            plain = _decompress(plain, entry.raw_length, "blob")
        if len(plain) != entry.raw_length or not constant_time_equal(
            self.keys.chunk_id_of(plain), entry.chunk_id
        ):
            raise AuthenticationError(
                f"chunk {entry.chunk_id.hex()[:16]}... does not hash to its id: the store "
                "is corrupt"
            )
        return plain


# -- documents (index files, manifests) ---------------------------------------------------------


def _seal_doc(key: SecretKey, plain: bytes, aad: bytes) -> bytes:
    """A native container over ``plain``, sealed inline (documents are small)."""
    enc = container.StreamEncryptor(key, aad=aad)
    return enc.update(plain) + enc.finalize()


def _open_doc(key: SecretKey, data: bytes, aad: bytes) -> bytes:
    dec = container.StreamDecryptor(key, aad=aad)
    return dec.update(data) + dec.finalize()


def _session_of(keys: BackupKeys, data: bytes, what: str) -> DataKeys:
    """The data keys that open the document ``data`` (by its container's key id: the
    session's hex; empty in a symmetric store). Raises :class:`FormatError`,
    :class:`UnknownKeyError`."""
    parsed = container.read_header(data)
    if parsed is None:
        raise FormatError(f"{what} is truncated")
    try:
        session = bytes.fromhex(parsed[0].key_id)
    except ValueError:
        raise FormatError(f"{what} names no session") from None
    return keys.opener(session, what)


# -- index files --------------------------------------------------------------------------------


def encode_index(keys: BackupKeys, packs: Mapping[bytes, Sequence[BlobEntry]]) -> bytes:
    """An encrypted index file listing the blobs of ``packs`` (pack id -> entries)."""
    parts = [_INDEX_MAGIC, _COUNT.pack(len(packs))]
    for pack_id, entries in packs.items():
        parts += [pack_id, _encode_entries(entries)]
    plain = zstandard.ZstdCompressor(level=DEFAULT_ZSTD_LEVEL).compress(b"".join(parts))
    return _seal_doc(keys.sealer().index, plain, _INDEX_AAD)


def decode_index(keys: BackupKeys, data: bytes) -> dict[bytes, list[BlobEntry]]:
    """Decrypt and parse an index file. Raises :class:`AuthenticationError`,
    :class:`FormatError`, :class:`UnknownKeyError` (a write-only store's writer)."""
    index_key = _session_of(keys, data, "an index file").index
    plain = _decompress(_open_doc(index_key, data, _INDEX_AAD), _MAX_DOC, "index")
    if not plain.startswith(_INDEX_MAGIC):
        raise FormatError("not a streamcrypt backup index")
    pos = len(_INDEX_MAGIC)
    (count,) = _COUNT.unpack_from(plain, pos)
    pos += _COUNT.size
    packs: dict[bytes, list[BlobEntry]] = {}
    for _ in range(count):
        pack_id = plain[pos : pos + ID_SIZE]
        if len(pack_id) != ID_SIZE:
            raise FormatError("a backup index is truncated")
        entries, pos = _decode_entries(plain, pos + ID_SIZE)
        packs[pack_id] = entries
    if pos != len(plain):
        raise FormatError("a backup index has trailing bytes")
    return packs


# -- id lists and the writer's cache (write-only stores) ---------------------------------------


def _ids_aad(name: str) -> bytes:
    return _IDS_AAD + b"\x00" + name.encode()


def encode_ids(keys: BackupKeys, name: str, packs: Mapping[bytes, Iterable[bytes]]) -> bytes:
    """The id list ``ids/<name>``: for each pack the index file of that name lists, the
    pack id and the chunk ids it holds, sealed under the writer's id-list key (only a
    holder of the writer's secret reads or forges one) and bound to ``name``. The pack
    ids let the writer count a chunk as stored only while its pack is in the store."""
    parts = [_IDS_MAGIC, _COUNT.pack(len(packs))]
    for pack_id, chunk_ids in packs.items():
        ids = sorted(set(chunk_ids))
        parts += [pack_id, _COUNT.pack(len(ids)), *ids]
    return _seal_doc(keys.ids, b"".join(parts), _ids_aad(name))


def decode_ids(keys: BackupKeys, name: str, data: bytes) -> dict[bytes, set[bytes]]:
    """Pack id -> chunk ids of the id list ``ids/<name>``. Raises
    :class:`AuthenticationError` (also for a list stored under another name),
    :class:`FormatError`."""
    plain = _open_doc(keys.ids, data, _ids_aad(name))
    if not plain.startswith(_IDS_MAGIC) or len(plain) < len(_IDS_MAGIC) + _COUNT.size:
        raise FormatError("not a streamcrypt backup id list")
    pos = len(_IDS_MAGIC)
    (count,) = _COUNT.unpack_from(plain, pos)
    pos += _COUNT.size
    packs: dict[bytes, set[bytes]] = {}
    for _ in range(count):
        head = plain[pos : pos + ID_SIZE + _COUNT.size]
        if len(head) != ID_SIZE + _COUNT.size:
            raise FormatError("a backup id list is truncated")
        (n,) = _COUNT.unpack_from(head, ID_SIZE)
        pos += len(head)
        body = plain[pos : pos + n * ID_SIZE]
        if len(body) != n * ID_SIZE:
            raise FormatError("a backup id list is truncated")
        packs[head[:ID_SIZE]] = {body[i : i + ID_SIZE] for i in range(0, len(body), ID_SIZE)}
        pos += len(body)
    if pos != len(plain):
        raise FormatError("a backup id list has trailing bytes")
    return packs


def _cache_aad(store_id: str, source: str) -> bytes:
    return _CACHE_AAD + store_id.encode() + b"\x00" + source.encode("utf-8", "surrogateescape")


def seal_cache(keys: BackupKeys, store_id: str, manifest: Manifest, packed: bytes) -> bytes:
    """The writer's metadata cache of one source: its last manifest (``packed``, as
    :meth:`Manifest.pack` gave it for the snapshot: encoded once, sealed twice), sealed
    under the writer's cache key and bound to the store and the source."""
    plain = manifest.snapshot.encode() + b"\x00" + packed
    return _seal_doc(keys.cache, plain, _cache_aad(store_id, manifest.source))


def open_cache(keys: BackupKeys, store_id: str, source: str, data: bytes) -> Manifest:
    """The manifest a writer's cache holds. Raises :class:`AuthenticationError`,
    :class:`FormatError`."""
    plain = _open_doc(keys.cache, data, _cache_aad(store_id, source))
    name, sep, packed = plain.partition(b"\x00")
    if not sep:
        raise FormatError("a backup cache is malformed")
    body = _decompress(packed, _MAX_DOC, "cache")
    return Manifest.decode(body, name.decode("utf-8", "replace"))


# -- snapshots ----------------------------------------------------------------------------------


def _signed_snapshot(name: str, ciphertext: Buffer) -> bytes:
    return name.encode() + b"\x00" + as_bytes(ciphertext, "ciphertext")


def seal_snapshot(keys: BackupKeys, name: str, packed: bytes) -> bytes:
    """A snapshot file of the manifest ``packed`` (:meth:`Manifest.pack`) named ``name``:
    Ed25519 signature (64 bytes) || encrypted, compressed manifest."""
    ciphertext = _seal_doc(keys.sealer().snapshot, packed, _SNAPSHOT_AAD + name.encode())
    return _sign(keys, _SIGNED_SNAPSHOT, _signed_snapshot(name, ciphertext)) + ciphertext


def verify_snapshot_signature(
    public_key: Ed25519PublicKey | Buffer, name: str, data: bytes
) -> None:
    """Check a snapshot file's signature with the public key alone.

    Raises :class:`InvalidSignatureError` (altered, renamed, or signed by another key).
    """
    key = public_key if isinstance(public_key, Ed25519PublicKey) else Ed25519PublicKey(public_key)
    signature, ciphertext = data[:ED25519_SIGNATURE_SIZE], data[ED25519_SIGNATURE_SIZE:]
    try:
        key.verify(_SIGNED_SNAPSHOT + _signed_snapshot(name, ciphertext), signature)
    except InvalidSignatureError:
        raise InvalidSignatureError(
            f"snapshot {name!r}: the signature does not verify: the snapshot file was "
            "altered or renamed, or this is not the store's key"
        ) from None


def open_snapshot(keys: BackupKeys, name: str, data: bytes) -> Manifest:
    """Verify, decrypt and parse a snapshot file. Raises :class:`InvalidSignatureError`,
    :class:`AuthenticationError`, :class:`FormatError`, :class:`UnknownKeyError` (a
    write-only store's writer)."""
    verify_snapshot_signature(keys.signing.public_key(), name, data)
    sealed = data[ED25519_SIGNATURE_SIZE:]
    key = _session_of(keys, sealed, f"snapshot {name!r}").snapshot
    plain = _open_doc(key, sealed, _SNAPSHOT_AAD + name.encode())
    return Manifest.decode(_decompress(plain, _MAX_DOC, "manifest"), name)
