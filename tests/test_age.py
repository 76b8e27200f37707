"""age v1: Bech32 keys, stanzas, strict header, payload, armor; interop with pyrage; typed failures."""

from __future__ import annotations

import base64
import hashlib
import random
import time
import zlib
from pathlib import Path

import pyrage
import pytest
from support import age_decrypt, age_encrypt, random_splits, record_vectors, vector_path

from streamcrypt.codecs import age
from streamcrypt.codecs._bech32 import bech32_decode, bech32_encode
from streamcrypt.codecs.age._header import _build_header, _encode_stanza
from streamcrypt.codecs.age._payload import _payload_codec
from streamcrypt.codecs.armor import ArmorDecoder, ArmorEncoder, armor, dearmor
from streamcrypt.errors import (
    AuthenticationError,
    BrokenTransformError,
    FormatError,
    InvalidParameterError,
    LimitExceededError,
    StreamCryptError,
    TruncatedStreamError,
    UnknownKeyError,
    UnsupportedFormatError,
)

CHUNK = age.CHUNK_SIZE

# The examples printed in the age spec (c2sp.org/age).
SPEC_IDENTITY = "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX"
SPEC_RECIPIENT = "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj"
SPEC_PQ_IDENTITY = "AGE-SECRET-KEY-PQ-1XX76JRALNLXDMEW0CRK45QMCCH4X06SE84UN3VPM33W6HWDX0H3SK3ZQFR"
SPEC_PQ_RECIPIENT = (
    "age1pq1x34nzsvr0rxjsgdn8zgyhfe8j7ceq5r9rdelkjuh3y235jzxshfg87pzf5zrqtzdxz95paef6caq5aapdmwjjqp"
    "jfdyxnzr2zampc3uxy0dg4z2n2gm9su72p0pc3u0jvev55l694v78snxg3yzvcl7yda0eyytqj6a0ec477lnhcy5hzpz4z"
    "q3pxanve4cn62gqj3pjy5lqj9c6kyj4v2z8alktn8zh99970x79gjkv7522hv9kfz35zsnxhsx8wwtmu9cy3ftzjgwcp4s"
    "shn3llnylnpdsyz5jm72vefv4x5vfwytrefxg4wq3mv42wcrvkj742479zrxzpvp2p3e9fed9f0739vcu80r7ma28qfhnvl"
    "v4gfzel9q654dj3zmuvvz893azhxdvs9fxd0r7jzchzcfcs5mkyyjxhw0n2z6dvp9yn9qfdp29h0azxqyjw6v7fhyuzj7z"
    "el0uq6j9rd7wgrpz7mf5dnj43jwsgvrc8qcnhy7tu6dkdujuxzkp9xj43xe8h92ktre2a3u3s8mm5mrp9nr9pwkgtz4mdl"
    "q9hgn4fps4k57ff6wddn2fy23t47sm20r8km8sd2pcyyafnet8f0dajsrlyjeah4n3mssr6aseevuuskdvq5lzguyvpgwpt"
    "a742c6698vgutzqgny8usfg0w2he7kq5vyxjd0f9hqg8xk26y9e4th0gezq92q4cpp5p2y9hf5f2cje5l0c3sa3a2qxmm3"
    "8pxxvhxh99yzmfz0zk7r2s64nnwjhkfgfr3gf8xnmppcgmaykvh5sh6g7vk9790rf8ws0axmr2t7z8aae5fq2029uvcn2gh"
    "gt4fu4wgwdc0k0cz52qkvwmuzj8p8k5jgf3xzk5zmrkavjekjrpeq408xz3zxazwkc6tyfmhayrkfpjhwtz5mp8j8guqe4"
    "3k2q6m2kte03vrw27y3wmqyu5etmt9dnkwcnnpmu9gz9dekfhdevf42ucshphnrk38ra6hx8w5f8q5ru0xdhrjxmwqf6cu"
    "sed7zc5xvq43r0zscjglpwlptpwydhqw64xz7ptjdyeyzpq2zkxtmzg29gzjpvzva4d3l0cenn9xs297wf4y4ukwrunf57x"
    "j6pm7nvrkwvtrt8hwcmgv8x7ajw7258ugf9wvkmk4052ekg87tw5vnx8nq2swyzv77v8yqlwsenvamr0zssknwts8rrhfuw"
    "j7ykysnq9jxy0uv3kuyt22djszjdtvpz6d0s0kwh8ryynddzud92emeyvvyqktd0jtj7rvvg5gch25v8smlvny3kvn5gagy"
    "z475ze2y6q466xqmz2n3hs77lddeqyta2nch5k2u5yacuk9ywnwfdzvyejnucz724hj77hrrmakm7pr3kxsrxq22ejexlud"
    "9fy2kdqmkg5yncz7jm5wv2qjk5w5kvcpqsry2yqffh2la52dxfjkjq5rzhjzeyn6dupn0qwtyv7s4lwg3xdarsdlwe2y3t"
    "ujy480y7z39q259fzx6jhd2j0f5hagqpcpees7hzc2yrk5cy788uk3s7qvp5cpepx24gvws3m2g433exgwppnkjscec8qu4"
    "y9z9r7vccexjcjaen42245lmgmxmuavg9alej92322gvvyy2t6267v09ch64y0m53jff0vjj96s0ypk60hr3jw4myd6m5h"
    "pn3xjstx7tl2szhpr5qe8jj08ydjc4wy2rch2fhuy3pdfjax5awe9j99ly5hkntzz9fe5zatgjvzdd0kgtxs25njnajyf6s"
    "sekp7gelxquusn4pt25czh3scj68kq79wdn5tgm6yvm9nzavrg043x3msnygf8dweknw5jmqd0uvny6ttsn09508k0c55zf"
    "negrm9efhxpfqdkmhh6gjtqmwze9pyyzk3tlhl53k2ykx3qheyty7saeq0d3fzv49zc0k"
)
SPEC_PQ_ENC = (
    "U7E10Aon27j1oDrH7fP3B++SPROSnDVvQpBemzOM+ZcsojxJifUbeeYWejMYKNB+H3rlXNvgtDKfSCkt78oqncr3faY1JtMj"
    "0GQPBZ2g6t8o1cMzZgyLMepeVuTQKxLqnM6L48n8dJL2y0N3i7WSOV6csB79r9tcIs88Al9iCwVLpt74OzDXAIwD1QlCAvj7"
    "5ZEnwtgP6Xr6s+wHg9hLD0OSSQOaTdCqzR5shQWyrjVs7GCqd/5WbNGYNaolPQJBu9wTNhHjP9XGCTv8iKXkYwXDYujInkF5"
    "hOjpCHE8Vu+9UeMI+l0GJAEervT51bwaf288GiqgapP5g4HF8V4P0+03B/SwXhvxxZpKjTU2OcFS8I9chtEZ7Ucw5bvPkC1l"
    "yjNnqQXZyc4JnAqbFQTlPGnwbEsm0UGE+v0FOxTBznIivHoPHV++5PuYpombiV/lfYy8BFx0Hk1igNI3iLNjlIg4MLXNWjN3"
    "VROlXIiSsWNXjr/Frh/OE87PXoaKhsDPWfv6akd9PxSDqJMQ4j8k11kCSOnnU8Rw4TSVnTpt7gfYzBULrMr7qDgyH/TYvp0o"
    "7mAq4IaraFJmTqm+LjfAJT4PCQOpnMNRHLyXZn6mtMUujNv7+zR/I9Vqi+bJdQBwNWdJcUQVarqx2zxV2rM7l+j0gsmxjxp5"
    "yAPyALzla7XzVvbboLMnHeM+CzN4GoB2PC4neVDSw7Dfs8vbm7f9CeDGvhjWrzcSCOsUCalvH1WkbpE0b9cE/TSJqwXFXEc8"
    "npTSQWH58RXDALNF3qCbW5LaboD4wCloClEakgljT0s0mTdqIwzj4xtdlX0S2dCtaV5MHQJiQHGwPvBSCiIsh8ZWJPwZ7Ron"
    "7xoWgNI0lXRqhKm7fvFNCzF+Ray2kOyKWHbsMy3a5Zx3yZxCGFwexAxgYfAH9HJ1raHi1XYGpNpBlDXg47U1y4uU7RBeBb4e"
    "wETv/B/p8sGW88tIY87dHM2xHjnntGXLvkCIkmjXGNULAVYHxDPJTygxSF7uTVPYCBUk5KeLnDVcgWF8p/wxigza47ptMtpV"
    "tm9ZrSEu9vzOnaTN3KO75RkkLuZszhXfmMZ46NQrdS7Y6duCiN501BnR5BUC4dX4iMxchix6aLN3pKv6UOEwwcx2aSF4Ib96"
    "3MAtTPEjhqe+dt0VcTar/08uLWv1kQQueFaEGet4KQ975ZqaoU3PmZH9gqTOumX1EKf0Pnl0F3NMW+lEOlnCEce99zHBwBf7"
    "LV0pLNLDONBxpQySrZUQsNfhAq2Ktf5nG2hcGAMFMWIsEOuOyzEe+l2aHW4/ojOjU1Oqy4TLzVVRlWmPxQde7qKbvBN7CQhD"
    "qJHJA2nphQT/4DOdLqkwRiauMmnfx9FI3+hYnX25NpnyvM/Pt94vpsRkhcuttu4/G4xOYTNQd2YWjGwhypZ0oPSiriuTbhj6"
    "y2qm33jiwxvegeDz8CmAIhOEY2JoVpjjX9XzuNR2f5KTLmLzEkOcJQ"
)
SPEC_PQ_BODY = "c/k+TjhBA6Je1DF8rxZhe2Jm8CN0zbkV9rre6nA8g98"


