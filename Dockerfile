# syntax=docker/dockerfile:1
# llmgate: one image for both processes; the command picks which one runs.
#   web process:  llmgate serve    (the default; listens on $PORT, 8000)
#   worker:       llmgate worker   (scale these horizontally)
# Build:  docker build -t llmgate:0.1.0 .
# The base image is pinned to an exact Python patch release and Debian release; bump both
# stages together.

FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/llmgate
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY worker ./worker
RUN /opt/llmgate/bin/pip install --no-cache-dir .

FROM python:3.11.11-slim-bookworm AS runtime
# git checks out pull requests; ca-certificates lets it and httpx verify TLS. Debian's
# security updates replace exact package versions, so they are not pinned here.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 llmgate \
    && useradd --system --uid 10001 --gid llmgate --create-home --home-dir /home/llmgate llmgate \
    && mkdir -p /var/lib/llmgate \
    && chown llmgate:llmgate /var/lib/llmgate
COPY --from=build /opt/llmgate /opt/llmgate
ENV PATH=/opt/llmgate/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HOST=0.0.0.0 \
    PORT=8000 \
    LLMGATE_LOG_FORMAT=json \
    LLMGATE_WORKDIR=/var/lib/llmgate \
    LLMGATE_HEARTBEAT_FILE=/tmp/llmgate-worker.heartbeat
USER 10001:10001
WORKDIR /home/llmgate
EXPOSE 8000
# Both processes drain on SIGTERM: the web process finishes requests in flight, a worker
# finishes (or re-queues) its jobs within LLMGATE_SHUTDOWN_GRACE_S.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["llmgate", "healthcheck"]
CMD ["llmgate", "serve"]
