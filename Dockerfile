# The requester image: Node 24 runs the TypeScript sources directly (type stripping), no build step.
FROM node:24-bookworm-slim
ENV NODE_ENV=production PNPM_VERSION=12.4.2
WORKDIR /app
RUN npm install -g "pnpm@${PNPM_VERSION}"
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml .npmrc ./
COPY packages/shared/package.json packages/shared/
COPY packages/ingress/package.json packages/ingress/
COPY packages/scheduler/package.json packages/scheduler/
COPY packages/executor/package.json packages/executor/
COPY packages/relay/package.json packages/relay/
COPY packages/requester/package.json packages/requester/
RUN pnpm install --frozen-lockfile --prod
COPY packages packages
USER node
EXPOSE 8080 9464
ENTRYPOINT ["node", "--disable-warning=TimeoutNegativeWarning", "packages/requester/src/main.ts"]
CMD ["--role", "all"]
