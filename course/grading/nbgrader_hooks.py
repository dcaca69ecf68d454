"""nbgrader's customisation for the course: stubs in the language of the cell, feedback without
hidden tests (named in nbgrader_config.py as course.grading.ClearSolutionsByCellLanguage and
course.grading.HideHiddenTests).

nbgrader replaces every solution region with the stub of the notebook's language (Python), which
would put `raise NotImplementedError()` into a C or Fortran file written by `%%writefile`. This
preprocessor gives a `%%writefile name.c` cell a C comment and a `%%writefile name.f90` cell a
Fortran comment instead, so the released stub compiles and the learner sees where to write.
Solution regions in such cells are delimited by comments: `/* ### BEGIN SOLUTION */` in C,
`! ### BEGIN SOLUTION` in Fortran (nbgrader only looks for "BEGIN SOLUTION" in the line).
"""

import re
from pathlib import PurePath

from nbgrader.preprocessors import ClearSolutions, NbGraderPreprocessor
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


HIDDEN = re.compile(r"^[ \t]*#+ BEGIN HIDDEN TESTS.*?^[ \t]*#+ END HIDDEN TESTS[^\n]*\n?",
                    re.S | re.M)
HIDDEN_NOTE = "# (hidden tests: their code is not shown; a failure says what property failed)\n"


class HideHiddenTests(NbGraderPreprocessor):      # (nbgrader's: enabled by default)
    """Feedback without the hidden tests. `nbgrader autograde` puts the graded cells back as the
    instructor wrote them, hidden tests included, and `generate_feedback` would show them (and the
    reference functions they compare with). This preprocessor, run by generate_feedback, removes
    the hidden regions from every cell, and in a cell that had one, cuts the traceback of an error
    down to its last line: the error's message, which names the property that failed, without the
    source lines around it."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not HIDDEN.search(cell.source):
            return cell, resources
        cell.source = HIDDEN.sub(HIDDEN_NOTE, cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output['ename']}: {output['evalue']}"]
        return cell, resources
