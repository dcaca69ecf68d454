"""The implementations a kernel comes in, selected everywhere by one argument `lang`."""

LANGS = ("numpy", "numba", "c", "fortran")


def check_lang(lang: str) -> str:
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {', '.join(LANGS)}; got {lang!r}")
    return lang
