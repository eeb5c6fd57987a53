import { stackEnv } from '../stack-env';

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export interface RequestOptions {
  key?: string;
  cookie?: string;
  body?: unknown;
  /** Sent as is, instead of JSON-encoding `body`. */
  raw?: string | Buffer;
  headers?: Record<string, string>;
  baseUrl?: string;
}

/** Calls the running API over HTTP, as a client would. */
export async function api<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  if (opts.cookie) headers.cookie = opts.cookie;
  let payload: string | Buffer | undefined;
  if (opts.raw !== undefined) payload = opts.raw;
  else if (opts.body !== undefined) payload = JSON.stringify(opts.body);
  if (payload !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(`${opts.baseUrl ?? stackEnv().apiUrl}${path}`, { method, headers, body: payload });
  const text = await res.text();
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status: res.status, body, headers: res.headers, text };
}

/** The session cookie from a login/signup response, as a Cookie header value. */
export function sessionCookie(res: ApiResponse): string {
  const setCookie = res.headers.getSetCookie().find((c) => c.startsWith('mailwright_session='));
  if (!setCookie) throw new Error(`no session cookie in response (${res.status}): ${res.text}`);
  return setCookie.split(';')[0]!;
}
