# One image for the API, the worker and the migration job (the command picks the role).
FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund && npm cache clean --force
COPY tsconfig.json ./
COPY api ./api
COPY domain ./domain
COPY temporal ./temporal
COPY migrations ./migrations
COPY scripts/migrate.ts scripts/build.ts ./scripts/
# The processes run compiled JavaScript (dist/) with plain Node: tsx's loader cost each about 40 MB (README › Production).
RUN npm run build
# Uploaded images when S3 is not configured (UPLOADS_DIR's default); docker-compose.yml mounts a volume here.
RUN mkdir -p /app/.data/uploads && chown -R node:node /app/.data
USER node
EXPOSE 3000 25
CMD ["npm", "run", "serve:api"]
