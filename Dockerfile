# Herald runs its TypeScript directly on Node 24 (type stripping); only the web dashboard is built,
# in a stage of its own so that the image keeps production dependencies only.
FROM node:24.21.0-bookworm-slim AS dashboard
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY dashboard ./dashboard
COPY sdk/src ./sdk/src
RUN node dashboard/build.ts

FROM node:24.21.0-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY openapi ./openapi
COPY src ./src
COPY --from=dashboard /app/dist/dashboard ./dist/dashboard
USER node
EXPOSE 3000
ENTRYPOINT ["./bin/herald"]
CMD ["start"]
