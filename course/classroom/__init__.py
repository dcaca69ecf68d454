"""The course in a classroom: what a learner gets, and where learners and an instructor meet.

    dist    `python -m course dist learner DIR`: the learner copy (no solutions, no hidden tests,
            no answers for instructors), with a learner's nbgrader settings
    hub     `python -m course hub ...`: a JupyterHub classroom on one machine, each learner a Unix
            user of their own, nbgrader's exchange between them

They sit above grading (they use its cell timeout) and below the command line.
"""
