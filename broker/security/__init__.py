"""Listener security: TLS contexts from Kafka's ``ssl.*`` properties (:mod:`.tls`) and the SASL
server side of a connection (:mod:`.sasl`). Both are I/O-free: the listener wraps sockets with the
context, the request pipeline feeds SASL tokens to a :class:`~.sasl.SaslSession`."""

from __future__ import annotations

from .listeners import ListenerSecurity, listener_security
from .sasl import Authenticator, SaslFailure, SaslSession, build_authenticator
from .tls import server_context

__all__ = [
    "Authenticator",
    "ListenerSecurity",
    "SaslFailure",
    "SaslSession",
    "build_authenticator",
    "listener_security",
    "server_context",
]
