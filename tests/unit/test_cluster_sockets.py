"""Where a process listens, read from Linux's /proc: a table parsed, then a real socket."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from gpudiag.cluster import sockets

# /proc/net/tcp and tcp6 as Linux writes them (header, then one line per socket); the
# lines are long, as in the kernel's table.
# ruff: noqa: E501
TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 00000000:A0B5 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 20 4 30 10 -1
"""
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:9355 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5151 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5252 1 0000000000000000 100 0 0 10 0
"""


def test_listen_entries_of_proc_net_tables() -> None:
    assert sockets.parse_proc_net(TCP) == {4242: "127.0.0.1:8080", 4343: "0.0.0.0:41141"}
    assert sockets.parse_proc_net(TCP6, v6=True) == {5151: "[::]:37717", 5252: "[::1]:22"}
    assert sockets.is_loopback("127.0.0.1:8080") and sockets.is_loopback("[::1]:22")
    assert not sockets.is_loopback("0.0.0.0:41141") and not sockets.is_loopback("[::]:37717")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_real_listening_socket_of_this_process_is_found() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        found = sockets.listening(os.getpid())
        assert found is not None and f"127.0.0.1:{port}" in found
    assert f"127.0.0.1:{port}" not in (sockets.listening(os.getpid()) or [])
    assert sockets.listening(2**22 + 7) is None  # no such process
