"""A PostgreSQL server for the tests: `FADEWAY_TEST_POSTGRES` (a URL) when set, else a throwaway
cluster of the Debian package's binaries in a temporary directory, on loopback, trust
authentication, stopped (and removed) at exit. PostgreSQL refuses to run as root: as root the
cluster runs as the `postgres` user (`runuser`).

Also a command for CI (`.ci/run`): `python3 tests/pg.py start DIR` starts a cluster in DIR and
prints its URL; `python3 tests/pg.py stop DIR` stops it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

#: Where the Debian package puts the server's binaries.
BIN_DIRS = [Path(f"/usr/lib/postgresql/{v}/bin") for v in (17, 16, 15, 14, 13)]
ENV_URL = "FADEWAY_TEST_POSTGRES"


def _bin_dir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    return next((d for d in BIN_DIRS if (d / "initdb").exists()), None)


def _as_server_user() -> list[str] | None:
    """The prefix that runs a command as a user PostgreSQL accepts: none for a non-root user,
    `runuser -u postgres --` for root; None when root has no such user or no runuser."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        return None
    return [runuser, "-u", "postgres", "--"] if runuser else None


def why_no_cluster() -> str | None:
    """Why this machine cannot start a throwaway cluster, or None when it can."""
    if _bin_dir() is None:
        return f"no PostgreSQL binaries (initdb) on PATH or in /usr/lib/postgresql; set {ENV_URL}"
    if _as_server_user() is None:
        return f"running as root without a `postgres` user and runuser; set {ENV_URL}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(root: Path) -> str:
    """Start a throwaway cluster in `root` (created); its URL."""
    bin_dir, prefix = _bin_dir(), _as_server_user()
    if bin_dir is None or prefix is None:
        raise RuntimeError(why_no_cluster())
    root.mkdir(parents=True, exist_ok=True)
    if prefix:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", _free_port()
    run = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    subprocess.run(
        [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
        + ["-E", "UTF8", "--no-locale", "--no-sync"],
        **run,
    )
    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    restart(root, url)
    return url


def restart(root: Path, url: str) -> None:
    """Start the cluster in `root` that `start` made (and `halt` stopped) again, at `url`."""
    settings = (
        f"-c listen_addresses=127.0.0.1 -p {urlsplit(url).port} "
        f"-c unix_socket_directories={root} -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c max_connections=200"
    )
    _pg_ctl(root, "-o", settings, "-l", str(root / "log"), "-w", "-t", "60", "start")


def halt(root: Path) -> None:
    """Stop the cluster in `root` as a restart does (`pg_ctl stop -m fast`: every connection
    ended), keeping its data for `restart`."""
    _pg_ctl(root, "-m", "fast", "-w", "stop")


def _pg_ctl(root: Path, *args: str) -> None:
    bin_dir, prefix = _bin_dir(), _as_server_user()
    assert bin_dir is not None and prefix is not None
    subprocess.run(
        [*prefix, str(bin_dir / "pg_ctl"), "-D", str(root / "data"), *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def stop(root: Path) -> None:
    """Stop the cluster in `root` (if it runs) and remove it."""
    bin_dir, prefix = _bin_dir(), _as_server_user()
    if bin_dir is not None and prefix is not None and (root / "data").exists():
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate"]
            + ["-w", "stop"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    shutil.rmtree(root, ignore_errors=True)


@contextmanager
def server() -> Iterator[str]:
    """The URL of a server to test against: `FADEWAY_TEST_POSTGRES`, or a throwaway cluster
    for as long as the context lasts."""
    if os.environ.get(ENV_URL):
        yield os.environ[ENV_URL]
        return
    root = Path(tempfile.mkdtemp(prefix="fadeway-pg-"))
    try:
        yield start(root)
    finally:
        stop(root)


@contextmanager
def server_or_skip() -> Iterator[str]:
    """`server()` for a test or a bench: skips it, saying why, when psycopg is not installed or
    no server can be started."""
    import pytest

    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install 'fadeway[postgres]'")
    why = None if os.environ.get(ENV_URL) else why_no_cluster()
    if why:
        pytest.skip(why)
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(server())
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = (getattr(exc, "stderr", None) or b"").decode(errors="replace").strip()
            pytest.skip(f"cannot start a throwaway PostgreSQL: {exc} {detail}")
        yield url


def with_database(url: str, name: str) -> str:
    """`url` naming database `name` instead."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


#: The role tests connect as: no superuser, so that row-level security applies to it as it does
#: to an application's role (a superuser bypasses it).
APP_ROLE = "fadeway_app"


def _as_app_role(conn, url: str) -> str | None:
    """`url` connecting as APP_ROLE (created if missing), or None when this server's user may
    not create it (the tests then run as that user)."""
    import psycopg

    try:
        if (
            conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone()
            is None
        ):
            conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN")
    except psycopg.Error:
        return None
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{APP_ROLE}@{host}"))


@contextmanager
def fresh_database(url: str) -> Iterator[str]:
    """A new, empty database on the server at `url`, owned by APP_ROLE when it can be, dropped
    afterwards: its URL."""
    import psycopg

    name = "fadeway_test_" + uuid.uuid4().hex[:16]
    with psycopg.connect(url, autocommit=True) as conn:
        role_url = _as_app_role(conn, url)
        owner = f" OWNER {APP_ROLE}" if role_url else ""
        conn.execute(f'CREATE DATABASE "{name}"{owner}')  # names made here, never input
    try:
        yield with_database(role_url or url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python3 tests/pg.py start|stop DIR", file=sys.stderr)
        return 2
    root = Path(argv[1])
    if argv[0] == "stop":
        stop(root)
        return 0
    try:
        print(start(root))
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(f"cannot start PostgreSQL: {exc} {detail.decode(errors='replace')}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
