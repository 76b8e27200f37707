"""Noise handshake patterns as a table, and the protocol-name parser.

Every pattern of the Noise specification (revision 34) is written out once below in the
spec's own notation: pre-messages of the initiator and responder, then the messages,
which alternate starting with the initiator. PSK modifiers (``psk0``, ``psk1`` ... and
combinations such as ``psk0+psk2``) are applied to those tables at parse time: ``psk0``
puts a ``psk`` token at the start of the first message, ``pskN`` at the end of message N.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import FormatError, UnsupportedFormatError

#: Pattern name -> (initiator pre-message, responder pre-message, messages).
#: Messages alternate: the first is sent by the initiator (``->``), the next by the
#: responder (``<-``), and so on. Pre-messages hold at most ``s`` here.
PATTERNS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # one-way patterns (section 7.4)
    "N": ("", "s", ("e, es",)),
    "K": ("s", "s", ("e, es, ss",)),
    "X": ("", "s", ("e, es, s, ss",)),
    # fundamental interactive patterns (section 7.5)
    "NN": ("", "", ("e", "e, ee")),
    "NK": ("", "s", ("e, es", "e, ee")),
    "NX": ("", "", ("e", "e, ee, s, es")),
    "KN": ("s", "", ("e", "e, ee, se")),
    "KK": ("s", "s", ("e, es, ss", "e, ee, se")),
    "KX": ("s", "", ("e", "e, ee, se, s, es")),
    "XN": ("", "", ("e", "e, ee", "s, se")),
    "XK": ("", "s", ("e, es", "e, ee", "s, se")),
    "XX": ("", "", ("e", "e, ee, s, es", "s, se")),
    "IN": ("", "", ("e, s", "e, ee, se")),
    "IK": ("", "s", ("e, es, s, ss", "e, ee, se")),
    "IX": ("", "", ("e, s", "e, ee, se, s, es")),
    # deferred patterns (section 7.6 / 18)
    "NK1": ("", "s", ("e", "e, ee, es")),
    "NX1": ("", "", ("e", "e, ee, s", "es")),
    "X1N": ("", "", ("e", "e, ee", "s", "se")),
    "X1K": ("", "s", ("e, es", "e, ee", "s", "se")),
    "XK1": ("", "s", ("e", "e, ee, es", "s, se")),
    "X1K1": ("", "s", ("e", "e, ee, es", "s", "se")),
    "X1X": ("", "", ("e", "e, ee, s, es", "s", "se")),
    "XX1": ("", "", ("e", "e, ee, s", "es, s, se")),
    "X1X1": ("", "", ("e", "e, ee, s", "es, s", "se")),
    "K1N": ("s", "", ("e", "e, ee", "se")),
    "K1K": ("s", "s", ("e, es", "e, ee", "se")),
    "KK1": ("s", "s", ("e", "e, ee, se, es")),
    "K1K1": ("s", "s", ("e", "e, ee, es", "se")),
    "K1X": ("s", "", ("e", "e, ee, s, es", "se")),
    "KX1": ("s", "", ("e", "e, ee, se, s", "es")),
    "K1X1": ("s", "", ("e", "e, ee, s", "se, es")),
    "I1N": ("", "", ("e, s", "e, ee", "se")),
    "I1K": ("", "s", ("e, es, s", "e, ee", "se")),
    "IK1": ("", "s", ("e, s", "e, ee, se, es")),
    "I1K1": ("", "s", ("e, s", "e, ee, es", "se")),
    "I1X": ("", "", ("e, s", "e, ee, s, es", "se")),
    "IX1": ("", "", ("e, s", "e, ee, se, s", "es")),
    "I1X1": ("", "", ("e, s", "e, ee, s", "se, es")),
}

#: DH functions supported here, with their public-key length (DHLEN).
DHS: dict[str, int] = {"25519": 32}
#: Cipher functions supported here.
CIPHERS: tuple[str, ...] = ("ChaChaPoly", "AESGCM")
#: Hash functions supported here, with HASHLEN.
HASHES: dict[str, int] = {"SHA256": 32, "SHA512": 64, "BLAKE2s": 32, "BLAKE2b": 64}

_PSK = re.compile(r"psk(\d+)")
_TOKENS = frozenset({"e", "s", "ee", "es", "se", "ss", "psk"})


@dataclass(frozen=True, slots=True)
class HandshakePattern:
    """A handshake pattern with its modifiers applied.

    ``messages[i]`` is sent by the initiator when ``i`` is even, by the responder when odd.
    """

    name: str
    initiator_pre: tuple[str, ...]
    responder_pre: tuple[str, ...]
    messages: tuple[tuple[str, ...], ...]
    psk_count: int

    @property
    def one_way(self) -> bool:
        """True for N, K and X (and their PSK variants): only the initiator sends."""
        return len(self.messages) == 1

    @property
    def last_by_initiator(self) -> bool:
        """True when the initiator writes the last message (XX, one-way patterns): the
        responder's last read then proves the initiator holds this session's keys. When
        the responder writes last (NN, NK, IK, NNpsk0 ...), nothing the responder read is
        bound to its own ephemeral key, so a replayed first message reads as a fresh one
        until the initiator sends something under the final keys."""
        return len(self.messages) % 2 == 1

    def uses_local_static(self, initiator: bool) -> bool:
        """Whether the side ``initiator`` needs its own static key pair."""
        pre = self.initiator_pre if initiator else self.responder_pre
        if "s" in pre:
            return True
        own = 0 if initiator else 1
        mine = ("se" if initiator else "es", "ss")
        for i, message in enumerate(self.messages):
            if i % 2 == own and "s" in message:
                return True
            if any(t in message for t in mine):
                return True
        return False

    def remote_static_premessage(self, initiator: bool) -> bool:
        """Whether the side ``initiator`` must know the peer's static key in advance."""
        return "s" in (self.responder_pre if initiator else self.initiator_pre)


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def parse_pattern(name: str) -> HandshakePattern:
    """The pattern for a name such as ``"XX"``, ``"NNpsk0"`` or ``"XXpsk0+psk3"``.

    Raises :class:`UnsupportedFormatError` for an unknown pattern or modifier.
    """
    cut = next((i for i, ch in enumerate(name) if ch.islower()), len(name))
    base, modifier_text = name[:cut], name[cut:]
    if base not in PATTERNS:
        raise UnsupportedFormatError(
            f"unsupported Noise handshake pattern {base!r}; supported: {', '.join(PATTERNS)}"
        )
    init_pre, resp_pre, message_texts = PATTERNS[base]
    messages = [list(_tokens(m)) for m in message_texts]
    modifiers = modifier_text.split("+") if modifier_text else []
    seen: set[int] = set()
    for modifier in modifiers:
        match = _PSK.fullmatch(modifier)
        if match is None:
            raise UnsupportedFormatError(
                f"unsupported Noise pattern modifier {modifier!r} in {name!r}; "
                "only psk0, psk1, ... (joined with '+') are supported"
            )
        index = int(match.group(1))
        if index in seen or index > len(messages) or str(index) != match.group(1):
            raise UnsupportedFormatError(
                f"Noise pattern {name!r} has an invalid modifier {modifier!r}: "
                f"psk positions run 0..{len(messages)}, each at most once"
            )
        seen.add(index)
        if index == 0:
            messages[0].insert(0, "psk")
        else:
            messages[index - 1].append("psk")
    for message in messages:
        assert set(message) <= _TOKENS  # the table above is trusted
    return HandshakePattern(
        name=name,
        initiator_pre=_tokens(init_pre),
        responder_pre=_tokens(resp_pre),
        messages=tuple(tuple(m) for m in messages),
        psk_count=len(seen),
    )


