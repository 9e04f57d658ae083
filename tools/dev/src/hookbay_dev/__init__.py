"""hookbay's development harness, shared by the tests (``tests/``, ``*/tests``) and the scripts
(``scripts/``): the one launcher for service processes (``processes``), polling with a deadline
(``waiting``) and model factories (``factories``).

Why an installed package: the tests run under pytest with the repository root on ``sys.path``,
while the scripts run as ``python scripts/<name>.py`` (as ``make`` and ``docs/`` print them),
which puts ``scripts/`` there instead. Code both need therefore lives in neither folder but in
this package, installed (editable) into the development environment as a path dependency of the
``dev`` group, so either side imports it by name with no ``sys.path`` edits and no change to how
a script is started. It is not a workspace member, so images (``uv sync --no-dev``) never get it.
"""
