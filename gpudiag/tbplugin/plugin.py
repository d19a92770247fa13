"""The GPUDIAG TensorBoard plugin: a dynamic plugin (TensorBoard's ``base_plugin.TBPlugin``,
the ``tensorboard_plugins`` entry point in pyproject.toml), like xprof's.

Thin: its routes return gpudiag.rundir's runs (load_run, list_runs: the one reader of a run
directory) as the JSON gpudiag.tbplugin.views builds (written down in http_api.md), and
serve the page (static/index.js, an ES module, and static/style.css) from the package:
no build step, nothing fetched from another host. Routes, under ``/data/plugin/gpudiag``:

    /index.js, /tried.js,   the page (tried.js: the card of a try run's fixes, imported
    /style.css              by index.js)
    /runs                   {"runs": [run summaries, newest first], "default": id}: the
                            default is the newest run that answers a question (gpudiag.
                            rundir.opens_on: a program run or a probe, not a diff record)
    /run?id=<run id>        one run's view (gpudiag.tbplugin.views.run_view)
    /diff?a=<id>&b=<id>     what changed from run a to run b (gpudiag.tbplugin.compare)

A run id is a run directory relative to TensorBoard's logdir, checked as `gpudiag mcp`
checks a name (gpudiag.rundir.confine.confined_dir: inside the logdir, nothing under it
leading out); one that leaves the logdir or is not a run (a NUL byte, a name too long, a
symlink loop, a report.json that does not match its schema: gpudiag.rundir.load_run) is a
400 with one line, never a 500; /runs lists a bad run with why (``status`` unreadable) and
the others as they are. Every response carries
``X-Content-Type-Options: nosniff``. TensorBoard's ``--logdir_spec`` naming one directory
serves that one; naming several, the tab is inactive and says why once (the plugin reads
one logdir); with neither, there is no logdir and nothing is read (never the working
directory). No TensorFlow is imported here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from gpudiag import layout
from gpudiag.files import readable
from gpudiag.rundir import RunDirError, load_run, scan_runs
from gpudiag.rundir.confine import confined_dir, walk
from gpudiag.tbplugin import compare, ids, views

_LOG = logging.getLogger(__name__)
#: headers of every response: nothing cached, no content sniffing
_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
MAX_ID_CHARS = 1024

PLUGIN_NAME = "gpudiag"
TAB_NAME = "GPUDIAG"
_STATIC = {"/index.js": "application/javascript", "/tried.js": "application/javascript",
           "/style.css": "text/css"}


def _json(data: Any, status: int = 200) -> wrappers.Response:
    return wrappers.Response(json.dumps(data, allow_nan=False, default=str),
                             status=status, content_type="application/json",
                             headers=_HEADERS)


def _error(line: str) -> wrappers.Response:
    return _json({"error": readable(line).replace("\0", "\\0")[:400]}, 400)


def _wsgi(handler: Callable[[wrappers.Request], wrappers.Response]) -> Any:
    """A WSGI application (what TensorBoard routes to) answering with ``handler``: a run
    it cannot read is a one-line 400, whatever the run holds (never a 500)."""
    def app(environ: dict[str, Any], start_response: Any) -> Any:
        request = wrappers.Request(environ)
        try:
            response = handler(request)
        except RunDirError as exc:
            response = _error(exc.message)
        except Exception as exc:  # a value no check foresaw: this request only, said
            _LOG.warning("gpudiag: %s: %s: %s", request.full_path, type(exc).__name__, exc)
            response = _error(f"{request.path.rsplit('/', 1)[-1]}: the run could not be "
                              f"shown ({type(exc).__name__}: {str(exc)[:200]})")
        return response(environ, start_response)
    return app


def logdirs(context: base_plugin.TBContext) -> tuple[Path | None, str | None]:
    """The one logdir the plugin reads, or None and why: ``--logdir``, or a
    ``--logdir_spec`` naming one directory; several named: not served (module
    docstring); neither: none (never the working directory)."""
    if context.logdir:
        return Path(context.logdir), None
    spec = getattr(context.flags, "logdir_spec", None) if context.flags else None
    if not spec:
        return None, "no --logdir given"
    from tensorboard.backend.event_processing.data_ingester import _parse_event_files_spec

    dirs = list(_parse_event_files_spec(spec))
    if len(dirs) == 1:
        return Path(dirs[0]), None
    return None, (f"--logdir_spec names {len(dirs)} directories; the GPUDIAG tab reads one "
                  "logdir: start TensorBoard with --logdir DIR (or gpudiag tensorboard DIR) "
                  "for gpudiag's runs")


class GpudiagPlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext) -> None:
        logdir, self._why_none = logdirs(context)
        self._logdir = logdir or Path("/nonexistent-gpudiag-logdir")
        if self._why_none is not None and context.flags is not None and \
                getattr(context.flags, "logdir_spec", None):
            _LOG.warning("gpudiag: the GPUDIAG tab is inactive: %s", self._why_none)

    def get_plugin_apps(self) -> dict[str, Any]:
        routes = {**dict.fromkeys(_STATIC, self._static), "/runs": self._runs,
                  "/run": self._run, "/diff": self._diff}
        return {path: _wsgi(handler) for path, handler in routes.items()}

    def is_active(self) -> bool:
        return self._why_none is None and self._logdir.is_dir() and bool(
            walk(self._logdir, lambda name: name == layout.REPORT_JSON).found)

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name=TAB_NAME,
                                            disable_reload=False)

    def _static(self, request: wrappers.Request) -> wrappers.Response:
        name = request.path.rsplit("/", 1)[-1]
        body = resources.files("gpudiag.tbplugin").joinpath("static", name).read_bytes()
        return wrappers.Response(body, content_type=_STATIC[f"/{name}"], headers=_HEADERS)

    def _load(self, run_id: str | None) -> Any:
        if self._why_none is not None:
            raise RunDirError(f"the GPUDIAG tab is inactive: {self._why_none}")
        if not run_id:
            raise RunDirError("no run id given")
        if len(run_id) > MAX_ID_CHARS or "\0" in run_id:
            raise RunDirError(f"{run_id[:60]!r}: not a run id of this logdir (a NUL byte, "
                              f"or over {MAX_ID_CHARS} characters)")
        try:
            path = ids.id_path(run_id, self._logdir)
        except (OSError, ValueError) as exc:
            raise RunDirError(f"{run_id[:160]}: not a run of this logdir ({exc})") from None
        return load_run(confined_dir(self._logdir, path))

    def _runs(self, request: wrappers.Request) -> wrappers.Response:
        if self._why_none is not None:
            raise RunDirError(f"the GPUDIAG tab is inactive: {self._why_none}")
        runs, bad = scan_runs(self._logdir)
        return _json(views.runs_view(runs, self._logdir, bad))

    def _run(self, request: wrappers.Request) -> wrappers.Response:
        run = self._load(request.args.get("id"))
        return _json(views.run_view(run, self._logdir))

    def _diff(self, request: wrappers.Request) -> wrappers.Response:
        a, b = self._load(request.args.get("a")), self._load(request.args.get("b"))
        return _json(compare.diff_view(a, b, self._logdir))


class GpudiagLoader(base_plugin.TBLoader):
    """What the ``tensorboard_plugins`` entry point names: makes the plugin for a logdir."""

    def load(self, context: base_plugin.TBContext) -> GpudiagPlugin:
        return GpudiagPlugin(context)
