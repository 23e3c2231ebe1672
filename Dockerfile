# Krill's container image: `krill run` as an unprivileged user, state in two volumes
# (/var/lib/krill/data: the SQLite store and received media; /var/lib/krill/workspace: the
# markdown workspace). KRILL_STORAGE__URL=postgresql://… puts the store in PostgreSQL instead
# (deploy/compose.yaml runs three replicas that way).
# Build from the repository root: docker build -t krill .   (deploy/compose.yaml does this)

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY channels ./channels
COPY workspace ./workspace
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 10001 krill \
    && useradd --system --uid 10001 --gid krill --home-dir /var/lib/krill \
        --shell /usr/sbin/nologin krill
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels

# The config is root's (the service only reads it); `krill init` keeps it and copies the
# bundled workspace beside it. Data and workspace belong to krill and become volumes, which
# a named volume fills from the image on first use.
COPY deploy/krill.toml /var/lib/krill/krill.toml
RUN krill init /var/lib/krill \
    && mkdir -p /var/lib/krill/data \
    && chown -R krill:krill /var/lib/krill/data /var/lib/krill/workspace
VOLUME ["/var/lib/krill/data", "/var/lib/krill/workspace"]

USER 10001:10001
WORKDIR /var/lib/krill
EXPOSE 8787
# 200 once every enabled channel is live, 503 otherwise; slim images have no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=4)"]
CMD ["krill", "run", "--config", "/var/lib/krill/krill.toml"]
