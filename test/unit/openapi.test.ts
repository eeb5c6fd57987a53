import { buildRoutes } from '../../api/app';
import { openApiDocument } from '../../api/system/routes';
import { loadConfig } from '../../domain/config';
import type { ApiDeps } from '../../api/context';
import { emailString } from '../../api/validation';
import { EventName } from '../../api/track/schema';
import { SendBody } from '../../api/send/schema';
import { customFieldName } from '../../domain/contacts/contact-fields';
import { checkDomainName } from '../../domain/domains/hostname';
import { decodeCursor, toPage } from '../../domain/pagination';
import { uuidv7 } from '../../domain/ids';

/** The OpenAPI document agrees with what the shared middleware answers (issue 12, finding 7). Built without services. */
const deps = { config: loadConfig({ DATABASE_URL: 'postgres://unused/openapi', NODE_ENV: 'test' }) } as ApiDeps;
const doc = openApiDocument(buildRoutes(deps), deps) as {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown> };
};

interface Operation {
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string }[];
  requestBody?: { required?: boolean; content: Record<string, unknown> };
  responses: Record<string, { content?: Record<string, unknown> }>;
}

const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ id: `${method.toUpperCase()} ${path}`, op })));

function patterns(node: unknown, at = ''): { at: string; pattern: string }[] {
  if (Array.isArray(node)) return node.flatMap((n, i) => patterns(n, `${at}/${i}`));
  if (!node || typeof node !== 'object') return [];
  return Object.entries(node).flatMap(([k, v]) => (k === 'pattern' && typeof v === 'string' ? [{ at, pattern: v }] : patterns(v, `${at}/${k}`)));
}

test('the document has every operation (70 and more)', () => {
  expect(operations.length).toBeGreaterThanOrEqual(70);
});

