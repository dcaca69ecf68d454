"""Sphinx extension of the course book: drop the Thebe scripts from every page.

Jupyter Book 1 always loads sphinx-thebe, which adds an inline script naming Thebe's address on
unpkg.com (twice when the environment is read twice: a console error, "THEBE_JS_URL has already
been declared") and sphinx-thebe.js. The book is read offline and has no launch buttons, so
neither script has anything to do.
"""


def _is_thebe(script) -> bool:
    return "thebe" in str(script.filename or "") or "THEBE" in script.attributes.get("body", "")


def drop_thebe(app, pagename, templatename, context, doctree):
    context["script_files"] = [s for s in context.get("script_files", []) if not _is_thebe(s)]


def setup(app):
    app.connect("html-page-context", drop_thebe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
