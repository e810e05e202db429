"""Offline analysis of a trace. Pure: never imports warp, wrapt or warptrace.record."""
