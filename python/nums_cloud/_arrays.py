"""What the session does with arrays it is handed (``nums_cloud.explain``,
``nums_cloud.persist``): above the session and the arrays. The arrays' module is imported
when first needed, as ``nums_cloud`` imports no more than it must (the function
processes import it too)."""

__all__ = ["explain", "Explanation", "persist"]


def explain(*arrays):
    """How computing ``arrays`` would run, without running it: in this process (a compute
    within ``in_process_mb``), on the session's backend (local function processes or
    Lambda), or not at all (computed already, and kept while the array lives), with the
    bytes of arrays it reads and makes and the invocations of its plan. An array made
    from one that was computed and let go computes it again, and counts its bytes.
    Returns the text; ``print`` it."""
    from .numpy import _array

    if not arrays:
        raise TypeError("explain() needs at least one array")
    arrs = [_array.asarray(a) for a in arrays]
    s = arrs[0]._s
    place, text, _ = s.explain([a._a for a in arrs])
    return Explanation(place, text)


class Explanation(str):
    """What :func:`explain` says: the text, with ``place`` (``"in-process"``, ``"local"``,
    ``"lambda"`` or ``"stored"``)."""

    place: str

    def __new__(cls, place, text):
        self = super().__new__(cls, text)
        self.place = place
        return self


def persist(*arrays):
    """Computes ``arrays`` now and keeps them: in this process's memory tier where they
    fit (what a compute here makes stays there, written to the session's store only
    when a compute on the backend reads it; what the backend makes is read into it),
    else in the session's store. Later expressions read them in place instead of
    computing them again, as Dask's ``persist``. They stay there while the arrays (the Python objects) live:
    once one is gone, the next compute deletes its blocks, and what is made from it
    computes it again. Returns the arrays (one, or a tuple)."""
    from .numpy import _array

    arrs = [_array.asarray(a) for a in arrays]
    for a in arrs:
        a._s.persist(a._a)
    return arrs[0] if len(arrs) == 1 else tuple(arrs)
