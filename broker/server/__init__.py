"""Sockets live here and only here: the listener and the per-connection protocol."""

from .listener import Listener, new_event_loop

__all__ = ["Listener", "new_event_loop"]
