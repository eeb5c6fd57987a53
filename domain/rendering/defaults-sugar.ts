/**
 * `{{ name ?? Fallback }}` and `{{ name ?? "Dear customer" }}` are sugar for `{{ name | default: "…" }}`.
 *
 * A pre-pass over the source that follows Liquid's own tokenizer: only `{{ … }}` output tags are rewritten (never
 * `{% … %}` tags, `{% raw %}` blocks or plain text), and a `??` inside a quoted string is not an operator. The
 * fallback is literal text: a quoted string as written, or bare text up to the next `|` (so further filters still
 * apply: `{{ name ?? friend | capitalize }}`). Like `default`, it replaces nil, false and empty values.
 */
export function expandDefaults(source: string): string {
  if (!source.includes('??')) return source;
  let out = '';
  let i = 0;
  for (;;) {
    const output = source.indexOf('{{', i);
    const tag = source.indexOf('{%', i);
    if (output < 0 && tag < 0) break;
    if (tag >= 0 && (output < 0 || tag < output)) {
      // Tags end at the first `%}` (Liquid does not honour quotes there); a raw block runs to its endraw.
      const end = source.indexOf('%}', tag + 2);
      if (end < 0) break; // unterminated: Liquid reports it
      let next = end + 2;
      if (/^\{%-?\s*raw\s*-?%\}$/.test(source.slice(tag, next))) {
        const endraw = /\{%-?\s*endraw\s*-?%\}/g;
        endraw.lastIndex = next;
        const m = endraw.exec(source);
        next = m ? m.index + m[0].length : source.length;
      }
      out += source.slice(i, next);
      i = next;
      continue;
    }
    const end = findOutputEnd(source, output + 2);
    if (end < 0) break;
    out += source.slice(i, output) + rewriteOutput(source.slice(output, end));
    i = end;
  }
  return out + source.slice(i);
}

/** Index just past the `}}` closing the output tag whose body starts at `from`, skipping quoted strings; -1 if none. */
function findOutputEnd(s: string, from: number): number {
  for (let p = from; p < s.length; p++) {
    const c = s[p];
    if (c === '"' || c === "'") {
      p = skipQuoted(s, p);
      if (p < 0) return -1;
    } else if (c === '}' && s[p + 1] === '}') {
      return p + 2;
    }
  }
  return -1;
}

/** Index of the quote closing the string that opens at `start` (backslash escapes the next character); -1 if none. */
function skipQuoted(s: string, start: number): number {
  const quote = s[start];
  for (let p = start + 1; p < s.length; p++) {
    if (s[p] === '\\') p++;
    else if (s[p] === quote) return p;
  }
  return -1;
}

/** Index of the first `target` at or after `from` that is outside quoted strings; -1 if none. */
function indexOutsideQuotes(s: string, target: string, from = 0): number {
  for (let p = from; p < s.length; p++) {
    const c = s[p];
    if (c === '"' || c === "'") {
      p = skipQuoted(s, p);
      if (p < 0) return -1;
    } else if (s.startsWith(target, p)) {
      return p;
    }
  }
  return -1;
}

function rewriteOutput(tag: string): string {
  const m = /^(\{\{-?)([\s\S]*?)(-?\}\})$/.exec(tag);
  if (!m) return tag;
  const [, open, inner, close] = m as unknown as [string, string, string, string];
  const op = indexOutsideQuotes(inner, '??');
  if (op < 0) return tag;
  const expression = inner.slice(0, op).trim();
  if (!expression) return tag;
  const rest = inner.slice(op + 2).trimStart();
  let literal: string;
  let after: string;
  if (rest.startsWith('"') || rest.startsWith("'")) {
    const closeQuote = skipQuoted(rest, 0);
    if (closeQuote < 0) return tag;
    literal = rest.slice(0, closeQuote + 1);
    after = rest.slice(closeQuote + 1).trim();
  } else {
    const pipe = indexOutsideQuotes(rest, '|');
    const bare = (pipe < 0 ? rest : rest.slice(0, pipe)).trim();
    literal = `"${bare.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    after = pipe < 0 ? '' : rest.slice(pipe).trim();
  }
  // Anything but more filters after the fallback is not this sugar: leave it for Liquid to judge.
  if (after && !after.startsWith('|')) return tag;
  return `${open} ${expression} | default: ${literal}${after ? ` ${after}` : ''} ${close}`;
}
