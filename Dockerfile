# Container image of dynamo-sidecar (also runs the simulated engine and the load client).
#   docker build -t dynamo-sidecar .
#   docker run --rm -p 50050:50050 -p 9090:9090 -e DYN_ENGINE_REQUEST_LIMIT=32 dynamo-sidecar --upstream engine:50051
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
COPY proto ./proto
COPY bin ./bin
RUN npm ci --no-audit --no-fund && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY proto ./proto
COPY bin ./bin
USER node
EXPOSE 50050 9090
ENTRYPOINT ["node", "bin/dynamo-sidecar"]
