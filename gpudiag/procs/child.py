"""Child-process entry point: ``python -m gpudiag.procs.child <probe> <config.json> <result.json>``.

``probe`` names a module under gpudiag.probes (``placement``) or a dotted module path;
the module's ``run(config: dict) -> dict`` returns JSON-able data. The result file holds
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_type", "error", "traceback"}``
and is written atomically, so the parent never reads half of one.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from gpudiag.files import atomic_write_text, dumps_strict


def _write(path: Path, payload: dict[str, Any]) -> None:
    atomic_write_text(path, dumps_strict(payload, indent=2))


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m gpudiag.procs.child PROBE CONFIG_JSON RESULT_JSON", file=sys.stderr)
        return 2
    probe, config_path, result_path = argv[0], Path(argv[1]), Path(argv[2])
    module_name = probe if "." in probe else f"gpudiag.probes.{probe}"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        module = importlib.import_module(module_name)
        result = module.run(config)
    except Exception as exc:
        first = str(exc).strip().splitlines()
        _write(result_path, {
            "ok": False,
            "error_type": type(exc).__name__,
            "error": first[0] if first else type(exc).__name__,
            "result": getattr(exc, "partial_result", None),
            "traceback": traceback.format_exc(),
        })
        traceback.print_exc()
        return 1
    _write(result_path, {"ok": True, "result": result})
    sys.stdout.flush()
    sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