test('patterns are portable: no JavaScript flags or \\p{} classes in the text, and each compiles without flags', () => {
  const found = patterns(doc);
  expect(found.length).toBeGreaterThan(3);
  for (const { at, pattern } of found) {
    expect({ at, pattern }).toEqual({ at, pattern: expect.not.stringMatching(/\/[a-z]*$|\\p\{/) });
    expect(() => new RegExp(pattern)).not.toThrow();
  }
});

test('every operation with a JSON, form or multipart body documents 400 (malformed body), 413 and 422 as JSON', () => {
  const withBody = operations.filter(({ op }) => op.requestBody && !op.requestBody.content['text/plain']);
  expect(withBody.length).toBeGreaterThan(20);
  for (const { id, op } of withBody) {
    for (const status of ['400', '413', '422']) {
      expect({ id, status, json: Boolean(op.responses[status]?.content?.['application/json']) }).toEqual({ id, status, json: true });
    }
  }
});

test('every operation with path or query parameters documents 422', () => {
  for (const { id, op } of operations.filter(({ op }) => op.parameters?.length)) {
    expect({ id, has422: Boolean(op.responses['422']) }).toEqual({ id, has422: true });
  }
});

test('API-key operations document 401, 403 and 429; dashboard operations 401', () => {
  for (const { id, op } of operations) {
    const schemes = (op.security ?? []).flatMap((s) => Object.keys(s));
    const expected = schemes.includes('secretKey') ? ['401', '403', '429'] : schemes.includes('sessionCookie') ? ['401'] : [];
    for (const status of expected) expect({ id, status, documented: Boolean(op.responses[status]) }).toEqual({ id, status, documented: true });
  }
});

test("POST /manage/{token}'s 400 is an HTML page or the JSON envelope (a malformed form)", () => {
  const content = doc.paths['/manage/{token}']!.post!.responses['400']!.content!;
  expect(Object.keys(content).sort()).toEqual(['application/json', 'text/html']);
});

test('a body that may be empty is optional; one with required fields is required', () => {
  expect(doc.paths['/contacts/{id}']!.patch!.requestBody!.required).toBe(false);
  expect(doc.paths['/templates/{id}']!.patch!.requestBody!.required).toBe(false);
  expect(doc.paths['/contacts']!.post!.requestBody!.required).toBe(true);
  expect(doc.paths['/v1/send']!.post!.requestBody!.required).toBe(true);
});

/** A published pattern and the validator behind it agree on every sample (issue 12: the document must not contradict the server). */
describe('published patterns say what the validators do', () => {
  const schemaOf = (name: string) => doc.components.schemas[name] as { properties: Record<string, { pattern?: string }> };
  const agree = (pattern: string | undefined, accepts: (s: string) => boolean, samples: string[]) => {
    expect(pattern).toBeDefined();
    const re = new RegExp(pattern!);
    for (const s of samples) expect({ s, pattern: re.test(s) }).toEqual({ s, pattern: accepts(s) });
  };

  test('email addresses', () => {
    const pattern = schemaOf('CreateContactRequest').properties.email!.pattern;
    agree(pattern, (s) => emailString.safeParse(s).success, [
      'a@example.com', ' a@example.com ', 'first.last+tag@sub.example.co', '|`b@k3z.dz.org', 'kd~@vnxd.org', 'a@b', 'a@b.c', 'a..b@example.com', '@example.com', 'a@-x.com', 'A@EXAMPLE.COM',
    ]);
  });

  test('trackable event names', () => {
    const pattern = schemaOf('TrackRequest').properties.event!.pattern;
    agree(pattern, (s) => EventName.safeParse(s).success, ['signup', 'Email.open', 'email', 'contact.subscribed', 'contact.subscribedX', 'SEGMENT.vip.Entry', 'segment.a.b.entry', ' x', 'x ', 'a\u0001b', 'a'.repeat(200)]);
  });

  test('custom field names in paths', () => {
    const pattern = (doc.paths['/contacts/fields/{field}']!.delete!.parameters![0] as unknown as { schema: { pattern: string } }).schema.pattern;
    const accepts = (s: string) => {
      try {
        customFieldName(s);
        return true;
      } catch {
        return false;
      }
    };
    agree(pattern, accepts, ['plan', 'data.plan', 'data.', 'email', 'data.email', 'emailx', 'id', 'data.data.', 'a'.repeat(200), 'a'.repeat(201), `data.${'a'.repeat(200)}`]);
  });

  test('sender domain names', () => {
    const pattern = schemaOf('CreateDomainRequest').properties.domain!.pattern;
    agree(pattern, (s) => checkDomainName(s).ok, ['example.com', 'Mail.Example.COM.', ' example.com ', 'a.b', 'localhost', '1.2.3.4', 'xn--bcher-kva.ch', '-a.com', 'a..com', 'a_b.com', 'a.c0m', `${'a'.repeat(64)}.com`, 'a.xn--']);
  });

  const parameter = (path: string, name: string) =>
    (doc.paths[path]!.get!.parameters as unknown as { name: string; schema: { pattern?: string } }[]).find((p) => p.name === name)!.schema;

  test('id-list cursors: every cursor a page gives matches, and every string that matches is a position', () => {
    const pattern = parameter('/contacts', 'cursor').pattern!;
    for (const path of ['/templates', '/events', '/campaigns', '/workflows', '/uploads', '/workflows/{id}/executions']) expect(parameter(path, 'cursor').pattern).toBe(pattern);
    const re = new RegExp(pattern);
    const decodes = (s: string) => {
      try {
        decodeCursor(s);
        return true;
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 200; i++) {
      const id = uuidv7();
      const cursor = toPage([{ id }, { id: uuidv7() }], 1, 2).cursor!;
      expect(re.test(cursor)).toBe(true);
      expect(decodeCursor(cursor)).toBe(id);
    }
    agree(pattern, decodes, ['', 'AAAAAAAAAAAAAAAAAAAAAA', '______________________w', '______________________', 'AZOlsnw-eryN7wEjRWeJqw', 'AZOlsnw-eryN7wEjRWeJqB', 'AZOlsnw-eryN7wEjRWeJq', 'AZOlsnw+eryN7wEjRWeJqw', 'garbage']);
    // The earlier form is still read (a walk begun before an upgrade goes on), though the document gives only the current one.
    const earlier = Buffer.from('v1:0193a5b2-7c3e-7abc-8def-0123456789ab').toString('base64url');
    expect(re.test(earlier)).toBe(false);
    expect(decodeCursor(earlier)).toBe('0193a5b2-7c3e-7abc-8def-0123456789ab');
  });

  test('field-value cursors: the pattern is exactly the encodings of `o:<1 to 9 digits>`', () => {
    const pattern = parameter('/contacts/fields/{field}/values', 'cursor').pattern!;
    const re = new RegExp(pattern);
    const offset = (n: string) => Buffer.from(`o:${n}`).toString('base64url');
    for (let n = 0; n < 10_000; n++) expect(re.test(offset(String(n)))).toBe(true);
    for (const n of ['999999999', '000000000', '123456789', '98765432', '07', '1000000', '40000', '5']) expect(re.test(offset(n))).toBe(true);
    // What the route's decoder reads (`o:` and 1 to 9 digits), over strings near the pattern: one character changed,
    // dropped or added at every position of real cursors.
    const reads = (s: string) => s === '' || (/^[A-Za-z0-9_-]*$/.test(s) && s.length % 4 !== 1 && /^o:\d{1,9}$/.test(Buffer.from(s, 'base64url').toString('latin1')) && Buffer.from(Buffer.from(s, 'base64url').toString('latin1'), 'latin1').toString('base64url') === s);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const samples = new Set<string>(['', offset('1234567890'), offset('-1'), offset('1a'), 'bzo', 'bzoxMDAwMDAwMDA=']);
    for (const n of ['7', '42', '123', '1234', '12345', '123456789']) {
      const c = offset(n);
      for (let i = 0; i <= c.length; i++) {
        samples.add(c.slice(0, i) + c.slice(i + 1));
        for (const ch of alphabet) {
          samples.add(c.slice(0, i) + ch + c.slice(i + 1));
          samples.add(c.slice(0, i) + ch + c.slice(i));
        }
      }
    }
    agree(pattern, reads, [...samples]);
  });

  test('base64 attachment content', () => {
    const pattern = (doc.components.schemas.Attachment as { properties: { content: { pattern: string } } }).properties.content.pattern;
    const accepts = (s: string) => SendBody.shape.attachments.unwrap().element.safeParse({ filename: 'f', content: s }).success;
    agree(pattern, accepts, ['QUJD', 'QUI=', 'QQ==', 'Q Q = =', 'QUJDRA==\n', 'QQ=', 'Q===', 'QUJD\nRA==', '!!!!', 'QUJDR']);
  });
});
