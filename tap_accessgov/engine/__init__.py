"""What the streams are built on, one concern a module: every stream's request path and
shared parts (stream.py), time ranges read in resumable windows (time_ranges.py: the cut, the
split, the record of completed windows, the reader; windowed.py: the streams read that way),
partitions fetched ahead (partitions.py), the run's one owner of concurrency and the threads
it runs requests in (concurrency.py), full-table snapshots (snapshots.py), BATCH files where
they are safe (batch_files.py), a list read once per run (read_once.py) and an operation the
service may refuse (refused.py). ``streams/`` holds the streams alone."""
