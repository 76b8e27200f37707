"""Throughput by message size against the peers, and the chart for the README.

One-shot encryption of a message of each size: streamcrypt's native container (AES-256-GCM
and ChaCha20-Poly1305, parallel above the inline limit), Tink AES256_GCM_HKDF_1MB, pyrage
(age), PyNaCl secretstream (64 KiB messages) and http_ece (RFC 8188, 4 KiB records). The
chart is written to bench/throughput.png.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

import streamcrypt as sc

from ._report import Report, gbps, median_time

CHART = Path(__file__).parent / "throughput.png"
KEY = bytes(range(32))


def _contenders() -> dict[str, Callable[[bytes], object]]:
    import http_ece
    import pyrage
    import tink
    from nacl.bindings import (
        crypto_secretstream_xchacha20poly1305_init_push,
        crypto_secretstream_xchacha20poly1305_push,
        crypto_secretstream_xchacha20poly1305_state,
        crypto_secretstream_xchacha20poly1305_TAG_FINAL,
    )
    from tink import streaming_aead

    streaming_aead.register()
    handle = tink.new_keyset_handle(streaming_aead.streaming_aead_key_templates.AES256_GCM_HKDF_1MB)
    primitive = handle.primitive(streaming_aead.StreamingAead)
    recipient = pyrage.x25519.Identity.generate().to_public()

    class _Kept(io.BytesIO):
        def close(self) -> None:
            pass

    def tink_encrypt(data: bytes) -> object:
        out = _Kept()
        with primitive.new_encrypting_stream(out, b"") as stream:
            stream.write(data)
        return out

    def secretstream(data: bytes) -> object:
        state = crypto_secretstream_xchacha20poly1305_state()
        crypto_secretstream_xchacha20poly1305_init_push(state, KEY)
        view = memoryview(data)
        last = max(len(view) - 1, 0) // 65536 * 65536
        for off in range(0, last, 65536):
            crypto_secretstream_xchacha20poly1305_push(state, bytes(view[off : off + 65536]))
        return crypto_secretstream_xchacha20poly1305_push(
            state, bytes(view[last:]), tag=crypto_secretstream_xchacha20poly1305_TAG_FINAL
        )

    return {
        "streamcrypt AES-256-GCM": lambda d: sc.encrypt_bytes(d, KEY),
        "streamcrypt ChaCha20-Poly1305": lambda d: sc.encrypt_bytes(
            d, KEY, suite="chacha20-poly1305"
        ),
        "tink AES256_GCM_HKDF_1MB": tink_encrypt,
        "pyrage (age)": lambda d: pyrage.encrypt(d, [recipient]),
        "PyNaCl secretstream": secretstream,
        "http_ece (RFC 8188)": lambda d: http_ece.encrypt(
            d, salt=bytes(16), key=KEY[:16], version="aes128gcm"
        ),
    }


def run(report: Report, quick: bool = False) -> None:
    sizes = [1 << 10, 16 << 10, 256 << 10, 4 << 20, 64 << 20]
    if not quick:
        sizes.append(256 << 20)
    contenders = _contenders()
    results: dict[str, list[float]] = {name: [] for name in contenders}
    t = report.table(
        "One-shot encryption by message size (GB/s)",
        ["implementation", *[_label(n) for n in sizes]],
    )
    data = os.urandom(max(sizes))
    for name, fn in contenders.items():
        for n in sizes:
            msg = data[:n]
            if name.startswith("http_ece") and n > (16 << 20):
                results[name].append(float("nan"))  # quadratic slow-down past this size
                continue
            repeat = max(3, min(200, (4 << 20) // n))
            results[name].append(gbps(n, median_time(lambda fn=fn, msg=msg: fn(msg), repeat)))
        t.add(name, *[f"{v:.3g}" for v in results[name]])
    t.notes.append("http_ece is not run above 16 MiB: its time grows faster than linearly")
    _chart(sizes, results)
    t.notes.append(f"chart: {CHART.name}")


def _label(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _chart(sizes: list[int], results: dict[str, list[float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for name, values in results.items():
        ax.plot(
            sizes,
            values,
            marker="o",
            linewidth=2.2 if name.startswith("streamcrypt") else 1.2,
            label=name,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [_label(n) for n in sizes])
    ax.set_xlabel("message size")
    ax.set_ylabel("encryption throughput (GB/s)")
    ax.set_title("One-shot encryption throughput by message size (higher is better)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(CHART)
    plt.close(fig)
