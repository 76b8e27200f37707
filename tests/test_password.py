"""Password-derived keys: Argon2id (libsodium) and scrypt, known answers and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cryptography_vectors
import pytest
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from support import record_vectors

from streamcrypt.errors import (
    FormatError,
    InvalidParameterError,
    LimitExceededError,
    UnsupportedFormatError,
)
from streamcrypt.keys import (
    INTERACTIVE,
    MAX_READ_PARAMS,
    MODERATE,
    SENSITIVE,
    Argon2Params,
    ScryptParams,
    SecretKey,
    check_read_params,
    derive_key_from_password,
    hash_password,
    password_needs_rehash,
    verify_password,
)

# Small custom parameters keep the tests fast (libsodium's minimum memory is 8 KiB).
FAST = Argon2Params(1, 8192)
SALT = bytes(range(16))


def _kdf_vectors(name: str) -> list[dict[str, str]]:
    path = Path(cryptography_vectors.__file__).parent / "KDF" / name
    cases: list[dict[str, str]] = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("COUNT"):
            cases.append({})
        elif "=" in line and cases:
            k, v = (x.strip() for x in line.split("=", 1))
            cases[-1][k] = v
    return cases


def test_standard_parameter_sets_are_libsodiums() -> None:
    assert (INTERACTIVE.ops, INTERACTIVE.mem) == (2, 64 << 20)
    assert (MODERATE.ops, MODERATE.mem) == (3, 256 << 20)
    assert (SENSITIVE.ops, SENSITIVE.mem) == (4, 1 << 30)
    assert Argon2Params.MODERATE is MODERATE
    assert MAX_READ_PARAMS == SENSITIVE


@pytest.mark.parametrize(
    ("ops", "mem"),
    [(0, 8192), (1, 4096), (1, 8193), (True, 8192), (1, 1 << 60), (1 << 33, 8192), (1.0, 8192)],
)
def test_argon2_params_bounds(ops: object, mem: object) -> None:
    with pytest.raises(InvalidParameterError):
        Argon2Params(ops, mem)  # type: ignore[arg-type]


@pytest.mark.parametrize(("n", "r", "p"), [(1, 8, 1), (3, 8, 1), (1024, 0, 1), (16, 1, 0)])
def test_scrypt_params_bounds(n: int, r: int, p: int) -> None:
    with pytest.raises(InvalidParameterError):
        ScryptParams(n, r, p)


def test_scrypt_rfc7914_vectors() -> None:
    """RFC 7914 section 12 (the 1 GiB case is skipped for time and counted as such)."""
    cases = _kdf_vectors("scrypt.txt")
    ran = 0
    for case in cases:
        n, r, p = int(case["N"]), int(case["r"]), int(case["p"])
        if n > 1 << 14:
            continue  # 2**20 x r=8 needs 1 GiB and seconds
        key = derive_key_from_password(
            case["PASSWORD"],
            case["SALT"].encode(),
            params=ScryptParams(n, r, p),
            length=int(case["LENGTH"]),
        )
        assert key.secret_bytes().hex() == case["DERIVED_KEY"]
        ran += 1
    record_vectors("cryptography_vectors KDF/scrypt.txt (N <= 2**14)", ran, 3)


def test_argon2id_agrees_with_openssl_on_rfc9106_checked_implementation() -> None:
    """libsodium's Argon2id cannot express RFC 9106's vectors (4 lanes, secret, associated
    data, 8-byte salts). So: cryptography's Argon2id (OpenSSL) is first checked against
    the RFC 9106 / argon2-CLI vectors, then libsodium must agree with it bit for bit on
    one lane without secret or associated data (what crypto_pwhash computes)."""
    ran = 0
    for case in _kdf_vectors("argon2id.txt"):
        kdf = Argon2id(
            salt=bytes.fromhex(case["salt"]),
            length=int(case["length"]),
            iterations=int(case["iter"]),
            lanes=int(case["lanes"]),
            memory_cost=int(case["memcost"]),
            ad=bytes.fromhex(case["ad"]) if case.get("ad") else None,
            secret=bytes.fromhex(case["secret"]) if case.get("secret") else None,
        )
        assert kdf.derive(bytes.fromhex(case.get("pass", ""))).hex() == case["output"]
        ran += 1
    record_vectors("cryptography_vectors KDF/argon2id.txt (via OpenSSL)", ran, 6)
    for password, ops, mem_kib, length in [
        (b"password", 1, 8, 32),
        (b"", 2, 16, 16),
        ("pässwörd".encode(), 3, 64, 64),
    ]:
        ours = derive_key_from_password(
            password, SALT, params=Argon2Params(ops, mem_kib * 1024), length=length
        )
        ref = Argon2id(
            salt=SALT, length=length, iterations=ops, lanes=1, memory_cost=mem_kib
        ).derive(password)
        assert ours.secret_bytes() == ref


def test_derive_key_from_password_properties() -> None:
    a = derive_key_from_password("correct horse", SALT, params=FAST, key_id="k1")
    b = derive_key_from_password(b"correct horse", SALT, params=FAST)
    c = derive_key_from_password("correct horsf", SALT, params=FAST)
    d = derive_key_from_password("correct horse", bytes(16), params=FAST)
    assert isinstance(a, SecretKey) and len(a) == 32 and a.key_id == "k1"
    assert a.secret_bytes() == b.secret_bytes()
    assert len({a.secret_bytes(), c.secret_bytes(), d.secret_bytes()}) == 3
    assert "correct" not in repr(a) and a.secret_bytes().hex() not in repr(a)
    s = derive_key_from_password("pw", b"any length salt", params=ScryptParams(16, 1, 1))
    assert len(s) == 32


@pytest.mark.parametrize(
    "kwargs",
    [
        {"salt": b"short"},
        {"length": 8},
        {"params": "argon2"},
    ],
)
def test_derive_key_bad_arguments(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"salt": SALT, "params": FAST, **kwargs}
    with pytest.raises(InvalidParameterError):
        derive_key_from_password("pw", **args)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        derive_key_from_password(123, SALT, params=FAST)  # type: ignore[arg-type]


def test_hash_and_verify_password() -> None:
    encoded = hash_password("hunter2", FAST)
    assert encoded.startswith("$argon2id$v=19$m=8,t=1,p=1$")
    assert verify_password(encoded, "hunter2") is True
    assert verify_password(encoded.encode(), b"hunter2") is True
    assert verify_password(encoded, "hunter3") is False
    assert hash_password("hunter2", FAST) != encoded  # fresh salt
    assert not password_needs_rehash(encoded, FAST)
    assert password_needs_rehash(encoded, INTERACTIVE)


def test_verify_password_known_answer() -> None:
    """A hash made by the argon2 reference encoder's format (libsodium-compatible)."""
    ref = Argon2id(salt=SALT, length=32, iterations=1, lanes=1, memory_cost=8).derive(b"password")
    import base64

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode().rstrip("=")

    encoded = f"$argon2id$v=19$m=8,t=1,p=1${b64(SALT)}${b64(ref)}"
    assert verify_password(encoded, "password") is True
    assert verify_password(encoded, "Password") is False


