"""Issue 15: the seed libraries' rows, side by side with C Monocypher and cipherlib's peers.

Table 1 is NimCypher's benchmark in its own shape: operation, iterations, C Monocypher 4
(pymonocypher's Cython calls; its exported C symbols through ctypes where its Python API
lacks the function), streamcrypt, and the ratio C time / streamcrypt time (above 1:
streamcrypt is faster). The two sides of a row run alternately, ``repeat`` times each, and
each figure is the median, so machine noise hits both alike. Per-call overhead is
(streamcrypt - C) / iterations in microseconds: on small inputs that is Python's cost of a
call, object creation and argument checks, which C Monocypher called from Python pays too
(but less of).

Table 2 is cipherlib's: throughput of XOR, Salsa20/XSalsa20 and their secretbox AEADs,
AES-IGE and AES-PCBC at 1 MiB, 5 KiB and 16 B, beside the peer kernel where one exists
(pycryptodome's raw Salsa20, PyNaCl's SecretBox, tgcrypto's AES-256-IGE).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import monocypher
import nacl.secret
import tgcrypto
from Crypto.Cipher import Salsa20 as PycSalsa20

from streamcrypt.codecs._x25519 import x25519_exchange
from streamcrypt.keys import argon2
from streamcrypt.primitives import (
    AES256GCM,
    Blake2bTap,
    Ed25519PrivateKey,
    EdDsaBlake2bPrivateKey,
    MonocypherAead,
    Poly1305Tap,
    Salsa20Poly1305,
    Sha512Tap,
    XSalsa20Poly1305,
    aead_lock,
    aead_unlock,
    elligator_key_pair,
    elligator_map,
    elligator_rev,
    x25519_dirty_fast,
    x25519_inverse,
)
from streamcrypt.primitives.hazmat import (
    AesCtrEncryptor,
    AesIgeDecryptor,
    AesIgeEncryptor,
    AesPcbcDecryptor,
    AesPcbcEncryptor,
    Salsa20,
    XChaCha20,
    XorCipher,
    XSalsa20,
)

from ._report import Report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import monocypher_c as C
from cryptography.hazmat.primitives.asymmetric import x25519

KEY = bytes(range(32))
N24 = bytes(range(24))


def _loop(fn: Callable[[], object], iters: int) -> Callable[[], float]:
    def timed() -> float:
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return time.perf_counter() - t0

    return timed


def _pair(
    c: Callable[[], object] | None, ours: Callable[[], object], iters: int, repeat: int
) -> tuple[float | None, float]:
    """Medians of ``iters`` calls of each, measured alternately after one warm-up each."""
    c_loop = _loop(c, iters) if c is not None else None
    our_loop = _loop(ours, iters)
    if c_loop:
        c_loop()
    our_loop()
    c_times, our_times = [], []
    for _ in range(repeat):
        if c_loop:
            c_times.append(c_loop())
        our_times.append(our_loop())
    return (statistics.median(c_times) if c_times else None), statistics.median(our_times)


def _tap(
    cls: Callable[[], Blake2bTap | Sha512Tap | Poly1305Tap], data: bytes
) -> Callable[[], object]:
    def run() -> bytes:
        tap = cls()
        tap.update(data)
        tap.finalize()
        return tap.digest()

    return run


def _rows(
    quick: bool,
) -> list[tuple[str, int, Callable[[], object] | None, Callable[[], object], str]]:
    """(operation, iterations, C Monocypher call or None, streamcrypt call, C route)."""
    scale = 10 if quick else 1
    b64, b1k, b64k = os.urandom(64), os.urandom(1024), os.urandom(65536)
    sk64, _ = C.eddsa_key_pair(KEY)
    ed = EdDsaBlake2bPrivateKey(KEY)
    sig = ed.sign(b1k)
    ed_public = ed.public_key()
    ed25519 = Ed25519PrivateKey(KEY)
    sig25519 = ed25519.sign(b1k)
    pk = monocypher.x25519_public_key(os.urandom(32))
    x_private = x25519.X25519PrivateKey.from_private_bytes(KEY)
    hidden = elligator_key_pair(KEY)[0]
    point = elligator_map(hidden)
    mac1k, ct1k = aead_lock(KEY, N24, b1k)
    mac64k, ct64k = aead_lock(KEY, N24, b64k)
    gcm = AES256GCM(KEY)
    pyx = "pymonocypher"
    ctypes_route = "ctypes (not in pymonocypher's API)"
    rows: list[tuple[str, int, Callable[[], object] | None, Callable[[], object], str]] = [
        ("blake2b 64B", 100000, lambda: monocypher.blake2b(b64), _tap(Blake2bTap, b64), pyx),
        ("blake2b 1024B", 20000, lambda: monocypher.blake2b(b1k), _tap(Blake2bTap, b1k), pyx),
        ("blake2b 65536B", 2000, lambda: monocypher.blake2b(b64k), _tap(Blake2bTap, b64k), pyx),
        ("sha512 64B", 50000, None, _tap(Sha512Tap, b64), "-"),
        ("sha512 1024B", 20000, None, _tap(Sha512Tap, b1k), "-"),
        ("sha512 65536B", 1000, None, _tap(Sha512Tap, b64k), "-"),
        (
            "chacha20 64B",
            50000,
            lambda: monocypher.chacha20(KEY, N24, b64),
            lambda: XChaCha20(KEY, N24).update(b64),
            pyx,
        ),
        (
            "chacha20 1024B",
            20000,
            lambda: monocypher.chacha20(KEY, N24, b1k),
            lambda: XChaCha20(KEY, N24).update(b1k),
            pyx,
        ),
        (
            "chacha20 65536B",
            1000,
            lambda: monocypher.chacha20(KEY, N24, b64k),
            lambda: XChaCha20(KEY, N24).update(b64k),
            pyx,
        ),
        (
            "poly1305 1024B",
            50000,
            lambda: C.poly1305(b1k, KEY),
            _tap(lambda: Poly1305Tap(KEY), b1k),
            ctypes_route,
        ),
        (
            "poly1305 65536B",
            2000,
            lambda: C.poly1305(b64k, KEY),
            _tap(lambda: Poly1305Tap(KEY), b64k),
            ctypes_route,
        ),
        (
            "aead lock+unlock 1024B",
            10000,
            lambda: monocypher.unlock(KEY, N24, *monocypher.lock(KEY, N24, b1k)),
            lambda: aead_unlock(KEY, N24, *aead_lock(KEY, N24, b1k)),
            pyx,
        ),
        (
            "aead lock+unlock 65536B",
            500,
            lambda: monocypher.unlock(KEY, N24, *monocypher.lock(KEY, N24, b64k)),
            lambda: aead_unlock(KEY, N24, *aead_lock(KEY, N24, b64k)),
            pyx,
        ),
        (
            "aead incremental read 65536B",
            500,
            lambda: monocypher.IncrementalAuthenticatedEncryption(KEY, N24).unlock(mac64k, ct64k),
            lambda: MonocypherAead(KEY, N24).read(mac64k, ct64k),
            pyx,
        ),
        (
            "x25519",
            2000,
            lambda: monocypher.x25519(KEY, pk),
            lambda: x25519_exchange(x_private, pk),
            pyx,
        ),
        (
            "eddsa sign 1KB",
            1000,
            lambda: monocypher.signature_sign(sk64, b1k),
            lambda: ed.sign(b1k),
            pyx,
        ),
        (
            "eddsa check 1KB",
            1000,
            lambda: monocypher.signature_check(sig, ed.public_bytes(), b1k),
            lambda: ed_public.verify(b1k, sig),
            pyx,
        ),
        ("ed25519 sign 1KB", 1000, None, lambda: ed25519.sign(b1k), "-"),
        ("ed25519 check 1KB", 1000, None, lambda: ed25519.public_key().verify(b1k, sig25519), "-"),
        (
            "elligator map",
            3000,
            lambda: monocypher.elligator_map(hidden),
            lambda: elligator_map(hidden),
            pyx,
        ),
        (
            "elligator rev",
            3000,
            lambda: monocypher.elligator_rev(point, 7),
            lambda: elligator_rev(point, 7),
            pyx,
        ),
        (
            "elligator key pair",
            1000,
            lambda: monocypher.elligator_key_pair(KEY),
            lambda: elligator_key_pair(KEY),
            pyx,
        ),
        (
            "x25519 dirty key",
            2000,
            lambda: C.x25519_dirty_fast(KEY),
            lambda: x25519_dirty_fast(KEY),
            ctypes_route,
        ),
        (
            "x25519 inverse",
            500,
            lambda: C.x25519_inverse(KEY, pk),
            lambda: x25519_inverse(KEY, pk),
            ctypes_route,
        ),
        (
            "argon2i 8blk 1pass",
            20,
            lambda: monocypher.argon2i_32(8, 1, b"password", KEY[:16]),
            lambda: argon2(b"password", KEY[:16], variant="argon2i", passes=1, blocks=8),
            pyx,
        ),
        ("aes-ctr 1024B", 20000, None, lambda: AesCtrEncryptor(KEY, bytes(16)).update(b1k), "-"),
        ("aes-ctr 65536B", 1000, None, lambda: AesCtrEncryptor(KEY, bytes(16)).update(b64k), "-"),
        (
            "aes-gcm lock+unlock 1024B",
            5000,
            None,
            lambda: gcm.open(N24[:12], gcm.seal(N24[:12], b1k)),
            "-",
        ),
        (
            "aes-gcm lock+unlock 65536B",
            300,
            None,
            lambda: gcm.open(N24[:12], gcm.seal(N24[:12], b64k)),
            "-",
        ),
    ]
    del ct1k, mac1k
    return [(name, max(1, iters // scale), c, ours, route) for name, iters, c, ours, route in rows]


def _monocypher_table(report: Report, quick: bool) -> None:
    repeat = 3 if quick else 7
    t = report.table(
        f"Seeds: NimCypher's rows against C Monocypher 4 (median of {repeat}, run alternately)",
        [
            "operation",
            "iters",
            "Monocypher C",
            "streamcrypt",
            "C/streamcrypt",
            "overhead µs/call",
            "C via",
        ],
    )
    for name, iters, c, ours, route in _rows(quick):
        c_time, our_time = _pair(c, ours, iters, repeat)
        if c_time is None:
            t.add(name, iters, "-", f"{our_time:.4f}s", "-", "-", route)
            continue
        overhead = (our_time - c_time) / iters * 1e6
        t.add(
            name,
            iters,
            f"{c_time:.4f}s",
            f"{our_time:.4f}s",
            f"{c_time / our_time:.2f}x",
            f"{overhead:+.2f}",
            route,
        )
    t.notes += [
        "ratio = Monocypher time / streamcrypt time: above 1 streamcrypt is faster; '-' where "
        "C Monocypher (as built by pymonocypher, without monocypher-ed25519 and without AES) "
        "has no such function",
        "bulk rows (64 KiB) run on OpenSSL (ChaCha20, Poly1305, SHA-512, AES, the AEAD) and "
        "hashlib (BLAKE2b); EdDSA and Elligator do their point arithmetic in libsodium and "
        "the field inversions / square roots in Python integers",
        "eddsa check pays libsodium's validation of [8]A inside its variable-base "
        "multiplication; elligator map/rev and the twist half of x25519 inverse are Python "
        "big-integer arithmetic (one inverse square root, ~0.1 ms)",
    ]


def _mbps(nbytes: int, seconds: float) -> str:
    rate = nbytes / seconds
    if rate >= 1e9:
        return f"{rate / 1e9:.2f} GB/s"
    return f"{rate / 1e6:.0f} MB/s" if rate >= 1e7 else f"{rate / 1e6:.2f} MB/s"


def _cipherlib_table(report: Report, quick: bool) -> None:
    repeat = 3 if quick else 5
    sizes = [
        (1 << 20, 10 if quick else 40),
        (5 * 1024, 500 if quick else 5000),
        (16, 5000 if quick else 100000),
    ]
    t = report.table(
        f"Seeds: cipherlib's rows, one-shot throughput (median of {repeat})",
        ["algorithm", "message", "streamcrypt", "peer", "peer kernel", "streamcrypt/peer"],
    )
    k16 = KEY[:16]
    n8 = N24[:8]
    box = nacl.secret.SecretBox(KEY)
    cases: list[tuple[str, Callable[[bytes], object], Callable[[bytes], object] | None, str]] = [
        ("XOR", lambda d: XorCipher(b"key").update(d), None, "-"),
        (
            "Salsa20",
            lambda d: Salsa20(KEY, n8).update(d),
            lambda d: PycSalsa20.new(key=KEY, nonce=n8).encrypt(d),
            "pycryptodome Salsa20",
        ),
        ("XSalsa20", lambda d: XSalsa20(KEY, N24).update(d), None, "-"),
        ("Salsa20/Poly1305", lambda d: Salsa20Poly1305(KEY).seal(n8, d), None, "-"),
        (
            "XSalsa20/Poly1305",
            lambda d: XSalsa20Poly1305(KEY).seal(N24, d),
            lambda d: box.encrypt(d, N24),
            "PyNaCl SecretBox",
        ),
        ("AES-128/IGE encrypt", lambda d: AesIgeEncryptor(k16, KEY).update(d), None, "-"),
        (
            "AES-256/IGE encrypt",
            lambda d: AesIgeEncryptor(KEY, KEY, padding=False).update(d),
            lambda d: tgcrypto.ige256_encrypt(d, KEY, KEY),
            "tgcrypto",
        ),
        (
            "AES-256/IGE decrypt",
            lambda d: AesIgeDecryptor(KEY, KEY, padding=False).update(d),
            lambda d: tgcrypto.ige256_decrypt(d, KEY, KEY),
            "tgcrypto",
        ),
        ("AES-128/PCBC encrypt", lambda d: AesPcbcEncryptor(k16, KEY[:16]).update(d), None, "-"),
        ("AES-256/PCBC encrypt", lambda d: AesPcbcEncryptor(KEY, KEY[:16]).update(d), None, "-"),
        (
            "AES-256/PCBC decrypt",
            lambda d: AesPcbcDecryptor(KEY, KEY[:16], padding=False).update(d),
            None,
            "-",
        ),
    ]
    for name, ours, peer, kernel in cases:
        for size, iters in sizes:
            data = os.urandom(size)
            if "IGE" in name and size % 16:
                continue
            if "IGE" in name or "PCBC" in name:
                iters = max(1, iters // (20 if "IGE decrypt" in name else 4))
            c_time, our_time = _pair(
                (lambda p=peer, d=data: p(d)) if peer else None,
                lambda o=ours, d=data: o(d),
                iters,
                repeat,
            )
            label = (
                f"{size >> 20} MiB"
                if size >= 1 << 20
                else (f"{size >> 10} KiB" if size >= 1024 else f"{size} B")
            )
            total = size * iters
            t.add(
                name,
                label,
                _mbps(total, our_time),
                _mbps(total, c_time) if c_time else "-",
                kernel,
                f"{c_time / our_time:.2f}x" if c_time else "-",
            )
    t.notes += [
        "AES-IGE decryption chains each block through AES decryption, which no OpenSSL mode "
        "does: it runs one ECB call per 16-byte block; IGE encryption and PCBC run one native "
        "CBC (or ECB) call per update with whole-buffer XORs around it",
        "16 B rows are dominated by per-call overhead (object creation, checks): cipherlib's "
        "figures are compiled Dart, these are Python calls",
    ]


def run(report: Report, quick: bool = False) -> None:
    _monocypher_table(report, quick)
    _cipherlib_table(report, quick)
