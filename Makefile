# numalab — see README.md and docs/ (make docs). Every target installs what it needs (idempotent).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
NUMALAB := $(VENV)/bin/numalab
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian 12 packages: QEMU, the guest's tools (busybox, trace-cmd, perf, rt-tests' hackbench and cyclictest, stress-ng, sysbench),
# the stock kernel's tooling (apt/dpkg/kmod), a C toolchain for the static
# workloads, libvirt's schema validator, and Python's venv; for numalab kernel
# build: the 6.1 source (the default) and the 6.12 source (bookworm-security; the 6.12 kernel test),
# ccache, the kernel's build tools, git and patch; for --fragment sched-ext (docs/sched-ext.md) pahole
# (dwarves: the kernel's BTF) and clang-16 with llvm-16 (the example schedulers' BPF, libbpf's libelf and zlib); shellcheck for actionlint's
# checks of the emitted CI workflows' shell steps (tests/unit/test_ci_lint.py); ssh and ssh-keygen for the
# nested libvirt host (its sshd is not installed: make setup-sshd unpacks one into numalab's cache).
APT_PACKAGES := qemu-system-x86 busybox-static trace-cmd linux-perf kmod cpio openssh-client \
	gcc make libc6-dev libvirt-clients libxml2-utils python3-venv python3-pip chromium \
	linux-source-6.1 linux-source-6.12 ccache flex bison bc libelf-dev libssl-dev lz4 xz-utils git patch \
	libvirt-daemon-system libvirt-dev pkg-config python3-dev shellcheck strace rt-tests stress-ng sysbench hwloc \
	dwarves clang-16 llvm-16 zlib1g-dev
PYTEST_ARGS ?=
# Python keeps its bytecode caches here, as on a developer's machine. Some CI and sandbox environments set
# PYTHONDONTWRITEBYTECODE, and then every start of numalab and every pytest worker's collection compiles every module
# again: `numalab --version` took 0.76 s instead of 0.39 s, a collection of the suite 12.8 s instead of 4.2 s
# (2026-11-27), and the suite starts the CLI some hundreds of times. setup compiles lab's bytecode as well, for a
# shell that keeps the variable set.
unexport PYTHONDONTWRITEBYTECODE
COMPILE_LAB = $(PY) -m compileall -q lab > /dev/null

.PHONY: setup setup-runs setup-demo setup-qemu10 setup-qemu-charge setup-sshd setup-lava setup-scx apt venv test test-fast test-nested test-scx test-fidelity demo lint golden bench bench-kernel clean help reproduce \
	reproduce-seed002 docs completions man

help:
	@echo "make demo   - an A/B: NUMA balancing off against on (stock kernel, ring-2, numa01, 3 runs each), its table and HTML report"
	@echo "make test   - the test suite (boots real VMs; builds kernels and the patched QEMU the first time; its time: docs/benchmarks.md, 'The test suite')"
	@echo "make test-fast - only the tests that boot no VM"
	@echo "make test-nested - the nested tier: numalab inside a TCG guest with KVM and 2 or 4 NUMA nodes, as an ordinary user, and that guest as a second libvirt host over ssh"
	@echo "make lint   - ruff"
	@echo "make reproduce [SEEDS='003 004 000 001'] - run the seed reproductions, reports in reports/reproduce/ (001: six 60 guest s runs under the model, about 2 h)"
	@echo "make golden - regenerate tests/golden (QEMU argv and libvirt XML of every preset, guest plans, manifest shape, built-in workloads)"
	@echo "make bench  - benchmarks: boot overhead vs virtme-ng, trace parsing, matrix packing, GB/s vs GB per vCPU-second under a CPU hog, --remote-latency's overhead, each workload tool's image layer and boot cost, parallel guest time's cost, the whole model's against plain TCG, a hand-off's cost on one node and across two (prints figures)"
	@echo "make bench-kernel - kernel build benchmark: cold, one-line rebuild, cache hit (prints figures)"
	@echo "make reproduce-seed002 - seed 002's sched-group bug: baseline vs old construction on ring-4 and grid-2x4, report in reports/"
	@echo "make libvirt-up - start libvirt's daemons by hand (no systemd needed) for --backend libvirt"
	@echo "make docs   - the documentation site into site/ (mkdocs --strict), plus completions and the man page"
	@echo "make completions - bash and zsh completion into build/completions/, from the CLI's parser"
	@echo "make man    - the man page build/man/numalab.1, from the CLI's parser"
	@echo "make setup  - apt packages + $(VENV) (done by the targets above)"
	@echo "make setup-runs - what numalab's commands need, without the test and docs tools (an emitted CI shard's setup)"
	@echo "make setup-qemu10 - QEMU 10 from Debian's backports, unpacked into numalab's cache (numalab run --qemu backports)"
	@echo "make setup-sshd - an sshd unpacked into numalab's cache for numalab nested --libvirt-host (nothing installed)"
	@echo "make setup-lava - LAVA's dispatcher (lava-run) and its device-type templates, for numalab matrix lava and its test"
	@echo "make setup-qemu-charge - QEMU 10 built with numalab's patch, for --clock virtual --remote-latency (--qemu charge)"
	@echo "make setup-scx - clang-19 for the scx schedulers from crates.io (--scheduler scx_bpfland@1.1.4; numalab scheduler build), and a check for cargo"
	@echo "make test-fidelity - the modelled machine's long known answers (not in make test): K2, K4 (a pipe hand-off at two quanta), K5 (seed 003 in guest time), the cache-aware A/B under the model, about 40-60 min"
	@echo "make test-scx - the scx tier (not in make test): scx_layered releases on a 9-node guest, their bisect, bpfland against simple, numa01 under rusty (builds them the first time: minutes each)"

