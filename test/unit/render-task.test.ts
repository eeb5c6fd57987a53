import { randomUUID } from 'node:crypto';
import { renderPacked, unpack } from '../../domain/campaigns/render-task';
import { compileBody, compiledMjml, renderCounters } from '../../domain/rendering/render';
import type { MessageInput } from '../../domain/compose/composer';

const spec: MessageInput = {
  // A loop the recipient's data sizes: `n` of 1 renders at once; `n` of 20,000 is 400 million steps, far past the
  // one-second budget of a render. A `big` string makes the rendered body larger than it may be.
  content: { subject: 'Hi', body: '<p>{% for a in (1..n) %}{% for b in (1..n) %}{% endfor %}{% endfor %}{{ big }}done</p>' },
  kind: 'MARKETING',
  templateId: null,
  from: { email: 'news@example.com', name: 'News' },
  replyTo: null,
  tracking: { opens: false, clicks: false },
  links: { publicUrl: 'https://mail.example.com', appSecret: 'unit-test-app-secret-0123456789-abcdef' },
};

const recipient = (data: Record<string, unknown>) => ({ id: randomUUID(), contactId: randomUUID(), email: `r-${randomUUID()}@example.com`, data });

describe('renderPacked (a campaign batch)', () => {
  test('a render out of time is tried again later; a recipient whose message cannot be made is invalid; the rest are rendered', async () => {
    const slow = recipient({ n: 20_000 });
    const huge = recipient({ n: 1, big: 'x'.repeat(6 * 1024 * 1024) });
    const fine = recipient({ n: 1 });
    const messages = unpack(await renderPacked({ key: randomUUID(), spec, recipients: [slow, huge, fine] }));
    expect(messages[0]).toEqual({ id: slow.id, retry: expect.stringMatching(/render limit exceeded/) });
    expect(messages[1]).toEqual({ id: huge.id, invalid: expect.stringMatching(/larger than/) });
    const sent = messages[2]!;
    expect('wire' in sent && sent.wire.toString()).toMatch(/<p>done<\/p>\r\n[\s\S]*\r\n\.\r\n$/);
  }, 30_000);
});

describe('renderPacked with an MJML body compiled by the main thread', () => {
  const mjml = (marker: string) => `<mjml><mj-body><mj-section><mj-column><mj-text>${marker} {{ first }}</mj-text></mj-column></mj-section></mj-body></mjml>`;

  test('the HTML handed over is the one rendered, and the thread compiles no MJML', async () => {
    const source = mjml(`unit-${randomUUID()}`);
    const before = renderCounters().mjmlCompiles;
    const messages = unpack(
      await renderPacked({ key: randomUUID(), spec: { ...spec, content: { subject: 'Hi', body: source } }, mjmlHtml: '<p>primed for {{ first }}</p>', recipients: [recipient({ first: 'Ada' })] }),
    );
    const sent = messages[0]!;
    expect('wire' in sent && sent.wire.toString()).toContain('<p>primed for Ada</p>');
    expect(renderCounters().mjmlCompiles).toBe(before);
  });

  test('compiledMjml gives what compileBody compiles the same source to', async () => {
    const source = mjml(`unit-${randomUUID()}`);
    const html = await compiledMjml(source);
    expect(html).toContain('<table');
    expect((await compileBody(source)).html).toBe(html);
  });
});
