"""Servers in a process of their own, for the ``sockets`` and ``http`` sections.

A server is ``python -m bench._procs MODULE ARG...``: it runs ``bench.MODULE.serve(args)``,
which binds 127.0.0.1 on a free port and, once it accepts connections, calls
:func:`announce` (one ``READY <port> <info>`` line on stdout). :class:`ServerProcess`
starts it, waits for that line, reads the server's RSS (and resets and reads its peak)
and CPU time from ``/proc``, and always stops it (terminate, wait, kill if it lingers).
"""

from __future__ import annotations

import importlib
import os
import resource
import select
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parent.parent


def announce(port: int, info: str = "") -> None:
    """Tell the parent the server is ready: ``READY <port> <info>`` on stdout."""
    print(f"READY {port} {info}".rstrip(), flush=True)


def _status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


class ServerProcess:
    """``with ServerProcess("sockets", "tls", ...) as server:`` ``server.port`` ..."""

    def __init__(
        self, module: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
    ) -> None:
        self.argv = [sys.executable, "-m", "bench._procs", module, *args]
        self.env = {**os.environ, **(env or {})}
        self.timeout = timeout
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.info = ""

    def __enter__(self) -> ServerProcess:
        self.proc = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, text=True
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{' '.join(self.argv[3:])}: no READY line in {self.timeout} s")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if not ready:
                continue
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(
                    f"{' '.join(self.argv[3:])} exited ({self.proc.wait()}) before READY"
                )
            if line.startswith("READY "):
                _, port, *info = line.split(maxsplit=2)
                self.port = int(port)
                self.info = info[0].strip() if info else ""
                return

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss(self) -> int:
        """The server's resident set size now, in bytes."""
        return _status(self.pid, "VmRSS:")

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system, every thread) the server used since it started."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def reset_peak(self) -> None:
        """Restart the server's peak-RSS mark (``VmHWM``) from its RSS now."""
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def peak(self) -> int:
        """The server's peak RSS since start or :meth:`reset_peak`, in bytes."""
        return _status(self.pid, "VmHWM:")

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def raise_fd_limit(needed: int) -> str | None:
    """Raise this process's open-file limit (children inherit it) to at least ``needed``;
    ``None`` when it is high enough, else the reason it could not be raised."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return None
    if hard != resource.RLIM_INFINITY and hard < needed:
        return f"the hard open-file limit is {hard}, below the {needed} needed"
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    except (ValueError, OSError) as exc:
        return f"setrlimit(RLIMIT_NOFILE, {needed}) failed: {exc}"
    return None


def main() -> None:
    module, *args = sys.argv[1:]
    importlib.import_module(f"bench.{module}").serve(args)


if __name__ == "__main__":
    main()
