"""Library calls that run without coverage's line tracer (the ``library_calls_untraced`` fixture
in tests/conftest.py says which and why)."""

from __future__ import annotations

import functools
import sys
import threading


def untraced(call):
    """``call`` wrapped so that it runs with no line tracer on this thread (``sys.settrace``)
    nor on the threads it starts (``threading.settrace``); both tracers are put back after, also
    when it raises. The callers' frames stay traced: ``Coverage.stop()``/``start()`` would leave
    them untraced for the rest of their run. A call made while no tracer is set runs as is."""

    @functools.wraps(call)
    def wrapper(*args, **kwargs):
        tracer = sys.gettrace()
        if tracer is None:
            return call(*args, **kwargs)
        thread_tracer = threading.gettrace()
        sys.settrace(None)
        threading.settrace(None)
        try:
            return call(*args, **kwargs)
        finally:
            threading.settrace(thread_tracer)
            sys.settrace(tracer)

    return wrapper
