"""Lines in the host's log, tagged by the host with the plugin and the object being
reconciled. Outside a component (native tests) they go to Python's ``logging``."""

from __future__ import annotations

import logging

_LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level: str, message: str) -> None:
    """Writes ``message`` at ``level`` (``trace``, ``debug``, ``info``, ``warn``, ``error``)."""
    if level not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}, expected one of {_LEVELS}")
    try:
        from wit_world.imports import host  # only inside a component
    except ImportError:
        py = {"trace": logging.DEBUG, "warn": logging.WARNING}.get(level, level.upper())
        logging.getLogger("wasmop.plugin").log(
            py if isinstance(py, int) else logging.getLevelName(py), message
        )
        return
    host.log(getattr(host.Level, level.upper()), message)


def info(message: str) -> None:
    """Logs at info level."""
    log("info", message)


def debug(message: str) -> None:
    """Logs at debug level."""
    log("debug", message)


def warn(message: str) -> None:
    """Logs at warn level."""
    log("warn", message)
