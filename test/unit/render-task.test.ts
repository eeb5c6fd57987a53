import { randomUUID } from 'node:crypto';
import { renderPacked, unpack, type ContactDataReader } from '../../domain/campaigns/render-task';
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

describe('renderPacked reading its contacts\' data', () => {
  test("data left out is read for the batch at once; a contact gone since its chunk was read is tried again later", async () => {
    const kept = { id: randomUUID(), contactId: randomUUID(), email: `r-${randomUUID()}@example.com` };
    const gone = { id: randomUUID(), contactId: randomUUID(), email: `r-${randomUUID()}@example.com` };
    const given = recipient({ n: 1, big: 'given' });
    const reads: string[][] = [];
    const reader = {
      read: async (ids: string[]) => {
        reads.push(ids);
        return new Map([[kept.contactId, JSON.stringify({ n: 1, big: 'from the database' })]]);
      },
    } as unknown as ContactDataReader;
    const messages = unpack(await renderPacked({ key: randomUUID(), spec, recipients: [kept, gone, given] }, reader));
    // One read, for the two recipients without data.
    expect(reads).toEqual([[kept.contactId, gone.contactId]]);
    const wire = (m: (typeof messages)[number]) => ('wire' in m ? m.wire.toString() : '');
    expect(wire(messages[0]!)).toContain('<p>from the databasedone</p>');
    expect(messages[1]).toEqual({ id: gone.id, retry: expect.stringMatching(/deleted/) });
    expect(wire(messages[2]!)).toContain('<p>givendone</p>');
  });
});
