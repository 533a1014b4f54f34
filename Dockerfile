# The facade's image, on the official Node 24 image (its `node` runs everything; the project's
# `node` npm package is a development dependency and is not installed here). Two stages: `build`
# installs every dependency (the supergraph composition, the demo OpenID provider and the tests need
# the dev ones; compose.yaml runs `npm run supergraph` and `npm run dev-issuer` in it), `runtime`
# installs the production dependencies only (`npm ci --omit=dev`) and runs as an unprivileged user.
# Both keep npm's cache in a build cache mount (BuildKit, buildah, podman), so a rebuild after a
# lockfile change downloads only what changed and no layer carries the cache.
# scripts/build-image.sh builds it (docker, else podman or buildah); docs/operations.md, "The image".

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
COPY . .
# GraphiQL for EXPLORER=graphiql, bundled from npm here so the image serves it offline.
RUN npm run build:explorer

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=4000
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --no-audit --no-fund
# Only what runs: the facade, its SDL and contract, the emulator and the example subgraph (both
# optional services of compose.yaml), and the start script, whose every module lives under src/ or
# emulator/ (scripts/ holds tools; only this entry of it ships). Not the demo OpenID provider: its
# oidc-provider is a development dependency (compose runs it from the build stage), and the start
# script refuses the demo without it, saying so. test/operations/image-runtime.test.ts assembles
# exactly what these lines copy, installs it as above, and starts the CMD from it.
COPY src ./src
COPY schema ./schema
COPY emulator ./emulator
COPY examples ./examples
COPY scripts/start.ts ./scripts/start.ts
COPY --from=build /app/explorer/dist ./explorer/dist
USER node
# The API, and the metrics server (METRICS_PORT): publish that one to the scraper only.
EXPOSE 4000 9464
# /healthz answers 200 while the process serves HTTP (no upstream call).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 4000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Node runs as PID 1 and handles SIGTERM itself: ordered shutdown, then exit 0. --expose-gc lets the
# facade give memory back once it turns idle after a burst (MEMORY_RELEASE_*, docs/operations.md).
# Without UPSTREAM_BASE_URL and AUTH_ISSUER this would be the demo (embedded emulator and OpenID
# provider), which refuses to listen on 0.0.0.0: run the image with your upstream and identity
# provider, or as compose.yaml does. DEMO_ALLOW_NETWORK=true overrides it, with a warning.
CMD ["node", "--expose-gc", "scripts/start.ts"]
