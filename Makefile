# tfnorm developer commands. `make demo` and `make test` set everything up on a
# fresh machine; see README.md.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
# --durations: every run's log names its slowest tests, so CI's time can be
# read from its output.
PYTEST_ARGS ?= -x -q --durations=15

.PHONY: hf-reference hf-fixtures venv test test-container test-slow test-legacy test-tf29 test-compat test-slow-compat lint format bench bench-keras3 bench-tf29 bench-hf bench-lm-reference bench-reference-check claims demo demo-lm system-deps clean

# tf-keras (the legacy runtime) and keras-hub (bench/encoder.py and the
# keras-hub tests of tests/models and tests/callbacks) are installed with
# --no-deps: tf-keras 2.21 requires `tensorflow`, and keras-hub requires
# tensorflow-text, which requires `tensorflow` too; either would bring the
# full wheel beside tensorflow-cpu (same `tensorflow/` folder, two
# distributions). The `hub` extra brings keras-hub's other dependencies
# (tf-keras has none besides TensorFlow). tools/pip_check.py is `pip check`
# less exactly those two known lines.
$(INSTALLED): setup.cfg pyproject.toml tools/constraints.txt tools/pip_check.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c tools/constraints.txt -e ".[cpu,dev,hub]"
	$(PY) -m pip install -q -c tools/constraints.txt --no-deps tf-keras keras-hub
	$(PY) tools/pip_check.py
	touch $(INSTALLED)

venv: $(INSTALLED)

