import { randomUUID } from 'node:crypto';
import { UUID_RE, uuidBytes, uuidString, uuidv7 } from '../../domain/ids';

describe('uuidBytes', () => {
  test('the 16 bytes of the hex digits, in either case; uuidString gives the id back', () => {
    for (let i = 0; i < 200; i++) {
      const id = i % 2 ? randomUUID() : uuidv7();
      for (const spelled of [id, id.toUpperCase()]) {
        const bytes = uuidBytes(spelled);
        expect(bytes.equals(Buffer.from(id.replace(/-/g, ''), 'hex'))).toBe(true);
        expect(uuidString(bytes)).toBe(id);
      }
    }
  });

  test('refuses exactly what UUID_RE refuses: every one-character change of a UUID, and other shapes', () => {
    const id = randomUUID();
    const tried: string[] = ['', id.slice(1), `${id}0`, id.replace(/-/g, ''), `{${id.slice(1, -1)}}`, ` ${id.slice(1)}`];
    for (let i = 0; i < id.length; i++) {
      for (const c of ['-', 'g', 'G', 'x', ' ', '0', 'F', 'é', '\0', '٣']) tried.push(id.slice(0, i) + c + id.slice(i + 1));
    }
    for (const s of tried) {
      if (UUID_RE.test(s)) expect(uuidBytes(s).equals(Buffer.from(s.replace(/-/g, ''), 'hex'))).toBe(true);
      else expect(() => uuidBytes(s)).toThrow(`Not a UUID: ${s}`);
    }
    expect(() => uuidBytes(undefined as unknown as string)).toThrow(/Not a UUID/);
  });
});
