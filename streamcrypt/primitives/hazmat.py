"""Unauthenticated and legacy ciphers: hazardous materials.

Nothing here detects tampering: raw AES block modes (CBC, CFB, CFB8, OFB, CTR, XTS, ECB),
the legacy PCBC and IGE modes, raw stream ciphers (ChaCha20, XChaCha20, Salsa20, XSalsa20)
and XOR. They exist to speak formats and protocols that need them (Tink's AES-CTR-HMAC
keys, seeds and vectors of other libraries) and to build authenticated constructions;
to encrypt data use :func:`streamcrypt.encrypt` or an AEAD of
:mod:`streamcrypt.primitives`. As in pyca/cryptography's ``hazmat``, the name is the
warning.
"""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing typing (start-up)
if TYPE_CHECKING:
    from ._aes import AesCbcDecryptor as AesCbcDecryptor
    from ._aes import AesCbcEncryptor as AesCbcEncryptor
    from ._aes import AesCfb8Decryptor as AesCfb8Decryptor
    from ._aes import AesCfb8Encryptor as AesCfb8Encryptor
    from ._aes import AesCfbDecryptor as AesCfbDecryptor
    from ._aes import AesCfbEncryptor as AesCfbEncryptor
    from ._aes import AesCtrDecryptor as AesCtrDecryptor
    from ._aes import AesCtrEncryptor as AesCtrEncryptor
    from ._aes import AesEcbDecryptor as AesEcbDecryptor
    from ._aes import AesEcbEncryptor as AesEcbEncryptor
    from ._aes import AesOfbDecryptor as AesOfbDecryptor
    from ._aes import AesOfbEncryptor as AesOfbEncryptor
    from ._aes import AesXtsDecryptor as AesXtsDecryptor
    from ._aes import AesXtsEncryptor as AesXtsEncryptor
    from ._aes import xts_tweak as xts_tweak
    from ._chacha import ChaCha20 as ChaCha20
    from ._chacha import XChaCha20 as XChaCha20
    from ._legacy_aes import AesIgeDecryptor as AesIgeDecryptor
    from ._legacy_aes import AesIgeEncryptor as AesIgeEncryptor
    from ._legacy_aes import AesPcbcDecryptor as AesPcbcDecryptor
    from ._legacy_aes import AesPcbcEncryptor as AesPcbcEncryptor
    from ._salsa import Salsa20 as Salsa20
    from ._salsa import XSalsa20 as XSalsa20
    from ._xor import XorCipher as XorCipher
    from ._xor import xor as xor

_TABLE = {
    "._aes": (
        "AesCbcDecryptor",
        "AesCbcEncryptor",
        "AesCfb8Decryptor",
        "AesCfb8Encryptor",
        "AesCfbDecryptor",
        "AesCfbEncryptor",
        "AesCtrDecryptor",
        "AesCtrEncryptor",
        "AesEcbDecryptor",
        "AesEcbEncryptor",
        "AesOfbDecryptor",
        "AesOfbEncryptor",
        "AesXtsDecryptor",
        "AesXtsEncryptor",
        "xts_tweak",
    ),
    "._chacha": ("ChaCha20", "XChaCha20"),
    "._legacy_aes": ("AesIgeDecryptor", "AesIgeEncryptor", "AesPcbcDecryptor", "AesPcbcEncryptor"),
    "._salsa": ("Salsa20", "XSalsa20"),
    "._xor": ("XorCipher", "xor"),
}
__all__ = sorted(name for names in _TABLE.values() for name in names)

# Imported from their private modules on first use.
__getattr__, __dir__ = lazy_exports(
    __name__, {f"streamcrypt.primitives{module}": names for module, names in _TABLE.items()}
)
