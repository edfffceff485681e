# hostwatch: multi-stage build, non-root runtime, health check on /readyz.
# syntax=docker/dockerfile:1

FROM node:20-bookworm-slim AS build
WORKDIR /app
# better-sqlite3 compiles from source when no prebuilt binary fits.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY bench ./bench
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim AS runtime
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
# /readyz answers when server.listen is set (e.g. 0.0.0.0:8080 with server.token).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:8080/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["run", "-c", "/etc/hostwatch/config.yaml"]
