"""Whom a write-only store's owner wraps new keys to (review 7 H2): the config's recipient
list is signed by the writer key only, so whoever takes the writer can add their own
recipient to it; the identity's prune and rekey must never wrap a session secret (which
reaches back before the compromise) to a recipient only the config names
(docs/BACKUP.md, threat model)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import write_secret
from test_backup import run
from test_cli import sc

from streamcrypt import backup as sb
from streamcrypt.codecs.age import SshEd25519Identity, X25519Identity, parse_recipient
from streamcrypt.codecs.backup import (
    BackupKeys,
    StoreConfig,
    check_recipients,
    open_key_file,
    vouched_recipients,
)
from streamcrypt.errors import FormatError, StreamCryptError, UntrustedRecipientError
from streamcrypt.keys import SecretKey


def key_files(store: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (store / "keys").iterdir()}


def opened_by(identity: X25519Identity, store: Path) -> list[str]:
    """The files of ``keys/`` that ``identity`` opens."""
    out = []
    for path in (store / "keys").iterdir():
        try:
            open_key_file(identity, path.name, path.read_bytes())
        except StreamCryptError:
            continue
        out.append(path.name)
    return out


def inject(store: Path, writer: SecretKey, recipient: X25519Identity | str) -> None:
    """What whoever takes the writer can do to a local store: list their recipient (or
    any text) in the config and sign it again with the writer key."""
    keys = BackupKeys.writer(writer)
    config = StoreConfig.decode((store / "config").read_bytes(), keys)
    text = recipient if isinstance(recipient, str) else str(recipient.recipient)
    (store / "config").write_bytes(
        replace(config, recipients=(*config.recipients, text)).encode(keys)
    )


def two_backups(tmp_path: Path, *recipients: X25519Identity) -> tuple[Path, SecretKey, str]:
    """A write-only store for ``recipients`` with snapshots 'one' and 'two' ('two' lacks
    a file of 'one', so a prune after forgetting 'one' rewrites a pack); its signer."""
    store, src = tmp_path / "store", tmp_path / "src"
    src.mkdir()
    writer = run(sb.create_write_only, store, [str(r.recipient) for r in recipients])
    (src / "diary.txt").write_bytes(b"before the compromise\n" + os.urandom(20_000))
    (src / "old.bin").write_bytes(os.urandom(200_000))
    run(sb.backup, src, store, writer, name="one", cache_dir=tmp_path / "c")
    (src / "old.bin").unlink()
    run(sb.backup, src, store, writer, name="two", cache_dir=tmp_path / "c")
    return store, writer, BackupKeys.writer(writer).signing.public_bytes().hex()


def test_the_owners_rekey_wraps_nothing_to_a_recipient_the_writer_injected(
    tmp_path: Path,
) -> None:
    owner, attacker, device = (X25519Identity.generate() for _ in range(3))
    store, writer, signer = two_backups(tmp_path, owner)
    inject(store, writer, attacker)
    before = key_files(store)

    with pytest.raises(UntrustedRecipientError, match=str(attacker.recipient)):
        run(sb.rekey, store, identities=owner, add=str(device.recipient), signer=signer)
    assert key_files(store) == before and opened_by(attacker, store) == []

    # removing it is the repair: every key file rewrapped to the owner's list only
    now = run(
        sb.rekey,
        store,
        identities=owner,
        add=str(device.recipient),
        remove=str(attacker.recipient),
        signer=signer,
    )
    assert now == (str(owner.recipient), str(device.recipient))
    assert opened_by(attacker, store) == []
    assert sorted(opened_by(device, store)) == sorted(before)


def test_the_owners_prune_wraps_nothing_to_a_recipient_the_writer_injected(
    tmp_path: Path,
) -> None:
    owner, attacker = X25519Identity.generate(), X25519Identity.generate()
    store, writer, signer = two_backups(tmp_path, owner)
    inject(store, writer, attacker)
    run(sb.forget, store, None, ["one"], identities=owner, signer=signer)
    before = key_files(store)
    packs = sorted(p.name for p in (store / "data").rglob("*") if p.is_file())

    with pytest.raises(UntrustedRecipientError, match=str(attacker.recipient)):
        run(sb.prune, store, identities=owner, signer=signer)
    assert key_files(store) == before and opened_by(attacker, store) == []
    assert sorted(p.name for p in (store / "data").rglob("*") if p.is_file()) == packs
    assert not list((store / "locks").iterdir())


def test_no_call_of_the_identity_wraps_a_key_to_a_recipient_it_did_not_vouch_for(
    tmp_path: Path,
) -> None:
    """Every call that takes the identity, run on a store whose config lists a stranger:
    afterwards the stranger opens no key file (the next call that wraps must go through
    Store.wrap_recipients, or this fails)."""
    owner, attacker = X25519Identity.generate(), X25519Identity.generate()
    store, writer, _ = two_backups(tmp_path, owner)
    inject(store, writer, attacker)
    calls: list[Callable[[], Any]] = [
        lambda: run(sb.restore, store, "two", tmp_path / "out", identities=owner),
        lambda: run(sb.verify, store, identities=owner),
        lambda: run(sb.forget, store, None, ["one"], identities=owner),
        lambda: run(sb.prune, store, identities=owner),
        lambda: run(sb.rekey, store, identities=owner, add=str(owner.recipient)),
    ]
    for call in calls:
        try:
            call()
        except UntrustedRecipientError:
            pass
        assert opened_by(attacker, store) == [], call
    assert (tmp_path / "out" / "diary.txt").exists()


def test_recipients_the_owner_names_are_kept_and_keep_reading(tmp_path: Path) -> None:
    """A store made for two recipients: the owner's prune and rekey with one identity
    need the other named (prune: recipients=; rekey: add=), and then keep it."""
    owner, laptop, device = (X25519Identity.generate() for _ in range(3))
    store, _, signer = two_backups(tmp_path, owner, laptop)
    run(sb.forget, store, None, ["one"], identities=owner, signer=signer)
    with pytest.raises(UntrustedRecipientError, match=str(laptop.recipient)):
        run(sb.prune, store, identities=owner, signer=signer)
    pruned = run(sb.prune, store, identities=owner, recipients=str(laptop.recipient))
    assert pruned.packs_written == 1
    with pytest.raises(UntrustedRecipientError):
        run(sb.rekey, store, identities=owner, add=str(device.recipient))
    now = run(sb.rekey, store, identities=owner, add=[str(device.recipient), str(laptop.recipient)])
    assert set(now) == {str(r.recipient) for r in (owner, laptop, device)}
    for identity in (laptop, device):
        run(sb.restore, store, "two", tmp_path / f"out-{id(identity)}", identities=identity)
    assert sorted(opened_by(laptop, store)) == sorted(key_files(store))


def test_the_command_prunes_with_the_recipients_the_owner_names(tmp_path: Path) -> None:
    owner, laptop = X25519Identity.generate(), X25519Identity.generate()
    store, _, _ = two_backups(tmp_path, owner, laptop)
    write_secret(tmp_path / "owner.id", owner.to_string() + "\n")
    (tmp_path / "recipients").write_text(f"{owner.recipient}\n{laptop.recipient}\n")
    ident = ("-i", "owner.id")
    assert sc("backup", "forget", store.name, "one", *ident, cwd=tmp_path).returncode == 0
    done = sc("backup", "prune", store.name, *ident, cwd=tmp_path)
    assert done.returncode == 3 and str(laptop.recipient).encode() in done.stderr
    done = sc("backup", "prune", store.name, *ident, "-R", "recipients", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = sc("backup", "prune", store.name, *ident, "-r", str(laptop.recipient), cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_an_ssh_recipient_line_is_one_line() -> None:
    """An authorized_keys line's comment ends at the line: a text holding a second line
    is no recipient (a recipient list reads that line as another key: review 8b H1)."""
    ssh, other = SshEd25519Identity.generate(), X25519Identity.generate()
    line = str(ssh.recipient)
    assert parse_recipient(line + " me@laptop") == ssh.recipient
    assert parse_recipient(line + "\tme@laptop\n") == ssh.recipient
    for sep in ("\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", " \x00"):
        with pytest.raises(FormatError, match="line break or control"):
            parse_recipient(f"{line}{sep}{other.recipient}")


def test_what_the_owner_checks_is_what_it_wraps(tmp_path: Path) -> None:
    """A config entry that reads as the owner's key but lists another key on a second
    line (review 8b H1): refused by the config itself and by the check, never wrapped
    to; removed by its exact text, which leaves the owner's rekey and prune working."""
    owner, attacker, device = (
        SshEd25519Identity.generate(),
        *(X25519Identity.generate() for _ in range(2)),
    )
    evil = f"{owner.recipient}\n{attacker.recipient}"
    with pytest.raises(UntrustedRecipientError, match="canonical"):
        check_recipients([evil], vouched_recipients(owner))
    store, writer, signer = two_backups(tmp_path, owner)  # type: ignore[arg-type]
    keys = BackupKeys.writer(writer)
    config = StoreConfig.decode((store / "config").read_bytes(), keys)
    (store / "config").write_bytes(replace(config, recipients=(evil,)).encode(keys))
    before = key_files(store)

    with pytest.raises(UntrustedRecipientError, match="canonical"):
        run(sb.rekey, store, identities=owner, add=str(device.recipient), signer=signer)
    with pytest.raises(UntrustedRecipientError, match="canonical"):
        run(sb.prune, store, identities=owner, signer=signer)
    assert key_files(store) == before and opened_by(attacker, store) == []

    now = run(
        sb.rekey,
        store,
        identities=owner,
        add=[str(owner.recipient), str(device.recipient)],
        remove=evil,
        signer=signer,
    )
    assert now == (str(owner.recipient), str(device.recipient))
    assert opened_by(attacker, store) == [] and sorted(opened_by(device, store)) == sorted(before)


