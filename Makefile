# The course's commands. `make book` and `make test` set up whatever is missing first.
PY      := .venv/bin/python
BOOK    := build/book/_build/html/index.html
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: help setup setup-test setup-grader build grader book test lab doctor lock wheelhouse clean

help:
	@echo "make book    set up, compile the kernels, execute the lectures, write the HTML book"
	@echo "make test    the whole test suite"
	@echo "make clean-root  make book in a fresh Debian 12 root with its own Python, check the book (root)"
	@echo "make serve   the built book at http://127.0.0.1:8000 (search with snippets)"
	@echo "make lab     JupyterLab on the course (localhost, with a token)"
	@echo "make doctor  check compilers, OpenMP, MPI, cores"
	@echo "make grader  set up a machine that grades the exercises (race detector, local Slurm)"
	@echo "make lock    resolve requirements-lock.txt again for Python 3.10-3.13 and check it"
	@echo "make wheelhouse  download every locked package into wheelhouse/ (offline workshops)"
	@echo "make clean   remove build outputs (keeps .venv)"

setup:
	@bash scripts/setup.sh

setup-test:
	@bash scripts/setup.sh --test

setup-grader:
	@bash scripts/setup.sh --grader

build: setup
	$(PY) -m course build

doctor: setup
	$(PY) -m course doctor

# A machine that grades the exercises (an instructor's, a JupyterHub's): what `make build` sets up,
# plus the tools of the hidden checks (Clang's ThreadSanitizer with Archer for the OpenMP races, a
# one-node Slurm for the job scripts); then `course doctor --grading` says, exercise by exercise,
# whether this machine grades it fully.
grader: setup-grader
	$(PY) -m course build
	$(PY) -m course doctor --grading

book: build
	@echo "== building the book (executes every lecture; results cached between runs)"
	jupyter-book build . --config book/_config.yml --toc book/_toc.yml \
		--path-output build/book --warningiserror --keep-going
	@echo "The book: file://$(CURDIR)/$(BOOK)"
	@if [ -d solutions ]; then echo "Note: built from the instructors' repository, this book shows the answers on the instructors page; publish the book of the learner copy (python -m course dist learner DIR) instead."; fi

# The book opens from disk (file://), but there a browser refuses the search page's requests for the
# pages' text (CORS), so search lists hits without snippets. Served over HTTP, search is complete.
# Local only (127.0.0.1); PORT=8001 make serve picks another port.
PORT ?= 8000
serve:
	@test -f $(BOOK) || { echo "no book yet: run make book first"; exit 1; }
	@echo "The book: http://127.0.0.1:$(PORT)/  (Ctrl-C stops the server)"
	$(PY) -m http.server $(PORT) --bind 127.0.0.1 --directory build/book/_build/html

# Two pytest workers (pytest-xdist), a test file at a time each: most tests wait on subprocesses
# (compilers, mpiexec, notebooks), so two share a 2-core machine well. The longest files go first
# (tests/conftest.py orders them). TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
test: setup-test
	@if [ -d tests ]; then $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder; \
	else echo "no tests/ here (a learner copy): each exercise notebook runs its own checks"; fi

# The exact versions of the Python packages, for every Python the course supports: one universal
# resolution (uv), where markers choose another version for a Python that needs one; the pins of
# the current file are kept wherever they still fit (UPGRADE=1: the newest versions instead). Then
# scripts/check-lock.sh installs it on each Python of this machine; `make test` proves the rest.
LOCK := requirements-lock.txt
LOCK_PYTHONS := 3.10 3.11 3.12 3.13
lock: setup
	@grep -v '^#' $(LOCK) > $(LOCK).tmp || true
	$(PY) -m uv pip compile pyproject.toml --extra test --extra hub --universal --quiet \
		--python-version $(firstword $(LOCK_PYTHONS)) $(if $(UPGRADE),--upgrade) \
		--no-header --no-annotate -o $(LOCK).tmp
	@{ echo "# The Python packages of the course, exact versions for every Python it supports: scripts/setup.sh"; \
	   echo "# installs these (then the course itself, editable). Markers choose where one Python needs another"; \
	   echo "# version. Refresh with \`make lock\` (it keeps these pins wherever they still fit)."; \
	   echo "# python $(LOCK_PYTHONS)"; cat $(LOCK).tmp; } > $(LOCK)
	@rm -f $(LOCK).tmp
	@echo "wrote $(LOCK): $$(grep -c '==' $(LOCK)) pins"
	bash scripts/check-lock.sh

# Everything pip needs to set up the course without an index, for the Python and platform of this
# machine (WHEELHOUSE_PYTHON=/usr/bin/python3 for another Python of it): the locked packages,
# mpi4py's source and the build tools, and (where npm is) the JupyterHub proxy's npm packages.
# Then: COURSE_WHEELHOUSE=wheelhouse make setup, or python -m course hub setup --wheelhouse ...
WHEELHOUSE ?= wheelhouse
WHEELHOUSE_PYTHON ?= $(PY)
wheelhouse: setup
	bash scripts/wheelhouse.sh $(WHEELHOUSE) $(WHEELHOUSE_PYTHON)
	@if command -v npm >/dev/null; then $(PY) -m course hub download $(WHEELHOUSE); \
	else echo "wheelhouse: no npm here, so no JupyterHub proxy in it (python -m course hub download)"; fi

lab: setup
	jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(CURDIR) \
		$(if $(filter 0,$(shell id -u)),--allow-root)

clean:
	rm -rf build

# The proof that `make book` works on a new machine: a fresh Debian 12 root (debootstrap, minbase
# plus make and git), the repository copied in, the README's `make book` there as root with Debian's
# own Python, then the book checked by tests/test_book.py. Root on Debian 12; about 10-15 minutes;
# the root stays in /var/tmp/course-clean-root until the next run (scripts/clean-root.sh --remove).
.PHONY: clean-root
clean-root: setup-test
	bash scripts/clean-root.sh
