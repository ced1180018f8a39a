"""The project's commands that are not the tap: the demo and mutation testing, run as modules
from the repository's root (``python -m scripts.demo``) so that they import the harness; the
dbt utilities' commands and the plugin definition, run by their paths, import none of it.
"""
