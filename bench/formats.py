"""Issue 6: the standard formats against their real implementations, same data, one run.

age against pyrage, Tink AES256_GCM_HKDF_1MB against the tink package, C2SP chunked
encryption (Cobblestone-256) against ``cryptography.cobblestone`` fed in 64 KiB updates,
and each beside the raw multi-core limit of its cipher (ChaCha20-Poly1305 for age,
AES-GCM for Tink and C2SP) measured in the same run.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import anyio
import uvloop
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from streamcrypt.codecs import age as age_codec
from streamcrypt.codecs.tink import TEMPLATES, TinkStreamingKey
from streamcrypt.engine import DEFAULT_POLICY, pipeline

from ._report import Report, gbps, median_time

SEG = 65536


def _raw_all_cores(
    kernel: AESGCM | ChaCha20Poly1305, data: memoryview, pool: ThreadPoolExecutor
) -> None:
    nonce = bytes(12)
    workers = os.cpu_count() or 2
    step = -(-len(data) // workers // SEG) * SEG

    def part(off: int) -> None:
        for o in range(off, min(off + step, len(data)), SEG):
            kernel.encrypt(nonce, data[o : o + SEG], None)

    list(pool.map(part, range(0, len(data), step)))


def _ours(transform_factory: Callable[[], object], source: bytes) -> Callable[[], None]:
    async def discard(view: memoryview) -> None:
        return None

    def run() -> None:
        async def main() -> None:
            await pipeline(transform_factory(), policy=DEFAULT_POLICY).run(source, discard)  # type: ignore[arg-type]

        anyio.run(main, backend_options={"loop_factory": uvloop.new_event_loop})

    return run


class TinkPeer:
    """The ``tink`` package's streaming AEAD on a new AES256_GCM_HKDF_1MB key, in 1 MiB
    writes and reads, and the same key as streamcrypt reads it (``key``, ``keyset``)."""

    def __init__(self) -> None:
        import tink
        from tink import cleartext_keyset_handle, streaming_aead

        from streamcrypt.codecs.tink import TinkKeyset, load_keyset

        streaming_aead.register()
        self.key = TinkStreamingKey.generate(TEMPLATES["AES256_GCM_HKDF_1MB"])
        exported = TinkKeyset.of(self.key).to_json()
        handle = cleartext_keyset_handle.read(tink.JsonKeysetReader(exported))
        self.primitive = handle.primitive(streaming_aead.StreamingAead)
        self.keyset = load_keyset(exported)

    def encrypt(self, data: bytes) -> bytes:
        class Kept(io.BytesIO):
            def close(self) -> None:  # tink closes the sink with its stream; keep the bytes
                pass

        out = Kept()
        view = memoryview(data)
        with self.primitive.new_encrypting_stream(out, b"") as stream:
            for off in range(0, len(view), 1 << 20):
                stream.write(view[off : off + (1 << 20)])
        return out.getvalue()

    def decrypt(self, ciphertext: bytes) -> None:
        with self.primitive.new_decrypting_stream(io.BytesIO(ciphertext), b"") as stream:
            while stream.read(1 << 20):
                pass


class CobblestonePeer:
    """``cryptography.cobblestone`` (Cobblestone-256) on one key, fed ``step`` bytes a call."""

    def __init__(self, step: int) -> None:
        from cryptography.cobblestone import Cobblestone256Encryptor

        self.key = Cobblestone256Encryptor.generate_key()
        self.step = step

    def encrypt(self, data: bytes) -> bytes:
        from cryptography.cobblestone import Cobblestone256Encryptor

        enc = Cobblestone256Encryptor(self.key, b"")
        view = memoryview(data)
        parts = [enc.update(view[off : off + self.step]) for off in range(0, len(view), self.step)]
        parts.append(enc.finalize())
        return b"".join(parts)

    def decrypt(self, ciphertext: bytes) -> None:
        from cryptography.cobblestone import Cobblestone256Decryptor

        dec = Cobblestone256Decryptor(self.key, b"")
        view = memoryview(ciphertext)
        for off in range(0, len(view), self.step):
            dec.update(view[off : off + self.step])
        dec.finalize()


def run(report: Report, quick: bool = False) -> None:
    size = (256 if quick else 1024) << 20
    repeat = 3 if quick else 5
    data = os.urandom(size)
    view = memoryview(data)
    pool = ThreadPoolExecutor(os.cpu_count() or 2)
    t = report.table(
        f"Standard formats, {size >> 20} MiB in memory (GB/s, median of {repeat})",
        [
            "format",
            "direction",
            "streamcrypt",
            "peer",
            "peer GB/s",
            "ratio",
            "raw multi-core limit",
            "of limit",
        ],
    )
    limits = {
        "chacha": gbps(
            size,
            median_time(lambda: _raw_all_cores(ChaCha20Poly1305(bytes(32)), view, pool), repeat),
        ),
        "aes": gbps(
            size, median_time(lambda: _raw_all_cores(AESGCM(bytes(32)), view, pool), repeat)
        ),
    }

    def row(fmt: str, direction: str, ours: float, peer: str, theirs: float, limit: str) -> None:
        t.add(
            fmt,
            direction,
            ours,
            peer,
            theirs,
            f"{ours / theirs:.1f}x",
            limits[limit],
            f"{ours / limits[limit]:.2f}x",
        )

    # age vs pyrage
    import pyrage

    identity = age_codec.X25519Identity.generate()
    their_identity = pyrage.x25519.Identity.from_str(identity.to_string())
    recipient = identity.recipient
    their_recipient = pyrage.x25519.Recipient.from_str(str(recipient))
    enc = age_codec.AgeEncryptor(recipients=[recipient])
    ct = enc.update(data) + enc.finalize()
    ours = gbps(
        size,
        median_time(_ours(lambda: age_codec.AgeEncryptor(recipients=[recipient]), data), repeat),
    )
    theirs = gbps(
        size, median_time(lambda: pyrage.encrypt(data, [their_recipient]), max(2, repeat - 2))
    )
    row("age v1 (X25519)", "encrypt", ours, "pyrage", theirs, "chacha")
    ours = gbps(
        size, median_time(_ours(lambda: age_codec.AgeDecryptor(identities=[identity]), ct), repeat)
    )
    theirs = gbps(
        size, median_time(lambda: pyrage.decrypt(ct, [their_identity]), max(2, repeat - 2))
    )
    row("age v1 (X25519)", "decrypt", ours, "pyrage", theirs, "chacha")

    # Tink AES256_GCM_HKDF_1MB
    from streamcrypt.codecs.tink import TinkStreamDecryptor, TinkStreamEncryptor

    tink_peer = TinkPeer()
    tct = tink_peer.encrypt(data)
    ours = gbps(size, median_time(_ours(lambda: TinkStreamEncryptor(tink_peer.key), data), repeat))
    row(
        "Tink AES256_GCM_HKDF_1MB",
        "encrypt",
        ours,
        "tink",
        gbps(size, median_time(lambda: tink_peer.encrypt(data), max(2, repeat - 2))),
        "aes",
    )
    ours = gbps(
        size, median_time(_ours(lambda: TinkStreamDecryptor(tink_peer.keyset), tct), repeat)
    )
    row(
        "Tink AES256_GCM_HKDF_1MB",
        "decrypt",
        ours,
        "tink",
        gbps(size, median_time(lambda: tink_peer.decrypt(tct), max(2, repeat - 2))),
        "aes",
    )

    # C2SP chunked encryption, Cobblestone-256
    from streamcrypt.codecs.cobblestone import CobblestoneDecryptor, CobblestoneEncryptor

    c2sp_peer = CobblestonePeer(SEG)
    ckey = c2sp_peer.key
    cct = c2sp_peer.encrypt(data)
    theirs_enc, theirs_dec = (lambda: c2sp_peer.encrypt(data)), (lambda: c2sp_peer.decrypt(cct))
    ours = gbps(size, median_time(_ours(lambda: CobblestoneEncryptor(ckey), data), repeat))
    row(
        "C2SP chunked (Cobblestone-256)",
        "encrypt",
        ours,
        "cryptography",
        gbps(size, median_time(theirs_enc, repeat)),
        "aes",
    )
    ours = gbps(size, median_time(_ours(lambda: CobblestoneDecryptor(ckey), cct), repeat))
    row(
        "C2SP chunked (Cobblestone-256)",
        "decrypt",
        ours,
        "cryptography",
        gbps(size, median_time(theirs_dec, repeat)),
        "aes",
    )
    t.notes.append(
        "targets (issue 6): >= 4x pyrage, >= 8x tink, >= 2x cryptography's Cobblestone, and "
        ">= 0.8x the raw multi-core limit of the cipher measured here"
    )
    pool.shutdown()