setup: apt venv
	@$(COMPILE_LAB)
	@$(PY) -m lab.host.access_plugin_setup  # the access-matrix TCG plugin, for the installed QEMU (cached)

# What numalab's commands need, without the suite's and the docs' tools (pytest, ruff, mkdocs, scipy, zizmor): the
# Debian packages, numalab with its libvirt extra, lab's bytecode and the access-matrix plugin. The setup of an
# emitted CI workflow's shards (lab/matrix/ci.py): 12 s of CPU in a fresh clone where make setup takes 31 s.
setup-runs: apt $(VENV)/.installed-runs
	@$(COMPILE_LAB)
	@$(PY) -m lab.host.access_plugin_setup

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "numalab: installing $$missing"; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,libvirt]'
	touch $@ $(VENV)/.installed-core $(VENV)/.installed-runs

$(VENV)/.installed-runs: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[libvirt]'
	touch $@ $(VENV)/.installed-core

venv: $(VENV)/.installed

# QEMU 10 beside the system's 7.2: apt-get download into a private, versioned prefix (no system change).
setup-qemu10: setup-runs
	@$(PY) -m lab.host.qemu_prefix > /dev/null
	@$(PY) -m lab.host.access_plugin_setup backports

# The backports QEMU's version (setup-qemu10's) from Debian's source with images/qemu's patches
# (qemu_plugin_charge_ns), built into the cache; apt finds the source (lab/host/qemu_source.py).
QEMU_CHARGE_APT := libglib2.0-dev libpixman-1-dev libfdt-dev libnuma-dev ninja-build python3-venv
setup-qemu-charge: setup-qemu10
	@$(MAKE) --no-print-directory apt APT_PACKAGES="$(QEMU_CHARGE_APT)"
	@$(PY) -m lab.host.qemu_charge > /dev/null

# LAVA's dispatcher (lava-run: tests/vm/test_vm_lava.py runs a job set with it; numalab matrix lava) and LAVA's
# device-type templates, from lava-server's package unpacked into numalab's cache (installing lava-server would
# bring PostgreSQL and Django and start its services). lava-dispatcher without its recommends: 130 packages, 205 MB,
# 45 s here (2026-11-28, Debian 12's 2023.01).
setup-lava: setup-runs
	@$(MAKE) --no-print-directory apt APT_PACKAGES="lava-dispatcher"
	@$(PY) -m lab.host.lava_templates > /dev/null

# sshd for numalab nested --libvirt-host, run only inside the outer guest: Debian's openssh-server unpacked
# into numalab's cache (apt-get download; installing the package would start the host's own sshd).
setup-sshd: setup
	@$(PY) -m lab.host.sshd_prefix > /dev/null

# The sched-ext/scx project's schedulers from crates.io (lab/host/scx_release.py; docs/sched-ext.md): clang-19 from
# bookworm main for their BPF code (1.1.4 asks for clang >= 18; bookworm's clang-16 is too old) with its libclang for
# bindgen (libclang1-19: clang-sys loads its .so.1), libelf and zlib (their binaries link them); cargo and rustc are
# rustup's (Debian 12's rustc is 1.63; 1.1.4 asks for 1.91).
SCX_APT := clang-19 llvm-19 libclang1-19 libelf-dev zlib1g-dev pkg-config patch
setup-scx: setup-runs
	@$(MAKE) --no-print-directory apt APT_PACKAGES="$(SCX_APT)"
	@command -v cargo > /dev/null || [ -x "$$HOME/.cargo/bin/cargo" ] || { echo "numalab: setup-scx: cargo not found:" \
		"install Rust with rustup (https://rustup.rs; scx 1.1.4 needs rustc 1.91 or later)"; exit 1; }

