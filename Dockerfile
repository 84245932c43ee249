# The requester image. Node 24 runs the TypeScript sources directly (type stripping): no build
# step, only the production tree of infra/image/prod-tree.sh (the tree CI starts, see
# test/deploy/image.test.ts). Roles: `docker run requester --role executor`.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS tree
ENV PNPM_VERSION=12.4.2
RUN npm install -g "pnpm@${PNPM_VERSION}"
WORKDIR /src
COPY . .
RUN bash infra/image/prod-tree.sh /app

FROM ${NODE_IMAGE}
# tini as PID 1: forwards SIGTERM to node (graceful drain) and reaps children.
RUN apt-get update && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production HTTP_HOST=0.0.0.0
WORKDIR /app
COPY --from=tree --chown=root:root /app /app
# The admin CLI on PATH: `docker compose exec ingress requester keys create ...`,
# `kubectl exec deploy/requester-ingress -- requester queue info`. The shim follows the link.
RUN ln -s /app/packages/requester/bin/requester /usr/local/bin/requester
# Non-root, and nothing under /app is writable by the process (read-only root file system works).
USER node
EXPOSE 8080 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.ADMIN_PORT ?? 9464}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Through the same shim as the CLI: it starts Node with the memory settings measured in
# docs/benchmarks/memory.md ("Memory under load": young generation, heap growth, MALLOC_ARENA_MAX=2).
ENTRYPOINT ["tini", "--", "requester"]
CMD ["--role", "all"]
