# One command per developer task. `make run` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run test check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,all]'
	touch $(STAMP)

# The official MCP Inspector (npm, pinned by its lock file), whose command-line mode the MCP
# tests drive: installed here, never while tests run. Without npm its tests skip, saying so.
INSPECTOR_DIR := tests/channels/mcp/inspector
INSPECTOR     := $(INSPECTOR_DIR)/node_modules/.installed

$(INSPECTOR): $(INSPECTOR_DIR)/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(INSPECTOR_DIR) --no-audit --no-fund --ignore-scripts --loglevel=error \
			&& touch $@; \
	else \
		echo "npm is not installed: the MCP Inspector tests will be skipped"; \
	fi

# axe-core (npm, pinned by its lock file), which the web's accessibility tests inject into the
# pages: installed here, never while tests run. Without npm those tests skip, saying so.
AXE_DIR := tests/channels/web/axe
AXE     := $(AXE_DIR)/node_modules/.installed

$(AXE): $(AXE_DIR)/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix $(AXE_DIR) --no-audit --no-fund --ignore-scripts --loglevel=error \
			&& touch $@; \
	else \
		echo "npm is not installed: the accessibility tests will be skipped"; \
	fi

install: $(STAMP) $(INSPECTOR) $(AXE)

# Chat with a model when an endpoint is configured; otherwise the offline demo.
run: $(STAMP)
	@if [ -n "$${OPENAI_API_KEY:-}$${OPENAI_BASE_URL:-}" ]; then \
		$(VENV)/bin/cove chat; \
	else \
		echo "No model endpoint configured (OPENAI_API_KEY / OPENAI_BASE_URL): running the offline demo."; \
		$(VENV)/bin/cove demo; \
	fi

# Four test processes: most tests wait on subprocesses, browsers and terminals, not on a CPU.
test: $(STAMP) $(INSPECTOR) $(AXE)
	$(PY) -m pytest -q -n 4

check: $(STAMP)
	$(PY) -m ruff format --check cove tests bench
	$(PY) -m ruff check cove tests bench
	$(PY) -m mypy cove
	$(PY) -m mypy --follow-imports=silent bench
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	@for script in bench/*_bench.py; do \
		echo "== $$script"; \
		$(PY) $$script || exit 1; \
	done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
