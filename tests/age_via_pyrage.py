"""The part of the ``age`` and ``age-keygen`` command lines the docs use, run by pyrage
(rage, the test suite's age peer), for machines without the ``age`` command:

    age-keygen [-o FILE]            age-keygen -y FILE
    age [-a] (-r RECIPIENT | -R FILE)... [-o OUT] [IN]
    age -d (-i FILE)... [-o OUT] [IN]

``python age_via_pyrage.py age ...`` / ``python age_via_pyrage.py age-keygen ...``.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import pyrage


def _keys(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def keygen(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="age-keygen")
    parser.add_argument("-o", dest="output")
    parser.add_argument("-y", action="store_true")
    parser.add_argument("input", nargs="?")
    args = parser.parse_args(argv)
    if args.y:
        text = Path(args.input).read_text() if args.input else sys.stdin.read()
        for key in _keys(text):
            print(pyrage.x25519.Identity.from_str(key).to_public())
        return
    identity = pyrage.x25519.Identity.generate()
    created = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat()
    public = identity.to_public()
    text = f"# created: {created}\n# public key: {public}\n{identity}\n"
    if args.output:
        Path(args.output).write_text(text)
        Path(args.output).chmod(0o600)  # as age-keygen creates it
        print(f"Public key: {public}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def age(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="age")
    parser.add_argument("-d", "--decrypt", action="store_true")
    parser.add_argument("-a", "--armor", action="store_true")
    parser.add_argument("-r", dest="recipients", action="append", default=[])
    parser.add_argument("-R", dest="recipient_files", action="append", default=[])
    parser.add_argument("-i", dest="identity_files", action="append", default=[])
    parser.add_argument("-o", dest="output")
    parser.add_argument("input", nargs="?")
    args = parser.parse_args(argv)
    data = Path(args.input).read_bytes() if args.input else sys.stdin.buffer.read()
    if args.decrypt:
        ids = [k for f in args.identity_files for k in _keys(Path(f).read_text())]
        out = pyrage.decrypt(data, [pyrage.x25519.Identity.from_str(k) for k in ids])
    else:
        names = [
            *args.recipients,
            *(k for f in args.recipient_files for k in _keys(Path(f).read_text())),
        ]
        recipients = [pyrage.x25519.Recipient.from_str(k) for k in names]
        out = pyrage.encrypt(data, recipients, armored=args.armor)
    if args.output:
        Path(args.output).write_bytes(out)
    else:
        sys.stdout.buffer.write(out)


if __name__ == "__main__":
    {"age": age, "age-keygen": keygen}[sys.argv[1]](sys.argv[2:])
