"""Graph capture: ``capture_begin``/``capture_end`` and ``capture_launch`` (a replay).

Events recorded while a device is captured carry the graph id and are not executed;
a ``capture_launch`` replays them (the analysis expands the replay).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from warptrace.record import state
from warptrace.record.wrap.common import (
    GRAPH_ATTR,
    WARP_VERSION,
    current_tape,
    device_alias,
    guarded_call,
    mark,
)
from warptrace.trace.schema import CAPTURE_BEGIN, CAPTURE_END, CAPTURE_LAUNCH


def make_capture_begin(original: Callable[..., Any]) -> Callable[..., Any]:
    """``wp.capture_begin``: events on the device belong to the new graph until capture_end."""

    def capture_begin(*args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(*args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(*args, **kwargs)
        result = original(*args, **kwargs)
        try:
            stream = args[1] if len(args) > 1 else kwargs.get("stream")
            device = stream.device if stream is not None else (args[0] if args else kwargs.get("device"))
            graph_id = rec.new_id("next_graph")
            alias = device_alias(device)
            detail = None
            with rec.lock:
                rec.captures[alias] = graph_id
                if alias == "cpu" and WARP_VERSION < (1, 15):
                    # CPU capture before Warp 1.15 runs launches and memsets as it records them
                    rec.executing_captures.add(graph_id)
                    detail = '{"executes_during_capture": true}'
            rec.emit(
                CAPTURE_BEGIN,
                tape=current_tape(rec, ts),
                site=rec.sites.caller(),
                ref_id=graph_id,
                detail=detail,
            )
        except Exception as exc:
            rec.fail(exc)
        return result

    return mark(original, capture_begin)


def make_capture_end(original: Callable[..., Any]) -> Callable[..., Any]:
    """``wp.capture_end``: tags the returned Graph with its id."""

    def capture_end(*args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(*args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(*args, **kwargs)
        graph = original(*args, **kwargs)
        try:
            alias = device_alias(graph.device) if graph is not None else None
            with rec.lock:
                graph_id = rec.captures.pop(alias, -1) if alias is not None else -1
                if graph_id < 0 and len(rec.captures) == 1:
                    graph_id = rec.captures.popitem()[1]
            if graph is not None and graph_id >= 0:
                setattr(graph, GRAPH_ATTR, (rec.tok, graph_id))
            rec.emit(CAPTURE_END, tape=current_tape(rec, ts), site=rec.sites.caller(), ref_id=graph_id)
        except Exception as exc:
            rec.fail(exc)
        return graph

    return mark(original, capture_end)


def make_capture_launch(original: Callable[..., Any]) -> Callable[..., Any]:
    """``wp.capture_launch``: a CAPTURE_LAUNCH event naming the graph replayed."""

    def capture_launch(*args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(*args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(*args, **kwargs)
        result = guarded_call(ts, original, *args, **kwargs)
        try:
            graph = args[0] if args else kwargs.get("graph")
            tagged = getattr(graph, GRAPH_ATTR, None)
            detail = None
            if tagged is not None and tagged[0] is rec.tok:
                graph_id = tagged[1]
            else:
                graph_id = rec.new_id("next_graph")
                setattr(graph, GRAPH_ATTR, (rec.tok, graph_id))
                detail = '{"captured": "before tracing started"}'
            rec.emit(
                CAPTURE_LAUNCH,
                tape=current_tape(rec, ts),
                site=rec.sites.caller(),
                ref_id=graph_id,
                detail=detail,
            )
        except Exception as exc:
            rec.fail(exc)
        return result

    return mark(original, capture_launch)


__all__ = ["make_capture_begin", "make_capture_end", "make_capture_launch"]
