"""How a command talks to the person running it: one ``Ui``, made by the CLI and passed
to every command function, the only way a command shows anything while it works.

- ``say(text)``: one line (what is about to happen, what was found out on the way);
- ``status(text)``: a spinner around a wait with no steps to count (a child probing);
- ``progress()``: bars for work with steps (scaling's configurations);
- ``show(renderable)``: a table or other rich renderable.

``Ui.quiet()`` shows nothing: the commands' tests and library callers use it. With
``--json`` the CLI's Ui writes to stderr, so stdout holds report.json alone. rich is
imported only by a Ui that shows something: the library (gpudiag.api) runs the commands'
bodies with a quiet Ui and imports no rich.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


class Ui:
    def __init__(self, console: Console | None) -> None:
        self.console = console

    @classmethod
    def quiet(cls) -> Ui:
        return cls(None)

    def say(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text)

    def say_line(self, text: str) -> None:
        """One line as it is: never wrapped, no markup (a message with a path or code)."""
        if self.console is not None:
            self.console.print(text, soft_wrap=True, markup=False, highlight=False)

    @contextlib.contextmanager
    def status(self, text: str) -> Iterator[None]:
        if self.console is None:
            yield
            return
        with self.console.status(text):
            yield

    def progress(self) -> Progress:
        """Bars with a description, a ``status`` field and the elapsed time."""
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        return Progress(TextColumn("{task.description}"), BarColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                        console=self.console, transient=False,
                        disable=self.console is None)

    def show(self, renderable: Any) -> None:
        if self.console is not None:
            self.console.print(renderable)
