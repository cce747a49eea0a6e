# The README's two commands: `make run` and `make test`. Everything installs into .venv
# from PyPI and crates.io, so a fresh machine with python3 and cargo is enough.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# maturin installs into the environment named by VIRTUAL_ENV.
export VIRTUAL_ENV := $(abspath $(VENV))

.PHONY: venv build build-test run test browser musl

# The environment: maturin (the build backend) plus the runtime, dev and ray (the sweep
# executor's optional extra, tested here) dependencies listed in pyproject.toml. uv
# installs those (8 s here where pip took 25 s, the same versions); pip does where uv
# cannot. Both compile the bytecode at install: these machines set PYTHONDONTWRITEBYTECODE,
# so a module without it is compiled again at every import (Ray's import took 1.4 s
# instead of 0.5). The stamp file makes the target cheap once done.
venv: $(VENV)/.stamp
$(VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "maturin>=1.9,<2" "uv>=0.5"
	$(BIN)/python -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
		x = d["optional-dependencies"]; print("\n".join(d["dependencies"] + x["dev"] + x["ray"]))' \
		> $(VENV)/requirements.txt
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -r $(VENV)/requirements.txt || \
		$(BIN)/pip install --quiet -r $(VENV)/requirements.txt
	touch $@

# Builds the Rust extension (release) and installs the package into .venv, editable:
# Python sources are used in place, so only Rust changes need a rebuild.
build: venv
	$(BIN)/maturin develop --release --quiet

# The same for the test suite, with Cargo.toml's test-release profile (release without
# link-time optimisation): the Rust tests build on the same artifacts, and the wheel the
# suite builds (tests/test_wheel.py, told by TIERSCOPE_BUILD_PROFILE) reuses them.
TEST_PROFILE := test-release
build-test: venv
	$(BIN)/maturin develop --profile $(TEST_PROFILE) --quiet

run: build
	$(BIN)/tierscope run experiments/default.toml --out runs/default --force

# Debian's headless Chromium, for the report tests (tests/test_report.py); where it cannot
# be installed (no root, no apt) those tests skip with the reason.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
		echo "chromium could not be installed: the browser tests will be skipped"

# Debian's musl-gcc, which builds the static programs the kvm engine runs in its tests
# (programs/, crates/tierscope-kvm/tests/program.rs), and valgrind, whose lackey traces
# them (tests/test_traces.py) and the Cori kernels (programs/cori/, `make cori-programs`,
# tests/test_cori_programs.py); without them those tests skip (or, in Rust, fail saying so).
musl:
	@(command -v musl-gcc && command -v valgrind) >/dev/null 2>&1 || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools valgrind >/dev/null) || \
		echo "musl-tools or valgrind could not be installed: the program tests will be skipped"

# Debian's redis-server, redis-tools (redis-benchmark), memcached, valgrind and gcc, which
# `tierscope measure apps` runs natively (docs/models/TIERING.md section 4.1); without them
# tests/test_measure_apps.py skips its native run with the reason.
.PHONY: apps measure-apps
apps:
	@(command -v redis-server && command -v redis-benchmark && command -v memcached && \
		command -v valgrind && command -v gcc) >/dev/null 2>&1 || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools \
		memcached valgrind gcc >/dev/null) || \
		echo "redis, memcached, valgrind or gcc could not be installed: measure-apps cannot run"

# The application model measured on real Redis and memcached (about 15 minutes on 2 cores):
# experiments/tiering/apps/*.toml, each number with its command, date and machine.
measure-apps: build apps
	nice $(BIN)/tierscope measure apps --out experiments/tiering/apps

# The Rust tests link against the libraries build-test just compiled: the workspace has no
# feature enabled only by dev-dependencies, and tierscope-py stays in (its pyo3 macros set
# syn's features, and with them serde's build); either difference made cargo compile every
# workspace library a second time. They skip building the examples (benchmarks and probes
# with no tests; clippy above checks them with --all-targets): 13 optimised links.
# The Rust tests run in the environment maturin gives cargo (its pyo3 configuration file,
# interpreter and signature), found once build-test has written it: otherwise pyo3's build
# scripts see a changed environment and cargo rebuilds pyo3 and the extension crate, and the
# wheel test (maturin again) rebuilds them back. A missing file only costs that rebuild.
PYO3_CONFIG = $(firstword $(wildcard $(CURDIR)/target/maturin/pyo3-config-*.txt))
PYO3_ENV = $(if $(PYO3_CONFIG),PYO3_CONFIG_FILE=$(PYO3_CONFIG) PYO3_BUILD_EXTENSION_MODULE=1 \
	PYO3_PYTHON=$(abspath $(BIN))/python PYTHON_SYS_EXECUTABLE=$(abspath $(BIN))/python \
	PYO3_ENVIRONMENT_SIGNATURE=$$($(BIN)/python -c 'import sys; \
	print(f"{sys.implementation.name}-{sys.version_info[0]}.{sys.version_info[1]}-64bit")'))
# pytest runs on two workers (pytest-xdist; these machines have 2 cores); the session's quick
# ledger is read by one test only, so it runs once (tests/conftest.py). PYTEST_ARGS passes
# more options, e.g. `make test PYTEST_ARGS="--durations=30"`.
PYTEST_ARGS ?=
test: build-test browser musl apps
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	env $(PYO3_ENV) cargo test --workspace --profile $(TEST_PROFILE) --lib --bins --tests
	env $(PYO3_ENV) cargo test --workspace --profile $(TEST_PROFILE) --doc
	$(BIN)/ruff check python tests scripts
	TIERSCOPE_TEST_RAY=require TIERSCOPE_BUILD_PROFILE=$(TEST_PROFILE) \
		$(BIN)/pytest -q -n 2 tests $(PYTEST_ARGS)

# The experiments behind docs/results/RESULTS.md, run through the CLI, then their tables.
RESULTS := default multiphase-64g-4g-hot multiphase-64g-1g-hot heap-1g heap-10g heap-64g \
	heap-10g-1m heap-64g-thp telescope-flush
.PHONY: results
results: build
	for e in $(RESULTS); do $(BIN)/tierscope run --quiet --force experiments/$$e.toml --out runs/$$e || exit 1; done
	$(BIN)/python scripts/results_table.py $(addprefix runs/,$(RESULTS))

# Cori on real programs (docs/techniques/CORI.md, "Real programs"): the small C kernels of
# programs/cori/ built static and traced by valgrind lackey on reduced inputs, their
# last-level cache misses run through cori-sim's model (a few minutes; `make musl`
# installs the compiler and valgrind).
.PHONY: cori-programs
cori-programs: build musl
	nice $(BIN)/tierscope repro cori-programs --out runs/repro-cori-programs --force

# The claims ledger (docs/results/CLAIMS.md, issue 25): `tierscope repro claims` runs every
# measurement the claims name into runs/claims (resumed: a finished one is reused), then
# its CLAIMS.md is copied into docs/ when no claim has a problem.
.PHONY: claims
claims: build musl
	nice $(BIN)/tierscope repro claims --out runs/claims
	cp runs/claims/CLAIMS.md docs/results/CLAIMS.md
