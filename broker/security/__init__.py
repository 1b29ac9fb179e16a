"""Listener security and authorization, one module each, imported by name (this package imports
none of them, so that ``broker.security.authorizer`` does not bring the SASL mechanisms along):

* :mod:`.listeners`: each listener's TLS context and SASL authenticator, built at start-up; it
  imports :mod:`.sasl` (scramp, asn1crypto, :mod:`.oauth`) only when a listener uses SASL;
* :mod:`.tls`: TLS contexts from Kafka's ``ssl.*`` properties, principals from certificates;
* :mod:`.sasl`: the server side of SASL (PLAIN, SCRAM, OAUTHBEARER), I/O-free; :mod:`.errors` its
  :class:`~.errors.SaslFailure`, which the request pipeline reports;
* :mod:`.scram_store`: SCRAM credentials (AlterUserScramCredentials); :mod:`.authorizer` and
  :mod:`.acl_store`: ACLs; :mod:`.selfsigned`: ``serve --tls self-signed``.
"""
