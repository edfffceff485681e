# syntax=docker/dockerfile:1
# hostwatch: multi-stage build on the current Node.js LTS (26, Active LTS since 2026-10-28, on
# Debian 13), non-root runtime, health check on /readyz.

FROM node:26-trixie-slim AS build
WORKDIR /app
# better-sqlite3 compiles from source when no prebuilt binary fits.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
# Only src/ is compiled (bench/ is not copied in), without source maps: neither belongs in
# the runtime image. Then the dev dependencies go.
RUN npx tsc -p tsconfig.json --sourceMap false && npm prune --omit=dev

FROM node:26-trixie-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY migrations ./migrations
COPY rules ./rules
# The config is mounted at /etc/hostwatch/config.yaml; state lives in /var/lib/hostwatch.
RUN mkdir -p /var/lib/hostwatch /etc/hostwatch && chown -R node:node /var/lib/hostwatch
USER node
VOLUME ["/var/lib/hostwatch"]
EXPOSE 8080
ENV HOSTWATCH_CONFIG=/etc/hostwatch/config.yaml
# `hostwatch health` asks /readyz at the address the config's server.listen names (any
# port; 0.0.0.0 is asked on 127.0.0.1), so the check follows the config.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "dist/src/cli.js", "health"]
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["run"]
