# The Carton Registry server and CLI. Build: docker build -t carton-registry .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY registry ./registry
COPY migrations ./migrations
# A regular install: the migrations ship inside the package (registry.migrations).
RUN pip install . \
    && rm -rf /src \
    && useradd --system --uid 10001 --home-dir /var/lib/carton-registry --create-home registry \
    && mkdir -p /var/lib/carton-registry \
    && chown registry /var/lib/carton-registry

USER registry
ENV REGISTRY_DATA_DIR=/var/lib/carton-registry
WORKDIR /var/lib/carton-registry
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=6 \
    CMD python -c "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz?ready=1', timeout=4).status == 200 else 1)"
CMD ["carton-registry", "serve", "--host", "0.0.0.0", "--port", "8080"]
