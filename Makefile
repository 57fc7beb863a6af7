# One command per developer task. `make run` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run test check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,data,postgres]'
	touch $(STAMP)

install: $(STAMP)

# Chat with a model when an endpoint is configured; otherwise the offline demo.
run: $(STAMP)
	@if [ -n "$${OPENAI_API_KEY:-}$${OPENAI_BASE_URL:-}" ]; then \
		$(VENV)/bin/cove chat; \
	else \
		echo "No model endpoint configured (OPENAI_API_KEY / OPENAI_BASE_URL): running the offline demo."; \
		$(VENV)/bin/cove demo; \
	fi

# Four test processes: most tests wait on subprocesses, browsers and terminals, not on a CPU.
test: $(STAMP)
	$(PY) -m pytest -q -n 4

check: $(STAMP)
	$(PY) -m ruff format --check cove tests bench
	$(PY) -m ruff check cove tests bench
	$(PY) -m mypy cove
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	@for script in bench/*_bench.py; do \
		echo "== $$script"; \
		$(PY) $$script || exit 1; \
	done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
