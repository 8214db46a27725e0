"""The exceptions nums-cloud raises besides Python's own (ValueError for shapes and bad
arguments, TypeError for dtypes, KeyboardInterrupt for Ctrl-C)."""

import numpy.linalg

__all__ = ["RunError", "StoreError", "PlanError", "LinAlgError"]


class RunError(RuntimeError):
    """A compute that failed while it ran: an invocation that failed for good (out of
    memory, timed out, crashed, throttled) or data that is wrong (a missing or corrupt
    block). The message is the function's error, with where its logs are."""


class StoreError(RunError, OSError):
    """The store failed: it does not answer, refuses the credentials or writes, or an
    array lies outside the function's store."""


class PlanError(MemoryError):
    """No plan fits: a block needs more memory than ``memory_mb`` in one invocation. The
    message names the array and the least ``memory_mb`` with which it plans."""


class LinAlgError(numpy.linalg.LinAlgError):
    """A linear-algebra failure, as NumPy raises it: a singular matrix, a matrix that is
    not positive definite, linearly dependent columns in a fit."""
