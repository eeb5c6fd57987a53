import { z } from 'zod';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const DEV_SECRET = 'mailwright-development-secret-do-not-use-in-production';

const schema = z
  .object({
    NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
    HOST: z.string().default('127.0.0.1'),
    PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    PUBLIC_URL: z.url().optional(),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    DATABASE_URL: z.string().min(1),
    DATABASE_POOL_MAX: z.coerce.number().int().min(1).default(20),
    TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
    TEMPORAL_NAMESPACE: z.string().default('default'),
    TEMPORAL_TASK_QUEUE: z.string().default('mailwright'),
    SMTP_URL: z.string().default('smtp://127.0.0.1:1025'),
    SMTP_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(5),
    JWT_SECRET: z.string().min(16).optional(),
    SIGNUP_ENABLED: bool.default(true),
    COOKIE_SECURE: bool.optional(),
    MAX_JSON_BODY: z.string().default('1mb'),
    MAX_SEND_BODY: z.string().default('60mb'),
  })
  .superRefine((env, ctx) => {
    if (env.NODE_ENV === 'production') {
      for (const key of ['JWT_SECRET', 'PUBLIC_URL'] as const) {
        if (!env[key]) ctx.addIssue({ code: 'custom', path: [key], message: 'is required in production' });
      }
    }
  });

export type Config = ReturnType<typeof buildConfig>;

function buildConfig(env: z.infer<typeof schema>) {
  const publicUrl = (env.PUBLIC_URL ?? `http://localhost:${env.PORT}`).replace(/\/$/, '');
  return {
    env: env.NODE_ENV,
    host: env.HOST,
    port: env.PORT,
    publicUrl,
    logLevel: env.LOG_LEVEL,
    database: { url: env.DATABASE_URL, poolMax: env.DATABASE_POOL_MAX },
    temporal: { address: env.TEMPORAL_ADDRESS, namespace: env.TEMPORAL_NAMESPACE, taskQueue: env.TEMPORAL_TASK_QUEUE },
    smtp: { url: env.SMTP_URL, poolSize: env.SMTP_POOL_SIZE },
    // Development and test get a fixed secret so a restart keeps sessions; production refuses to start without one.
    jwtSecret: env.JWT_SECRET ?? DEV_SECRET,
    signupEnabled: env.SIGNUP_ENABLED,
    cookieSecure: env.COOKIE_SECURE ?? publicUrl.startsWith('https://'),
    limits: { jsonBody: env.MAX_JSON_BODY, sendBody: env.MAX_SEND_BODY },
  };
}

/** Parses the environment once; throws listing every bad variable. */
export function loadConfig(source: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(source);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return buildConfig(parsed.data);
}

let cached: Config | undefined;
export function config(): Config {
  cached ??= loadConfig();
  return cached;
}
