# 100 days of CUDA. `make help` lists the targets.
.DEFAULT_GOAL := help
SHELL := /bin/bash
VENV := .venv
# Use python3 as it is when it already has the packages (e.g. the GPU machine, which has no
# network); otherwise a virtual environment that `make setup` creates.
PY := $(shell python3 -c "import numpy, pytest, tabulate" 2>/dev/null && echo python3 || echo $(VENV)/bin/python)
PYTEST := $(PY) -m pytest -q -rs
N ?=

.PHONY: help setup day test-all test-cpu test-gpu bench progress plots compile ncu sanitize clean

help:
	@echo "make setup            create/reuse the environment (pycuda only where a CUDA driver exists)"
	@echo "make day N=5          run day 5: every version checked and timed (python run_day.py 5)"
	@echo "make test-all         every test: CPU tests always, GPU tests where there is a GPU"
	@echo "make test-cpu         only the tests that need no GPU"
	@echo "make test-gpu         only the GPU tests; fails (does not skip) without a GPU"
	@echo "make bench [SAVE=1]   every built day: ragged checks + benchmark sizes (SAVE=1 writes results/)"
	@echo "make progress         regenerate progress.md from days/ and results/"
	@echo "make plots            redraw every day's figures from results/ (needs matplotlib)"
	@echo "make compile          nvcc every kernel.cu, print registers/shared memory/spills"
	@echo "make ncu N=5          Nsight Compute on day 5's best version"
	@echo "make sanitize N=5     compute-sanitizer memcheck + racecheck on day 5's checks"
	@echo "make clean            remove caches and the virtual environment"

setup: $(if $(filter $(VENV)/bin/python,$(PY)),$(VENV)/.installed)
	@if python3 -c "import ctypes; ctypes.CDLL('libcuda.so.1')" 2>/dev/null \
	    && ! $(PY) -c "import pycuda" 2>/dev/null; then \
	  echo "CUDA driver found: installing pycuda"; \
	  $(PY) -m pip install -q -r requirements-gpu.txt; \
	fi

$(VENV)/.installed: requirements.txt
	@[ -x $(VENV)/bin/python ] || python3 -m venv --system-site-packages $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

day: setup
	@[ -n "$(N)" ] || { echo "usage: make day N=5"; exit 2; }
	$(PY) run_day.py $(N)

test-all: setup
	$(PYTEST) tests

test-cpu: setup
	$(PYTEST) -m "not gpu" tests

# why there is no usable GPU ('' when there is one); read when test-gpu runs
NO_GPU = $(shell $(PY) -c "from common.gpu import gpu_status; ok, why = gpu_status(); print('' if ok else why)")

test-gpu: setup
	$(if $(NO_GPU),$(error make test-gpu needs a CUDA GPU and there is none: $(NO_GPU)))
	REQUIRE_GPU=1 $(PYTEST) -m gpu tests

bench: setup
	$(PY) run_day.py --all --bench $(if $(SAVE),--save)

progress: setup
	$(PY) -m common.progress

plots: setup
	$(PY) -m common.plot

compile: setup
	$(PY) run_day.py --all --regs

ncu: setup
	@[ -n "$(N)" ] || { echo "usage: make ncu N=5"; exit 2; }
	$(PY) run_day.py $(N) --ncu

sanitize: setup
	@[ -n "$(N)" ] || { echo "usage: make sanitize N=5"; exit 2; }
	$(PY) run_day.py $(N) --sanitize

clean:
	rm -rf $(VENV) .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
