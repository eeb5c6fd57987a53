import { loadConfig } from '../../domain/config';

// Account emails, throttles and OAuth providers as the environment sets them (README › Configuration).
const base = { DATABASE_URL: 'postgres://localhost/x', NODE_ENV: 'test' };

describe('SYSTEM_EMAIL_FROM', () => {
  test.each([
    ['ops@example.com', { address: 'ops@example.com' }],
    ['Ops <ops@example.com>', { name: 'Ops', address: 'ops@example.com' }],
    ['"Ops Team" <ops@example.com>', { name: 'Ops Team', address: 'ops@example.com' }],
    ['  <ops@example.com>  ', { address: 'ops@example.com' }],
  ])('%s is parsed into name and address', (value, expected) => {
    expect(loadConfig({ ...base, SYSTEM_EMAIL_FROM: value }).accounts.systemFrom).toEqual(expected);
  });

  test.each(['not an address', 'Ops <not an address>', 'Ops <ops@example.com', 'a@b@c'])('%s is refused, naming the variable', (value) => {
    expect(() => loadConfig({ ...base, SYSTEM_EMAIL_FROM: value })).toThrow(/SYSTEM_EMAIL_FROM/);
  });

  test('the default is no-reply@ the public host when it is a domain name, else a development address', () => {
    expect(loadConfig({ ...base, PUBLIC_URL: 'https://mail.example.com' }).accounts.systemFrom).toEqual({ name: 'Mailwright', address: 'no-reply@mail.example.com' });
    expect(loadConfig({ ...base, PUBLIC_URL: 'http://127.0.0.1:3000' }).accounts.systemFrom).toEqual({ name: 'Mailwright', address: 'no-reply@mailwright.test' });
    expect(loadConfig(base).accounts.systemFrom.address).toBe('no-reply@mailwright.test'); // localhost
    expect(loadConfig({ ...base, SYSTEM_EMAIL_FROM: '' }).accounts.systemFrom.address).toBe('no-reply@mailwright.test'); // empty is unset
  });
});

test('token lifetimes and throttles default to the documented values', () => {
  const { accounts } = loadConfig(base);
  expect(accounts.verificationTtlMs).toBe(48 * 3_600_000);
  expect(accounts.resetTtlMs).toBe(3_600_000);
  expect(accounts.throttle).toEqual({ windowMs: 15 * 60_000, loginsPerAccount: 10, loginsPerIp: 100, emailsPerAddress: 3, emailsPerIp: 30 });
  expect(() => loadConfig({ ...base, PASSWORD_RESET_TTL: '10s' })).toThrow(/PASSWORD_RESET_TTL/);
  expect(() => loadConfig({ ...base, LOGIN_MAX_FAILURES_PER_ACCOUNT: '0' })).toThrow(/LOGIN_MAX_FAILURES_PER_ACCOUNT/);
});

describe('OAuth providers', () => {
  test('a provider is configured only with both its client id and secret; one without the other is refused', () => {
    expect(loadConfig(base).accounts.oauth).toEqual({ github: undefined, google: undefined });
    expect(() => loadConfig({ ...base, GITHUB_CLIENT_ID: 'id' })).toThrow(/GITHUB_CLIENT_SECRET/);
    expect(() => loadConfig({ ...base, GOOGLE_CLIENT_SECRET: 'secret' })).toThrow(/GOOGLE_CLIENT_ID/);
    expect(loadConfig({ ...base, GITHUB_CLIENT_ID: '', GITHUB_CLIENT_SECRET: '' }).accounts.oauth.github).toBeUndefined();
  });

  test("endpoints default to the providers' own and can point elsewhere (GitHub Enterprise, a test double)", () => {
    const both = { ...base, GITHUB_CLIENT_ID: 'gh', GITHUB_CLIENT_SECRET: 's1', GOOGLE_CLIENT_ID: 'gg', GOOGLE_CLIENT_SECRET: 's2' };
    const { github, google } = loadConfig(both).accounts.oauth;
    expect(github).toEqual({ clientId: 'gh', clientSecret: 's1', webUrl: 'https://github.com', apiUrl: 'https://api.github.com' });
    expect(google).toMatchObject({ authorizeUrl: 'https://accounts.google.com/o/oauth2/v2/auth', tokenUrl: 'https://oauth2.googleapis.com/token' });
    const ghe = loadConfig({ ...both, GITHUB_URL: 'https://ghe.example.com/', GITHUB_API_URL: 'https://ghe.example.com/api/v3' }).accounts.oauth.github;
    expect(ghe).toMatchObject({ webUrl: 'https://ghe.example.com', apiUrl: 'https://ghe.example.com/api/v3' });
    expect(() => loadConfig({ ...both, GOOGLE_TOKEN_URL: 'not a url' })).toThrow(/GOOGLE_TOKEN_URL/);
  });
});
