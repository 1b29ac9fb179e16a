"""Errors shared by the SASL implementation and the request path that reports them, in a module of
their own so that the request pipeline does not import the SASL mechanisms (scramp, asn1crypto,
the OAUTHBEARER validator) to know the exception: those load only when a listener uses SASL
(:mod:`.listeners`)."""

from __future__ import annotations


class SaslFailure(Exception):
    """The client failed to authenticate; the message is what the client is told."""
