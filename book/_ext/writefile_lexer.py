"""Sphinx extension of the course book: highlight `%%writefile` cells in the language they write.

myst-nb highlights every code cell with the notebook's lexer (IPython), so a cell that writes a C or
Fortran file drew `#pragma omp` as a Python comment and C keywords as Python ones. After a page is
read, every code block whose first line is `%%writefile NAME.c` (or `.h`, `.f90`, `.f`, `.F90`) gets
the lexer `c-writefile` or `fortran-writefile`: the magic line as IPython shows it, the rest by
Pygments' C or Fortran lexer. No network, no JavaScript: it is done while the HTML is written.
"""

from __future__ import annotations

import re

from docutils import nodes
from pygments.lexer import Lexer
from pygments.lexers.c_cpp import CLexer
from pygments.lexers.fortran import FortranLexer
from pygments.token import Keyword, Name, Text

MAGIC = re.compile(r"%%writefile\s+(?:-a\s+|--append\s+)?(\S+)")
LANGUAGE_OF_SUFFIX = {".c": "c", ".h": "c", ".f90": "fortran", ".f": "fortran", ".F90": "fortran"}


class _WritefileLexer(Lexer):
    """The `%%writefile` line as a magic, the rest of the cell by `base`."""

    base = CLexer

    def get_tokens_unprocessed(self, text):
        first, newline, rest = text.partition("\n")
        magic = MAGIC.match(first)
        if magic is None:                            # not a writefile cell after all
            yield from self.base(stripnl=False).get_tokens_unprocessed(text)
            return
        yield 0, Keyword, "%%writefile"
        yield len("%%writefile"), Text, first[len("%%writefile"):magic.start(1)]
        yield magic.start(1), Name.Attribute, first[magic.start(1):]
        offset = len(first) + len(newline)
        if newline:
            yield len(first), Text, newline
        for index, token, value in self.base(stripnl=False, ensurenl=False) \
                .get_tokens_unprocessed(rest):
            yield offset + index, token, value


class CWritefileLexer(_WritefileLexer):
    name = "C (%%writefile cell)"
    aliases = ["c-writefile"]
    base = CLexer


class FortranWritefileLexer(_WritefileLexer):
    name = "Fortran (%%writefile cell)"
    aliases = ["fortran-writefile"]
    base = FortranLexer


def language_of_cell(text: str) -> str | None:
    """`c-writefile`/`fortran-writefile` for a cell that writes a C/Fortran file, else None."""
    magic = MAGIC.match(text.lstrip("\n"))
    if magic is None:
        return None
    name = magic.group(1)
    suffix = name[name.rfind("."):] if "." in name else ""
    language = LANGUAGE_OF_SUFFIX.get(suffix) or LANGUAGE_OF_SUFFIX.get(suffix.lower())
    return f"{language}-writefile" if language else None


def set_lexers(app, doctree):
    for block in doctree.findall(nodes.literal_block):
        language = language_of_cell(block.astext())
        if language:
            block["language"] = language


def setup(app):
    app.add_lexer("c-writefile", CWritefileLexer)
    app.add_lexer("fortran-writefile", FortranWritefileLexer)
    app.connect("doctree-read", set_lexers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
