"""What hostreads and kerascalls keep per line of the program: sites, bounded (MAX_SITES;
records past them only counted), written at most every flush interval and at exit, and
which code objects are the program's own (asked once each, MAX_CODES remembered)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

MAX_SITES = 64
MAX_CODES = 4096  # code objects whose "the program's own or not" is remembered
K = TypeVar("K", bound=Hashable)
S = TypeVar("S")


class SiteTable(Generic[K, S]):
    """One process's sites, by key; ``emit`` writes them (each subclass its event)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.sites: dict[K, S] = {}
        self.left_out = 0  # records at sites past MAX_SITES
        self.lock = threading.Lock()
        self.last_emit = time.monotonic()
        self.user_codes: dict[Any, bool] = {}  # code object -> the program's own

    def mine(self, code: Any) -> bool:  # the program's own (gpudiag.inprogram.usercode)
        known = self.user_codes.get(code)
        if known is None:
            from gpudiag.inprogram.usercode import is_user_file

            known = is_user_file(code.co_filename)
            if len(self.user_codes) < MAX_CODES:
                self.user_codes[code] = known
        return known

    def site(self, key: K, frame: Any, make: Callable[[dict[str, Any] | None], S]
             ) -> S | None:
        """The site at ``key``, made of the program's line at ``frame`` the first time
        (None: the table is full, counted in ``left_out``). Called holding ``lock``."""
        site = self.sites.get(key)
        if site is None:
            if len(self.sites) >= MAX_SITES:
                self.left_out += 1
                return None
            from gpudiag.inprogram.tracing import user_line

            site = self.sites[key] = make(user_line(frame) if frame is not None else None)
        return site

    def emit_when_due(self) -> None:
        if time.monotonic() - self.last_emit >= self.agent.config.flush_interval_s:
            self.emit()  # type: ignore[attr-defined]  # each subclass writes its own event