# The Hugging Face reference stack, in a venv of its own (never the
# TensorFlow venv, never the user-facing install): CPU PyTorch (2.13.0 is the
# CPU build this machine serves; a newer unpinned one would be a CUDA build
# of several GB), transformers, safetensors, tokenizers. It makes
# tests/data/hf (`make hf-fixtures`), and the tests that run transformers live
# (tests/models/decoder/test_hf.py, ...) use it when it exists, skipping
# otherwise.
HF_VENV ?= .venv-hf
HF_TORCH ?= torch==2.13.0
$(HF_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(HF_VENV)
	$(HF_VENV)/bin/python -m pip install -q --upgrade pip
	$(HF_VENV)/bin/python -m pip install -q "$(HF_TORCH)"
	$(HF_VENV)/bin/python -m pip install -q "$(HF_TORCH)" transformers safetensors tokenizers numpy
	touch $(HF_VENV)/.installed

hf-reference: $(HF_VENV)/.installed

# Rewrites tests/data/hf (tiny random checkpoints and their outputs).
hf-fixtures: hf-reference
	$(HF_VENV)/bin/python tools/make_hf_fixtures.py --out tests/data/hf

# Debian packages some tests need (sshd, debootstrap, ...); needs root.
system-deps:
	grep -v '^#' tools/apt-packages.txt | xargs apt-get install -y -q

# The suite's test files are shared out to TEST_WORKERS processes
# (pytest-xdist; each file stays in one process, so module fixtures are built
# once): most tests keep one core busy. TEST_WORKERS=0 runs it in-process.
# With -q, tests/progress.py prints a line per test file (time since the start,
# file k of n) between pytest's dots.
TEST_WORKERS ?= 2
test: venv
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The container built and run for real (root): a private rootful Podman engine
# with Compose v2, stand-ins for TensorFlow's GPU Jupyter images, the README's
# workflow end to end. See docs/container-testing.md.
# Its two modules (one per stand-in base) run side by side, one per process;
# the second waits for the first's image build and notebooks
# (tests/container/harness.py). CONTAINER_WORKERS=0: one after the other.
# --confcutdir leaves out tests/conftest.py: it loads TensorFlow, which these
# processes do not use (seconds each, more with a cold page cache).
CONTAINER_WORKERS ?= 2
test-container: venv
	tools/container/engine.sh run $(PY) -m pytest -p no:cacheprovider -q \
		-n $(CONTAINER_WORKERS) --dist loadfile --confcutdir tests/container \
		-m container tests/container

# The legacy runtime runs the library's suite, not the tools built on it: the
# command line (tests/cli), the experiments behind `tfnorm compare`
# (tests/experiments) and the benchmark scripts (tests/bench, which `make
# bench` runs in keras3 and tf29 only). Those are the same Python code on the
# same interpreter as keras3's; what they call of Keras (the trainer, the
# workloads, saving, generation, the optimizers) is tested in legacy by
# tests/training, tests/models, tests/generation, tests/inference and
# tests/optim, and the tools themselves under Keras 2 by tf29, which runs
# everything.
LEGACY_LEAVES_OUT := tests/cli tests/experiments tests/bench
# The slow tests and each compatibility runtime's suite run as parts, one
# process each (`--suite-part K/N`, tests/suite_parts.py): one process over a
# whole suite grows past 8 GB, and two side by side starved the subprocesses
# tests start of memory. `make test-legacy` (or -tf29, -slow) runs one
# group's parts; CI runs all of them as one pool, two at a time
# (`test-slow-compat`), so no core waits for the longest part of a group.
SLOW_PARTS ?= 4
LEGACY_PARTS ?= 3
TF29_PARTS ?= 4
parts_of = $(foreach k,$(shell seq 1 $(2)),$(1)-part-$(k))
SLOW_TARGETS := $(call parts_of,test-slow,$(SLOW_PARTS))
LEGACY_TARGETS := $(call parts_of,test-legacy,$(LEGACY_PARTS))
TF29_TARGETS := $(call parts_of,test-tf29,$(TF29_PARTS))
# PART_JOBS parts at a time; each part's log is printed whole when it ends;
# -k runs every part even after a failure, and make still fails at the end.
PART_JOBS ?= 2
RUN_PARTS = $(MAKE) -k -j$(PART_JOBS) --output-sync=target

# Pattern rules below are not .PHONY: make skips them for phony targets (no
# file of these names exists).

# Long runs deselected from `make test`: the full literature checks, long
# training, the kill -9 and full-disk trials, `make demo` on one seed.
test-slow:
	$(RUN_PARTS) $(SLOW_TARGETS)

test-slow-part-%: venv
	$(PY) -m pytest -q --durations=15 -m slow --suite-part $*/$(SLOW_PARTS)

test-legacy:
	$(RUN_PARTS) $(LEGACY_TARGETS)

test-legacy-part-%: venv
	TF_USE_LEGACY_KERAS=1 $(PY) -m pytest $(PYTEST_ARGS) $(addprefix --ignore=,$(LEGACY_LEAVES_OUT)) --suite-part $*/$(LEGACY_PARTS)

test-tf29:
	$(RUN_PARTS) $(TF29_TARGETS)

test-tf29-part-%:
	tools/tf29-root.sh run python -m pytest $(PYTEST_ARGS) --suite-part $*/$(TF29_PARTS)

# The two runtimes side by side (much of each suite waits on subprocesses).
test-compat:
	$(RUN_PARTS) $(TF29_TARGETS) $(LEGACY_TARGETS)

# CI: the slow parts and both runtimes' parts in one pool.
test-slow-compat:
	$(RUN_PARTS) $(SLOW_TARGETS) $(TF29_TARGETS) $(LEGACY_TARGETS)

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/vermin --no-tips --violations --eval-annotations -t=3.8- tfnorm docker

format: venv
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

# Ratios against Keras's own layers in both runtimes (keras3, then tf29), wall
# clock, 3 repetitions each; docs/benchmarks.md says how to read them. Each
# script warns loudly when the load average is above half the cores; record
# figures from an idle machine only (BENCH_ARGS=--require-idle refuses a busy
# one). Tables also go to $(BENCH_DIR). About 65-70 minutes on 2 cores, plus
# the two reference benches below (about 1 hour together).
BENCH_DIR ?= runs/bench
BENCH_ARGS ?=
bench: bench-reference-check bench-keras3 bench-tf29 bench-hf bench-lm-reference

bench-keras3: venv
	mkdir -p $(BENCH_DIR)
	$(PY) bench/norms.py $(BENCH_ARGS) --markdown $(BENCH_DIR)/keras3-norms.md --json $(BENCH_DIR)/keras3-norms.json
	$(PY) bench/encoder.py --xla $(BENCH_ARGS) --markdown $(BENCH_DIR)/keras3-encoder.md --json $(BENCH_DIR)/keras3-encoder.json
	$(PY) bench/decoder.py --xla $(BENCH_ARGS) --markdown $(BENCH_DIR)/keras3-decoder.md --json $(BENCH_DIR)/keras3-decoder.json
	$(PY) bench/norm_share.py --xla $(BENCH_ARGS) --markdown $(BENCH_DIR)/keras3-norm-share.md --json $(BENCH_DIR)/keras3-norm-share.json
	$(PY) bench/train_loop.py $(BENCH_ARGS) --markdown $(BENCH_DIR)/keras3-train-loop.md --json $(BENCH_DIR)/keras3-train-loop.json
	$(PY) bench/memory.py --markdown $(BENCH_DIR)/keras3-memory.md --json $(BENCH_DIR)/keras3-memory.json
	$(PY) bench/norm_flops.py --markdown $(BENCH_DIR)/norm-flops.md --json $(BENCH_DIR)/norm-flops.json

# The tf29 root mounts this repo at /src, so $(BENCH_DIR) must be inside it.
bench-tf29:
	mkdir -p $(BENCH_DIR)
	tools/tf29-root.sh run python bench/norms.py $(BENCH_ARGS) --markdown $(BENCH_DIR)/tf29-norms.md --json $(BENCH_DIR)/tf29-norms.json
	tools/tf29-root.sh run python bench/encoder.py --xla $(BENCH_ARGS) --markdown $(BENCH_DIR)/tf29-encoder.md --json $(BENCH_DIR)/tf29-encoder.json
	tools/tf29-root.sh run python bench/decoder.py --xla $(BENCH_ARGS) --markdown $(BENCH_DIR)/tf29-decoder.md --json $(BENCH_DIR)/tf29-decoder.json
	tools/tf29-root.sh run python bench/norm_share.py --xla $(BENCH_ARGS) --markdown $(BENCH_DIR)/tf29-norm-share.md --json $(BENCH_DIR)/tf29-norm-share.json
	tools/tf29-root.sh run python bench/train_loop.py $(BENCH_ARGS) --markdown $(BENCH_DIR)/tf29-train-loop.md --json $(BENCH_DIR)/tf29-train-loop.json
	tools/tf29-root.sh run python bench/memory.py --markdown $(BENCH_DIR)/tf29-memory.md --json $(BENCH_DIR)/tf29-memory.json

# tfnorm against the reference libraries, in the reference venv
# (`make hf-reference` builds $(HF_VENV); HF_VENV=PATH names another):
# bench-hf loads a GPT-2-small checkpoint (float32, bfloat16) and generates
# from it with tfnorm and with transformers (about 15-20 minutes); bench-lm-reference
# trains with `tfnorm train --task lm` and with nanoGPT, one core each (about
# 30-45 minutes), from a nanoGPT checkout at the pinned commit: NANOGPT_DIR=PATH
# (git clone https://github.com/karpathy/nanoGPT && git -C nanoGPT checkout
# 3adf61e154c3fe3fca428ad6bc3818b27a3b8291). The venv is checked, not built
# here: building it downloads PyTorch.
# `make bench` checks both first, so that it does not stop after an hour.
NANOGPT_DIR ?=
NANOGPT_COMMIT := 3adf61e154c3fe3fca428ad6bc3818b27a3b8291
CHECK_HF_VENV = @test -x $(HF_VENV)/bin/python || { echo "$@: no reference venv at $(HF_VENV): run make hf-reference, or give HF_VENV=PATH" >&2; exit 2; }
CHECK_NANOGPT = @test -n "$(NANOGPT_DIR)" || { echo "$@: give NANOGPT_DIR=PATH, a nanoGPT checkout at $(NANOGPT_COMMIT) (git clone https://github.com/karpathy/nanoGPT && git -C nanoGPT checkout $(NANOGPT_COMMIT))" >&2; exit 2; }

bench-reference-check:
	$(CHECK_NANOGPT)
	$(CHECK_HF_VENV)

bench-hf: venv
	$(CHECK_HF_VENV)
	mkdir -p $(BENCH_DIR)
	$(PY) bench/hf_checkpoints.py --hf-venv $(HF_VENV) $(BENCH_ARGS) --markdown $(BENCH_DIR)/hf-checkpoints.md --json $(BENCH_DIR)/hf-checkpoints.json

bench-lm-reference: venv
	$(CHECK_NANOGPT)
	$(CHECK_HF_VENV)
	mkdir -p $(BENCH_DIR)
	$(PY) bench/lm_reference.py --nanogpt-dir $(NANOGPT_DIR) --hf-venv $(HF_VENV) --workdir $(BENCH_DIR)/lm-reference $(BENCH_ARGS) --markdown $(BENCH_DIR)/lm-reference.md --json $(BENCH_DIR)/lm-reference.json

# The Post-LN vs Pre-LN warm-up experiment at its small default (about 6
# minutes on 2 CPU cores); prints where the table, plot and TensorBoard logs
# (scalars and norm-output histograms) are. COMPARE_ARGS passes extra flags:
# a smaller size, `--depths 6 12 18` for the depth sweep, `--task mlm` for
# masked-language modelling on Python's own documentation text.
DEMO_DIR ?= runs/compare
COMPARE_ARGS ?=
demo: venv
	$(VENV)/bin/tfnorm compare --output-dir $(DEMO_DIR) $(COMPARE_ARGS)

# The decoder experiment: the same design with causal decoders predicting the
# next byte of Python's own documentation text, plus LayerNorm vs RMSNorm vs
# DyT at Pre-LN (`tfnorm compare --task lm`; 21 runs, docs/experiments.md
# section 5 gives the measured table and time). COMPARE_ARGS as for `demo`.
DEMO_LM_DIR ?= runs/compare-lm
demo-lm: venv
	$(VENV)/bin/tfnorm compare --task lm --output-dir $(DEMO_LM_DIR) $(COMPARE_ARGS)

# Reruns docs/claims.md (bench/claims.py): every row's commands, first and
# second runs, CLAIMS_JOBS at a time (each then on a core of its own, one
# thread; row 2's timed benchmarks alone, with every core); a stopped rerun
# goes on where it stopped. The page's section "Rerunning the page" gives
# the CPU time it takes. Choose with e.g. CLAIMS_ARGS="--rows 3 --run first".
CLAIMS_DIR ?= runs/claims
CLAIMS_JOBS ?= 1
CLAIMS_ARGS ?=
claims: venv
	$(PY) bench/claims.py --jobs $(CLAIMS_JOBS) --output-dir $(CLAIMS_DIR) $(CLAIMS_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info
