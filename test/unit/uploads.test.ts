import { loadConfig } from '../../domain/config';
import { ImageRejected, sniffImage } from '../../domain/uploads/image-sniff';
import { publicUploadUrl } from '../../domain/uploads/upload.service';
import { GIF_1X1, WEBP_1X1, makeJpeg, makePng } from '../helpers/images';

const ENV = { DATABASE_URL: 'postgres://unused/unit' };
const rejection = (bytes: Buffer) => {
  try {
    sniffImage(bytes);
  } catch (err) {
    if (err instanceof ImageRejected) return err.code;
    throw err;
  }
  return 'accepted';
};

describe('sniffImage: the type and size of an upload come from its bytes', () => {
  test.each([
    ['PNG', makePng(17, 9), { contentType: 'image/png', ext: 'png', width: 17, height: 9 }],
    ['JPEG', makeJpeg(1024, 768), { contentType: 'image/jpeg', ext: 'jpg', width: 1024, height: 768 }],
    ['GIF', GIF_1X1, { contentType: 'image/gif', ext: 'gif', width: 1, height: 1 }],
    ['WebP', WEBP_1X1, { contentType: 'image/webp', ext: 'webp', width: 1, height: 1 }],
  ])('%s is accepted with its size', (_name, bytes, expected) => {
    expect(sniffImage(bytes)).toEqual(expected);
  });

  const svg = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>';
  test.each([
    ['an empty file', Buffer.alloc(0), 'empty_file'],
    ['an SVG', Buffer.from(svg), 'svg_not_allowed'],
    ['an SVG with an XML prolog, a BOM and leading space', Buffer.from(`\uFEFF  <?xml version="1.0"?>\n<!-- x -->\n${svg}`), 'svg_not_allowed'],
    ['HTML', Buffer.from('<html><body><script>alert(1)</script></body></html>'), 'unsupported_image_type'],
    ['plain text', Buffer.from('hello'), 'unsupported_image_type'],
    ['a PDF', Buffer.from('%PDF-1.7\n'), 'unsupported_image_type'],
    ['a BMP', Buffer.from('BM' + '\0'.repeat(60), 'latin1'), 'unsupported_image_type'],
    ['a PNG signature followed by a script', Buffer.concat([makePng(1, 1).subarray(0, 8), Buffer.from('<script>alert(1)</script>')]), 'invalid_image'],
    ['a JPEG start without a frame header', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x04, 0x00, 0x00, 0xff, 0xd9]), 'invalid_image'],
    ['a RIFF file that is no WebP (WAV)', Buffer.concat([Buffer.from('RIFF\x24\0\0\0WAVEfmt ', 'latin1'), Buffer.alloc(32)]), 'unsupported_image_type'],
    ['a truncated GIF', Buffer.from('GIF89a', 'latin1'), 'invalid_image'],
    // Views that end inside a header, of memory that goes on with what reads as a size.
    ['a truncated GIF in a larger buffer', Buffer.from('GIF89a\x10\x00\x20\x00', 'latin1').subarray(0, 6), 'invalid_image'],
    ['a truncated PNG in a larger buffer', makePng(17, 9).subarray(0, 20), 'invalid_image'],
  ])('%s is refused: %s', (_name, bytes, code) => {
    expect(rejection(bytes)).toBe(code);
  });
});

describe('upload configuration', () => {
  test('defaults: 5 MB, local disk under .data/uploads, no S3', () => {
    const c = loadConfig(ENV).uploads;
    expect(c.maxBytes).toBe(5 * 1024 * 1024);
    expect(c.dir).toMatch(/[/\\]\.data[/\\]uploads$/);
    expect(c.s3).toBeUndefined();
  });

  test('S3: S3_BUCKET selects it; keys go in pairs; S3 settings without a bucket are refused; empty values mean unset', () => {
    const c = loadConfig({ ...ENV, S3_BUCKET: 'b', S3_ENDPOINT: 'http://127.0.0.1:9000', S3_FORCE_PATH_STYLE: 'true', S3_PUBLIC_URL: 'https://cdn.example.com/b/', UPLOADS_MAX_SIZE: '2mb' }).uploads;
    expect(c).toMatchObject({ maxBytes: 2 * 1024 * 1024, s3: { bucket: 'b', endpoint: 'http://127.0.0.1:9000', region: 'us-east-1', forcePathStyle: true, publicUrl: 'https://cdn.example.com/b' } });
    expect(() => loadConfig({ ...ENV, S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'k' })).toThrow(/S3_SECRET_ACCESS_KEY: S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together/);
    expect(() => loadConfig({ ...ENV, S3_ENDPOINT: 'http://127.0.0.1:9000' })).toThrow(/S3_ENDPOINT: has no effect without S3_BUCKET/);
    expect(() => loadConfig({ ...ENV, UPLOADS_MAX_SIZE: '101mb' })).toThrow(/UPLOADS_MAX_SIZE/);
    expect(loadConfig({ ...ENV, S3_BUCKET: '', S3_ENDPOINT: '' }).uploads.s3).toBeUndefined();
  });

  test('public URLs: the API route, or the bucket when S3_PUBLIC_URL is set', () => {
    const image = { sha256: 'a'.repeat(64), contentType: 'image/webp' as const };
    expect(publicUploadUrl(loadConfig({ ...ENV, PUBLIC_URL: 'https://mail.example.com/' }), image)).toBe(`https://mail.example.com/uploads/files/${'a'.repeat(64)}.webp`);
    expect(publicUploadUrl(loadConfig({ ...ENV, S3_BUCKET: 'b', S3_PUBLIC_URL: 'https://cdn.example.com' }), image)).toBe(`https://cdn.example.com/uploads/${'a'.repeat(64)}.webp`);
  });
});
