# syntax=docker/dockerfile:1
# One image for the API, the Temporal worker and the CLI (migrate/bootstrap);
# docker-compose.yml picks the command.

# Node 26, the LTS the scripts install (PROJECT_NODE_VERSION, scripts/lib.sh), on Debian 13.
FROM node:26-trixie-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Exactly what the lock names (it records every platform's optional packages). Install scripts are skipped but for
# the one native addon, the PKCS#11 binding (KEY_PROVIDER=pkcs11), built with node-gyp against the image's own Node
# headers (/usr/local/include/node).
RUN npm ci --ignore-scripts --no-audit --no-fund
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/* && \
    npm_config_nodedir=/usr/local npm rebuild pkcs11js --no-audit --no-fund
COPY . .
RUN npm run build && npm prune --omit=dev --ignore-scripts

FROM node:26-trixie-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/app/.data \
    NODE_OPTIONS="--max-semi-space-size=4 --max-old-space-size=384" \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    MALLOC_TRIM_THRESHOLD_=131072
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# DATA_DIR must be writable by the unprivileged user (a named volume mounted
# there inherits this ownership).
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 3000
CMD ["node", "dist/src/server.js"]