@pytest.mark.parametrize(
    "encoded",
    [
        "",
        "garbage",
        "$argon2id$v=19$m=8,t=1,p=1$AAAA",
        "$argon2id$v=16$m=8,t=1,p=1$AAECAwQFBgcICQoLDA0ODw$" + "A" * 43,
        "$argon2id$v=19$m=8,t=1,p=4$AAECAwQFBgcICQoLDA0ODw$" + "A" * 43,
        "$argon2id$v=19$m=4,t=1,p=1$AAECAwQFBgcICQoLDA0ODw$" + "A" * 43,
        "$argon2id$v=19$m=8,t=1,p=1$AAECAwQFBgcICQoLDA0ODw$" + "A" * 43 + "\n",
        "$argon2id$v=19$m=8,t=1,p=1$AAECAwQFBgcICQoLDA0ODw$" + "é" * 43,
    ],
)
def test_verify_password_malformed(encoded: str) -> None:
    with pytest.raises(FormatError):
        verify_password(encoded, "pw")


def test_verify_password_other_algorithms() -> None:
    with pytest.raises(UnsupportedFormatError):
        verify_password("$argon2i$v=19$m=4096,t=3,p=1$MzE4ODFiZWFlMjAzOWUAAA$" + "A" * 43, "x")
    with pytest.raises(UnsupportedFormatError):
        verify_password(
            "$7$C6..../....SodiumChloride$kBGj9fHznVYFQMEn/qDCfrDevf9YDtcDdKvEqHJLV8D", "x"
        )