def _data(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _feed(
    transform: age.AgeDecryptor, data: bytes, piece: int
) -> tuple[bytes, BaseException | None]:
    """Feed ``data`` in ``piece``-sized parts; what was released and the error, if any."""
    out = bytearray()
    try:
        for i in range(0, len(data), piece):
            out += transform.update(data[i : i + piece])
        out += transform.finalize()
    except StreamCryptError as exc:
        return bytes(out), exc
    return bytes(out), None


@pytest.fixture(scope="module")
def ident() -> pyrage.x25519.Identity:
    return pyrage.x25519.Identity.generate()


# ---------------------------------------------------------------------------------------
# Bech32
# ---------------------------------------------------------------------------------------

# BIP 173 "valid checksum" vectors, and one that is invalid in BIP 173 only for its
# length (age has no length limit).
BIP173_VALID = [
    "A12UEL5L",
    "a12uel5l",
    "an83characterlonghumanreadablepartthatcontainsthenumber1andtheexcludedcharactersbio1tt5tgs",
    "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw",
    "11qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqc8247j",
    "split1checkupstagehandshakeupstreamerranterredcaperred2y9e3w",
    "?1ezyfcl",
]
BIP173_INVALID = [
    " 1nwldj5",  # HRP character out of range
    "\x7f1axkwrx",
    "\x801eym55h",
    "pzry9x0s0muk",  # no separator
    "1pzry9x0s0muk",  # empty HRP
    "x1b4n0q5v",  # invalid data character
    "li1dgmt3",  # too short checksum
    "de1lg7wt\xff",
    "A1G7SGD8",  # checksum computed over the uppercase HRP
    "10a06t8",
    "1qzzfhee",
    "a12UEL5L",  # mixed case
]


def test_bech32_bip173_vectors() -> None:
    for text in BIP173_VALID:
        hrp, data = bech32_decode(text)
        assert bech32_encode(hrp, data, upper=text.isupper()) == text
    for text in BIP173_INVALID:
        with pytest.raises(FormatError):
            bech32_decode(text)
    hrp, data = bech32_decode("abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw")
    assert (hrp, data) == ("abcdef", bytes.fromhex("00443214c74254b635cf84653a56d7c675be77df"))
    record_vectors("BIP 173 bech32 (checksum vectors)", len(BIP173_VALID) + len(BIP173_INVALID), 19)


def test_bech32_long_and_padding() -> None:
    data = _data(1216)
    text = bech32_encode("age1pq", data)
    assert len(text) > 90 and bech32_decode(text) == ("age1pq", data)
    # a single flipped character breaks the checksum
    bad = text[:-1] + ("q" if text[-1] != "q" else "p")
    with pytest.raises(FormatError):
        bech32_decode(bad)


# ---------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------


def test_spec_x25519_identity_gives_spec_recipient() -> None:
    identity = age.X25519Identity.parse(SPEC_IDENTITY)
    assert str(identity.recipient) == SPEC_RECIPIENT
    assert identity.to_string() == SPEC_IDENTITY
    assert age.X25519Recipient.parse(SPEC_RECIPIENT) == identity.recipient
    assert SPEC_IDENTITY not in repr(identity) and SPEC_IDENTITY not in str(identity)


def test_key_strings_round_trip_and_agree_with_pyrage(ident: pyrage.x25519.Identity) -> None:
    ours = age.X25519Identity.parse(str(ident))
    assert str(ours.recipient) == str(ident.to_public())
    assert ours.to_string() == str(ident)
    fresh = age.X25519Identity.generate()
    assert age.parse_identity(fresh.to_string()).recipient == fresh.recipient
    assert str(pyrage.x25519.Identity.from_str(fresh.to_string()).to_public()) == str(
        fresh.recipient
    )
    assert isinstance(age.parse_recipient(str(fresh.recipient)), age.X25519Recipient)
    text = f"# created: today\n# public key: {fresh.recipient}\n{fresh.to_string()}\n\n"
    assert [i.recipient for i in age.parse_identities(text)] == [fresh.recipient]


def _keygen_text(*idents: pyrage.x25519.Identity) -> str:
    """Identity file text as age-keygen writes it (several appended, as ``>>`` does)."""
    return "\n".join(
        f"# created: 2026-12-04T18:00:00Z\n# public key: {i.to_public()}\n{i}\n" for i in idents
    )


def test_identities_and_recipients_take_file_text_and_paths(tmp_path: Path) -> None:
    """identities= / recipients= read key files' text as age does (``#`` comments, blank
    lines, one key a line) and an os.PathLike as "read this file", through every entry
    point: the codec, the top-level bytes API and streamcrypt.open."""
    import anyio

    import streamcrypt

    first, second = pyrage.x25519.Identity.generate(), pyrage.x25519.Identity.generate()
    text = _keygen_text(first, second)
    (tmp_path / "keys.txt").write_text(text)
    sealed = pyrage.encrypt(b"to the second", [second.to_public()])
    for given in (text, tmp_path / "keys.txt", [tmp_path / "keys.txt"], [str(first), text]):
        assert age_decrypt(sealed, identities=given) == b"to the second"
        assert streamcrypt.decrypt_bytes(sealed, format="age", identities=given) == (
            b"to the second"
        )
    (tmp_path / "x.age").write_bytes(sealed)

    async def read() -> bytes:
        async with await streamcrypt.open(
            tmp_path / "x.age", "rb", format="age", identities=tmp_path / "keys.txt"
        ) as f:
            return await f.read()

    assert anyio.run(read) == b"to the second"
    team = f"# the team\n{first.to_public()}\n\n  {second.to_public()}  \n"
    (tmp_path / "team.txt").write_text(team)
    for recipients in (team, tmp_path / "team.txt"):
        out = age_encrypt(b"both", recipients=recipients)
        assert pyrage.decrypt(out, [first]) == pyrage.decrypt(out, [second]) == b"both"
    for empty in ("# only a comment\n\n", ""):
        with pytest.raises(InvalidParameterError, match="holds no key"):
            age_decrypt(sealed, identities=empty)
    with pytest.raises(FileNotFoundError):
        age_decrypt(sealed, identities=tmp_path / "absent.txt")


@pytest.mark.parametrize(
    "text",
    [
        SPEC_RECIPIENT[:-1] + "q",  # bad checksum
        SPEC_RECIPIENT.upper()[:10] + SPEC_RECIPIENT[10:],  # mixed case
        bech32_encode("age", bytes(31)),  # wrong length
        bech32_encode("agf", bytes(32)),  # wrong type
        SPEC_IDENTITY,  # an identity where a recipient belongs
    ],
)
def test_bad_recipient_strings(text: str) -> None:
    with pytest.raises(FormatError):
        age.parse_recipient(text)


def test_bad_identity_strings() -> None:
    for text in (SPEC_RECIPIENT, SPEC_IDENTITY[:-1] + "Q", bech32_encode("age-secret-key-", b"x")):
        with pytest.raises(FormatError):
            age.parse_identity(text)


def test_scrypt_objects_hide_the_passphrase() -> None:
    assert "hunter2" not in repr(age.ScryptRecipient("hunter2", work_factor=10))
    assert "hunter2" not in repr(age.ScryptIdentity("hunter2"))
    with pytest.raises(InvalidParameterError):
        age.ScryptRecipient("", work_factor=10)


def test_keys_are_taken_as_the_envelope_takes_them() -> None:
    """One stanza module serves age and the envelope: one key or a list, typed errors."""
    me = age.X25519Identity.generate()
    blob = age_encrypt(b"one", recipients=str(me.recipient))  # one, not a list
    assert age_decrypt(blob, identities=me.to_string()) == b"one"
    with pytest.raises(InvalidParameterError, match="a passphrase must be str or bytes"):
        age.ScryptRecipient(1234, work_factor=10)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"an identity must be .* not int"):
        age_decrypt(blob, identities=[1])  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError, match="at least one recipient"):
        age_encrypt(b"x", recipients=[])


