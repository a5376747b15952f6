# Two commands set everything up on a fresh machine:
#   make demo   -- .venv + package (and matplotlib), then train on the built-in synthetic graph and draw its report
#   make test   -- .venv + package with the test extra, then the whole test suite
#   make docs   -- .venv + package with the docs extra, then the documentation site into site/ (mkdocs --strict)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# torch is pinned and installed first: on the project's machines this resolves to the CPU build on
# disk, while an unpinned torch (directly or via a dependency) would pull several GB of CUDA wheels.
TORCH  := torch==2.13.0

.PHONY: demo test bench docs install clean

$(VENV)/.base:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH)
	touch $@

$(VENV)/.installed: $(VENV)/.base pyproject.toml
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-plot: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[plot]'
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

$(VENV)/.installed-docs: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $@

$(VENV)/.installed-bench: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[bench,plot]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed-plot
	$(VENV)/bin/fullgraph train --out runs/demo --overwrite
	$(VENV)/bin/fullgraph report runs/demo --out runs/demo/report

test: $(VENV)/.installed-test
	$(PY) -m pytest -q

bench: $(VENV)/.installed-bench
	$(PY) benchmarks/single_process.py

# NO_MKDOCS_2_WARNING silences mkdocs-material's banner about MkDocs 2.0 (a notice, not a build warning).
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) runs .pytest_cache site