def test_verify_password_refuses_oversized_parameters_before_work() -> None:
    # 4 GiB of memory: running it would fail or take forever; the cap refuses first.
    huge = "$argon2id$v=19$m=4194304,t=1,p=1$AAECAwQFBgcICQoLDA0ODw$" + "A" * 43
    with pytest.raises(LimitExceededError):
        verify_password(huge, "pw")
    many_passes = "$argon2id$v=19$m=8,t=4294967295,p=1$AAECAwQFBgcICQoLDA0ODw$" + "A" * 43
    with pytest.raises(LimitExceededError):
        verify_password(many_passes, "pw")
    small_cap = Argon2Params(1, 8192)
    with pytest.raises(LimitExceededError):
        verify_password(hash_password("pw", Argon2Params(1, 16384)), "pw", max_params=small_cap)


def test_check_read_params() -> None:
    check_read_params(SENSITIVE)
    check_read_params(Argon2Params(8, 512 << 20))  # same work as SENSITIVE, less memory
    check_read_params(ScryptParams(1 << 20))
    for params in (
        Argon2Params(1, 2 << 30),
        Argon2Params(9, 512 << 20),
        ScryptParams(1 << 21),
        ScryptParams(1 << 20, 8, 2),
    ):
        with pytest.raises(LimitExceededError):
            check_read_params(params)
    with pytest.raises(LimitExceededError):
        check_read_params(INTERACTIVE, max_params=FAST)


# ---------------------------------------------------------------------------------------
# What scrypt really allocates, and what happens when the memory is not there (issue 14)
# ---------------------------------------------------------------------------------------

_SCRYPT_PEAK = """
import sys
from streamcrypt.keys import ScryptParams, derive_key_from_password

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

derive_key_from_password("pw", b"salt", params=ScryptParams(2, 1, 1))  # OpenSSL loaded
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current RSS
base = status("VmRSS:")
n, r, p = map(int, sys.argv[1:])
derive_key_from_password("pw", b"salt", params=ScryptParams(n, r, p))
print(status("VmHWM:") - base)
"""


def _scrypt_peak_growth(params: ScryptParams) -> int:
    """Peak RSS growth of one scrypt run in a fresh process (tracemalloc cannot see
    OpenSSL's allocations; the kernel's resident high-water mark can)."""
    argv = [sys.executable, "-c", _SCRYPT_PEAK, str(params.n), str(params.r), str(params.p)]
    out = subprocess.run(argv, capture_output=True, check=True, timeout=120, text=True)
    return int(out.stdout)


