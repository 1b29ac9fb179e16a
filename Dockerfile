# pykbroker: a Kafka wire-protocol broker. docker build -t pykbroker . && docker run -p 9092:9092 pykbroker
# BASE_IMAGE: any image with Python 3.11+ and pip on PATH as python/pip (the test suite passes a
# locally built Debian one: scripts/docker-base.sh).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 broker \
    && mkdir -p /data && chown broker:broker /data && chmod 0770 /data

WORKDIR /app

# The dependencies first, in their own layer: rebuilt only when pyproject.toml changes.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt

# Then the source (.dockerignore keeps .venv, tests and the reference downloads out of the context).
COPY broker ./broker
COPY codegen ./codegen
RUN pip install --no-deps . && rm -rf /app/build

USER broker
VOLUME ["/data"]
EXPOSE 9092

# Configuration as the apache/kafka image reads it: KAFKA_<PROPERTY> variables (broker/container.py).
# Clients outside the container connect to localhost:9092; in a compose network, set
# KAFKA_ADVERTISED_LISTENERS to the service's name (see README.md).
ENV KAFKA_LISTENERS=PLAINTEXT://:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    KAFKA_LOG_DIRS=/data

HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-m", "broker.container", "health"]

ENTRYPOINT ["python", "-m", "broker.container"]
CMD []
