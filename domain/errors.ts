/** One error vocabulary for the whole service; the API's error middleware renders it as SPEC.md's envelope. */
export interface FieldError {
  field: string;
  message: string;
  code: string;
}

export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
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

export const unauthorized = (code: string, message: string, suggestion?: string) =>
  new AppError(401, code, message, { suggestion });

export const forbidden = (code: string, message: string, suggestion?: string) =>
  new AppError(403, code, message, { suggestion });

export const notFound = (what: string) => new AppError(404, 'NOT_FOUND', `${what} not found`);

export const conflict = (code: string, message: string, suggestion?: string) =>
  new AppError(409, code, message, { suggestion });

export const serviceUnavailable = (message: string) => new AppError(503, 'SERVICE_UNAVAILABLE', message);
