"""What every binary, comparison and demo of `tasks/` shares to run an
experiment: the algorithm registry and configuration, `run`, the flags, and
the outputs."""
