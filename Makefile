# Two entry points: `make test` and `make demo`. Both build .venv from the
# fully pinned lock on first use (see README, "Why a lock installed with --no-deps").
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo bench docs install install-gpu clean

$(STAMP): requirements/lock.txt setup.py setup.cfg tff_mixed/_loopback_bind.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-deps -r requirements/lock.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

# Optional: TensorFlow's CUDA libraries, for the in-process runtime on a GPU
# (docs/execution.md, "Runtimes").
install-gpu: $(STAMP)
	$(PY) -m pip install --quiet --no-deps -r requirements/gpu-lock.txt

# Two pytest workers, one a core (each has its own TFF worker and binary
# zygote). --dist worksteal splits the suite into two contiguous halves
# (a module's tests mostly together), then lets an idle
# worker take the other's remaining tests: a module's processes are mostly
# built once, and neither worker idles at the end (860 s here, against 922 s
# with loadscope and 935 s with the default load). A third worker gains
# nothing on two cores: 854.7 s against 855.7 s with two, the same suite the
# same day, its tests' own times 1.49x longer (2,487 against 1,671 s).
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist worksteal tests

demo: $(STAMP)
	$(PY) -m tasks.digits.demo --output_dir=demo_output

# The API reference (pdoc, from the docstrings) in build/api/; the suite
# builds it too (tests/test_api_reference.py), so it cannot rot.
docs: $(STAMP)
	$(PY) docs/build_api_reference.py build/api

bench: $(STAMP)
	$(PY) bench/round_time.py

clean:
	rm -rf $(VENV) demo_output