@pytest.mark.parametrize(
    "params", [ScryptParams(2, 104_857, 1), ScryptParams(16, 20_000, 3), ScryptParams(1 << 16)]
)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
def test_scrypt_memory_is_what_openssl_allocates(params: ScryptParams) -> None:
    grown = _scrypt_peak_growth(params)
    assert 0.97 * params.memory <= grown <= 1.03 * params.memory + (2 << 20), (
        grown,
        params.memory,
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
def test_scrypt_read_cap_bounds_the_real_peak() -> None:
    """The largest ``r`` a 16 MiB cap lets through at n = 2 stays within 16 MiB for real.

    Counted as ``128 r (n + p)``, the same cap let through a third more ``r`` and twice
    the memory (issue 14: n = 2, r = 2796202 passed the 1 GiB default and took 2 GiB).
    """
    cap = ScryptParams(1 << 14)
    r = cap.memory // (128 * (2 + 2 + 2))
    hostile = ScryptParams(2, r, 1)
    check_read_params(hostile, max_scrypt=cap)
    with pytest.raises(LimitExceededError):
        check_read_params(ScryptParams(2, r + 1, 1), max_scrypt=cap)
    assert _scrypt_peak_growth(hostile) <= 1.03 * cap.memory + (2 << 20)
    with pytest.raises(LimitExceededError):
        check_read_params(ScryptParams(2, 2_796_202, 1))


def test_scrypt_params_follow_rfc_7914() -> None:
    ScryptParams((1 << 16) // 2, 1, 1)
    for n, r, p in ((1 << 16, 1, 1), (1 << 32, 2, 1), (2, 1 << 24, 1), (2, 1 << 12, 1 << 12)):
        with pytest.raises(InvalidParameterError):
            ScryptParams(n, r, p)


_NO_MEMORY = """
import json, resource, struct
from streamcrypt import KeyRing
from streamcrypt.codecs import age, envelope
from streamcrypt.keys import SENSITIVE, Argon2Params, ScryptParams, SecretKey
from streamcrypt.keys import derive_key_from_password


def whole(transform, data):
    return transform.update(data) + transform.finalize()


small_argon = Argon2Params(3, 8 << 20)
sealed_age = whole(age.AgeEncryptor(passphrase="pw", work_factor=2), b"x")
sealed_env = whole(envelope.EnvelopeEncryptor(passphrase="pw", work_factor=small_argon), b"x")
ring = KeyRing([SecretKey.generate(key_id="a")])
ring_doc = json.loads(ring.to_json("pw", params=Argon2Params(1, 8192)))
ring_doc["kdf"]["mem"] = SENSITIVE.mem
ring_scrypt = json.loads(ring.to_json("pw", params=ScryptParams(16)))
ring_scrypt["kdf"]["n"] = 1 << 20

paths = {
    "argon2id": lambda: derive_key_from_password("pw", bytes(16), params=SENSITIVE),
    "scrypt": lambda: derive_key_from_password("pw", b"s", params=ScryptParams(1 << 20)),
    # The stanza's work factor is read before the header MAC can be checked.
    "age scrypt": lambda: whole(
        age.AgeDecryptor(passphrase="pw"), sealed_age.replace(b" 2\\n", b" 20\\n", 1)
    ),
    "envelope argon2id": lambda: whole(
        envelope.EnvelopeDecryptor(passphrase="pw"),
        sealed_env.replace(struct.pack(">II", 3, 8192), struct.pack(">II", 1, 1 << 20), 1),
    ),
    "keyring argon2id": lambda: KeyRing.from_json(json.dumps(ring_doc), "pw"),
    "keyring scrypt": lambda: KeyRing.from_json(json.dumps(ring_scrypt), "pw"),
}
# Everything is loaded: now leave 256 MiB of address space, a quarter of what each needs.
with open("/proc/self/statm") as f:
    size = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + (256 << 20),) * 2)
out = {}
for name, run in paths.items():
    try:
        run()
        out[name] = "no error"
    except Exception as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
def test_kdf_without_memory_is_limit_exceeded_on_every_path() -> None:
    """Without the memory, every KDF path raises LimitExceededError (issue 14: age gave a
    raw MemoryError and Argon2id nacl's RuntimeError)."""
    out = subprocess.run(
        [sys.executable, "-c", _NO_MEMORY], capture_output=True, check=True, timeout=120
    )
    result = json.loads(out.stdout)
    assert result == dict.fromkeys(result, "LimitExceededError"), result
    assert len(result) == 6
