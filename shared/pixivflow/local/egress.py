"""`pixivflow dev`'s egress guard: a dev server reaches loopback only.

Fuzzing a dev server must never reach the internet, whatever URL a hostile request plants (a
callback, a delivery route) -- so while the guard is on, this process refuses:

* a TCP/UDP ``connect`` / ``connect_ex`` / ``sendto`` to any address but 127.0.0.0/8 and ::1
  (the table rule of ``domain/network.is_loopback``), with ``PermissionError``;
* a name lookup (``getaddrinfo``) of anything but ``localhost`` and IP literals, with
  ``socket.gaierror`` -- a DNS query is itself a packet to a non-loopback resolver.

It patches the ``socket`` module for the whole process (every client -- httpx, urllib3, boto3 --
opens its connections through it) and is reference-counted, so nested dev servers in one test
process share it; the last ``uninstall`` restores the originals. ``pixivflow dev --allow-egress``
(or ``DevServer(allow_egress=True)``) leaves it off, for a dev server pointed at real services.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from ..domain.network import is_loopback

_lock = threading.Lock()
_installed = 0
_saved: dict[str, Any] = {}
LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


class EgressRefused(PermissionError):
    """A connection the dev server's egress guard refused."""


def _host(address: Any) -> str | None:
    if isinstance(address, tuple) and address:
        host = address[0]
        return host.decode() if isinstance(host, bytes) else str(host)
    return None  # AF_UNIX paths and the like: not network egress


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    host = _host(address)
    if host is not None and not is_loopback(host):
        raise EgressRefused(f"pixivflow dev: egress to {host!r} refused (loopback only; --allow-egress lifts it)")


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode() if isinstance(host, bytes) else host
    if name is not None and str(name).lower() not in LOOPBACK_NAMES and not _is_literal(str(name)):
        raise socket.gaierror(socket.EAI_NONAME, f"pixivflow dev: lookup of {name!r} refused (loopback only)")
    return _saved["getaddrinfo"](host, *args, **kwargs)


def _is_literal(name: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(name.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def install() -> None:
    global _installed
    with _lock:
        _installed += 1
        if _installed > 1:
            return
        cls = socket.socket
        _saved.update(connect=cls.connect, connect_ex=cls.connect_ex, sendto=cls.sendto, getaddrinfo=socket.getaddrinfo)

        def connect(self: socket.socket, address: Any) -> None:
            _check(self, address)
            return _saved["connect"](self, address)

        def connect_ex(self: socket.socket, address: Any) -> int:
            _check(self, address)
            return _saved["connect_ex"](self, address)

        def sendto(self: socket.socket, data: Any, *args: Any) -> int:
            _check(self, args[-1] if args else None)
            return _saved["sendto"](self, data, *args)

        # Patched on the class; the stubs type each method by its overloads and address kinds.
        cls.connect, cls.connect_ex, cls.sendto = connect, connect_ex, sendto  # type: ignore[method-assign, assignment]
        socket.getaddrinfo = _guarded_getaddrinfo


def uninstall() -> None:
    global _installed
    with _lock:
        if _installed == 0:
            return
        _installed -= 1
        if _installed:
            return
        cls = socket.socket
        # Put back on the class (see install()).
        cls.connect, cls.connect_ex, cls.sendto = _saved["connect"], _saved["connect_ex"], _saved["sendto"]  # type: ignore[method-assign]
        socket.getaddrinfo = _saved["getaddrinfo"]
        _saved.clear()


def active() -> bool:
    return _installed > 0


__all__ = ["EgressRefused", "active", "install", "uninstall"]
