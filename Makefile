# The course's commands. `make book` and `make test` set up whatever is missing first.
PY      := .venv/bin/python
BOOK    := build/book/_build/html/index.html
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: help setup setup-test build book test lab doctor lock wheelhouse clean

help:
	@echo "make book    set up, compile the kernels, execute the lectures, write the HTML book"
	@echo "make test    the whole test suite"
	@echo "make serve   the built book at http://127.0.0.1:8000 (search with snippets)"
	@echo "make lab     JupyterLab on the course (localhost, with a token)"
	@echo "make doctor  check compilers, OpenMP, MPI, cores"
	@echo "make lock    refresh requirements-lock.txt from the packages in .venv"
	@echo "make wheelhouse  download every locked package into wheelhouse/ (offline workshops)"
	@echo "make clean   remove build outputs (keeps .venv)"

setup:
	@bash scripts/setup.sh

setup-test:
	@bash scripts/setup.sh --test

build: setup
	$(PY) -m course build

doctor: setup
	$(PY) -m course doctor

# the exercise solutions must run: executed as a copy, again only when they or the code change
# (a learner copy, `python -m course dist learner`, has no solutions: nothing to execute)
SOLVED := $(if $(wildcard solutions),build/solutions/.executed)
ifneq ($(SOLVED),)
$(SOLVED): $(wildcard solutions/*/*.ipynb course/*.py src_c/*/*.[ch] src_fortran/*/*.f90)
	@echo "== executing the exercise solutions (a copy, in build/solutions)"
	@rm -rf build/solutions && mkdir -p build && cp -r solutions build/solutions
	jupyter nbconvert --to notebook --execute --inplace --log-level=WARN build/solutions/*/*.ipynb
	@touch $@
endif

book: build $(SOLVED)
	@echo "== building the book (executes every lecture; results cached between runs)"
	jupyter-book build . --config book/_config.yml --toc book/_toc.yml \
		--path-output build/book --warningiserror --keep-going
	@echo "The book: file://$(CURDIR)/$(BOOK)"

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

# The exact versions of the Python packages (what the tests passed with); scripts/setup.sh
# installs them by default. Refresh after a change to pyproject.toml that `make test` passed with.
LOCK := requirements-lock.txt
lock: setup
	@{ echo "# The Python packages of the course, exact versions: scripts/setup.sh installs these"; \
	   echo "# (then the course itself, editable). Refresh with \`make lock\` after \`make test\` passed."; \
	   echo "# python $$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')"; \
	   $(PY) -m pip freeze --all --exclude-editable | grep -v -i -E '^(pip|course)[ =@]'; } > $(LOCK).tmp
	@mv $(LOCK).tmp $(LOCK)
	@echo "wrote $(LOCK): $$(grep -c '==' $(LOCK)) packages"

# Everything pip needs to set up the course without an index, for the Python and platform of this
# machine: the locked packages, mpi4py's source (it is compiled against the local MPI) and what
# pip needs to build it and the course. Then: COURSE_WHEELHOUSE=wheelhouse make setup
WHEELHOUSE ?= wheelhouse
wheelhouse: setup
	$(PY) -m pip download -q -r $(LOCK) -d $(WHEELHOUSE)
	$(PY) -m pip download -q --no-binary mpi4py --no-deps -d $(WHEELHOUSE) \
		"$$(grep -i '^mpi4py==' $(LOCK))"
	$(PY) -m pip download -q -d $(WHEELHOUSE) pip "setuptools>=77" wheel build "cython>=3.0.1"
	@echo "wheelhouse: $$(ls $(WHEELHOUSE) | wc -l) files in $(WHEELHOUSE)/"

lab: setup
	jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(CURDIR) \
		$(if $(filter 0,$(shell id -u)),--allow-root)

clean:
	rm -rf build
