"""Errors the command line turns into one line on stderr and exit status 2."""


class InputError(ValueError):
    """Input found wrong at a boundary (a file, a flag, a layout).

    The message says what was expected and what was found. ``fullgraph`` prints it as one line and
    exits with status 2; library callers get an ordinary ``ValueError`` subclass.
    """