@dataclass(frozen=True, slots=True)
class NoiseProtocolName:
    """A parsed protocol name ``Noise_<pattern>_<dh>_<cipher>_<hash>``."""

    name: str
    pattern: HandshakePattern
    dh: str
    cipher: str
    hash: str

    @property
    def hash_len(self) -> int:
        return HASHES[self.hash]

    @classmethod
    def parse(cls, name: str) -> NoiseProtocolName:
        """Parse and check a protocol name.

        Raises :class:`FormatError` for a malformed name and
        :class:`UnsupportedFormatError` for a well-formed one using a pattern, modifier,
        DH, cipher or hash not implemented here (448, fallback, hybrid forward secrecy).
        """
        if not isinstance(name, str):
            raise FormatError(f"a Noise protocol name is a str, got {type(name).__name__}")
        parts = name.split("_")
        if len(parts) != 5 or parts[0] != "Noise" or not all(parts[1:]):
            raise FormatError(
                f"malformed Noise protocol name {name!r}: expected "
                "Noise_<pattern>_<dh>_<cipher>_<hash>, e.g. Noise_XX_25519_ChaChaPoly_BLAKE2s"
            )
        _, pattern_name, dh, cipher, hash_name = parts
        choices = (
            ("DH function", dh, DHS),
            ("cipher", cipher, CIPHERS),
            ("hash", hash_name, HASHES),
        )
        for what, value, supported in choices:
            if value not in supported:
                raise UnsupportedFormatError(
                    f"unsupported Noise {what} {value!r} in {name!r}; "
                    f"supported: {', '.join(supported)}"
                )
        return cls(name, parse_pattern(pattern_name), dh, cipher, hash_name)
