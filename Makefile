# Two entry points: `make test` and `make demo`. Both build .venv from the
# fully pinned lock on first use (see README, "Why a lock installed with --no-deps").
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo bench install clean

$(STAMP): requirements/lock.txt setup.py setup.cfg
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-deps -r requirements/lock.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

# Two pytest workers, one a core (each has its own TFF worker and binary
# zygote). --dist loadscope keeps a module's (or class's) tests on one
# worker, so a process a module builds once is built once, not once a worker.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadscope tests

demo: $(STAMP)
	$(PY) -m tasks.digits.demo --output_dir=demo_output

bench: $(STAMP)
	$(PY) bench/round_time.py

clean:
	rm -rf $(VENV) demo_output
