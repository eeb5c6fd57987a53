import { splitContactData, RESERVED_DATA_KEYS } from '../../domain/contacts/contact-data';

describe('contact data rules (SPEC.md › Contact)', () => {
  test.each([
    ['rule 1: primitives are stored', { a: 'x', n: 2, b: false }, { a: 'x', n: 2, b: false }, [], {}],
    ['rule 1: plain objects are stored', { address: { city: 'Oslo' } }, { address: { city: 'Oslo' } }, [], {}],
    ['arrays are stored', { tags: ['a', 'b'] }, { tags: ['a', 'b'] }, [], {}],
    ['rule 2: null deletes', { plan: null }, {}, ['plan'], {}],
    ['rule 3: empty string is ignored', { plan: '' }, {}, [], {}],
    ['rule 4: non-persistent values are for this call only', { code: { value: 42, persistent: false } }, {}, [], { code: 42 }],
    ['a persistent wrapper stores its value', { code: { value: 42, persistent: true } }, { code: 42 }, [], {}],
    ['an object with more keys than value/persistent is data', { x: { value: 1, persistent: false, other: 2 } }, { x: { value: 1, persistent: false, other: 2 } }, [], {}],
  ])('%s', (_name, input, set, unset, transient) => {
    expect(splitContactData(input as Record<string, unknown>)).toEqual({ set, unset, transient });
  });

  test('rule 5: every reserved key is dropped silently', () => {
    const input = Object.fromEntries([...RESERVED_DATA_KEYS].map((k) => [k, 'v']));
    expect(splitContactData({ ...input, kept: 1 })).toEqual({ set: { kept: 1 }, unset: [], transient: {} });
    expect([...RESERVED_DATA_KEYS].sort()).toEqual(
      ['email', 'id', 'mailwright_email', 'mailwright_id', 'manageUrl', 'subscribeUrl', 'unsubscribeUrl'].sort(),
    );
  });
});
