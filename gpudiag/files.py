"""Writing run files safely: atomically, as strict JSON, with one clear error when the
disk says no.

``atomic_write_text`` writes ``<name>.tmp`` beside the file and renames it over the file,
so a reader never sees half a file and a full disk leaves the previous version whole;
the ``.tmp`` is removed when the write fails, and the failure becomes WriteFailed (exit 3,
one line naming the path and the errno).

Names from the command line and the file system need not be UTF-8 (a Latin-1 file name:
Python holds its bytes as lone surrogates): ``readable`` turns each such byte into
``\\xNN`` text, so every file of a run is valid UTF-8 and names the byte that was there.

``strict_json`` is what every JSON file of a run goes through: JSON has no Infinity or
NaN, and strict readers (``jq``, browsers, Go, ``json.loads(parse_constant=...)``)
reject Python's ``Infinity``. Non-finite numbers become ``null``, and the places where
that happened are returned so the writer can say so.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

from gpudiag.errors import WriteFailed


def readable(text: str) -> str:
    """``text`` with every byte that was not UTF-8 (a lone surrogate of Python's
    surrogateescape) as ``\\xNN``; text that is all UTF-8 is returned as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            handle.write(readable(text))
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise WriteFailed.of(exc, path) from exc
    except BaseException:  # never a .tmp left behind, whatever stopped the write
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def _finite(value: Any, where: str, replaced: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        replaced.append(f"{where} ({value})")
        return None
    if isinstance(value, str):
        return readable(value)
    if isinstance(value, dict):
        return {readable(str(k)): _finite(v, f"{where}.{k}" if where else str(k), replaced)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v, f"{where}[{i}]", replaced) for i, v in enumerate(value)]
    return value


def strict_json(obj: Any) -> tuple[Any, list[str]]:
    """``obj`` with every non-finite float replaced by None, and where each one was
    (``data.monitor.interval_s (inf)``). Other values are left as they are."""
    replaced: list[str] = []
    return _finite(obj, "", replaced), replaced


def dumps_strict(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that can never write Infinity or NaN (non-finite numbers -> null)."""
    clean, _ = strict_json(obj)
    return json.dumps(clean, allow_nan=False, default=str, **kwargs)
