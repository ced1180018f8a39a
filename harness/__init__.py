"""The harness the tests, the demo and the benchmarks share, written once: the emulator started
as a process, a tenant mapped to the tap's settings, a PostgreSQL of the project's own where none
answers, and how a benchmark side is started and timed. Never shipped: the wheel holds the tap.
"""
