# gpuportal — the two commands: `make demo` (run the portal on the embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: demo test lint bench install install-ldap install-dev clean services-up protos

# The hashed lock (uv pip compile, docs/deployment.md) is what CI and the image install: the same versions everywhere.
$(VENV)/.installed: pyproject.toml requirements-dev.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements-dev.lock
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

install: $(VENV)/.installed

# LDAP sign-in's extra: python-ldap compiles against libldap-dev and libsasl2-dev (bash scripts/ldap/install.sh).
# The dev lock plus the extra, so pip adds only django-auth-ldap, python-ldap and pyasn1 to the venv.
$(VENV)/.installed-ldap: $(VENV)/.installed requirements-dev-ldap.lock
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements-dev-ldap.lock
	touch $@

install-ldap: $(VENV)/.installed-ldap

demo: install
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py demo_setup --i-know-this-is-a-demo
	DEBUG=1 PORT=$(PORT) $(PY) manage.py rundemo

test: install
	$(VENV)/bin/pytest

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy scheduling/engine
	$(VENV)/bin/bandit -q -c pyproject.toml -r gpuportal scheduling

bench: install
	@for script in benchmarks/[!_]*.py; do echo "# $$script" >&2; $(PY) $$script || exit 1; done

clean:
	rm -rf var/ .pytest_cache .mypy_cache .ruff_cache

# The gpu-priority-expander's protobuf modules (committed; tests/rebalance/test_expander_server.py checks they match).
protos: $(VENV)/.installed
	$(PY) -m grpc_tools.protoc -I . --python_out=. --pyi_out=. --grpc_python_out=. \
	    scheduling/expander_protocol/k8s_subset.proto scheduling/expander_protocol/expander.proto
	rm -f scheduling/expander_protocol/k8s_subset_pb2_grpc.py
