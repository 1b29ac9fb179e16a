FROM python:3.11-slim
RUN useradd --create-home --uid 10001 broker && mkdir /data && chown broker /data
WORKDIR /app
COPY pyproject.toml README.md ./
COPY broker ./broker
COPY codegen ./codegen
RUN pip install --no-cache-dir .
USER broker
VOLUME ["/data"]
EXPOSE 9092
# Clients outside the container connect to localhost:9092; override --advertised-host as needed.
CMD ["python", "-m", "broker", "serve", "--host", "0.0.0.0", "--advertised-host", "localhost", "--data-dir", "/data"]
