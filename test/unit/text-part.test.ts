import { htmlToText } from '../../domain/rendering/render';

/**
 * html-to-text splits words with a regex whose backtracking runs on the call stack: a body with a "word" of
 * megabytes overflowed it when little stack was left (it failed once in the full suite). The text part then comes
 * from the text nodes, and the send goes on.
 */
test('a 5 MB word gets a text part at any stack depth, never a RangeError', () => {
  const big = `<p>Hello <b>you</b> ${'z'.repeat(5_000_000)}</p><style>.x{}</style>`;
  for (const depth of [0, 2_000, 4_000, 6_000, 8_000]) {
    const deep = (n: number): string => (n === 0 ? htmlToText(big) : `${deep(n - 1)}`);
    const text = deep(depth).replace(/\s+/g, ' ');
    expect({ depth, start: text.slice(0, 10), length: text.length }).toEqual({ depth, start: 'Hello you ', length: 10 + 5_000_000 });
  }
});

test('ordinary HTML keeps its formatted text part (links as text [url], images skipped)', () => {
  expect(htmlToText('<p>Read <a href="https://x.example/a">the post</a><img src="cid:logo"></p>')).toBe('Read the post [https://x.example/a]');
});
