# The course's commands. `make book` and `make test` set up whatever is missing first.
PY      := .venv/bin/python
BOOK    := build/book/_build/html/index.html
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: help setup setup-test build book test lab doctor clean

help:
	@echo "make book    set up, compile the kernels, execute the lectures, write the HTML book"
	@echo "make test    the whole test suite"
	@echo "make lab     JupyterLab on the course (localhost, with a token)"
	@echo "make doctor  check compilers, OpenMP, MPI, cores"
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
SOLVED := build/solutions/.executed
$(SOLVED): $(wildcard solutions/*/*.ipynb course/*.py src_c/*/*.[ch] src_fortran/*/*.f90)
	@echo "== executing the exercise solutions (a copy, in build/solutions)"
	@rm -rf build/solutions && mkdir -p build && cp -r solutions build/solutions
	jupyter nbconvert --to notebook --execute --inplace --log-level=WARN build/solutions/*/*.ipynb
	@touch $@

book: build $(SOLVED)
	@echo "== building the book (executes every lecture; results cached between runs)"
	jupyter-book build . --config book/_config.yml --toc book/_toc.yml \
		--path-output build/book --warningiserror --keep-going
	@echo "The book: file://$(CURDIR)/$(BOOK)"

test: setup-test
	$(PY) -m pytest

lab: setup
	jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(CURDIR) \
		$(if $(filter 0,$(shell id -u)),--allow-root)

clean:
	rm -rf build