@pytest.mark.parametrize(
    "form",
    [
        lambda r: f"{r} mallory@evil",
        lambda r: r.upper(),
        lambda r: f"{r}\n",
        lambda r: f" {r}",
        lambda r: "hello-owner",
    ],
    ids=["comment", "upper-case", "newline", "blank", "no-recipient"],
)
def test_a_config_entry_not_in_canonical_form_is_refused_and_removable(
    tmp_path: Path, form: Callable[[str], str]
) -> None:
    """The config holds only canonical recipients: any other entry is refused to the
    writer and the identity alike (typed, naming it), and the owner removes it with
    rekey -x and its exact text (review 8b M1: it used to be unremovable)."""
    owner, attacker = X25519Identity.generate(), SshEd25519Identity.generate()
    store, writer, signer = two_backups(tmp_path, owner)
    text = form(str(attacker.recipient))
    inject(store, writer, text)
    with pytest.raises(UntrustedRecipientError, match="rekey -x") as refused:
        run(sb.prune, store, identities=owner, signer=signer)
    assert repr(text)[:40] in str(refused.value)
    with pytest.raises(UntrustedRecipientError):
        run(sb.backup, tmp_path / "src", store, writer, cache_dir=tmp_path / "c")
    assert run(sb.rekey, store, identities=owner, remove=text, signer=signer) == (
        str(owner.recipient),
    )
    run(sb.prune, store, identities=owner, signer=signer)
    run(sb.backup, tmp_path / "src", store, writer, cache_dir=tmp_path / "c")
