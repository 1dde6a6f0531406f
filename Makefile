# Every target sets up what it needs: a fresh clone needs only Python 3.11+ and make.
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed-stamp
PYTHON  ?= python3

.PHONY: demo test torture bench bench-compare lint docs clean
COMPARE := .venv-compare
COMPARE_STAMP := $(COMPARE)/.installed-stamp

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)  ## the main job: a scripted walk-through on embedded SQLite, then the chat
	$(VENV)/bin/relaystate demo run --dir demo-data
	@if [ -t 0 ]; then \
		echo; echo "Now talk to the agents yourself (Ctrl-C to leave; 'continue' to come back):"; \
		$(VENV)/bin/relaystate chat --user you --store sqlite:///demo-data/chat.db \
			--ledger demo-data/chat-ledger.db; \
		echo; printf "Open the dashboard and the HTTP API on http://127.0.0.1:8700/ ? [y/N] "; \
		read answer; case "$$answer" in [yY]*) \
			$(VENV)/bin/relaystate serve --store sqlite:///demo-data/chat.db \
				--ledger demo-data/chat-ledger.db;; \
		*) echo "Later: $(VENV)/bin/relaystate serve --store sqlite:///demo-data/chat.db --ledger demo-data/chat-ledger.db";; \
		esac; \
	fi

test: $(STAMP)  ## the whole test suite (apt-installs what its tests need where it can)
	@tools/test-deps.sh
	$(VENV)/bin/pytest

torture: $(STAMP)  ## a fleet of API and worker hosts (network namespaces, root) over a replicated PostgreSQL through failover, partitions, clock skew and kills; then the history checker (a few minutes)
	@tools/test-deps.sh
	RELAYSTATE_TORTURE=1 $(VENV)/bin/pytest tests/fleet/test_torture.py -s

bench: $(STAMP)  ## per-turn cost vs a raw append as history grows; the stores side by side; understanding; HTTP API load: turns/s vs /healthz, 50 clients; a served turn vs one durable insert a request (wrk); memory: LoCoMo retrieval, its weights leave-one-conversation-out (LoCoMo dev and bench/data/dev2.json), updates in the context, context latency at 100,000 memories, Chinese retrieval; a rolling upgrade under load behind nginx (BENCH_ARGS=--quick)
	@tools/test-deps.sh
	$(PY) bench/turns.py $(BENCH_ARGS)
	$(PY) bench/stores.py $(BENCH_ARGS)
	$(PY) bench/conversation.py $(BENCH_ARGS)
	$(PY) bench/understanding.py --set all $(BENCH_ARGS)
	$(PY) bench/api_load.py $(BENCH_ARGS)
	$(PY) bench/http_limit.py $(BENCH_ARGS)
	$(PY) bench/locomo.py $(BENCH_ARGS)
	$(PY) bench/locomo_loo.py $(BENCH_ARGS)
	$(PY) bench/memory_updates.py $(BENCH_ARGS)
	$(PY) bench/memory_scale.py $(BENCH_ARGS)
	$(PY) bench/memory_zh.py $(BENCH_ARGS)
	$(PY) bench/rolling_upgrade.py $(BENCH_ARGS)

$(COMPARE_STAMP): bench/compare/requirements.txt
	$(PYTHON) -m venv $(COMPARE)
	$(COMPARE)/bin/python -m pip install --quiet --upgrade pip
	$(COMPARE)/bin/python -m pip install --quiet -r bench/compare/requirements.txt
	touch $(COMPARE_STAMP)

bench-compare: $(STAMP) $(COMPARE_STAMP)  ## relaystate vs LangGraph (SqliteSaver, PostgresSaver) and DBOS, beside the raw limit: a turn as history grows, resume, side effects, duplicates under SIGKILL, HTTP; tables, bench/results/compare.json and charts, BENCHMARKS.md (BENCH_ARGS=--quick)
	@tools/test-deps.sh
	$(PY) bench/compare/run.py $(BENCH_ARGS)

lint: $(STAMP)  ## ruff (format + lint) and mypy --strict on src/
	$(VENV)/bin/ruff format --check src tests bench tools examples docs
	$(VENV)/bin/ruff check src tests bench tools examples docs
	$(VENV)/bin/mypy

docs: $(STAMP)  ## the documentation site in site/, offline, strict (every link checked)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	@echo "the site is in site/ (open site/index.html)"

clean:
	rm -rf $(VENV) $(COMPARE) demo-data site .pytest_cache .mypy_cache .ruff_cache .hypothesis
