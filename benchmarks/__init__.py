"""The benchmarks: benchmark.py (``python3 tasks.py benchmark``) and its sections, the streams'
own (*_benchmark.py), and the baselines they time the tap against (raw_loop.py, plain_sdk_tap.py).
Each runs as a module from the repository's root (``python -m benchmarks.tasks_benchmark``):
they import one another and the harness as packages. Never shipped, never run by the tests.
"""
