# Container image of dynamo-sidecar: the sidecar (the default command), the frontend
# (`frontend`), the simulated engine (`engine`) and the load client (`load`), on Node 24 LTS.
#   docker build -t dynamo-sidecar:0.1.0 .
#   docker run --rm -p 50050:50050 -p 9090:9090 -e DYN_ENGINE_REQUEST_LIMIT=32 dynamo-sidecar:0.1.0 --upstream engine:50051
# NODE_IMAGE may name another base (a pinned digest, or Node 20 to check the floor in package.json).
ARG NODE_IMAGE=node:24-trixie-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
COPY proto ./proto
COPY static ./static
COPY bin ./bin
# npm ci runs `prepare` (tsc into dist/); the dev dependencies it needed are pruned after.
RUN npm ci --no-audit --no-fund && npm prune --omit=dev

FROM ${NODE_IMAGE}
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY proto ./proto
COPY static ./static
COPY bin ./bin
# The image's `node` user, by number so that Kubernetes' runAsNonRoot can check it.
USER 1000:1000
EXPOSE 50050 9090
# The sidecar's readiness on its system port (DYN_SYSTEM_PORT, default 9090). Other commands of
# this image (engine, frontend) get their own check where they run (docker-compose.yml).
HEALTHCHECK --interval=5s --timeout=2s --start-period=5s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.DYN_SYSTEM_PORT || 9090) + '/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "bin/dynamo-sidecar"]
