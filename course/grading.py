"""nbgrader customisation: stubs in the language of the cell.

nbgrader replaces every solution region with the stub of the notebook's language (Python), which
would put `raise NotImplementedError()` into a C or Fortran file written by `%%writefile`. This
preprocessor gives a `%%writefile name.c` cell a C comment and a `%%writefile name.f90` cell a
Fortran comment instead, so the released stub compiles and the learner sees where to write.
Solution regions in such cells are delimited by comments: `/* ### BEGIN SOLUTION */` in C,
`! ### BEGIN SOLUTION` in Fortran (nbgrader only looks for "BEGIN SOLUTION" in the line).
"""

from pathlib import PurePath

from nbgrader.preprocessors import ClearSolutions
from traitlets import Dict

_CELL_LANGUAGE = {".c": "c", ".h": "c", ".f90": "fortran"}


class ClearSolutionsByCellLanguage(ClearSolutions):
    code_stub = Dict(dict(
        python="# YOUR CODE HERE\nraise NotImplementedError()",
        c="/* YOUR CODE HERE */",
        fortran="! YOUR CODE HERE",
    )).tag(config=True)

    def _replace_solution_region(self, cell, language):
        first_line = cell.source.split("\n", 1)[0].split()
        if cell.cell_type == "code" and first_line[:1] == ["%%writefile"] and len(first_line) > 1:
            language = _CELL_LANGUAGE.get(PurePath(first_line[-1]).suffix, language)
        return super()._replace_solution_region(cell, language)