# Three passes: the tests that boot, build and start nothing, two workers a CPU up to 4 (pytest-xdist; 3 min instead of 6 on
# 2 cores); the VM, kernel-build and libvirt tests VM_JOBS at a time, a module to a worker (the libvirtd and
# test-user modules hold tests/conftest.py's host_shared lock, so never two at once); then the few marked `alone`, whose figures
# or bounds are the host's own time, by themselves. A pass that PYTEST_ARGS narrows to nothing is skipped
# (pytest's exit 5); without PYTEST_ARGS it is a failure. docs/benchmarks.md has the suite's time.
NOT_SLOW := not vm and not kernel_build and not libvirt
# The scx tier (tests/scx, marker scx) is make test-scx's only: its first run builds scx_layered four times (cargo,
# 8 to 20 minutes each here on two busy cores) and it needs make setup-scx's clang-19 and a rustup toolchain. The
# fidelity tier (tests/fidelity, marker fidelity) is make test-fidelity's only: the modelled machine's long known answers.
NOT_SCX := not scx and not fidelity
# Twice the CPUs, up to 4: a quarter of the first pass's time is its tests waiting on subprocesses and sockets
# (2 cores: 4 min 36 s with 2 workers, 4 min 12 s with 4; 2026-11-27).
TEST_JOBS ?= $(shell n=$$((2 * $$(nproc))); [ $$n -gt 4 ] && n=4; echo $$n)
VM_JOBS ?= 2
pytest_pass = $(PY) -m pytest -ra $(1) $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] && [ -n "$(strip $(PYTEST_ARGS))" ] || exit $$rc; }
test: setup setup-qemu10 setup-qemu-charge setup-sshd setup-lava
	@echo "numalab: the tests that boot nothing, $(TEST_JOBS) at a time"
	$(call pytest_pass,-n $(TEST_JOBS) -m '$(NOT_SLOW)')
	@echo "numalab: the VM, kernel-build and libvirt tests, $(VM_JOBS) at a time"
	$(call pytest_pass,-n $(VM_JOBS) --dist loadfile --durations=60 --durations-min=15 -m 'not ($(NOT_SLOW)) and not alone and $(NOT_SCX)')
	@echo "numalab: the tests that time the host, one at a time"
	$(call pytest_pass,--durations=10 -m 'not ($(NOT_SLOW)) and alone and $(NOT_SCX)')

# The nested tier alone: numalab inside TCG guests with KVM and 2 and 4 NUMA nodes, as an ordinary user
# (tests/nested; part of make test too).
test-nested: setup setup-sshd
	$(PY) -m pytest -ra tests/nested $(PYTEST_ARGS)

# The scx tier alone (not in make test): issue 68's known answer 1, scx_layered's releases around its NUMA-node limit on
# a 9-node guest, on v6.12-scx, and what 7.3.4 does with them on v7.3-scx (built with --fragment sched-ext --fragment scx the first time);
# bisect --scheduler-releases over scx_layered's releases on both; known answer 2, scx_bpfland against scx_simple on genoa-nps2.
test-scx: setup setup-scx
	$(PY) -m pytest -ra -m scx tests/scx $(PYTEST_ARGS)

# The fidelity tier alone (not in make test): issue 66's long known answers under the modelled machine m1, each
# printing its figures (K2, locality pays: 4 runs of 30 guest s, about 5 host min; K5, seed 003's decisions in guest
# time: 6-8 runs of 10 guest s, 4-6 host min each; issue 67's cache-aware A/B under the model, about 30 min).
test-fidelity: setup setup-qemu-charge
	$(PY) -m pytest -ra -s -m fidelity tests/fidelity $(PYTEST_ARGS)

test-fast: setup  ## the unit tier without its few VM tests (tests/unit)
	$(PY) -m pytest -ra -n $(TEST_JOBS) -m '$(NOT_SLOW)' tests/unit $(PYTEST_ARGS)

# make demo: only what a run needs (a fresh machine's apt and pip take most of the demo's time otherwise).
DEMO_APT_PACKAGES := qemu-system-x86 busybox-static trace-cmd linux-perf kmod cpio gcc make libc6-dev \
	python3-venv python3-pip
