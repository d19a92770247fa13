"""run.terminal (gpudiag.verdicts.run.process.terminal): what of the user's terminal the
program had, and the one difference left when gpudiag could not pass keys on; run.tensorflow
(``tensorflow_seen``) on event lines it could not read."""

from __future__ import annotations

from gpudiag.verdicts.run.process import tensorflow_seen, terminal


def test_no_terminal_on_gpudiag_side_is_a_skip_saying_pipes() -> None:
    found = terminal(False, [])
    assert found.status == "skip" and "pipes" in found.message


def test_a_dev_tty_reader_whose_keys_were_relayed_is_named_and_ok() -> None:
    found = terminal(True, [(41, "python -c getpass", True)])
    assert found.status == "ok"
    assert "pid 41" in found.message and "passed into it" in found.message
    assert found.evidence["tty_readers"] == [
        {"pid": 41, "command": "python -c getpass", "relayed": True}]


def test_only_the_readers_left_without_keys_warn_with_their_pid() -> None:
    found = terminal(True, [(41, "python a.py", True), (42, "read < /dev/tty", False)])
    assert found.status == "warn"
    assert "pid 42" in found.message and "pid 41" not in found.message
    assert found.advice and "plain run" in found.advice


def test_unreadable_event_lines_are_counted_and_the_first_three_named_whole() -> None:
    found = tensorflow_seen([], python_command=True, hook_errors=[], unreadable_lines=5,
                            unreadable=[f"events-1.jsonl:{n}: not JSON" for n in (3, 7, 9)])
    assert found.status == "warn"
    assert ("5 event line(s) could not be read (events-1.jsonl:3: not JSON; "
            "events-1.jsonl:7: not JSON; events-1.jsonl:9: not JSON; and 2 more): what they "
            "held is missing from this report") in found.message
