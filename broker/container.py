"""The container image's entry point and health check (see Dockerfile).

``python -m broker.container [serve options...]`` starts ``pykbroker serve`` configured from the
environment as the apache/kafka image reads it: every ``KAFKA_*`` variable is a broker property,
``KAFKA_`` dropped, lower-cased, ``_`` -> ``.``, ``__`` -> ``_`` and ``___`` -> ``-``
(``KAFKA_ADVERTISED_LISTENERS`` -> ``advertised.listeners``, ``KAFKA_LOG_DIRS`` -> ``log.dirs``).
The JVM's variables (``KAFKA_HEAP_OPTS``, ``KAFKA_OPTS``, ...) are ignored. ``PYKBROKER_LOG_LEVEL``
and ``PYKBROKER_LOG_FORMAT`` set ``--log-level`` / ``--log-format``; arguments given to the container
are passed on to ``serve`` after these.

``python -m broker.container health`` exits 0 when the broker answers ApiVersions without error on
its first listener's port (from ``KAFKA_LISTENERS``; 9092 without it), else 1 with one line on stderr.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import sys
from collections.abc import Mapping

#: variables of the apache/kafka image that configure the JVM or its scripts, not the broker
NOT_PROPERTIES = frozenset(
    {
        "KAFKA_HEAP_OPTS",
        "KAFKA_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_GC_LOG_OPTS",
        "KAFKA_LOG4J_OPTS",
        "KAFKA_LOG4J_ROOT_LOGLEVEL",
        "KAFKA_LOG4J_LOGGERS",
        "KAFKA_TOOLS_LOG4J_LOGLEVEL",
        "KAFKA_JMX_OPTS",
        "KAFKA_JMX_PORT",
        "KAFKA_DEBUG",
        "KAFKA_VERSION",
        "KAFKA_HOME",
    }
)


def property_name(variable: str) -> str:
    """``KAFKA_LOG_RETENTION_MS`` -> ``log.retention.ms`` (``__`` -> ``_``, ``___`` -> ``-``)."""
    name = variable[len("KAFKA_") :].lower()
    return re.sub(r"_{1,3}", lambda m: {1: ".", 2: "_", 3: "-"}[len(m.group())], name)


def properties_from_env(env: Mapping[str, str]) -> dict[str, str]:
    return {
        property_name(k): v
        for k, v in sorted(env.items())
        if k.startswith("KAFKA_") and k not in NOT_PROPERTIES and len(k) > len("KAFKA_")
    }


def serve_args(env: Mapping[str, str], extra: list[str]) -> list[str]:
    """The ``serve`` command line for this environment and the container's arguments."""
    args = ["serve"]
    for key, value in properties_from_env(env).items():
        args += ["--config", f"{key}={value}"]
    if env.get("PYKBROKER_LOG_LEVEL"):
        args += ["--log-level", env["PYKBROKER_LOG_LEVEL"]]
    if env.get("PYKBROKER_LOG_FORMAT"):
        args += ["--log-format", env["PYKBROKER_LOG_FORMAT"]]
    return args + extra


def health_port(env: Mapping[str, str]) -> int:
    """The port of the first of ``KAFKA_LISTENERS`` that is not a controller listener (9092 without)."""
    controllers = {n.strip() for n in env.get("KAFKA_CONTROLLER_LISTENER_NAMES", "").split(",") if n.strip()}
    for listener in env.get("KAFKA_LISTENERS", "").split(","):
        name, sep, address = listener.strip().partition("://")
        if sep and name not in controllers:
            return int(address.rsplit(":", 1)[1])
    return 9092


def check_api_versions(host: str, port: int, timeout: float = 3.0) -> None:
    """Send ApiVersions v0 and decode the answer; raises (OSError, ValueError) unless it is error-free."""
    from broker.protocol.generated import codec, request_header
    from broker.protocol.generated.api_versions import ApiVersionsRequest
    from broker.protocol.generated.request_header import RequestHeader

    api = codec(18)
    payload = request_header.encode_v1(RequestHeader(18, 0, 1, "healthcheck")) + api.REQUEST_ENCODERS[0](
        ApiVersionsRequest()
    )
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _read(sock, 4))[0]
        frame = _read(sock, size)
    if struct.unpack_from(">i", frame)[0] != 1:
        raise ValueError("ApiVersions answered with the wrong correlation id")
    response, _end = api.RESPONSE_DECODERS[0](frame, 4)
    if response.error_code:
        raise ValueError(f"ApiVersions answered error {response.error_code}")


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    env = os.environ if env is None else env
    if argv[:1] == ["health"]:
        port = int(argv[1]) if len(argv) > 1 else health_port(env)
        try:
            check_api_versions("127.0.0.1", port)
        except (OSError, ValueError) as e:
            print(f"unhealthy: 127.0.0.1:{port}: {e}", file=sys.stderr)
            return 1
        return 0
    args = serve_args(env, argv)
    os.execv(sys.executable, [sys.executable, "-m", "broker", *args])
    return 0  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main())
