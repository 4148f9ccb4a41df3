# Herald runs its TypeScript directly on Node 24 (type stripping): no build step.
FROM node:24.21.0-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY openapi ./openapi
COPY src ./src
USER node
EXPOSE 3000
ENTRYPOINT ["./bin/herald"]
CMD ["start"]
