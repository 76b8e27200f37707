"""Keys held in a PKCS#11 token (SoftHSM2, a fresh token per test session): the key object
stays non-extractable, wrap/unwrap in the token, typed errors (wrong PIN, no token, no
key, a blob that does not open), threads and fork, and every place a key ring reaches:
the native container (one-shots, streams, the async calls, files), the AWS Encryption SDK
format against the real ``aws-encryption-sdk`` both ways, and RFC 8188's typed refusal.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

pkcs11 = pytest.importorskip("pkcs11")

import streamcrypt  # noqa: E402
from streamcrypt.codecs import aws, container  # noqa: E402
from streamcrypt.errors import (  # noqa: E402
    AuthenticationError,
    FormatError,
    InvalidParameterError,
    TokenError,
    TokenPinError,
    UnknownKeyError,
)
from streamcrypt.keys import KeyRing, Pkcs11Key, SecretKey  # noqa: E402

DATA = os.urandom(300_000)
#: The key imported for the AWS check, known to the SDK's raw AES keyring too.
AWS_KEY = bytes(range(100, 132))


@pytest.fixture(scope="module")
def hsm(softhsm: Any) -> Any:
    return softhsm


@pytest.fixture(scope="module")
def token_key(hsm: Any) -> Pkcs11Key:
    return Pkcs11Key.generate(hsm.uri("main"), pin=hsm.pin_source)


@pytest.fixture(scope="module")
def ring(token_key: Pkcs11Key) -> KeyRing:
    return KeyRing([SecretKey.generate(32, key_id="in-memory"), token_key], active="main")


def _raw_object(hsm: Any, label: str) -> Any:
    """The key object as python-pkcs11 sees it, through its own session."""
    lib = pkcs11.lib(hsm.module)
    session = lib.get_token(token_label=hsm.token).open()
    return session.get_key(label=label)


# ------------------------------------------------------------------ the key object


def test_a_generated_key_is_non_extractable_and_sensitive_and_stays_so(
    hsm: Any, token_key: Pkcs11Key
) -> None:
    assert token_key.attributes() == {
        "extractable": False,
        "sensitive": True,
        "never_extractable": True,
        "always_sensitive": True,
    }
    raw = _raw_object(hsm, "main")
    assert raw[pkcs11.Attribute.EXTRACTABLE] is False
    assert raw[pkcs11.Attribute.SENSITIVE] is True
    with pytest.raises(pkcs11.PKCS11Error):  # the value never leaves the token
        raw[pkcs11.Attribute.VALUE]
    with pytest.raises(pkcs11.PKCS11Error):  # and the key cannot be made extractable
        raw[pkcs11.Attribute.EXTRACTABLE] = True
    with pytest.raises(pkcs11.PKCS11Error):
        raw[pkcs11.Attribute.SENSITIVE] = False
    assert token_key.attributes()["extractable"] is False


def test_an_imported_key_is_non_extractable_from_creation(hsm: Any) -> None:
    key = Pkcs11Key.import_key(hsm.uri("imported"), os.urandom(32), pin=hsm.pin_source)
    got = key.attributes()
    assert got["extractable"] is False and got["sensitive"] is True
    with pytest.raises(pkcs11.PKCS11Error):
        _raw_object(hsm, "imported")[pkcs11.Attribute.VALUE]


def test_an_extractable_key_in_the_token_is_refused(hsm: Any) -> None:
    lib = pkcs11.lib(hsm.module)
    session = lib.get_token(token_label=hsm.token).open(rw=True)
    session.generate_key(
        pkcs11.KeyType.AES,
        256,
        label="leaky",
        store=True,
        template={pkcs11.Attribute.EXTRACTABLE: True, pkcs11.Attribute.SENSITIVE: False},
    )
    with pytest.raises(TokenError, match="extractable"):
        Pkcs11Key.from_uri(hsm.uri("leaky"), pin=hsm.pin_source)


def test_making_a_key_twice_under_one_label_is_refused(hsm: Any, token_key: Pkcs11Key) -> None:
    with pytest.raises(InvalidParameterError, match="already holds"):
        Pkcs11Key.generate(hsm.uri("main"), pin=hsm.pin_source)


# ------------------------------------------------------------------ wrap and unwrap


def test_wrap_and_unwrap_in_the_token(hsm: Any, token_key: Pkcs11Key) -> None:
    data_key = os.urandom(32)
    blob = token_key.wrap(data_key)
    assert len(blob) == 12 + 32 + 16 and data_key not in blob
    assert token_key.wrap(data_key) != blob  # a fresh IV each time
    assert token_key.unwrap(blob) == data_key
    assert token_key.unwrap(token_key.wrap(data_key, aad=b"ctx"), aad=b"ctx") == data_key
    other = Pkcs11Key.generate(hsm.uri("other"), pin=hsm.pin_source)
    bad = [
        blob[:-1] + bytes([blob[-1] ^ 1]),  # tag
        bytes([blob[0] ^ 1]) + blob[1:],  # IV
        blob[:20],  # truncated
        b"",
    ]
    for wrapped in bad:
        with pytest.raises(AuthenticationError):
            token_key.unwrap(wrapped)
    with pytest.raises(AuthenticationError):
        token_key.unwrap(blob, aad=b"other context")
    with pytest.raises(AuthenticationError):
        other.unwrap(blob)


def test_uri_forms(hsm: Any, token_key: Pkcs11Key) -> None:
    by_id = Pkcs11Key.import_key(
        f"pkcs11:token={hsm.token};id=%01%ff?module-path={hsm.module}",
        os.urandom(32),
        pin=hsm.pin_source,
    )
    assert by_id.key_id == "01ff"
    again = Pkcs11Key(hsm.module, hsm.token, object_id=b"\x01\xff", pin=hsm.pin_source)
    assert again.unwrap(by_id.wrap(b"k" * 32)) == b"k" * 32
    refused = {
        f"pkcs11:token=t;object=o;pin-value={hsm.pin}?module-path=/m": "pin-value",
        "pkcs11:token=t;object=o?module-path=/m&pin-value=1": "pin-value",
        "pkcs11:token=t;object=o;serial=1?module-path=/m": "unsupported",
        "pkcs11:object=o?module-path=/m": "needs token",
        "pkcs11:token=t;object=o": "needs token",
        "pkcs11:token=t;token=u;object=o?module-path=/m": "twice",
        "pkcs11:token=t;object=o?module-path=/m&pin-source=file:/x": "env:NAME",
        "https://example.com": "starts with",
    }
    for uri, message in refused.items():
        with pytest.raises(InvalidParameterError, match=message) as info:
            Pkcs11Key.from_uri(uri)
        assert hsm.pin not in str(info.value)


def test_pin_from_the_environment(hsm: Any, token_key: Pkcs11Key, monkeypatch: Any) -> None:
    monkeypatch.setenv("STREAMCRYPT_TEST_PIN", hsm.pin)
    key = Pkcs11Key.from_uri(hsm.uri("main", pin_env="STREAMCRYPT_TEST_PIN"))
    assert key.unwrap(token_key.wrap(b"e" * 32)) == b"e" * 32
    monkeypatch.delenv("STREAMCRYPT_TEST_PIN")
    with pytest.raises(TokenPinError, match="not set"):
        Pkcs11Key.from_uri(hsm.uri("other", pin_env="STREAMCRYPT_TEST_PIN"))


# ------------------------------------------------------------------ typed errors, no PIN


def test_typed_errors_for_a_missing_token_key_module_or_pin(hsm: Any, token_key: Pkcs11Key) -> None:
    with pytest.raises(TokenError, match="no token labelled"):
        Pkcs11Key(hsm.module, "no-such-token", label="main", pin=hsm.pin_source)
    with pytest.raises(UnknownKeyError, match="no secret key"):
        Pkcs11Key(hsm.module, hsm.token, label="no-such-key", pin=hsm.pin_source)
    with pytest.raises(TokenError, match="cannot load"):
        Pkcs11Key("/nonexistent/libp11.so", hsm.token, label="main", pin=hsm.pin_source)
    with pytest.raises(TokenPinError, match="needs a PIN"):
        Pkcs11Key(hsm.module, hsm.token, label="other")
    with pytest.raises(InvalidParameterError, match="callable"):
        Pkcs11Key(hsm.module, hsm.token, label="main", pin=hsm.pin)  # type: ignore[arg-type]
    # this process is logged in: another PIN is refused, not let in
    with pytest.raises(TokenPinError, match="wrong PIN"):
        Pkcs11Key(hsm.module, hsm.token, label="main", pin=lambda: "000000")


def test_a_wrong_pin_in_a_fresh_process_is_the_tokens_refusal(
    hsm: Any, token_key: Pkcs11Key
) -> None:
    script = (
        "import sys\n"
        "from streamcrypt.keys import Pkcs11Key\n"
        "from streamcrypt.errors import TokenPinError\n"
        "try:\n"
        f"    Pkcs11Key.from_uri({hsm.uri('main', pin_env='P')!r})\n"
        "except TokenPinError as exc:\n"
        "    print('TokenPinError', exc)\n"
    )
    env = {**os.environ, "P": "999999", "SOFTHSM2_CONF": hsm.conf}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.startswith("TokenPinError"), done.stdout + done.stderr
    assert "wrong PIN" in done.stdout and "999999" not in done.stdout


def test_the_pin_is_asked_before_the_lock_across_processes(hsm: Any, token_key: Pkcs11Key) -> None:
    """A PIN prompt may wait for a person: other processes must not wait with it."""
    import fcntl

    held: list[bool] = []

    def pin() -> str:
        with open(hsm.module, "rb") as probe:  # another open file: flock conflicts
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held.append(True)
            else:
                held.append(False)
                fcntl.flock(probe, fcntl.LOCK_UN)
        return hsm.pin

    Pkcs11Key(hsm.module, hsm.token, label="main", pin=pin)
    assert held == [False]


def test_no_pin_in_repr_str_pickle_or_messages(hsm: Any, token_key: Pkcs11Key) -> None:
    for text in (repr(token_key), str(token_key)):
        assert hsm.pin not in text and "main" in text
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(token_key)
    with pytest.raises(AuthenticationError) as info:
        token_key.unwrap(b"\x00" * 60)
    assert hsm.pin not in str(info.value)


def test_a_lost_session_is_a_typed_error_once_then_reopened(hsm: Any, token_key: Pkcs11Key) -> None:
    from streamcrypt.keys import _pkcs11

    blob = token_key.wrap(b"s" * 32)
    slot = _pkcs11._process().tokens[(hsm.module, hsm.token)]
    slot.session.close()  # as a removed token or a logout would leave it
    with pytest.raises(TokenError, match="the token failed"):
        token_key.unwrap(blob)
    assert token_key.unwrap(blob) == b"s" * 32  # a new session, the PIN asked again
    assert _pkcs11._process().tokens[(hsm.module, hsm.token)] is not slot


# ------------------------------------------------------------------ threads and fork


def test_many_threads_share_the_token(token_key: Pkcs11Key) -> None:
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(40):
                data_key = os.urandom(32)
                assert token_key.unwrap(token_key.wrap(data_key)) == data_key
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_a_forked_child_reinitializes_and_uses_the_key(token_key: Pkcs11Key) -> None:
    blob = token_key.wrap(b"p" * 32)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's session is not ours
        try:
            ok = token_key.unwrap(blob) == b"p" * 32
            mine = token_key.wrap(b"c" * 32)
            os.write(write, (b"ok" if ok else b"no") + mine)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    assert answer[:2] == b"ok"
    assert token_key.unwrap(answer[2:]) == b"c" * 32  # the parent reads the child's
    assert token_key.unwrap(blob) == b"p" * 32  # and its own session still works


def test_multiprocessing_fork_workers(token_key: Pkcs11Key) -> None:
    """Forked siblings start at once (SoftHSM2 lost the token when several forked
    children initialized it together, before _across_processes)."""
    blobs = [token_key.wrap(bytes([i]) * 32) for i in range(12)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(6) as pool:
        got = pool.starmap(_unwrap_in_worker, list(enumerate(blobs)))
    assert got == [bytes([i]) * 32 for i in range(12)]


_WORKER_KEY: list[Pkcs11Key] = []


def test_fresh_processes_start_at_once(hsm: Any, token_key: Pkcs11Key) -> None:
    """Processes that log in beside each other (SoftHSM2 lost the token in 1 of 18 on a
    token of 40 keys, before _across_processes): all of them open the key."""
    for i in range(30):
        Pkcs11Key.generate(hsm.uri(f"filler-{i}"), pin=hsm.pin_source)
    blob = token_key.wrap(b"f" * 32)
    script = (
        "from streamcrypt.keys import Pkcs11Key\n"
        f"key = Pkcs11Key.from_uri({hsm.uri('main', pin_env='P')!r})\n"
        f"print(key.unwrap({blob!r}) == {b'f' * 32!r})\n"
    )
    env = {**os.environ, "P": hsm.pin, "SOFTHSM2_CONF": hsm.conf}
    for _ in range(2):
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
            )
            for _ in range(6)
        ]
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert all(out.strip().endswith("True") for out in outs), outs


def _unwrap_in_worker(index: int, blob: bytes) -> bytes:
    return _WORKER_KEY[0].unwrap(blob)


@pytest.fixture(autouse=True)
def _worker_key(token_key: Pkcs11Key) -> Any:
    _WORKER_KEY[:] = [token_key]  # forked workers inherit it (a key does not pickle)
    yield


# ------------------------------------------------------------------ the native container


def test_container_one_shots_with_a_token_key_and_a_ring(
    ring: KeyRing, token_key: Pkcs11Key
) -> None:
    for size in (0, 10, 65535, 65536, len(DATA)):
        data = DATA[:size]
        for key in (ring, token_key):
            sealed = streamcrypt.encrypt_bytes(data, key=key)
            parsed = container.read_header(sealed)
            assert parsed is not None
            header, _ = parsed
            assert sealed[4] == container.WRAPPED_VERSION and header.key_id == "main"
            assert len(header.wrapped) == 60
            assert streamcrypt.decrypt_bytes(sealed, key=ring) == data
            assert streamcrypt.decrypt_bytes(sealed, key=token_key) == data


def test_a_ring_rotates_between_memory_and_token(ring: KeyRing) -> None:
    ring.activate("in-memory")
    try:
        old = streamcrypt.encrypt_bytes(b"old", key=ring)
    finally:
        ring.activate("main")
    new = streamcrypt.encrypt_bytes(b"new", key=ring)
    assert old[4] == container.VERSION and new[4] == container.WRAPPED_VERSION
    assert streamcrypt.decrypt_bytes(old, key=ring) == b"old"
    assert streamcrypt.decrypt_bytes(new, key=ring) == b"new"


def test_container_streams_and_the_async_calls(ring: KeyRing) -> None:
    enc = container.StreamEncryptor(ring, segment_size=4096, aad=b"ctx")
    sealed = enc.update(DATA[:100_000]) + enc.finalize()
    dec = container.StreamDecryptor(ring, aad=b"ctx")
    assert dec.update(sealed) + dec.finalize() == DATA[:100_000]

    async def chunks(data: bytes) -> Any:
        for i in range(0, len(data), 7000):
            yield data[i : i + 7000]

    async def run() -> bytes:
        out = [c async for c in streamcrypt.encrypt(chunks(DATA), key=ring)]
        back = [c async for c in streamcrypt.decrypt(chunks(b"".join(out)), key=ring)]
        return b"".join(back)

    assert anyio.run(run) == DATA


def test_files_with_a_token_key(ring: KeyRing, tmp_path: Path) -> None:
    path = tmp_path / "f.scry"

    async def run() -> tuple[bytes, bytes]:
        async with streamcrypt.open(path, "wb", key=ring) as f:
            await f.write(DATA)
        async with streamcrypt.open(path, "rb", key=ring) as f:
            whole = await f.read()
        async with streamcrypt.open(path, "rb", key=ring) as f:
            await f.seek(200_000)
            part = await f.read(1000)
        return whole, part

    whole, part = anyio.run(run)
    assert whole == DATA and part == DATA[200_000:201_000]


def test_the_header_variant_does_not_cross_keys(ring: KeyRing, token_key: Pkcs11Key) -> None:
    memory = ring.get("in-memory")
    v1 = streamcrypt.encrypt_bytes(b"v1", key=memory)
    v2 = streamcrypt.encrypt_bytes(b"v2", key=token_key)
    with pytest.raises(AuthenticationError):  # a v1 header never opens with a token key
        streamcrypt.decrypt_bytes(v1, key=token_key)
    with pytest.raises(AuthenticationError):  # a v2 header needs the token
        streamcrypt.decrypt_bytes(v2, key=memory)
    liar = KeyRing([SecretKey(memory.secret_bytes(), key_id="main")])
    with pytest.raises(AuthenticationError):  # a key in memory under the token key's id
        streamcrypt.decrypt_bytes(v2, key=liar)
    at = v2.index(b"main") + len(b"main") + 1  # the wrapped key
    tampered = v2[: at + 20] + bytes([v2[at + 20] ^ 1]) + v2[at + 21 :]
    with pytest.raises(AuthenticationError):
        streamcrypt.decrypt_bytes(tampered, key=token_key)
    short = v2[: at - 1] + bytes([10]) + v2[at:]
    with pytest.raises(FormatError, match="shorter than any wrapped key"):
        streamcrypt.decrypt_bytes(short, key=token_key)


def test_a_version_2_stream_built_from_the_specification_opens(hsm: Any) -> None:
    """docs/FORMAT.md alone, with cryptography's AES-GCM and HMAC: a second
    implementation's stream (the token key's bytes known: imported) opens here."""
    from cryptography.hazmat.primitives import hashes, hmac
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    token_bytes, data_key, iv = bytes(range(7, 39)), bytes(range(50, 82)), bytes(range(12))
    salt, prefix, aad, plaintext = bytes(range(32)), bytes(range(90, 97)), b"ad", b"spec" * 9
    key = Pkcs11Key.import_key(hsm.uri("spec-vector"), token_bytes, pin=hsm.pin_source)
    wrapped = iv + AESGCM(token_bytes).encrypt(iv, data_key, b"streamcrypt container v2 data key")
    body = (
        b"SCRY" + bytes([2, 1]) + (65536).to_bytes(4, "big") + salt + prefix
        + bytes([11]) + b"spec-vector" + bytes([len(wrapped)]) + wrapped
    )  # fmt: skip
    keyed = hmac.HMAC(data_key, hashes.SHA256())
    seg_mac, mac = keyed.copy(), keyed
    seg_mac.update(b"streamcrypt container v1 segment key" + body + b"\x01")  # HKDF-Expand
    mac.update(b"streamcrypt container v1 header tag" + body + aad)
    segment = AESGCM(seg_mac.finalize()).encrypt(prefix + bytes(4) + b"\x01", plaintext, None)
    stream = body + mac.finalize() + segment
    assert streamcrypt.decrypt_bytes(stream, key=key, aad=aad) == plaintext
    assert streamcrypt.decrypt_bytes(stream, key=KeyRing([key]), aad=aad) == plaintext


def test_a_ring_with_a_token_key_does_not_serialize(ring: KeyRing) -> None:
    with pytest.raises(InvalidParameterError, match="Pkcs11Key"):
        ring.to_json("password")
    assert ring.find(ring.get("in-memory")) == "in-memory"


# ------------------------------------------------------------------ HTTP bodies (RFC 8188)


def test_rfc8188_refuses_a_token_key_with_a_typed_error(token_key: Pkcs11Key) -> None:
    ring16 = KeyRing([token_key])
    with pytest.raises(InvalidParameterError, match="RFC 8188"):
        streamcrypt.encrypt_bytes(b"x", key=ring16, format="ece")


# ------------------------------------------------------------------ AWS Encryption SDK


@pytest.fixture(scope="module")
def aws_token_ring(hsm: Any) -> aws.RawAesKeyring:
    key = Pkcs11Key.import_key(hsm.uri("aws-wrapping"), AWS_KEY, pin=hsm.pin_source)
    return aws.RawAesKeyring("streamcrypt-test", "aes-key-1", key)


def _their_provider() -> Any:
    pytest.importorskip("aws_encryption_sdk")
    from test_aws_interop import _their_aes  # the SDK's raw AES master key, as there

    return _their_aes(AWS_KEY)


def test_aws_messages_wrapped_in_the_token_open_in_the_sdk_and_back(
    aws_token_ring: aws.RawAesKeyring,
) -> None:
    sdk = pytest.importorskip("aws_encryption_sdk")
    from aws_encryption_sdk.identifiers import CommitmentPolicy

    client = sdk.EncryptionSDKClient(
        commitment_policy=CommitmentPolicy.REQUIRE_ENCRYPT_REQUIRE_DECRYPT
    )
    context = {"purpose": "pkcs11 interop"}
    ours = streamcrypt.encrypt_bytes(
        DATA, key=aws_token_ring, format="aws", encryption_context=context
    )
    plain, header = client.decrypt(source=ours, key_provider=_their_provider())
    assert plain == DATA and header.encryption_context["purpose"] == "pkcs11 interop"
    theirs, _ = client.encrypt(
        source=DATA, key_provider=_their_provider(), encryption_context=context
    )
    assert streamcrypt.decrypt_bytes(theirs, key=aws_token_ring, format="aws") == DATA
    other = aws.RawAesKeyring("streamcrypt-test", "aes-key-1", os.urandom(32))
    with pytest.raises(UnknownKeyError):  # the token key is what opens it
        streamcrypt.decrypt_bytes(theirs, key=other, format="aws")


# ------------------------------------------------------------------ the command


def _command(hsm: Any, *args: str, pin: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOKEN_PIN": pin, "SOFTHSM2_CONF": hsm.conf}
    return subprocess.run(
        [sys.executable, "-m", "streamcrypt", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_keygen_makes_a_token_key(hsm: Any) -> None:
    uri = hsm.uri("from-the-command", pin_env="TOKEN_PIN")
    done = _command(hsm, "keygen", "--pkcs11", uri, pin=hsm.pin)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == uri and "not extractable" in done.stderr
    made = Pkcs11Key.from_uri(uri.replace("TOKEN_PIN", "X"), pin=hsm.pin_source)
    assert made.attributes()["extractable"] is False
    again = _command(hsm, "keygen", "--pkcs11", uri, pin=hsm.pin)
    assert again.returncode == 2 and "already holds" in again.stderr
    wrong = _command(hsm, "keygen", "--pkcs11", hsm.uri("x", pin_env="TOKEN_PIN"), pin="999999")
    assert wrong.returncode == 3 and "wrong PIN" in wrong.stderr
    assert "999999" not in wrong.stderr + wrong.stdout
    no_pin = _command(hsm, "keygen", "--pkcs11", hsm.uri("y"), pin=hsm.pin)
    assert no_pin.returncode == 2 and "pin-source" in no_pin.stderr


# ------------------------------------------------------------------ the cluster's key providers


def test_cluster_workers_use_a_token_key(hsm: Any, token_key: Pkcs11Key, tmp_path: Path) -> None:
    """Two worker processes each open the token (SOFTHSM2_CONF and the PIN variable are
    in their environment): many objects, and one object by segment ranges."""
    pytest.importorskip("distributed")
    pytest.importorskip("fsspec")
    from support import local_cluster

    from streamcrypt import cluster

    provider = cluster.TokenKey(hsm.uri("main", pin_env="SC_TOKEN_PIN"))
    assert hsm.pin not in repr(provider) + str(pickle.dumps(provider))
    src = tmp_path / "src"
    src.mkdir()
    files = {f"o{i}.bin": os.urandom(size) for i, size in enumerate((0, 70_000, 1 << 20))}
    for name, data in files.items():
        (src / name).write_bytes(data)
    os.environ["SC_TOKEN_PIN"] = hsm.pin  # the workers inherit it
    try:
        with local_cluster() as client:
            enc = cluster.encrypt_objects(client, str(src), str(tmp_path / "enc"), provider)
            assert enc.ok, enc.failures
            big = cluster.encrypt_ranges(
                client, str(src / "o2.bin"), str(tmp_path / "big.sc"), provider,
                range_size=1 << 18, segment_size=1 << 16,
            )  # fmt: skip
            assert big.ok, big.failures
            back = cluster.decrypt_ranges(
                client, str(tmp_path / "big.sc"), str(tmp_path / "back.bin"), provider,
                range_size=1 << 18,
            )  # fmt: skip
            assert back.ok, back.failures
    finally:
        del os.environ["SC_TOKEN_PIN"]
    for name, data in files.items():
        sealed = (tmp_path / "enc" / name).read_bytes()
        assert sealed[4] == container.WRAPPED_VERSION
        assert streamcrypt.decrypt_bytes(sealed, key=token_key) == data
    assert (
        streamcrypt.decrypt_bytes((tmp_path / "big.sc").read_bytes(), key=token_key)
        == files["o2.bin"]
    )
    assert (tmp_path / "back.bin").read_bytes() == files["o2.bin"]
