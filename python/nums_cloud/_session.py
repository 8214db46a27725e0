"""The session arrays are made in: ``nums_cloud.init(...)``, its environment variables and
the embedded default (a store under the user's cache folder, local functions)."""

import numbers
import os
import sys
import threading
from pathlib import Path

from . import _native, _progress

__all__ = ["init", "session", "settings", "close", "ENVIRONMENT"]

#: The environment variables ``init`` reads for the settings it is not given (a script's
#: settings without code), with the ``init`` argument each stands for.
ENVIRONMENT = {
    "storage": "NUMS_CLOUD_STORAGE",
    "infra": "NUMS_CLOUD_INFRA",
    "endpoint": "NUMS_CLOUD_ENDPOINT",
    "backend": "NUMS_CLOUD_BACKEND",
    "function": "NUMS_CLOUD_LAMBDA_FUNCTION",
    "scheduler": "NUMS_CLOUD_SCHEDULER",
    "workers": "NUMS_CLOUD_WORKERS",
    "memory_mb": "NUMS_CLOUD_MEMORY_MB",
    "timeout_seconds": "NUMS_CLOUD_TIMEOUT_SECONDS",
    "progress": "NUMS_CLOUD_PROGRESS",
    "in_process_mb": "NUMS_CLOUD_IN_PROCESS_MB",
    "memory_tier_mb": "NUMS_CLOUD_MEMORY_TIER_MB",
    "function_tier_percent": "NUMS_CLOUD_FUNCTION_TIER_PERCENT",
}

_INTS = {"workers", "memory_mb", "timeout_seconds"}

_lock = threading.RLock()
_current = None


