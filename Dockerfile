# syntax=docker/dockerfile:1
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
# npm install, not npm ci: the registry serves DuckDB's binding only for this platform, so the
# lock file cannot list the others and npm ci would refuse it. The locked versions are installed.
RUN npm install --no-audit --no-fund && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production COTWIRE_HOST=0.0.0.0 COTWIRE_DB=/data/cotwire.duckdb
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY config/cotwire.example.yaml ./config/
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 5433 4318
# Listening on 0.0.0.0 requires users: set COTWIRE_USERS (YAML or JSON, from `cotwire passwd`),
# or mount a configuration file and set COTWIRE_CONFIG. The HTTP listener (/healthz, /metrics, OTLP,
# the viewer) stays on the container's loopback, where the HEALTHCHECK reaches it: to serve it on
# 4318, set COTWIRE_HTTP_HOST=0.0.0.0 with COTWIRE_TLS_KEY and COTWIRE_TLS_CERT, and give users tokens.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s \
  CMD node -e "fetch('http://127.0.0.1:4318/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# node directly, not npm, so that SIGTERM reaches the server and it drains and checkpoints.
CMD ["node", "--max-semi-space-size=32", "dist/launch.cjs", "serve"]
