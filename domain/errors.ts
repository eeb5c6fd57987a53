/** One error vocabulary for the whole service; the API's error middleware renders it as SPEC.md's envelope. */

/**
 * Every `error.code` the service answers, with its HTTP status and what it means. README.md's error table is checked
 * against this list (test/unit/error-codes.test.ts), so the documentation cannot miss one.
 */
export const ERROR_CODES = {
  BAD_REQUEST: [400, 'A malformed request the other codes do not cover (e.g. a bad Idempotency-Key header)'],
  INVALID_JSON: [400, 'The body is not JSON (a JSON body with a `__proto__` key is 422 VALIDATION_ERROR, field code `forbidden_key`)'],
  UNAUTHORIZED: [401, 'No API key or session, or a session that is invalid or expired; a report webhook without its signature or credentials'],
  INVALID_API_KEY: [401, 'An unknown API key, or a public key outside POST /v1/track'],
  INVALID_CREDENTIALS: [401, 'Login with a wrong email or password'],
  FORBIDDEN: [403, 'The user\'s role does not allow this'],
  PROJECT_DISABLED: [403, 'The key\'s project is disabled'],
  DOMAIN_NOT_VERIFIED: [403, 'The sender domain is not added or not verified'],
  SIGNUP_DISABLED: [403, 'The deployment turned signup off'],
  INVALID_TOKEN: [403, 'An email verification, password reset or invitation token that is unknown, already used or expired'],
  INVALID_OAUTH_STATE: [403, 'OAuth callback: the state is missing, forged, expired or not the one this browser started with'],
  OAUTH_FAILED: [403, 'OAuth callback: the provider refused the sign-in, or has no verified email for the account'],
  INVALID_SIGNATURE: [403, '/webhooks/sns, /webhooks/incoming/*: the signature (or Postmark\'s credentials) does not verify (SNS, Stripe-Signature, SendGrid, Mailgun, Resend)'],
  INVALID_CERT_URL: [403, '/webhooks/sns: the signing certificate URL is not an SNS one'],
  TOPIC_NOT_ALLOWED: [403, '/webhooks/sns: a topic outside SNS_TOPIC_ARNS'],
  MESSAGE_EXPIRED: [403, '/webhooks/sns: the message is older than the replay window; /webhooks/incoming/<provider>: the signed timestamp is outside REPORT_WEBHOOK_TOLERANCE'],
  INVALID_SUBSCRIBE_URL: [403, '/webhooks/sns: the SubscribeURL is not an SNS one'],
  NOT_FOUND: [404, 'No such resource in this project, or no such route'],
  METHOD_NOT_ALLOWED: [405, 'The path does not serve this method (see `Allow`)'],
  CONFLICT: [409, 'A concurrent request changed the same resource first'],
  EMAIL_TAKEN: [409, 'Another account or contact has this email'],
  DOMAIN_EXISTS: [409, 'The project has this domain already'],
  DOMAIN_TAKEN: [409, 'Another project has this domain verified'],
  TEMPLATE_IN_USE: [409, 'An active campaign or enabled workflow uses the template'],
  SEGMENT_IN_USE: [409, 'An active campaign uses the segment'],
  CAMPAIGN_NOT_EDITABLE: [409, 'Only DRAFT and SCHEDULED campaigns can be changed'],
  CAMPAIGN_STATE: [409, 'The campaign\'s status does not allow this action (e.g. sending a campaign that is not a DRAFT)'],
  CAMPAIGN_ACTIVE: [409, 'The campaign is SCHEDULED, SENDING or PAUSED: cancel it first'],
  WORKFLOW_ACTIVE: [409, 'The workflow has RUNNING or WAITING executions: cancel them (or let them finish) first'],
  TRANSITION_EXISTS: [409, 'That exit of the step (its branch) already has a transition: delete it first'],
  EXECUTION_ACTIVE: [409, 'The contact already has a RUNNING or WAITING execution of this workflow, or may not enter it again'],
  EXECUTION_ENDED: [409, 'The execution has already ended'],
  JOB_ENDED: [409, 'The import or bulk job has already ended'],
  RESET_RUNNING: [409, 'A reset of the project is already running'],
  LAST_OWNER: [409, 'The project would have no OWNER left: make another member an OWNER first'],
  ALREADY_MEMBER: [409, 'The user is a member of the project already (change the role with PATCH instead)'],
  BILLING_DISABLED: [409, 'Billing through Stripe is not configured on this deployment (STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET)'],
  PROJECT_SUSPENDED: [403, "The project's marketing sends are suspended: its bounce or complaint rate passed the threshold"],
  NOT_SUSPENDED: [409, 'The project is not suspended'],
  IDEMPOTENCY_KEY_MISMATCH: [409, 'The Idempotency-Key was used with another body'],
  IDEMPOTENCY_KEY_IN_USE: [409, 'A request with this Idempotency-Key is still running'],
  BILLING_LIMIT_EXCEEDED: [402, 'The request would pass a billing cap of the project (emails or events this month, contacts); nothing was done'],
  PAYLOAD_TOO_LARGE: [413, 'The body (or an uploaded file) is over its limit'],
  ATTACHMENTS_TOO_LARGE: [413, 'The attachments of an email add up to more than MAX_ATTACHMENTS_SIZE'],
  MESSAGE_TOO_LARGE: [413, 'A whole message would be over MAX_MESSAGE_SIZE'],
  UNSUPPORTED_MEDIA_TYPE: [415, 'The body has a content type the route does not read'],
  VALIDATION_ERROR: [422, 'Validation failed; `errors` lists each field with its code'],
  RATE_LIMIT_EXCEEDED: [429, 'The project\'s request budget is spent (see `Retry-After`)'],
  TOO_MANY_ATTEMPTS: [429, 'Too many failed logins for the account or from the address, or too many account emails asked for (see `Retry-After`)'],
  INTERNAL_ERROR: [500, 'An unexpected error; the log has the details under the requestId'],
  SERVICE_UNAVAILABLE: [503, 'A dependency (Temporal, DNS, the database) is unavailable; nothing was done'],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface FieldError {
  field: string;
  message: string;
  code: string;
}

export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: ErrorCode,
    message: string,
    readonly options: { errors?: FieldError[]; suggestion?: string; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (message: string, suggestion?: string) =>
  new AppError(400, 'BAD_REQUEST', message, { suggestion });

export const validationError = (errors: FieldError[], message = 'Request validation failed') =>
  new AppError(422, 'VALIDATION_ERROR', message, { errors });

export const unauthorized = (code: ErrorCode, message: string, suggestion?: string) =>
  new AppError(401, code, message, { suggestion });

export const forbidden = (code: ErrorCode, message: string, suggestion?: string) =>
  new AppError(403, code, message, { suggestion });

export const notFound = (what: string) => new AppError(404, 'NOT_FOUND', `${what} not found`);

export const conflict = (code: ErrorCode, message: string, suggestion?: string) =>
  new AppError(409, code, message, { suggestion });

export const serviceUnavailable = (message: string) => new AppError(503, 'SERVICE_UNAVAILABLE', message);
