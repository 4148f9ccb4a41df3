# The server compiled to JavaScript (build/, what bin/herald runs) and the web dashboard are built
# in a stage of their own, so that the image keeps production dependencies only.
FROM node:24.21.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json && touch build/.built
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
COPY --from=build /app/build ./build
COPY --from=build /app/dist/dashboard ./dist/dashboard
USER node
EXPOSE 3000
ENTRYPOINT ["./bin/herald"]
CMD ["start"]
