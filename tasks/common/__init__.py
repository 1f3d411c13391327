"""What every binary, comparison and demo of `tasks/` shares: the algorithm
registry and its configurations (`registry`), `run` (the one way into a
run) and the mixing probe, the training flags (`training_flags`), the
commands' entry point and flag conventions (`command`), the tables and
figures they write (`reports`), the benchmark binaries
(`benchmark`), the oracle's pooled task (`oracle`), data sources and their
offline fixtures (`sources`, `fixtures`, and `synthetic_data` for
`--use_synthetic_data`), and the Keras models and FLOP
counts the tasks share (`keras_models`, `flops`)."""