# ---------------------------------------------------------------------------------------
# Interop with pyrage (rage)
# ---------------------------------------------------------------------------------------

SIZES = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK - 1, 2 * CHUNK, 2 * CHUNK + 1]


@pytest.mark.parametrize("size", SIZES)
def test_pyrage_to_us(ident: pyrage.x25519.Identity, size: int) -> None:
    data = _data(size, size)
    ct = pyrage.encrypt(data, [ident.to_public()])
    assert age_decrypt(ct, identities=[str(ident)]) == data
    # streaming, in odd pieces, gives the same
    dec = age.AgeDecryptor(identities=[age.X25519Identity.parse(str(ident))])
    assert _feed(dec, ct, 7919) == (data, None)


@pytest.mark.parametrize("size", SIZES)
def test_us_to_pyrage(ident: pyrage.x25519.Identity, size: int) -> None:
    data = _data(size, size)
    ct = age_encrypt(data, recipients=[str(ident.to_public())])
    assert pyrage.decrypt(ct, [ident]) == data
    # exact ciphertext size: header + nonce + chunks (the final chunk may be full, never empty
    # unless the payload is)
    chunks = max(1, -(-size // CHUNK))
    dec = age.AgeDecryptor(identities=[str(ident)])
    assert dec.update(ct) + dec.finalize() == data
    assert dec.header is not None
    assert len(ct) == dec.header.size + 16 + size + 16 * chunks


def test_several_recipients_both_ways() -> None:
    ids = [pyrage.x25519.Identity.generate() for _ in range(3)]
    mine = age.X25519Identity.generate()
    data = _data(CHUNK + 5, 1)
    ct = age_encrypt(data, recipients=[*(str(i.to_public()) for i in ids), mine.recipient])
    for i in ids:
        assert pyrage.decrypt(ct, [i]) == data
        assert age_decrypt(ct, identities=[str(i)]) == data
    assert age_decrypt(ct, identities=[mine]) == data
    ct2 = pyrage.encrypt(data, [i.to_public() for i in ids])
    for i in ids:
        assert age_decrypt(ct2, identities=[age.X25519Identity.generate(), str(i)]) == data


@pytest.mark.parametrize("size", [0, 100, CHUNK])
def test_armor_both_ways(ident: pyrage.x25519.Identity, size: int) -> None:
    data = _data(size, 3)
    ct = age_encrypt(data, recipients=[str(ident.to_public())], armor=True)
    assert ct.startswith(b"-----BEGIN AGE ENCRYPTED FILE-----\n")
    assert ct.endswith(b"-----END AGE ENCRYPTED FILE-----\n")
    assert pyrage.decrypt(ct, [ident]) == data
    theirs = pyrage.encrypt(data, [ident.to_public()], armored=True)
    assert age_decrypt(theirs, identities=[str(ident)]) == data
    # our armor of their binary file is byte-identical to their armor of it
    binary = dearmor(theirs)
    assert armor(binary) == theirs


def test_multi_megabyte_both_ways(ident: pyrage.x25519.Identity) -> None:
    data = _data(5 * 1024 * 1024 + 17, 4)
    ct = pyrage.encrypt(data, [ident.to_public()])
    assert age_decrypt(ct, identities=[str(ident)]) == data
    ours = age_encrypt(data, recipients=[str(ident.to_public())])
    assert pyrage.decrypt(ours, [ident]) == data


def test_passphrase_us_to_pyrage() -> None:
    data = _data(CHUNK + 1, 5)
    ct = age_encrypt(data, passphrase="correct horse", work_factor=10)
    assert b"\n-> scrypt " in ct and b" 10\n" in ct
    assert pyrage.passphrase.decrypt(ct, "correct horse") == data
    assert age_decrypt(ct, passphrase="correct horse") == data
    armored = age_encrypt(data, passphrase="correct horse", armor=True, work_factor=10)
    assert pyrage.passphrase.decrypt(armored, "correct horse") == data


def test_passphrase_pyrage_to_us() -> None:
    # rage picks its own work factor (about 2**20 here, some seconds): one test only.
    start = time.monotonic()
    ct = pyrage.passphrase.encrypt(b"secret words", "correct horse")
    assert age_decrypt(ct, passphrase="correct horse") == b"secret words"
    with pytest.raises(LimitExceededError):
        age_decrypt(ct, passphrase="correct horse", max_work_factor=12)
    assert time.monotonic() - start < 30


# ---------------------------------------------------------------------------------------
# Post-quantum hybrid (mlkem768x25519)
# ---------------------------------------------------------------------------------------


def test_pq_spec_identity_gives_spec_recipient() -> None:
    identity = age.MLKEM768X25519Identity.parse(SPEC_PQ_IDENTITY)
    assert str(identity.recipient) == SPEC_PQ_RECIPIENT
    assert identity.to_string() == SPEC_PQ_IDENTITY
    assert isinstance(age.parse_recipient(SPEC_PQ_RECIPIENT), age.MLKEM768X25519Recipient)
    assert SPEC_PQ_IDENTITY not in repr(identity)


def test_pq_spec_stanza_unwraps() -> None:
    identity = age.parse_identity(SPEC_PQ_IDENTITY)
    stanza = age.Stanza(("mlkem768x25519", SPEC_PQ_ENC), base64.b64decode(SPEC_PQ_BODY + "="))
    file_key = identity.unwrap([stanza])
    assert file_key is not None and len(file_key) == 16
    # a different identity does not match; a flipped body bit does not open
    assert age.MLKEM768X25519Identity.generate().unwrap([stanza]) is None
    body = bytearray(stanza.body)
    body[0] ^= 1
    assert identity.unwrap([age.Stanza(stanza.args, bytes(body))]) is None
    with pytest.raises(FormatError):  # the body must be exactly 32 bytes
        identity.unwrap([age.Stanza(stanza.args, stanza.body + b"\0")])
    with pytest.raises(FormatError):  # two arguments exactly
        identity.unwrap([age.Stanza((*stanza.args, "x"), stanza.body)])


def test_pq_round_trip_and_no_mixing() -> None:
    a, b = age.MLKEM768X25519Identity.generate(), age.MLKEM768X25519Identity.generate()
    data = _data(CHUNK + 3, 6)
    ct = age_encrypt(data, recipients=[a.recipient, str(b.recipient)])
    assert ct.count(b"\n-> mlkem768x25519 ") == 2
    assert age_decrypt(ct, identities=[b.to_string()]) == data
    assert age_decrypt(ct, identities=[a]) == data
    with pytest.raises(UnknownKeyError):
        age_decrypt(ct, identities=[age.X25519Identity.generate()])
    # refused when made (the rule of plugins' labels, check_labels), before any header
    classic = age.X25519Identity.generate().recipient
    with pytest.raises(InvalidParameterError, match="label sets differ"):
        age.AgeEncryptor(recipients=[a.recipient, classic])
    # a recipient's labels are those of the stanzas it writes, whatever its class: a
    # subclass (refused when made) or an object wrapping for a post-quantum recipient
    for pq in (_LoggedPQ(a.recipient.public_bytes()), _WrapsFor(a.recipient)):
        with pytest.raises(InvalidParameterError, match="label sets differ"):
            age_encrypt(data, recipients=[pq, classic])
        with pytest.raises(InvalidParameterError, match="label sets differ"):
            age_encrypt(data, recipients=[classic, pq])
    assert age_decrypt(age_encrypt(data, recipients=[_WrapsFor(a.recipient)]), identities=[a])
    with pytest.raises(InvalidParameterError, match="label sets differ"):
        age.AgeEncryptor(recipients=[_LoggedPQ(a.recipient.public_bytes()), classic])


class _LoggedPQ(age.MLKEM768X25519Recipient):
    """A user's subclass of a post-quantum recipient (e.g. one that logs)."""


class _WrapsFor:
    """A recipient of no age class that wraps for another (e.g. one that caches)."""

    def __init__(self, inner: age.Recipient) -> None:
        self.inner = inner

    def wrap(self, file_key: bytes) -> list[age.Stanza]:
        return self.inner.wrap(file_key)


# ---------------------------------------------------------------------------------------
# Strict header parsing
# ---------------------------------------------------------------------------------------


def _header_and_rest(ct: bytes) -> tuple[bytes, bytes]:
    end = ct.index(b"\n---") + 1
    end = ct.index(b"\n", end) + 1
    return ct[:end], ct[end:]


def _encrypted(identity: age.X25519Identity, data: bytes = b"hello") -> bytes:
    return age_encrypt(data, recipients=[identity.recipient])


def test_header_shape_is_canonical() -> None:
    me = age.X25519Identity.generate()
    header, _ = _header_and_rest(_encrypted(me))
    lines = header.split(b"\n")
    assert lines[0] == b"age-encryption.org/v1"
    assert lines[1].startswith(b"-> X25519 ") and len(lines[1].split(b" ")[2]) == 43
    assert len(lines[2]) == 43  # 32-byte body: one short line
    assert lines[3].startswith(b"--- ") and len(lines[3]) == 47
    parsed = age.parse_header(header)
    assert parsed is not None and parsed.size == len(header)
    assert [s.kind for s in parsed.stanzas] == ["X25519"]
    # incomplete headers need more bytes
    for cut in (0, 5, 30, len(header) - 1):
        assert age.parse_header(header[:cut]) is None


def test_stanza_body_wrapping() -> None:
    for size in (0, 47, 48, 49, 96):
        stanza = age.Stanza(("t", "a"), _data(size))
        lines = _encode_stanza(stanza).split(b"\n")[1:-1]
        assert all(len(x) == 64 for x in lines[:-1]) and len(lines[-1]) < 64
        text = b"age-encryption.org/v1\n" + _encode_stanza(stanza) + b"--- " + b"A" * 43 + b"\n"
        parsed = age.parse_header(text)
        assert parsed is not None and parsed.stanzas[0] == stanza


def _mutate_header(header: bytes, old: bytes, new: bytes) -> bytes:
    assert old in header
    return header.replace(old, new, 1)


BAD_HEADERS: list[tuple[str, bytes]] = [
    ("not age", b"hello world\n"),
    ("crlf version", b"age-encryption.org/v1\r\n-> a\n\n--- " + b"A" * 43 + b"\n"),
    ("no stanza", b"age-encryption.org/v1\n--- " + b"A" * 43 + b"\n"),
    ("padding in body", b"age-encryption.org/v1\n-> a\nAA==\n--- " + b"A" * 43 + b"\n"),
    ("non-canonical body", b"age-encryption.org/v1\n-> a\nAB\n--- " + b"A" * 43 + b"\n"),
    (
        "missing final line",
        b"age-encryption.org/v1\n-> a\n" + b"A" * 64 + b"\n--- " + b"A" * 43 + b"\n",
    ),
    (
        "long body line",
        b"age-encryption.org/v1\n-> a\n" + b"A" * 68 + b"\n\n--- " + b"A" * 43 + b"\n",
    ),
    ("missing body", b"age-encryption.org/v1\n-> a\n--- " + b"A" * 43 + b"\n"),
    ("two short lines", b"age-encryption.org/v1\n-> a\nAAAA\nAAAA\n--- " + b"A" * 43 + b"\n"),
    ("empty argument", b"age-encryption.org/v1\n-> a  b\n\n--- " + b"A" * 43 + b"\n"),
    ("trailing space", b"age-encryption.org/v1\n-> a \n\n--- " + b"A" * 43 + b"\n"),
    ("no arguments", b"age-encryption.org/v1\n->\n\n--- " + b"A" * 43 + b"\n"),
    ("bad start", b"age-encryption.org/v1\n=> a\n\n--- " + b"A" * 43 + b"\n"),
    ("non-ascii arg", b"age-encryption.org/v1\n-> a\xc3\xa9\n\n--- " + b"A" * 43 + b"\n"),
    ("short mac", b"age-encryption.org/v1\n-> a\n\n--- " + b"A" * 42 + b"\n"),
    ("mac no space", b"age-encryption.org/v1\n-> a\n\n---" + b"A" * 43 + b"\n"),
    ("mac trailing space", b"age-encryption.org/v1\n-> a\n\n--- " + b"A" * 43 + b" \n"),
    ("mac not canonical", b"age-encryption.org/v1\n-> a\n\n--- " + b"A" * 42 + b"B\n"),
]


@pytest.mark.parametrize(("name", "header"), BAD_HEADERS, ids=[n for n, _ in BAD_HEADERS])
def test_bad_headers_are_format_errors(name: str, header: bytes) -> None:
    with pytest.raises(FormatError):
        age.parse_header(header)
    dec = age.AgeDecryptor(identities=[age.X25519Identity.generate()])
    with pytest.raises(FormatError):
        dec.update(header + bytes(64))
    assert dec.state.value == "broken"


def test_unsupported_version() -> None:
    with pytest.raises(UnsupportedFormatError):
        age.parse_header(b"age-encryption.org/v2\n-> a\n\n--- " + b"A" * 43 + b"\n")


def test_header_size_cap() -> None:
    big = b"age-encryption.org/v1\n" + b"-> a\n" + (b"A" * 64 + b"\n") * 40
    assert age.parse_header(big, max_size=1 << 20) is None
    with pytest.raises(FormatError):
        age.parse_header(big, max_size=1000)
    dec = age.AgeDecryptor(identities=[age.X25519Identity.generate()], max_header_size=1000)
    with pytest.raises(FormatError):
        dec.update(big)


def test_x25519_stanza_rules() -> None:
    me = age.X25519Identity.generate()
    ct = _encrypted(me)
    header, rest = _header_and_rest(ct)
    share = header.split(b"\n")[1].split(b" ")[2]
    cases = [
        _mutate_header(header, share, share + b" extra"),  # three arguments
        _mutate_header(header, share, share[:-2]),  # short share
        _mutate_header(header, share, share[:-1] + b"B" if share[-1:] != b"B" else b"C"),
    ]
    for bad in cases:
        with pytest.raises(FormatError):
            age_decrypt(bad + rest, identities=[me])
    # low-order ephemeral share (all-zero shared secret) must abort
    low = _mutate_header(header, share, _b64(bytes(32)).encode())
    with pytest.raises(FormatError):
        age_decrypt(low + rest, identities=[me])
    # an unknown stanza type is ignored, a lowercase type is another type
    other = _mutate_header(header, b"-> X25519 ", b"-> x25519 ")
    with pytest.raises(UnknownKeyError):
        age_decrypt(other + rest, identities=[me])


def test_scrypt_rules() -> None:
    data = b"passphrase data"
    ct = age_encrypt(data, passphrase="pw", work_factor=10)
    header, rest = _header_and_rest(ct)
    args = header.split(b"\n")[1]
    assert age_decrypt(ct, passphrase="pw") == data
    # wrong passphrase: no identity matched
    with pytest.raises(UnknownKeyError, match="passphrase"):
        age_decrypt(ct, passphrase="wrong")
    # the work factor cap is configurable and typed
    with pytest.raises(LimitExceededError):
        age_decrypt(ct, passphrase="pw", max_work_factor=9)
    for bad_wf in (b"010", b"+10", b"0xa", b"10a", b"-10", b"0"):
        bad = _mutate_header(header, args, args[:-2] + bad_wf)
        with pytest.raises(FormatError):
            age_decrypt(bad + rest, passphrase="pw")
    # Past Python's 4300-digit int() limit: still over the cap, not a bare ValueError.
    for huge_wf in (b"9" * 4301, b"1" + b"0" * 20000, b"23", b"100"):
        bad = _mutate_header(header, args, args[:-2] + huge_wf)
        with pytest.raises(LimitExceededError, match="over the limit"):
            age_decrypt(bad + rest, passphrase="pw")
    # an scrypt stanza must stand alone
    extra = _encode_stanza(age.Stanza(("X25519", _b64(bytes(range(32)))), bytes(32)))
    mixed = header.replace(b"\n---", b"\n" + extra[:-1] + b"\n---", 1)
    assert age.parse_header(mixed) is not None
    with pytest.raises(FormatError, match="only stanza"):
        age_decrypt(mixed + rest, passphrase="pw")
    with pytest.raises(FormatError, match="only stanza"):
        age_decrypt(mixed + rest, identities=[age.X25519Identity.generate()])
    with pytest.raises(InvalidParameterError):
        age_encrypt(data, recipients=[age.X25519Identity.generate().recipient], passphrase="pw")


class _Writes:
    """A Recipient (the protocol allows any) that writes the stanzas it was given."""

    def __init__(self, *stanzas: age.Stanza) -> None:
        self.stanzas = list(stanzas)

    def wrap(self, file_key: bytes) -> list[age.Stanza]:
        return self.stanzas


@pytest.mark.parametrize(
    "recipients",
    [
        pytest.param([_Writes()], id="no-stanza"),
        pytest.param(
            [
                age.X25519Identity.generate().recipient,
                _Writes(*age.ScryptRecipient("pw", work_factor=8).wrap(bytes(16))),
            ],
            id="scrypt-not-alone",
        ),
    ],
)
def test_an_age_header_is_written_only_if_it_reads(recipients: list[object]) -> None:
    """The header writer (encrypting and re-keying alike) refuses what every reader
    refuses: no stanza, or an scrypt stanza beside others. Before, encrypting checked the
    recipients' types only, so a Recipient writing no stanza, or an scrypt one, made a
    file nobody could open (FormatError)."""
    with pytest.raises(InvalidParameterError, match=r"only stanza|at least one stanza"):
        age_encrypt(b"data", recipients=recipients)


def _filler(header_size: int, *others: age.Stanza) -> age.Stanza:
    """A stanza (of a type readers skip) that makes the header of ``others`` and it
    exactly ``header_size`` bytes: its argument is padded to fit."""
    fixed = len(age.VERSION_LINE) + 1 + 48  # the version line, "--- " + MAC + LF
    fixed += sum(len(_encode_stanza(s)) for s in others)
    short = age.Stanza(("filler", "a"), bytes(600_000))
    pad = header_size - fixed - len(_encode_stanza(short))
    return age.Stanza(("filler", "a" * (1 + pad)), short.body)


@pytest.mark.parametrize("over", [0, 1], ids=["at-the-cap", "one-byte-over"])
def test_the_age_writer_refuses_a_header_over_the_readers_default_cap(over: int) -> None:
    """A plugin's or a custom recipient's stanzas, or a rekey adding recipients, make a
    header the writer refuses (InvalidParameterError) exactly when the default reader
    would (FormatError past DEFAULT_MAX_HEADER_SIZE). Before, it was written."""
    me = age.X25519Identity.generate()
    mine = me.recipient.wrap(bytes(16))[0]  # every X25519 stanza has this length
    cap = age.DEFAULT_MAX_HEADER_SIZE
    big = _Writes(_filler(cap + over, mine))
    if over:
        with pytest.raises(InvalidParameterError, match=r"cannot be written.*longer than"):
            age_encrypt(b"data", recipients=[me.recipient, big])
        return
    blob = age_encrypt(b"data", recipients=[me.recipient, big])
    assert age.parse_header(blob).size == cap  # type: ignore[union-attr]
    assert age_decrypt(blob, identities=[me]) == b"data"
    # one stanza more (re-keying) is over the cap: refused, not written
    with pytest.raises(InvalidParameterError, match=r"cannot be written.*longer than"):
        age.rekey_header(blob, identities=[me], add=age.X25519Identity.generate().recipient)
    smaller = _Writes(_filler(cap - len(_encode_stanza(mine)), mine))
    blob = age_encrypt(b"data", recipients=[me.recipient, smaller])
    header, _ = age.rekey_header(blob, identities=[me], add=age.X25519Identity.generate().recipient)
    assert len(header) == cap


# ---------------------------------------------------------------------------------------
# Typed failures
# ---------------------------------------------------------------------------------------


def test_no_identity_matches() -> None:
    ct = _encrypted(age.X25519Identity.generate())
    with pytest.raises(UnknownKeyError):
        age_decrypt(ct, identities=[age.X25519Identity.generate()])
    with pytest.raises(UnknownKeyError):
        age_decrypt(ct, passphrase="pw")
    with pytest.raises(InvalidParameterError):
        age_decrypt(ct)


def test_header_mac_failure() -> None:
    me = age.X25519Identity.generate()
    header, rest = _header_and_rest(_encrypted(me))
    mac_line = header.split(b"\n")[3]
    assert mac_line.startswith(b"--- ")
    flipped = mac_line[:10] + (b"A" if mac_line[10:11] != b"A" else b"B") + mac_line[11:]
    with pytest.raises(AuthenticationError):
        age_decrypt(header.replace(mac_line, flipped) + rest, identities=[me])
    # a grease stanza inserted after the fact breaks the MAC, not the parse
    grease = header.replace(b"\n---", b"\n-> grease x\nAAAA\n---")
    with pytest.raises(AuthenticationError):
        age_decrypt(grease + rest, identities=[me])


def _three_chunks(me: age.X25519Identity) -> tuple[bytes, bytes, int]:
    data = _data(2 * CHUNK + 100, 9)
    ct = age_encrypt(data, recipients=[me.recipient])
    header, _ = _header_and_rest(ct)
    return data, ct, len(header) + 16


def test_payload_tampering_and_release() -> None:
    me = age.X25519Identity.generate()
    data, ct, start = _three_chunks(me)
    chunk_ct = CHUNK + 16
    for index in range(3):
        bad = bytearray(ct)
        bad[start + index * chunk_ct + 5] ^= 0x40
        dec = age.AgeDecryptor(identities=[me])
        released, err = _feed(dec, bytes(bad), 1000)
        assert isinstance(err, AuthenticationError)
        # only chunks that verified were released, and all of them
        assert released == data[: index * CHUNK]
        with pytest.raises(BrokenTransformError):
            dec.update(b"x")


def test_chunks_are_held_until_verified() -> None:
    me = age.X25519Identity.generate()
    data, ct, start = _three_chunks(me)
    dec = age.AgeDecryptor(identities=[me])
    assert dec.update(ct[: start + CHUNK + 16]) == b""  # chunk 0 might be final: held
    assert dec.update(ct[start + CHUNK + 16 : start + CHUNK + 17]) == data[:CHUNK]
    assert dec.update(ct[start + CHUNK + 17 :]) == data[CHUNK : 2 * CHUNK]
    assert dec.finalize() == data[2 * CHUNK :]


def test_truncation() -> None:
    me = age.X25519Identity.generate()
    data, ct, start = _three_chunks(me)
    chunk_ct = CHUNK + 16
    # whole chunks missing at the end
    for keep in (1, 2):
        released, err = _feed(
            age.AgeDecryptor(identities=[me]), ct[: start + keep * chunk_ct], 4096
        )
        assert isinstance(err, TruncatedStreamError), err
        assert released == data[: (keep - 1) * CHUNK]
    # no chunk at all, no nonce, half a header
    for cut in (start, start - 3, start - 30):
        with pytest.raises(TruncatedStreamError):
            age_decrypt(ct[:cut], identities=[me])
    # cut inside the final chunk: it cannot verify
    with pytest.raises(AuthenticationError):
        age_decrypt(ct[:-1], identities=[me])
    # trailing data after the final chunk
    with pytest.raises(AuthenticationError):
        age_decrypt(ct + b"\0", identities=[me])


def test_last_chunk_rules() -> None:
    """Crafted payloads: an empty final chunk only for an empty payload; full final allowed."""
    file_key = bytes(range(16))
    me = age.X25519Identity.generate()
    header = _build_header(file_key, me.recipient.wrap(file_key))
    nonce = bytes(16)
    codec = _payload_codec(file_key, nonce)

    def seal(index: int, plain: bytes, final: bool) -> bytes:
        out = bytearray(len(plain) + 16)
        codec.seal_segment(index, plain, final, memoryview(out))
        return bytes(out)

    full = _data(CHUNK, 2)
    ok_full_final = header + nonce + seal(0, full, True)
    assert age_decrypt(ok_full_final, identities=[me]) == full
    empty_after_data = header + nonce + seal(0, full, False) + seal(1, b"", True)
    with pytest.raises(FormatError, match="empty chunk"):
        age_decrypt(empty_after_data, identities=[me])
    assert age_decrypt(header + nonce + seal(0, b"", True), identities=[me]) == b""
    # a short chunk that is not marked final, followed by more data
    short_not_final = header + nonce + seal(0, b"abc", False) + seal(1, b"def", True)
    with pytest.raises(AuthenticationError):
        age_decrypt(short_not_final, identities=[me])
    # two final chunks
    two_final = header + nonce + seal(0, full, True) + seal(1, b"x", True)
    with pytest.raises(AuthenticationError):
        age_decrypt(two_final, identities=[me])


def test_any_chunking_gives_the_same_plaintext() -> None:
    me = age.X25519Identity.generate()
    data = _data(3 * CHUNK, 11)
    rng = random.Random(5)
    enc = age.AgeEncryptor(recipients=[me.recipient])
    ct = b"".join(enc.update(p) for p in random_splits(data, rng, 40000)) + enc.finalize()
    for trial in range(3):
        dec = age.AgeDecryptor(identities=[me])
        pieces = random_splits(ct, random.Random(trial), 30000)
        assert b"".join(dec.update(p) for p in pieces) + dec.finalize() == data


def test_random_access_layout() -> None:
    me = age.X25519Identity.generate()
    data = _data(3 * CHUNK + 10, 12)
    ct = age_encrypt(data, recipients=[me.recipient])
    lay = age.layout(ct[:4096], len(ct), identities=[me])
    assert lay.plaintext_size == len(data)

    def read_at(offset: int, length: int) -> bytes:
        return ct[offset : offset + length]

    for start, stop in ((0, 10), (CHUNK - 3, CHUNK + 3), (2 * CHUNK, len(data)), (5, len(data))):
        assert lay.read(read_at, start, stop) == data[start:stop]


# ---------------------------------------------------------------------------------------
# Armor
# ---------------------------------------------------------------------------------------


def test_armor_streaming_round_trip() -> None:
    data = _data(1000, 13)
    rng = random.Random(1)
    enc = ArmorEncoder()
    text = b"".join(enc.update(p) for p in random_splits(data, rng)) + enc.finalize()
    assert text == armor(data)
    lines = text.split(b"\n")
    assert all(len(x) == 64 for x in lines[1:-3]) and 0 < len(lines[-3]) <= 64
    for trial in range(5):
        dec = ArmorDecoder()
        pieces = random_splits(text, random.Random(trial), 13)
        assert b"".join(dec.update(p) for p in pieces) + dec.finalize() == data


def test_armor_accepts_whitespace_around_and_crlf() -> None:
    data = _data(200, 14)
    text = armor(data)
    assert dearmor(b" \r\n\t" + text + b"\n\n  ") == data
    assert dearmor(text.replace(b"\n", b"\r\n")) == data
    assert dearmor(text[:-1]) == data  # the END line may end the input


def _bad_armors() -> list[tuple[str, bytes]]:
    good = armor(_data(100, 15))  # 136 base64 characters: lines of 64, 64 and 8 ("==")
    begin, l0, l1, l2, end = good.split(b"\n")[:5]
    assert len(l0) == len(l1) == 64 and len(l2) == 8 and l2.endswith(b"==")

    def lines(*parts: bytes) -> bytes:
        return b"".join(p + b"\n" for p in parts)

    return [
        ("garbage before", b"x" + good),
        ("garbage after", good + b"x"),
        ("lowercase label", good.replace(b"AGE ENCRYPTED", b"age encrypted")),
        ("wrong label", good.replace(b"AGE ENCRYPTED FILE", b"PGP MESSAGE")),
        ("no end", lines(begin, l0, l1, l2)),
        ("long line", lines(begin, l0 + l1[:4], l1[4:], l2, end)),
        ("short middle line", lines(begin, l0[:60], l0[60:] + l1[:60], l1[60:] + l2, end)),
        ("no padding", lines(begin, l0, l1, l2.rstrip(b"="), end)),
        ("empty line", lines(begin, l0, b"", l1, l2, end)),
        ("empty last line", lines(begin, l0, l1, l2, b"", end)),
        ("space at line start", lines(begin, b" " + l0, l1, l2, end)),
        ("space at line end", lines(begin, l0 + b" ", l1, l2, end)),
        ("header line", lines(begin, b"Version: 1", b"", l0, l1, l2, end)),
        ("non canonical", lines(begin, l0, l1, l2[:1] + b"B==" + l2[4:], end)),
        ("bad char", lines(begin, l0[:-1] + b"*", l1, l2, end)),
        ("mixed eol", begin + b"\r\n" + lines(l0, l1, l2, end)),
        ("pgp checksum", lines(begin, l0, l1, l2, b"=AAAA", end)),
    ]


@pytest.mark.parametrize(("name", "text"), _bad_armors(), ids=[n for n, _ in _bad_armors()])
def test_bad_armor_is_a_format_error(name: str, text: bytes) -> None:
    with pytest.raises(FormatError):
        dearmor(text)


def test_bad_armor_through_decrypt_bytes() -> None:
    me = age.X25519Identity.generate()
    ct = age_encrypt(b"hi", recipients=[me.recipient], armor=True)
    assert age_decrypt(ct, identities=[me]) == b"hi"
    with pytest.raises(FormatError):
        age_decrypt(ct + b"junk", identities=[me])


# ---------------------------------------------------------------------------------------
# The age testkit (C2SP/CCTV age/testdata, vendored in tests/vectors/age-testkit)
# ---------------------------------------------------------------------------------------


#: Vectors whose file ends inside the header: we say "truncated", the testkit "header failure".
_ENDS_IN_HEADER = {"empty", "armor_empty", "stream_no_nonce", "stream_short_nonce"}
#: Vectors where the reference implementation releases a chunk that verified but stands in
#: the wrong place (a non-final chunk at the end, a final chunk with data after it) before
#: failing. We release a chunk only once its place is known right, so we release a prefix.
_HOLDS_BACK = {
    "armor_garbage_encoded",
    "stream_no_final_full",
    "stream_no_final_two_chunks_full",
    "stream_trailing_garbage_long",
    "stream_trailing_garbage_short",
    "stream_two_final_chunks",
    "stream_two_final_chunks_full",
    "stream_two_final_chunks_second",
}


def _chunkwise_release(body: bytes, file_key: bytes) -> bytes:
    """What a chunk-at-a-time reader releases: each chunk that verifies under either flag,
    up to the first failure or the first final chunk."""
    header = age.parse_header(body)
    assert header is not None
    start = header.size + 16
    codec = _payload_codec(file_key, body[header.size : start])
    out = bytearray()
    for index, pos in enumerate(range(start, len(body), CHUNK + 16)):
        chunk = body[pos : pos + CHUNK + 16]
        plain = bytearray(max(len(chunk) - 16, 0))
        for final in (False, True):
            try:
                codec.open_segment(index, chunk, final, memoryview(plain))
                break
            except StreamCryptError:
                continue
        else:
            break
        out += plain
        if final:
            break
    return bytes(out)


def _run_testkit_vector(path: Path) -> None:
    raw = path.read_bytes()
    head, _, body = raw.partition(b"\n\n")
    meta: dict[str, list[str]] = {}
    for line in head.decode().splitlines():
        key, _, value = line.partition(": ")
        meta.setdefault(key, []).append(value)
    expect = meta["expect"][0]
    if meta.get("compressed") == ["zlib"]:
        body = zlib.decompress(body)
    identities: list[age.IdentityLike] = list(meta.get("identity", []))
    identities += [age.ScryptIdentity(p) for p in meta.get("passphrase", [])]
    identities = identities or [age.X25519Identity.generate()]  # "empty" names none
    if meta.get("armored") == ["yes"]:
        # The streaming decoder, fed one byte at a time, must agree with the one-shot call.
        one_by_one = ArmorDecoder()
        try:
            body_bytewise = b"".join(one_by_one.update(body[i : i + 1]) for i in range(len(body)))
            body_bytewise += one_by_one.finalize()
        except FormatError:
            body_bytewise = None
        try:
            body = dearmor(body)
        except FormatError:
            assert expect == "armor failure", path.name
            assert body_bytewise is None, path.name
            return
        assert body_bytewise == body, path.name
    assert expect != "armor failure", path.name
    released, err = _feed(age.AgeDecryptor(identities=identities), body, 4096)
    again, err_again = _feed(age.AgeDecryptor(identities=identities), body, 997)
    assert (again, type(err_again)) == (released, type(err)), path.name
    _check_random_access(path.name, body, identities, expect, released, err)
    if expect == "success":
        assert err is None, (path.name, err)
    elif expect == "no match":
        assert isinstance(err, UnknownKeyError), (path.name, err)
    elif expect == "HMAC failure":
        assert isinstance(err, AuthenticationError), (path.name, err)
    elif expect == "header failure":
        ok: tuple[type[Exception], ...] = (FormatError,)
        if path.name in ("scrypt_work_factor_23", "scrypt_work_factor_overflow"):
            ok = (LimitExceededError,)
        elif path.name in _ENDS_IN_HEADER:
            ok = (TruncatedStreamError,)
        assert isinstance(err, ok), (path.name, err)
        assert released == b""
    elif expect == "payload failure":
        assert isinstance(err, AuthenticationError | TruncatedStreamError | FormatError), (
            path.name,
            err,
        )
    else:  # pragma: no cover - a new kind of expectation
        raise AssertionError(f"{path.name}: unknown expectation {expect!r}")
    if "payload" not in meta:
        return
    if path.name in _HOLDS_BACK:
        reference = _chunkwise_release(body, bytes.fromhex(meta["file key"][0]))
        assert hashlib.sha256(reference).hexdigest() == meta["payload"][0], path.name
        assert reference.startswith(released) and len(released) < len(reference), path.name
    else:
        assert hashlib.sha256(released).hexdigest() == meta["payload"][0], path.name


def _check_random_access(
    name: str,
    body: bytes,
    identities: list[age.IdentityLike],
    expect: str,
    released: bytes,
    err: BaseException | None,
) -> None:
    """The random-access reader (``age.layout``) reads a valid file whole and fails on an
    invalid one: with the streaming reader's error where the header fails, with some typed
    error (never a wrong plaintext) where the payload does."""
    try:
        lay = age.layout(body, len(body), identities=identities)
        lay.verify_end(lambda offset, length: body[offset : offset + length])
        whole = lay.read(lambda offset, length: body[offset : offset + length], 0, len(body))
    except StreamCryptError as exc:
        assert expect != "success", (name, exc)
        if expect != "payload failure":
            assert type(exc) is type(err), (name, exc, err)
        return
    assert expect == "success", name
    assert whole == released, name


def test_age_testkit() -> None:
    files = sorted(vector_path("age-testkit").iterdir())
    assert len(files) == 143, "tests/vectors/age-testkit holds the 143 files of CCTV 1e3d2860"
    ran = 0
    for path in files:
        _run_testkit_vector(path)
        ran += 1
    record_vectors("age testkit (C2SP/CCTV age/testdata)", ran, len(files))


def test_bad_header_fails_before_it_is_complete() -> None:
    dec = age.AgeDecryptor(identities=[age.X25519Identity.generate()])
    assert dec.update(b"age-encryption.org/v1\n-> X25519 abc\n") == b""
    with pytest.raises(FormatError):
        dec.update(b"not base64!\n")
    with pytest.raises(FormatError):
        age.AgeDecryptor(passphrase="x").update(b"age-encryption.org/v1\n-> a\n" + b"A" * 65)


def test_streaming_armor_pipeline_both_ways(ident: pyrage.x25519.Identity) -> None:
    data = _data(2 * CHUNK + 7, 16)
    rng = random.Random(7)
    enc, arm = age.AgeEncryptor(recipients=[str(ident.to_public())]), ArmorEncoder()
    text = b"".join(arm.update(enc.update(p)) for p in random_splits(data, rng, 20000))
    text += arm.update(enc.finalize()) + arm.finalize()
    assert pyrage.decrypt(text, [ident]) == data
    theirs = pyrage.encrypt(data, [ident.to_public()], armored=True)
    dearm, dec = ArmorDecoder(), age.AgeDecryptor(identities=[str(ident)])
    out = b"".join(dec.update(dearm.update(p)) for p in random_splits(theirs, rng, 5000))
    out += dec.update(dearm.finalize()) + dec.finalize()
    assert out == data


def _age_secret_holders() -> list[tuple[object, bytes]]:
    """Every age type holding a secret, with the secret's bytes."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    x = age.X25519Identity.generate()
    pq = age.MLKEM768X25519Identity.generate()
    ed = age.SshEd25519Identity.generate()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    d = key.private_numbers().d
    return [
        (x, x.secret_key().secret_bytes()),
        (pq, bech32_decode(pq.to_string())[1]),
        (ed, ed._private.private_bytes_raw()),
        (age.SshRsaIdentity(key), d.to_bytes((d.bit_length() + 7) // 8, "big")),
        (age.ScryptRecipient("hunter2-secret", work_factor=1), b"hunter2-secret"),
        (age.ScryptIdentity("hunter2-secret"), b"hunter2-secret"),
    ]


def test_secrets_stay_out_of_repr_str_and_pickle() -> None:
    import copy
    import pickle

    for holder, secret in _age_secret_holders():
        for text in (repr(holder), str(holder)):
            assert secret.hex() not in text and secret.decode("latin-1") not in text
            assert str(int.from_bytes(secret, "big")) not in text
        with pytest.raises(TypeError, match="not picklable"):
            pickle.dumps(holder)
        with pytest.raises(TypeError, match="not picklable"):
            copy.copy(holder)


def test_random_access_keeps_the_readers_caps() -> None:
    """The descriptor's layout takes every reading option, as its decryptor does: a cap
    on the scrypt work factor given to read_range holds there too."""
    from streamcrypt.codecs import FormatOptions

    sealed = age_encrypt(b"capped", passphrase="pw", work_factor=2)

    def read_at(offset: int, length: int) -> bytes:
        return sealed[offset : offset + length]

    fmt = age.FORMAT
    assert fmt.read_range(FormatOptions(passphrase="pw"), read_at, len(sealed), 0, 6) == b"capped"
    with pytest.raises(LimitExceededError):
        fmt.read_range(
            FormatOptions(passphrase="pw", max_work_factor=1), read_at, len(sealed), 0, 6
        )


def test_chunk_nonce_is_uint88_index_and_flag_up_to_the_limit() -> None:
    """The batch loop writes chunk i's nonce as uint88_be(i) || last, checked against the
    kernel called directly at indexes whose high bytes differ; past 2**64 chunks (the
    counter the loop writes) a typed LimitExceededError, not a struct error."""
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    key = bytes(range(32))
    codec = age.AgeCodec(key)
    plain = b"chunk"
    for index in (0, 1, 1 << 32, (1 << 56) + 5, (1 << 64) - 1):
        for final in (False, True):
            out = bytearray(len(plain) + 16)
            codec.seal_segment(index, plain, final, memoryview(out))
            nonce = index.to_bytes(11, "big") + bytes((final,))
            assert bytes(out) == ChaCha20Poly1305(key).encrypt(nonce, plain, None)
            back = bytearray(len(plain))
            codec.open_segment(index, bytes(out), final, memoryview(back))
            assert back == plain
    with pytest.raises(LimitExceededError):
        codec.seal_segment(1 << 64, plain, True, memoryview(bytearray(len(plain) + 16)))