def cache_dir():
    """The user's cache folder for nums-cloud: ``$XDG_CACHE_HOME/nums-cloud`` (else
    ``~/.cache/nums-cloud``), ``~/Library/Caches/nums-cloud`` on macOS,
    ``%LOCALAPPDATA%\\nums-cloud`` on Windows."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "nums-cloud"


def default_storage():
    """The embedded default store: the folder ``store`` in :func:`cache_dir`. Each session
    keeps its arrays under a prefix of its own there and removes them when it ends."""
    return (cache_dir() / "store").as_uri()


def function_command():
    """The local backend's function process: this Python running the extension's function
    loop (``python -m nums_cloud._function``), so no separate binary is needed; or
    ``$NUMS_CLOUD_FUNCTION`` (a ``nums-cloud`` binary and its ``function`` argument)."""
    if os.environ.get("NUMS_CLOUD_FUNCTION"):
        return None
    return [sys.executable, "-m", "nums_cloud._function"]


def _from_env(name):
    v = os.environ.get(ENVIRONMENT[name])
    if v is None or v == "":
        return None
    if name in _INTS or name == "function_tier_percent":
        try:
            return int(v)
        except ValueError:
            raise ValueError(f"{ENVIRONMENT[name]}={v!r} is not a whole number") from None
    if name in ("in_process_mb", "memory_tier_mb"):
        try:
            return float(v)
        except ValueError:
            raise ValueError(f"{ENVIRONMENT[name]}={v!r} is not a number of MiB") from None
    if name == "progress":
        return v.lower() not in ("0", "false", "no", "off")
    return v


class Session:
    """Where arrays are stored and how computes run; made by :func:`init`.

    Arrays belong to the session they were made in and compute with its settings. What a
    session keeps in the store (computed arrays, inputs from memory) lies under a prefix
    of its own. As Dask keeps persisted arrays, a computed array's blocks stay while the
    Python object (or another array that is the same) lives; once it is gone, the next
    compute deletes them in the background (:meth:`collect` deletes them now), never
    while a compute that may read them runs, and a lazy array made from it computes it
    again (the same values: the engine is deterministic, random arrays too). An input
    from memory (``nps.array``) or an imported file stays while an array that lives is
    made from it. Everything goes with :meth:`close`, or when the session and its arrays
    are gone (at the latest when Python exits)."""

    __slots__ = ("_native", "__weakref__")

    def __init__(self, native):
        self._native = native

    def settings(self):
        """The settings: storage, endpoint, backend, function, scheduler, workers,
        memory_mb, timeout_seconds, in_process_bytes, memory_tier_bytes,
        function_tier_percent."""
        return self._native.settings()

    def counts(self):
        """What the session's computes have sent so far: ``invocations`` (in this process
        or to the backend; retries count), ``in_process`` (of those, run here) and
        ``tasks`` (their block tasks); ``bytes_read`` (what they read from the store),
        ``memory_hits`` and ``memory_bytes_read`` (the blocks, and their bytes, that
        function processes read from their own memory instead). An array computed once
        is read in place afterwards while it lives: computing it again sends nothing."""
        return self._native.counts()

    def collect(self):
        """Deletes now what no array holds any more (computes do so as they start), and
        waits for it: the space of arrays let go, back before the next compute."""
        self._native.collect()

    def close(self):
        """Removes what the session keeps in the store and stops its function processes;
        its arrays cannot be computed afterwards."""
        self._native.close()

    def __repr__(self):
        return repr(self._native)


def init(storage=None, backend=None, workers=None, memory_mb=None, function=None,
         infra=None, *, endpoint=None, scheduler=None, timeout_seconds=None, progress=None,
         in_process_mb=None, memory_tier_mb=None, function_tier_percent=None):
    """Starts a session and makes it the one new arrays are made in; returns it.

    Every setting left out comes from its environment variable (:data:`ENVIRONMENT`:
    ``NUMS_CLOUD_STORAGE``, ``NUMS_CLOUD_BACKEND``, ``NUMS_CLOUD_WORKERS``, ...), else
    from the embedded default: a store under the user's cache folder and local function
    processes (no services, nothing to deploy).

    Parameters
    ----------
    storage : str or Path, optional
        ``file://folder`` (or a plain folder path) or ``s3://bucket/prefix`` (credentials
        from the standard AWS chain).
    backend : {"local", "lambda"}, optional
        Local function processes (default) or the AWS Lambda function ``function``.
    workers : int, optional
        Concurrent invocations (default: for local function processes one per core,
        as many as three quarters of the machine's memory holds at ``memory_mb``; on
        Lambda 2, or the deployment's reserved concurrency).
    memory_mb : int, optional
        Memory of one invocation in MB (default 2048); plans fit it, and the local
        backend enforces it as Lambda does.
    function : str, optional
        The Lambda function's name (default ``nums-cloud``).
    infra : str or Path, optional
        A deployment made with ``infra/`` (``terraform output -json`` saved to a file, as
        :func:`nums_cloud.deploy` saves it): its bucket, function, memory and backend
        ``lambda``. Its region becomes ``AWS_REGION`` and the profile it was deployed
        with ``AWS_PROFILE``, where the environment names none (the AWS clients read them
        there).
    endpoint : str, optional
        An S3-compatible endpoint for an ``s3://`` store (``http://`` only on loopback).
    scheduler : {"lshs", "naive"}, optional
    timeout_seconds : int, optional
    progress : bool, optional
        The progress of computes on the backend (default: in a notebook, or when standard
        error is a terminal): the stage that runs, block tasks done of the plan's total,
        store bytes moved and the projected time left. In a notebook an HTML display
        updated in place; else on standard error, a bar on a terminal or a line now and
        then elsewhere. Computes in this process show none.
    in_process_mb : float, optional
        Computes whose arrays (read and made) come to at most this many MiB run in this
        process, without function processes (default 16; 0: every compute on the
        backend). ``nums_cloud.explain(x)`` tells where a compute runs.
    memory_tier_mb : float, optional
        MiB of decoded blocks this process keeps in memory between computes (default: a
        quarter of the machine's memory; 0: none). ``persist()`` keeps an array there
        when it takes at most half of it; a compute over arrays held there runs in this
        process, at memory speed. A kept block is used only while the store still holds
        the same version; the least recently used go first when it is full.
        :func:`memory_tier` tells what it holds.
    function_tier_percent : int, optional
        The share, in percent, of each invocation's headroom (``memory_mb`` less what
        its batch is projected to need) that a function process keeps the blocks it read
        or wrote in, across invocations (default 50; 0: none). Work over those blocks is
        then sent to the process that holds them (local backend), which reads them from
        memory; a kept block is used only while the store holds the same version.
    """
    args = dict(storage=storage, backend=backend, workers=workers, memory_mb=memory_mb,
                function=function, infra=infra, endpoint=endpoint, scheduler=scheduler,
                timeout_seconds=timeout_seconds, progress=progress,
                in_process_mb=in_process_mb, memory_tier_mb=memory_tier_mb,
                function_tier_percent=function_tier_percent)
    for k, v in args.items():
        if v is None:
            args[k] = _from_env(k)
    if args["infra"] is not None:
        from . import _deploy

        # A path as nums_cloud.deploy returns it, or one with ~ as the docs write it.
        args["infra"] = str(Path(os.fspath(args["infra"])).expanduser())
        _deploy.use_deployment_aws(args["infra"])
    storage = args.pop("storage")
    if isinstance(storage, os.PathLike):
        storage = os.fspath(storage)
    if storage is not None and "://" not in storage:
        storage = Path(storage).expanduser().resolve().as_uri()
    if storage is None and args["infra"] is None:
        storage = default_storage()
    notebook = _progress.in_notebook()
    if args["progress"] is None:
        args["progress"] = notebook or bool(getattr(sys.stderr, "isatty", lambda: False)())
    # Counts and sizes at least 1, said now rather than at the first compute.
    for name in sorted(_INTS):
        v = args[name]
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral)
                              or v < 1):
            raise ValueError(f"{name} must be a whole number, 1 or more: got {v!r}")
    mb = args.pop("in_process_mb")
    tier = args.pop("memory_tier_mb")
    for name, v in (("in_process_mb", mb), ("memory_tier_mb", tier)):
        if v is not None and not v >= 0:
            raise ValueError(f"{name} must be a number of MiB, 0 or more: got {v!r}")
    native = _native.Session(
        storage,
        in_process_bytes=None if mb is None else int(mb * (1 << 20)),
        memory_tier_bytes=None if tier is None else int(tier * (1 << 20)),
        function_command=function_command(),
        progress_to=_progress.NotebookProgress() if notebook and args["progress"] else None,
        **args,
    )
    s = Session(native)
    global _current
    with _lock:
        _current = s
    return s


def memory_tier():
    """What this process's memory tier holds and has served: ``budget`` and ``bytes``,
    ``blocks``, ``hits`` (reads served from memory), ``misses`` (read from the store),
    ``evicted`` (for room) and ``stale`` (changed in the store, so dropped);
    ``unwritten``, the bytes of blocks computed here and kept only in memory so far
    (written to the store when a compute on the backend reads them, or for room), and
    ``written_back``, the blocks written so."""
    return _native.Session.memory_tier()


def session():
    """The current session (:func:`init`'s; the first use of nums-cloud starts one from the
    environment and the defaults)."""
    s = _current
    if s is None:
        with _lock:
            if _current is None:
                init()
        s = _current
    return s


def settings():
    """The current session's settings."""
    return session().settings()


def close():
    """Closes the current session (:meth:`Session.close`); the next use starts another."""
    global _current
    with _lock:
        s, _current = _current, None
    if s is not None:
        s.close()
