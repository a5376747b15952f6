"""Errors the command line turns into one line on stderr and an exit status of their own.

=========  =====================================================================================
status     meaning
=========  =====================================================================================
0          the run finished
1          an unexpected failure (a traceback, or the failing rank's reason)
2          bad input (:class:`InputError`): nothing was started, or what was started is undone
3          the output could not be written: the disk filled (:class:`NoSpaceError`: partial files removed,
           the last checkpoint kept), or its folder is read-only or cannot be made (:class:`CannotWriteError`)
4          the loss or the weights stopped being finite (:class:`NonFiniteError`)
130        interrupted (Ctrl-C, SIGTERM)
=========  =====================================================================================
"""

EXIT_STATUS = {"ok": 0, "failure": 1, "input": 2, "no_space": 3, "cannot_write": 3, "non_finite": 4, "interrupted": 130}
"""The command line's exit statuses, by what ended the run (the table above)."""


class InputError(ValueError):
    """Input found wrong at a boundary (a file, a flag, a layout).

    The message says what was expected and what was found. ``fullgraph`` prints it as one line and
    exits with status 2; library callers get an ordinary ``ValueError`` subclass.
    """

    exit_status = EXIT_STATUS["input"]


class RunFault(RuntimeError):
    """A run stopped by what happened to it, not by what it was given: the message says what, where,
    and how to carry on (which checkpoint to resume from). Each kind has its own exit status, so that
    a script or a scheduler can tell a full disk from a diverged model without reading the text."""

    exit_status = EXIT_STATUS["failure"]


class NoSpaceError(RunFault):
    """A file of the run could not be written because its file system is full."""

    exit_status = EXIT_STATUS["no_space"]


class CannotWriteError(RunFault):
    """An output folder cannot be written or made: a read-only file system, or no permission. Said before
    anything is computed, with the folder's name, rather than as a traceback from the first write."""

    exit_status = EXIT_STATUS["cannot_write"]


class NonFiniteError(RunFault):
    """The loss (or the weights about to be checkpointed) became NaN or infinite."""

    exit_status = EXIT_STATUS["non_finite"]
