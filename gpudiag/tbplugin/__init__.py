"""The GPUDIAG tab in TensorBoard (a dynamic plugin): plugin.py (the routes and the
loader the ``tensorboard_plugins`` entry point names), views.py (what the page shows of a
run, from gpudiag.rundir.load_run), compare.py (two runs side by side, from `gpudiag
diff`'s record), ids.py (a run's id in the routes and back: non-UTF-8 names escaped),
static/ (the page: one ES module and a style sheet, plain SVG)."""
