"""The project's commands that are neither the tap nor a benchmark: the demo and mutation
testing, run as modules from the repository's root (``python -m scripts.demo``) so that they
import the harness; the dbt utilities' commands and the plugin definition, run by their paths
(meltano.yml, tasks.py), import none of it.
"""
