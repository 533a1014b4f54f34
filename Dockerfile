# The facade's image. Two stages: `build` installs every dependency (the supergraph composition and
# the tests need the dev ones; compose.yaml runs `npm run supergraph` in it), `runtime` installs the
# production dependencies only and runs as an unprivileged user.
#
# The base image brings npm; the Node that runs the facade is the one the project pins, from the
# `node` package in package.json's dependencies (node_modules/.bin/node, first on PATH).

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=4000 \
    PATH=/app/node_modules/.bin:$PATH
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# Only what runs: the facade, its SDL and contract, the emulator and the example subgraph (both
# optional services of compose.yaml), the start script.
COPY src ./src
COPY schema ./schema
COPY emulator ./emulator
# The demo OpenID provider: `npm start` runs it beside the embedded emulator, compose as a service.
COPY dev-issuer ./dev-issuer
COPY examples ./examples
COPY scripts/start.ts ./scripts/start.ts
USER node
# The API, and the metrics server (METRICS_PORT): publish that one to the scraper only.
EXPOSE 4000 9464
# /healthz answers 200 while the process serves HTTP (no upstream call).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 4000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Node runs as PID 1 and handles SIGTERM itself: ordered shutdown, then exit 0.
# Without UPSTREAM_BASE_URL and AUTH_ISSUER this would be the demo (embedded emulator and OpenID
# provider), which refuses to listen on 0.0.0.0: run the image with your upstream and identity
# provider, or as compose.yaml does. DEMO_ALLOW_NETWORK=true overrides it, with a warning.
CMD ["node", "scripts/start.ts"]