$(VENV)/.installed-core: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e . 2>&1 | grep -v -e BuildBackendWarning -e '^ *warnings.warn' \
		-e 'Please, use' -e '^$$' || true
	$(PY) -c 'import lab.cli.main'
	touch $@

setup-demo:
	@$(MAKE) --no-print-directory apt APT_PACKAGES="$(DEMO_APT_PACKAGES)"
	@$(MAKE) --no-print-directory $(VENV)/.installed-core
	@$(COMPILE_LAB)

# The demo is an A/B: the stock kernel on ring-2 with NUMA balancing off, then on, three runs each, the
# report, and last the A/B table, which closes with its finding: what the runs show about NUMA balancing and
# what they cannot, computed from them (lab/analysis/finding.py). docs/tutorial.md does the same with your
# own kernel and patch.
DEMO_DIR := runs/demo-$(shell date +%Y%m%d-%H%M%S)
DEMO_RUN := --topology ring-2 --workload numa01 --duration 8 --repeat 3
demo: setup-demo
	$(NUMALAB) doctor
	$(NUMALAB) run $(DEMO_RUN) --numa-balancing off --out $(DEMO_DIR)/balancing-off
	$(NUMALAB) run $(DEMO_RUN) --numa-balancing on --out $(DEMO_DIR)/balancing-on
	$(NUMALAB) report $(DEMO_DIR)/balancing-off/*/ $(DEMO_DIR)/balancing-on/*/ --out $(DEMO_DIR)/report.html
	$(NUMALAB) compare --baseline $(DEMO_DIR)/balancing-off/*/ --new $(DEMO_DIR)/balancing-on/*/

lint: venv
	$(VENV)/bin/ruff check lab tests docs images
	$(VENV)/bin/ruff format --check lab tests docs images

SEEDS ?= 003 004 000 001
reproduce: setup
	for s in $(SEEDS); do $(NUMALAB) reproduce $$s || exit $$?; done

golden: venv
	UPDATE_GOLDEN=1 $(PY) -m pytest -q tests/unit/test_golden.py tests/unit/test_golden_record.py tests/unit/test_golden_workloads.py tests/unit/test_lava.py

# The documentation: docs/*.md built by mkdocs (mkdocs.yml); completions and the man page come from the
# CLI's own parser (docs/tools/cli_docs.py). tests/unit/test_docs.py builds all three and runs the documented commands.
docs: venv completions man
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

completions: venv
	PYTHONPATH=. $(PY) docs/tools/cli_docs.py completions build/completions

man: venv
	PYTHONPATH=. $(PY) docs/tools/cli_docs.py man build/man

# libvirt's daemons without systemd (virtlogd + libvirtd/virtqemud); see docs/libvirt.md.
libvirt-up: setup
	$(SUDO) python3 -m lab.host.libvirtd up

libvirt-down:
	$(SUDO) python3 -m lab.host.libvirtd down

bench: setup setup-qemu10 setup-qemu-charge
	tests/bench/boot.sh
	$(PY) tests/bench/trace_parse.py
	tests/bench/matrix.sh
	$(PY) tests/bench/vcpu_noise.py
	$(PY) tests/bench/qemu_versions.py
	$(PY) tests/bench/virtual_clock.py
	$(PY) tests/bench/remote_latency.py
	$(PY) tests/bench/clock_modes.py
	$(PY) tests/bench/catalogue.py
	tests/bench/trace_extras.sh
	$(PY) tests/bench/parallel_time.py
	$(PY) tests/bench/model_cost.py
	$(PY) tests/bench/cache_ways.py
	$(PY) tests/bench/handoffs.py

bench-kernel: setup
	tests/bench/kernel_build.sh

# Seed 002: the matrix exits 1 by design (every run of the old construction is
# topology-mismatch); the report reads the run records and says whether the
# seed's findings reproduce.
SEED002_DIR ?= runs/reproduce-seed002
reproduce-seed002: setup
	$(NUMALAB) matrix run lab/seeds/seed002/seed002-sched-groups.yaml --out $(SEED002_DIR) || true
	$(PY) -m lab.seeds.seed002.groups_report $(SEED002_DIR) --out reports/seed002-sched-groups.md \
		--json reports/seed002-sched-groups.json --notes reports/seed002-sched-groups.notes.md
	$(NUMALAB) report $(SEED002_DIR)/runs/* --out reports/seed002-runs.html

clean:
	rm -rf $(VENV) runs .pytest_cache images/workloads/build images/plugins/build site build
