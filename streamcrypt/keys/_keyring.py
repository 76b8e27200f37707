"""KeyRing: named keys, one active for encryption, older ones kept for decryption."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..errors import InvalidParameterError, UnknownKeyError
from ._secret import SecretKey, random_bytes

__all__ = ["KeyRing"]


class KeyRing:
    """Keys by id. Encrypt with :attr:`active`; decrypt with whichever key a header names.

    Rotation adds a new active key and keeps the old ones, so data written under them
    stays readable without re-encryption. ``repr`` lists ids only.
    """

    __slots__ = ("_active", "_keys")

    def __init__(self, keys: Iterable[SecretKey] = (), *, active: str | None = None) -> None:
        self._keys: dict[str, SecretKey] = {}
        self._active: str | None = None
        for key in keys:
            self.add(key)
        if active is not None:
            self.activate(active)
        elif self._keys:
            self._active = next(reversed(self._keys))

    def add(self, key: SecretKey, *, activate: bool = False) -> None:
        """Add ``key`` (it must carry a unique, non-empty ``key_id``)."""
        if not key.key_id:
            raise InvalidParameterError("a key in a KeyRing needs a non-empty key_id")
        if key.key_id in self._keys:
            raise InvalidParameterError(f"key id {key.key_id!r} is already in the ring")
        self._keys[key.key_id] = key
        if activate or self._active is None:
            self._active = key.key_id

    def activate(self, key_id: str) -> None:
        """Make the key ``key_id`` the one used for encryption."""
        self.get(key_id)
        self._active = key_id

    def rotate(self, size: int = 32) -> SecretKey:
        """Generate a new key with a fresh random id, make it active and return it."""
        key = SecretKey.generate(size, key_id=random_bytes(8).hex())
        self.add(key, activate=True)
        return key

    def remove(self, key_id: str) -> SecretKey:
        """Drop a retired key (data under it can no longer be decrypted here)."""
        key = self.get(key_id)
        if key_id == self._active:
            raise InvalidParameterError("cannot remove the active key; activate another first")
        del self._keys[key_id]
        return key

    @property
    def active(self) -> SecretKey:
        """The key used for encryption. Raises :class:`UnknownKeyError` on an empty ring."""
        if self._active is None:
            raise UnknownKeyError("the KeyRing is empty: add or rotate in a key first")
        return self._keys[self._active]

    def get(self, key_id: str) -> SecretKey:
        """The key with this id, or :class:`UnknownKeyError`."""
        try:
            return self._keys[key_id]
        except KeyError:
            raise UnknownKeyError(
                f"no key with id {key_id!r} in this KeyRing (known ids: {sorted(self._keys)})"
            ) from None

    def ids(self) -> list[str]:
        return list(self._keys)

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[SecretKey]:
        return iter(self._keys.values())

    def __repr__(self) -> str:
        return f"KeyRing(ids={list(self._keys)!r}, active={self._active!r})"
