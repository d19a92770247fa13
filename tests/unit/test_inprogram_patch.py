"""gpudiag.inprogram.agent's ledger: every hook replaces what it wraps through ``patch``,
and ``unpatch_all`` puts each back as it was (a notebook's watch() at its end)."""

from __future__ import annotations

import types

from gpudiag.inprogram import agent


class Base:
    def method(self) -> str:
        return "base"


class Child(Base):
    def own(self) -> str:
        return "own"


def test_what_was_there_comes_back_and_what_was_inherited_is_inherited_again() -> None:
    module = types.ModuleType("m")
    module.fn = original = lambda: "plain"  # type: ignore[attr-defined]
    own = Child.__dict__["own"]
    agent.patch(module, "fn", lambda: "wrapped")
    agent.patch(Child, "own", lambda self: "wrapped")
    agent.patch(Child, "method", lambda self: "wrapped")  # inherited from Base
    assert (module.fn(), Child().own(), Child().method()) == ("wrapped",) * 3  # type: ignore[attr-defined]
    assert agent.unpatch_all() == []
    assert module.fn is original  # type: ignore[attr-defined]
    assert Child.__dict__["own"] is own
    assert "method" not in Child.__dict__ and Child().method() == "base"
    assert agent.PATCHES == []


def test_twice_patched_comes_back_to_the_first() -> None:
    module = types.ModuleType("m")
    module.fn = original = len  # type: ignore[attr-defined]
    agent.patch(module, "fn", abs)
    agent.patch(module, "fn", max)
    assert agent.unpatch_all() == []
    assert module.fn is original  # type: ignore[attr-defined]


def test_the_programs_own_replacement_since_is_left_and_named() -> None:
    module = types.ModuleType("m")
    module.fn = len  # type: ignore[attr-defined]
    agent.patch(module, "fn", abs)
    module.fn = mine = min  # type: ignore[attr-defined]
    assert agent.unpatch_all() == ["m.fn"]
    assert module.fn is mine  # type: ignore[attr-defined]
