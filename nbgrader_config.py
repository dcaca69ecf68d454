"""nbgrader configuration of the course (run nbgrader from the repository root).

Source notebooks (with solutions and hidden tests) live in solutions/<topic key>/, the student
versions that `nbgrader generate_assignment <topic key>` writes in exercises/<topic key>/.
Submissions, autograded notebooks, feedback and the gradebook (gradebook.db) stay out of git.
"""
from nbgrader.converters import GenerateAssignment, GenerateFeedback
from nbgrader.preprocessors import ClearSolutions, GetGrades

from course.grading import CELL_TIMEOUT, ClearSolutionsByCellLanguage, HideHiddenTests

c = get_config()  # noqa: F821  (provided by nbgrader)

c.CourseDirectory.course_id = "pfem"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"

# stubs in the language of each cell (C and Fortran cells written with %%writefile)
c.GenerateAssignment.preprocessors = [
    ClearSolutionsByCellLanguage if p is ClearSolutions else p
    for p in GenerateAssignment.class_traits()["preprocessors"].make_dynamic_default()
]

# feedback shows the learner's answers and the messages of failed checks, never the hidden tests
c.GenerateFeedback.preprocessors = [
    p for q in GenerateFeedback.class_traits()["preprocessors"].make_dynamic_default()
    for p in ([q, HideHiddenTests] if q is GetGrades else [q])
]

# a cell that runs longer than this is interrupted and loses its points (endless loops)
c.Execute.timeout = CELL_TIMEOUT
# a cell interrupted at its timeout inside compiled code answers late: go on with the next cell
# (which waits for the kernel, and has its own timeout) rather than fail the whole submission
c.Execute.raise_on_iopub_timeout = False
