import pino from 'pino';

/** One JSON logger for the API, the worker and scripts; children carry requestId and other context. */
export const logger = pino({
  level: process.env.LOG_LEVEL ?? 'info',
  base: { service: process.env.MAILWRIGHT_ROLE ?? 'mailwright' },
  redact: { paths: ['req.headers.authorization', 'req.headers.cookie', '*.password', '*.secretKey'], remove: true },
});
export type Logger = typeof logger;
