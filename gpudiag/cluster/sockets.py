"""Which TCP addresses a process listens on, from Linux's /proc (no psutil, no TensorFlow).

TensorFlow's gRPC server binds ``0.0.0.0:<port>`` (grpc_server_lib.cc adds the
listening port as ``"0.0.0.0:" + port``) whatever host TF_CONFIG names, so a task
given ``127.0.0.1:2222`` still accepts connections on every interface. gpudiag reports
what each task really listened on instead of assuming: the socket inodes among the
process's open files (/proc/<pid>/fd), matched against the LISTEN entries of
/proc/<pid>/net/tcp and tcp6. Elsewhere than Linux the answer is None (unknown).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

LISTEN_STATE = "0A"


def _address(hex_address: str, v6: bool) -> str:
    """``0100007F:1F90`` -> ``127.0.0.1:8080``; IPv6 in brackets."""
    host_hex, port_hex = hex_address.split(":")
    port = int(port_hex, 16)
    raw = bytes.fromhex(host_hex)
    if v6:  # four 32-bit words, each little-endian
        words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        return f"[{ipaddress.IPv6Address(words)}]:{port}"
    return f"{ipaddress.IPv4Address(raw[::-1])}:{port}"


def parse_proc_net(text: str, v6: bool = False) -> dict[int, str]:
    """Listening sockets of a /proc/net/tcp(6) table: inode -> local address."""
    out: dict[int, str] = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[3] == LISTEN_STATE:
            out[int(fields[9])] = _address(fields[1], v6)
    return out


def socket_inodes(pid: int, proc: Path = Path("/proc")) -> set[int]:
    inodes = set()
    try:
        for fd in (proc / str(pid) / "fd").iterdir():
            try:
                target = str(fd.readlink())
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    except OSError:
        return set()
    return inodes


def listening(pid: int, proc: Path = Path("/proc")) -> list[str] | None:
    """The addresses process ``pid`` listens on, sorted; None where /proc cannot say."""
    tables: dict[int, str] = {}
    found_table = False
    for name, v6 in (("tcp", False), ("tcp6", True)):
        try:
            text = (proc / str(pid) / "net" / name).read_text()
        except OSError:
            continue
        found_table = True
        tables.update(parse_proc_net(text, v6))
    if not found_table:
        return None
    return sorted(tables[i] for i in socket_inodes(pid, proc) if i in tables)


def is_loopback(address: str) -> bool:
    host = address.rpartition(":")[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
