"""The GPUDIAG TensorBoard plugin: a dynamic plugin (TensorBoard's ``base_plugin.TBPlugin``,
the ``tensorboard_plugins`` entry point in pyproject.toml), like xprof's.

Thin: its routes return gpudiag.rundir's runs (load_run, list_runs: the one reader of a run
directory) as the JSON gpudiag.tbplugin.views builds (written down in http_api.md), and
serve the page (static/index.js, an ES module, and static/style.css) from the package:
no build step, nothing fetched from another host. Routes, under ``/data/plugin/gpudiag``:

    /index.js, /style.css   the page
    /runs                   {"runs": [run summaries, newest first], "default": id}: the
                            default is the newest run that answers a question (views.
                            opens_on: a program run or a probe, not a diff record)
    /run?id=<run id>        one run's view (gpudiag.tbplugin.views.run_view)
    /diff?a=<id>&b=<id>     what changed from run a to run b (gpudiag.tbplugin.compare)

A run id is a run directory relative to TensorBoard's logdir; one that leaves the logdir or
is not a run is a 400 with one line. No TensorFlow is imported here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from gpudiag import layout
from gpudiag.rundir import RunDirError, list_runs, load_run
from gpudiag.tbplugin import views

PLUGIN_NAME = "gpudiag"
TAB_NAME = "GPUDIAG"
_STATIC = {"/index.js": "application/javascript", "/style.css": "text/css"}


def _json(data: Any, status: int = 200) -> wrappers.Response:
    return wrappers.Response(json.dumps(data, allow_nan=False, default=str),
                             status=status, content_type="application/json",
                             headers={"Cache-Control": "no-store"})


def _wsgi(handler: Callable[[wrappers.Request], wrappers.Response]) -> Any:
    """A WSGI application (what TensorBoard routes to) answering with ``handler``."""
    def app(environ: dict[str, Any], start_response: Any) -> Any:
        return handler(wrappers.Request(environ))(environ, start_response)
    return app


class GpudiagPlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext) -> None:
        self._logdir = Path(context.logdir or ".")

    def get_plugin_apps(self) -> dict[str, Any]:
        routes = {**dict.fromkeys(_STATIC, self._static), "/runs": self._runs,
                  "/run": self._run, "/diff": self._diff}
        return {path: _wsgi(handler) for path, handler in routes.items()}

    def is_active(self) -> bool:
        return self._logdir.is_dir() and next(
            self._logdir.rglob(layout.REPORT_JSON), None) is not None

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name=TAB_NAME,
                                            disable_reload=False)

    def _static(self, request: wrappers.Request) -> wrappers.Response:
        name = request.path.rsplit("/", 1)[-1]
        body = resources.files("gpudiag.tbplugin").joinpath("static", name).read_bytes()
        return wrappers.Response(body, content_type=_STATIC[f"/{name}"],
                                 headers={"Cache-Control": "no-store"})

    def _load(self, run_id: str | None) -> Any:
        if not run_id:
            raise RunDirError("no run id given")
        path = (self._logdir / run_id).resolve()
        if not path.is_relative_to(self._logdir.resolve()):
            raise RunDirError(f"{run_id} is outside the logdir")
        return load_run(path)

    def _runs(self, request: wrappers.Request) -> wrappers.Response:
        try:
            runs = list_runs(self._logdir)
        except RunDirError as exc:
            return _json({"error": exc.message}, 400)
        return _json(views.runs_view(runs, self._logdir))

    def _run(self, request: wrappers.Request) -> wrappers.Response:
        try:
            run = self._load(request.args.get("id"))
        except RunDirError as exc:
            return _json({"error": exc.message}, 400)
        return _json(views.run_view(run, self._logdir))

    def _diff(self, request: wrappers.Request) -> wrappers.Response:
        from gpudiag.tbplugin import compare

        try:
            a, b = self._load(request.args.get("a")), self._load(request.args.get("b"))
        except RunDirError as exc:
            return _json({"error": exc.message}, 400)
        return _json(compare.diff_view(a, b, self._logdir))


class GpudiagLoader(base_plugin.TBLoader):
    """What the ``tensorboard_plugins`` entry point names: makes the plugin for a logdir."""

    def load(self, context: base_plugin.TBContext) -> GpudiagPlugin:
        return GpudiagPlugin(context)
